"""Liveness, readiness and Prometheus metrics (no key needed: keep them internal at the proxy)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from fastapi import APIRouter, Response
from prometheus_client import CONTENT_TYPE_LATEST

from rag_service.api.deps import ServicesDep
from rag_service.api.models import Health, Readiness

router = APIRouter(tags=["health"])


@router.get("/healthz", response_model=Health)
async def healthz() -> dict[str, str]:
    """Liveness: the process answers."""
    return {"status": "ok"}


@router.get("/readyz", response_model=Readiness, responses={503: {"model": Readiness, "description": "Not ready"}})
async def readyz(services: ServicesDep, response: Response) -> Readiness:
    """Readiness: Qdrant, the live session store and the archive database answer (each checked on its own,
    so the report names the part that is down)."""
    checks: dict[str, str] = {}
    probes: list[tuple[str, Callable[[], Awaitable[None]]]] = [
        ("qdrant", services.index.ping),
        *services.store.probes(),
    ]
    for name, probe in probes:
        try:
            await asyncio.wait_for(probe(), services.settings.qdrant.timeout_s)
            checks[name] = "ok"
        except Exception as exc:
            checks[name] = f"error: {type(exc).__name__}: {exc}"[:300]
    ready = all(v == "ok" for v in checks.values())
    response.status_code = 200 if ready else 503
    return Readiness(status="ready" if ready else "not ready", checks=checks)


@router.get("/metrics", include_in_schema=False)
async def metrics(services: ServicesDep) -> Response:
    return Response(services.metrics.render(), media_type=CONTENT_TYPE_LATEST)
