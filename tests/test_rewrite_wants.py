"""Subjects of the nineteenth session (invented shops and wording): what a "besides, I want …" question leaves
to the follow-ups after it."""

from __future__ import annotations

from rag_core.settings import RewriteSettings
from rag_service.domain import MemoryView, Message, Round
from rag_service.rewrite import KnownNames, RuleRewriter, wanted

TITLES = ["鹿鸣（Luming）X3 书包 商品详情", "宠物医疗险说明", "门店与营业时间"]


def view(*turns: tuple[str, str]) -> MemoryView:
    rounds = tuple(Round(Message("user", q, 1, 0.0), Message("assistant", a, 1, 0.0)) for q, a in turns)
    return MemoryView("", 0, rounds)


def rewrite(question: str, *turns: tuple[str, str], titles: list[str] | None = TITLES) -> tuple[str, bool]:
    known = KnownNames(titles) if titles is not None else None
    result = RuleRewriter(RewriteSettings(mode="rule")).rewrite_now(question, view(*turns), known)
    return result.query, result.topic_switch


BAG = ("鹿鸣 X3 书包多少钱", "鹿鸣 X3 书包 299 元。")


def test_after_besides_i_want_the_follow_up_is_about_the_thing_wanted() -> None:
    query, switched = rewrite("下雨能用吗", BAG, ("另外想买个腰包，哪款最轻", "轻风腰包 120 克。"))
    assert query == "腰包 下雨能用吗" and not switched
    # Without the want, the conversation's product is still the subject.
    assert rewrite("下雨能用吗", BAG, ("有几个颜色", "鹿鸣 X3 有三个颜色。"))[0] == "鹿鸣 X3 下雨能用吗"


def test_the_want_is_its_first_clause() -> None:
    assert wanted("另外想买个腰包，哪款最轻") == "另外想买个腰包"
    assert wanted("另外还要一把伞") == "另外还要一把伞"
    assert wanted("腰包哪款最轻") == "腰包哪款最轻"
