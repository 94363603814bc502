"""A slow vector store holds up only the turns that wait for it: health checks and streams already past
retrieval keep going (the index is awaited, never called on the event loop's thread)."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Callable
from typing import Any

import httpx
import uvicorn

from rag_core.embedding import Embedder
from rag_core.settings import Settings
from rag_core.tokens import TokenCounter
from rag_core.vectorstore import VectorIndex
from rag_service.api import create_app
from rag_service.testing.fake_llm import FakeLLM
from rag_service.wiring import build_services


class HeldIndex:
    """The test session's index, whose searches wait while `gate` is closed: a Qdrant server that has
    stopped answering, for as long as the test wants."""

    def __init__(self, inner: VectorIndex) -> None:
        self.inner = inner
        self.gate = asyncio.Event()
        self.gate.set()
        self.waiting = asyncio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    async def _wait(self) -> None:
        if not self.gate.is_set():
            self.waiting.set()
            await self.gate.wait()

    async def search(self, *args: Any, **kwargs: Any) -> Any:
        await self._wait()
        return await self.inner.search(*args, **kwargs)

    async def pool(self, *args: Any, **kwargs: Any) -> Any:
        await self._wait()
        return await self.inner.pool(*args, **kwargs)

    async def close(self) -> None:
        """The session's index outlives this app."""


async def test_a_slow_index_holds_neither_health_checks_nor_streams(
    settings_factory: Callable[..., Settings],
    kb_index: VectorIndex,
    embedder: Embedder,
    counter: TokenCounter,
    fake_llm: FakeLLM,
) -> None:
    held = HeldIndex(kb_index)
    services = build_services(
        settings_factory(llm={"base_url": fake_llm.base_url}), counter=counter, embedder=embedder, index=held
    )  # type: ignore[arg-type]
    fake_llm.chunk_chars = 1
    fake_llm.set_responder(lambda req: "退货请在七天内申请。" * 50)
    # The upstream pauses mid-answer until the test lets it go (the service holds back a few characters
    # before its first delta, so the pause comes well after that).
    upstream = fake_llm.hold_streams(after=60)
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(services=services), port=port, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:
            await asyncio.sleep(0.01)
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=60) as client:
            first = (await client.post("/v1/sessions")).json()["session_id"]
            second = (await client.post("/v1/sessions")).json()["session_id"]
            route = f"/v1/sessions/{first}/chat"
            async with client.stream("POST", route, json={"question": "怎么退货？", "stream": True}) as stream:
                lines = stream.aiter_lines()
                async for line in lines:
                    if line.startswith("event: delta"):
                        break  # the stream is past retrieval, answering
                await asyncio.to_thread(upstream.wait_held)
                # Now the index stops answering: the next turn waits inside retrieval.
                held.gate.clear()
                turn = asyncio.create_task(
                    client.post(f"/v1/sessions/{second}/chat", json={"question": "发票怎么开？"})
                )
                await held.waiting.wait()
                health = await client.get("/healthz")
                assert health.status_code == 200 and health.json() == {"status": "ok"}
                # The stream already answering goes on to its end while the other turn still waits.
                upstream.release()
                events = [line async for line in lines if line.startswith("event: ")]
                assert events and events[-1] == "event: done", events[-3:]
                assert not turn.done()
            held.gate.set()
            answered = await turn
            assert answered.status_code == 200, answered.text
            assert answered.json()["answer"]
    finally:
        upstream.release()
        held.gate.set()
        server.should_exit = True
        await serving
        await services.close()
