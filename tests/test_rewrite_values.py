"""Follow-ups whose value comes after a verb, pack sizes in words, a pet's "it" and relative clauses after "one"
(invented shops and products)."""

from __future__ import annotations

import pytest

from rag_core.settings import RewriteSettings
from rag_service.domain import MemoryView, Message, Round
from rag_service.rewrite import RuleRewriter
from rag_service.rewrite_rules import Entity, contrast_followup, entities, resolve


def view(*questions: str) -> MemoryView:
    rounds = tuple(Round(Message("user", q, 1, 0.0), Message("assistant", "", 1, 0.0)) for q in questions)
    return MemoryView("", 0, rounds)


@pytest.mark.parametrize(
    ("question", "core", "kind"),
    [
        ("那分 12 期呢", "12 期", "term"),
        ("延两年呢", "两年", "term"),
        ("改成五年的呢", "五年", "term"),
        ("换基础款的话呢", "基础款", "standard"),
        ("选绿色的呢", "绿色", "colour"),
        ("要 64G 的呢", "64G", "storage"),
        ("换 Lite 呢", "Lite", "variant"),
        ("小号呢", "小号", "size"),
    ],
)
def test_a_verb_before_a_value_only_repeats_the_previous_question(question: str, core: str, kind: str) -> None:
    contrast = contrast_followup(question)
    assert contrast is not None and (contrast.core, contrast.kind) == (core, kind), contrast


@pytest.mark.parametrize("question", ["那广州呢", "两年的呢", "绿色呢"])
def test_a_value_alone_stays_whole(question: str) -> None:
    contrast = contrast_followup(question)
    assert contrast is not None and contrast.core == question.removeprefix("那").removesuffix("呢").removesuffix("的")


@pytest.mark.parametrize(
    ("history", "question", "expected"),
    [
        (["松果 R2 分 3 期利息怎么算"], "那分 12 期呢", "松果 R2 分 12 期利息怎么算"),
        (["茶几买的，延保三年什么价"], "延两年呢", "茶几买的，延保两年什么价"),
        (["蓝鲸 K5 Pro 几天能到货"], "换基础款的话呢", "蓝鲸 K5 几天能到货"),
    ],
)
def test_a_verb_led_value_replaces_the_old_one(history: list[str], question: str, expected: str) -> None:
    result = RuleRewriter(RewriteSettings(mode="rule")).rewrite_now(question, view(*history))
    assert result.query == expected, result


def test_a_pack_size_in_words_stays_with_the_product() -> None:
    result = RuleRewriter(RewriteSettings(mode="rule")).rewrite_now("大袋的呢", view("咕噜猫粮 颗粒硬不硬"))
    assert result.query.startswith("咕噜猫粮大袋"), result


@pytest.mark.parametrize(
    ("question", "expected"),
    [
        ("颗粒硬不硬，它肠胃弱", "猫粮 颗粒硬不硬，它肠胃弱"),
        ("打算给它挑个窝", "猫粮 打算给它挑个窝"),
        ("它什么价", "猫粮什么价"),
    ],
)
def test_a_pets_it_is_not_the_product(question: str, expected: str) -> None:
    assert resolve(question, Entity("猫粮", False)) == expected


def test_its_teeth_are_the_pets() -> None:
    expected = "Acme Chew: Is the kibble gentle on its teeth?"
    assert resolve("Is the kibble gentle on its teeth?", Entity("Acme Chew", True)) == expected


def test_a_relative_clause_after_one_opens_with_a_verb() -> None:
    found = [e.text for e in entities("and the family one that covers free frames?")]
    assert "covers free frames" not in found and "free frames" in found, found


@pytest.mark.parametrize(
    ("question", "entity"),
    [
        ("地毯你们熨烫收费吗", "熨烫"),
        ("你家防晒都带香味吗", "防晒"),
    ],
)
def test_a_service_or_kind_read_as_a_verb_is_a_noun(question: str, entity: str) -> None:
    found = [e.text for e in entities(question)]
    assert any(entity in f for f in found), found


def test_the_service_priced_is_lent_to_a_follow_up() -> None:
    result = RuleRewriter(RewriteSettings(mode="rule")).rewrite_now("剪一回需要几分钟", view("你们中型犬洗澡价格贵吗"))
    assert "洗澡" in result.query, result


def test_a_place_of_its_own_takes_no_other_place() -> None:
    rounds = (
        Round(
            Message("user", "顺便问下，寄到西藏运费多少", 1, 0.0),
            Message("assistant", "西藏每单 25 元，成都每单 9 元。", 1, 0.0),
        ),
        Round(Message("user", "满多少能免运费", 1, 0.0), Message("assistant", "满 199 元免运费。", 1, 0.0)),
    )
    question = "那如果人在成都市区，隔天可以送达吗"
    result = RuleRewriter(RewriteSettings(mode="rule")).rewrite_now(question, MemoryView("", 0, rounds))
    assert result.query == question, result


def test_a_variant_goes_before_the_possessive() -> None:
    rewriter = RuleRewriter(RewriteSettings(mode="rule"))
    history = view("What's the Brisa K4's noise level?")
    result = rewriter.rewrite_now("and the Max one?", history)
    assert result.query == "What's the Brisa K4 Max's noise level?", result
