"""Sessions and their chat turns: `/v1/sessions...`."""

from __future__ import annotations

import json
import time
from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query
from sse_starlette import EventSourceResponse, ServerSentEvent

from rag_service import logs
from rag_service.api.deps import (
    AdminDep,
    ChatterDep,
    PipelineDep,
    SettingsDep,
    StoreDep,
    TurnLogDep,
    checked_question,
    owned,
)
from rag_service.api.models import (
    ChatRequest,
    ChatResponse,
    CreateSession,
    MessageList,
    SessionCreated,
    SessionList,
    TaskStateResponse,
    sources,
    turn_json,
)
from rag_service.api.streaming import PrimedTurn, relay
from rag_service.domain import SessionMeta
from rag_service.feedback import message_id
from rag_service.pipeline import Delta, Done, Retrieved, Rewritten, TurnEvent
from rag_service.sessions.interface import SessionCatalog, SessionNotFound, new_session_id

router = APIRouter(prefix="/v1/sessions", tags=["sessions"])

STREAM_DOC = (
    "With `stream: true`, server-sent events: `rewrite` {rewritten_query}, `sources` [Source], `delta` {text} "
    "..., then `done` (a ChatResponse), or `error` {status, detail} when the turn fails after it began."
)


@router.post("", status_code=201, response_model=SessionCreated)
async def create_session(
    settings: SettingsDep, store: StoreDep, principal: ChatterDep, body: CreateSession | None = None
) -> dict[str, str]:
    user = body.user if body else ""
    session_id = new_session_id(settings.session.id_random_bytes, tenant=principal.tenant, user=user)
    await store.create(SessionMeta(session_id=session_id, created_at=time.time(), tenant=principal.tenant, user=user))
    return {"session_id": session_id}


@router.get("/{session_id}/messages", response_model=MessageList)
async def list_messages(session_id: str, store: StoreDep, principal: ChatterDep) -> dict[str, Any]:
    messages = await store.messages(owned(principal, session_id))
    return {
        "session_id": session_id,
        "messages": [
            {
                "id": message_id(session_id, m.role, m.created_at),
                "role": m.role,
                "content": m.content,
                "tokens": m.tokens,
                "created_at": m.created_at,
            }
            for m in messages
        ],
    }


@router.get("/{session_id}/state", response_model=TaskStateResponse)
async def task_state(session_id: str, pipeline: PipelineDep, principal: ChatterDep) -> dict[str, Any]:
    return await pipeline.task_state(owned(principal, session_id))


@router.get("", response_model=SessionList)
async def list_sessions(
    store: StoreDep,
    principal: AdminDep,
    limit: Annotated[int, Query(ge=1, le=500)] = 50,
    offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
) -> dict[str, Any]:
    """The caller's tenant's sessions, most recently active first (admin keys)."""
    if not isinstance(store, SessionCatalog):
        raise HTTPException(404, "this deployment keeps no session archive to list")
    rows = await store.list_sessions(principal.tenant, limit, offset)
    return {"sessions": rows, "limit": limit, "offset": offset}


@router.delete("/{session_id}", status_code=204)
async def delete_session(session_id: str, pipeline: PipelineDep, turn_log: TurnLogDep, principal: ChatterDep) -> None:
    """Ends the session: durable facts about its user are learnt, then it is removed from every store
    (its turns' receipts and ratings too)."""
    if not await pipeline.end_session(owned(principal, session_id), tenant=principal.tenant):
        raise SessionNotFound(session_id)
    if turn_log is not None:
        await turn_log.forget_session(principal.tenant, session_id)


@router.post(
    "/{session_id}/chat",
    response_model=ChatResponse,
    responses={200: {"description": STREAM_DOC, "content": {"text/event-stream": {}}}},
)
async def chat(
    session_id: str, body: ChatRequest, settings: SettingsDep, pipeline: PipelineDep, principal: ChatterDep
) -> Any:
    question = checked_question(settings, body.question)
    owned(principal, session_id)
    logs.session_id.set(session_id)
    if not body.stream:
        return turn_json(await pipeline.answer(session_id, question, tenant=principal.tenant))
    turn = await PrimedTurn.start(pipeline.stream(session_id, question, tenant=principal.tenant))
    return EventSourceResponse(relay(turn, _event, _error))


def _event(event: TurnEvent) -> ServerSentEvent:
    payload: Any
    match event:
        case Rewritten(query):
            kind, payload = "rewrite", {"rewritten_query": query}
        case Retrieved(chunks):
            kind, payload = "sources", sources(chunks)
        case Delta(text):
            kind, payload = "delta", {"text": text}
        case Done(result):
            kind, payload = "done", turn_json(result)
    return ServerSentEvent(json.dumps(payload, ensure_ascii=False), event=kind)


def _error(status: int, detail: str) -> ServerSentEvent:
    return ServerSentEvent(json.dumps({"status": status, "detail": detail}, ensure_ascii=False), event="error")
