"""The learning loop over HTTP: FAQ files and the FAQ short path, ratings with their receipts and the
report, annotations (created, edited, deleted: out of retrieval at once), and who may do what.

Each test gets tenants with a random suffix: the tests share one Qdrant index, and a tenant's
collections outlive its test.
"""

from __future__ import annotations

import secrets
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from rag_service.auth import hash_key
from rag_service.feedback import report
from rag_service.testing.fake_llm import FakeLLM
from tests.conftest import AppClient

FAQ_CSV = (
    "问题,答案\n"
    '"会员积分怎么兑换？\n积分能换什么？",在会员中心用积分兑换优惠券，100 积分抵 1 元。\n'
    "可以开专票吗？,可以，在订单详情页申请增值税专用发票。\n"
)
ANSWER = "在会员中心用积分兑换优惠券，100 积分抵 1 元。"


class Shop:
    def __init__(self, app: AppClient, tenant: str) -> None:
        self.app, self.tenant = app, tenant
        self.admin = {"Authorization": f"Bearer {tenant}-admin"}
        self.client = {"Authorization": f"Bearer {tenant}-client"}

    async def session(self) -> str:
        resp = await self.app.http.post("/v1/sessions", headers=self.client)
        assert resp.status_code == 201, resp.text
        return str(resp.json()["session_id"])

    async def ask(self, session_id: str, question: str) -> dict[str, Any]:
        resp = await self.app.http.post(
            f"/v1/sessions/{session_id}/chat", json={"question": question}, headers=self.client
        )
        assert resp.status_code == 200, resp.text
        return dict(resp.json())

    async def rate(self, session_id: str, message_id: str, **body: Any) -> Any:
        return await self.app.http.post(
            f"/v1/sessions/{session_id}/messages/{message_id}/feedback", json=body, headers=self.client
        )


@pytest.fixture
async def shops(app_factory: Callable[..., Awaitable[AppClient]], fake_llm: FakeLLM) -> tuple[Shop, Shop, FakeLLM]:
    suffix = secrets.token_hex(3)
    names = [f"learn{suffix}", f"other{suffix}"]
    auth = {
        "tenants": {n: [hash_key(f"{n}-client")] for n in names},
        "admins": {n: [hash_key(f"{n}-admin")] for n in names},
        "rate_limit": {"per_key": "", "per_session": ""},
    }
    app = await app_factory(auth=auth, llm={"base_url": fake_llm.base_url}, rewrite={"mode": "rule"})
    return Shop(app, names[0]), Shop(app, names[1]), fake_llm


async def upload_faq(shop: Shop) -> dict[str, Any]:
    resp = await shop.app.http.post(
        "/v1/documents", files={"file": ("faq.csv", FAQ_CSV.encode(), "text/csv")}, headers=shop.admin
    )
    assert resp.status_code == 201, resp.text
    return dict(resp.json())


async def test_faq_short_path_answers_without_the_llm_and_a_near_miss_goes_to_it(
    shops: tuple[Shop, Shop, FakeLLM],
) -> None:
    shop, other, llm = shops
    uploaded = await upload_faq(shop)
    assert uploaded["faq_entries"] == 3 and uploaded["chunks"] == 2
    sid = await shop.session()
    before = len(llm.requests)
    turn = await shop.ask(sid, "会员积分怎么兑换")
    assert turn["mode"] == "faq" and turn["answer"] == ANSWER
    assert len(llm.requests) == before  # no LLM call
    assert turn["sources"][0]["source"] == "uploads/faq.csv"
    receipt = turn["receipt"]
    assert receipt["llm_calls_saved"] == 1 and receipt["cost_estimate"] == 0
    assert receipt["saved_tokens"] == receipt["total_prompt_tokens"] + receipt["completion_tokens"] > 0
    assert receipt["faq"]["question"] == "会员积分怎么兑换？" and receipt["faq"]["score"] >= 0.955

    near = await shop.ask(sid, "积分会过期吗？")
    assert near["mode"] == "llm" and len(llm.requests) == before + 1
    # Below the threshold the FAQ answer is ordinary context.
    assert any("100 积分抵 1 元" in part["content"] for part in llm.requests[-1]["messages"] if part["role"] == "user")

    # Another tenant's FAQ never answers.
    assert (await other.ask(await other.session(), "会员积分怎么兑换")).get("mode") == "llm"

    metrics = (await shop.app.http.get("/metrics")).text
    assert 'rag_faq_short_path_total{outcome="hit"} 1.0' in metrics


async def test_ratings_are_stored_with_the_turns_receipt_changeable_and_reported(
    shops: tuple[Shop, Shop, FakeLLM],
) -> None:
    shop, other, _ = shops
    sid = await shop.session()
    first = await shop.ask(sid, "iPhone 16 Pro 多少钱？")
    follow = await shop.ask(sid, "那 256GB 的呢？")
    assert first["message_id"] and follow["message_id"] and first["message_id"] != follow["message_id"]
    listed = (await shop.app.http.get(f"/v1/sessions/{sid}/messages", headers=shop.client)).json()["messages"]
    assert [m["id"] for m in listed if m["role"] == "assistant"] == [first["message_id"], follow["message_id"]]
    await shop.app.services.pipeline.drain()  # the receipts are written off the request path

    resp = await shop.rate(sid, follow["message_id"], rating="down", reason="wrong", comment="价格不对")
    assert resp.status_code == 200, resp.text
    assert resp.json()["rating"] == "down"
    assert (await shop.rate(sid, follow["message_id"], rating="up")).json()["rating"] == "up"  # changed
    assert (await shop.rate(sid, first["message_id"], rating="down")).status_code == 200

    assert (await shop.rate(sid, follow["message_id"], rating="meh")).status_code == 422
    assert (await shop.rate(sid, "0" * 32, rating="up")).status_code == 404
    user_msg = next(m["id"] for m in listed if m["role"] == "user")
    assert (await shop.rate(sid, user_msg, rating="up")).status_code == 404  # only answers are rated
    other_resp = await other.app.http.post(
        f"/v1/sessions/{sid}/messages/{first['message_id']}/feedback", json={"rating": "up"}, headers=other.client
    )
    assert other_resp.status_code == 404

    # The report: admin only; one rating per answer; the follow-up understood (rated up) = hit rate 1.0.
    assert (await shop.app.http.get("/v1/feedback/report", headers=shop.client)).status_code == 403
    resp = await shop.app.http.get("/v1/feedback/report?since=1d", headers=shop.admin)
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert (body["ratings"], body["up"], body["down"]) == (2, 1, 1)
    assert body["by_turn_kind"]["follow_up"] == {"up": 1, "down": 0} and body["memory_hit_rate"] == 1.0
    assert body["by_turn_kind"]["first"] == {"up": 0, "down": 1}
    worst = body["worst"][0]
    assert worst["question"] == "iPhone 16 Pro 多少钱？" and worst["down"] == 1
    turn = worst["turns"][0]
    assert "iPhone 16 Pro" in turn["rewritten_query"] and turn["mode"] == "llm" and turn["sources"] == []
    assert turn["receipt"]["total_prompt_tokens"] > 0
    assert (await other.app.http.get("/v1/feedback/report", headers=other.admin)).json()["ratings"] == 0
    assert (await shop.app.http.get("/v1/feedback/report?since=soon", headers=shop.admin)).status_code == 422
    metrics = (await shop.app.http.get("/metrics")).text
    assert 'rag_feedback_total{mode="llm",rating="up",turn_kind="follow_up"} 1.0' in metrics

    # Forgetting the session forgets its receipts and ratings (they hold what the user said).
    assert (await shop.app.http.delete(f"/v1/sessions/{sid}", headers=shop.client)).status_code == 204
    assert (await shop.app.http.get("/v1/feedback/report?since=1d", headers=shop.admin)).json()["ratings"] == 0


async def test_annotations_answer_at_once_and_leave_retrieval_when_deleted(shops: tuple[Shop, Shop, FakeLLM]) -> None:
    shop, other, llm = shops
    sid = await shop.session()
    asked = await shop.ask(sid, "你们的仓库在哪个城市？")
    assert asked["mode"] == "llm"
    body = {
        "question": "你们的仓库在哪个城市？",
        "answer": "我们的仓库在苏州工业园区。",
        "from_message_id": asked["message_id"],
    }
    assert (await shop.app.http.post("/v1/annotations", json=body, headers=shop.client)).status_code == 403
    resp = await shop.app.http.post("/v1/annotations", json=body, headers=shop.admin)
    assert resp.status_code == 201, resp.text
    made = resp.json()
    assert made["from_message_id"] == asked["message_id"]

    turn = await shop.ask(sid, "仓库在哪个城市")
    assert turn["mode"] == "faq" and turn["answer"] == "我们的仓库在苏州工业园区。"
    assert (await other.ask(await other.session(), "仓库在哪个城市"))["mode"] == "llm"

    listed = (await shop.app.http.get("/v1/annotations", headers=shop.admin)).json()["annotations"]
    assert [a["id"] for a in listed] == [made["id"]]
    faq = (await shop.app.http.get("/v1/faq", headers=shop.admin)).json()["entries"]
    assert [(e["questions"], e["answer"]) for e in faq] == [(["你们的仓库在哪个城市？"], "我们的仓库在苏州工业园区。")]

    resp = await shop.app.http.patch(
        f"/v1/annotations/{made['id']}", json={"answer": "我们的仓库在苏州和成都。"}, headers=shop.admin
    )
    assert resp.status_code == 200 and resp.json()["answer"] == "我们的仓库在苏州和成都。"
    assert (await shop.ask(sid, "仓库在哪个城市"))["answer"] == "我们的仓库在苏州和成都。"

    assert (await shop.app.http.delete(f"/v1/annotations/{made['id']}", headers=other.admin)).status_code == 404
    assert (await shop.app.http.delete(f"/v1/annotations/{made['id']}", headers=shop.admin)).status_code == 204
    before = len(llm.requests)
    after = await shop.ask(await shop.session(), "仓库在哪个城市")  # a new session: no history naming it
    assert after["mode"] == "llm" and len(llm.requests) == before + 1
    assert not any("苏州" in part["content"] for part in llm.requests[-1]["messages"])
    assert (await shop.app.http.get("/v1/faq", headers=shop.admin)).json()["entries"] == []
    assert (await shop.app.http.delete(f"/v1/annotations/{made['id']}", headers=shop.admin)).status_code == 404
    bad = await shop.app.http.post("/v1/annotations", json={"question": " ", "answer": "x"}, headers=shop.admin)
    assert bad.status_code == 422


def test_report_counts_a_question_once_and_ranks_the_most_disliked_first() -> None:
    def row(mid: str, rating: str) -> dict[str, Any]:
        return {"message_id": mid, "session_id": "s", "rating": rating, "reason": "", "comment": "",
                "updated_at": 0.0, "turn": None}  # fmt: skip

    out = report([row("a", "down"), row("b", "up"), row("c", "down"), row("a2", "down")])
    assert out["memory_hit_rate"] is None and out["by_turn_kind"]["unknown"] == {"up": 1, "down": 3}
    assert [q["question"] for q in out["worst"]] == ["a", "a2", "c"]
