"""The API's request and response bodies, so that the OpenAPI schema documents every route's JSON."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from rag_service.domain import Receipt
from rag_service.extractive import sources_payload
from rag_service.pipeline import TurnResult

# One `Source` per document, best first (built where the turn's receipt for ratings is built too).
sources = sources_payload

# -- sessions and chat ----------------------------------------------------------------------------------


class CreateSession(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user: str = Field(default="", max_length=128, pattern=r"^[A-Za-z0-9_.@-]*$")


class SessionCreated(BaseModel):
    session_id: str


class StoredMessage(BaseModel):
    id: str = Field(description="The message's id in its session, for ratings")
    role: Literal["user", "assistant"]
    content: str
    tokens: int = Field(description="Tokens of the content (without the per-message overhead)")
    created_at: float


class MessageList(BaseModel):
    session_id: str
    messages: list[StoredMessage]


class SessionSummary(BaseModel):
    session_id: str
    user: str
    created_at: float
    updated_at: float


class SessionList(BaseModel):
    sessions: list[SessionSummary]
    limit: int
    offset: int


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    question: str = Field(min_length=1, description="The user's question, in any language.")
    stream: bool = False


class Source(BaseModel):
    """One document the answer drew on (grouped: a document appears once)."""

    doc_id: str
    source: str
    title: str
    text: str = Field(description="The text of the document's chunks in the prompt")
    sentences: list[str]
    chunks: int = Field(description="How many of the document's chunks were in the prompt")
    score: float = Field(description="The best retrieval score among those chunks")


class ChatResponse(BaseModel):
    """A turn's answer; also the `done` event of a streamed turn."""

    answer: str
    mode: str = Field(description='"llm", "extractive" or "faq"')
    rewritten_query: str = Field(description="The query retrieval used")
    sources: list[Source]
    receipt: Receipt = Field(description="What the turn sent, part by part, in tokens, and what it cost")
    message_id: str | None = Field(default=None, description="The answer's id, for ratings")
    intent: str | None = Field(default=None, description="The active task's intent (with intents configured)")
    slots: dict[str, str] = Field(default_factory=dict, description="The task's filled slots")
    missing: list[str] = Field(default_factory=list, description="Required slots still missing")
    prompt_modules: list[str] = Field(default_factory=list, description="Per-intent prompt modules sent")
    prompt_module_tokens: int = 0


class SwitchNoteResponse(BaseModel):
    """The last turn the switch detector called a topic switch."""

    round: int
    cleared: bool = Field(description="Whether the old task's rounds stopped being sent")
    reason: str = Field(description="The detector's reason; when not cleared, why not")


class TaskStateResponse(BaseModel):
    """The session's task (docs/intents.md); empty without intents."""

    intent: str | None
    slots: dict[str, str]
    missing: list[str]
    task_started_at_round: int
    done: bool
    switch: SwitchNoteResponse | None = None


TASK_FIELDS = ("intent", "slots", "missing", "prompt_modules", "prompt_module_tokens")


def turn_json(result: TurnResult) -> dict[str, Any]:
    """A `ChatResponse` as plain JSON data (the streamed `done` event, and the body of a plain turn)."""
    return {
        "answer": result.answer,
        "mode": result.mode,
        "rewritten_query": result.rewritten_query,
        "sources": sources_payload(result.sources, result.answer),
        "receipt": result.receipt,
        "message_id": result.message_id,
        **{k: result.receipt[k] for k in TASK_FIELDS if k in result.receipt},  # type: ignore[literal-required]
    }


# -- users ----------------------------------------------------------------------------------------------


class UserFact(BaseModel):
    id: int
    fact: str
    source_session: str | None
    updated_at: float


class UserMemories(BaseModel):
    user_id: str
    memories: list[UserFact]


class MemoriesDeleted(BaseModel):
    user_id: str
    deleted: int


# -- documents ------------------------------------------------------------------------------------------


class DocumentIngested(BaseModel):
    tenant: str
    doc_id: str
    source: str
    title: str
    chunks: int
    upserted: int
    deleted: int
    unchanged: bool = Field(description="The document was indexed already with this content")
    faq_entries: int = Field(default=0, description="FAQ entries (questions of FAQ pairs) the document holds")


class DocumentInfo(BaseModel):
    doc_id: str
    source: str | None
    title: str | None
    chunks: int


class DocumentList(BaseModel):
    tenant: str
    documents: list[DocumentInfo]


class DocumentDeleted(BaseModel):
    doc_id: str
    deleted: int = Field(description="Points removed (chunks and FAQ entries)")


# -- ratings, annotations and the FAQ ------------------------------------------------------------------

MAX_ANSWER_CHARS = 20_000


class FeedbackRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    rating: Literal["up", "down"]
    reason: str = Field(default="", max_length=64, description="A short code, e.g. wrong, outdated, off_topic")
    comment: str = Field(default="", max_length=2000)


class FeedbackResponse(BaseModel):
    message_id: str
    rating: Literal["up", "down"]
    reason: str
    comment: str
    updated_at: float


class Tally(BaseModel):
    up: int
    down: int


class RatedSource(BaseModel):
    doc_id: str | None
    source: str | None
    title: str | None
    score: float | None


class RatedTurn(BaseModel):
    message_id: str
    session_id: str
    rating: Literal["up", "down"]
    reason: str
    comment: str
    answer: str | None = Field(description="None when the turn's receipt was not archived")
    rewritten_query: str | None
    mode: str
    turn_kind: str
    intent: str
    sources: list[RatedSource]
    receipt: dict[str, Any] | None


class RatedQuestion(BaseModel):
    question: str
    up: int
    down: int
    turns: list[RatedTurn]


class FeedbackReport(BaseModel):
    tenant: str
    since: float = Field(description="Epoch seconds the report starts at")
    ratings: int
    up: int
    down: int
    by_day: dict[str, Tally]
    by_mode: dict[str, Tally]
    by_turn_kind: dict[str, Tally]
    memory_hit_rate: float | None = Field(description="Share of rated follow-up answers rated up")
    rated_follow_ups: int
    worst: list[RatedQuestion] = Field(description="Questions with thumbs-down ratings, most first")


class AnnotationRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    question: str = Field(min_length=1, max_length=2000)
    answer: str = Field(min_length=1, max_length=MAX_ANSWER_CHARS)
    from_message_id: str | None = Field(default=None, max_length=64)


class AnnotationUpdate(BaseModel):
    model_config = ConfigDict(extra="forbid")
    question: str | None = Field(default=None, min_length=1, max_length=2000)
    answer: str | None = Field(default=None, min_length=1, max_length=MAX_ANSWER_CHARS)


class AnnotationOut(BaseModel):
    id: str
    question: str
    answer: str
    from_message_id: str | None
    created_at: float
    updated_at: float
    source: str
    doc_id: str


class AnnotationList(BaseModel):
    tenant: str
    annotations: list[AnnotationOut]


class FaqEntry(BaseModel):
    """The questions of one FAQ answer (an FAQ file's pair, or an annotation)."""

    doc_id: str
    source: str | None
    answer: str
    questions: list[str | None]


class FaqList(BaseModel):
    tenant: str
    entries: list[FaqEntry]


# -- health ---------------------------------------------------------------------------------------------


class Health(BaseModel):
    status: Literal["ok"]


class Readiness(BaseModel):
    status: Literal["ready", "not ready"]
    checks: dict[str, str] = Field(description='"ok" or the error, by part (qdrant, store, archive)')


# -- OpenAI-compatible ----------------------------------------------------------------------------------


class ChatMessageIn(BaseModel):
    # OpenAI clients send fields this service has no use for (name, tool_call_id, refusal ...).
    model_config = ConfigDict(extra="allow")
    role: Literal["system", "developer", "user", "assistant", "tool", "function"]
    content: str | list[dict[str, Any]] | None = None
    tool_calls: list[dict[str, Any]] | None = None


class ChatCompletionRequest(BaseModel):
    model_config = ConfigDict(extra="allow")
    model: str = Field(default="rag-service", max_length=256)
    messages: list[ChatMessageIn] = Field(min_length=1, max_length=1000)
    stream: bool = False
    user: str | None = Field(default=None, max_length=256)


class AssistantMessage(BaseModel):
    role: Literal["assistant"]
    content: str


class CompletionChoice(BaseModel):
    index: int
    message: AssistantMessage
    # The upstream's ("stop", "length" when it hit max_tokens, ...); "stop" for extractive answers.
    finish_reason: str


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int


class RagExtra(BaseModel):
    """What this service adds to OpenAI's reply."""

    history: Literal["session", "request"] = Field(description="Whose history was the memory")
    mode: str
    rewritten_query: str
    sources: list[Source]
    receipt: Receipt


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"]
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: Usage
    rag: RagExtra
