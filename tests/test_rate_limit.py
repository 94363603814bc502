"""Rate limits that fit a frontend: per API key, per session, per end-user address behind a trusted proxy;
shared through Redis by every worker."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import httpx
import pytest

from rag_core.settings import AuthSettings, RateLimitSettings, Settings
from rag_service.api import create_app
from rag_service.auth import ANONYMOUS, Principal, RateLimited, RateLimiter, Role, hash_key
from rag_service.wiring import Services
from tests.conftest import AppClient
from tests.servers import REDIS_URL, redis_prefix


async def _chat(app: AppClient, sid: str, headers: dict[str, str] | None = None) -> httpx.Response:
    return await app.http.post(f"/v1/sessions/{sid}/chat", headers=headers or {}, json={"question": "退货政策？"})


async def test_a_session_at_its_limit_leaves_other_sessions_alone(app_factory: Any) -> None:
    app: AppClient = await app_factory(auth={"rate_limit": {"per_session": "3/hour"}})
    busy, quiet = await app.new_session(), await app.new_session()
    codes = [(await _chat(app, busy)).status_code for _ in range(4)]
    assert codes == [200, 200, 200, 429]
    limited = await _chat(app, busy)
    assert limited.status_code == 429
    assert limited.json()["detail"].startswith("rate limit exceeded for this session")
    assert int(limited.headers["Retry-After"]) >= 1
    # Reading the conversation counts against the session too, and is refused the same way.
    assert (await app.http.get(f"/v1/sessions/{busy}/messages")).status_code == 429
    assert [(await _chat(app, quiet)).status_code for _ in range(3)] == [200, 200, 200]
    # The other session's turns were all stored: the refused ones stored nothing.
    # The refused turns stored nothing: the busy session holds its three rounds.
    await app.services.pipeline.drain()
    assert len(await app.services.store.messages(busy)) == 6


async def test_the_openai_route_is_limited_per_session_header(app_factory: Any) -> None:
    app: AppClient = await app_factory(auth={"rate_limit": {"per_session": "2/hour"}})
    sid = await app.new_session()
    body = {"messages": [{"role": "user", "content": "退货政策？"}]}
    codes = [
        (await app.http.post("/v1/chat/completions", headers={"X-Session-Id": sid}, json=body)).status_code
        for _ in range(3)
    ]
    assert codes == [200, 200, 429]
    limited = await app.http.post("/v1/chat/completions", headers={"X-Session-Id": sid}, json=body)
    assert limited.json()["error"]["type"] == "rate_limit_error"
    # Without a session the turn is stateless and only the key's (open mode: everyone's) limit applies.
    assert (await app.http.post("/v1/chat/completions", json=body)).status_code == 200


async def test_another_tenant_cannot_use_up_a_sessions_budget(app_factory: Any) -> None:
    app: AppClient = await app_factory(
        auth={
            "tenants": {"a": [hash_key("ka")], "b": [hash_key("kb")]},
            "rate_limit": {"per_session": "2/hour", "per_key": ""},
        }
    )
    ha, hb = {"Authorization": "Bearer ka"}, {"Authorization": "Bearer kb"}
    resp = await app.http.post("/v1/sessions", headers=ha)
    sid = resp.json()["session_id"]
    # b hammers a's session id: unknown to b (404), then limited under b's name, never under a's.
    assert [(await _chat(app, sid, hb)).status_code for _ in range(3)] == [404, 404, 429]
    assert [(await _chat(app, sid, ha)).status_code for _ in range(2)] == [200, 200]


async def test_per_address_only_behind_a_trusted_proxy(app_factory: Any) -> None:
    # httpx's in-process transport connects as 127.0.0.1: the proxy in front of the service.
    app: AppClient = await app_factory(
        auth={"rate_limit": {"per_address": "2/hour", "per_key": "", "per_session": ""}},
        server={"trusted_proxies": ["127.0.0.1/32", "10.0.0.0/8"]},
    )
    alice = {"X-Forwarded-For": "198.51.100.7, 10.1.2.3"}  # an inner proxy of ours appended itself
    codes = [(await app.http.post("/v1/sessions", headers=alice)).status_code for _ in range(3)]
    assert codes == [201, 201, 429]
    assert "this address" in (await app.http.post("/v1/sessions", headers=alice)).json()["detail"]
    # Another end user behind the same proxy, and callers without the header, are not held back.
    assert (await app.http.post("/v1/sessions", headers={"X-Forwarded-For": "198.51.100.8"})).status_code == 201
    assert [(await app.http.post("/v1/sessions")).status_code for _ in range(3)] == [201, 201, 201]

    untrusting: AppClient = await app_factory(
        auth={"rate_limit": {"per_address": "2/hour", "per_key": "", "per_session": ""}},
        server={"trusted_proxies": ["10.0.0.0/8"]},
    )
    # The peer is not a trusted proxy: its X-Forwarded-For could say anything and is ignored.
    codes = [(await untrusting.http.post("/v1/sessions", headers=alice)).status_code for _ in range(3)]
    assert codes == [201, 201, 201]


@pytest.mark.parametrize(
    "peer, forwarded, expected",
    [
        ("10.0.0.5", "203.0.113.1", "203.0.113.1"),
        ("10.0.0.5", "1.1.1.1, 203.0.113.1, 10.0.0.9", "203.0.113.1"),  # a forged first hop is skipped
        ("10.0.0.5", "10.0.0.7, 10.0.0.9", "10.0.0.7"),  # every hop ours: the first one
        ("10.0.0.5", None, None),
        ("10.0.0.5", "", None),
        ("192.0.2.1", "203.0.113.1", None),  # not a trusted peer
        (None, "203.0.113.1", None),
    ],
)
def test_client_address(peer: str | None, forwarded: str | None, expected: str | None) -> None:
    limiter = RateLimiter(AuthSettings(), ["10.0.0.0/8"])
    assert limiter.client_address(peer, forwarded) == expected


async def test_limits_can_be_switched_off() -> None:
    off = AuthSettings(rate_limit=RateLimitSettings(per_key="", per_session="", per_address=""))
    limiter = RateLimiter(off, [])
    assert not limiter.enabled
    for _ in range(500):
        await limiter.check(ANONYMOUS, "s")


async def test_defaults_let_a_hundred_sessions_chat() -> None:
    """One frontend key, 100 sessions, each creating its session and sending five turns in a burst."""
    limiter = RateLimiter(Settings().auth, [])
    frontend = Principal("shop", "frontend", Role.CLIENT)
    for i in range(100):
        await limiter.check(frontend)
        for _ in range(5):
            await limiter.check(frontend, f"shop:s{i}")
    # ... and the key's own ceiling is still there.
    with pytest.raises(RateLimited) as caught:
        for _ in range(10_000):
            await limiter.check(frontend)
    assert caught.value.scope == "key" and caught.value.retry_after_s > 0


# ---------------------------------------------------------------- shared through Redis


@asynccontextmanager
async def _serving(services: Services) -> AsyncIterator[httpx.AsyncClient]:
    app = create_app(services=services)
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://test") as http:
            yield http


async def test_two_app_instances_share_the_limit_through_redis(services_factory: Callable[..., Services]) -> None:
    auth = {"tenants": {"t": [hash_key("k")]}, "rate_limit": {"per_key": "5/hour", "per_session": ""}}
    async with redis_prefix() as (redis, prefix):
        first, second = services_factory(auth=auth), services_factory(auth=auth)
        for services in (first, second):
            # Only the limiter talks to Redis here: the session stores stay in-process and apart.
            services.rate_limiter = RateLimiter(services.settings.auth, [], REDIS_URL, key_prefix=prefix + "limits")
        try:
            async with _serving(first) as one, _serving(second) as two:
                key = {"Authorization": "Bearer k"}
                codes = []
                for http in (one, two, one, two, one, two, one):
                    codes.append((await http.post("/v1/sessions", headers=key)).status_code)
                assert codes == [201] * 5 + [429] * 2
                stored = [k async for k in redis.scan_iter(match=prefix + "*")]
                assert stored and all(k.startswith(prefix + "limits") for k in stored)
        finally:
            for services in (first, second):
                await services.rate_limiter.close()
                await services.store.close()
