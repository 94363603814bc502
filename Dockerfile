FROM python:3.11-slim
WORKDIR /app
RUN apt-get update && apt-get install -y --no-install-recommends gcc libgomp1 && rm -rf /var/lib/apt/lists/*
COPY pyproject.toml README.md ./
COPY rag_service rag_service
COPY ingest ingest
COPY configs configs
COPY examples examples
# CPU-only torch for the sentence-transformers backend.
RUN pip install --no-cache-dir --extra-index-url https://download.pytorch.org/whl/cpu .
EXPOSE 8000
CMD ["rag-serve", "--host", "0.0.0.0", "--port", "8000"]
