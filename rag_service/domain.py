"""Plain data passed between the stages."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, NotRequired

# typing_extensions' TypedDict: pydantic (the API's schema) needs it before Python 3.12.
from typing_extensions import TypedDict

Role = Literal["user", "assistant"]


@dataclass(frozen=True, slots=True)
class Message:
    role: Role
    content: str
    # Counted once, when stored (content only; the per-message overhead is added when a prompt is built).
    tokens: int
    created_at: float


@dataclass(frozen=True, slots=True)
class Round:
    user: Message
    assistant: Message

    @property
    def tokens(self) -> int:
        return self.user.tokens + self.assistant.tokens


@dataclass(slots=True)
class SessionMeta:
    session_id: str
    created_at: float
    tenant: str = ""
    user: str = ""
    message_count: int = 0
    summary: str = ""
    summary_tokens: int = 0
    # Leading messages folded into the summary, and their verbatim size, for the receipt.
    summarized: int = 0
    summarized_source_tokens: int = 0
    # Index of the first message of the current topic (set by the rewriter's topic-switch detection).
    topic_start: int = 0
    # The conversation's task state as JSON (rag_service.intents.task.TaskState); "" without intents.
    task: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__slots__}


@dataclass(frozen=True, slots=True)
class Chunk:
    id: str
    doc_id: str
    source: str
    title: str
    text: str
    score: float
    token_count: int
    # The heading in effect where the chunk starts (ingest records it; older indexes have none).
    section: str = ""
    # "zh" / "en", recorded at ingest ("" in older indexes: worked out from the text when needed).
    lang: str = ""
    # Position of the chunk in its document.
    index: int = 0
    # The romanised names of the Chinese names the chunk's page uses, as ingest embedded them ("行者 Xingzhe";
    # "" in older indexes).
    aliases: str = ""

    def rescored(self, score: float) -> Chunk:
        """`dataclasses.replace(self, score=score)` for a third of the cost of a slot-by-slot loop (the reranker
        and retrieval's lifts rescore every chunk of the pool on every turn, ~90 copies a turn)."""
        new = _copy(self)
        _set_score(new, score)
        return new

    def without_text(self) -> Chunk:
        """`dataclasses.replace(self, text="")` (retrieval remembers every search's candidates, ~30 chunks a
        turn, without their text)."""
        new = _copy(self)
        _set_text(new, "")
        return new


# A `Chunk` (frozen, slotted, nothing computed on init) is all its slots, so a copy is its slots set one by one
# through their descriptors: `replace` looks the fields up and calls `__init__` by keyword (5 µs), a loop of
# `getattr` / `object.__setattr__` over `__slots__` took 1.6 µs, these straight-line descriptor calls 0.6 µs.
# A field added to `Chunk` must be copied in `_copy` too (tests/test_chunk_copies.py fails until it is).
def _setter(name: str) -> Callable[[Chunk, Any], None]:
    setter: Callable[[Chunk, Any], None] = Chunk.__dict__[name].__set__
    return setter


_set_id = _setter("id")
_set_doc_id = _setter("doc_id")
_set_source = _setter("source")
_set_title = _setter("title")
_set_text = _setter("text")
_set_score = _setter("score")
_set_token_count = _setter("token_count")
_set_section = _setter("section")
_set_lang = _setter("lang")
_set_index = _setter("index")
_set_aliases = _setter("aliases")
_new = object.__new__


def _copy(c: Chunk) -> Chunk:
    new = _new(Chunk)
    _set_id(new, c.id)
    _set_doc_id(new, c.doc_id)
    _set_source(new, c.source)
    _set_title(new, c.title)
    _set_text(new, c.text)
    _set_score(new, c.score)
    _set_token_count(new, c.token_count)
    _set_section(new, c.section)
    _set_lang(new, c.lang)
    _set_index(new, c.index)
    _set_aliases(new, c.aliases)
    return new


@dataclass(frozen=True, slots=True)
class MemoryView:
    """What memory offers the prompt: an optional summary and verbatim rounds, oldest first."""

    summary: str
    summary_tokens: int
    rounds: tuple[Round, ...]


@dataclass(frozen=True, slots=True)
class GenerationInput:
    """What a generator may use besides the prompt: the question as asked, the query retrieval used, the
    chunks in the prompt and the session's memory (the extractive answerer reads them; an LLM reads the
    prompt built from them)."""

    question: str
    query: str
    chunks: Sequence[Chunk]
    memory: MemoryView | None = None
    # The question's words in the other language of the collection (`Retriever.translated`): one group of
    # alternatives per word the glossary does not know; what tells that language's sentences apart.
    translated: tuple[tuple[str, frozenset[str]], ...] = ()


@dataclass(frozen=True, slots=True)
class RewriteResult:
    query: str
    # "skipped" | "called" | "fallback" | "rule" | "none"
    action: str
    topic_switch: bool = False
    detail: str = ""
    # A dependent follow-up: the earlier questions (as rewritten) it continues, the latest first, back to the
    # question that set the topic; retrieval leans toward the documents they found (`Retriever.search`).
    continues: tuple[str, ...] = ()


class FaqReceipt(TypedDict):
    """The FAQ entry that answered a turn on the short path."""

    question: str
    score: float
    source: str


class Receipt(TypedDict):
    """What a turn sent and what it cost, part by part, built once when the turn is stored. Token counts
    are of the messages as sent (per-message overhead included); the prompt parts add up to
    `total_prompt_tokens`. A TypedDict, not a dataclass: it is the JSON the client reads, and the API's
    schema documents it as is."""

    strategy: str
    system_tokens: int
    summary_tokens: int
    history_tokens: int
    query_tokens: int
    context_tokens: int
    chunk_budget: int
    generation_reserve: int
    total_prompt_tokens: int
    context_window: int
    rounds_kept: int
    compressed: bool
    compressed_tokens_before: int | None
    compressed_tokens_after: int | None
    rounds_dropped_for_budget: int
    # "skipped" | "called" | "fallback" | "rule" | "none"
    rewrite: str
    topic_switch: bool
    # The user-facts message (0 without one); part of system_tokens.
    profile_tokens: int
    # The upstream's own count of the answer when it reports usage, else counted here.
    completion_tokens: int
    # prompt_tokens, completion_tokens, total_tokens and "counted": "upstream" (the LLM's usage) or "local".
    usage: dict[str, int | str]
    # How the upstream said the answer ended ("stop", "length" ...); "stop" when it did not say.
    finish_reason: str
    cost_estimate: float
    timings_ms: dict[str, float]
    # Why the answer did not come from the configured generator ("upstream_error"); absent when it did.
    fallback: NotRequired[str]
    # The FAQ short path (mode "faq"): the entry that answered, and what the LLM call it saved would have
    # cost (cost_estimate is then 0). Absent on other turns.
    faq: NotRequired[FaqReceipt]
    llm_calls_saved: NotRequired[int]
    saved_tokens: NotRequired[int]
    saved_cost_estimate: NotRequired[float]
    # With intents (rag_service.intents): the task after the turn, the prompt modules sent and their
    # tokens (part of system_tokens), and the task's details (turn kind, new task, recognizer, action ...).
    intent: NotRequired[str | None]
    slots: NotRequired[dict[str, str]]
    missing: NotRequired[list[str]]
    prompt_modules: NotRequired[list[str]]
    prompt_module_tokens: NotRequired[int]
    task: NotRequired[dict[str, Any]]
