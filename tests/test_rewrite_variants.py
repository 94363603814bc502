"""Follow-ups that name only a variant of the conversation's product, identifiers that are no subject, and
questions about the conversation itself (invented shops and wording)."""

from __future__ import annotations

from rag_core.settings import RewriteSettings
from rag_service.domain import MemoryView, Message, Round
from rag_service.rewrite import RuleRewriter
from rag_service.rewrite_rules import (
    Entity,
    _with_variant,
    entities,
    product_names,
    variant_only,
    with_family,
    without_preamble,
)
from tests.test_rewrite_subjects import Orthogonal


def view(*turns: tuple[str, str]) -> MemoryView:
    rounds = tuple(Round(Message("user", q, 1, 0.0), Message("assistant", a, 1, 0.0)) for q, a in turns)
    return MemoryView("", 0, rounds)


def rewrite(question: str, *turns: tuple[str, str], embedder: Orthogonal | None = None) -> str:
    rules = RuleRewriter(RewriteSettings(mode="rule", topic_similarity=0.84), embedder)
    return rules.rewrite_now(question, view(*turns)).query


def test_a_lone_variant_word_takes_the_conversations_product() -> None:
    query = rewrite("Which zipper does the Pro have?", ("How much is the Brisa 3 Pro kayak?", ""))
    assert "Brisa 3 Pro" in query and "Pro Pro" not in query
    # The product's own variant is not doubled.
    assert rewrite("Pro 的船身多重", ("Brisa 3 Pro 皮划艇多少钱", "")) == "Brisa 3 Pro 的船身多重"


def test_another_capacity_is_a_sibling_of_the_same_family() -> None:
    history = ("How much is the Fennick 30L duffel?", "")
    query = rewrite("How much is the 55L?", history, embedder=Orthogonal())
    assert query == "How much is the Fennick 55L?"
    rules = RuleRewriter(RewriteSettings(mode="rule", topic_similarity=0.84), Orthogonal())
    assert not rules.rewrite_now("How much is the 55L?", view(history)).topic_switch


def test_a_sibling_leaves_the_previous_pages() -> None:
    rules = RuleRewriter(RewriteSettings(mode="rule"))
    result = rules.rewrite_now("What's the warranty on the 55L?", view(("How much is the Fennick 30L duffel?", "")))
    assert "Fennick 55L" in result.query and result.continues == ()
    same = rules.rewrite_now("Pro 的船身多重", view(("Brisa 3 Pro 皮划艇多少钱", "")))
    assert same.continues  # its own variant: the same page


def test_a_contrast_to_a_capacity_keeps_the_family() -> None:
    query = rewrite("那 20L 呢", ("Torva 35L Max 背包多少钱", ""), ("背负重量多少", ""))
    assert "Torva 20L" in query and "35L" not in query


def test_a_variant_takes_the_place_of_an_edition_code() -> None:
    assert _with_variant("Ridgeway R-7 GTX", "Lite") == "Ridgeway R-7 Lite"
    assert _with_variant("Nimbus 12", "Pro") == "Nimbus 12 Pro"
    assert _with_variant("Nimbus 12 Pro", "Max") == "Nimbus 12 Max"


def test_variant_helpers() -> None:
    assert variant_only([e for e in entities("Is the Max quieter?") if e.named])
    assert not variant_only([e for e in entities("Is the Nimbus 12 quieter?") if e.named])
    assert with_family("Is the Max quieter?", "Nimbus 12") == "Is the Nimbus 12 Max quieter?"
    assert with_family("Is it quieter?", "Nimbus 12") is None


def test_a_capacity_before_a_variant_belongs_to_the_model() -> None:
    assert product_names("65L Pro 背负系统能调吗") == ["65L Pro"]


def test_an_identifier_is_never_a_subject() -> None:
    # What memory stores: the phone number masked.
    first = ("我手机号 139****2288，想租两套钓具，怎么收费", "")
    for question in ("押金多少", "最晚几点还"):
        query = rewrite(question, first)
        assert "手机" not in query and "139" not in query
    assert not {e.key for e in entities("My order number is ZX20250101-7777, is it shipped?")} & {"order number"}
    assert "手机号" not in {e.key for e in entities("我的手机号是 13900002288")}


def test_a_question_about_the_conversation_gets_no_subject() -> None:
    history = (("Nimbus 12 多少钱", ""), ("电池多大", ""))
    assert rewrite("对了，你还记得我的手机号吗", *history) == "对了，你还记得我的手机号吗"
    assert rewrite("What was my order number again?", ("How much is the Nimbus 12?", "")) == (
        "What was my order number again?"
    )


def test_a_price_is_never_asked_of_a_place() -> None:
    query = rewrite("How much is it?", ("I need a lantern for a cruise to Japan. Which one fits?", ""))
    assert "Japan" not in query and "lantern" in query


def test_a_size_question_after_a_product_is_about_it() -> None:
    query = rewrite("What's the cockpit size?", ("How much is the Brisa 3 kayak?", ""))
    assert "Brisa 3" in query


def test_a_short_question_about_an_unknown_attribute_is_no_switch() -> None:
    rules = RuleRewriter(RewriteSettings(mode="rule", topic_similarity=0.84), Orthogonal())
    history = view(("Torva 35L 背包多少钱", ""))
    result = rules.rewrite_now("肩带能拆吗", history)
    assert not result.topic_switch and "Torva 35L" in result.query
    # A question about one of the shop's services is still its own.
    assert rules.rewrite_now("你们的发票怎么开", history).query == "你们的发票怎么开"


def test_can_i_return_it_asks_about_returns_not_the_product() -> None:
    history = (("Brisa 3 皮划艇多少钱", ""), ("船身多重", ""))
    assert rewrite("划过一次了还能退吗", *history) == "划过一次了还能退吗"


def test_a_greeting_and_a_given_identifier_are_not_searched() -> None:
    assert without_preamble("您好，我的订单号是 ZX20250101-7777，想问下 Torva 35L 多少钱") == "想问下 Torva 35L 多少钱"
    assert without_preamble("Hi! My phone number is 139****2288. Do you rent kayaks?") == "Do you rent kayaks?"
    # Nothing else to ask, or nothing of its own: the question stays as it is.
    assert without_preamble("我的订单号是 ZX20250101-7777，到哪了？") == "我的订单号是 ZX20250101-7777，到哪了？"
    assert without_preamble("你好") == "你好"
    first = RuleRewriter(RewriteSettings(mode="rule")).rewrite_now("Hello, what does a Brisa 3 weigh?", view())
    assert first.query == "what does a Brisa 3 weigh?"


def test_if_its_a_kind_of_thing_names_its_own_case() -> None:
    history = ("How many days do I have to return a blender?", "")
    assert rewrite("What if it's a washing machine that was never plugged in?", history) == (
        "What if it's a washing machine that was never plugged in?"
    )


def test_a_standalone_follow_up_leans_on_the_previous_pages_unless_it_names_another_product() -> None:
    rules = RuleRewriter(RewriteSettings(mode="rule"))
    history = view(("Which delivery windows can I pick for a sofa?", ""))
    stays = rules.rewrite_now("Is the morning window offered in Harbin?", history)
    assert stays.action == "skipped" and stays.continues == ("Which delivery windows can I pick for a sofa?",)
    moves = rules.rewrite_now("How much is the Brisa 3 kayak?", history)
    assert moves.continues == ()


def test_a_possessive_ends_the_name_it_belongs_to() -> None:
    found = entities("What did Mira Solvang's essay say about borders?")
    assert found[0] == Entity("Mira Solvang", True)
    assert rewrite("Was it widely read?", ("What did Mira Solvang's essay say about borders?", "")).count("'s") == 0
    # A contrast edits the name together with its possessive (never a stray " 's").
    query = rewrite("and the Max one?", ("What's the Orla K9's noise level?", ""))
    assert "Max" in query and "noise level" in query and " 's" not in query
