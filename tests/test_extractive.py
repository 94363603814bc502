"""The extractive answerer, memory recall and the reranker on documents of a made-up shop (not the sample
knowledge base), so the rules are checked on text they were not written for."""

from __future__ import annotations

import time
from typing import Any

import pytest

from rag_core.text import language
from rag_service.domain import Chunk, GenerationInput, MemoryView, Message, Round
from rag_service.extractive import MARKER, ExtractiveGenerator, render_value
from rag_service.facts import Ask, attributes, product_fit, products, question_asks, shows, values
from rag_service.recall import is_recall, recall_answer
from rag_service.rerank import rerank

PHONE = "\n".join(
    [
        "Nova 8 商品详情",
        "更新日期：2025 年 5 月 1 日。本页介绍本店在售的 Nova 8 的价格和售后服务。",
        "价格",
        "- 128GB 版本售价 2999 元。",
        "- 256GB 版本售价 3399 元。",
        "售后服务",
        "Nova 8 整机享受 18 个月保修，电池更换价格为 199 元。",
    ]
)
PHONE_PRO = "\n".join(
    [
        "Nova 8 Pro 商品详情",
        "价格",
        "- 256GB 版本售价 4299 元。",
        "- 512GB 版本售价 4899 元。",
        "售后服务",
        "Nova 8 Pro 整机享受 2 年保修。",
    ]
)
RETURNS_ZH = "\n".join(
    [
        "退换货规则",
        "本规则适用于本店全部商品。",
        "一、无理由退货",
        "签收后 10 天内，商品完好即可申请无理由退货。",
        "二、如何申请",
        "请在 App 中进入我的订单，点击申请售后，填写原因并上传照片。",
        "客服审核通过后，请按页面提示寄回商品。",
    ]
)
SHIPPING_EN = "\n".join(
    [
        "Overseas Delivery",
        "Last updated: May 1, 2025. This page explains how we ship abroad.",
        "Fees",
        "Parcels to Europe cost ¥320 per order and arrive in 6 to 9 business days.",
    ]
)


def chunk(doc: str, title: str, text: str, score: float = 0.9, lang: str = "") -> Chunk:
    return Chunk(f"{doc}-0", doc, f"docs/{doc}", title, text, score, 50, lang=lang)


PAGES = [
    chunk("nova8", "Nova 8 商品详情", PHONE, 0.92),
    chunk("nova8pro", "Nova 8 Pro 商品详情", PHONE_PRO, 0.91),
    chunk("returns", "退换货规则", RETURNS_ZH, 0.80),
    chunk("overseas", "Overseas Delivery", SHIPPING_EN, 0.78),
]


async def answer(
    question: str, query: str = "", chunks: list[Chunk] | None = None, memory: MemoryView | None = None
) -> str:
    gen = ExtractiveGenerator(3)
    turn = GenerationInput(question, query or question, chunks if chunks is not None else PAGES, memory)
    text = await gen.complete([], turn)
    assert "".join([p async for p in gen.stream([], turn)]) == text  # one answer, streamed or not
    assert text.startswith(MARKER)
    return text


async def test_a_price_question_gets_the_price_list_of_that_model_and_no_boilerplate() -> None:
    text = await answer("Nova 8 多少钱？")
    assert "2999" in text and "3399" in text
    assert "4299" not in text and "4899" not in text  # the Pro is a sibling, not this model
    assert "更新日期" not in text and "本页介绍" not in text
    assert "199" not in text  # a repair price answers another question
    assert text.index("2999") < text.index("3399")  # a list reads in order


async def test_a_named_tier_of_a_variant_gets_that_row_only() -> None:
    text = await answer("Nova 8 Pro 256GB 多少钱")
    assert "4299" in text
    assert "3399" not in text and "4899" not in text


async def test_the_standard_model_after_a_variant() -> None:
    text = await answer("那标准款呢？", query="Nova 8 Pro 标准款 多少钱")
    assert "2999" in text and "4299" not in text


async def test_a_duration_question_wants_a_duration_of_the_product_asked() -> None:
    text = await answer("它的保修期多久？", query="Nova 8 的保修期多久？")
    assert "18 个月" in text and "2 年" not in text


async def test_an_english_question_over_a_chinese_page_is_framed_in_english_with_the_figures() -> None:
    text = await answer("How long do I have to return an item?", chunks=[PAGES[2], PAGES[3]])
    assert "From the knowledge base" in text
    assert "10 days" in text  # rendered in the customer's language
    assert "签收后 10 天内" in text  # and quoted as written


async def test_a_chinese_question_over_an_english_page() -> None:
    text = await answer("寄到欧洲运费多少钱？", chunks=[PAGES[3], PAGES[2]])
    assert "根据知识库" in text and "320 元" in text and "¥320" in text
    assert "Last updated" not in text


async def test_how_to_quotes_the_steps_in_order() -> None:
    text = await answer("退货怎么申请？", chunks=[PAGES[2]])
    assert "申请售后" in text and "寄回商品" in text
    assert text.index("申请售后") < text.index("寄回商品")


async def test_no_context_says_so_in_the_question_language() -> None:
    assert "人工客服" in await answer("有什么优惠？", chunks=[])
    assert "human agent" in await answer("Any discounts?", chunks=[])


def test_question_types_and_values() -> None:
    assert question_asks("这个多少钱？")[0] is Ask.PRICE
    assert question_asks("How long does delivery take?")[0] is Ask.DURATION
    assert Ask.LOCATION in question_asks("Where is your store?")
    assert question_asks("How much memory do I need?")[0] is Ask.SPEC
    assert attributes("512GB 的多少钱，15 英寸") == {"storage": {"512gb"}, "screen": {"15"}}
    assert language("Nova 8 Pro 256GB 多少钱") == "zh" and language("Is the Nova 8 waterproof?") == "en"
    assert render_value("3 到 5 个工作日", "en") == "3 到 5 business days"
    assert render_value("1 年", "en") == "1 year" and render_value("¥150", "zh") == "150 元"
    # Hyphenated durations are durations: "a 2-year warranty", "30-day returns".
    assert values("2-year on-site warranty, 30-day returns, three-year plan", Ask.DURATION) == [
        "2-year",
        "30-day",
        "three-year",
    ]


@pytest.mark.parametrize(
    ("asked", "named", "fit"),
    [
        ("Zeta Book 14 多少钱", "Zeta Book 14 商品详情", 1.0),
        ("Zeta Book 14", "Zeta Book 14 Pro 商品详情", 0.0),  # a sibling
        ("Zeta Book 14 Pro", "Zeta Book 14 商品详情", 0.0),
        ("Zeta Book 14", "Zeta Book 16 商品详情", 0.0),  # another generation
        ("华米 9 Pro 多少钱", "华米9 Pro", 1.0),
        ("Orbit X2 第 3 代", "Orbit X2 Gen 3", 1.0),
    ],
)
def test_product_fit(asked: str, named: str, fit: float) -> None:
    assert product_fit(list(products(asked)), False, list(products(named))) == fit


def _memory(*rounds: tuple[str, str], summary: str = "") -> MemoryView:
    now = time.time()
    return MemoryView(
        summary,
        0,
        tuple(Round(Message("user", u, 1, now), Message("assistant", a, 1, now)) for u, a in rounds),
    )


async def test_recall_answers_from_the_conversation_not_the_knowledge_base() -> None:
    memory = _memory(
        (
            "我的订单号是 ZX2025050188，想问 Nova 8 多少钱",
            f"{MARKER} 根据知识库：\n- 128GB 版本售价 2999 元。\n- 256GB 版本售价 3399 元。",
        ),
        ("那 Pro 呢", f"{MARKER} 根据知识库：\n- 256GB 版本售价 4299 元。"),
        ("保修多久", "18 个月。"),
    )
    order = await answer("我之前报的订单号你还记得吗？", memory=memory)
    assert "ZX2025050188" in order and "知识库" not in order
    first = await answer("第一次你说的起售价是多少来着？", memory=memory)
    assert "2999" in first and "4299" not in first
    latest = await answer("What did you say the price was?", memory=memory)
    assert "4299" in latest


def test_recall_reads_pinned_facts_of_the_summary_and_ignores_ordinary_questions() -> None:
    memory = _memory(("hi", "hello"), summary="The user asked about delivery.\nPinned facts: ZX77700011, ¥3399")
    assert "ZX77700011" in (recall_answer("what was my order number again?", memory, "en") or "")
    assert not is_recall("Nova 8 多少钱？") and not is_recall("How long is the warranty?")
    assert recall_answer("我之前说的颜色你记得吗？", _memory(("要黑色的", "好的")), "zh") is None  # no such kind


def test_rerank_lifts_the_other_language_page_about_the_topic_and_pushes_siblings_down() -> None:
    english_noise = chunk("faq", "General FAQ", "Discounted items follow the normal return rules.", 0.86, "en")
    chinese_policy = chunk("returns", "退换货规则", RETURNS_ZH, 0.79, "zh")
    order = [c.doc_id for c in rerank("What is your return policy?", [english_noise, chinese_policy])]
    assert order == ["returns", "faq"]
    pro = chunk("nova8pro", "Nova 8 Pro 商品详情", PHONE_PRO, 0.93)
    base = chunk("nova8", "Nova 8 商品详情", PHONE, 0.90)
    assert [c.doc_id for c in rerank("Nova 8 多少钱", [pro, base])] == ["nova8", "nova8pro"]
    # A place asked about in one language is found named in the other.
    domestic = chunk("ship", "配送说明", "普通地区 3 到 5 天送达。", 0.86, "zh")
    abroad = chunk("intl", "Overseas delivery", "Parcels to Norway and Japan take 6 to 9 days.", 0.82, "en")
    assert [c.doc_id for c in rerank("寄到日本要多久", [domestic, abroad])] == ["intl", "ship"]


def test_recall_finds_the_line_about_what_is_asked_even_across_languages() -> None:
    memory = _memory(
        ("Nova 8 多少钱", "- 128GB 版本售价 2999 元。"),
        ("寄到美国运费多少", "- Parcels to the United States cost ¥320 per order."),
        ("那新加坡呢", "- Parcels to Singapore cost ¥150 per order."),
    )
    assert "320" in (recall_answer("你刚才说寄美国运费是多少？", memory, "zh") or "")
    tiers = _memory(
        ("How do I become a gold member?", "- 累计消费满 8000 元即可升级为金卡会员。"),
        ("And points for gold members?", "- 金卡会员每消费 1 元获得 2 积分。"),
    )
    assert "8000" in (recall_answer("What did you say the gold threshold was again?", tiers, "en") or "")


async def test_a_sentence_listing_several_tiers_is_cut_to_the_one_asked_about() -> None:
    sizes = chunk(
        "screen", "Zeta Book 商品详情", "维修\n13 英寸屏幕更换价格为 1299 元，15 英寸屏幕更换价格为 1599 元。", 0.9
    )
    text = await answer("Zeta Book 15 寸换屏多少钱", chunks=[sizes])
    assert "1599" in text and "1299" not in text
    tiers = chunk(
        "points", "Member rules", "积分\n每消费 1 元得 1 积分，银卡会员按 1.2 倍计算，金卡会员按 1.5 倍计算。", 0.9
    )
    text = await answer("How many points does a gold member get?", chunks=[tiers])
    assert "1.5" in text and "1.2" not in text


def test_count_questions_want_a_count_and_when_accepts_a_time_limit() -> None:
    assert question_asks("发票抬头能改几次？")[0] is Ask.COUNT
    assert question_asks("How many times can I swap it?")[0] is Ask.COUNT
    assert values("每个订单最多可寄 3 台平板，抬头可修改 1 次。", Ask.COUNT) == ["3 台", "1 次"]
    assert values("You can change it once.", Ask.COUNT) == ["once"]
    assert shows("纸质发票在 5 个工作日内寄出。", Ask.DATE) and shows("Opens at 9:00.", Ask.DATE)
    assert attributes("寄到日本") == {"place": {"jp", "asia"}}  # a country comes with its region


async def test_a_price_list_cut_by_the_chunk_overlap_is_quoted_whole_whatever_the_chunks_rank() -> None:
    title = "Kiwi 3 商品详情"

    def part(i: int, section: str, text: str) -> Chunk:
        return Chunk(f"kiwi3-{i}", "kiwi3", "docs/kiwi3.html", title, text, 0.9 - 0.01 * i, 60, section, "zh", i)

    head = part(
        0,
        "",
        "Kiwi 3 商品详情\n价格与存储容量\n128GB 版本售价 1999 元。\n256GB 版本售价 2299 元。\n512GB 版本售价 2699 元。",
    )
    tail = part(1, "价格与存储容量", "512GB 版本售价 2699 元。\n颜色\nKiwi 3 有黑色和白色两种颜色。")
    repairs = part(2, "Kiwi 3 保外维修价格", "Kiwi 3 保外维修价格\n保修期外可付费修理。\n屏幕维修价格为 599 元。")
    battery = part(3, "Kiwi 3 保外维修价格", "屏幕维修价格为 599 元。\n电池更换价格为 199 元。")
    specs = part(4, "主要规格", "主要规格\n屏幕为 6.1 英寸，重量约 170 克。")
    # The chunk holding the list's last row is retrieved first, the list's head four places lower.
    text = await answer("Kiwi 3 多少钱", chunks=[tail, repairs, battery, specs, head])
    assert "1999" in text and "2299" in text and "2699" in text
    assert text.index("1999") < text.index("2299") < text.index("2699")


def test_sources_read_their_sentences_once_per_chunk_text(monkeypatch: pytest.MonkeyPatch) -> None:
    # Receipts list the sentences an answer quotes; the same chunks come back turn after turn with other
    # scores, and are read once.
    import rag_service.extractive as extractive

    reads: list[int] = []
    real = extractive.sentences_of

    def counting(chunks: Any) -> Any:
        reads.append(len(chunks))
        return real(chunks)

    monkeypatch.setattr(extractive, "sentences_of", counting)
    extractive._sentences_read.cache_clear()
    text = "Kettles are covered for 18 months. The lid hinge is covered for 6 months."
    first = [chunk("kettle-care", "Brewmoor kettle care", text, score=0.71)]
    again = [chunk("kettle-care", "Brewmoor kettle care", text, score=0.64)]
    answer = "The lid hinge is covered for 6 months."
    payload = extractive.sources_payload(first, answer)
    assert payload[0]["sentences"] == ["The lid hinge is covered for 6 months."]
    later = extractive.sources_payload(again, answer)
    assert reads == [1]
    assert later[0]["sentences"] == payload[0]["sentences"] and later[0]["score"] == 0.64
    # Without an answer to quote from, the chunks' text is used, and nothing needs reading.
    assert extractive.sources_payload(again)[0]["sentences"] == [text] and reads == [1]
