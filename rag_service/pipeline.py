"""The chat pipeline: the one place that runs the stages of a turn, in order.

1 memory -> 2 rewrite -> 3 budget -> 4 FAQ short path, else retrieval -> 5 prompt -> 6 generation -> 7 store
-> 8 compression (8, and the turn's receipt for ratings, run after the answer is returned, off the request's
critical path).

The FAQ short path (4): a rewritten question that matches an FAQ question above `faq.threshold` is answered
with that entry's answer and no LLM call (`"mode": "faq"`); the prompt is still built around the entry, so
the receipt says how many tokens the call it saved would have cost.
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Sequence
from contextlib import AbstractAsyncContextManager, nullcontext
from dataclasses import dataclass, field
from typing import Any

import anyio

from rag_core.settings import Settings
from rag_core.tokens import TokenCounter
from rag_service.budget import plan_budget, round_cost
from rag_service.domain import Chunk, GenerationInput, MemoryView, Message, Receipt, RewriteResult, SessionMeta
from rag_service.extractive import sentences_of
from rag_service.faq import MODE as FAQ_MODE
from rag_service.faq import FaqHit, FaqMatcher
from rag_service.feedback import FeedbackStore, TurnRecord, message_id
from rag_service.guard import OutputGuard
from rag_service.llm import Generator, UpstreamError
from rag_service.memory import CompressionPlan, MemoryStrategy
from rag_service.metrics import Metrics
from rag_service.prompt import (
    build_messages,
    chunk_wrapper,
    final_user_message,
    question_part,
    sendable_rounds,
    summary_message,
)
from rag_service.retrieval import Retriever, fill_budget
from rag_service.rewrite import Rewriter
from rag_service.sessions.interface import SessionNotFound, SessionStore, StoreUnavailable, SummaryUpdate
from rag_service.summary import Summarizer, pin_facts
from rag_service.user_memory import UserMemory

log = logging.getLogger(__name__)

WRAPPER_CACHE = 8192
FOLDED_CACHE = 65536


class QuestionTooLong(ValueError):
    pass


class ConfigError(ValueError):
    pass


@dataclass
class Stages:
    """Everything a turn needs, built once by the app factory."""

    settings: Settings
    counter: TokenCounter
    retriever: Retriever
    store: SessionStore
    memory: MemoryStrategy
    rewriter: Rewriter
    generator: Generator
    summarizer: Summarizer
    metrics: Metrics = field(default_factory=Metrics)
    user_memory: UserMemory | None = None
    # Answers when the LLM upstream fails (the extractive generator), or None to report the failure.
    fallback: Generator | None = None
    # The FAQ short path (None: off), and where turn receipts go for ratings (None: nowhere).
    faq: FaqMatcher | None = None
    turn_log: FeedbackStore | None = None


@dataclass
class PreparedTurn:
    # None: a stateless turn (OpenAI-style request carrying its own history); nothing is stored.
    session_id: str | None
    question: str
    user_message: Message
    rewrite: RewriteResult
    chunks: list[Chunk]
    messages: list[dict[str, Any]]
    receipt: Receipt
    meta: SessionMeta
    loaded: list[Message]
    offset: int
    started: float
    timings: dict[str, float] = field(default_factory=dict)
    view: MemoryView | None = None
    # Why the answer did not come from the configured generator ("upstream_error"), if it did not.
    fallback: str | None = None
    # The FAQ entry that answers this turn on the short path.
    faq: FaqHit | None = None

    @property
    def generation(self) -> GenerationInput:
        return GenerationInput(self.question, self.rewrite.query, self.chunks, self.view)


@dataclass(frozen=True)
class TurnResult:
    answer: str
    mode: str
    rewritten_query: str
    sources: list[Chunk]
    receipt: dict[str, Any]
    # The answer's id in its session (None for a stateless turn): what a rating names.
    message_id: str | None = None


class ChatPipeline:
    def __init__(self, stages: Stages) -> None:
        self.s = stages
        cfg = stages.settings
        self.overhead = cfg.tokens.per_message_overhead
        self.system_prompt = cfg.prompt.system_prompt
        self.system_tokens = stages.counter.count(self.system_prompt) + self.overhead
        floor = (
            self.system_tokens
            + cfg.budget.generation_reserve
            + cfg.budget.query_allowance
            + cfg.budget.min_chunk_budget
        )
        if floor > cfg.budget.total_budget:
            raise ConfigError(
                f"budget.total_budget ({cfg.budget.total_budget}) cannot hold the system prompt ({self.system_tokens}), "
                f"generation_reserve, query_allowance and min_chunk_budget ({floor} in all)"
            )
        # What the context adds to the final message besides its chunks (header, <documents> tags), so
        # the chunks plus this frame stay within the chunk budget.
        count = stages.counter.count
        self.context_frame_tokens = count(final_user_message(cfg.prompt, [], "")) - count(question_part(cfg.prompt, ""))
        self._wrapper_tokens: dict[tuple[str, str], int] = {}
        probe = Chunk("0" * 36, "0" * 36, "x" * 64, "x" * 32, "", 0.0, cfg.chunking.chunk_tokens)
        one_chunk = self.context_frame_tokens + self._chunk_cost(probe)
        if cfg.budget.min_chunk_budget < one_chunk:
            raise ConfigError(
                f"budget.min_chunk_budget ({cfg.budget.min_chunk_budget}) cannot hold one full chunk with its "
                f"markers ({one_chunk} tokens for chunking.chunk_tokens = {cfg.chunking.chunk_tokens})"
            )
        self.guard = OutputGuard(self.system_prompt, cfg.prompt.leak_window_chars, cfg.prompt.leak_refusal)
        price = cfg.observability.prices.get(cfg.llm.model)
        self._price = (price.input_per_1k, price.output_per_1k) if price and cfg.llm.base_url else (0.0, 0.0)
        self._background: set[asyncio.Task[None]] = set()
        self._compressing: set[str] = set()
        # session -> `summarized` after this process's last compression: a turn that loaded its meta
        # before that compression landed must not plan (and pay for) the same fold again.
        self._folded_upto: dict[str, int] = {}

    # -- entry points ---------------------------------------------------------------------------

    async def answer(
        self,
        session_id: str | None,
        question: str,
        *,
        history: Sequence[Message] | None = None,
        tenant: str | None = None,
    ) -> TurnResult:
        """One turn. With a session, its stored conversation is the memory and the turn is stored; with
        `session_id` None the turn is stateless: `history` (the client's own) is the memory and nothing is
        stored. `tenant`, when given, must own the session (another tenant's session is reported as
        unknown)."""
        async with self._session_lock(session_id):
            turn = await self._prepare(session_id, question, history, tenant)
            async with self._keep_question_on_failure(turn):
                t0 = time.perf_counter()
                text = self.guard.clean("".join([piece async for piece in self._generate(turn, streamed=False)]))
                turn.timings["generate"] = time.perf_counter() - t0
            return await self._finish(turn, text, streamed=False)

    async def stream(
        self,
        session_id: str | None,
        question: str,
        *,
        history: Sequence[Message] | None = None,
        tenant: str | None = None,
    ) -> AsyncIterator[tuple[str, Any]]:
        """Events: ("rewrite", str), ("sources", [Chunk]), ("delta", str)..., ("done", TurnResult)."""
        async with self._session_lock(session_id):
            turn = await self._prepare(session_id, question, history, tenant)
            yield "rewrite", turn.rewrite.query
            yield "sources", turn.chunks
            async with self._keep_question_on_failure(turn):
                t0 = time.perf_counter()
                guard = self.guard.stream()
                async for piece in self._generate(turn, streamed=True):
                    # An upstream whose answer is already buffered never suspends this loop, so the client's
                    # disconnect (and its cancellation) could only land after the whole answer was stored.
                    await anyio.lowlevel.checkpoint()
                    if safe := guard.feed(piece):
                        yield "delta", safe
                if rest := guard.finish():
                    yield "delta", rest
                turn.timings["generate"] = time.perf_counter() - t0
            yield "done", await self._finish(turn, guard.answer, streamed=True)

    async def _generate(self, turn: PreparedTurn, streamed: bool) -> AsyncIterator[str]:
        """6. generation: the answer's pieces (one piece when not streamed). When the LLM upstream fails
        after its retries and before any text went out, the customer gets the extractive answer instead
        of an error page (`llm.fallback_extractive`); the receipt says so."""
        if turn.faq is not None:
            yield turn.faq.answer
            return
        generator = self.s.generator
        emitted = False
        try:
            if streamed:
                async for piece in generator.stream(turn.messages, turn.generation):
                    emitted = True
                    yield piece
            else:
                yield await generator.complete(turn.messages, turn.generation)
        except UpstreamError as exc:
            if emitted or self.s.fallback is None:
                raise
            self.s.metrics.upstream_errors.labels("generate").inc()
            log.warning("answering extractively, the LLM upstream failed: %s", exc)
            turn.fallback = "upstream_error"
            async for piece in self.s.fallback.stream(turn.messages, turn.generation):
                yield piece

    async def drain(self) -> None:
        """Wait for background compressions (tests, shutdown)."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    # -- stages -----------------------------------------------------------------------------------

    def _session_lock(self, session_id: str | None) -> AbstractAsyncContextManager[Any]:
        return self.s.store.lock(session_id) if session_id is not None else nullcontext()

    async def _prepare(
        self, session_id: str | None, question: str, history: Sequence[Message] | None, tenant: str | None
    ) -> PreparedTurn:
        cfg, s = self.s.settings, self.s
        if session_id is not None and history is not None:
            # Compression plans index the list the turn was built from; over a client's list they would
            # be applied to the stored session at the wrong offsets.
            raise ValueError("a turn uses a session's stored history or a client history, not both")
        started = time.perf_counter()
        question_tokens = s.counter.count(question)
        if question_tokens > cfg.budget.query_allowance:
            raise QuestionTooLong(
                f"the question has {question_tokens} tokens; the limit is budget.query_allowance = {cfg.budget.query_allowance}"
            )
        user_message = Message("user", question, question_tokens, time.time())

        # 1. memory
        if session_id is not None:
            meta, loaded, offset = await s.store.load(session_id, s.memory.load_from)
            if tenant is not None and meta.tenant != tenant:
                raise SessionNotFound(session_id)
        else:
            loaded, offset = list(history or ()), 0
            meta = SessionMeta(session_id or "", time.time(), message_count=len(loaded))
        view = s.memory.select(meta, loaded, offset)
        view = dataclasses.replace(view, rounds=sendable_rounds(view.rounds, s.counter.count))
        profile, profile_tokens = "", 0
        if s.user_memory is not None and meta.user:
            profile, profile_tokens = await s.user_memory.profile(UserMemory.key(meta.tenant, meta.user))
        system_tokens = self.system_tokens + (profile_tokens + self.overhead if profile else 0)
        t_mem = time.perf_counter()

        # 2. rewrite
        rewrite = await s.rewriter.rewrite(question, view)
        t_rw = time.perf_counter()

        # 3. budget
        query_tokens = s.counter.count(question_part(cfg.prompt, question)) + self.overhead
        summary_tokens = meta.summary_tokens + self.overhead if view.summary else 0
        plan = plan_budget(
            cfg.budget,
            system_tokens=system_tokens,
            query_tokens=query_tokens,
            view=view,
            summary_message_tokens=summary_tokens,
            overhead=self.overhead,
        )

        # 4. retrieval. It and the rewrite gate run on the event loop, not in worker threads: the query
        # embedding is C code that already spreads over the cores with its own OpenMP team, and the rest
        # (Qdrant local, jieba) holds the GIL either way, so a thread hop buys no parallelism. It did cost:
        # each pool thread got its own spinning OpenMP team and contended for the GIL with the background
        # tasks; a turn took 38 ms instead of 26 (p50 over 5 interleaved runs, bench/profile_turn.py setup).
        faq = self._faq_stage(rewrite.query, meta.tenant if tenant is None else tenant)
        if faq is not None:
            chunks = [faq.chunk(s.counter.count(f"{faq.question}\n{faq.answer}"))]
        else:
            candidates = s.retriever.search(rewrite.query, tenant=meta.tenant if tenant is None else tenant)
            chunk_room = plan.chunk_budget - self.context_frame_tokens
            chunks = fill_budget(candidates, chunk_room, cfg.retrieval.max_chunks, self._chunk_cost)
        t_ret = time.perf_counter()

        # 5. prompt: the window guard makes "prompt + reserve <= context window" exact, not estimated.
        while True:
            messages = build_messages(
                cfg.prompt, self.system_prompt, profile, plan.summary, plan.rounds, chunks, question
            )
            final_tokens = s.counter.count(messages[-1]["content"]) + self.overhead
            total = system_tokens + plan.summary_tokens + plan.history_tokens + final_tokens
            if total + cfg.budget.generation_reserve <= cfg.budget.context_window or not chunks:
                break
            chunks = chunks[:-1]
        t_prompt = time.perf_counter()

        receipt = Receipt(
            strategy=s.memory.name,
            system_tokens=system_tokens,
            summary_tokens=plan.summary_tokens,
            history_tokens=plan.history_tokens,
            query_tokens=query_tokens,
            context_tokens=final_tokens - query_tokens,
            chunk_budget=plan.chunk_budget,
            generation_reserve=cfg.budget.generation_reserve,
            total_prompt_tokens=total,
            context_window=cfg.budget.context_window,
            rounds_kept=len(plan.rounds),
            compressed=bool(plan.summary),
            compressed_tokens_before=meta.summarized_source_tokens if plan.summary else None,
            compressed_tokens_after=plan.summary_tokens if plan.summary else None,
            rounds_dropped_for_budget=plan.rounds_dropped,
            rewrite=rewrite.action,
            topic_switch=rewrite.topic_switch,
            extra={"profile_tokens": profile_tokens + self.overhead if profile else 0},
        )
        timings = {
            "memory": t_mem - started,
            "rewrite": t_rw - t_mem,
            "retrieve": t_ret - t_rw,
            "prompt": t_prompt - t_ret,
        }
        return PreparedTurn(
            session_id,
            question,
            user_message,
            rewrite,
            chunks,
            messages,
            receipt,
            meta,
            loaded,
            offset,
            started,
            timings,
            view=view,
            faq=faq,
        )

    def _faq_stage(self, query: str, tenant: str) -> FaqHit | None:
        """4a. the FAQ short path: the entry whose question the query matches above the threshold."""
        if self.s.faq is None:
            return None
        hit = self.s.faq.match(query, tenant or None)
        self.s.metrics.faq.labels("hit" if hit is not None else "miss").inc()
        return hit

    def _chunk_cost(self, chunk: Chunk) -> int:
        # +1 for the newline that joins blocks. The wrapper depends only on the document, so its count is
        # remembered per (title, source) instead of re-tokenised for every candidate of every turn.
        key = (chunk.title, chunk.source)
        wrapper = self._wrapper_tokens.get(key)
        if wrapper is None:
            wrapper = self._wrapper_tokens[key] = self.s.counter.count(chunk_wrapper(chunk))
            if len(self._wrapper_tokens) > WRAPPER_CACHE:
                self._wrapper_tokens.clear()
        return chunk.token_count + wrapper + 1

    async def _finish(self, turn: PreparedTurn, text: str, streamed: bool) -> TurnResult:
        s = self.s
        t0 = time.perf_counter()
        answer = Message("assistant", text, s.counter.count(text), time.time())
        if turn.session_id is not None:
            count = await s.store.append(turn.session_id, [turn.user_message, answer])
            if turn.rewrite.topic_switch:
                await s.store.set_topic_start(turn.session_id, count - 2)
            self._schedule_compression(turn, answer, count)
            self._schedule_learning(turn, answer, count)
        turn.timings["store"] = time.perf_counter() - t0
        receipt = turn.receipt.to_dict()
        receipt["completion_tokens"] = answer.tokens
        cost = (receipt["total_prompt_tokens"] * self._price[0] + answer.tokens * self._price[1]) / 1000
        receipt["timings_ms"] = {k: round(v * 1000, 3) for k, v in turn.timings.items()}
        mode = s.fallback.mode if turn.fallback and s.fallback is not None else s.generator.mode
        if turn.faq is not None:
            mode = FAQ_MODE
            # What the LLM call answering from this entry would have cost, and did not.
            receipt["faq"] = {
                "question": turn.faq.question,
                "score": round(turn.faq.score, 6),
                "source": turn.faq.source,
            }
            receipt["llm_calls_saved"] = 1 if s.generator.mode != "extractive" else 0
            receipt["saved_tokens"] = receipt["total_prompt_tokens"] + answer.tokens
            receipt["saved_cost_estimate"] = round(cost, 8)
            cost = 0.0
        receipt["cost_estimate"] = round(cost, 8)
        if turn.fallback:
            receipt["fallback"] = turn.fallback
        s.metrics.observe_turn(mode, streamed, turn.timings, receipt, cost)
        result = TurnResult(text, mode, turn.rewrite.query, turn.chunks, receipt)
        if turn.session_id is not None:
            result = dataclasses.replace(result, message_id=message_id(turn.session_id, "assistant", answer.created_at))
            self._schedule_receipt(turn, result)
        return result

    def _schedule_receipt(self, turn: PreparedTurn, result: TurnResult) -> None:
        """The turn's receipt for ratings (rag_service/feedback.py), written off the request path."""
        log_ = self.s.turn_log
        if log_ is None or turn.session_id is None or result.message_id is None:
            return
        record = TurnRecord(
            message_id=result.message_id,
            tenant=turn.meta.tenant,
            session_id=turn.session_id,
            question=turn.question,
            answer=result.answer,
            rewritten_query=result.rewritten_query,
            mode=result.mode,
            sources=sources_payload(result.sources, result.answer),
            receipt=result.receipt,
            created_at=time.time(),
        )

        async def write() -> None:
            try:
                await log_.record_turn(record)
            except Exception as exc:
                # A rating of this answer is still stored; the report shows it without a receipt.
                log.warning("turn receipt not archived: %s", exc)

        self._background_task(write())

    # -- 8. compression -------------------------------------------------------------------------

    def _schedule_compression(self, turn: PreparedTurn, answer: Message, count: int) -> None:
        if turn.session_id is None or turn.session_id in self._compressing:
            return
        meta = turn.meta
        if self._folded_upto.get(turn.session_id, -1) > meta.summarized:
            return
        self._folded_upto.pop(turn.session_id, None)
        meta.message_count = count
        messages = [*turn.loaded, turn.user_message, answer]
        plan = self.s.memory.compression_due(meta, messages, turn.offset, turn.rewrite.topic_switch)
        if plan is None:
            return
        self._compressing.add(turn.session_id)
        self._background_task(self._compress(turn.session_id, meta.summary, plan))

    def _schedule_learning(self, turn: PreparedTurn, answer: Message, count: int) -> None:
        um, meta = self.s.user_memory, turn.meta
        if um is None or not meta.user or turn.session_id is None or not um.due(count // 2):
            return
        recent = [*turn.loaded, turn.user_message, answer][-2 * um.settings.every_turns :]
        self._background_task(self._learn(UserMemory.key(meta.tenant, meta.user), turn.session_id, recent))

    async def _learn(self, user_key: str, session_id: str, messages: Sequence[Message]) -> None:
        assert self.s.user_memory is not None
        try:
            await self.s.user_memory.learn(user_key, session_id, messages)
        except Exception as exc:
            log.warning("user-memory extraction failed; the conversation itself is stored: %s", exc)

    async def end_session(self, session_id: str, tenant: str | None = None) -> bool:
        """Learn from the rounds since the last extraction, then remove the session from every store."""
        um = self.s.user_memory
        async with self._session_lock(session_id):
            meta, messages, _ = await self.s.store.load(session_id, lambda m: 0)
            if tenant is not None and meta.tenant != tenant:
                raise SessionNotFound(session_id)
        if um is not None and meta.user:
            rest = (meta.message_count // 2) % um.settings.every_turns
            if rest:
                await self._learn(UserMemory.key(meta.tenant, meta.user), session_id, messages[-2 * rest :])
        return await self.s.store.delete(session_id)

    def _background_task(self, coro: Any) -> None:
        task = asyncio.create_task(coro)
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def _compress(self, session_id: str, previous: str, plan: CompressionPlan) -> None:
        s, cfg = self.s, self.s.settings
        try:
            timeout = cfg.summary_endpoint().timeout_s
            text = await asyncio.wait_for(s.summarizer.summarize(previous, plan.rounds), timeout)
            text = pin_facts(text, plan.rounds, previous, cfg.memory.pinned_facts_max)
            update = SummaryUpdate(
                expected_summarized=plan.start,
                summary=text,
                summary_tokens=s.counter.count(summary_message(cfg.prompt, text)),
                summarized=plan.upto,
                source_tokens=sum(round_cost(r, self.overhead) for r in plan.rounds),
            )
            t0 = time.perf_counter()
            if await s.store.update_summary(session_id, update):
                if len(self._folded_upto) > FOLDED_CACHE:
                    self._folded_upto.clear()
                self._folded_upto[session_id] = plan.upto
            s.metrics.stage_seconds.labels("compress").observe(time.perf_counter() - t0)
            s.metrics.compressions.labels("ok").inc()
            s.metrics.tokens_saved.inc(max(0, update.source_tokens - update.summary_tokens))
        except Exception as exc:
            s.metrics.compressions.labels("failed").inc()
            # Nothing is dropped: the rounds stay verbatim and the next turn tries again.
            log.warning("compression failed for a session, will retry next turn: %s", exc)
        finally:
            self._compressing.discard(session_id)

    # -- failure handling -----------------------------------------------------------------------

    def _keep_question_on_failure(self, turn: PreparedTurn) -> _KeepQuestion:
        return _KeepQuestion(self.s.store, turn, self.s.metrics)


class _KeepQuestion:
    """If generation fails or the client goes away, the question is still stored (without an answer)."""

    def __init__(self, store: SessionStore, turn: PreparedTurn, metrics: Metrics) -> None:
        self.store, self.turn, self.metrics = store, turn, metrics

    async def __aenter__(self) -> None:
        return None

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: Any) -> None:
        if exc_type is None:
            return
        if isinstance(exc, UpstreamError):
            self.metrics.upstream_errors.labels("generate").inc()
        if self.turn.session_id is None:
            return
        # Shielded: a cancelled request (client gone mid-stream) must still finish this write.
        with anyio.CancelScope(shield=True):
            await self.store.append(self.turn.session_id, [self.turn.user_message])


TurnEvents = AsyncGenerator[tuple[str, Any], None]


async def prime(events: TurnEvents) -> list[tuple[str, Any]]:
    """Run a turn's event stream up to its first generated piece.

    HTTP layers call this before they answer, so an unknown or busy session or a failing upstream still
    becomes a proper 4xx/502 instead of a stream that breaks after a 200.
    """
    head: list[tuple[str, Any]] = []
    try:
        async for event in events:
            head.append(event)
            if event[0] in ("delta", "done"):
                break
    except BaseException:
        await events.aclose()
        raise
    return head


def stream_failure(exc: Exception) -> tuple[int, str]:
    """The HTTP status and message of a turn that failed after its stream began (reported in-band)."""
    if isinstance(exc, UpstreamError):
        return 502, str(exc)
    if isinstance(exc, StoreUnavailable):
        return 503, str(exc)
    log.error("a streamed turn failed", exc_info=exc)
    return 500, "internal error"


def sources_payload(chunks: Sequence[Chunk], answer: str | None = None) -> list[dict[str, Any]]:
    """One entry per document, best first: its best score, how many chunks were used, their text, and the
    sentences used — those the answer quotes when it quotes any (the extractive answer does), else the
    chunks' text. The same document six times is noise to a reader."""
    groups: dict[str, list[Chunk]] = {}
    for c in chunks:
        groups.setdefault(c.doc_id, []).append(c)
    out: list[dict[str, Any]] = []
    for doc_chunks in groups.values():
        first = doc_chunks[0]
        sentences = [x.text for x in sentences_of(doc_chunks)]
        quoted = [x for x in sentences if answer and x in answer]
        used = quoted or list(dict.fromkeys(c.text for c in doc_chunks))
        out.append(
            {
                "doc_id": first.doc_id,
                "source": first.source,
                "title": first.title,
                "text": "\n".join(dict.fromkeys(c.text for c in doc_chunks)),
                "sentences": used,
                "chunks": len(doc_chunks),
                "score": round(max(c.score for c in doc_chunks), 6),
            }
        )
    return sorted(out, key=lambda e: -float(e["score"]))
