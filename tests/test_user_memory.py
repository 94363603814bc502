"""Long-term user memory: facts learnt from one session reach the system prompt of the next."""

from __future__ import annotations

from typing import Any

from rag_service.auth import hash_key
from rag_service.testing.fake_llm import FakeLLM
from tests.conftest import AppClient


def _as_admin(app: AppClient) -> AppClient:
    """What the service knows about a user is for admin keys (admin keys may chat too)."""
    app.http.headers["Authorization"] = "Bearer admin-key"
    return app


ADMIN = {"admins": {"shop": [hash_key("admin-key")]}}


async def _session(app: AppClient, user: str, headers: dict[str, str] | None = None) -> str:
    resp = await app.http.post("/v1/sessions", json={"user": user}, headers=headers or {})
    assert resp.status_code == 201
    return str(resp.json()["session_id"])


async def test_facts_are_learnt_and_injected_into_new_sessions(app_factory: Any, fake_llm: FakeLLM) -> None:
    # LLM for answers only: the summarizer/extractor endpoint is unset -> rule-based fact extraction.
    app: AppClient = await app_factory(
        llm={"base_url": fake_llm.base_url},
        memory={"summary_llm": {"base_url": None}},
        rewrite={"mode": "rule"},
        user_memory={"every_turns": 2},
        auth=ADMIN,
    )
    _as_admin(app)
    sid = await _session(app, "u-1001")
    await app.ask(sid, "我有一台 MacBook Air M3，想看看以旧换新。")
    await app.ask(sid, "我的预算是 8000 元以内。有什么推荐？")
    await app.services.pipeline.drain()
    facts = (await app.http.get("/v1/users/u-1001/memories")).json()["memories"]
    texts = [f["fact"] for f in facts]
    assert any("MacBook Air M3" in t for t in texts) and any("8000 元" in t for t in texts)
    assert all(f["source_session"] == sid for f in facts)

    fake_llm.clear()
    new_sid = await _session(app, "u-1001")
    turn = await app.ask(new_sid, "退货要多久到账？")
    system = [m["content"] for m in fake_llm.requests[-1]["messages"] if m["role"] == "system"]
    assert len(system) == 2 and "MacBook Air M3" in system[1]
    assert system[0] == app.services.settings.prompt.system_prompt
    assert turn["receipt"]["profile_tokens"] > 0
    assert turn["receipt"]["system_tokens"] > app.services.pipeline.system_tokens

    # Another user's session knows nothing of u-1001.
    fake_llm.clear()
    other = await _session(app, "u-2002")
    await app.ask(other, "退货要多久到账？")
    assert [m["role"] for m in fake_llm.requests[-1]["messages"]].count("system") == 1

    resp = await app.http.delete("/v1/users/u-1001/memories")
    assert resp.json()["deleted"] == len(facts)
    assert (await app.http.get("/v1/users/u-1001/memories")).json()["memories"] == []


async def test_ending_a_session_learns_the_rest(app_factory: Any) -> None:
    app: AppClient = _as_admin(await app_factory(user_memory={"every_turns": 5}, auth=ADMIN))
    sid = await _session(app, "u-3003")
    await app.ask(sid, "我住在杭州，我更喜欢顺丰快递。运费多少？")
    assert (await app.http.get("/v1/users/u-3003/memories")).json()["memories"] == []
    assert (await app.http.delete(f"/v1/sessions/{sid}")).status_code == 204
    facts = [f["fact"] for f in (await app.http.get("/v1/users/u-3003/memories")).json()["memories"]]
    assert any("杭州" in f for f in facts)
    assert (await app.http.get(f"/v1/sessions/{sid}/messages")).status_code == 404


async def test_memories_are_per_tenant(app_factory: Any) -> None:
    app: AppClient = await app_factory(
        auth={"admins": {"a": [hash_key("ka")], "b": [hash_key("kb")]}}, user_memory={"every_turns": 1}
    )
    ha, hb = {"Authorization": "Bearer ka"}, {"Authorization": "Bearer kb"}
    sid = await _session(app, "same-user", ha)
    resp = await app.http.post(f"/v1/sessions/{sid}/chat", headers=ha, json={"question": "我用的是 iPhone 16。"})
    assert resp.status_code == 200
    await app.services.pipeline.drain()
    assert (await app.http.get("/v1/users/same-user/memories", headers=ha)).json()["memories"]
    assert (await app.http.get("/v1/users/same-user/memories", headers=hb)).json()["memories"] == []
