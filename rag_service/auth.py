"""Who is calling (API keys by tenant and role) and how often they may (rate limits).

Settings hold only SHA-256 digests of the keys; make one with `python -m rag_service.auth KEY`.
`auth.tenants` lists client keys (sessions and chat), `auth.admins` admin keys (documents, user
memories, and everything a client key may do), both as tenant -> digests. With no key configured the
API is open: every caller is the one anonymous principal of the default tenant, which may chat and
manage documents but never read what the service knows about its users, and the server listens on
loopback only (`open_bind_problem`).
"""

from __future__ import annotations

import enum
import hashlib
import hmac
import ipaddress
import logging
import sys
import time
from dataclasses import dataclass
from typing import Any

from limits import RateLimitItem, parse_many
from limits.aio.strategies import MovingWindowRateLimiter
from limits.storage import storage_from_string

from rag_core.settings import DEFAULT_TENANT, AuthSettings, Settings

log = logging.getLogger(__name__)


class Unauthorized(PermissionError):
    pass


class Forbidden(PermissionError):
    pass


class RateLimited(RuntimeError):
    def __init__(self, scope: str, retry_after_s: float) -> None:
        super().__init__(f"rate limit exceeded for this {scope}; retry in {max(retry_after_s, 0.0):.1f} s")
        self.scope, self.retry_after_s = scope, retry_after_s


class Role(enum.Enum):
    ADMIN = "admin"
    CLIENT = "client"
    # Open mode's anonymous caller: a client that may also manage the knowledge base (there is no one
    # else to do it), but no admin: what the service learnt about its users needs an admin key.
    OPEN = "open"


class Permission(enum.Enum):
    CHAT = "chat"  # sessions, chat, the OpenAI-compatible route
    DOCUMENTS = "documents"  # upload, list, delete knowledge-base documents
    USERS = "users"  # long-term user memories (and, later, session listing and feedback review)


GRANTS: dict[Role, frozenset[Permission]] = {
    Role.ADMIN: frozenset(Permission),
    Role.CLIENT: frozenset({Permission.CHAT}),
    Role.OPEN: frozenset({Permission.CHAT, Permission.DOCUMENTS}),
}


@dataclass(frozen=True, slots=True)
class Principal:
    tenant: str
    key_id: str  # a digest prefix: identifies the key in limits and logs without revealing it
    role: Role = Role.CLIENT

    def require(self, permission: Permission) -> Principal:
        if permission not in GRANTS[self.role]:
            if self.role is Role.OPEN:
                raise Forbidden(
                    f"{permission.value} needs an admin key; the API is open (no keys configured): "
                    "configure auth.admins"
                )
            raise Forbidden(f"{permission.value} needs an admin key; this is a {self.role.value} key")
        return self

    def owns(self, session_id: str) -> bool:
        """A tenant's sessions carry its name as id prefix."""
        return not self.tenant or session_id.startswith(self.tenant + ":")


ANONYMOUS = Principal(DEFAULT_TENANT, "anonymous", Role.OPEN)


def hash_key(key: str) -> str:
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


class ApiKeys:
    def __init__(self, settings: AuthSettings) -> None:
        self._known: list[tuple[str, Principal]] = [
            (d.lower(), Principal(tenant, d.lower()[7:19], role))
            for role, table in ((Role.CLIENT, settings.tenants), (Role.ADMIN, settings.admins))
            for tenant, digests in table.items()
            for d in digests
        ]

    @property
    def open(self) -> bool:
        return not self._known

    def authenticate(self, authorization: str | None) -> Principal:
        if self.open:
            return ANONYMOUS
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("missing API key: send Authorization: Bearer <key>")
        digest = hash_key(token.strip())
        found: Principal | None = None
        # Every digest is compared, so the time taken does not tell how far down the list a key is.
        for known, principal in self._known:
            if hmac.compare_digest(known, digest):
                found = principal
        if found is None:
            raise Unauthorized("invalid API key")
        return found


LOOPBACK_NAMES = {"localhost", "ip6-localhost", "ip6-loopback"}


def is_loopback(host: str) -> bool:
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def open_bind_problem(settings: Settings, host: str) -> str | None:
    """Why the server must not listen on `host`, or None. Open mode (no keys) is for loopback only."""
    auth = settings.auth
    if auth.tenants or auth.admins or auth.allow_open or is_loopback(host):
        return None
    return (
        f"refusing to listen on {host}: no API keys are configured, so anyone who reaches the port could use "
        "the service and change its knowledge base. Configure keys (auth.tenants / auth.admins, or "
        "RAG_AUTH__TENANTS / RAG_AUTH__ADMINS as JSON), listen on 127.0.0.1, or set auth.allow_open: true "
        "to run open on purpose."
    )


class _Networks:
    def __init__(self, items: list[str]) -> None:
        self._nets = [ipaddress.ip_network(i, strict=False) for i in items]

    def __bool__(self) -> bool:
        return bool(self._nets)

    def __contains__(self, host: object) -> bool:
        try:
            address = ipaddress.ip_address(str(host).strip())
        except ValueError:
            return False
        return any(address in net for net in self._nets)


class RateLimiter:
    """Moving-window limits per API key, per session and (behind a trusted proxy) per end-user address.

    Counts live in process memory, or in Redis when a URL is given, so that every worker (and every
    replica) shares them. A limiter whose Redis fails lets requests through and logs it: the limits
    protect the service, they are not what keeps data apart.
    """

    def __init__(
        self,
        settings: AuthSettings,
        trusted_proxies: list[str],
        redis_url: str | None = None,
        *,
        key_prefix: str | None = None,
    ) -> None:
        cfg = settings.rate_limit
        self._limits: dict[str, list[RateLimitItem]] = {
            scope: parse_many(spec) if spec.strip() else []
            for scope, spec in (("key", cfg.per_key), ("session", cfg.per_session), ("address", cfg.per_address))
        }
        self._proxies = _Networks(trusted_proxies)
        self._pool: Any = None
        if redis_url:
            import redis.asyncio as aioredis

            self._pool = aioredis.ConnectionPool.from_url(redis_url)
            storage = storage_from_string(
                "async+" + redis_url,
                implementation="redispy",
                connection_pool=self._pool,
                key_prefix=key_prefix or cfg.key_prefix,
            )
        else:
            storage = storage_from_string("async+memory://")
        self._window = MovingWindowRateLimiter(storage)

    @property
    def enabled(self) -> bool:
        return any(self._limits.values())

    def client_address(self, peer: str | None, forwarded_for: str | None) -> str | None:
        """The end user's address when a trusted proxy says who it is; None otherwise."""
        if not forwarded_for or peer is None or peer not in self._proxies:
            return None
        # Proxies append; the rightmost entry that is not one of ours is the first one we can trust.
        hops = [h.strip() for h in forwarded_for.split(",") if h.strip()]
        for hop in reversed(hops):
            if hop not in self._proxies:
                return hop
        return hops[0] if hops else None

    async def check(self, principal: Principal, session_id: str | None = None, address: str | None = None) -> None:
        """Count one request; raises RateLimited when any of its limits is used up.

        The narrowest scope is counted first, so a session at its limit does not use up its key's budget.
        Sessions are counted under their tenant: a forged id of another tenant's session cannot use up it.
        """
        scopes: list[tuple[str, tuple[str, ...]]] = []
        if session_id:
            scopes.append(("session", (principal.tenant, session_id)))
        if address:
            scopes.append(("address", (address,)))
        scopes.append(("key", (principal.key_id,)))
        for scope, identifiers in scopes:
            for item in self._limits[scope]:
                try:
                    allowed = await self._window.hit(item, scope, *identifiers)
                    if not allowed:
                        stats = await self._window.get_window_stats(item, scope, *identifiers)
                        raise RateLimited(scope, stats.reset_time - time.time())
                except RateLimited:
                    raise
                except Exception as exc:
                    log.warning("rate limiter unavailable, request let through: %s: %s", type(exc).__name__, exc)
                    return

    async def close(self) -> None:
        if self._pool is not None:
            await self._pool.aclose()


if __name__ == "__main__":
    print(hash_key(sys.argv[1]))
