"""The LLM recognizer: one call that returns intent, slots and "continue or new task" as one JSON object,
validated with pydantic. A reply that is late, not JSON, not of that shape, or names an intent or slot
that does not exist is not used: the turn falls back to the offline recognizer."""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from rag_service.domain import Round
from rag_service.intents.config import IntentCatalog
from rag_service.intents.slots import SlotExtractor
from rag_service.intents.task import TaskState
from rag_service.llm import ChatClient, ChatMessages, UpstreamError

PROMPT = (
    "You track the task of a customer-service conversation. The intents, with their slots:\n{intents}\n\n"
    "Read the current task state, the recent conversation and the user's last message. Reply with ONE JSON "
    'object and nothing else: {{"intent": <intent name or null for a plain question>, "slots": {{<slot name>: '
    '<value stated by the user>}}, "task": "continue" | "new"}}. "slots" holds only values the user stated, '
    'for the intent you name; a corrected value replaces the old one. "new" means the user left the current '
    "task or topic for an unrelated one; a follow-up, an answer to a question, or a correction is "
    '"continue". Enum slots take one of the listed values. Dates as YYYY-MM-DD.'
)


class LLMReply(BaseModel):
    model_config = ConfigDict(extra="ignore")

    intent: str | None
    slots: dict[str, str | int | float | None] = {}
    task: Literal["continue", "new"]

    @field_validator("intent", mode="before")
    @classmethod
    def _none_words(cls, v: object) -> object:
        return None if isinstance(v, str) and v.strip().lower() in ("", "null", "none") else v


class BadReply(ValueError):
    pass


_FENCE = re.compile(r"^```(?:json)?\s*|\s*```$", re.IGNORECASE)


def describe(catalog: IntentCatalog) -> str:
    lines = []
    for intent in catalog.intents:
        slots = []
        for s in intent.slots:
            kind = f"enum {sorted(s.values)}" if s.type == "enum" else s.type
            slots.append(f"{s.name} ({kind}{', required' if s.required else ''})")
        lines.append(f"- {intent.name}: {intent.description} Slots: {'; '.join(slots) or 'none'}")
    return "\n".join(lines)


def parse_reply(text: str, catalog: IntentCatalog, extractor: SlotExtractor) -> tuple[str | None, dict[str, str], bool]:
    """(intent, slots read by their types, new task); BadReply when the reply cannot be used."""
    try:
        reply = LLMReply.model_validate(json.loads(_FENCE.sub("", text.strip())))
    except (json.JSONDecodeError, ValidationError) as exc:
        raise BadReply(f"not the expected JSON ({type(exc).__name__})") from exc
    spec = catalog.get(reply.intent)
    if reply.intent is not None and spec is None:
        raise BadReply(f"unknown intent {reply.intent!r}")
    slots: dict[str, str] = {}
    for name, raw in reply.slots.items():
        if raw is None or spec is None:
            continue
        slot = spec.slot(name)
        if slot is None:
            raise BadReply(f"unknown slot {name!r} of {spec.name}")
        value = extractor.validate(slot, str(raw))
        if value is not None:
            slots[name] = value
    return reply.intent, slots, reply.task == "new"


class LLMRecognizer:
    def __init__(self, client: ChatClient, catalog: IntentCatalog, timeout_s: float, max_tokens: int = 256) -> None:
        self.client, self.catalog = client, catalog
        self.timeout_s, self.max_tokens = timeout_s, max_tokens
        self.system = PROMPT.format(intents=describe(catalog))

    def messages(self, question: str, state: TaskState, rounds: Sequence[Round]) -> ChatMessages:
        convo = []
        for r in rounds[-3:]:
            convo.append(f"User: {r.user.content}")
            if r.assistant.content:
                convo.append(f"Assistant: {r.assistant.content[:300]}")
        body = (
            f"Current task state: {json.dumps(state.public(), ensure_ascii=False)}\n\n"
            f"Recent conversation:\n{chr(10).join(convo) or '(none)'}\n\nLast message: {question}"
        )
        return [{"role": "system", "content": self.system}, {"role": "user", "content": body}]

    async def recognize(
        self, question: str, state: TaskState, rounds: Sequence[Round], extractor: SlotExtractor
    ) -> tuple[str | None, dict[str, str], bool]:
        """Raises BadReply on a late, failed or unusable reply."""
        messages = self.messages(question, state, rounds)
        try:
            text = await asyncio.wait_for(
                self.client.complete(messages, max_tokens=self.max_tokens, timeout_s=self.timeout_s), self.timeout_s
            )
        except TimeoutError as exc:
            raise BadReply(f"timed out after {self.timeout_s:g}s") from exc
        except UpstreamError as exc:
            raise BadReply(str(exc)) from exc
        return parse_reply(text, self.catalog, extractor)
