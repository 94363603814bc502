"""The OpenAI-compatible client every LLM stage shares (AsyncOpenAI under tenacity): request shape, usage
and finish_reason, retries, errors and stream endings, against the project's fake upstream and, for stream
shapes it never sends, a raw aiohttp server."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from rag_core.settings import LLMEndpoint
from rag_service.llm import ChatClient, Finish, UpstreamError, Usage
from rag_service.testing.fake_llm import FakeLLM, Fault, Waits

MSGS = [{"role": "system", "content": "你是客服。"}, {"role": "user", "content": "保修多久？"}]


def client(base_url: str, **kw: Any) -> ChatClient:
    return ChatClient(LLMEndpoint(base_url=base_url, api_key="k-123", model="m-test", retry_backoff_s=0.01, **kw))


def texts(items: list[str | Finish]) -> list[str]:
    """The text pieces of a stream, which ends with exactly one `Finish`."""
    assert isinstance(items[-1], Finish) and not any(isinstance(i, Finish) for i in items[:-1])
    return [i for i in items if isinstance(i, str)]


async def test_complete_sends_the_request_as_built(fake_llm: FakeLLM) -> None:
    fake_llm.clear()
    fake_llm.set_responder(lambda req: "两年。")
    c = client(fake_llm.base_url, temperature=0.1, max_tokens=77)
    try:
        assert await c.complete(MSGS) == "两年。"
        assert await c.complete(MSGS, max_tokens=5) == "两年。"
    finally:
        await c.close()
    first, second = fake_llm.requests
    assert first == {"model": "m-test", "messages": MSGS, "temperature": 0.1, "max_tokens": 77, "stream": False}
    assert second["max_tokens"] == 5


async def test_stream_yields_the_pieces_in_order(fake_llm: FakeLLM) -> None:
    text = "星辰数码的手机保修两年，电池保修一年。" * 3
    fake_llm.set_responder(lambda req: text)
    fake_llm.chunk_chars = 4
    c = client(fake_llm.base_url)
    try:
        items = [p async for p in c.stream(MSGS)]
    finally:
        await c.close()
    pieces = texts(items)
    assert "".join(pieces) == text
    assert len(pieces) == -(-len(text) // 4)
    assert fake_llm.requests[-1]["stream"] is True
    assert fake_llm.requests[-1]["stream_options"] == {"include_usage": True}


async def test_usage_and_finish_reason_come_from_the_upstream(fake_llm: FakeLLM) -> None:
    fake_llm.set_responder(lambda req: "两年。")
    c = client(fake_llm.base_url)
    try:
        plain = await c.completion(MSGS)
        streamed = [p async for p in c.stream(MSGS)]
    finally:
        await c.close()
    # The fake counts len // 4 + 1 tokens per text: not this service's tokenizer, so these are its numbers.
    prompt = len("\n".join(m["content"] for m in MSGS)) // 4 + 1
    usage = Usage(prompt, len("两年。") // 4 + 1, prompt + len("两年。") // 4 + 1)
    assert plain.text == "两年。" and plain.finish == Finish("stop", usage)
    assert texts(streamed) == ["两年。"] and streamed[-1] == Finish("stop", usage)


async def test_an_upstream_without_usage_reports_none() -> None:
    with FakeLLM(lambda req: "两年。", usage=False) as llm:
        c = client(llm.base_url)
        try:
            plain = await c.completion(MSGS)
            streamed = [p async for p in c.stream(MSGS)]
        finally:
            await c.close()
    assert plain.finish == Finish("stop", None)
    assert texts(streamed) == ["两年。"] and streamed[-1] == Finish("stop", None)


@pytest.mark.parametrize("status", [500, 503, 429])
async def test_server_errors_and_rate_limits_are_retried(fake_llm: FakeLLM, status: int) -> None:
    fake_llm.clear()
    fake_llm.set_responder(lambda req: "ok")
    fake_llm.fail_next(2, Fault(status=status))
    c = client(fake_llm.base_url, max_retries=2)
    try:
        assert await c.complete(MSGS) == "ok"
    finally:
        await c.close()
    assert len(fake_llm.requests) == 3


@pytest.mark.parametrize("status", [400, 401, 404, 422])
async def test_client_errors_fail_at_once(fake_llm: FakeLLM, status: int) -> None:
    fake_llm.clear()
    fake_llm.fail_next(1, Fault(status=status))
    c = client(fake_llm.base_url, max_retries=3)
    try:
        with pytest.raises(UpstreamError, match=f"HTTP {status}"):
            await c.complete(MSGS)
    finally:
        await c.close()
    assert len(fake_llm.requests) == 1


async def test_exhausted_retries_raise_upstream_error(fake_llm: FakeLLM) -> None:
    fake_llm.clear()
    fake_llm.fail_next(3, Fault(status=502))
    c = client(fake_llm.base_url, max_retries=1)
    try:
        with pytest.raises(UpstreamError, match="HTTP 502"):
            await c.complete(MSGS)
        # The third fault is still queued: exactly max_retries + 1 attempts were made.
        assert len(fake_llm.requests) == 2
    finally:
        fake_llm.clear()
        await c.close()


async def test_timeout_is_an_upstream_error(fake_llm: FakeLLM) -> None:
    fake_llm.clear()
    waits = fake_llm.waits = Waits()  # the hang lasts until the test ends it: only the timeout can end the call
    fake_llm.fail_next(1, Fault(status=200, hang_s=1.0))
    c = client(fake_llm.base_url, max_retries=0)
    try:
        with pytest.raises(UpstreamError, match="timeout"):
            await c.complete(MSGS, timeout_s=0.2)
        await asyncio.to_thread(waits.wait_entered, 1)
        assert waits.returned == 0
    finally:
        waits.open()
        await c.close()


async def test_unreachable_endpoint_is_an_upstream_error() -> None:
    c = client("http://127.0.0.1:9/v1", max_retries=1)
    try:
        with pytest.raises(UpstreamError, match="connection error: ConnectionRefusedError"):
            await c.complete(MSGS)
    finally:
        await c.close()


async def test_stream_retries_only_before_the_first_piece(fake_llm: FakeLLM) -> None:
    fake_llm.clear()
    fake_llm.set_responder(lambda req: "好的")
    fake_llm.fail_next(1, Fault(status=500))
    c = client(fake_llm.base_url, max_retries=1)
    try:
        assert "".join(texts([p async for p in c.stream(MSGS)])) == "好的"
    finally:
        await c.close()
    assert len(fake_llm.requests) == 2


async def test_a_client_survives_a_new_event_loop(fake_llm: FakeLLM) -> None:
    """The CLI runs turns with separate `asyncio.run` calls; the session must follow the loop."""
    fake_llm.set_responder(lambda req: "ok")
    c = client(fake_llm.base_url)

    def in_new_loop() -> str:
        return asyncio.run(c.complete(MSGS))

    try:
        assert await c.complete(MSGS) == "ok"
        assert await asyncio.to_thread(in_new_loop) == "ok"
        assert await c.complete(MSGS) == "ok"
    finally:
        await c.close()


async def test_connections_per_endpoint_are_capped() -> None:
    waits = Waits()
    with FakeLLM(delay_s=0.2, waits=waits) as llm:
        c = client(llm.base_url, max_connections=2, timeout_s=60)
        try:
            calls = asyncio.gather(*(c.complete(MSGS) for _ in range(6)))
            # Two calls are being answered at once, each holding its connection until the test lets go.
            await asyncio.to_thread(waits.wait_entered, 2)
            assert llm.connection_count == 2 and waits.returned == 0
            waits.open()
            replies = await calls
        finally:
            waits.open()
            await c.close()
        assert len(replies) == 6 and len(llm.requests) == 6
        # Six calls at once: only two connections were ever opened.
        assert llm.connection_count == 2


# -- stream shapes the fake upstream never sends ------------------------------------------------------

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


async def serve(handler: Handler) -> tuple[web.AppRunner, str]:
    app = web.Application()
    app.router.add_post("/v1/chat/completions", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}/v1"


def sse(lines: list[str]) -> Handler:
    async def handler(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        for line in lines:
            await resp.write(line.encode() + b"\n")
        await resp.write_eof()
        return resp

    return handler


def delta(text: str) -> str:
    return "data: " + json.dumps({"choices": [{"index": 0, "delta": {"content": text}}]}, ensure_ascii=False)


async def collect(lines: list[str]) -> list[str | Finish]:
    runner, url = await serve(sse(lines))
    c = client(url, max_retries=0)
    try:
        return [p async for p in c.stream(MSGS)]
    finally:
        await c.close()
        await runner.cleanup()


async def test_stream_skips_comments_role_chunks_usage_and_crlf() -> None:
    lines = [
        ": keep-alive",
        "",
        'data: {"choices":[{"index":0,"delta":{"role":"assistant"}}]}',
        "",
        delta("你好") + "\r",
        "\r",
        "event: message",
        delta("，世界"),
        "",
        'data: {"choices":[],"usage":{"prompt_tokens":3,"completion_tokens":2}}',
        "",
        "data: [DONE]",
        "",
        delta("after done"),
        "",
    ]
    # The usage chunk marks the end as complete even without a finish_reason.
    assert await collect(lines) == ["你好", "，世界", Finish(None, Usage(3, 2, 5))]


async def test_stream_joins_multi_line_data_fields() -> None:
    event = json.dumps({"choices": [{"index": 0, "delta": {"content": "多行"}}]}, indent=1).splitlines()
    lines = [*("data: " + part for part in event), "", finish(), "", "data: [DONE]", ""]
    assert await collect(lines) == ["多行", Finish("stop")]


async def test_stream_error_event_is_an_upstream_error() -> None:
    lines = [delta("部分"), "", 'data: {"error": {"message": "overloaded"}}', ""]
    with pytest.raises(UpstreamError, match="error event"):
        await collect(lines)


def finish(reason: str = "stop") -> str:
    return "data: " + json.dumps({"choices": [{"index": 0, "delta": {}, "finish_reason": reason}]})


async def test_stream_ending_without_done_after_finish_reason_keeps_what_arrived() -> None:
    assert await collect([delta("a"), "", delta("b"), "", finish("length"), ""]) == ["a", "b", Finish("length")]


async def test_an_unterminated_last_event_is_not_taken() -> None:
    """As the SSE standard says, an event the body ends in the middle of (no blank line after it) is not
    dispatched: the finish it would have carried never arrived, so the answer counts as cut."""
    with pytest.raises(UpstreamError, match="ended before the answer was complete"):
        await collect([delta("a"), "", delta("b"), "", finish("length")])


@pytest.mark.parametrize("done", [False, True])
async def test_truncated_stream_is_an_upstream_error(done: bool) -> None:
    """No finish_reason and no usage: the upstream was cut mid-answer; half an answer is not an answer. The
    SDK ends a stream at [DONE] and at the end of the body alike, so a [DONE] alone does not make it whole."""
    with pytest.raises(UpstreamError, match="ended before the answer was complete"):
        await collect([delta("a"), "", delta("b"), "", *(["data: [DONE]", ""] if done else [])])


async def test_stream_status_error_before_any_piece() -> None:
    async def handler(request: web.Request) -> web.StreamResponse:
        return web.json_response({"error": {"message": "bad model"}}, status=404)

    runner, url = await serve(handler)
    c = client(url, max_retries=2)
    try:
        with pytest.raises(UpstreamError, match="HTTP 404"):
            _ = [p async for p in c.stream(MSGS)]
    finally:
        await c.close()
        await runner.cleanup()
