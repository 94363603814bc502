"""A time limit asked as a window ("多长时间之内要买", "how long from the purchase may I …") is answered by the line
stating one ("签收后 20 天内"), not by a length beside it ("延保 2 年"), on an invented kettle shop's care-plan page."""

from __future__ import annotations

from tests.extractive_kit import answer, chunk

PLAN = chunk(
    "care",
    "壶趣售后政策",
    "三、壶趣延保\n电水壶的壶趣延保价格为 2 年 39 元，3 年 59 元。\n购买条件：需要在签收后 20 天内购买；\n延保期内免费维修。",
    section="三、壶趣延保",
)


def test_the_window_not_the_plan_length() -> None:
    out = answer("多长时间之内要买", [PLAN], query="电水壶延保 多长时间之内要买")
    assert "20 天内" in out.splitlines()[1]
