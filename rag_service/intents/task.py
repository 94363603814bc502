"""The task state kept in the session, and the one function that moves it on by a turn.

`TaskTracker.step` is pure (no I/O): given the stored state, the question and what recognition found,
it returns the next state and what the turn must do — ask for a missing slot, act (call the intent's
action, answer, and mark the task done), or answer. Recognition is either offline (embeddings,
extractors, the switch detector) or the LLM's one JSON reply; both end here.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from pydantic import BaseModel, Field, ValidationError

from rag_service.intents.config import IntentCatalog, IntentSpec
from rag_service.intents.recognize import IntentScore
from rag_service.intents.switch import SwitchDecision, asks, corrects

Action = Literal["ask", "act", "answer"]


class SwitchNote(BaseModel):
    """The last turn the switch detector called a switch: whether the tracker cleared the old task's rounds on
    it, and why (the detector's reason; when it did not clear, what kept them)."""

    round: int
    cleared: bool
    reason: str


class TaskState(BaseModel):
    """What the session remembers of the customer's task (stored as JSON in the session's meta)."""

    intent: str | None = None
    slots: dict[str, str] = Field(default_factory=dict)
    missing: list[str] = Field(default_factory=list)
    # The round (0-based) the task started at; rounds before it belong to an earlier task.
    task_started_at_round: int = 0
    done: bool = False
    # The slot the last turn asked for (a free-text reply fills it).
    asked: str | None = None
    # One line saying what the earlier task was (sent as background when `on_new_task: background`).
    previous: str = ""
    # Index of the task's first message: the messages before it are the earlier task's, not sent.
    start_message: int = 0
    # The documents each of the task's recent answered turns was answered from (the switch detector's
    # "where the task is" in the knowledge base), oldest first.
    documents: list[list[str]] = Field(default_factory=list)
    switch: SwitchNote | None = None

    def to_json(self) -> str:
        return self.model_dump_json()

    @classmethod
    def from_json(cls, raw: str) -> TaskState:
        if not raw:
            return cls()
        try:
            return cls.model_validate_json(raw)
        except ValidationError:
            # A state written by an incompatible version is dropped, never a failed turn.
            return cls()

    def public(self) -> dict[str, object]:
        return {
            "intent": self.intent,
            "slots": dict(self.slots),
            "missing": list(self.missing),
            "task_started_at_round": self.task_started_at_round,
            "done": self.done,
            "switch": self.switch.model_dump() if self.switch is not None else None,
        }


@dataclass(frozen=True, slots=True)
class Recognition:
    """What one turn's recognizer found: the candidate intent, the slots it read for the intents it
    considered, and (LLM only) whether the user continues or starts a new task."""

    candidate: IntentScore
    slots: Mapping[str, Mapping[str, str]]
    source: Literal["offline", "llm", "fallback"]
    new_task: bool | None = None
    switch: SwitchDecision | None = None
    detail: str = ""


@dataclass(slots=True)
class Step:
    state: TaskState
    action: Action
    new_task: bool
    reason: str
    ask: str | None = None
    filled: dict[str, str] = field(default_factory=dict)
    corrected: list[str] = field(default_factory=list)
    # This turn's switch, when the detector called one (also kept in the state until the next).
    switch: SwitchNote | None = None


def state_line(catalog: IntentCatalog, state: TaskState) -> str:
    """The state in one compact line: `return_request | order_no=XC… product=… | missing: reason | open`."""
    spec = catalog.get(state.intent)
    if spec is None:
        return ""
    filled = " ".join(f"{k}={json.dumps(v, ensure_ascii=False)}" for k, v in state.slots.items())
    missing = f"missing: {', '.join(state.missing)}" if state.missing else "missing: none"
    return f"task: {spec.name} | slots: {filled or 'none'} | {missing} | {'done' if state.done else 'open'}"


class TaskTracker:
    def __init__(self, catalog: IntentCatalog) -> None:
        self.catalog = catalog

    def _missing(self, spec: IntentSpec | None, slots: Mapping[str, str]) -> list[str]:
        return [s.name for s in spec.slots if s.required and s.name not in slots] if spec else []

    def step(self, state: TaskState, question: str, round_index: int, rec: Recognition) -> Step:
        out = self._step(state, question, round_index, rec)
        detected = rec.switch is not None and rec.switch.switch and rec.new_task is None
        if rec.switch is not None and detected:
            if out.new_task:
                why = rec.switch.reason
            elif not rec.switch.clears:
                why = f"{rec.switch.reason}; not cleared: {rec.switch.kept}"
            else:
                why = f"{rec.switch.reason}; not cleared: {out.reason}"
            out.switch = SwitchNote(round=round_index, cleared=out.new_task, reason=why)
        out.state = out.state.model_copy(update={"switch": out.switch or state.switch})
        return out

    def _step(self, state: TaskState, question: str, round_index: int, rec: Recognition) -> Step:
        active = self.catalog.get(state.intent)
        candidate = rec.candidate.intent
        active_slots = dict(rec.slots.get(active.name, {})) if active else {}
        # A switch that has not earned clearing (`SwitchDecision.clears`) moves nothing: it is reported only.
        switch = rec.switch.switch and rec.switch.clears if rec.switch is not None else False

        def start(intent: str | None, clear: bool, why: str) -> Step:
            spec = self.catalog.get(intent)
            slots = dict(rec.slots.get(intent, {})) if intent else {}
            previous = state_line(self.catalog, state) if clear and active else (state.previous if not clear else "")
            new = TaskState(
                intent=intent,
                slots=slots,
                missing=self._missing(spec, slots),
                task_started_at_round=round_index if clear else state.task_started_at_round,
                previous=previous,
                documents=[] if clear else state.documents,
            )
            return self._act(new, clear, why, filled=slots)

        if rec.new_task is not None:  # the LLM's own judgement replaces the switch detector
            if rec.new_task and round_index > 0:
                return start(candidate, True, "llm: new task")
            if candidate is not None and candidate != state.intent:
                return start(candidate, False, "llm: intent")
            switch = False

        another_order = switch and rec.switch is not None and rec.switch.new_order is not None
        if active is not None and another_order and state.asked not in active_slots:
            # Another order than the task's (not the one it asked for, not a correction): another task, even
            # of the same intent.
            return start(candidate, True, "another order")
        sure = switch and rec.switch is not None and rec.switch.sure
        announced = rec.switch is not None and rec.switch.announced
        if (
            active is not None
            and sure
            and not self._keeps_task(state, active, candidate, active_slots, question, announced)
        ):
            # A new subject beyond doubt: a new problem with another thing, another person's purchase, is a
            # new task even of the same intent (as another order is), whatever slot it names in passing.
            return start(candidate, True, "sure topic switch")
        if active is not None and not state.done:
            if candidate is not None and candidate != active.name and not active_slots:
                # Another intent replaces the task; its rounds stop being sent only on a real switch.
                return start(candidate, switch, f"new intent {candidate}")
            if switch and candidate != active.name and state.asked not in active_slots and asks(question):
                # A slot named in passing by a question on another subject (a product it asks about) is
                # not an answer to the task; a value given (for the slot asked for or another) is.
                return start(candidate, True, "topic switch")
            if candidate == active.name or active_slots:
                return self._continue(state, active, active_slots, "continues the task")
            if switch:
                return start(None, True, "topic switch")
            # A side question inside the task ("运费谁出？"): answered, the task stays open.
            new = state.model_copy(update={"asked": None})
            return Step(new, "answer", False, "question inside the task")
        if active is not None:  # done
            if candidate is not None and candidate != active.name:
                return start(candidate, switch, f"new intent {candidate}")
            changed = {k: v for k, v in active_slots.items() if state.slots.get(k) != v}
            if changed and candidate in (None, active.name):
                return self._continue(state.model_copy(update={"done": False}), active, active_slots, "correction")
            if switch:
                # (The candidate is the finished task's intent or none: a new request of the same kind.)
                return start(candidate, True, "topic switch")
            return Step(state, "answer", False, "follow-up of the finished task")
        if candidate is not None:
            return start(candidate, switch, f"intent {candidate}")
        if switch:
            return start(None, True, "topic switch")
        return Step(state, "answer", False, "no intent")

    def _keeps_task(
        self,
        state: TaskState,
        active: IntentSpec,
        candidate: str | None,
        slots: Mapping[str, str],
        question: str,
        announced: bool,
    ) -> bool:
        """Whether a turn the switch decision is sure of still belongs to the task: it gives the slot the task
        asked for (with a side question of the task's own, not as part of another intent's request); it gives
        a slot the task still misses, asking nothing, after the task asked (the customer's answer, unless they
        announced a new subject first); or it corrects a slot already filled — in correcting words, or as a
        bare value that asks nothing."""
        if state.asked is not None and state.asked in slots and candidate in (None, active.name):
            return True
        missing = set(self._missing(active, state.slots))
        if state.asked is not None and not announced and not asks(question) and missing & set(slots):
            return True
        changed = any(k in state.slots and state.slots[k] != v for k, v in slots.items())
        return changed and (corrects(question) or not asks(question))

    def _continue(self, state: TaskState, spec: IntentSpec, slots: Mapping[str, str], why: str) -> Step:
        merged = dict(state.slots)
        corrected = [k for k, v in slots.items() if k in merged and merged[k] != v]
        merged.update(slots)
        new = state.model_copy(update={"slots": merged, "missing": self._missing(spec, merged)})
        if corrected:
            new.done = False
        return self._act(new, False, why, filled=dict(slots), corrected=corrected)

    def _act(
        self,
        state: TaskState,
        new_task: bool,
        why: str,
        filled: dict[str, str] | None = None,
        corrected: list[str] | None = None,
    ) -> Step:
        spec = self.catalog.get(state.intent)
        filled, corrected = filled or {}, corrected or []
        if spec is None:
            return Step(state.model_copy(update={"asked": None}), "answer", new_task, why, None, filled, corrected)
        if state.missing:
            ask = state.missing[0]
            return Step(state.model_copy(update={"asked": ask}), "ask", new_task, why, ask, filled, corrected)
        if state.done:
            return Step(state.model_copy(update={"asked": None}), "answer", new_task, why, None, filled, corrected)
        return Step(state.model_copy(update={"asked": None}), "act", new_task, why, None, filled, corrected)
