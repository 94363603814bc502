"""`POST /v1/chat/completions` in OpenAI's format, so any OpenAI SDK or chat frontend works unchanged.

The session comes from the `X-Session-Id` header (an id this server issued, else 404) or from the
`user` field when it names such a session. With a session, the stored conversation is the memory: of
`messages` only the last user message (the question) is read, and the earlier ones are ignored. The
stored copy is the one the service masked, summarised and numbered; a client's copy differs after a
retry, a regenerate or an edit, and never carries the summary, so it cannot also be the memory (plans
made over it were applied to the stored session at the wrong offsets). Without a session the call is
stateless: the client's history, with the configured memory strategy applied, and nothing stored.
`rag.history` in the reply says which one was used ("session" or "request"). Client system messages are
ignored: the service's own system prompt rules.
"""

from __future__ import annotations

import json
import time
import uuid
from typing import Annotated, Any, Literal, cast

from fastapi import APIRouter, Header, HTTPException, Response
from sse_starlette import EventSourceResponse, ServerSentEvent

from rag_core.tokens import TokenCounter
from rag_service.api.deps import ChatterDep, CounterDep, PipelineDep, SettingsDep, checked_question
from rag_service.api.errors import CHAT_COMPLETIONS_PATH, error_object
from rag_service.api.models import ChatCompletion, ChatCompletionRequest, sources
from rag_service.api.streaming import PrimedTurn, relay
from rag_service.domain import Message
from rag_service.pipeline import Delta, Done, TurnEvent, TurnResult
from rag_service.sessions.interface import SessionNotFound

router = APIRouter(tags=["openai"])


def content_text(content: str | list[dict[str, Any]] | None) -> str:
    """Text of a message: a string, null, or a list of parts (only text parts count)."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    return "\n".join(str(p.get("text", "")) for p in content if isinstance(p, dict) and p.get("type") == "text")


def split_request(req: ChatCompletionRequest, counter: TokenCounter) -> tuple[str, list[Message]]:
    """The question (last user message) and the earlier user/assistant messages as history."""
    convo = [m for m in req.messages if m.role in ("user", "assistant")]
    if not convo or convo[-1].role != "user":
        raise HTTPException(422, "the last user/assistant message must be a user message with the question")
    question = content_text(convo[-1].content).strip()
    if not question:
        raise HTTPException(422, "the last user message has no text content")
    now = time.time()
    history = []
    for m in convo[:-1]:
        text = content_text(m.content)
        # An assistant turn that only called tools has no text to remember.
        if m.role == "assistant" and not text:
            continue
        history.append(Message(cast(Literal["user", "assistant"], m.role), text, counter.count(text), now))
    return question, history


@router.post(
    CHAT_COMPLETIONS_PATH,
    response_model=ChatCompletion,
    responses={
        200: {"description": "With `stream: true`, OpenAI's chunk stream", "content": {"text/event-stream": {}}}
    },
)
async def chat_completions(
    req: ChatCompletionRequest,
    response: Response,
    settings: SettingsDep,
    pipeline: PipelineDep,
    counter: CounterDep,
    principal: ChatterDep,
    x_session_id: Annotated[str | None, Header()] = None,
) -> Any:
    question, history = split_request(req, counter)
    question = checked_question(settings, question)
    # `user` is often an end-user label rather than one of our session ids: then the turn is stateless.
    session_id = x_session_id or req.user
    if session_id and not principal.owns(session_id):
        if x_session_id:
            raise SessionNotFound(session_id)
        session_id = None
    completion_id = f"chatcmpl-{uuid.uuid4().hex}"
    if not req.stream:
        try:
            result = await pipeline.answer(
                session_id, question, history=_stateless(history, session_id), tenant=principal.tenant
            )
        except SessionNotFound:
            if x_session_id or session_id is None:
                raise
            session_id = None
            result = await pipeline.answer(None, question, history=history, tenant=principal.tenant)
        if session_id:
            response.headers["X-Session-Id"] = session_id
        return _completion(completion_id, req.model, result, session_id)
    # Streaming commits to a session before the first byte; only a known one qualifies.
    if not x_session_id and session_id and not await pipeline.has_session(session_id):
        session_id = None
    turn = await PrimedTurn.start(
        pipeline.stream(session_id, question, history=_stateless(history, session_id), tenant=principal.tenant)
    )
    chunks = _Chunks(completion_id, req.model, session_id)
    return EventSourceResponse(
        relay(
            turn,
            chunks.encode,
            chunks.failure,
            before=[chunks.chunk({"role": "assistant", "content": ""})],
            after=[ServerSentEvent("[DONE]")],
        ),
        headers={"X-Session-Id": session_id} if session_id else {},
    )


def _stateless(history: list[Message], session_id: str | None) -> list[Message] | None:
    """The client's history is the memory of a stateless call only; a session has its stored one."""
    return history if session_id is None else None


def _usage(result: TurnResult) -> dict[str, int]:
    """The upstream's token usage (the receipt's, counted here when the upstream gave none)."""
    usage = result.receipt["usage"]
    return {k: int(usage[k]) for k in ("prompt_tokens", "completion_tokens", "total_tokens")}


def _completion(completion_id: str, model: str, result: TurnResult, session_id: str | None) -> dict[str, Any]:
    message = {"role": "assistant", "content": result.answer}
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": result.receipt["finish_reason"]}],
        "usage": _usage(result),
        "rag": _rag_extra(result, session_id),
    }


def _rag_extra(result: TurnResult, session_id: str | None) -> dict[str, Any]:
    return {
        "history": "session" if session_id else "request",
        "mode": result.mode,
        "rewritten_query": result.rewritten_query,
        "sources": sources(result.sources, result.answer),
        "receipt": result.receipt,
    }


class _Chunks:
    """OpenAI's `chat.completion.chunk` events of one streamed completion."""

    def __init__(self, completion_id: str, model: str, session_id: str | None) -> None:
        self.completion_id, self.model, self.session_id = completion_id, model, session_id

    def chunk(self, delta: dict[str, Any], finish: str | None = None, **extra: Any) -> ServerSentEvent:
        body: dict[str, Any] = {
            "id": self.completion_id,
            "object": "chat.completion.chunk",
            "created": int(time.time()),
            "model": self.model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
            **extra,
        }
        return ServerSentEvent(json.dumps(body, ensure_ascii=False))

    def encode(self, event: TurnEvent) -> ServerSentEvent | None:
        if isinstance(event, Delta):
            return self.chunk({"content": event.text})
        if isinstance(event, Done):
            result = event.result
            extra = _rag_extra(result, self.session_id)
            return self.chunk({}, result.receipt["finish_reason"], usage=_usage(result), rag=extra)
        return None

    def failure(self, status: int, detail: str) -> ServerSentEvent:
        # An error object in the stream (OpenAI's SDKs raise it), and no [DONE]: the answer is not complete.
        return ServerSentEvent(json.dumps({"error": error_object(status, detail)}, ensure_ascii=False))
