"""The knowledge base's learning loop: ratings of answers (`/v1/sessions/{id}/messages/{id}/feedback`), the
report of the worst-rated ones (`/v1/feedback/report`), annotations (corrected answers as FAQ entries,
`/v1/annotations`) and the FAQ list (`/v1/faq`)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, HTTPException, Query

from rag_service.api.deps import (
    AdminDep,
    AnnotationsDep,
    ChatterDep,
    FeedbackDep,
    LibrarianDep,
    LibraryDep,
    MetricsDep,
    PipelineDep,
    StoreDep,
    owned,
)
from rag_service.api.models import (
    AnnotationList,
    AnnotationOut,
    AnnotationRequest,
    AnnotationUpdate,
    FaqList,
    FeedbackReport,
    FeedbackRequest,
    FeedbackResponse,
)
from rag_service.feedback import message_id, parse_since, report

router = APIRouter(tags=["feedback"])


def _text(value: str, what: str) -> str:
    if not value.strip():
        raise HTTPException(422, f"{what} is empty")
    return value.strip()


@router.post("/v1/sessions/{session_id}/messages/{msg_id}/feedback", response_model=FeedbackResponse)
async def rate(
    session_id: str,
    msg_id: str,
    body: FeedbackRequest,
    feedback: FeedbackDep,
    store: StoreDep,
    pipeline: PipelineDep,
    metrics: MetricsDep,
    principal: ChatterDep,
) -> dict[str, Any]:
    """Rate an answer (one rating per answer; a second call changes it)."""
    messages = await store.messages(owned(principal, session_id))
    if not any(m.role == "assistant" and message_id(session_id, m.role, m.created_at) == msg_id for m in messages):
        raise HTTPException(404, f"no answer with id {msg_id} in this session")
    row = await feedback.rate(principal.tenant, session_id, msg_id, body.rating, body.reason, body.comment)
    turn = await feedback.turn(principal.tenant, msg_id)
    if turn is None:
        # The receipt is written off the request path; a rating right after the answer waits for it here.
        await pipeline.drain()
        turn = await feedback.turn(principal.tenant, msg_id)
    metrics.feedback.labels(body.rating, turn.mode if turn else "unknown", turn.kind if turn else "unknown").inc()
    return row


@router.get("/v1/feedback/report", response_model=FeedbackReport)
async def feedback_report(
    feedback: FeedbackDep,
    principal: AdminDep,
    since: Annotated[str, Query(max_length=32, description="7d, 24h, 30m or epoch seconds")] = "7d",
    worst: Annotated[int, Query(ge=1, le=200)] = 20,
) -> dict[str, Any]:
    """Ratings by day, mode and turn kind, the memory hit rate, and the worst-rated questions with their
    turns' receipts (admin keys)."""
    try:
        start = parse_since(since)
    except ValueError as exc:
        raise HTTPException(422, str(exc)) from None
    rows = await feedback.rows(principal.tenant, start)
    return {"tenant": principal.tenant, "since": start, **report(rows, worst=worst)}


@router.post("/v1/annotations", status_code=201, response_model=AnnotationOut)
async def create_annotation(
    body: AnnotationRequest, annotations: AnnotationsDep, principal: LibrarianDep
) -> dict[str, Any]:
    """Store a question/answer pair as an FAQ entry of the caller's tenant's knowledge base."""
    made = await annotations.create(
        principal.tenant, _text(body.question, "question"), _text(body.answer, "answer"), body.from_message_id
    )
    return made.to_dict()


@router.get("/v1/annotations", response_model=AnnotationList)
async def list_annotations(annotations: AnnotationsDep, principal: LibrarianDep) -> dict[str, Any]:
    items = await annotations.list(principal.tenant)
    return {"tenant": principal.tenant, "annotations": [a.to_dict() for a in items]}


@router.patch("/v1/annotations/{annotation_id}", response_model=AnnotationOut)
async def edit_annotation(
    annotation_id: str, body: AnnotationUpdate, annotations: AnnotationsDep, principal: LibrarianDep
) -> dict[str, Any]:
    question = _text(body.question, "question") if body.question is not None else None
    answer = _text(body.answer, "answer") if body.answer is not None else None
    changed = await annotations.update(principal.tenant, annotation_id, question, answer)
    if changed is None:
        raise HTTPException(404, f"no annotation with id {annotation_id}")
    return changed.to_dict()


@router.delete("/v1/annotations/{annotation_id}", status_code=204)
async def delete_annotation(annotation_id: str, annotations: AnnotationsDep, principal: LibrarianDep) -> None:
    """Removes the annotation and its FAQ entry; the next turn no longer finds it."""
    if not await annotations.delete(principal.tenant, annotation_id):
        raise HTTPException(404, f"no annotation with id {annotation_id}")


@router.get("/v1/faq", response_model=FaqList)
async def list_faq(library: LibraryDep, principal: LibrarianDep) -> dict[str, Any]:
    """The caller's tenant's FAQ entries (from FAQ files and annotations), grouped by answer."""
    return {"tenant": principal.tenant, "entries": await library.faq_entries(principal.tenant)}
