"""Subjects of the eighteenth session (invented shops and wording): "besides, I want …" (另外想…) and questions
asked of a store."""

from __future__ import annotations

from rag_core.settings import RewriteSettings
from rag_service.domain import MemoryView, Message, Round
from rag_service.rewrite import KnownNames, RuleRewriter, announces_want
from rag_service.rewrite_rules import Entity, asks_of_store, store_subject


def view(*turns: tuple[str, str]) -> MemoryView:
    rounds = tuple(Round(Message("user", q, 1, 0.0), Message("assistant", a, 1, 0.0)) for q, a in turns)
    return MemoryView("", 0, rounds)


def rewrite(question: str, *turns: tuple[str, str], titles: list[str] | None = None) -> tuple[str, bool]:
    known = KnownNames(titles) if titles is not None else None
    result = RuleRewriter(RewriteSettings(mode="rule")).rewrite_now(question, view(*turns), known)
    return result.query, result.topic_switch


def test_besides_i_want_opens_a_subject_of_its_own_without_a_switch() -> None:
    turns = (("鹿鸣 X3 书包多少钱", "鹿鸣 X3 书包 299 元。"), ("防水吗", "鹿鸣 X3 面料防泼水。"))
    query, switched = rewrite("另外想给他买个保温杯，能刻字吗", *turns)
    assert query == "另外想给他买个保温杯，能刻字吗" and not switched
    assert announces_want("另外还想买双雨靴，有儿童码吗")
    # "另外想问" is an announcement of its own kind; a pronoun that is not the new thing's receiver refers back.
    assert not announces_want("另外想问下保修多久")
    assert not announces_want("另外想把它换成黑色的")
    assert not announces_want("雨罩得另外掏钱不")


def test_a_question_asked_of_a_store_takes_no_product() -> None:
    assert asks_of_store("周日几点关门") and asks_of_store("What's the address?")
    assert not asks_of_store("云帆 T2 几点能送到")
    tent, address = ("云帆 T2 帐篷什么价", "云帆 T2 帐篷 899 元。"), ("请告诉我店的地址", "地址：中山路 8 号。")
    assert rewrite("星期天几点关门", tent, address)[0] == "星期天几点关门"
    assert rewrite("Is it open on Sundays?", ("How much is the Zentra 5 kettle?", "The Zentra 5 is 199 yuan."))[0] == (
        "Is it open on Sundays?"
    )
    # The store's city still goes in front.
    query, _ = rewrite("星期天几点关门", tent, ("宁波那边的门店在哪条路", "地址：中山路 8 号。"))
    assert query == "宁波 星期天几点关门"
    # "they" asks of people (the staff just asked about), not of the store: read as before.
    turns = (
        ("Can I pay with a Zentra card?", "Zentra cards are not accepted."),
        ("Is there someone who speaks Spanish if I call?", "Press 9 for Spanish."),
    )
    assert rewrite("What hours is it open?", *turns)[0] == "What hours is it open?"
    assert rewrite("What hours do they work?", *turns)[0] == "Spanish: What hours do they work?"


def test_a_store_question_may_take_a_place_a_branch_or_a_hotline() -> None:
    said = ["西溪店怎么走", "Is the Riverside store open late?"]
    assert store_subject(Entity("西溪", True), said)
    assert store_subject(Entity("Riverside", True), said)
    assert store_subject(Entity("service hotline", False), said)
    assert store_subject(Entity("苏州", True), said)
    assert not store_subject(Entity("博美", True), said)
    assert not store_subject(Entity("American Express", True), said)
