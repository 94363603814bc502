"""Memory keeps order numbers: 16-19 digit order numbers (Luhn-valid ones included) survive PII masking,
storage, the summary's pinned-facts line and a restore from the archive; the pinned line is bounded and
what leaves it is still in the archive."""

from __future__ import annotations

import time
from typing import Any

from rag_service.domain import Message, Round
from rag_service.privacy import Masker
from rag_service.sessions.live_memory import MemoryStore
from rag_service.sessions.writebehind import ArchivedStore
from rag_service.summary import PINNED_HEADER, pin_facts
from rag_service.testing.fake_llm import FakeLLM, scripted
from tests.conftest import AppClient
from tests.stores import write_behind
from tests.test_privacy import card_masked, luhn_ok, with_luhn_digit, without_luhn_digit

SUMMARY_REPLY = "用户询问了几个订单的物流进度，客服说明了查询方式。"  # leaves every number out


def upstream() -> Any:
    return scripted([("running summary", SUMMARY_REPLY)], default=lambda request: "好的，正在为您查询。")


def orders() -> dict[int, str]:
    """One order number per length 16-19, alternately Luhn-valid (bank-card-like) and not."""
    make = [with_luhn_digit, without_luhn_digit, with_luhn_digit, with_luhn_digit]
    out = {n: f(f"{3187654321098765432:019d}"[: n - 1]) for n, f in zip(range(16, 20), make, strict=True)}
    assert [luhn_ok(v) for v in out.values()] == [True, False, True, True]
    return out


def round_of(question: str, answer: str = "好的。") -> Round:
    return Round(Message("user", question, 10, time.time()), Message("assistant", answer, 3, time.time()))


def pinned(summary: str) -> list[str]:
    lines = [line for line in summary.splitlines() if line.startswith(PINNED_HEADER)]
    assert len(lines) <= 1
    return lines[0][len(PINNED_HEADER) :].strip().split("; ") if lines else []


def test_pinned_order_numbers_keep_their_label_and_survive_masking() -> None:
    o = orders()
    card = with_luhn_digit("622202123456789")
    rounds = [
        round_of(f"我的订单号是 {o[19]}，另一个订单号 {o[16]}，付款卡 {card}"),
        round_of(f"order no. {o[17]} and 单号{o[18]}"),
    ]
    # The summarizer wrote one of them without saying it is an order number: that does not count.
    text = pin_facts(f"{SUMMARY_REPLY} 其中一个是 {o[16]}。", rounds, "")
    facts = pinned(text)
    assert f"订单号 {o[19]}" in facts and f"订单号 {o[16]}" in facts
    assert f"order no. {o[17]}" in facts and f"单号 {o[18]}" in facts
    stored = Masker().mask(text)  # what the store keeps
    for number in o.values():
        assert f" {number}" in stored.splitlines()[-1]
    assert card not in stored and card_masked(card) in stored
    # A summary that states the order number as such keeps it; nothing is pinned for it.
    assert pin_facts(f"用户的订单号 {o[19]} 还没发货。", rounds[:1], "", 10).count(o[19]) == 1


def test_pinned_line_is_capped_newest_kept_across_compressions() -> None:
    numbers = [f"XC2025{i:010d}" for i in range(30)]
    summary = ""
    for chunk in range(0, 30, 3):
        rounds = [round_of(f"订单号 {n} 到哪了？") for n in numbers[chunk : chunk + 3]]
        summary = pin_facts(SUMMARY_REPLY, rounds, summary, limit=5)
        facts = pinned(summary)
        assert len(facts) == min(5, chunk + 3)
        assert facts == [f"订单号 {n}" for n in numbers[: chunk + 3][-5:]]
    # Mentioning an old fact again makes it the newest.
    summary = pin_facts(SUMMARY_REPLY, [round_of(f"还是订单号 {numbers[0]} 的问题")], summary, limit=5)
    assert pinned(summary) == [f"订单号 {n}" for n in [*numbers[26:], numbers[0]]]
    assert pin_facts(SUMMARY_REPLY, [round_of(f"订单号 {numbers[0]}")], summary, limit=0) == SUMMARY_REPLY
    # A summarizer that copied the pinned line into its text does not make a second, uncapped line.
    copied = pin_facts(summary, [round_of(f"订单号 {numbers[1]}")], summary, limit=5)
    assert copied.count(PINNED_HEADER) == 1 and len(pinned(copied)) == 5


def _settings(fake: FakeLLM, **memory: Any) -> dict[str, Any]:
    return {
        "llm": {"base_url": fake.base_url, "max_retries": 0},
        "memory": {
            "strategy": "hybrid",
            "window_rounds": 1,
            "summary_threshold_tokens": 50,
            "summary_min_fold_rounds": 1,
            **memory,
        },
        "rewrite": {"mode": "none"},
        "auth": {"rate_limit": {"per_key": "", "per_session": "", "per_address": ""}},
    }


async def test_order_numbers_survive_storage_summary_and_restore(app_factory: Any, fake_llm: FakeLLM) -> None:
    fake_llm.set_responder(upstream())
    app: AppClient = await app_factory(**_settings(fake_llm))
    o = orders()
    card = with_luhn_digit("622202123456789")
    first = f"我的订单号是 {o[19]}，订单号 {o[16]}，order no. {o[17]}，单号{o[18]}，付款卡 {card}。"
    sid = await app.new_session()
    for question in (first, "什么时候发货？", "运费多少？", "可以开发票吗？"):
        await app.ask(sid, question)
        await app.services.pipeline.drain()

    # Storage: the order numbers verbatim, the card masked.
    stored = (await app.http.get(f"/v1/sessions/{sid}/messages")).json()["messages"]
    assert stored[0]["content"] == first.replace(card, card_masked(card))
    # Summary: round 1 is folded, the summarizer dropped every number, the pinned line has them all.
    meta, _, _ = await app.services.store.load(sid, lambda m: 0)
    assert meta.summarized >= 2 and SUMMARY_REPLY in meta.summary
    for number in o.values():
        assert any(f.endswith(f" {number}") for f in pinned(meta.summary)), number
    assert card not in meta.summary
    # ...and they reach the model in the next prompt.
    await app.ask(sid, "还有别的问题吗？")
    prompt = fake_llm.requests[-1]["messages"]
    assert all(number in prompt[1]["content"] for number in o.values())

    # Restore: the live copy is lost; the archive brings back messages and summary, numbers intact.
    store = write_behind(app.services.store)
    assert isinstance(store, ArchivedStore) and isinstance(store.live, MemoryStore)
    await store.flush()
    before_meta, before, _ = await store.load(sid, lambda m: 0)
    store.live._entries.pop(sid)
    restored = (await app.http.get(f"/v1/sessions/{sid}/messages")).json()["messages"]
    assert store.restored == 1
    assert [m["content"] for m in restored] == [m.content for m in before]
    assert restored[0]["content"] == first.replace(card, card_masked(card))
    after_meta, _, _ = await store.load(sid, lambda m: 0)
    assert after_meta.summary == before_meta.summary
    assert all(number in after_meta.summary for number in o.values())


async def test_pinned_facts_are_capped_and_the_dropped_ones_stay_in_the_archive(
    app_factory: Any, fake_llm: FakeLLM
) -> None:
    fake_llm.set_responder(upstream())
    app: AppClient = await app_factory(**_settings(fake_llm, pinned_facts_max=3))
    numbers = [with_luhn_digit(f"31876543210987{i:04d}") for i in range(8)]  # 19 digits, Luhn-valid
    sid = await app.new_session()
    for number in numbers:
        turn = await app.ask(sid, f"订单号 {number} 到哪了？")
        await app.services.pipeline.drain()
    meta, _, _ = await app.services.store.load(sid, lambda m: 0)
    facts = pinned(meta.summary)
    folded = meta.summarized // 2
    assert folded >= 5
    assert facts == [f"订单号 {n}" for n in numbers[:folded][-3:]]
    assert numbers[0] not in meta.summary
    assert turn["receipt"]["compressed"] and turn["receipt"]["summary_tokens"] > 0  # not dropped for budget
    # The archive keeps every message: the facts that left the line are there, verbatim.
    store = write_behind(app.services.store)
    assert isinstance(store, ArchivedStore)
    await store.flush()
    found = await store.archive.load(sid)
    assert found is not None
    archived = [m.content for m in found[1]]
    for number in numbers:
        assert f"订单号 {number} 到哪了？" in archived
