"""HTTP API: the app factory and its routes. Routes only translate HTTP to pipeline calls and back."""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import math
import tempfile
import threading
import time
import uuid
from collections import defaultdict
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from contextlib import aclosing, asynccontextmanager
from importlib import resources
from pathlib import Path
from typing import Annotated, Any, TypeVar, cast

from fastapi import Depends, FastAPI, File, Form, Header, HTTPException, Query, Request, Response, UploadFile
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse
from prometheus_client import CONTENT_TYPE_LATEST
from pydantic import BaseModel, ConfigDict, Field
from sse_starlette import EventSourceResponse, ServerSentEvent
from starlette.datastructures import Headers, MutableHeaders
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rag_core.documents.loaders import LoadError
from rag_core.documents.pipeline import delete_document, ingest_file
from rag_core.settings import Settings
from rag_core.tokens import TokenCounter
from rag_service import logs
from rag_service.auth import Forbidden, Permission, Principal, RateLimited, Role, Unauthorized, is_loopback
from rag_service.domain import SessionMeta
from rag_service.feedback import message_id
from rag_service.llm import UpstreamError
from rag_service.openai_compat import CHAT_COMPLETIONS_PATH, build_router, error_object
from rag_service.pipeline import (
    ChatPipeline,
    QuestionTooLong,
    TurnEvents,
    TurnResult,
    prime,
    sources_payload,
    stream_failure,
)
from rag_service.privacy import Masker
from rag_service.routes_feedback import build_feedback_router
from rag_service.sessions.interface import (
    SessionBusy,
    SessionCatalog,
    SessionNotFound,
    StoreUnavailable,
    new_session_id,
)
from rag_service.user_memory import UserMemory
from rag_service.wiring import Services, build_services

log = logging.getLogger("rag_service.api")

UPLOAD_BLOCK = 1 << 20
# How long a cancelled upload's worker thread is waited for: it stops at its next check.
UPLOAD_CANCEL_WAIT_S = 30.0
T = TypeVar("T")
STORE_RETRY_AFTER_S = 2


class CreateSession(BaseModel):
    model_config = ConfigDict(extra="forbid")
    user: str = Field(default="", max_length=128, pattern=r"^[A-Za-z0-9_.@-]*$")


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
    answer: str
    mode: str
    rewritten_query: str
    sources: list[Source]
    receipt: dict[str, Any]
    message_id: str | None = Field(default=None, description="The answer's id, for ratings")


async def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


async def get_pipeline(services: Annotated[Services, Depends(get_services)]) -> ChatPipeline:
    return services.pipeline


async def get_counter(services: Annotated[Services, Depends(get_services)]) -> TokenCounter:
    return services.counter


async def get_principal(
    request: Request,
    services: Annotated[Services, Depends(get_services)],
    authorization: Annotated[str | None, Header()] = None,
) -> Principal:
    """Who is calling (tenant and role), and whether their key, session and address still have budget."""
    principal = services.api_keys.authenticate(authorization)
    peer = request.client.host if request.client else None
    open_to_peer = principal.role is not Role.OPEN or services.settings.auth.allow_open
    # rag-serve already refuses to listen beyond loopback without keys; this holds however the app is served.
    if not open_to_peer and peer is not None and not is_loopback(peer):
        raise Forbidden("the API is open (no keys configured) and serves loopback clients only")
    limiter = services.rate_limiter
    if limiter.enabled:
        session_id = request.path_params.get("session_id") or request.headers.get("x-session-id")
        address = limiter.client_address(peer, request.headers.get("x-forwarded-for"))
        await limiter.check(principal, session_id, address)
    return principal


def requires(permission: Permission) -> Callable[[Principal], Awaitable[Principal]]:
    """A dependency: the caller, if their role grants `permission` (else 403)."""

    async def dependency(principal: Annotated[Principal, Depends(get_principal)]) -> Principal:
        return principal.require(permission)

    return dependency


ServicesDep = Annotated[Services, Depends(get_services)]
PipelineDep = Annotated[ChatPipeline, Depends(get_pipeline)]
ChatterDep = Annotated[Principal, Depends(requires(Permission.CHAT))]
LibrarianDep = Annotated[Principal, Depends(requires(Permission.DOCUMENTS))]
AdminDep = Annotated[Principal, Depends(requires(Permission.USERS))]


def _owned(principal: Principal, session_id: str) -> str:
    """A tenant's sessions carry its name as id prefix; any other id is unknown to it (404, not 403)."""
    if principal.tenant and not session_id.startswith(principal.tenant + ":"):
        raise SessionNotFound(session_id)
    return session_id


def create_app(settings: Settings | None = None, services: Services | None = None) -> FastAPI:
    """One factory: settings from the environment/YAML unless given; services built at start-up."""

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if services is not None:
            app.state.services = services
            await services.start()
            yield
            return
        built = await asyncio.to_thread(build_services, settings or Settings())
        obs = built.settings.observability
        logs.configure_logging(obs.json_logs, obs.log_level, Masker.from_settings(built.settings.privacy))
        app.state.services = built
        await built.start()
        try:
            yield
        finally:
            await built.close()

    app = FastAPI(title="RAG customer-service chat", version="0.1.0", lifespan=lifespan)
    app.state.doc_locks = defaultdict(asyncio.Lock)
    _install_error_handlers(app)
    app.add_middleware(RequestContext)
    _add_routes(app)
    app.include_router(build_router(get_pipeline, get_counter, _openai_validate, requires(Permission.CHAT)))
    app.include_router(build_feedback_router(get_services, requires))
    return app


class RequestContext:
    """Request id in every log line of the request (X-Request-Id in and out), and one access log line.

    Plain ASGI rather than `@app.middleware("http")`: Starlette's BaseHTTPMiddleware relays every request
    and response through memory streams and an extra task, a measurable share of a turn's overhead.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        rid = headers.get("x-request-id") or uuid.uuid4().hex[:16]
        token = logs.request_id.set(rid)
        sid_token = logs.session_id.set(headers.get("x-session-id") or "")
        start = time.perf_counter()
        status = 500

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                MutableHeaders(scope=message).append("X-Request-Id", rid)
            await send(message)

        try:
            await self.app(scope, receive, send_with_id)
        finally:
            log.info(
                "request",
                extra={
                    "method": scope["method"],
                    "path": scope["path"],
                    "status": status,
                    "duration_ms": logs.elapsed_ms(start),
                },
            )
            logs.request_id.reset(token)
            logs.session_id.reset(sid_token)


def error_response(request: Request, status: int, detail: Any, headers: dict[str, str] | None = None) -> JSONResponse:
    """`{"detail": ...}` everywhere; the OpenAI-compatible route also gets OpenAI's `{"error": {...}}`."""
    body: dict[str, Any] = {"detail": detail}
    if request.url.path == CHAT_COMPLETIONS_PATH:
        body["error"] = error_object(status, detail if isinstance(detail, str) else _first_problem(detail))
    return JSONResponse(body, status_code=status, headers=headers)


def _first_problem(errors: Any) -> str:
    first = errors[0] if isinstance(errors, list) and errors and isinstance(errors[0], dict) else {}
    where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
    return f"{where}: {first.get('msg', 'invalid request')}" if where else str(first.get("msg", "invalid request"))


def _install_error_handlers(app: FastAPI) -> None:
    def handler(status: int, message: str) -> Any:
        async def respond(request: Request, exc: Exception) -> JSONResponse:
            return error_response(request, status, message or str(exc))

        return respond

    app.add_exception_handler(SessionNotFound, handler(404, "unknown session id"))
    app.add_exception_handler(SessionBusy, handler(409, "another turn of this session is in progress; retry"))
    app.add_exception_handler(QuestionTooLong, handler(422, ""))
    app.add_exception_handler(UpstreamError, handler(502, ""))
    app.add_exception_handler(LoadError, handler(422, ""))
    app.add_exception_handler(Forbidden, handler(403, ""))

    async def unauthorized(request: Request, exc: Exception) -> JSONResponse:
        return error_response(request, 401, str(exc), {"WWW-Authenticate": "Bearer"})

    async def rate_limited(request: Request, exc: Exception) -> JSONResponse:
        retry = exc.retry_after_s if isinstance(exc, RateLimited) else 1.0
        return error_response(request, 429, str(exc), {"Retry-After": str(max(1, math.ceil(retry)))})

    async def http_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, StarletteHTTPException)
        headers = dict(exc.headers or {})
        if exc.status_code in (204, 304) or exc.status_code < 200:
            return Response(status_code=exc.status_code, headers=headers)  # no body allowed
        return error_response(request, exc.status_code, exc.detail, headers)

    async def invalid(request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return error_response(request, 422, jsonable_encoder(exc.errors()))

    app.add_exception_handler(Unauthorized, unauthorized)

    async def unavailable(request: Request, exc: Exception) -> JSONResponse:
        # Nothing was changed by the failed request; the client may retry as soon as the part is back.
        return error_response(request, 503, str(exc), {"Retry-After": str(STORE_RETRY_AFTER_S)})

    app.add_exception_handler(RateLimited, rate_limited)
    app.add_exception_handler(StoreUnavailable, unavailable)

    async def client_gone(request: Request, exc: Exception) -> Response:
        return Response(status_code=499)  # never read: the connection is gone

    app.add_exception_handler(ClientGone, client_gone)
    app.add_exception_handler(StarletteHTTPException, http_error)
    app.add_exception_handler(RequestValidationError, invalid)


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
        "sources": sources_payload(result.sources, result.answer),
        "receipt": result.receipt,
        "message_id": result.message_id,
    }


def _add_routes(app: FastAPI) -> None:
    @app.get("/", response_class=HTMLResponse, include_in_schema=False)
    async def web_page() -> HTMLResponse:
        page = resources.files("rag_service").joinpath("static", "index.html").read_text(encoding="utf-8")
        return HTMLResponse(page)

    @app.get("/healthz")
    async def healthz() -> dict[str, str]:
        """Liveness: the process answers."""
        return {"status": "ok"}

    @app.get("/readyz")
    async def readyz(services: ServicesDep) -> JSONResponse:
        """Readiness: Qdrant, the live session store and the archive database answer (each checked on
        its own, so the report names the part that is down)."""
        checks: dict[str, str] = {}
        probes: list[tuple[str, Callable[[], Awaitable[None]]]] = [
            ("qdrant", lambda: asyncio.to_thread(services.index.ping)),
            *services.store.probes(),
        ]
        for name, probe in probes:
            try:
                await asyncio.wait_for(probe(), services.settings.qdrant.timeout_s)
                checks[name] = "ok"
            except Exception as exc:
                checks[name] = f"error: {type(exc).__name__}: {exc}"[:300]
        ready = all(v == "ok" for v in checks.values())
        return JSONResponse({"status": "ready" if ready else "not ready", "checks": checks}, 200 if ready else 503)

    @app.get("/metrics", include_in_schema=False)
    async def metrics(services: ServicesDep) -> Response:
        return Response(services.metrics.render(), media_type=CONTENT_TYPE_LATEST)

    @app.post("/v1/sessions", status_code=201)
    async def create_session(
        services: ServicesDep, principal: ChatterDep, body: CreateSession | None = None
    ) -> dict[str, str]:
        user = body.user if body else ""
        session_id = new_session_id(services.settings.session.id_random_bytes, tenant=principal.tenant, user=user)
        meta = SessionMeta(session_id=session_id, created_at=time.time(), tenant=principal.tenant, user=user)
        await services.store.create(meta)
        return {"session_id": session_id}

    @app.get("/v1/sessions/{session_id}/messages")
    async def list_messages(session_id: str, services: ServicesDep, principal: ChatterDep) -> dict[str, Any]:
        messages = await services.store.messages(_owned(principal, session_id))
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

    @app.get("/v1/sessions", response_model=SessionList)
    async def list_sessions(
        services: ServicesDep,
        principal: AdminDep,
        limit: Annotated[int, Query(ge=1, le=500)] = 50,
        offset: Annotated[int, Query(ge=0, le=1_000_000)] = 0,
    ) -> SessionList:
        """The caller's tenant's sessions, most recently active first (admin keys)."""
        if not isinstance(services.store, SessionCatalog):
            raise HTTPException(404, "this deployment keeps no session archive to list")
        rows = await services.store.list_sessions(principal.tenant, limit, offset)
        return SessionList(sessions=[SessionSummary(**r) for r in rows], limit=limit, offset=offset)

    @app.delete("/v1/sessions/{session_id}", status_code=204)
    async def delete_session(
        session_id: str, services: ServicesDep, pipeline: PipelineDep, principal: ChatterDep
    ) -> None:
        """Ends the session: durable facts about its user are learnt, then it is removed from every store
        (its turns' receipts and ratings too)."""
        if not await pipeline.end_session(_owned(principal, session_id), tenant=principal.tenant):
            raise SessionNotFound(session_id)
        if services.feedback is not None:
            await services.feedback.forget_session(principal.tenant, session_id)

    @app.get("/v1/users/{user_id}/memories")
    async def user_memories(user_id: str, pipeline: PipelineDep, principal: AdminDep) -> dict[str, Any]:
        um = _user_memory(pipeline)
        facts = await um.store.list_memories(UserMemory.key(principal.tenant, user_id))
        return {
            "user_id": user_id,
            "memories": [
                {"id": f.id, "fact": f.fact, "source_session": f.source_session, "updated_at": f.updated_at}
                for f in cast(list[Any], facts)
            ],
        }

    @app.delete("/v1/users/{user_id}/memories")
    async def forget_user(user_id: str, pipeline: PipelineDep, principal: AdminDep) -> dict[str, Any]:
        um = _user_memory(pipeline)
        key = UserMemory.key(principal.tenant, user_id)
        deleted = await cast(Any, um.store).delete_memories(key)
        um.forget(key)
        return {"user_id": user_id, "deleted": deleted}

    @app.post("/v1/sessions/{session_id}/chat", response_model=ChatResponse)
    async def chat(
        session_id: str, body: ChatRequest, services: ServicesDep, pipeline: PipelineDep, principal: ChatterDep
    ) -> Any:
        question = _validate_question(services.settings, body.question)
        _owned(principal, session_id)
        logs.session_id.set(session_id)
        if not body.stream:
            return _turn_json(await pipeline.answer(session_id, question, tenant=principal.tenant))
        events = cast(TurnEvents, pipeline.stream(session_id, question, tenant=principal.tenant))
        return EventSourceResponse(_sse(await prime(events), events))

    @app.post("/v1/documents", status_code=201)
    async def upload_document(
        request: Request,
        services: ServicesDep,
        principal: LibrarianDep,
        file: Annotated[
            UploadFile, File(description="A .txt, .md, .html, .pdf, .docx, .pptx or .xlsx document, or a .csv FAQ")
        ],
        source: Annotated[str | None, Form(max_length=1024)] = None,
    ) -> dict[str, Any]:
        name = Path(file.filename or "upload.txt").name
        suffix = Path(name).suffix.lower()
        name = Path(name).stem + suffix
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
            doc_source = source or f"uploads/{name}"
            # Two uploads of one document at once would each delete the other's fresh chunks.
            async with request.app.state.doc_locks[(principal.tenant, doc_source)]:
                report = await _unless_client_leaves(
                    request,
                    lambda cancel: ingest_file(
                        path,
                        index=services.index,
                        embedder=services.embedder,
                        counter=services.counter,
                        settings=services.settings,
                        source=doc_source,
                        tenant=principal.tenant,
                        cancel=cancel,
                        faq_index=services.faq_index,
                    ),
                )
        return {
            "tenant": principal.tenant,
            "doc_id": report.doc_id,
            "source": report.source,
            "title": report.title,
            "chunks": report.chunks,
            "upserted": report.upserted,
            "deleted": report.deleted,
            "unchanged": report.unchanged,
            "faq_entries": report.faq_entries,
        }

    @app.get("/v1/documents")
    async def list_documents(services: ServicesDep, principal: LibrarianDep) -> dict[str, Any]:
        """The caller's tenant's documents."""
        docs = await asyncio.to_thread(services.index.documents, principal.tenant)
        ordered = sorted(docs.items(), key=lambda kv: str(kv[1]["source"]))
        return {"tenant": principal.tenant, "documents": [{"doc_id": k, **v} for k, v in ordered]}

    @app.delete("/v1/documents/{doc_id}")
    async def remove_document(doc_id: str, services: ServicesDep, principal: LibrarianDep) -> dict[str, Any]:
        """Removes one of the caller's tenant's documents; another tenant's is unknown here (404)."""
        removed = await asyncio.to_thread(delete_document, services.index, doc_id, principal.tenant, services.faq_index)
        if not removed:
            raise HTTPException(404, f"no document with id {doc_id}")
        return {"doc_id": doc_id, "deleted": removed}


async def _unless_client_leaves(request: Request, work: Callable[[threading.Event], T]) -> T:
    """`work(cancel)` in a worker thread, off the event loop. If the client disconnects, or this request
    is cancelled (the server stopping), `cancel` is set, which kills a PDF parser and stops indexing at
    the next batch; the thread is waited for (briefly) so the document's lock outlives its cleanup."""
    cancel = threading.Event()
    job = asyncio.ensure_future(asyncio.to_thread(work, cancel))
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({job, gone}, return_when=asyncio.FIRST_COMPLETED)
        if not job.done():
            raise ClientGone()
        return job.result()
    finally:
        gone.cancel()
        if not job.done():
            cancel.set()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(job), UPLOAD_CANCEL_WAIT_S)


async def _disconnected(request: Request) -> None:
    # The body has been read by now: the next message is the disconnect (or the end of the response).
    while (await request.receive())["type"] != "http.disconnect":
        pass


class ClientGone(Exception):
    """The client left before the response; nobody reads it."""


async def _sse(
    head: list[tuple[str, Any]], rest: AsyncGenerator[tuple[str, Any], None]
) -> AsyncIterator[ServerSentEvent]:
    async with aclosing(rest):
        for event in head:
            yield _encode(event)
        if head and head[-1][0] == "done":
            return
        try:
            async for event in rest:
                yield _encode(event)
        except Exception as exc:
            # The 200 is sent: a failure after it ends the stream with an `error` event, not a cut connection.
            status, detail = stream_failure(exc)
            yield ServerSentEvent(json.dumps({"status": status, "detail": detail}, ensure_ascii=False), event="error")


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


def _user_memory(pipeline: ChatPipeline) -> UserMemory:
    if pipeline.s.user_memory is None:
        raise HTTPException(404, "long-term user memory is disabled (user_memory.enabled) or has no archive")
    return pipeline.s.user_memory


async def _openai_validate(request: Request) -> Callable[[str], str]:
    services: Services = request.app.state.services
    return lambda question: _validate_question(services.settings, question)
