"""Intents through the HTTP API: slot filling over turns, corrections, actions against a server of the
tests' own, a topic switch that starts a new task, the state after the live store is flushed, and the
LLM recognizer's fallback on malformed JSON (the project's fake upstream)."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator, Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from rag_core.embedding import Embedder, Vector
from rag_service.intents.task import TaskState
from rag_service.sessions.live_memory import MemoryStore
from rag_service.testing.fake_llm import FakeLLM, default_responder
from tests.conftest import AppClient
from tests.stores import write_behind

ROOT = Path(__file__).resolve().parent.parent
INTENTS = {"files": [str(ROOT / "configs" / "intents" / "ecommerce.yaml")]}


class ActionServer:
    """The tests' own order-status endpoint: records each call, answers with `reply` or `status`."""

    def __init__(self) -> None:
        self.calls: list[dict[str, Any]] = []
        self.status = 200
        self.reply: dict[str, Any] = {"status": "已发货", "carrier": "顺丰速运", "tracking_no": "SF7720250301"}
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                return None

            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner.calls.append(json.loads(body))
                data = json.dumps(owner.reply if owner.status == 200 else {"error": "down"}).encode()
                self.send_response(owner.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/orders/status"

    def __enter__(self) -> ActionServer:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def action_server() -> Iterator[ActionServer]:
    with ActionServer() as server:
        yield server


async def _state(app: AppClient, sid: str) -> dict[str, Any]:
    resp = await app.http.get(f"/v1/sessions/{sid}/state")
    assert resp.status_code == 200, resp.text
    return dict(resp.json())


def _prompt_texts(request: dict[str, Any]) -> list[str]:
    return [str(m.get("content")) for m in request["messages"]]


def _answer_requests(llm: FakeLLM) -> list[dict[str, Any]]:
    """The answer calls (the ones whose system prompt is the service's), not rewrite/intent calls."""
    return [r for r in llm.requests if "星辰数码的在线客服助手" in str(r["messages"][0]["content"])]


async def test_return_request_over_five_turns_with_a_late_then_corrected_order_number(
    app_factory: Callable[..., Any],
) -> None:
    app = await app_factory(intents=INTENTS)
    sid = await app.new_session()

    first = await app.ask(sid, "我想办理退货")
    assert first["intent"] == "return_request" and first["mode"] == "intent"
    assert first["missing"] == ["order_no", "product", "reason"]
    assert "订单号" in first["answer"] and first["sources"] == []
    assert first["receipt"]["task"]["turn"] == "ask"

    second = await app.ask(sid, "是一台小米 15 Pro")
    assert second["slots"] == {"product": "小米 15 Pro"} and second["mode"] == "intent"

    third = await app.ask(sid, "屏幕有坏点，是质量问题")
    assert third["slots"]["reason"] == "quality" and third["missing"] == ["order_no"]

    fourth = await app.ask(sid, "订单号 XC20250301000123")
    assert fourth["missing"] == [] and fourth["mode"] != "intent" and fourth["receipt"]["task"]["turn"] == "act"
    assert fourth["prompt_modules"] == ["return_request"] and fourth["prompt_module_tokens"] > 0
    state = await _state(app, sid)
    assert state["done"] is True and state["slots"]["order_no"] == "XC20250301000123"

    fifth = await app.ask(sid, "不对，订单号是 XC20250301000456")
    assert fifth["slots"]["order_no"] == "XC20250301000456"
    assert fifth["receipt"]["task"]["corrected"] == ["order_no"]
    state = await _state(app, sid)
    # (A slot given alone may read as a switch to the detector; the tracker keeps the task, and says so.)
    switch = state.pop("switch")
    assert switch is None or (switch["cleared"] is False and "continues the task" in switch["reason"])
    assert state == {
        "intent": "return_request",
        "slots": {"product": "小米 15 Pro", "reason": "quality", "order_no": "XC20250301000456"},
        "missing": [],
        "task_started_at_round": 0,
        "done": True,
    }


async def test_order_status_action_reply_reaches_the_prompt_and_a_failure_is_a_clear_answer(
    app_factory: Callable[..., Any], fake_llm: FakeLLM, action_server: ActionServer
) -> None:
    intents = {**INTENTS, "actions": {"order_status": action_server.url}, "recognizer": "offline"}
    app = await app_factory(intents=intents, llm={"base_url": fake_llm.base_url}, rewrite={"mode": "rule"})
    sid = await app.new_session()
    asked = await app.ask(sid, "帮我查一下订单到哪了")
    assert asked["intent"] == "order_status" and asked["missing"] == ["order_no"] and asked["mode"] == "intent"
    assert _answer_requests(fake_llm) == []  # asking for the slot needs no model

    done = await app.ask(sid, "订单号是 XC20250301000123")
    assert action_server.calls == [{"intent": "order_status", "slots": {"order_no": "XC20250301000123"}}]
    assert done["mode"] == "llm" and done["receipt"]["task"]["action"]["ok"] is True
    prompt = "\n".join(_prompt_texts(_answer_requests(fake_llm)[-1]))
    assert (
        "SF7720250301" in prompt and "订单查询规则" in prompt
    )  # the reply as context, the module in the system prompt
    assert (await _state(app, sid))["done"] is True

    action_server.status = 503
    failed = await app.ask(sid, "不对，订单号是 XC20250301000999")
    assert failed["mode"] == "intent" and "暂时不可用" in failed["answer"]
    assert failed["receipt"]["task"]["action"] == {"ok": False, "status": 503, "error": "HTTP 503"}
    assert (await _state(app, sid))["done"] is False  # the customer can try again


_RETURN_ROUNDS = ("我要退货", "订单号 XC20250301000123", "是一台 iPhone 16 Pro")


async def _return_then_switch(app: AppClient, fake_llm: FakeLLM) -> tuple[str, dict[str, Any], list[str]]:
    """A return request over three rounds, then an announced switch to a store question: the session, the
    switch turn's reply and the texts of its answer request."""
    sid = await app.new_session()
    for q in _RETURN_ROUNDS:
        assert (await app.ask(sid, q))["intent"] == "return_request"
    fake_llm.clear()
    switched = await app.ask(sid, "对了，你们上海的门店在哪里？")
    return sid, switched, _prompt_texts(_answer_requests(fake_llm)[-1])


async def test_topic_switch_mid_return_starts_a_new_task_without_the_old_rounds(
    app_factory: Callable[..., Any], fake_llm: FakeLLM
) -> None:
    app = await app_factory(
        intents={**INTENTS, "recognizer": "offline"}, llm={"base_url": fake_llm.base_url}, rewrite={"mode": "rule"}
    )
    sid, switched, texts = await _return_then_switch(app, fake_llm)
    task = switched["receipt"]["task"]
    assert task["new_task"] is True and task["previous_task"] == "background" and switched["intent"] is None
    assert not any(
        t in _RETURN_ROUNDS or t.startswith(_RETURN_ROUNDS) for t in texts
    )  # no round of the return, verbatim
    assert switched["receipt"]["rounds_kept"] == 0
    assert any("return_request" in t for t in texts)  # its state as one background line
    state = await _state(app, sid)
    assert state["intent"] is None and state["task_started_at_round"] == 3 and state["slots"] == {}

    follow = await app.ask(sid, "周末几点关门")
    assert follow["receipt"]["rounds_kept"] == 1  # the new task's own round only


class _Unmeasured:
    """The tests' embedder under a name the shipped switch model has no measurement for (as an embedder that did
    not reach the bar): its switches are detected and reported, and clear nothing."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.dim, self.remote = inner, inner.dim, inner.remote
        self.name = f"unmeasured:{inner.name}"

    def embed_query(self, text: str) -> Vector:
        return self.inner.embed_query(text)

    def embed_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return self.inner.embed_passages(texts)


async def test_a_switch_with_an_embedder_that_did_not_earn_clearing_keeps_the_rounds(
    app_factory: Callable[..., Any], fake_llm: FakeLLM
) -> None:
    app = await app_factory(
        embedder_wrap=_Unmeasured,
        intents={**INTENTS, "recognizer": "offline"},
        llm={"base_url": fake_llm.base_url},
        rewrite={"mode": "rule"},
    )
    # The same announced switch that clears with the default embedder (the test above).
    sid, switched, texts = await _return_then_switch(app, fake_llm)
    task = switched["receipt"]["task"]
    assert task["switch_detected"] is True and task["switch_cleared"] is False, task
    assert "no out-of-fold measurement" in task["switch_note"] and task["new_task"] is False
    first = _RETURN_ROUNDS[0]
    assert any(t.startswith(first) or t == first for t in texts)  # the return's first round, verbatim
    state = await _state(app, sid)
    assert state["intent"] == "return_request" and state["task_started_at_round"] == 0
    assert state["switch"]["cleared"] is False and state["switch"]["round"] == 3
    assert "no out-of-fold measurement" in state["switch"]["reason"]


async def test_dropped_background_is_said_in_the_receipt(app_factory: Callable[..., Any]) -> None:
    app = await app_factory(intents={**INTENTS, "on_new_task": "drop"})
    sid = await app.new_session()
    await app.ask(sid, "我要退货")
    switched = await app.ask(sid, "对了，你们上海的门店在哪里？")
    assert switched["receipt"]["task"]["previous_task"] == "drop"
    assert switched["receipt"]["task"]["state_tokens"] == 0


async def test_state_is_restored_after_the_live_store_is_flushed(app_factory: Callable[..., Any]) -> None:
    app = await app_factory(intents=INTENTS)
    sid = await app.new_session()
    await app.ask(sid, "我要申请保修")
    await app.ask(sid, "小米 15 Pro，2025年1月10日买的")
    before = await _state(app, sid)
    assert before["slots"] == {"product": "小米 15 Pro", "purchase_date": "2025-01-10"}
    store = write_behind(app.services.store)
    assert isinstance(store.live, MemoryStore)
    await store.flush()
    store.live.clear()
    assert await _state(app, sid) == before
    third = await app.ask(sid, "屏幕一直闪屏")
    assert third["missing"] == [] and third["slots"]["fault"] == "屏幕一直闪屏"


async def test_malformed_llm_json_falls_back_to_the_extractors(
    app_factory: Callable[..., Any], fake_llm: FakeLLM
) -> None:
    def responder(request: dict[str, Any]) -> str:
        if "You track the task" in str(request["messages"][0]["content"]):
            return '{"intent": "return_request", "slots": '  # cut short: not JSON
        return default_responder(request)

    fake_llm.set_responder(responder)
    app = await app_factory(intents=INTENTS, llm={"base_url": fake_llm.base_url}, rewrite={"mode": "rule"})
    sid = await app.new_session()
    reply = await app.ask(sid, "我想退掉订单 XC20250301000123 的 iPhone 16 Pro")
    task = reply["receipt"]["task"]
    assert task["recognizer"] == "fallback" and "not the expected JSON" in task["recognizer_detail"]
    assert reply["intent"] == "return_request"
    assert reply["slots"] == {"order_no": "XC20250301000123", "product": "iPhone 16 Pro"}

    def good(request: dict[str, Any]) -> str:
        if "You track the task" in str(request["messages"][0]["content"]):
            return json.dumps({"intent": "return_request", "slots": {"reason": "不想要了"}, "task": "continue"})
        return default_responder(request)

    fake_llm.set_responder(good)
    reply = await app.ask(sid, "就是不想要了")
    assert reply["receipt"]["task"]["recognizer"] == "llm" and reply["slots"]["reason"] == "no_reason"


async def test_without_intents_nothing_changes(app_factory: Callable[..., Any]) -> None:
    app = await app_factory()
    sid = await app.new_session()
    reply = await app.ask(sid, "我要退货")
    assert reply["intent"] is None and "task" not in reply["receipt"]
    assert await _state(app, sid) == {
        "intent": None,
        "slots": {},
        "missing": [],
        "task_started_at_round": 0,
        "done": False,
        "switch": None,
    }
    assert (await app.http.get("/v1/sessions/nope/state")).status_code == 404


async def test_state_survives_compression(app_factory: Callable[..., Any]) -> None:
    app = await app_factory(
        intents=INTENTS,
        memory={"window_rounds": 1, "summary_threshold_tokens": 30, "summary_min_fold_rounds": 1},
    )
    sid = await app.new_session()
    await app.ask(sid, "我要退货")
    await app.ask(sid, "是一台 iPhone 16 Pro，屏幕有问题，质量问题")
    await app.ask(sid, "退货的运费谁来出？")
    await app.services.pipeline.drain()
    meta, _, _ = await app.services.store.load(sid, lambda m: m.message_count)
    assert meta.summary and meta.summarized > 0  # older rounds were folded into the summary
    state = await _state(app, sid)
    assert state["intent"] == "return_request" and state["missing"] == ["order_no"]
    assert state["slots"] == {"product": "iPhone 16 Pro", "reason": "quality"}
    reply = await app.ask(sid, "订单号 XC20250301000123")
    assert reply["missing"] == [] and reply["slots"]["product"] == "iPhone 16 Pro"


async def test_a_question_landing_on_another_document_is_a_switch(app_factory: Callable[..., Any]) -> None:
    """(The rules deciding.) No marker, no shared word and close enough to the earlier questions by
    similarity: only where it lands in the knowledge base (another document than the ones the task was answered from) says it is a
    new subject. The documents of each answered turn are kept in the stored state."""
    app = await app_factory(
        intents={
            **INTENTS,
            "recognizer": "offline",
            "switch_model": False,
            "switch_landing": True,
            "switch_standalone": False,
        },
        rewrite={"mode": "rule"},
    )
    sid = await app.new_session()
    for q in ["iPhone 16 Pro 的屏幕多大", "电池容量呢"]:
        r = await app.ask(sid, q)
        assert not r["receipt"]["task"]["new_task"], r["receipt"]["task"]
    meta, _, _ = await app.services.store.load(sid, lambda m: 0)
    documents = TaskState.from_json(meta.task).documents
    assert len(documents) == 2 and all(documents)
    # A question whose landing margin is about twice the calibrated one, so that a small ranking change
    # elsewhere does not decide this test.
    switched = await app.ask(sid, "会员积分怎么兑换")
    task = switched["receipt"]["task"]
    assert task["switch_detected"] is True and "lands on document" in task["switch"], task
    # The rules alone did not reach issue 14's bar: the switch is reported, the rounds stay.
    assert task["new_task"] is False and task["switch_cleared"] is False and "rules alone" in task["switch_note"]
    assert switched["receipt"]["rounds_kept"] == 2
    meta, _, _ = await app.services.store.load(sid, lambda m: 0)
    assert len(TaskState.from_json(meta.task).documents) == 3  # the same task's turns

    # Landing off (the default; the rules deciding, standalone off as above), the same question is read on
    # its wording and similarity alone: no new task.
    plain = await app_factory(
        intents={**INTENTS, "recognizer": "offline", "switch_model": False, "switch_standalone": False},
        rewrite={"mode": "rule"},
    )
    sid = await plain.new_session()
    for q in ["iPhone 16 Pro 的屏幕多大", "电池容量呢"]:
        await plain.ask(sid, q)
    task = (await plain.ask(sid, "会员积分怎么兑换"))["receipt"]["task"]
    assert task["new_task"] is False and "lands on" not in task["switch"], task
