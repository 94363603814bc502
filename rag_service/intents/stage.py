"""The intent stage of a turn: recognise, move the task on, and say what the turn sends and does.

The pipeline runs it right after memory (before rewriting, so the rewriter and the prompt see only the
current task's rounds) and applies what it returns: the task's start (earlier messages are not sent), a
canned reply (the question for a missing slot, or the answer when the action failed) instead of
retrieval and generation, the action's reply as context, the active intent's prompt module appended to
the system prompt, and the state block. After retrieval, the pipeline tells the turn which documents it
was answered from (`TaskTurn.answered_from`); the stored state keeps them for the task's recent turns, so
the next turn's switch detector can tell whether the question stays on the task's documents (`probe`: the
question's nearest chunks, read only when the wording leaves the question open).
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from rag_core.embedding import Embedder, Vector
from rag_core.settings import IntentSettings
from rag_core.tokens import TokenCounter
from rag_core.vectorstore import VectorIndex
from rag_service.domain import Chunk, Round
from rag_service.intents.actions import ActionResult, call_action
from rag_service.intents.config import IntentCatalog
from rag_service.intents.llm_recognizer import BadReply, LLMRecognizer
from rag_service.intents.recognize import IntentRecognizer
from rag_service.intents.slots import ProductCatalog, SlotExtractor, language
from rag_service.intents.switch import (
    DEFAULT_MARGIN_QUANTILE,
    DEFAULT_QUANTILE,
    DEFAULT_STANDALONE_QUANTILE,
    DEFAULT_STRICT_QUANTILE,
    RECENT_TURNS,
    TASK_QUESTIONS,
    ExampleSet,
    Landing,
    SwitchDetector,
    SwitchInput,
    SwitchModel,
    calibrate_margin,
    calibrate_threshold,
)
from rag_service.intents.task import Recognition, Step, TaskState, TaskTracker, state_line
from rag_service.prompt import escape_data
from rag_service.rewrite_rules import has_subject

log = logging.getLogger(__name__)

OPEN_STATE, CLOSE_STATE = "<task_state>", "</task_state>"
TITLES_TTL_S = 60.0
# The chunks of a turn's context that say which documents it was answered from (the best ones).
ANSWERED_FROM_CHUNKS = 3

# The task's turns whose intents say what the task's business is (a task that began with a return stays
# one when a later turn is taken for another intent); the learned switch decision compares the question
# with the same turns.
TASK_TURNS = TASK_QUESTIONS

# Nearest chunks read for a question's landing: enough to reach the task's documents when they are near.
PROBE_CHUNKS = 40

# The question's nearest chunks in the tenant's knowledge base: (vector, tenant) -> (document id, score)...
Probe = Callable[[Vector, str], Awaitable[Landing]]


def index_probe(index: VectorIndex, limit: int = PROBE_CHUNKS) -> Probe:
    """A dense-only search of the index (cosines: the scale the landing margin is calibrated on; no BM25
    fusion or rerank bonus), reading only the document ids."""

    async def probe(vector: Vector, tenant: str) -> Landing:
        # (rrf_k is unused by a dense-only search.)
        hits = await index.search(vector, None, limit, 60, tenant=tenant, payload=["doc_id"])
        return [(str(h.payload.get("doc_id", "")), h.score) for h in hits]

    return probe


@dataclass
class TaskTurn:
    before: TaskState
    state: TaskState
    step: Step
    # Index of the first message of the current task: earlier messages are not sent.
    start_message: int
    recognition: Recognition
    # A reply decided here (slot question, failed action): no retrieval, no generation.
    reply: str | None = None
    context: list[Chunk] = field(default_factory=list)
    modules: list[str] = field(default_factory=list)
    system_suffix: str = ""
    module_tokens: int = 0
    state_block: str = ""
    previous_task: str | None = None
    action: ActionResult | None = None
    seconds: float = 0.0
    # The state block's tokens as sent (set by the pipeline, which counts messages).
    state_tokens: int = 0
    # The documents the turn was answered from (set by the pipeline after retrieval).
    documents: list[str] = field(default_factory=list)

    def answered_from(self, chunks: Sequence[Chunk]) -> None:
        """Record the documents of the turn's best retrieved chunks (the action's reply is not one)."""
        own = {c.id for c in self.context}
        self.documents = _documents([(c.doc_id, c.score) for c in chunks if c.id not in own])

    def receipt(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "intent": self.state.intent,
            "slots": dict(self.state.slots),
            "missing": list(self.state.missing),
            "prompt_modules": list(self.modules),
            "prompt_module_tokens": self.module_tokens,
            "task": {
                "turn": self.step.action,
                "new_task": self.step.new_task,
                "previous_task": self.previous_task,
                "task_started_at_round": self.state.task_started_at_round,
                "done": self.state.done,
                "recognizer": self.recognition.source,
                "reason": self.step.reason,
                "score": round(self.recognition.candidate.score, 4),
                "state_tokens": self.state_tokens,
                "filled": dict(self.step.filled),
                "corrected": list(self.step.corrected),
            },
        }
        if self.recognition.switch is not None:
            out["task"]["switch"] = self.recognition.switch.reason
        # Whether the detector called a switch this turn and whether it cleared the old task's rounds (and why not).
        out["task"]["switch_detected"] = self.step.switch is not None
        if self.step.switch is not None:
            out["task"]["switch_cleared"] = self.step.switch.cleared
            out["task"]["switch_note"] = self.step.switch.reason
        if self.recognition.detail:
            out["task"]["recognizer_detail"] = self.recognition.detail
        if self.action is not None:
            out["task"]["action"] = {"ok": self.action.ok, "status": self.action.status, "error": self.action.error}
        return out


class IntentStage:
    def __init__(
        self,
        settings: IntentSettings,
        catalog: IntentCatalog,
        embedder: Embedder,
        counter: TokenCounter,
        titles: Callable[[str], Awaitable[Sequence[str]]] | None = None,
        llm: LLMRecognizer | None = None,
        switch_quantile: float = DEFAULT_QUANTILE,
        strict_quantile: float = DEFAULT_STRICT_QUANTILE,
        probe: Probe | None = None,
        margin_quantile: float = DEFAULT_MARGIN_QUANTILE,
        # None: no standalone rule (`intents.switch_standalone` off).
        standalone_quantile: float | None = None,
        # The learned switch decision (None: the rules decide).
        switch_model: SwitchModel | None = None,
        # Whether switches may clear context (None: as earned, `SwitchDetector`; True: always, for measuring).
        switch_clears: bool | None = None,
    ) -> None:
        self.settings, self.catalog, self.embedder, self.counter = settings, catalog, embedder, counter
        self.recognizer = IntentRecognizer(catalog, embedder, settings.threshold)
        groups = [i.examples for i in catalog.intents] + [catalog.knowledge_examples]
        groups = [g for g in groups if g]
        if switch_model is not None and len(groups) < 2:
            raise ValueError("the learned switch decision needs examples of at least two classes")
        if switch_model is not None and standalone_quantile is None:
            # The model reads the examples whatever the rules do.
            standalone_quantile = DEFAULT_STANDALONE_QUANTILE
        self.switch = SwitchDetector(
            embedder,
            calibrate_threshold(embedder, groups, switch_quantile),
            calibrate_threshold(embedder, groups, strict_quantile),
            margin=calibrate_margin(embedder, groups, margin_quantile) if probe is not None else None,
            examples=(
                ExampleSet.build(
                    self.recognizer.matrix,
                    self.recognizer.labels,
                    [*(e for i in catalog.intents for e in i.examples), *catalog.knowledge_examples],
                    {i.name: [*i.examples, i.description] for i in catalog.intents},
                    standalone_quantile,
                    switch_quantile,
                )
                if standalone_quantile is not None and len(groups) > 1
                else None
            ),
            model=switch_model,
            clearing=switch_clears,
        )
        self.probe = probe
        self.tracker = TaskTracker(catalog)
        self.llm = llm
        self._titles = titles
        self._catalogs: dict[str, tuple[float, SlotExtractor]] = {}
        self.module_tokens = {i.name: counter.count("\n\n" + i.prompt.strip()) for i in catalog.intents if i.prompt}

    async def extractor(self, tenant: str) -> SlotExtractor:
        """Slot extractors with the tenant's product names (its documents' titles, re-read every minute)."""
        now = time.monotonic()
        cached = self._catalogs.get(tenant)
        if cached is not None and cached[0] > now:
            return cached[1]
        titles: Sequence[str] = ()
        if self._titles is not None:
            try:
                titles = await self._titles(tenant)
            except Exception as exc:  # the index being down must not fail the turn: no catalog names then
                log.warning("product names unavailable for slot filling: %s", exc)
        extractor = SlotExtractor(ProductCatalog(titles))
        self._catalogs[tenant] = (now + TITLES_TTL_S, extractor)
        return extractor

    async def landing(self, question: str, state: TaskState, rounds: Sequence[Round], tenant: str) -> Landing | None:
        """Where the question lands in the knowledge base, when that can decide a switch: the task has
        documents and the wording leaves the question open (read before rewriting, so on the question
        as asked; a dense search on the embedding the turn computes anyway)."""
        if self.probe is None or self.switch.model is not None or not state.documents or not rounds:
            # (The learned decision does not read the landing.)
            return None
        questions, answers = [r.user.content for r in rounds], [r.assistant.content for r in rounds]
        if self.switch.settled(question, questions, answers) is not None or not has_subject(question):
            return None
        try:
            return await self.probe(self.embedder.embed_query(question), tenant)
        except Exception as exc:  # the index being down must not fail the turn: no landing then
            log.warning("knowledge-base landing unavailable for switch detection: %s", exc)
            return None

    def offline(
        self,
        question: str,
        state: TaskState,
        rounds: Sequence[Round],
        extractor: SlotExtractor,
        landed: Landing | None = None,
    ) -> Recognition:
        vector = self.embedder.embed_query(question)
        candidate = self.recognizer.score_vector(vector)
        slots: dict[str, dict[str, str]] = {}
        for name in {candidate.intent, state.intent} - {None}:
            spec = self.catalog.get(name)
            if spec is not None:
                asked = state.asked if name == state.intent else None
                slots[spec.name] = extractor.extract(spec, question, asked)
        switch = self.switch.decide(
            SwitchInput(
                question,
                [r.user.content for r in rounds],
                [r.assistant.content for r in rounds],
                vector,
                landed,
                {d for docs in state.documents for d in docs},
                state.intent,
                self.recent_intents(rounds) if self.switch.examples is not None else (),
                candidate.intent,
                extractor.catalog.words,
                extractor.catalog.concepts,
            )
        )
        return Recognition(candidate, slots, "offline", switch=switch)

    def recent_intents(self, rounds: Sequence[Round]) -> set[str]:
        """The intents the task's turns were recognised as (the rounds are the current task's; the last
        `TASK_TURNS`, whose embeddings are mostly cached: the switch detector compares the question with the
        recent ones anyway)."""
        found = (
            self.recognizer.score_vector(self.embedder.embed_query(r.user.content)).intent for r in rounds[-TASK_TURNS:]
        )
        return {name for name in found if name is not None}

    async def recognize(
        self,
        question: str,
        state: TaskState,
        rounds: Sequence[Round],
        extractor: SlotExtractor,
        landed: Landing | None = None,
    ) -> Recognition:
        offline = self.offline(question, state, rounds, extractor, landed)
        if self.llm is None:
            return offline
        try:
            intent, slots, new = await self.llm.recognize(question, state, rounds, extractor)
        except BadReply as exc:
            log.warning("intent LLM reply unusable, using the offline recognizer: %s", exc)
            return Recognition(offline.candidate, offline.slots, "fallback", switch=offline.switch, detail=str(exc))
        candidate = offline.candidate.__class__(intent, offline.candidate.scores.get(intent or "", 0.0), {})
        return Recognition(candidate, {intent: slots} if intent else {}, "llm", new_task=new, switch=offline.switch)

    async def run(
        self, question: str, state: TaskState, rounds: Sequence[Round], message_count: int, tenant: str
    ) -> TaskTurn:
        t0 = time.perf_counter()
        extractor = await self.extractor(tenant)
        landed = await self.landing(question, state, rounds, tenant)
        rec = await self.recognize(question, state, rounds, extractor, landed)
        round_index = message_count // 2
        step = self.tracker.step(state, question, round_index, rec)
        new = step.state
        new.start_message = message_count if step.new_task else state.start_message
        turn = TaskTurn(state, new, step, new.start_message, rec)
        if step.new_task and (state.intent is not None or rounds):
            turn.previous_task = self.settings.on_new_task
            if self.settings.on_new_task == "background" and not new.previous and rounds:
                new.previous = "earlier topic: " + _clip(rounds[-1].user.content, 80)
            if self.settings.on_new_task == "drop":
                new.previous = ""
        spec = self.catalog.get(new.intent)
        lang = language(question)
        if step.action == "ask" and spec is not None and step.ask is not None:
            slot = spec.slot(step.ask)
            turn.reply = slot.question(lang) if slot is not None else step.ask
        elif step.action == "act" and spec is not None and spec.action is not None and spec.action.url:
            turn.action = await call_action(spec.action, spec.name, dict(new.slots))
            if turn.action.ok:
                text = turn.action.text
                turn.context = [_action_chunk(spec.action.context_title, spec.name, text, self.counter.count(text))]
            else:
                log.warning("intent action %s failed: %s", spec.name, turn.action.error)
                turn.reply = spec.failure_reply(lang)
        if spec is not None and spec.prompt:
            turn.modules = [spec.name]
            turn.system_suffix = "\n\n" + spec.prompt.strip()
            turn.module_tokens = self.module_tokens[spec.name]
        turn.state_block = self.state_block(new)
        turn.seconds = time.perf_counter() - t0
        return turn

    def finish(self, turn: TaskTurn, answered: bool) -> TaskState:
        """The state to store after the turn: an acted-on task is done once it was answered (a failed
        action leaves it open, so the customer can try again)."""
        state = turn.state
        if answered and turn.step.action == "act" and (turn.action is None or turn.action.ok):
            state = state.model_copy(update={"done": True})
        if turn.documents:
            state = state.model_copy(update={"documents": [*state.documents, turn.documents][-RECENT_TURNS:]})
        return state

    def state_block(self, state: TaskState) -> str:
        lines = [line for line in (state_line(self.catalog, state), _earlier(state.previous)) if line]
        if not lines:
            return ""
        body = "\n".join(escape_data(line) for line in lines)
        return f"{self.settings.state_header}\n{OPEN_STATE}\n{body}\n{CLOSE_STATE}"

    def all_modules(self) -> str:
        """Every intent's prompt module (what a prompt holds without per-intent modules; the benchmark's baseline)."""
        return "".join("\n\n" + i.prompt.strip() for i in self.catalog.intents if i.prompt)


def _documents(chunks: Landing) -> list[str]:
    """The distinct documents of the best `ANSWERED_FROM_CHUNKS` chunks, best first."""
    docs: list[str] = []
    for doc, _ in chunks[:ANSWERED_FROM_CHUNKS]:
        if doc and doc not in docs:
            docs.append(doc)
    return docs


def _earlier(previous: str) -> str:
    if not previous:
        return ""
    return previous if previous.startswith("earlier") else f"earlier {previous}"


def _clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[:n] + "…"


def _action_chunk(title: str, intent: str, text: str, tokens: int) -> Chunk:
    # Score 1: the action's reply is about this very request, ahead of every retrieved chunk.
    return Chunk(f"action:{intent}", f"action:{intent}", f"action:{intent}", title, text, 1.0, tokens)


def state_json(state: TaskState) -> str:
    return json.dumps(state.model_dump(), ensure_ascii=False)
