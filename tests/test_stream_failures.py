"""Turns that fail or are cut mid-stream: a truncated upstream stream is a failed turn (question kept, an
`error` event to the client), and a stream cut by the client or by a server shutdown releases its
session's lock at once."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import uvicorn
from aiohttp import web
from sse_starlette.sse import AppStatus

from rag_service.api import create_app
from rag_service.sessions.live_redis import RedisStore
from rag_service.sessions.writebehind import ArchivedStore
from rag_service.testing.fake_llm import FakeLLM, Fault
from rag_service.wiring import Services
from tests.conftest import AppClient
from tests.servers import PrivateRedis
from tests.sse import events
from tests.stores import write_behind


async def stored(app: AppClient, sid: str) -> list[tuple[str, str]]:
    resp = await app.http.get(f"/v1/sessions/{sid}/messages")
    return [(m["role"], m["content"]) for m in resp.json()["messages"]]


def llm_settings(fake: FakeLLM) -> dict[str, Any]:
    # No extractive fallback (main's llm.fallback_extractive; ignored where it does not exist yet): these
    # tests are about what a failing upstream does to the turn.
    return {"base_url": fake.base_url, "max_retries": 0, "fallback_extractive": False}


SETTINGS: dict[str, Any] = {
    "rewrite": {"mode": "none"},
    "auth": {"rate_limit": {"per_key": "", "per_session": "", "per_address": ""}},
}
# Long enough that the output guard (which holds back a window of text) has let some of it out.
REPLY = "发票在订单详情页申请，电子发票当天开具，纸质发票随货寄出。" * 12


# -- a truncated upstream stream is a failed turn ------------------------------------------------------------


async def test_truncated_upstream_stream_is_a_failed_turn(app_factory: Any, fake_llm: FakeLLM) -> None:
    app: AppClient = await app_factory(llm=llm_settings(fake_llm), **SETTINGS)
    fake_llm.chunk_chars = 2
    fake_llm.set_responder(lambda req: REPLY)
    sid = await app.new_session()
    fake_llm.fail_next(1, Fault(truncate_after=len(REPLY) // 4))
    resp = await app.http.post(f"/v1/sessions/{sid}/chat", json={"question": "发票怎么开？", "stream": True})
    assert resp.status_code == 200  # the answer had begun
    got = events(resp.text)
    kinds = [k for k, _ in got]
    assert kinds[:2] == ["rewrite", "sources"] and kinds.count("delta") >= 1
    assert "done" not in kinds and kinds[-1] == "error"
    assert got[-1][1]["status"] == 502 and "ended before the answer was complete" in got[-1][1]["detail"]
    assert await stored(app, sid) == [("user", "发票怎么开？")]  # the question, not half an answer
    metrics = (await app.http.get("/metrics")).text
    assert 'rag_upstream_errors_total{stage="generate"} 1.0' in metrics

    # Cut before any text: nothing was sent yet, so it is a plain 502 (after the retries).
    fake_llm.fail_next(1, Fault(truncate_after=0))
    resp = await app.http.post(f"/v1/sessions/{sid}/chat", json={"question": "电子发票呢？", "stream": True})
    assert resp.status_code == 502 and "ended before" in resp.json()["detail"]
    # The next turn works and sees no half answers in its history.
    resp = await app.http.post(f"/v1/sessions/{sid}/chat", json={"question": "纸质发票呢？", "stream": True})
    assert [k for k, _ in events(resp.text)][-1] == "done"
    assert [r for r, _ in await stored(app, sid)] == ["user", "user", "user", "assistant"]


async def test_openai_stream_truncated_upstream_ends_with_an_error_object(app_factory: Any, fake_llm: FakeLLM) -> None:
    app: AppClient = await app_factory(llm=llm_settings(fake_llm), **SETTINGS)
    fake_llm.chunk_chars = 2
    fake_llm.set_responder(lambda req: REPLY)
    sid = await app.new_session()
    body = {"model": "rag", "stream": True, "messages": [{"role": "user", "content": "发票怎么开？"}]}
    fake_llm.fail_next(1, Fault(truncate_after=len(REPLY) // 4))
    resp = await app.http.post("/v1/chat/completions", json=body, headers={"X-Session-Id": sid})
    got = events(resp.text)
    assert got[-1][1]["error"]["type"] == "api_error" and "ended before" in got[-1][1]["error"]["message"]
    assert "[DONE]" not in [d for _, d in got]  # the answer is not complete
    assert not any(c.get("choices", [{}])[0].get("finish_reason") for _, c in got[:-1])
    # An OpenAI SDK raises it instead of taking the half answer.
    client = openai.AsyncOpenAI(base_url="http://test/v1", api_key="x", http_client=app.http, max_retries=0)
    fake_llm.fail_next(1, Fault(truncate_after=len(REPLY) // 4))
    stream = await client.chat.completions.create(
        model="rag",
        stream=True,
        messages=[{"role": "user", "content": "电子发票呢？"}],
        extra_headers={"X-Session-Id": sid},
    )
    with pytest.raises(openai.APIError, match="ended before"):
        async for _ in stream:
            pass
    assert await stored(app, sid) == [("user", "发票怎么开？"), ("user", "电子发票呢？")]


# -- a cut stream releases its session lock ------------------------------------------------------------------


class HangingUpstream:
    """An OpenAI-compatible upstream whose streams send a few pieces and then hang (until the test ends):
    a turn that is still generating when its client leaves or the server stops."""

    def __init__(self) -> None:
        self.streaming = asyncio.Event()
        self.release = asyncio.Event()

    async def handler(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        if not body.get("stream"):
            return web.json_response(
                {"choices": [{"index": 0, "message": {"content": "摘要"}, "finish_reason": "stop"}]}
            )
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for piece in [
            "发票在订单详情页申请，",
            "电子发票当天开具，",
            "纸质发票随货寄出。",
        ] * 4:  # past the guard's window
            chunk = {"choices": [{"index": 0, "delta": {"content": piece}, "finish_reason": None}]}
            await resp.write(b"data: " + json.dumps(chunk, ensure_ascii=False).encode() + b"\n\n")
        self.streaming.set()
        await self.release.wait()
        return resp

    @asynccontextmanager
    async def running(self) -> AsyncIterator[str]:
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self.handler)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        try:
            yield f"http://127.0.0.1:{runner.addresses[0][1]}/v1"
        finally:
            self.release.set()
            await runner.cleanup()


@asynccontextmanager
async def http_server(services: Services) -> AsyncIterator[tuple[uvicorn.Server, str, asyncio.Task[None]]]:
    """The app on a real uvicorn server in this event loop: only a real connection can go away."""
    config = uvicorn.Config(create_app(services=services), host="127.0.0.1", port=0, log_level="warning")
    server = uvicorn.Server(config)
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:
            if serving.done():
                serving.result()
            await asyncio.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        yield server, f"http://127.0.0.1:{port}", serving
    finally:
        server.should_exit = True
        await serving
        AppStatus.should_exit = False  # sse-starlette's flag is process-wide


async def until(condition: Callable[[], Awaitable[bool]]) -> None:
    for _ in range(1000):  # a safety net of ~20 s; the condition normally holds within a few polls
        if await condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition never held")


@pytest.fixture
async def redis_app(
    services_factory: Callable[..., Services], tmp_path: Path
) -> AsyncIterator[Callable[[str], Awaitable[Services]]]:
    """Services on a private Redis whose lock lease is long: only a release, not an expiry, frees a lock."""
    built: list[Services] = []
    async with PrivateRedis(tmp_path) as redis_server:

        async def make(llm_url: str) -> Services:
            services = services_factory(
                llm={"base_url": llm_url, "max_retries": 0},
                redis={"url": redis_server.url},
                session={"lock_lease_s": 60.0},
                **SETTINGS,
            )
            built.append(services)
            return services

        yield make
        for services in built:
            await services.pipeline.drain()
            for client in services.clients:
                await client.close()
            await services.store.close()


def redis_of(services: Services) -> RedisStore:
    store = write_behind(services.store)
    assert isinstance(store, ArchivedStore) and isinstance(store.live, RedisStore)
    return store.live


async def test_client_gone_mid_stream_releases_the_lock_at_once(
    redis_app: Callable[[str], Awaitable[Services]],
) -> None:
    upstream = HangingUpstream()
    async with upstream.running() as llm_url:
        services = await redis_app(llm_url)
        live = redis_of(services)
        async with http_server(services) as (_, base, _serving), httpx.AsyncClient(base_url=base, timeout=30) as http:
            sid = (await http.post("/v1/sessions")).json()["session_id"]
            lock_key = live._key(sid, "lock")
            async with http.stream(
                "POST", f"/v1/sessions/{sid}/chat", json={"question": "发票怎么开？", "stream": True}
            ) as resp:
                async for line in resp.aiter_lines():
                    if line.startswith("event: delta"):
                        break  # the client goes away mid-answer
            await until(lambda: _not(live.redis.exists(lock_key)))
            probe = RedisStore(client=live.redis, ttl_s=60, lock_timeout_s=1, on_busy="reject", prefix=live.prefix)
            async with probe.lock(sid):  # free now: reject mode would fail at once otherwise
                pass
            listed = (await http.get(f"/v1/sessions/{sid}/messages")).json()["messages"]
            assert [(m["role"], m["content"]) for m in listed] == [("user", "发票怎么开？")]


async def _not(value: Awaitable[int]) -> bool:
    return not await value


async def test_server_shutdown_with_streams_in_flight_releases_locks_and_does_not_hang(
    redis_app: Callable[[str], Awaitable[Services]],
) -> None:
    """SIGTERM with a stream in flight: the stream ends, its turn keeps the question, the lock is released
    (not left to its lease) and the server finishes shutting down."""
    upstream = HangingUpstream()
    async with upstream.running() as llm_url:
        services = await redis_app(llm_url)
        live = redis_of(services)
        async with (
            http_server(services) as (server, base, serving),
            httpx.AsyncClient(base_url=base, timeout=30) as http,
        ):
            sid = (await http.post("/v1/sessions")).json()["session_id"]
            got: list[str] = []

            async def read_stream() -> None:
                async with http.stream(
                    "POST", f"/v1/sessions/{sid}/chat", json={"question": "发票怎么开？", "stream": True}
                ) as resp:
                    async for line in resp.aiter_lines():
                        got.append(line)

            reader = asyncio.create_task(read_stream())
            await upstream.streaming.wait()
            await until(lambda: _true(any(line.startswith("event: delta") for line in got)))
            # What uvicorn's SIGTERM handler does (handle_exit itself would re-raise the signal at the end).
            server.should_exit = True
            await asyncio.wait_for(serving, 60)  # a safety net: shutdown must not hang on the stream
            await asyncio.gather(reader, return_exceptions=True)
            assert not await live.redis.exists(live._key(sid, "lock"))
        messages = await services.store.messages(sid)
        assert [(m.role, m.content) for m in messages] == [("user", "发票怎么开？")]


async def _true(value: bool) -> bool:
    return value
