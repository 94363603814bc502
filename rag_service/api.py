"""HTTP API: the app factory and its routes. Routes only translate HTTP to pipeline calls and back."""

from __future__ import annotations

import asyncio
import json
import tempfile
import time
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing, asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, cast

from fastapi import Depends, FastAPI, File, Form, HTTPException, Request, UploadFile
from fastapi.responses import JSONResponse
from ingest.pipeline import delete_document, ingest_file
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette import EventSourceResponse, ServerSentEvent

from ingest.loaders import LoadError
from rag_service.domain import SessionMeta
from rag_service.llm import UpstreamError
from rag_service.pipeline import ChatPipeline, QuestionTooLong, TurnResult, sources_payload
from rag_service.settings import Settings
from rag_service.store import SessionBusy, SessionNotFound, new_session_id
from rag_service.wiring import Services, build_services

UPLOAD_BLOCK = 1 << 20


class CreateSession(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user: str = Field(default="", max_length=128, pattern=r"^[A-Za-z0-9_.@-]*$")


class ChatRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")
    question: str = Field(min_length=1, description="The user's question, in any language.")
    stream: bool = False


class Source(BaseModel):
    doc_id: str
    source: str
    title: str
    text: str
    score: float


class ChatResponse(BaseModel):
    answer: str
    mode: str
    rewritten_query: str
    sources: list[Source]
    receipt: dict[str, Any]


def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


def get_pipeline(services: Annotated[Services, Depends(get_services)]) -> ChatPipeline:
    return services.pipeline


ServicesDep = Annotated[Services, Depends(get_services)]
PipelineDep = Annotated[ChatPipeline, Depends(get_pipeline)]


def create_app(settings: Settings | None = None, services: Services | None = None) -> FastAPI:
    """One factory: settings from the environment/YAML unless given; services built at start-up."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if services is not None:
            app.state.services = services
            yield
            return
        built = await asyncio.to_thread(build_services, settings or Settings())
        app.state.services = built
        try:
            yield
        finally:
            await built.close()

    app = FastAPI(title="RAG customer-service chat", version="0.1.0", lifespan=lifespan)
    _install_error_handlers(app)
    _add_routes(app)
    return app


def _install_error_handlers(app: FastAPI) -> None:
    def handler(status: int, message: str) -> Any:
        async def respond(request: Request, exc: Exception) -> JSONResponse:
            return JSONResponse({"detail": message or str(exc)}, status_code=status)

        return respond

    app.add_exception_handler(SessionNotFound, handler(404, "unknown session id"))
    app.add_exception_handler(SessionBusy, handler(409, "another turn of this session is in progress; retry"))
    app.add_exception_handler(QuestionTooLong, handler(422, ""))
    app.add_exception_handler(UpstreamError, handler(502, ""))
    app.add_exception_handler(LoadError, handler(422, ""))


def _validate_question(settings: Settings, question: str) -> str:
    if not question.strip():
        raise HTTPException(422, "question is empty")
    limit = settings.server.max_question_chars
    if len(question) > limit:
        raise HTTPException(422, f"question has {len(question)} characters; the limit is {limit}")
    return question.strip()


def _turn_json(result: TurnResult) -> dict[str, Any]:
    return {
        "answer": result.answer,
        "mode": result.mode,
        "rewritten_query": result.rewritten_query,
        "sources": sources_payload(result.sources),
        "receipt": result.receipt,
    }


def _add_routes(app: FastAPI) -> None:
    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        return {"status": "ok"}

    @app.post("/v1/sessions", status_code=201)
    async def create_session(services: ServicesDep, body: CreateSession | None = None) -> dict[str, str]:
        user = body.user if body else ""
        session_id = new_session_id(services.settings.session.id_random_bytes, user=user)
        await services.store.create(SessionMeta(session_id=session_id, created_at=time.time(), user=user))
        return {"session_id": session_id}

    @app.get("/v1/sessions/{session_id}/messages")
    async def list_messages(session_id: str, services: ServicesDep) -> dict[str, Any]:
        messages = await services.store.messages(session_id)
        return {
            "session_id": session_id,
            "messages": [
                {"role": m.role, "content": m.content, "tokens": m.tokens, "created_at": m.created_at} for m in messages
            ],
        }

    @app.delete("/v1/sessions/{session_id}", status_code=204)
    async def delete_session(session_id: str, services: ServicesDep) -> None:
        if not await services.store.delete(session_id):
            raise SessionNotFound(session_id)

    @app.post("/v1/sessions/{session_id}/chat", response_model=ChatResponse)
    async def chat(session_id: str, body: ChatRequest, services: ServicesDep, pipeline: PipelineDep) -> Any:
        question = _validate_question(services.settings, body.question)
        if not body.stream:
            return _turn_json(await pipeline.answer(session_id, question))
        events = cast(AsyncGenerator[tuple[str, Any], None], pipeline.stream(session_id, question))
        # Run up to the first generated piece before answering, so that an unknown session, a busy
        # session or a failing upstream still gets a proper 4xx/502 instead of a broken stream.
        head: list[tuple[str, Any]] = []
        try:
            async for event in events:
                head.append(event)
                if event[0] in ("delta", "done"):
                    break
        except BaseException:
            await events.aclose()
            raise
        return EventSourceResponse(_sse(head, events))

    @app.post("/v1/documents", status_code=201)
    async def upload_document(
        services: ServicesDep,
        file: Annotated[UploadFile, File(description="A .txt, .md, .html or .pdf document")],
        source: Annotated[str | None, Form(max_length=1024)] = None,
    ) -> dict[str, Any]:
        name = Path(file.filename or "upload.txt").name
        suffix = Path(name).suffix.lower()
        if suffix not in services.settings.ingest.extensions:
            raise HTTPException(
                422,
                f"unsupported file type {suffix or '(none)'}; supported: {', '.join(services.settings.ingest.extensions)}",
            )
        limit = int(services.settings.server.max_upload_mb * (1 << 20))
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / name
            size = 0
            with path.open("wb") as out:
                while block := await file.read(UPLOAD_BLOCK):
                    size += len(block)
                    if size > limit:
                        raise HTTPException(
                            413, f"file is larger than server.max_upload_mb = {services.settings.server.max_upload_mb}"
                        )
                    out.write(block)
            report = await asyncio.to_thread(
                ingest_file,
                path,
                index=services.index,
                embedder=services.embedder,
                counter=services.counter,
                settings=services.settings,
                source=source or f"uploads/{name}",
            )
        return {
            "doc_id": report.doc_id,
            "source": report.source,
            "title": report.title,
            "chunks": report.chunks,
            "upserted": report.upserted,
            "deleted": report.deleted,
            "unchanged": report.unchanged,
        }

    @app.get("/v1/documents")
    async def list_documents(services: ServicesDep) -> dict[str, Any]:
        docs = await asyncio.to_thread(services.index.documents)
        return {"documents": [{"doc_id": k, **v} for k, v in sorted(docs.items(), key=lambda kv: str(kv[1]["source"]))]}

    @app.delete("/v1/documents/{doc_id}")
    async def remove_document(doc_id: str, services: ServicesDep) -> dict[str, Any]:
        removed = await asyncio.to_thread(delete_document, services.index, doc_id)
        if not removed:
            raise HTTPException(404, f"no document with id {doc_id}")
        return {"doc_id": doc_id, "deleted": removed}


async def _sse(
    head: list[tuple[str, Any]], rest: AsyncGenerator[tuple[str, Any], None]
) -> AsyncIterator[ServerSentEvent]:
    async with aclosing(rest):
        for event in head:
            yield _encode(event)
        if head and head[-1][0] == "done":
            return
        async for event in rest:
            yield _encode(event)


def _encode(event: tuple[str, Any]) -> ServerSentEvent:
    kind, data = event
    if kind == "sources":
        payload: Any = sources_payload(data)
    elif kind == "done":
        payload = _turn_json(data)
    elif kind == "rewrite":
        payload = {"rewritten_query": data}
    else:
        payload = {"text": data}
    return ServerSentEvent(json.dumps(payload, ensure_ascii=False), event=kind)
