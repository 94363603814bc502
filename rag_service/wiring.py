"""Builds the stages and clients named by the settings (the app factory's one place for choices)."""

from __future__ import annotations

from dataclasses import dataclass, field

from rag_service.embedding import Embedder, make_embedder
from rag_service.lexical import warm_up
from rag_service.llm import ChatClient, ExtractiveGenerator, Generator, LLMGenerator
from rag_service.memory import make_memory
from rag_service.pipeline import ChatPipeline, Stages
from rag_service.retrieval import Retriever
from rag_service.rewrite import NoRewriter, Rewriter
from rag_service.settings import Settings
from rag_service.store import MemoryStore, SessionStore
from rag_service.summary import ExtractiveSummarizer, LLMSummarizer, Summarizer
from rag_service.tokens import TokenCounter, make_counter
from rag_service.vectorstore import VectorIndex


@dataclass
class Services:
    settings: Settings
    counter: TokenCounter
    embedder: Embedder
    index: VectorIndex
    store: SessionStore
    pipeline: ChatPipeline
    clients: list[ChatClient] = field(default_factory=list)

    async def close(self) -> None:
        await self.pipeline.drain()
        for client in self.clients:
            await client.close()
        await self.store.close()
        self.index.close()


def build_store(settings: Settings) -> SessionStore:
    return MemoryStore(settings.session.ttl_s, settings.session.lock_timeout_s, settings.session.on_busy)


def build_generator(settings: Settings, clients: list[ChatClient]) -> Generator:
    if settings.llm.base_url:
        client = ChatClient(settings.llm)
        clients.append(client)
        return LLMGenerator(client)
    p = settings.prompt
    return ExtractiveGenerator(p.extractive_sentences, p.extractive_intro, p.extractive_empty)


def build_summarizer(settings: Settings, counter: TokenCounter, clients: list[ChatClient]) -> Summarizer:
    endpoint = settings.summary_endpoint()
    if endpoint.base_url:
        client = ChatClient(endpoint)
        clients.append(client)
        return LLMSummarizer(client, settings.memory)
    return ExtractiveSummarizer(counter, settings.memory)


def build_rewriter(settings: Settings) -> Rewriter:
    return NoRewriter()


def build_services(
    settings: Settings,
    *,
    counter: TokenCounter | None = None,
    embedder: Embedder | None = None,
    index: VectorIndex | None = None,
) -> Services:
    """Clients may be handed in to share them (tests and benchmarks reuse one index across apps)."""
    counter = counter or make_counter(settings.tokens)
    embedder = embedder or make_embedder(settings.embedding)
    index = index or VectorIndex.open(settings.qdrant, embedder.dim, embedder.name)
    warm_up()
    clients: list[ChatClient] = []
    store = build_store(settings)
    stages = Stages(
        settings=settings,
        counter=counter,
        retriever=Retriever(index, embedder, settings.retrieval),
        store=store,
        memory=make_memory(settings.memory, settings.budget.history_budget, settings.tokens.per_message_overhead),
        rewriter=build_rewriter(settings),
        generator=build_generator(settings, clients),
        summarizer=build_summarizer(settings, counter, clients),
    )
    return Services(settings, counter, embedder, index, store, ChatPipeline(stages), clients)
