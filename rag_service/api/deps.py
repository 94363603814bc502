"""The routes' dependencies, as `Annotated` aliases: a route names what it needs (`PipelineDep`,
`ChatterDep` ...) and FastAPI hands it over. All async: a plain `def` dependency would run in a worker
thread on every request."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated

from fastapi import Depends, Header, HTTPException, Request

from rag_core.settings import Settings
from rag_core.tokens import TokenCounter
from rag_service.annotations import Annotations
from rag_service.auth import Forbidden, Permission, Principal, Role, is_loopback
from rag_service.feedback import FeedbackStore
from rag_service.library import Library
from rag_service.metrics import Metrics
from rag_service.pipeline import ChatPipeline
from rag_service.sessions.interface import SessionNotFound, SessionStore
from rag_service.user_memory import UserMemory
from rag_service.wiring import Services


async def get_services(request: Request) -> Services:
    services: Services = request.app.state.services
    return services


ServicesDep = Annotated[Services, Depends(get_services)]


async def get_settings(services: ServicesDep) -> Settings:
    return services.settings


async def get_pipeline(services: ServicesDep) -> ChatPipeline:
    return services.pipeline


async def get_counter(services: ServicesDep) -> TokenCounter:
    return services.counter


async def get_store(services: ServicesDep) -> SessionStore:
    return services.store


async def get_library(services: ServicesDep) -> Library:
    return services.library


async def get_user_memory(services: ServicesDep) -> UserMemory:
    if services.user_memory is None:
        raise HTTPException(404, "long-term user memory is disabled (user_memory.enabled) or has no archive")
    return services.user_memory


async def get_metrics(services: ServicesDep) -> Metrics:
    return services.metrics


async def get_turn_log(services: ServicesDep) -> FeedbackStore | None:
    """Where turns' receipts and ratings are kept; None without an archive."""
    return services.feedback


async def get_feedback(turn_log: Annotated[FeedbackStore | None, Depends(get_turn_log)]) -> FeedbackStore:
    if turn_log is None:
        raise HTTPException(404, "this deployment keeps no archive to store ratings in")
    return turn_log


async def get_annotations(services: ServicesDep) -> Annotations:
    if services.annotations is None:
        raise HTTPException(404, "this deployment keeps no archive to store annotations in")
    return services.annotations


SettingsDep = Annotated[Settings, Depends(get_settings)]
PipelineDep = Annotated[ChatPipeline, Depends(get_pipeline)]
CounterDep = Annotated[TokenCounter, Depends(get_counter)]
StoreDep = Annotated[SessionStore, Depends(get_store)]
LibraryDep = Annotated[Library, Depends(get_library)]
UserMemoryDep = Annotated[UserMemory, Depends(get_user_memory)]
MetricsDep = Annotated[Metrics, Depends(get_metrics)]
TurnLogDep = Annotated[FeedbackStore | None, Depends(get_turn_log)]
FeedbackDep = Annotated[FeedbackStore, Depends(get_feedback)]
AnnotationsDep = Annotated[Annotations, Depends(get_annotations)]


async def get_principal(
    request: Request, services: ServicesDep, authorization: Annotated[str | None, Header()] = None
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


def requires(permission: Permission) -> Callable[..., Awaitable[Principal]]:
    """A dependency: the caller, if their role grants `permission` (else 403)."""

    async def dependency(principal: Annotated[Principal, Depends(get_principal)]) -> Principal:
        return principal.require(permission)

    return dependency


ChatterDep = Annotated[Principal, Depends(requires(Permission.CHAT))]
LibrarianDep = Annotated[Principal, Depends(requires(Permission.DOCUMENTS))]
AdminDep = Annotated[Principal, Depends(requires(Permission.USERS))]


def owned(principal: Principal, session_id: str) -> str:
    """A tenant's sessions carry its name as id prefix; any other id is unknown to it (404, not 403)."""
    if not principal.owns(session_id):
        raise SessionNotFound(session_id)
    return session_id


def checked_question(settings: Settings, question: str) -> str:
    """The question without surrounding space; 422 when empty or longer than server.max_question_chars."""
    if not question.strip():
        raise HTTPException(422, "question is empty")
    limit = settings.server.max_question_chars
    if len(question) > limit:
        raise HTTPException(422, f"question has {len(question)} characters; the limit is {limit}")
    return question.strip()
