"""Routes of the knowledge base's learning loop: ratings of answers, the report of the worst-rated ones,
annotations (corrected answers as FAQ entries) and the FAQ list.

Built by a function taking the app's dependencies (as the OpenAI-compatible router is), so this module
does not import the app factory's module. (No `from __future__ import annotations` here: FastAPI reads the
dependency aliases made inside `build_feedback_router` from the signatures, which needs them evaluated.)
"""

import asyncio
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal

from fastapi import APIRouter, Depends, HTTPException, Query
from pydantic import BaseModel, ConfigDict, Field

from rag_service.annotations import Annotations
from rag_service.auth import Permission, Principal
from rag_service.feedback import FeedbackStore, message_id, parse_since, report
from rag_service.sessions.interface import SessionNotFound
from rag_service.wiring import Services

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


def _owned(principal: Principal, session_id: str) -> str:
    if principal.tenant and not session_id.startswith(principal.tenant + ":"):
        raise SessionNotFound(session_id)
    return session_id


def _text(value: str, what: str) -> str:
    if not value.strip():
        raise HTTPException(422, f"{what} is empty")
    return value.strip()


def build_feedback_router(
    get_services: Callable[..., Awaitable[Services]],
    requires: Callable[[Permission], Callable[..., Awaitable[Principal]]],
) -> APIRouter:
    router = APIRouter()
    ServicesDep = Annotated[Services, Depends(get_services)]
    Chatter = Annotated[Principal, Depends(requires(Permission.CHAT))]
    Librarian = Annotated[Principal, Depends(requires(Permission.DOCUMENTS))]
    Admin = Annotated[Principal, Depends(requires(Permission.USERS))]

    def feedback_store(services: Services) -> FeedbackStore:
        if services.feedback is None:
            raise HTTPException(404, "this deployment keeps no archive to store ratings in")
        return services.feedback

    def annotation_store(services: Services) -> Annotations:
        if services.annotations is None:
            raise HTTPException(404, "this deployment keeps no archive to store annotations in")
        return services.annotations

    @router.post("/v1/sessions/{session_id}/messages/{msg_id}/feedback", response_model=FeedbackResponse)
    async def rate(
        session_id: str, msg_id: str, body: FeedbackRequest, services: ServicesDep, principal: Chatter
    ) -> FeedbackResponse:
        """Rate an answer (one rating per answer; a second call changes it)."""
        store = feedback_store(services)
        messages = await services.store.messages(_owned(principal, session_id))
        if not any(m.role == "assistant" and message_id(session_id, m.role, m.created_at) == msg_id for m in messages):
            raise HTTPException(404, f"no answer with id {msg_id} in this session")
        row = await store.rate(principal.tenant, session_id, msg_id, body.rating, body.reason, body.comment)
        turn = await store.turn(principal.tenant, msg_id)
        if turn is None:
            # The receipt is written off the request path; a rating right after the answer waits for it here.
            await services.pipeline.drain()
            turn = await store.turn(principal.tenant, msg_id)
        services.metrics.feedback.labels(
            body.rating, turn.mode if turn else "unknown", turn.kind if turn else "unknown"
        ).inc()
        return FeedbackResponse(**row)

    @router.get("/v1/feedback/report")
    async def feedback_report(
        services: ServicesDep,
        principal: Admin,
        since: Annotated[str, Query(max_length=32, description="7d, 24h, 30m or epoch seconds")] = "7d",
        worst: Annotated[int, Query(ge=1, le=200)] = 20,
    ) -> dict[str, Any]:
        """Ratings by day, mode and turn kind, the memory hit rate, and the worst-rated questions with
        their turns' receipts (admin keys)."""
        try:
            start = parse_since(since)
        except ValueError as exc:
            raise HTTPException(422, str(exc)) from None
        rows = await feedback_store(services).rows(principal.tenant, start)
        return {"tenant": principal.tenant, "since": start, **report(rows, worst=worst)}

    @router.post("/v1/annotations", status_code=201, response_model=AnnotationOut)
    async def create_annotation(body: AnnotationRequest, services: ServicesDep, principal: Librarian) -> AnnotationOut:
        """Store a question/answer pair as an FAQ entry of the caller's tenant's knowledge base."""
        made = await annotation_store(services).create(
            principal.tenant, _text(body.question, "question"), _text(body.answer, "answer"), body.from_message_id
        )
        return AnnotationOut(**made.to_dict())

    @router.get("/v1/annotations")
    async def list_annotations(services: ServicesDep, principal: Librarian) -> dict[str, Any]:
        items = await annotation_store(services).list(principal.tenant)
        return {"tenant": principal.tenant, "annotations": [a.to_dict() for a in items]}

    @router.patch("/v1/annotations/{annotation_id}", response_model=AnnotationOut)
    async def edit_annotation(
        annotation_id: str, body: AnnotationUpdate, services: ServicesDep, principal: Librarian
    ) -> AnnotationOut:
        question = _text(body.question, "question") if body.question is not None else None
        answer = _text(body.answer, "answer") if body.answer is not None else None
        changed = await annotation_store(services).update(principal.tenant, annotation_id, question, answer)
        if changed is None:
            raise HTTPException(404, f"no annotation with id {annotation_id}")
        return AnnotationOut(**changed.to_dict())

    @router.delete("/v1/annotations/{annotation_id}", status_code=204)
    async def delete_annotation(annotation_id: str, services: ServicesDep, principal: Librarian) -> None:
        """Removes the annotation and its FAQ entry; the next turn no longer finds it."""
        if not await annotation_store(services).delete(principal.tenant, annotation_id):
            raise HTTPException(404, f"no annotation with id {annotation_id}")

    @router.get("/v1/faq")
    async def list_faq(services: ServicesDep, principal: Librarian) -> dict[str, Any]:
        """The caller's tenant's FAQ entries (from FAQ files and annotations), grouped by answer."""
        index = services.faq_index
        if index is None:
            return {"tenant": principal.tenant, "entries": []}

        def entries() -> list[dict[str, Any]]:
            out: dict[tuple[str, str], dict[str, Any]] = {}
            for doc_id in index.documents(principal.tenant):
                payloads = index.payloads(sorted(index.doc_point_ids(doc_id, principal.tenant)), principal.tenant)
                for p in payloads.values():
                    key = (doc_id, str(p.get("answer", "")))
                    entry = out.setdefault(
                        key,
                        {"doc_id": doc_id, "source": p.get("source"), "answer": key[1], "questions": []},
                    )
                    entry["questions"].append(p.get("question"))
            return sorted(out.values(), key=lambda e: (str(e["source"]), str(e["answer"])))

        return {"tenant": principal.tenant, "entries": await asyncio.to_thread(entries)}

    return router
