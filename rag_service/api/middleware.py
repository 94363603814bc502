"""ASGI middleware: the request id and the access log line."""

from __future__ import annotations

import logging
import time
import uuid

from starlette.datastructures import Headers, MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from rag_service import logs

log = logging.getLogger("rag_service.api")


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
