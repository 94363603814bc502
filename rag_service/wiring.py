"""Builds the stages and clients named by the settings (the app factory's one place for choices).

`Services` is everything the routes use, built once per app and handed to them through FastAPI's
dependencies (rag_service.api.deps): nothing here is global."""

from __future__ import annotations

from dataclasses import dataclass, field

from rag_core.documents.faq import faq_collection
from rag_core.embedding import CachedQueryEmbedder, Embedder, make_embedder
from rag_core.lexical import warm_up
from rag_core.settings import Settings
from rag_core.tokens import TokenCounter, make_counter
from rag_core.vectorstore import VectorIndex, open_index
from rag_service.annotations import Annotations
from rag_service.auth import ApiKeys, RateLimiter
from rag_service.bridge import Bridges, glosses
from rag_service.extractive import ExtractiveGenerator
from rag_service.faq import FaqMatcher
from rag_service.feedback import FeedbackStore
from rag_service.intents.stage import IntentStage, index_probe
from rag_service.intents.switch import DEFAULT_STANDALONE_QUANTILE, SwitchModel
from rag_service.library import Library
from rag_service.llm import ChatClient, Generator, LLMGenerator
from rag_service.memory import make_memory
from rag_service.metrics import Metrics
from rag_service.pipeline import ChatPipeline, Stages
from rag_service.privacy import Masker
from rag_service.retrieval import Retriever
from rag_service.rewrite import LLMRewriter, NoRewriter, Rewriter, RuleRewriter, rewrite_endpoint
from rag_service.sessions.archive import Archive
from rag_service.sessions.build import build_store, open_archive, write_behind
from rag_service.sessions.interface import SessionStore
from rag_service.summary import ExtractiveSummarizer, LLMSummarizer, Summarizer
from rag_service.user_memory import FactExtractor, LLMFactExtractor, RedisVersions, RuleFactExtractor, UserMemory


@dataclass
class Services:
    settings: Settings
    counter: TokenCounter
    embedder: Embedder
    index: VectorIndex
    store: SessionStore
    pipeline: ChatPipeline
    metrics: Metrics
    api_keys: ApiKeys
    rate_limiter: RateLimiter
    library: Library
    # None when user_memory.enabled is off.
    user_memory: UserMemory | None = None
    clients: list[ChatClient] = field(default_factory=list)
    # FAQ entries (rag_core/documents/faq.py); ratings and annotations, when there is an archive.
    faq_index: VectorIndex | None = None
    feedback: FeedbackStore | None = None
    annotations: Annotations | None = None

    async def start(self) -> None:
        """Work that needs the event loop: the archive takes up writes spooled by an earlier run."""
        await self.store.start()

    async def close(self) -> None:
        await self.pipeline.drain()
        for client in self.clients:
            await client.close()
        await self.store.close()
        await self.rate_limiter.close()
        if self.pipeline.s.user_memory is not None:
            await self.pipeline.s.user_memory.close()
        await self.index.close()
        self.metrics.close()


def build_generator(settings: Settings, clients: list[ChatClient]) -> Generator:
    if settings.llm.base_url:
        client = ChatClient(settings.llm)
        clients.append(client)
        return LLMGenerator(client)
    return ExtractiveGenerator(settings.prompt.extractive_sentences)


def build_summarizer(settings: Settings, counter: TokenCounter, clients: list[ChatClient]) -> Summarizer:
    endpoint = settings.summary_endpoint()
    if endpoint.base_url:
        client = ChatClient(endpoint)
        clients.append(client)
        return LLMSummarizer(client, settings.memory)
    return ExtractiveSummarizer(counter, settings.memory)


def build_rewriter(
    settings: Settings, embedder: Embedder | None, clients: list[ChatClient], index: VectorIndex | None = None
) -> Rewriter:
    """none -> no rewriting; rule -> rules; llm -> the LLM with rule fallback when an endpoint is
    configured, else rules. The embedder (query-cached) serves topic-switch detection; the index's document
    titles name the products an answer may lend a follow-up."""
    cfg = settings.rewrite
    if cfg.mode == "none":
        return NoRewriter()
    titles = None
    if index is not None:

        async def titles(tenant: str) -> list[str]:
            return [str(d.get("title") or "") for d in (await index.documents(tenant)).values()]

    rules = RuleRewriter(cfg, embedder, titles)
    endpoint = rewrite_endpoint(settings)
    if cfg.mode == "rule" or not endpoint.base_url:
        return rules
    client = ChatClient(endpoint)
    clients.append(client)
    return LLMRewriter(client, cfg, rules)


def build_user_memory(
    settings: Settings, archive: Archive, counter: TokenCounter, clients: list[ChatClient]
) -> UserMemory | None:
    """Facts live in the archive's user-memory table."""
    if not settings.user_memory.enabled:
        return None
    extractor: FactExtractor = RuleFactExtractor()
    endpoint = settings.summary_endpoint()
    if endpoint.base_url:
        client = ChatClient(endpoint)
        clients.append(client)
        extractor = LLMFactExtractor(client)
    # Several processes share one Redis (workers, replicas): a change of facts in one reaches the others.
    versions = RedisVersions.from_url(settings.redis.url) if settings.redis.url else None
    return UserMemory(
        archive, extractor, counter, settings.user_memory, Masker.from_settings(settings.privacy), versions
    )


def build_intents(
    settings: Settings, embedder: Embedder, index: VectorIndex, counter: TokenCounter, clients: list[ChatClient]
) -> IntentStage | None:
    """The intent stage when `intents.files` names any; product names come from the tenant's document titles."""
    cfg = settings.intents
    if not cfg.files:
        return None
    from rag_service.intents.config import load_catalog
    from rag_service.intents.llm_recognizer import LLMRecognizer

    catalog = load_catalog(cfg.files, cfg.actions)
    endpoint = settings.intent_endpoint()
    explicit = cfg.llm.model_fields_set if cfg.llm else set()
    defaults = {"temperature": 0.0, "timeout_s": 5.0, "max_tokens": 256}
    endpoint = endpoint.model_copy(update={k: v for k, v in defaults.items() if k not in explicit})
    if cfg.recognizer == "llm" and not endpoint.base_url:
        raise ValueError("intents.recognizer is llm but no LLM endpoint is configured (llm.base_url / intents.llm)")
    llm = None
    if cfg.recognizer != "offline" and endpoint.base_url:
        client = ChatClient(endpoint)
        clients.append(client)
        llm = LLMRecognizer(client, catalog, endpoint.timeout_s, endpoint.max_tokens)

    async def titles(tenant: str) -> list[str]:
        return [str(d.get("title") or "") for d in (await index.documents(tenant)).values()]

    # The learned decision reads the rules as it was trained on them (standalone rule on, no landing); the
    # two rule settings shape the rules-only decision.
    model = SwitchModel.load() if cfg.switch_model else None
    probe = index_probe(index) if cfg.switch_landing and model is None else None
    standalone = DEFAULT_STANDALONE_QUANTILE if cfg.switch_standalone or model is not None else None
    return IntentStage(
        cfg, catalog, embedder, counter, titles, llm, probe=probe, standalone_quantile=standalone, switch_model=model
    )


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
    index = index or open_index(settings.qdrant, embedder.dim, embedder.name)
    warm_up()
    if settings.retrieval.bridged:
        # The dictionary is read once a process (~1.5 s): at start-up, not on the first question.
        glosses()
    clients: list[ChatClient] = []
    metrics = Metrics()
    archive = open_archive(settings)
    store = build_store(settings, counter, metrics, archive=archive)
    user_memory = build_user_memory(settings, archive, counter, clients)
    # FAQ entries live beside the chunks, in a sibling collection of the same store.
    faq_index = index.sibling(faq_collection(index.collection))
    library = Library(settings, index, embedder, counter, faq_index=faq_index)
    feedback = FeedbackStore(archive, Masker.from_settings(settings.privacy)) if archive is not None else None
    archived = write_behind(store)
    if feedback is not None and archived is not None and archived.archive is archive:
        # A turn's receipt is queued just after its messages, and commits with them.
        archived.carry(feedback)
        feedback.carried(archived.flush_interval_s)
    annotations = Annotations(archive, library) if archive is not None else None
    if isinstance(embedder, CachedQueryEmbedder):
        embedder.observe = metrics.stage_seconds.labels("embed").observe
    stages = Stages(
        settings=settings,
        counter=counter,
        retriever=Retriever(
            index,
            embedder,
            settings.retrieval,
            bridges=Bridges(settings.retrieval.bridge_max_chunks, settings.retrieval.bridge_kept_chunks),
        ),
        store=store,
        memory=make_memory(settings.memory, settings.budget.history_budget, settings.tokens.per_message_overhead),
        rewriter=build_rewriter(settings, embedder, clients, index),
        generator=build_generator(settings, clients),
        summarizer=build_summarizer(settings, counter, clients),
        metrics=metrics,
        user_memory=user_memory,
        fallback=ExtractiveGenerator(settings.prompt.extractive_sentences)
        if settings.llm.base_url and settings.llm.fallback_extractive
        else None,
        faq=FaqMatcher(faq_index, embedder, settings.faq),
        turn_log=feedback,
        intents=build_intents(settings, embedder, index, counter, clients),
    )
    return Services(
        settings=settings,
        counter=counter,
        embedder=embedder,
        index=index,
        store=store,
        pipeline=ChatPipeline(stages),
        metrics=metrics,
        api_keys=ApiKeys(settings.auth),
        rate_limiter=RateLimiter(settings.auth, settings.server.trusted_proxies, settings.redis.url),
        library=library,
        user_memory=user_memory,
        clients=clients,
        faq_index=faq_index,
        feedback=feedback,
        annotations=annotations,
    )
