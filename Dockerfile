FROM python:3.11-slim
WORKDIR /app
RUN apt-get update && apt-get install -y --no-install-recommends gcc libgomp1 && rm -rf /var/lib/apt/lists/*
COPY pyproject.toml README.md ./
COPY rag_core rag_core
COPY rag_service rag_service
COPY ingest ingest
COPY configs configs
COPY examples examples
# Point PIP_EXTRA_INDEX_URL at a CPU-only torch index to keep the image small.
ARG PIP_EXTRA_INDEX_URL=""
RUN pip install --no-cache-dir .
EXPOSE 8000
CMD ["rag-serve", "--host", "0.0.0.0", "--port", "8000"]
