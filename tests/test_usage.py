"""Token usage and finish_reason: the upstream's own numbers reach the receipt and the OpenAI-compatible
route (plain replies and the closing streamed chunk); counted here only when the upstream reports none."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import openai
import pytest

from rag_core.tokens import TokenCounter
from rag_service.testing.fake_llm import FakeLLM, message_text
from tests.conftest import AppClient
from tests.sse import events

SETTINGS: dict[str, Any] = {
    "rewrite": {"mode": "none"},
    "user_memory": {"enabled": False},
    "auth": {"rate_limit": {"per_key": "", "per_session": "", "per_address": ""}},
}
ANSWER = "手机保修两年，电池保修一年。"


def fake_usage(request: dict[str, Any], answer: str) -> dict[str, int]:
    """What the fake upstream reports (its own count: len // 4 + 1 per text, not this service's tokenizer)."""
    prompt = len("\n".join(message_text(m.get("content")) for m in request["messages"])) // 4 + 1
    completion = len(answer) // 4 + 1
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": prompt + completion}


@pytest.fixture
def upstream() -> Iterator[FakeLLM]:
    with FakeLLM(lambda req: ANSWER) as llm:
        yield llm


@pytest.fixture
def silent_upstream() -> Iterator[FakeLLM]:
    with FakeLLM(lambda req: ANSWER, usage=False) as llm:
        yield llm


async def app_on(app_factory: Any, llm: FakeLLM) -> AppClient:
    app: AppClient = await app_factory(llm={"base_url": llm.base_url, "max_retries": 0}, **SETTINGS)
    return app


async def test_receipt_carries_the_upstream_usage(app_factory: Any, upstream: FakeLLM) -> None:
    app = await app_on(app_factory, upstream)
    sid = await app.new_session()
    plain = await app.ask(sid, "保修多久？")
    expected = fake_usage(upstream.requests[-1], ANSWER)
    assert plain["receipt"]["usage"] == {**expected, "counted": "upstream"}
    assert plain["receipt"]["completion_tokens"] == expected["completion_tokens"]
    assert plain["receipt"]["finish_reason"] == "stop"

    resp = await app.http.post(f"/v1/sessions/{sid}/chat", json={"question": "电池呢？", "stream": True})
    done = [data for kind, data in events(resp.text) if kind == "done"][-1]
    assert done["receipt"]["usage"] == {**fake_usage(upstream.requests[-1], ANSWER), "counted": "upstream"}
    assert done["receipt"]["finish_reason"] == "stop"


async def test_without_upstream_usage_the_receipt_counts_locally(
    app_factory: Any, silent_upstream: FakeLLM, counter: TokenCounter
) -> None:
    app = await app_on(app_factory, silent_upstream)
    sid = await app.new_session()
    for stream in (False, True):
        resp = await app.http.post(f"/v1/sessions/{sid}/chat", json={"question": "保修多久？", "stream": stream})
        receipt = (resp.json() if not stream else [d for k, d in events(resp.text) if k == "done"][-1])["receipt"]
        local = counter.count(ANSWER)
        assert receipt["usage"] == {
            "prompt_tokens": receipt["total_prompt_tokens"],
            "completion_tokens": local,
            "total_tokens": receipt["total_prompt_tokens"] + local,
            "counted": "local",
        }
        assert receipt["finish_reason"] == "stop"


async def test_openai_route_passes_usage_and_finish_reason_through(app_factory: Any, upstream: FakeLLM) -> None:
    app = await app_on(app_factory, upstream)
    client = openai.AsyncOpenAI(base_url="http://test/v1", api_key="x", http_client=app.http, max_retries=0)
    messages: Any = [{"role": "user", "content": "保修多久？"}]

    plain = await client.chat.completions.create(model="rag", messages=messages)
    expected = fake_usage(upstream.requests[-1], ANSWER)
    assert plain.usage is not None and plain.usage.model_dump(exclude_none=True) == expected
    assert plain.choices[0].finish_reason == "stop"

    stream = await client.chat.completions.create(model="rag", messages=messages, stream=True)
    chunks = [chunk async for chunk in stream]
    expected = fake_usage(upstream.requests[-1], ANSWER)
    last = chunks[-1]
    assert last.choices[0].finish_reason == "stop"
    assert last.usage is not None and last.usage.model_dump(exclude_none=True) == expected
    assert all(c.usage is None and c.choices[0].finish_reason is None for c in chunks[:-1])
    assert "".join(c.choices[0].delta.content or "" for c in chunks) == ANSWER


async def test_extractive_answers_count_locally(app_factory: Any, counter: TokenCounter) -> None:
    app: AppClient = await app_factory(**SETTINGS)
    sid = await app.new_session()
    turn = await app.ask(sid, "退货政策是什么？")
    assert turn["mode"] == "extractive"
    assert turn["receipt"]["usage"]["counted"] == "local"
    assert turn["receipt"]["usage"]["completion_tokens"] == counter.count(turn["answer"])
