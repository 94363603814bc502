"""Question types, clause choice and follow-up context of the extractive answerer, on a made-up shop's
pages (a bike shop, not the sample knowledge base)."""

from __future__ import annotations

import time

from rag_service.domain import Chunk, GenerationInput, MemoryView, Message, Round
from rag_service.extractive import ExtractiveGenerator, Question, trim_clauses
from rag_service.facts import Ask, attribute_fit, attributes, products, question_asks, shows

DELIVERY = "\n".join(
    [
        "送货说明",
        "一、送货时间",
        "门店每天 9:00 至 20:00 营业。",
        "上午 10:30 前付款的订单，最晚 19:00 前送到。",
        "二、运费",
        "市内送货运费为 25 元，订单满 1500 元免运费。",
        "当日达服务费为 40 元。",
    ]
)
REFUNDS = "\n".join(
    [
        "退款说明",
        "三、退款多久到账",
        "退款原路返回：支付宝 2 个工作日到账，银行卡 4 到 6 个工作日到账。",
        "退款申请提交后客服会电话回访。",
    ]
)
FRAMES_EN = "\n".join(
    [
        "Frame Shipping",
        "Zones",
        "Zone B (North America and Oceania): the flat fee is ¥410 per frame.",
        "Zone C (Europe): the flat fee is ¥380 per frame.",
    ]
)


def chunk(doc: str, title: str, text: str, score: float = 0.9, index: int = 0) -> Chunk:
    return Chunk(f"{doc}-{index}", doc, f"docs/{doc}", title, text, score, 50, index=index)


def answer(question: str, chunks: list[Chunk], query: str = "", earlier: tuple[str, ...] = ()) -> str:
    rounds = tuple(
        Round(Message("user", q, 5, time.time()), Message("assistant", "好的。", 2, time.time())) for q in earlier
    )
    memory = MemoryView("", 0, rounds) if rounds else None
    return ExtractiveGenerator(3).answer(GenerationInput(question, query or question, chunks, memory))


def test_threshold_and_time_of_day_are_their_own_question_types() -> None:
    assert question_asks("满多少免运费？")[0] is Ask.THRESHOLD
    assert question_asks("What's the minimum order for free delivery?")[0] is Ask.THRESHOLD
    assert question_asks("客服几点下班")[0] is Ask.TIME
    assert question_asks("What's the latest it can arrive?")[0] is Ask.TIME
    assert shows("订单满 1500 元免运费。", Ask.THRESHOLD)
    assert shows("Free for orders of ¥900 or more.", Ask.THRESHOLD)
    assert not shows("市内送货运费为 25 元。", Ask.THRESHOLD)  # an amount, but not one a rule starts from
    assert shows("当天 19:00 前送到。", Ask.TIME) and not shows("运费为 25 元。", Ask.TIME)


def test_a_threshold_question_gets_the_threshold_not_the_fee() -> None:
    text = answer("买满多少免运费", [chunk("delivery", "送货说明", DELIVERY)])
    assert "1500" in text


def test_a_time_question_gets_the_clock_time_of_what_was_asked_not_opening_hours() -> None:
    text = answer("最晚几点能送到？", [chunk("delivery", "送货说明", DELIVERY)])
    assert "19:00" in text and "20:00" not in text


def test_of_two_clauses_with_durations_the_one_the_question_names_is_kept() -> None:
    page = [chunk("refunds", "退款说明", REFUNDS)]
    text = answer("How long does a refund to Alipay take?", page)
    assert "2 个工作日" in text and "4 到 6" not in text
    q = Question.parse("退到银行卡要多久", "退到银行卡要多久")
    kept = trim_clauses(q, "退款原路返回：支付宝 2 个工作日到账，银行卡 4 到 6 个工作日到账。")
    assert "4 到 6" in kept and "支付宝" not in kept


def test_a_heading_that_asks_the_question_lifts_its_sentences() -> None:
    text = answer("退款多久能到账？", [chunk("refunds", "退款说明", REFUNDS), chunk("delivery", "送货说明", DELIVERY)])
    assert "2 个工作日" in text


def test_a_follow_up_keeps_the_type_and_topic_of_the_questions_before() -> None:
    page = [chunk("delivery", "送货说明", DELIVERY)]
    # "that service" names no topic: the previous question's (same-day delivery) decides which fee.
    text = answer("How much is that setup?", page, earlier=("Do you offer same-day delivery?",))
    assert "40 元" in text and "25 元" not in text
    # "那加急的呢" has no type of its own: it asks what the last typed question asked (a price).
    q = Question.parse("那当日达的呢", "当日达", ["市内送货运费多少", "好的"])
    assert q.asks and q.asks[0] is Ask.PRICE


def test_places_us_only_in_capitals_and_countries_in_their_region() -> None:
    assert "place" not in attributes("Can you deliver it to us?")
    assert "us" in attributes("Do you ship to the US?")["place"]
    us = attributes("寄到美国多少钱")
    assert attribute_fit(us, attributes("Zone B (North America and Oceania)")) > 1
    assert attribute_fit(us, attributes("Zone C (Europe)")) < 1
    assert attribute_fit(us, attributes("加拿大运费 300 元")) < 1  # same region, another country
    text = answer("寄到美国运费多少？", [chunk("frames", "Frame Shipping", FRAMES_EN)])
    assert "410" in text and "380" not in text


def test_function_words_are_not_part_of_a_product_name() -> None:
    assert [p.text for p in products("What if Trek 820 breaks after the warranty?")] == ["Trek 820"]
    assert products("what happens after 10 days?") == ()
    assert products("How much is that setup?") == ()
    assert [p.text for p in products("Is the Surface Go 4 in stock?")] == ["Surface Go 4"]


def test_a_sentence_on_a_page_about_other_places_does_not_answer_for_the_place_asked() -> None:
    domestic = chunk("home", "本地配送", "包邮规则\n省内订单满 300 元包邮。\n杭州、宁波市区次日送达。", 0.95)
    abroad = chunk(
        "abroad", "Overseas", "Free shipping\nOrders ship free from ¥2000 or more.\nZone A: Japan and Korea, ¥90.", 0.9
    )
    text = answer("寄到日本满多少包邮", [domestic, abroad])
    assert "2000" in text and "300 元" not in text
