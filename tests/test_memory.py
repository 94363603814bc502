"""Unit tests of the memory strategies, the token budget and the summarizers (no app, no retrieval)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest

from rag_core.settings import BudgetSettings, LLMEndpoint, MemorySettings
from rag_core.tokens import TokenCounter
from rag_service.budget import plan_budget, round_cost
from rag_service.domain import MemoryView, Message, Round, SessionMeta
from rag_service.llm import ChatClient, UpstreamError
from rag_service.memory import (
    FullHistory,
    SlidingWindow,
    SummaryMemory,
    TokenTruncation,
    make_memory,
    pair_rounds,
)
from rag_service.summary import (
    PINNED_HEADER,
    ExtractiveSummarizer,
    LLMSummarizer,
    key_facts,
    pin_facts,
)
from rag_service.testing.fake_llm import FakeLLM, Fault, scripted

ORDER = "XC20250301000123"


def user(text: str, tokens: int = 10) -> Message:
    return Message("user", text, tokens, 0.0)


def bot(text: str, tokens: int = 10) -> Message:
    return Message("assistant", text, tokens, 0.0)


def conversation(n: int, tokens: int = 10) -> list[Message]:
    """n answered rounds: q1 a1 q2 a2 ..."""
    out: list[Message] = []
    for i in range(1, n + 1):
        out += [user(f"q{i}", tokens), bot(f"a{i}", tokens)]
    return out


def questions(rounds: Sequence[Round]) -> list[str]:
    return [r.user.content for r in rounds]


def meta(count: int, **kw: Any) -> SessionMeta:
    return SessionMeta("s", 0.0, message_count=count, **kw)


def load(strategy: Any, m: SessionMeta, stored: list[Message]) -> tuple[list[Message], int]:
    """What the store hands a turn: the messages from the strategy's `load_from` on."""
    start = strategy.load_from(m)
    return stored[start:], start


# -- pair_rounds ------------------------------------------------------------------------------------


def test_pair_rounds_skips_dangling_questions_and_applies_offset() -> None:
    msgs = [user("q1"), user("q1 again"), bot("a1"), user("q2"), bot("a2"), user("q3 unanswered")]
    pairs = pair_rounds(msgs, offset=10)
    assert [(i, r.user.content, r.assistant.content) for i, r in pairs] == [
        (11, "q1 again", "a1"),
        (13, "q2", "a2"),
    ]


def test_pair_rounds_ignores_a_leading_answer_and_empty_input() -> None:
    assert pair_rounds([]) == []
    assert pair_rounds([user("only")]) == []
    pairs = pair_rounds([bot("a0"), user("q1"), bot("a1")])
    assert [(i, r.user.content) for i, r in pairs] == [(1, "q1")]


# -- full / window / truncate -----------------------------------------------------------------------


def test_full_history_sends_every_round_and_never_compresses() -> None:
    stored = [*conversation(30), user("dangling")]
    s = FullHistory()
    m = meta(len(stored))
    assert s.load_from(m) == 0
    view = s.select(m, stored, 0)
    assert questions(view.rounds) == [f"q{i}" for i in range(1, 31)]
    assert view.summary == ""
    assert s.compression_due(m, stored, 0, topic_switch=True) is None


@pytest.mark.parametrize("n", [1, 3, 6])
def test_window_keeps_exactly_the_newest_n_rounds(n: int) -> None:
    s = SlidingWindow(n)
    for total in range(0, 15):
        stored = conversation(total)
        loaded, offset = load(s, meta(len(stored)), stored)
        view = s.select(meta(len(stored)), loaded, offset)
        assert questions(view.rounds) == [f"q{i}" for i in range(max(1, total - n + 1), total + 1)]
        assert s.compression_due(meta(len(stored)), loaded, offset, topic_switch=True) is None


def test_window_still_holds_n_rounds_with_dangling_questions_in_its_tail() -> None:
    """A user retrying through an outage leaves unanswered questions; they are not rounds."""
    n = 4
    s = SlidingWindow(n)
    stored = conversation(5)
    # n + 1 questions that failed upstream, each asked again (and answered) right after.
    for i in range(6, 11):
        stored += [user(f"retry{i}"), user(f"q{i}"), bot(f"a{i}")]
    loaded, offset = load(s, meta(len(stored)), stored)
    view = s.select(meta(len(stored)), loaded, offset)
    assert questions(view.rounds) == ["q7", "q8", "q9", "q10"]
    assert all(not r.user.content.startswith("retry") for r in view.rounds)


def test_window_of_zero_sends_no_history() -> None:
    s = SlidingWindow(0)
    stored = conversation(5)
    loaded, offset = load(s, meta(len(stored)), stored)
    assert s.select(meta(len(stored)), loaded, offset).rounds == ()


def test_truncate_keeps_the_newest_whole_rounds_that_fit() -> None:
    overhead = 4
    # Round costs: 10+10+8 = 28 each; a budget of 90 holds 3 of them (84), never half a round.
    s = TokenTruncation(budget=90, overhead=overhead, min_round_tokens=8)
    stored = conversation(10)
    loaded, offset = load(s, meta(len(stored)), stored)
    view = s.select(meta(len(stored)), loaded, offset)
    assert questions(view.rounds) == ["q8", "q9", "q10"]
    assert sum(round_cost(r, overhead) for r in view.rounds) <= 90
    assert all(r.user.role == "user" and r.assistant.role == "assistant" for r in view.rounds)


def test_truncate_stops_at_the_first_round_that_does_not_fit() -> None:
    """Newest contiguous rounds only: an older small round never jumps over a big one."""
    stored = [user("q1", 1), bot("a1", 1), user("q2", 200), bot("a2", 200), user("q3", 5), bot("a3", 5)]
    s = TokenTruncation(budget=100, overhead=0, min_round_tokens=2)
    view = s.select(meta(len(stored)), stored, 0)
    assert questions(view.rounds) == ["q3"]


def test_truncate_with_a_round_bigger_than_the_budget_sends_nothing() -> None:
    stored = conversation(3, tokens=100)
    s = TokenTruncation(budget=150, overhead=4, min_round_tokens=8)
    assert s.select(meta(len(stored)), stored, 0).rounds == ()


def test_truncate_loads_a_bounded_tail_that_still_holds_everything_that_fits() -> None:
    s = TokenTruncation(budget=100, overhead=1, min_round_tokens=10)  # at most 10 rounds fit
    stored = conversation(500, tokens=4)  # 10 tokens a round: exactly 10 fit
    m = meta(len(stored))
    start = s.load_from(m)
    assert 0 < start <= len(stored) - 20
    view = s.select(m, stored[start:], start)
    assert questions(view.rounds) == [f"q{i}" for i in range(491, 501)]
    assert view.rounds == s.select(m, stored, 0).rounds


# -- summary / hybrid -------------------------------------------------------------------------------


def mem_settings(**kw: Any) -> MemorySettings:
    base: dict[str, Any] = {"summary_trigger": "tokens", "summary_threshold_tokens": 100, "window_rounds": 2}
    return MemorySettings(**{**base, **kw})


def test_hybrid_sends_the_summary_and_every_round_not_yet_compressed() -> None:
    s = SummaryMemory("hybrid", 2, mem_settings(), overhead=4)
    stored = conversation(8)
    m = meta(len(stored), summary="S", summary_tokens=7, summarized=6)
    loaded, offset = load(s, m, stored)
    assert offset == 6
    view = s.select(m, loaded, offset)
    assert view.summary == "S" and view.summary_tokens == 7
    assert questions(view.rounds) == ["q4", "q5", "q6", "q7", "q8"]


def test_tokens_trigger_folds_all_but_the_window_once_past_the_threshold() -> None:
    overhead = 4
    s = SummaryMemory("hybrid", 2, mem_settings(summary_threshold_tokens=100), overhead)
    # 28 tokens a round as sent: 3 rounds = 84 (under), 4 rounds = 112 (over).
    stored = conversation(3)
    assert s.compression_due(meta(len(stored)), stored, 0, topic_switch=False) is None
    stored = conversation(4)
    plan = s.compression_due(meta(len(stored)), stored, 0, topic_switch=False)
    assert plan is not None
    assert (plan.start, plan.upto) == (0, 4)
    assert questions(plan.rounds) == ["q1", "q2"]


def test_compression_is_incremental_from_where_the_last_one_stopped() -> None:
    s = SummaryMemory("hybrid", 2, mem_settings(summary_threshold_tokens=100), overhead=4)
    stored = conversation(9)
    m = meta(len(stored), summary="old", summary_tokens=5, summarized=8)
    loaded, offset = load(s, m, stored)
    plan = s.compression_due(m, loaded, offset, topic_switch=False)
    assert plan is not None
    # Rounds 5..9 pending (140 tokens > 100); the newest 2 stay verbatim, 5..7 leave the window.
    assert (plan.start, plan.upto) == (8, 14)
    assert questions(plan.rounds) == ["q5", "q6", "q7"]


def test_summary_strategy_folds_every_pending_round() -> None:
    s = SummaryMemory("summary", 0, mem_settings(summary_threshold_tokens=50), overhead=4)
    stored = conversation(2)
    plan = s.compression_due(meta(len(stored)), stored, 0, topic_switch=False)
    assert plan is not None and (plan.start, plan.upto) == (0, 4)
    assert questions(plan.rounds) == ["q1", "q2"]


def test_compression_plan_skips_over_dangling_questions() -> None:
    s = SummaryMemory("hybrid", 1, mem_settings(summary_threshold_tokens=10), overhead=0)
    stored = [user("q1"), bot("a1"), user("lost"), user("q2"), bot("a2"), user("q3"), bot("a3")]
    plan = s.compression_due(meta(len(stored)), stored, 0, topic_switch=False)
    assert plan is not None
    assert questions(plan.rounds) == ["q1", "q2"]
    assert plan.upto == 5  # right after a2; q3/a3 stay verbatim
    view = s.select(meta(len(stored), summarized=plan.upto), stored[plan.upto :], plan.upto)
    assert questions(view.rounds) == ["q3"]


def test_nothing_to_fold_inside_the_window_means_no_compression() -> None:
    s = SummaryMemory("hybrid", 3, mem_settings(summary_threshold_tokens=1), overhead=4)
    stored = conversation(3, tokens=500)
    assert s.compression_due(meta(len(stored)), stored, 0, topic_switch=True) is None


def test_rounds_trigger() -> None:
    s = SummaryMemory("hybrid", 2, mem_settings(summary_trigger="rounds", summary_every_rounds=3), overhead=4)
    stored = conversation(4)  # 2 foldable
    assert s.compression_due(meta(len(stored)), stored, 0, topic_switch=False) is None
    stored = conversation(5, tokens=1)  # 3 foldable, however small
    plan = s.compression_due(meta(len(stored)), stored, 0, topic_switch=False)
    assert plan is not None and questions(plan.rounds) == ["q1", "q2", "q3"]


def test_topic_trigger() -> None:
    s = SummaryMemory("hybrid", 1, mem_settings(summary_trigger="topic", summary_threshold_tokens=1), overhead=4)
    stored = conversation(4, tokens=1000)
    assert s.compression_due(meta(len(stored)), stored, 0, topic_switch=False) is None
    plan = s.compression_due(meta(len(stored)), stored, 0, topic_switch=True)
    assert plan is not None and questions(plan.rounds) == ["q1", "q2", "q3"]


@pytest.mark.parametrize(
    ("name", "cls"),
    [("full", FullHistory), ("window", SlidingWindow), ("truncate", TokenTruncation), ("summary", SummaryMemory)],
)
def test_make_memory_picks_the_configured_strategy(name: str, cls: type) -> None:
    s = make_memory(MemorySettings(strategy=name), history_budget=100, overhead=4)  # type: ignore[arg-type]
    assert isinstance(s, cls) and s.name == name


def test_make_memory_hybrid_keeps_the_window_verbatim() -> None:
    s = make_memory(MemorySettings(strategy="hybrid", window_rounds=5), history_budget=100, overhead=4)
    assert isinstance(s, SummaryMemory) and s.name == "hybrid" and s.keep == 5


# -- pinned facts -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "facts"),
    [
        (f"我的订单号是 {ORDER}，金额 8999 元", [ORDER, "8999 元"]),
        (f"我的订单号是{ORDER}，金额8999元", [ORDER, "8999元"]),  # no spaces around the id in Chinese
        (f"订单{ORDER}的物流到哪了", [ORDER]),
        ("2025年3月1日下单，3月5号到货，签收日期 2025-03-07", ["2025年3月1日", "3月5号", "2025-03-07"]),
        ("退款 ¥8,999.00，分期 1.5万元，手续费 RMB 300", ["¥8,999.00", "1.5万元", "RMB 300"]),
        ("客服电话 400-820-1234，手机 13812345678", ["400-820-1234", "13812345678"]),
        ("Delivered on March 1, 2025; I paid USD 99, ok?", ["March 1, 2025", "USD 99"]),
        ("运单号 773012345678901", ["773012345678901"]),
        ("iPhone 16 Pro 256GB 有货吗", []),
        ("金额 8999 元，也就是 8,999 元", ["8999 元"]),  # one fact however it is spaced
    ],
)
def test_key_facts(text: str, facts: list[str]) -> None:
    assert key_facts(text) == facts


def rounds_of(*pairs: tuple[str, str]) -> list[Round]:
    return [Round(user(q), bot(a)) for q, a in pairs]


def test_pin_facts_appends_what_the_summary_dropped() -> None:
    rounds = rounds_of(
        (f"我的订单号是{ORDER}，金额 8999 元，2025年3月1日下的单", "好的，已为您查到该订单。"),
        ("什么时候发货？", "预计3月3日发货。"),
    )
    summary = "用户在询问订单的发货时间，金额为8,999元。"
    out = pin_facts(summary, rounds, previous_summary="")
    assert out.startswith(summary)
    last = out.splitlines()[-1]
    assert last.startswith(PINNED_HEADER)
    for fact in (ORDER, "2025年3月1日", "3月3日"):
        assert fact in last
    assert "8999" not in last  # the summary kept the amount (spelled 8,999元)


def test_pin_facts_leaves_a_complete_summary_alone() -> None:
    rounds = rounds_of((f"订单 {ORDER} 退款 299 元", "好的"))
    summary = f"用户要求订单{ORDER}退款299元。"
    assert pin_facts(summary, rounds, "") == summary
    assert pin_facts("闲聊。", rounds_of(("你好", "您好！")), "") == "闲聊。"


def test_pinned_facts_survive_later_compressions() -> None:
    first = pin_facts("用户询问订单。", rounds_of((f"订单号{ORDER}，金额8999元", "收到")), "")
    # The next summary is written from `first` but forgets the facts again.
    second = pin_facts("用户后来询问了 MacBook Air M3 的颜色。", rounds_of(("有几种颜色？", "四种")), first)
    assert ORDER in second and "8999元" in second
    assert second.count(PINNED_HEADER) == 1


async def test_extractive_summarizer_caps_its_size_and_drops_old_pinned_lines(counter: TokenCounter) -> None:
    settings = MemorySettings(summary_max_tokens=40)
    summarizer = ExtractiveSummarizer(counter, settings)
    previous = f"- The user asked: q0\n{PINNED_HEADER} {ORDER}"
    rounds = [Round(user(f"第{i}个问题：这台电脑的屏幕多大？"), bot("十三英寸")) for i in range(1, 9)]
    text = await summarizer.summarize(previous, rounds)
    assert PINNED_HEADER not in text
    assert counter.count(text) <= 40
    assert text.splitlines()[-1] == "- The user asked: 第8个问题：这台电脑的屏幕多大？"  # newest kept
    # pin_facts then brings back the facts the cap dropped.
    assert ORDER in pin_facts(text, rounds, previous)


async def test_llm_summarizer_sends_previous_summary_and_new_rounds() -> None:
    settings = MemorySettings(summary_max_tokens=123)
    with FakeLLM(scripted([("running summary", "用户在问订单。")])) as fake:
        client = ChatClient(LLMEndpoint(base_url=fake.base_url, max_retries=0))
        try:
            text = await LLMSummarizer(client, settings).summarize("旧摘要", rounds_of((f"订单{ORDER}", "好的")))
        finally:
            await client.close()
    assert text == "用户在问订单。"
    request = fake.requests[-1]
    system, prompt = request["messages"]
    assert system["role"] == "system" and "running summary" in system["content"] and "123 tokens" in system["content"]
    assert "旧摘要" in prompt["content"] and f"User: 订单{ORDER}\nAssistant: 好的" in prompt["content"]
    assert request["max_tokens"] == 123


@pytest.mark.parametrize("reply", ["   ", Fault(500)])
async def test_llm_summarizer_failures_raise(reply: str | Fault) -> None:
    with FakeLLM(scripted([("running summary", reply)])) as fake:
        client = ChatClient(LLMEndpoint(base_url=fake.base_url, max_retries=0))
        try:
            with pytest.raises((ValueError, UpstreamError)):
                await LLMSummarizer(client, MemorySettings()).summarize("", rounds_of(("q", "a")))
        finally:
            await client.close()


# -- the budget -------------------------------------------------------------------------------------

OVERHEAD = 4


def budget(**kw: Any) -> BudgetSettings:
    base: dict[str, Any] = {
        "context_window": 4000,
        "total_budget": 3000,
        "generation_reserve": 500,
        "query_allowance": 200,
        "min_chunk_budget": 400,
        "protected_rounds": 2,
    }
    return BudgetSettings(**{**base, **kw})


def view(n: int, tokens: int, summary: str = "") -> MemoryView:
    rounds = tuple(Round(user(f"q{i}", tokens), bot(f"a{i}", tokens)) for i in range(1, n + 1))
    return MemoryView(summary, 50 if summary else 0, rounds)


def plan(settings: BudgetSettings, v: MemoryView, system: int = 100, query: int = 50) -> Any:
    return plan_budget(
        settings,
        system_tokens=system,
        query_tokens=query,
        view=v,
        summary_message_tokens=(v.summary_tokens + OVERHEAD) if v.summary else 0,
        overhead=OVERHEAD,
    )


def test_ample_budget_keeps_everything_and_gives_the_rest_to_chunks() -> None:
    b = budget()
    v = view(5, 50, summary="S")  # 5 x 108 + 54
    p = plan(b, v)
    assert p.rounds == v.rounds and p.summary == "S" and p.rounds_dropped == 0
    assert p.history_tokens == 5 * 108
    assert p.summary_tokens == 54
    assert p.chunk_budget == 3000 - 100 - 500 - 50 - 540 - 54


def test_tight_budget_drops_oldest_rounds_first_then_the_summary() -> None:
    b = budget()
    # room for history = 3000 - 650 - 400 = 1950; rounds cost 408 each.
    p = plan(b, view(6, 200, summary="S"))
    assert questions(p.rounds) == ["q3", "q4", "q5", "q6"]  # 1632 + 54 <= 1950
    assert p.summary == "S" and p.rounds_dropped == 2
    assert p.chunk_budget == 3000 - 650 - 1632 - 54

    # Protected rounds alone leave no room for the summary: it goes, they stay.
    p = plan(b, view(6, 500, summary="S"))  # 1008 a round: the 2 protected ones + summary = 2070 > 1950
    assert questions(p.rounds) == ["q5", "q6"]
    assert p.summary == "" and p.summary_tokens == 0
    assert p.chunk_budget == b.min_chunk_budget


def test_the_last_two_rounds_outrank_context_until_the_window_itself_overflows() -> None:
    b = budget()
    # hard room = 4000 - 650 - 400 = 2950: two rounds of 1208 fit (beyond total_budget), three do not.
    p = plan(b, view(4, 600, summary="S"))
    assert questions(p.rounds) == ["q3", "q4"] and p.summary == ""
    assert p.history_tokens == 2416
    assert p.chunk_budget == b.min_chunk_budget
    # Now even the protected rounds would overflow the window: the older of them goes.
    p = plan(b, view(4, 800, summary="S"))  # 1608 a round
    assert questions(p.rounds) == ["q4"]
    p = plan(b, view(4, 2000))  # one round alone is too big
    assert p.rounds == () and p.history_tokens == 0


@pytest.mark.parametrize("tokens", [0, 10, 100, 300, 600, 900, 1500, 3000])
@pytest.mark.parametrize("n", [0, 1, 2, 3, 10])
def test_budget_invariants(tokens: int, n: int) -> None:
    b = budget()
    v = view(n, tokens, summary="S")
    p = plan(b, v)
    fixed = 100 + b.generation_reserve + 50
    assert p.chunk_budget >= b.min_chunk_budget
    assert p.chunk_budget == max(b.min_chunk_budget, b.total_budget - fixed - p.history_tokens - p.summary_tokens)
    # With the minimum context, the prompt plus the reserve never passes the window.
    assert fixed + p.history_tokens + p.summary_tokens + b.min_chunk_budget <= b.context_window
    # What is kept is the newest contiguous tail, and its cost is what the plan says.
    assert p.rounds == v.rounds[len(v.rounds) - len(p.rounds) :]
    assert p.history_tokens == sum(round_cost(r, OVERHEAD) for r in p.rounds)
    assert p.rounds_dropped == n - len(p.rounds)
    # The summary is only dropped once every unprotected round is gone.
    if not p.summary:
        assert len(p.rounds) <= b.protected_rounds
