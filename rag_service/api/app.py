"""The one app factory."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from fastapi import FastAPI

from rag_core.settings import Settings
from rag_service import logs
from rag_service.api.errors import install_error_handlers
from rag_service.api.middleware import RequestContext
from rag_service.api.routes import documents, feedback, health, openai, page, sessions, users
from rag_service.privacy import Masker
from rag_service.wiring import Services, build_services


def create_app(settings: Settings | None = None, services: Services | None = None) -> FastAPI:
    """Settings from the environment/YAML unless given; services built at start-up unless given (tests
    and benchmarks hand in services to share their clients, and then own them: they are not closed here)."""

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
    install_error_handlers(app)
    app.add_middleware(RequestContext)
    for module in (page, health, sessions, users, documents, feedback, openai):
        app.include_router(module.router)
    return app
