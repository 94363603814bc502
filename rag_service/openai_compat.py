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

import json
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from typing import Annotated, Any, Literal, cast

from fastapi import APIRouter, Depends, Header, HTTPException, Response
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette import EventSourceResponse, ServerSentEvent

from rag_core.tokens import TokenCounter
from rag_service.auth import Principal
from rag_service.domain import Message
from rag_service.pipeline import ChatPipeline, TurnEvents, TurnResult, prime, sources_payload, stream_failure
from rag_service.sessions.interface import SessionNotFound


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


CHAT_COMPLETIONS_PATH = "/v1/chat/completions"

_ERROR_TYPES = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_error"}


def error_object(status: int, message: str) -> dict[str, Any]:
    """OpenAI's error shape: SDKs show `error.message` and tell errors apart by status and `type`."""
    kind = _ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")
    return {"message": message, "type": kind, "param": None, "code": None}


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


def build_router(pipeline_dep: Any, counter_dep: Any, validate_dep: Any, principal_dep: Any) -> APIRouter:
    router = APIRouter()

    @router.post(CHAT_COMPLETIONS_PATH)
    async def chat_completions(
        req: ChatCompletionRequest,
        response: Response,
        pipeline: Annotated[ChatPipeline, Depends(pipeline_dep)],
        counter: Annotated[TokenCounter, Depends(counter_dep)],
        validate: Annotated[Callable[[str], str], Depends(validate_dep)],
        principal: Annotated[Principal, Depends(principal_dep)],
        x_session_id: Annotated[str | None, Header()] = None,
    ) -> Any:
        question, history = split_request(req, counter)
        question = validate(question)
        # `user` is often an end-user label rather than one of our session ids: then the turn is stateless.
        session_id = x_session_id or req.user
        if session_id and principal.tenant and not session_id.startswith(principal.tenant + ":"):
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
        if not x_session_id and session_id:
            # Streaming commits to a session before the first byte; only a known one qualifies.
            try:
                await pipeline.s.store.messages(session_id)
            except SessionNotFound:
                session_id = None
        headers = {"X-Session-Id": session_id} if session_id else {}
        events = cast(
            TurnEvents,
            pipeline.stream(session_id, question, history=_stateless(history, session_id), tenant=principal.tenant),
        )
        head = await prime(events)
        return EventSourceResponse(_chunks(completion_id, req.model, head, events, session_id), headers=headers)

    return router


def _stateless(history: list[Message], session_id: str | None) -> list[Message] | None:
    """The client's history is the memory of a stateless call only; a session has its stored one."""
    return history if session_id is None else None


def _completion(completion_id: str, model: str, result: TurnResult, session_id: str | None) -> dict[str, Any]:
    prompt = int(result.receipt.get("total_prompt_tokens", 0))
    completion = int(result.receipt.get("completion_tokens", 0))
    return {
        "id": completion_id,
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": {"role": "assistant", "content": result.answer}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion},
        "rag": _rag_extra(result, session_id),
    }


def _rag_extra(result: TurnResult, session_id: str | None) -> dict[str, Any]:
    return {
        "history": "session" if session_id else "request",
        "mode": result.mode,
        "rewritten_query": result.rewritten_query,
        "sources": sources_payload(result.sources, result.answer),
        "receipt": result.receipt,
    }


def _chunk(
    completion_id: str, model: str, delta: dict[str, Any], finish: str | None = None, **extra: Any
) -> ServerSentEvent:
    body: dict[str, Any] = {
        "id": completion_id,
        "object": "chat.completion.chunk",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        **extra,
    }
    return ServerSentEvent(json.dumps(body, ensure_ascii=False))


async def _chunks(
    completion_id: str,
    model: str,
    head: list[tuple[str, Any]],
    rest: AsyncGenerator[tuple[str, Any], None],
    session_id: str | None,
) -> AsyncIterator[ServerSentEvent]:
    yield _chunk(completion_id, model, {"role": "assistant", "content": ""})

    async def events() -> AsyncIterator[tuple[str, Any]]:
        for event in head:
            yield event
        if not head or head[-1][0] != "done":
            async for event in rest:
                yield event

    try:
        try:
            async for kind, data in events():
                if kind == "delta":
                    yield _chunk(completion_id, model, {"content": data})
                elif kind == "done":
                    yield _chunk(completion_id, model, {}, "stop", rag=_rag_extra(data, session_id))
        except Exception as exc:
            # After the 200, a failure is an error object in the stream (OpenAI's SDKs raise it), and no
            # [DONE]: the answer is not complete.
            status, detail = stream_failure(exc)
            yield ServerSentEvent(json.dumps({"error": error_object(status, detail)}, ensure_ascii=False))
            return
        yield ServerSentEvent("[DONE]")
    finally:
        await rest.aclose()
