"""A word jieba tags as a name that names nothing the shop knows (a breed, a service word such as 续保) is no new
subject of the question (invented shop and wording)."""

from __future__ import annotations

from rag_core.settings import RewriteSettings
from rag_service.rewrite import KnownNames, RuleRewriter
from tests.test_rewrite_switches import view

TITLES = ["安宠意外险 保障说明", "Purr 5 猫粮 商品详情"]
PLAN = ("想给狗买个安宠意外险，8 岁还能投保吗", "安宠意外险投保年龄为 3 个月至 10 岁。")


def rewrite(question: str) -> tuple[str, bool]:
    result = RuleRewriter(RewriteSettings(mode="rule")).rewrite_now(question, view(PLAN), KnownNames(TITLES))
    return result.query, result.topic_switch


def test_a_stray_name_tag_does_not_switch_away_from_the_plan() -> None:
    query, switched = rewrite("那续保能续到几岁")
    assert "意外险" in query and not switched
    query, switched = rewrite("那柯基能买吗")
    assert "意外险" in query and not switched


def test_a_name_the_shop_knows_is_still_a_new_subject() -> None:
    query, switched = rewrite("那 Purr 5 猫粮现在什么价")
    assert "意外险" not in query and switched


def test_a_place_is_not_what_a_warranty_is_of_beside_a_stray_tag() -> None:
    abroad = ("我想把它带去加拿大用，电压行吗", "本店电器按 220 V 设计。")
    result = RuleRewriter(RewriteSettings(mode="rule")).rewrite_now(
        "回国以后保修还有效吗", view(abroad), KnownNames(TITLES)
    )
    assert "加拿大" not in result.query and not result.topic_switch


def test_they_after_asking_for_people_are_those_people() -> None:
    turns = (
        ("Do you take Diners Club cards?", "Diners Club is not accepted."),
        ("Is there anybody who speaks English on the phone line?", "Ask for the international desk."),
    )
    result = RuleRewriter(RewriteSettings(mode="rule")).rewrite_now("When are they on duty?", view(*turns))
    assert "Diners" not in result.query
    # "it" is no people: the card is still what "it" may stand for.
    result = RuleRewriter(RewriteSettings(mode="rule")).rewrite_now("Is it accepted online?", view(*turns[:1]))
    assert "Diners Club" in result.query
