"""The question's own words other than the product's name (what is done, to what) pick among sentences of the
type asked, on an invented water-filter shop: a model's heading over its facts must not outweigh the sentence
that says what was asked."""

from __future__ import annotations

from tests.extractive_kit import answer, chunk

FILTERS = chunk(
    "filters",
    "澜泉净水器 商品详情",
    "\n".join(
        [
            "澜泉净水器 商品详情",
            "澜泉 X5",
            "- 安装周期：3 个工作日",
            "- 整机保修 2 年；",
            "使用须知",
            "- 每 4 个月上门清洗一次水箱，清洗不收费。",
            "- 新机前 3 天的出水要先放掉。",
        ]
    ),
)

STOVES = chunk(
    "stoves",
    "Emberline Stoves",
    "\n".join(
        [
            "Emberline Stoves",
            "Emberline 2",
            "- Delivery time: 5 working days.",
            "- Warranty: 3 years.",
            "Care",
            "- Have the flue swept by our engineer every 12 months; the first sweep is free.",
        ]
    ),
)


def test_a_duration_asked_about_an_action_is_the_sentence_naming_it() -> None:
    out = answer("多久回来清洗一次", [FILTERS], query="澜泉 X5 多久回来清洗一次")
    first = out.splitlines()[1]
    assert "4 个月" in first


def test_an_english_question_is_told_apart_by_its_own_words_not_how_long() -> None:
    out = answer(
        "How often should the flue be swept?", [STOVES], query="Emberline 2: How often should the flue be swept?"
    )
    assert "12 months" in out
    first = out.splitlines()[1]
    assert "flue" in first


KAYAKS = chunk(
    "kayaks",
    "浪舟皮划艇 售后说明",
    "\n".join(
        [
            "浪舟皮划艇 售后说明",
            "- 维修一般需要 5 个工作日，修好后通知取回。",
            "- 船体划痕可以到店抛光处理。",
            "- 保修期内，气阀和接缝的质量问题由浪舟维修，不收费。",
            "- 浪舟单人艇不能装电动推进器。",
        ]
    ),
)


def test_a_yes_or_no_question_about_cost_gets_the_sentence_saying_it_is_free() -> None:
    out = answer("船漏气了修要钱吗", [KAYAKS])
    assert "不收费" in out.splitlines()[1]
