"""Intent configuration: `configs/intents/*.yaml`, named by `intents.files` in a scenario preset."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

SlotType = Literal["order_no", "phone", "date", "product", "enum", "text"]
LANGS = ("zh", "en")


class SlotSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
    type: SlotType
    required: bool = True
    # enum: value -> synonyms (the value itself always matches too).
    values: dict[str, list[str]] = Field(default_factory=dict)
    # text: words that mark the clause holding the value ("坏", "won't turn on" for a fault). Without a
    # cue, a text slot takes the whole reply to its own question.
    cues: list[str] = Field(default_factory=list)
    # The question asking for the slot when it is missing, per language ("zh", "en").
    ask: dict[str, str] = Field(default_factory=dict)

    @model_validator(mode="after")
    def _consistent(self) -> SlotSpec:
        if self.type == "enum" and not self.values:
            raise ValueError(f"slot {self.name!r}: an enum slot needs `values`")
        if self.type != "enum" and self.values:
            raise ValueError(f"slot {self.name!r}: only an enum slot has `values`")
        unknown = set(self.ask) - set(LANGS)
        if unknown:
            raise ValueError(f"slot {self.name!r}: `ask` languages are {LANGS}, not {sorted(unknown)}")
        return self

    def question(self, lang: str) -> str:
        return self.ask.get(lang) or self.ask.get("zh") or self.ask.get("en") or f"{self.name}?"


class ActionSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    # Unset: the intent has an action only when `intents.actions` names its URL.
    url: str | None = None
    method: Literal["POST", "GET"] = "POST"
    timeout_s: float = Field(default=5.0, gt=0)
    # Title of the context block the reply becomes.
    context_title: str = "action result"
    # The answer when the endpoint fails (per language); a default is used when unset.
    failure_reply: dict[str, str] = Field(default_factory=dict)


DEFAULT_FAILURE = {
    "zh": "抱歉，相关的查询服务暂时不可用，请稍后再试，或拨打客服热线转人工客服处理。",
    "en": "Sorry, the service needed for this is not available right now. Please try again later or ask for a human agent.",
}


class IntentSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]{0,63}$")
    description: str = ""
    examples: list[str] = Field(min_length=1)
    slots: list[SlotSpec] = Field(default_factory=list)
    # Rules appended to the system prompt only while this intent is active.
    prompt: str = ""
    action: ActionSpec | None = None

    @model_validator(mode="after")
    def _unique_slots(self) -> IntentSpec:
        names = [s.name for s in self.slots]
        if len(names) != len(set(names)):
            raise ValueError(f"intent {self.name!r}: slot names repeat")
        return self

    def slot(self, name: str) -> SlotSpec | None:
        return next((s for s in self.slots if s.name == name), None)

    def failure_reply(self, lang: str) -> str:
        replies = self.action.failure_reply if self.action else {}
        return replies.get(lang) or DEFAULT_FAILURE.get(lang, DEFAULT_FAILURE["zh"])


class IntentFile(BaseModel):
    model_config = ConfigDict(extra="forbid")

    intents: list[IntentSpec] = Field(default_factory=list)
    knowledge_examples: list[str] = Field(default_factory=list)


class IntentCatalog(BaseModel):
    """All configured intents, from every file (a name may be defined once)."""

    intents: list[IntentSpec]
    knowledge_examples: list[str]

    def get(self, name: str | None) -> IntentSpec | None:
        return next((i for i in self.intents if i.name == name), None) if name else None

    @property
    def names(self) -> list[str]:
        return [i.name for i in self.intents]


class IntentConfigError(ValueError):
    pass


def load_catalog(files: list[str], actions: dict[str, str] | None = None) -> IntentCatalog:
    """The intents of `files`, with the action URLs of `actions` (intent -> URL) applied."""
    intents: list[IntentSpec] = []
    knowledge: list[str] = []
    for name in files:
        path = Path(name).expanduser()
        if not path.is_file():
            raise IntentConfigError(f"intents.files names {path}, which does not exist")
        try:
            parsed = IntentFile.model_validate(yaml.safe_load(path.read_text(encoding="utf-8")) or {})
        except (yaml.YAMLError, ValidationError) as exc:
            raise IntentConfigError(f"{path}: {exc}") from exc
        intents.extend(parsed.intents)
        knowledge.extend(parsed.knowledge_examples)
    seen: set[str] = set()
    for intent in intents:
        if intent.name in seen:
            raise IntentConfigError(f"intent {intent.name!r} is defined twice")
        seen.add(intent.name)
    for intent_name, url in (actions or {}).items():
        target = next((i for i in intents if i.name == intent_name), None)
        if target is None:
            raise IntentConfigError(f"intents.actions names {intent_name!r}, which no intent file defines")
        target.action = (target.action or ActionSpec()).model_copy(update={"url": url})
    return IntentCatalog(intents=intents, knowledge_examples=knowledge)
