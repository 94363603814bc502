"""Errors as HTTP: every failure is JSON `{"detail": ...}` with its status; the OpenAI-compatible route
also gets OpenAI's `{"error": {...}}`, and a streamed turn that fails after its 200 reports in-band."""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable
from typing import Any

from fastapi import FastAPI, Request, Response
from fastapi.encoders import jsonable_encoder
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException as StarletteHTTPException

from rag_core.documents.loaders import LoadError
from rag_service.auth import Forbidden, RateLimited, Unauthorized
from rag_service.llm import UpstreamError
from rag_service.pipeline import QuestionTooLong
from rag_service.sessions.interface import SessionBusy, SessionNotFound, StoreUnavailable

log = logging.getLogger(__name__)

CHAT_COMPLETIONS_PATH = "/v1/chat/completions"
STORE_RETRY_AFTER_S = 2
_OPENAI_ERROR_TYPES = {401: "authentication_error", 403: "permission_error", 429: "rate_limit_error"}


class ClientGone(Exception):
    """The client left before the response; nobody reads it."""


def error_object(status: int, message: str) -> dict[str, Any]:
    """OpenAI's error shape: SDKs show `error.message` and tell errors apart by status and `type`."""
    kind = _OPENAI_ERROR_TYPES.get(status, "invalid_request_error" if status < 500 else "api_error")
    return {"message": message, "type": kind, "param": None, "code": None}


def error_response(request: Request, status: int, detail: Any, headers: dict[str, str] | None = None) -> JSONResponse:
    body: dict[str, Any] = {"detail": detail}
    if request.url.path == CHAT_COMPLETIONS_PATH:
        body["error"] = error_object(status, detail if isinstance(detail, str) else _first_problem(detail))
    return JSONResponse(body, status_code=status, headers=headers)


def _first_problem(errors: Any) -> str:
    first = errors[0] if isinstance(errors, list) and errors and isinstance(errors[0], dict) else {}
    where = ".".join(str(p) for p in first.get("loc", ()) if p != "body")
    return f"{where}: {first.get('msg', 'invalid request')}" if where else str(first.get("msg", "invalid request"))


def stream_failure(exc: Exception) -> tuple[int, str]:
    """The HTTP status and message of a turn that failed after its stream began (reported in-band)."""
    if isinstance(exc, UpstreamError):
        return 502, str(exc)
    if isinstance(exc, StoreUnavailable):
        return 503, str(exc)
    log.error("a streamed turn failed", exc_info=exc)
    return 500, "internal error"


Handler = Callable[[Request, Exception], Awaitable[Response]]


def _fixed(status: int, message: str = "") -> Handler:
    """The status, with `message` or else the exception's own text as detail."""

    async def respond(request: Request, exc: Exception) -> Response:
        return error_response(request, status, message or str(exc))

    return respond


async def _unauthorized(request: Request, exc: Exception) -> Response:
    return error_response(request, 401, str(exc), {"WWW-Authenticate": "Bearer"})


async def _rate_limited(request: Request, exc: Exception) -> Response:
    retry = exc.retry_after_s if isinstance(exc, RateLimited) else 1.0
    return error_response(request, 429, str(exc), {"Retry-After": str(max(1, math.ceil(retry)))})


async def _unavailable(request: Request, exc: Exception) -> Response:
    # Nothing was changed by the failed request; the client may retry as soon as the part is back.
    return error_response(request, 503, str(exc), {"Retry-After": str(STORE_RETRY_AFTER_S)})


async def _client_gone(request: Request, exc: Exception) -> Response:
    return Response(status_code=499)  # never read: the connection is gone


async def _http_error(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, StarletteHTTPException)
    headers = dict(exc.headers or {})
    if exc.status_code in (204, 304) or exc.status_code < 200:
        return Response(status_code=exc.status_code, headers=headers)  # no body allowed
    return error_response(request, exc.status_code, exc.detail, headers)


async def _invalid(request: Request, exc: Exception) -> Response:
    assert isinstance(exc, RequestValidationError)
    return error_response(request, 422, jsonable_encoder(exc.errors()))


HANDLERS: dict[type[Exception], Handler] = {
    SessionNotFound: _fixed(404, "unknown session id"),
    SessionBusy: _fixed(409, "another turn of this session is in progress; retry"),
    QuestionTooLong: _fixed(422),
    UpstreamError: _fixed(502),
    LoadError: _fixed(422),
    Forbidden: _fixed(403),
    Unauthorized: _unauthorized,
    RateLimited: _rate_limited,
    StoreUnavailable: _unavailable,
    ClientGone: _client_gone,
    StarletteHTTPException: _http_error,
    RequestValidationError: _invalid,
}


def install_error_handlers(app: FastAPI) -> None:
    for exc_type, handler in HANDLERS.items():
        app.add_exception_handler(exc_type, handler)
