"""The chat pipeline: the one place that runs the stages of a turn, in order.

1 memory -> 1b intent -> 2 rewrite -> 3 budget -> 4 FAQ short path, else retrieval -> 5 prompt -> 6 generation
-> 7 store -> 8 compression (8, and the turn's receipt for ratings, run after the answer is returned, off the
request's critical path). 1b (`_intent`) runs only with intents configured (rag_service.intents): it may start
a new task (the earlier task's messages are then not sent), answer by itself (a question for a missing slot:
no rewrite, retrieval or generation), add an action's reply as context, the active intent's prompt module and
the task's state block.

The FAQ short path (4, `_faq`): a rewritten question that matches an FAQ question above `faq.threshold` is
answered with that entry's answer and no LLM call (`"mode": "faq"`); the prompt is still built around the
entry, so the receipt says how many tokens the call it saved would have cost.

A turn has one path, `ChatPipeline._turn`, which yields its events as they happen; a streamed turn is
those events sent on, a plain one (`answer`) the same events collected. Each stage is a method named
after it (`_memory`, `_rewrite`, `_budget`, `_faq`, `_retrieve`, `_prompt`, `_generate`, `_store`,
`_schedule_compression`).
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
from rag_service.budget import BudgetPlan, plan_budget, round_cost
from rag_service.domain import (
    Chunk,
    FaqReceipt,
    GenerationInput,
    MemoryView,
    Message,
    Receipt,
    RewriteResult,
    SessionMeta,
)
from rag_service.extractive import sources_payload
from rag_service.faq import MODE as FAQ_MODE
from rag_service.faq import FaqHit, FaqMatcher
from rag_service.feedback import FeedbackStore, TurnRecord, message_id
from rag_service.guard import OutputGuard
from rag_service.intents.stage import IntentStage, TaskTurn
from rag_service.intents.task import TaskState
from rag_service.llm import Completion, Finish, Generator, UpstreamError
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
from rag_service.sessions.interface import SessionNotFound, SessionStore, SummaryUpdate
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
    # Intents and slots (rag_service.intents), when `intents.files` names any.
    intents: IntentStage | None = None


@dataclass(frozen=True, slots=True)
class TurnMemory:
    """1. memory: what the turn starts from."""

    meta: SessionMeta
    loaded: list[Message]  # the stored messages from `offset` on (or the client's history)
    offset: int
    view: MemoryView  # what of them the prompt may use
    profile: str  # the user-facts message, "" without facts
    profile_tokens: int  # of that message, overhead included (0 without one)


@dataclass(frozen=True, slots=True)
class TurnPrompt:
    """5. prompt: the messages sent and their token count."""

    messages: list[dict[str, Any]]
    chunks: list[Chunk]  # those of the retrieved chunks that fit
    system_tokens: int  # the system prompt and the user-facts message
    query_tokens: int
    context_tokens: int  # the final message besides the question: documents and their frame
    total_tokens: int


@dataclass(kw_only=True)
class PreparedTurn:
    """A turn after stages 1-5: what generation needs, and what storing it and its receipt need."""

    # None: a stateless turn (OpenAI-style request carrying its own history); nothing is stored.
    session_id: str | None
    question: Message  # the user's message, as it will be stored
    memory: TurnMemory
    rewrite: RewriteResult
    plan: BudgetPlan
    prompt: TurnPrompt
    started: float
    timings: dict[str, float] = field(default_factory=dict)
    # Why the answer did not come from the configured generator ("upstream_error"), if it did not.
    fallback: str | None = None
    # The FAQ entry that answers this turn on the short path.
    faq: FaqHit | None = None
    # How the upstream said the reply ended (finish_reason, token usage), when it said.
    finish: Finish | None = None
    # 1b. intent: the task's turn (None without intents or without a session).
    task: TaskTurn | None = None
    # The question's words in the collection's other language (`Retriever.translated`).
    translated: tuple[tuple[str, frozenset[str]], ...] = ()

    @property
    def generation(self) -> GenerationInput:
        return GenerationInput(
            self.question.content, self.rewrite.query, self.prompt.chunks, self.memory.view, self.translated
        )


@dataclass(frozen=True)
class TurnResult:
    answer: str
    mode: str
    rewritten_query: str
    sources: list[Chunk]
    receipt: Receipt
    # The answer's id in its session (None for a stateless turn): what a rating names.
    message_id: str | None = None


# -- a turn's events, in the order they come ---------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Rewritten:
    query: str


@dataclass(frozen=True, slots=True)
class Retrieved:
    chunks: list[Chunk]


@dataclass(frozen=True, slots=True)
class Delta:
    text: str


@dataclass(frozen=True, slots=True)
class Done:
    result: TurnResult


TurnEvent = Rewritten | Retrieved | Delta | Done
TurnEvents = AsyncGenerator[TurnEvent, None]


INTENT_MODE = "intent"


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
        """One turn, answered whole: the turn's events collected. With a session, its stored conversation
        is the memory and the turn is stored; with `session_id` None the turn is stateless: `history` (the
        client's own) is the memory and nothing is stored. `tenant`, when given, must own the session
        (another tenant's session is reported as unknown)."""
        done: Done | None = None
        # Run to the end (not just to Done): the turn leaves its session lock after its last event.
        async for event in self._turn(session_id, question, history, tenant, streamed=False):
            if isinstance(event, Done):
                done = event
        assert done is not None, "a turn that does not raise ends with Done"
        return done.result

    def stream(
        self,
        session_id: str | None,
        question: str,
        *,
        history: Sequence[Message] | None = None,
        tenant: str | None = None,
    ) -> TurnEvents:
        """The same turn as `answer`, as events: Rewritten, Retrieved, Delta..., Done."""
        return self._turn(session_id, question, history, tenant, streamed=True)

    async def has_session(self, session_id: str) -> bool:
        """Whether the store knows the session (live, or restorable from the archive)."""
        try:
            await self.s.store.messages(session_id)
        except SessionNotFound:
            return False
        return True

    async def drain(self) -> None:
        """Wait for background compressions (tests, shutdown)."""
        while self._background:
            await asyncio.gather(*list(self._background), return_exceptions=True)

    # -- the turn ---------------------------------------------------------------------------------

    async def _turn(
        self,
        session_id: str | None,
        question: str,
        history: Sequence[Message] | None,
        tenant: str | None,
        streamed: bool,
    ) -> TurnEvents:
        """The one path of a turn, plain or streamed: stages 1-5, then 6 piece by piece through the output
        guard, then 7 (which schedules 8). Only `streamed` differs: how the upstream is asked (6) and the
        metrics' label."""
        async with self._session_lock(session_id):
            turn = await self._prepare(session_id, question, history, tenant)
            yield Rewritten(turn.rewrite.query)
            yield Retrieved(turn.prompt.chunks)
            async with self._keep_question_on_failure(turn):
                t0 = time.perf_counter()
                guard = self.guard.stream()
                async for piece in self._generate(turn, streamed):
                    # An upstream whose answer is already buffered never suspends this loop, so the client's
                    # disconnect (and its cancellation) could only land after the whole answer was stored.
                    await anyio.lowlevel.checkpoint()
                    if safe := guard.feed(piece):
                        yield Delta(safe)
                if rest := guard.finish():
                    yield Delta(rest)
                turn.timings["generate"] = time.perf_counter() - t0
            yield Done(await self._store(turn, guard.answer, streamed))

    def _session_lock(self, session_id: str | None) -> AbstractAsyncContextManager[Any]:
        return self.s.store.lock(session_id) if session_id is not None else nullcontext()

    async def _prepare(
        self, session_id: str | None, question: str, history: Sequence[Message] | None, tenant: str | None
    ) -> PreparedTurn:
        """Stages 1-5, timed one by one."""
        if session_id is not None and history is not None:
            # Compression plans index the list the turn was built from; over a client's list they would
            # be applied to the stored session at the wrong offsets.
            raise ValueError("a turn uses a session's stored history or a client history, not both")
        started = time.perf_counter()
        user_message = self._question(question)
        memory = await self._memory(session_id, history, tenant)
        t_mem = time.perf_counter()
        memory, task = await self._intent(question, memory) if session_id is not None else (memory, None)
        t_int = time.perf_counter()
        if task is not None and task.reply is not None:
            rewrite = RewriteResult(question, "skipped", detail=f"intent stage: {task.step.action}")
        else:
            rewrite = await self._rewrite(question, memory)
        t_rw = time.perf_counter()
        query_tokens = self.s.counter.count(question_part(self.s.settings.prompt, question)) + self.overhead
        plan = self._budget(query_tokens, memory, task)
        faq: FaqHit | None = None
        translated: tuple[tuple[str, frozenset[str]], ...] = ()
        if task is not None and task.reply is not None:
            chunks: list[Chunk] = []  # the turn asks for a slot (or reports a failed action): nothing to look up
        else:
            turn_tenant = memory.meta.tenant if tenant is None else tenant
            faq = await self._faq(rewrite.query, turn_tenant)
            if faq is not None:
                chunks = [faq.chunk(self.s.counter.count(f"{faq.question}\n{faq.answer}"))]
            else:
                chunks = await self._retrieve(
                    rewrite.query, plan, turn_tenant, task.context if task is not None else [], rewrite.continues
                )
                translated = await self.s.retriever.translated(rewrite.query, turn_tenant)
            if task is not None:
                task.answered_from(chunks)  # where the task is in the knowledge base, for the next turn
        t_ret = time.perf_counter()
        prompt = self._prompt(question, query_tokens, memory, plan, chunks, task)
        t_prompt = time.perf_counter()
        timings = {
            "memory": t_mem - started,
            **({"intent": t_int - t_mem} if task is not None else {}),
            "rewrite": t_rw - t_int,
            "retrieve": t_ret - t_rw,
            "prompt": t_prompt - t_ret,
        }
        return PreparedTurn(
            session_id=session_id,
            question=user_message,
            memory=memory,
            rewrite=rewrite,
            plan=plan,
            prompt=prompt,
            started=started,
            timings=timings,
            faq=faq,
            task=task,
            translated=translated,
        )

    def _question(self, question: str) -> Message:
        limit = self.s.settings.budget.query_allowance
        tokens = self.s.counter.count(question)
        if tokens > limit:
            raise QuestionTooLong(f"the question has {tokens} tokens; the limit is budget.query_allowance = {limit}")
        return Message("user", question, tokens, time.time())

    # -- 1. memory --------------------------------------------------------------------------------

    async def _memory(
        self, session_id: str | None, history: Sequence[Message] | None, tenant: str | None
    ) -> TurnMemory:
        s = self.s
        if session_id is not None:
            meta, loaded, offset = await s.store.load(session_id, s.memory.load_from)
            if tenant is not None and meta.tenant != tenant:
                raise SessionNotFound(session_id)
        else:
            loaded, offset = list(history or ()), 0
            meta = SessionMeta("", time.time(), message_count=len(loaded))
        view = s.memory.select(meta, loaded, offset)
        view = dataclasses.replace(view, rounds=sendable_rounds(view.rounds, s.counter.count))
        profile, profile_tokens = "", 0
        if s.user_memory is not None and meta.user:
            profile, tokens = await s.user_memory.profile(UserMemory.key(meta.tenant, meta.user))
            profile_tokens = tokens + self.overhead if profile else 0
        return TurnMemory(meta, loaded, offset, view, profile, profile_tokens)

    # -- 1b. intent -------------------------------------------------------------------------------

    async def _intent(self, question: str, memory: TurnMemory) -> tuple[TurnMemory, TaskTurn | None]:
        """The task moves on. The memory offered is the current task's: a new task leaves the earlier
        messages (and a summary folding only them) out."""
        if self.s.intents is None:
            return memory, None
        meta = memory.meta
        state = TaskState.from_json(meta.task)
        if state.start_message > 0:
            memory = self._task_memory(memory, state.start_message)
        task = await self.s.intents.run(question, state, memory.view.rounds, meta.message_count, meta.tenant)
        if task.step.new_task:
            memory = self._task_memory(memory, task.start_message)
        if task.state_block:
            task.state_tokens = self.s.counter.count(task.state_block) + self.overhead
        return memory, task

    def _task_memory(self, memory: TurnMemory, start: int) -> TurnMemory:
        meta, loaded, offset = memory.meta, memory.loaded, memory.offset
        if start > offset:
            loaded, offset = loaded[start - offset :], start
        if meta.summarized <= start and meta.summary:
            meta = dataclasses.replace(meta, summary="", summary_tokens=0)
        view = self.s.memory.select(meta, loaded, offset)
        view = dataclasses.replace(view, rounds=sendable_rounds(view.rounds, self.s.counter.count))
        return dataclasses.replace(memory, view=view)

    async def task_state(self, session_id: str) -> dict[str, Any]:
        """The session's task: intent, slots, missing slots, the round it started at, done (all empty
        without intents, or before any task)."""
        meta, _, _ = await self.s.store.load(session_id, lambda m: m.message_count)
        return TaskState.from_json(meta.task).public()

    # -- 2. rewrite -------------------------------------------------------------------------------

    async def _rewrite(self, question: str, memory: TurnMemory) -> RewriteResult:
        return await self.s.rewriter.rewrite(question, memory.view, memory.meta.tenant)

    # -- 3. budget --------------------------------------------------------------------------------

    def _budget(self, query_tokens: int, memory: TurnMemory, task: TaskTurn | None) -> BudgetPlan:
        extra = task.module_tokens + task.state_tokens if task is not None else 0
        return plan_budget(
            self.s.settings.budget,
            system_tokens=self.system_tokens + memory.profile_tokens + extra,
            query_tokens=query_tokens,
            view=memory.view,
            summary_message_tokens=memory.meta.summary_tokens + self.overhead if memory.view.summary else 0,
            overhead=self.overhead,
        )

    # -- 4. FAQ short path, else retrieval ------------------------------------------------------------

    async def _faq(self, query: str, tenant: str) -> FaqHit | None:
        """The FAQ entry whose question the query matches above the threshold, if any."""
        if self.s.faq is None:
            return None
        hit = await self.s.faq.match(query, tenant or None)
        self.s.metrics.child(self.s.metrics.faq, "hit" if hit is not None else "miss").inc()
        return hit

    async def _retrieve(
        self, query: str, plan: BudgetPlan, tenant: str, context: Sequence[Chunk] = (), continues: Sequence[str] = ()
    ) -> list[Chunk]:
        """The best chunks that fit the chunk budget. It and the rewrite gate run on the event loop, not in
        worker threads: the query embedding is C code that already spreads over the cores with its own
        OpenMP team, and jieba holds the GIL either way (the index is awaited), so a thread hop buys no
        parallelism. It did cost: each pool thread got its own spinning OpenMP team and contended for the
        GIL with the background tasks; a turn took 38 ms instead of 26 (p50 over 5 interleaved runs,
        bench/profile_turn.py setup)."""
        cfg = self.s.settings
        candidates = await self.s.retriever.search(query, tenant=tenant, continues=continues)
        # An intent action's reply comes first and counts against the same budget.
        room = plan.chunk_budget - self.context_frame_tokens - sum(self._chunk_cost(c) for c in context)
        return [
            *context,
            *fill_budget(
                candidates,
                room,
                cfg.retrieval.max_chunks,
                self._chunk_cost,
                cfg.retrieval.max_chunks_per_document,
                cfg.retrieval.neighbour_chunks,
            ),
        ]

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

    # -- 5. prompt --------------------------------------------------------------------------------

    def _prompt(
        self,
        question: str,
        query_tokens: int,
        memory: TurnMemory,
        plan: BudgetPlan,
        chunks: list[Chunk],
        task: TaskTurn | None = None,
    ) -> TurnPrompt:
        """The messages; the window guard makes "prompt + reserve <= context window" exact, not estimated.
        With a task: the active intent's module ends the system prompt, its state block precedes the
        final message (both counted in `system_tokens`)."""
        cfg, count = self.s.settings, self.s.counter.count
        system_tokens = self.system_tokens + memory.profile_tokens
        system_prompt = self.system_prompt
        if task is not None:
            system_tokens += task.module_tokens + task.state_tokens
            system_prompt += task.system_suffix
        while True:
            messages = build_messages(
                cfg.prompt, system_prompt, memory.profile, plan.summary, plan.rounds, chunks, question
            )
            if task is not None and task.state_block:
                messages.insert(len(messages) - 1, {"role": "user", "content": task.state_block})
            final_tokens = count(messages[-1]["content"]) + self.overhead
            total = system_tokens + plan.summary_tokens + plan.history_tokens + final_tokens
            if total + cfg.budget.generation_reserve <= cfg.budget.context_window or not chunks:
                break
            chunks = chunks[:-1]
        return TurnPrompt(messages, chunks, system_tokens, query_tokens, final_tokens - query_tokens, total)

    # -- 6. generation ----------------------------------------------------------------------------

    async def _generate(self, turn: PreparedTurn, streamed: bool) -> AsyncIterator[str]:
        """The answer's pieces. A plain turn asks the upstream for the whole answer in one reply (one JSON
        body, cheaper than a stream of events), a streamed turn for its pieces. When the LLM upstream fails
        after its retries and before any text went out, the customer gets the extractive answer instead of
        an error page (`llm.fallback_extractive`); the receipt says so. On the FAQ short path the answer is
        the entry's, and no upstream is asked."""
        if turn.task is not None and turn.task.reply is not None:
            yield turn.task.reply  # decided by the intent stage: a slot question, or a failed action's answer
            return
        if turn.faq is not None:
            yield turn.faq.answer
            return
        generator = self.s.generator
        emitted = False
        try:
            if streamed:
                async for piece in generator.stream(turn.prompt.messages, turn.generation):
                    if isinstance(piece, Finish):
                        turn.finish = piece
                        continue
                    emitted = True
                    yield piece
            else:
                reply = await generator.complete(turn.prompt.messages, turn.generation)
                if isinstance(reply, Completion):
                    turn.finish, reply = reply.finish, reply.text
                yield reply
        except UpstreamError as exc:
            if emitted or self.s.fallback is None:
                raise
            self.s.metrics.upstream_errors.labels("generate").inc()
            log.warning("answering extractively, the LLM upstream failed: %s", exc)
            turn.fallback = "upstream_error"
            turn.finish = None
            async for piece in self.s.fallback.stream(turn.prompt.messages, turn.generation):
                if not isinstance(piece, Finish):
                    yield piece

    # -- 7. store ---------------------------------------------------------------------------------

    async def _store(self, turn: PreparedTurn, text: str, streamed: bool) -> TurnResult:
        """Stores the round (and schedules 8), then the receipt and the metrics of the turn."""
        s = self.s
        t0 = time.perf_counter()
        answer = Message("assistant", text, s.counter.count(text), time.time())
        task = turn.task
        if task is not None and s.intents is not None:
            task.state = s.intents.finish(task, answered=True)
        if turn.session_id is not None:
            count = await s.store.append(turn.session_id, [turn.question, answer])
            if task is not None:
                await s.store.set_task(turn.session_id, task.state.to_json())
                if task.step.new_task:
                    await s.store.set_topic_start(turn.session_id, count - 2)
            elif turn.rewrite.topic_switch:
                await s.store.set_topic_start(turn.session_id, count - 2)
            self._schedule_compression(turn, answer, count)
            self._schedule_learning(turn, answer, count)
        turn.timings["store"] = time.perf_counter() - t0
        mode = s.fallback.mode if turn.fallback and s.fallback is not None else s.generator.mode
        if task is not None and task.reply is not None:
            mode = INTENT_MODE
        elif turn.faq is not None:
            mode = FAQ_MODE
        receipt = self._receipt(turn, answer)
        s.metrics.observe_turn(mode, streamed, turn.timings, receipt, receipt["cost_estimate"])
        result = TurnResult(text, mode, turn.rewrite.query, turn.prompt.chunks, receipt)
        if turn.session_id is not None:
            result = dataclasses.replace(result, message_id=message_id(turn.session_id, "assistant", answer.created_at))
            self._schedule_receipt(turn, result)
        return result

    def _schedule_receipt(self, turn: PreparedTurn, result: TurnResult) -> None:
        """The turn's receipt for ratings (rag_service/feedback.py), written off the request path."""
        turn_log = self.s.turn_log
        session_id, message_id = turn.session_id, result.message_id
        if turn_log is None or session_id is None or message_id is None:
            return
        receipt, created_at = dict(result.receipt), time.time()

        async def write() -> None:
            try:
                # The record (its sources' quoted sentences read from the chunks) is made here, off the turn's
                # path: the customer's answer does not wait for its archive copy.
                record = TurnRecord(
                    message_id=message_id,
                    tenant=turn.memory.meta.tenant,
                    session_id=session_id,
                    question=turn.question.content,
                    answer=result.answer,
                    rewritten_query=result.rewritten_query,
                    mode=result.mode,
                    sources=sources_payload(result.sources, result.answer),
                    receipt=receipt,
                    created_at=created_at,
                )
                await turn_log.record_turn(record)
            except Exception as exc:
                # A rating of this answer is still stored; the report shows it without a receipt.
                log.warning("turn receipt not archived: %s", exc)

        self._background_task(write())

    def _receipt(self, turn: PreparedTurn, answer: Message) -> Receipt:
        budget, plan, prompt, meta = self.s.settings.budget, turn.plan, turn.prompt, turn.memory.meta
        # The upstream's own count when it gave one (it is what is billed); else counted here.
        finish = turn.finish or Finish()
        usage = finish.usage
        prompt_tokens = usage.prompt_tokens if usage else prompt.total_tokens
        completion_tokens = usage.completion_tokens if usage else answer.tokens
        cost = (prompt_tokens * self._price[0] + completion_tokens * self._price[1]) / 1000
        receipt = Receipt(
            strategy=self.s.memory.name,
            system_tokens=prompt.system_tokens,
            summary_tokens=plan.summary_tokens,
            history_tokens=plan.history_tokens,
            query_tokens=prompt.query_tokens,
            context_tokens=prompt.context_tokens,
            chunk_budget=plan.chunk_budget,
            generation_reserve=budget.generation_reserve,
            total_prompt_tokens=prompt.total_tokens,
            context_window=budget.context_window,
            rounds_kept=len(plan.rounds),
            compressed=bool(plan.summary),
            compressed_tokens_before=meta.summarized_source_tokens if plan.summary else None,
            compressed_tokens_after=plan.summary_tokens if plan.summary else None,
            rounds_dropped_for_budget=plan.rounds_dropped,
            rewrite=turn.rewrite.action,
            topic_switch=turn.rewrite.topic_switch,
            profile_tokens=turn.memory.profile_tokens,
            completion_tokens=completion_tokens,
            usage={
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": usage.total_tokens if usage else prompt_tokens + completion_tokens,
                "counted": "upstream" if usage else "local",
            },
            finish_reason=finish.finish_reason or "stop",
            cost_estimate=round(cost, 8),
            timings_ms={k: round(v * 1000, 3) for k, v in turn.timings.items()},
        )
        if turn.fallback:
            receipt["fallback"] = turn.fallback
        if turn.faq is not None:
            # What the LLM call answering from this entry would have cost, and did not.
            receipt["faq"] = FaqReceipt(
                question=turn.faq.question, score=round(turn.faq.score, 6), source=turn.faq.source
            )
            receipt["llm_calls_saved"] = 1 if self.s.generator.mode != "extractive" else 0
            receipt["saved_tokens"] = prompt.total_tokens + answer.tokens
            receipt["saved_cost_estimate"] = round(cost, 8)
            receipt["cost_estimate"] = 0.0
        if turn.task is not None:
            part = turn.task.receipt()
            receipt["intent"] = part["intent"]
            receipt["slots"] = part["slots"]
            receipt["missing"] = part["missing"]
            receipt["prompt_modules"] = part["prompt_modules"]
            receipt["prompt_module_tokens"] = part["prompt_module_tokens"]
            receipt["task"] = part["task"]
        return receipt

    # -- 8. compression -------------------------------------------------------------------------

    def _schedule_compression(self, turn: PreparedTurn, answer: Message, count: int) -> None:
        if turn.session_id is None or turn.session_id in self._compressing:
            return
        meta = turn.memory.meta
        if self._folded_upto.get(turn.session_id, -1) > meta.summarized:
            return
        self._folded_upto.pop(turn.session_id, None)
        meta.message_count = count
        messages = [*turn.memory.loaded, turn.question, answer]
        plan = self.s.memory.compression_due(meta, messages, turn.memory.offset, turn.rewrite.topic_switch)
        if plan is None:
            return
        self._compressing.add(turn.session_id)
        self._background_task(self._compress(turn.session_id, meta.summary, plan))

    def _schedule_learning(self, turn: PreparedTurn, answer: Message, count: int) -> None:
        um, meta = self.s.user_memory, turn.memory.meta
        if um is None or not meta.user or turn.session_id is None or not um.due(count // 2):
            return
        recent = [*turn.memory.loaded, turn.question, answer][-2 * um.settings.every_turns :]
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
            await self.store.append(self.turn.session_id, [self.turn.question])
