"""Subjects of the nineteenth session (invented shops and wording): what a "besides, I want …" question leaves
to the follow-ups after it, 另外 as "separately", returning a service taken out, verbs after "not yet", name tags
that name nothing the shop knows, and the customer's own thing after "for my"."""

from __future__ import annotations

from rag_service.rewrite import wanted
from rag_service.rewrite_rules import entities, find_marker
from tests import test_rewrite_switches as switches

TITLES = ["鹿鸣（Luming）X3 书包 商品详情", "宠物医疗险说明", "门店与营业时间"]


def rewrite(question: str, *turns: tuple[str, str], titles: list[str] | None = TITLES) -> tuple[str, bool]:
    return switches.rewrite(question, *turns, titles=titles)


BAG = ("鹿鸣 X3 书包多少钱", "鹿鸣 X3 书包 299 元。")


def test_after_besides_i_want_the_follow_up_is_about_the_thing_wanted() -> None:
    query, switched = rewrite("下雨能用吗", BAG, ("另外打算买只水杯，哪种最轻", "轻风水杯 120 克。"))
    assert query == "水杯 下雨能用吗" and not switched
    # Without the want, the conversation's product is still the subject.
    assert rewrite("下雨能用吗", BAG, ("有几个颜色", "鹿鸣 X3 有三个颜色。"))[0] == "鹿鸣 X3 下雨能用吗"


def test_the_want_is_its_first_clause() -> None:
    assert wanted("另外打算买只水杯，哪种最轻") == "另外打算买只水杯"
    assert wanted("另外还要一把伞") == "另外还要一把伞"
    assert wanted("腰包哪款最轻") == "腰包哪款最轻"


def test_separately_is_no_cue_but_the_other_one_is() -> None:
    assert find_marker("挂钩是另外卖的不") is None
    assert find_marker("邮费另外算不") is None
    assert find_marker("另外那款有货吗") is not None
    assert find_marker("有另外的颜色吗") is not None


def test_returning_a_service_taken_out_keeps_the_service() -> None:
    card = ("会员卡怎么卖", "会员卡每年九十九元。")
    assert rewrite("开通了后反悔，钱能退不", card) == ("会员卡 开通了后反悔，钱能退不", False)
    # A thing unpacked is no service taken out: another service, read as asked.
    assert rewrite("包装拆开后反悔，钱能退不", card)[0] == "包装拆开后反悔，钱能退不"


def test_a_word_after_not_yet_is_a_verb() -> None:
    assert [e.text for e in entities("快递尚未发货，赠品能换吗")] == ["赠品"]
    assert [e.text for e in entities("还没有发票")] == ["发票"]
    trial = ("包裹尚未发货，先寄个小样行不行", "小样可以先寄。")
    assert rewrite("拆开后要试几天", trial)[0] == "小样 拆开后要试几天"


def test_a_name_tag_the_shop_does_not_know_is_no_subject() -> None:
    groom = ("柯基剪个毛贵不贵", "剪毛 120 元。")
    # jieba tags the breed a name; no title spells it, so the follow-up is not glued to the customer's dog.
    assert rewrite("要提前约吗", groom, titles=["洗护服务价格", "门店与营业时间"])[0] == "要提前约吗"
    # Without a knowledge base to tell, as before.
    assert rewrite("要提前约吗", groom, titles=None)[0] == "柯基 要提前约吗"
    # A branch the customer wrote before 店 and a product the titles spell stay subjects.
    assert rewrite("周末开到几点", ("湖墅店在哪", "湖墅店在中山路。"))[0] == "湖墅店 周末开到几点"
    assert rewrite("有几个颜色", BAG)[0] == "鹿鸣 X3 有几个颜色"


def test_the_customers_own_thing_after_for_my_weighs_less() -> None:
    turns = (("How do I get a receipt for my web booking?", "Ask the front desk."),)
    assert rewrite("Is it free?", *turns)[0] == "Is receipt free?"


def test_a_store_question_after_which_store_takes_the_store_the_answer_named() -> None:
    which = ("Which of your branches does bike fitting?", "The Maple Lane store in Wuxi does fittings on weekdays.")
    assert rewrite("What's the address?", which)[0] == "Maple Lane store: What's the address?"
    which_zh = ("哪家店能修自行车", "无锡枫林路店有维修车间。")
    assert rewrite("它晚上营业到几时", which_zh)[0] == "无锡枫林路店晚上营业到几时"
    # Not asked which store: the answer's store is not put in.
    assert rewrite("What's the address?", ("Can I get a bike fitted?", "The Maple Lane store does fittings."))[0] == (
        "What's the address?"
    )
