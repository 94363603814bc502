"""A page titled by a product line or a romanised brand, with the asked model among its rows, on a made-up shop
(no names from the sample KB or eval sets)."""

from __future__ import annotations

from rag_service.domain import Chunk
from rag_service.rerank import OTHER_PRODUCT, SAME_PRODUCT, rerank


def page(doc: str, title: str, text: str, score: float, lang: str = "zh", aliases: str = "") -> Chunk:
    return Chunk(f"{doc}-0", doc, f"docs/{doc}", title, text, score, 40, lang=lang, aliases=aliases)


def test_a_follow_up_naming_the_model_without_its_brand_keeps_the_brands_page() -> None:
    # "澄泉（Chengquan）净水器" is titled by the romanised brand; the rewritten follow-up names the model alone ("P3"),
    # as the conversation's product. The brand's page names it among its rows: it is the line's page, not another
    # product's, and it keeps its place above a service page the follow-up's words fit about as well.
    brand = page(
        "chengquan", "澄泉（Chengquan）净水器 商品详情", "型号: 澄泉 P3 | 通量: 600 G | 售价: 1899 元", 0.80,
        aliases="澄泉 Chengquan",
    )  # fmt: skip
    service = page("install", "上门安装说明", "师傅上门后先检查水压，再装前置过滤。", 0.83)
    ranked = rerank("P3 的滤芯能用几个月", [service, brand])
    assert ranked[0].doc_id == "chengquan"
    assert ranked[0].score == brand.score + SAME_PRODUCT * 0.5


def test_another_brands_page_that_does_not_name_the_model_is_still_another_products() -> None:
    other = page(
        "lumo", "露萌（Lumo）加湿器 商品详情", "型号: 露萌 H2 | 容量: 4 L | 售价: 299 元", 0.86, aliases="露萌 Lumo"
    )
    assert rerank("P3 的滤芯能用几个月", [other])[0].score == other.score + OTHER_PRODUCT


def test_an_english_line_page_names_the_model_the_question_asks_without_the_line() -> None:
    # The title names the line ("Brightcup Mugs" reads as the product "Brightcup"); its rows name each model with
    # the line's name. "Travel 350ml" is on it: no push down as another product.
    line = page(
        "mugs", "BrightCup Mugs - Product Details", "BrightCup Travel 350ml: 89 yuan.\nBrightCup Desk 450ml: 69 yuan.",
        0.80, "en",
    )  # fmt: skip
    other = page("kettles", "SteamPeak Kettles - Product Details", "SteamPeak Mini 0.8L: 159 yuan.", 0.82, "en")
    ranked = rerank("What does the Travel 350ml sell for?", [other, line])
    assert ranked[0].doc_id == "mugs"
    assert ranked[0].score == line.score + SAME_PRODUCT * 0.5
    assert ranked[1].score == other.score + OTHER_PRODUCT
