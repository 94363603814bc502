"""The reranker's product and concept signals, on a made-up shop (no names from the sample KB or eval sets)."""

from __future__ import annotations

import random
import re
from dataclasses import replace

import pytest

from rag_service.domain import Chunk
from rag_service.facts import PLACES, names_place_among, places, products, related_product, title_products
from rag_service.glossary import CONCEPTS, DEFAULT, concepts
from rag_service.rerank import _BONUSES, concept_match, rerank


def chunk(doc: str, title: str, text: str, score: float, lang: str = "zh", section: str = "") -> Chunk:
    return Chunk(f"{doc}-0", doc, f"docs/{doc}", title, text, score, 50, section=section, lang=lang)


FAMILY_ROWS = "\n".join(
    [
        "型号 | 容量 | 售价",
        "型号: Vento 标准版 | 容量: 4 L | 售价: 359 元",
        "型号: Vento Pro | 容量: 6 L | 售价: 529 元",
        "型号: Vento Max | 容量: 9 L | 售价: 799 元",
    ]
)
FAMILY_CARE = "保修\n标准版和 Pro 整机保修 1 年；Max 整机保修 2 年。"
PRICE_LIST = "品类: 电水壶 | 型号: Orla K3 | 售价: 199 元\n品类: 电饭煲 | 型号: Orla R5 | 售价: 459 元"
PLANS_EN = "Plan prices by purchase price\nbelow 1,000 yuan: 59 yuan a year"


def test_a_family_page_is_the_asked_variants_page_when_no_page_is_titled_by_the_variant() -> None:
    # One page for the whole line ("Vento" with a row per model): the variant asked is on it. A price
    # list of other products and a generic English plans page share only "price" with the question.
    family = chunk("vento", "Vento 空气炸锅 商品详情", FAMILY_ROWS, 0.88, section="型号与价格")
    care = chunk("vento-care", "Vento 空气炸锅 商品详情", FAMILY_CARE, 0.86, section="保修")
    price_list = chunk("kitchen", "厨房电器价格表", PRICE_LIST, 0.90)
    plans = chunk("plans", "Care Plans", PLANS_EN, 0.84, "en", section="Plan prices by purchase price")
    ranked = rerank("Vento Pro 空气炸锅多少钱", [price_list, plans, care, family])
    assert ranked[0].doc_id == "vento"
    # The family's other chunks are not a sibling's page: lifted, not pushed down.
    assert next(c.score for c in ranked if c.doc_id == "vento-care") > care.score
    # Rows of other products only: pushed down against the same page's chunk that names no product.
    unnamed = chunk("kitchen-note", "厨房电器价格表", "品类: 电水壶 | 售价: 199 元", 0.90)
    scores = {c.doc_id: c.score for c in rerank("Vento Pro 空气炸锅多少钱", [price_list, unnamed, family])}
    assert scores["kitchen"] < scores["kitchen-note"] < scores["vento"]


def test_a_page_titled_by_the_variant_outranks_the_family_or_base_page_that_mentions_it() -> None:
    # Where every model has its own page, the base model's page mentioning the Pro is a sibling's page.
    base = chunk("nova", "Nova 8 商品详情", "Nova 8 售价 2999 元。需要长焦可以考虑 Nova 8 Pro。", 0.93)
    pro = chunk("nova-pro", "Nova 8 Pro 商品详情", "256GB 版本售价 4299 元。", 0.90)
    assert [c.doc_id for c in rerank("Nova 8 Pro 多少钱", [base, pro])] == ["nova-pro", "nova"]
    # And the other way round: the Pro page naming the base model does not take the base model's question.
    pro_mentions = chunk("nova-pro", "Nova 8 Pro 商品详情", "比 Nova 8 多一颗长焦镜头，售价 4299 元。", 0.93)
    base_plain = chunk("nova", "Nova 8 商品详情", "128GB 版本售价 2999 元。", 0.90)
    assert [c.doc_id for c in rerank("Nova 8 多少钱", [pro_mentions, base_plain])] == ["nova", "nova-pro"]


def test_a_product_less_page_naming_the_asked_product_is_lifted_above_one_naming_others() -> None:
    asked = chunk("kitchen-k3", "厨房电器价格表", PRICE_LIST, 0.86)
    others = chunk("kitchen-r", "厨房电器价格表", "品类: 破壁机 | 型号: Orla B9 | 售价: 699 元", 0.88)
    assert [c.doc_id for c in rerank("Orla K3 电水壶多少钱", [others, asked])] == ["kitchen-k3", "kitchen-r"]


def test_a_question_of_one_generic_concept_lifts_a_title_less_than_a_specific_one() -> None:
    assert concept_match(frozenset({"price"}), frozenset({"price"})) == pytest.approx(0.4)
    assert concept_match(frozenset({"return"}), frozenset({"return"})) == 1.0
    assert concept_match(frozenset({"return", "price"}), frozenset({"return"})) == pytest.approx(1 / 1.4)
    assert concept_match(frozenset(), frozenset({"return"})) == 0.0
    # A generic page titled by the concept no longer beats the product's own page on "多少钱".
    page = chunk("vento", "Vento 空气炸锅 商品详情", FAMILY_ROWS, 0.86, section="型号与价格")
    price_list = chunk("kitchen", "厨房电器价格表", "所有商品统一售价，以本表为准。", 0.90)
    assert [c.doc_id for c in rerank("Vento Max 多少钱", [price_list, page])] == ["vento", "kitchen"]


@pytest.mark.parametrize(
    ("asked", "named", "related"),
    [
        ("Vento Pro", "Vento 空气炸锅", True),  # the family
        ("Aero 500", "Aero Air Cleaners", True),  # the family named with a category word
        ("S7 Pro", "S7 系列", True),
        ("S7 Pro", "S9 系列", False),  # another generation
        ("Zeta X1 Carbon", "Loom X Pro", False),  # a lone shared letter is no shared name
        ("Vento Pro", "Orla K3", False),
    ],
)
def test_related_product_of_a_title(asked: str, named: str, related: bool) -> None:
    assert related_product(list(products(asked)), list(title_products(named))) is related


def test_a_chunk_opening_with_its_heading_gets_the_heading_as_title_only_across_languages() -> None:
    # In the question's language the heading is the chunk's first line, read by the dense score already:
    # an uploaded page about the asked thing keeps its lead over a policy chunk that opens with a heading
    # naming the same concept. Across languages the heading's concepts are new evidence and count.
    locker = chunk("locker", "青松小区快递柜", "青松小区快递柜的取件码是 QS-1024，柜子在北门。", 0.86)
    pickup = chunk("policy", "配送说明", "门店自提\n下单时可以选择到门店自提，不收取运费。", 0.84, section="门店自提")
    ranked = rerank("快递柜取件码是多少", [pickup, locker])
    assert ranked[0].doc_id == "locker"
    # The same chunk for an English question: its heading names the refund timing asked about.
    refund = chunk("returns", "退货政策", "退款到账时间\n支付宝 1 到 2 个工作日到账。", 0.80, section="退款到账时间")
    shipping = chunk("abroad", "Overseas Delivery", "Parcels to Europe arrive in 6 to 9 business days.", 0.83, "en")
    assert rerank("How long does a refund take?", [shipping, refund])[0].doc_id == "returns"
    # A chunk that starts inside its section is filed under the section in either language: the heading
    # is not in its text, so it is lifted more than the chunk that opens with the heading.
    inside = chunk("policy", "配送说明", "下单时可以选择到门店自提，不收取运费。", 0.84, section="门店自提")
    lift = {c.text: c.score - 0.84 for c in rerank("快递柜取件码是多少", [inside, pickup])}
    assert lift[inside.text] > lift[pickup.text] > 0


def test_an_english_question_naming_a_chinese_pages_romanised_brand_finds_that_page() -> None:
    # The Chinese page introduces its brand as "岚途（Lantu）"; ingest stores the alias with every chunk of the
    # page. An English page that mentions the model in passing (a rental list) must not outrank it.
    page = Chunk(
        "lantu-0", "lantu", "docs/lantu", "岚途睡袋 商品详情", "岚途 40L：售价 699 元", 0.82, 40,
        lang="zh", aliases="岚途 Lantu",
    )  # fmt: skip
    rental = chunk("rental", "Rental Program", "Lantu 40L bag: 15 yuan per day, deposit 300 yuan.", 0.82, "en")
    ranked = rerank("How much is the Lantu 40L?", [rental, page])
    assert ranked[0].doc_id == "lantu"
    # Without the alias (an older index), nothing changes but the usual signals.
    plain = Chunk("lantu-0", "lantu", "docs/lantu", "岚途睡袋 商品详情", "岚途 40L：售价 699 元", 0.82, 40, lang="zh")
    assert rerank("How much is the Lantu 40L?", [rental, plain])[0].doc_id == "rental"


def test_a_chinese_question_naming_the_brand_in_characters_finds_the_page_titled_by_its_romanisation() -> None:
    # "溪鹿（Xilu）帐篷" is titled by the romanised brand; the question writes the brand in characters and a model.
    # The page is the family's (not another product's), and the chunk naming the model is its own.
    family = Chunk(
        "xilu-1", "xilu", "docs/xilu", "溪鹿（Xilu）帐篷 商品详情", "溪鹿 T2 Plus：三人帐，售价 1299 元", 0.80, 40,
        section="溪鹿 T2 Plus", lang="zh", aliases="溪鹿 Xilu",
    )  # fmt: skip
    other = Chunk(
        "kite-1", "kite", "docs/kite", "飞鸢（Feiyuan）K7 炉具 商品详情", "K7 售价 359 元", 0.86, 40,
        lang="zh", aliases="飞鸢 Feiyuan",
    )  # fmt: skip
    ranked = rerank("溪鹿 T2 Plus 什么价", [other, family])
    assert ranked[0].doc_id == "xilu" and ranked[0].score > family.score
    # Another brand's page titled the same way is still another product's.
    assert rerank("溪鹿 T2 Plus 什么价", [other])[0].score < other.score


def test_a_chinese_questions_latin_name_lifts_the_english_page_filed_under_it() -> None:
    # A product line with no digit ("Dune Breeze"): the English page files the model under its name.
    english = chunk("dune", "Dune Sandals - Product Details", "Price: 289 yuan.", 0.84, "en", section="Dune Breeze")
    chinese = chunk("socks", "速干袜 商品详情", "速干袜 售价 39 元。", 0.88)
    ranked = rerank("Dune Breeze 凉鞋多少钱", [chinese, english])
    assert ranked[0].doc_id == "dune"
    # Generic Latin words (an app, a size) name no page; an English question gets no such lift.
    assert rerank("会员 App 多少钱", [chinese, english])[0].doc_id == "socks"
    lifted = {c.doc_id: c.score for c in rerank("How much are the Dune Breeze sandals?", [english])}
    assert lifted["dune"] < 0.84 + 0.04


@pytest.mark.parametrize(
    "text",
    [
        "Orders over ¥99 ship free; below that the flat fee is ¥12 per parcel.",
        "满 99 元包邮，不满收取 12 元运费，偏远地区另计。",
        "Returns within 7 days; the refund reaches your card in 3 working days. 保修一年。",
        "Our kettles come with a two-year warranty, 电水壶支持以旧换新。",
        "No concept at all here.",
    ],
)
def test_a_texts_concepts_among_a_questions_are_those_of_all_its_concepts(text: str) -> None:
    every = concepts(text)
    for among in [
        frozenset(),
        frozenset({"shipping_fee"}),
        frozenset({"price", "warranty"}),
        frozenset({"refund", "kettle", "exchange"}),
        every,
        frozenset(CONCEPTS),
    ]:
        assert concepts(text, among) == every & among


def _phrase_samples() -> list[str]:
    """Every English phrase of the glossary written out: a "*" ending dropped or given one, an optional letter
    ("colou?r") kept and dropped, in lower and upper case, inside Chinese and English text."""
    samples = []
    for en, _ in CONCEPTS.values():
        for phrase in filter(None, (p.strip() for p in en.split("|"))):
            for word in {phrase.replace("?", "").replace("*", "s"), re.sub(r".\?", "", phrase).replace("*", "")}:
                for cased in (word, word.upper()):
                    samples += [f"请问{cased}怎么办", f"Ask about the {cased} today."]
    # Letters a case-insensitive pattern takes for ASCII ones while `str.lower` keeps them apart.
    samples += ["the \u017fhipping fee", "\u0130NVOICE please", "rece\u0131pt", "RECE\u0130PT", "\u212aeyboard"]
    return samples


def test_a_concept_is_found_wherever_its_english_pattern_matches() -> None:
    # The pattern itself is the reference (the glossary first looks for each phrase's leading letters).
    patterns = {key: en for key, (en, _) in DEFAULT._terms.items() if en is not None}
    for text in _phrase_samples():
        expected = {key for key, en in patterns.items() if en.search(text)}
        found = concepts(text)
        assert expected <= found, (text, expected - found)
        assert concepts(text + " ", frozenset(patterns)) >= expected, text


def test_a_reranked_chunk_is_the_chunk_with_its_new_score() -> None:
    # Every field set to something other than its default, so a field the reranker's copy dropped would show.
    page = Chunk(
        "kettle-2",
        "kettle",
        "docs/kettle",
        "Orla K3 电水壶",
        "保修两年，退货七天。",
        0.8,
        42,
        "售后",
        "zh",
        2,
        "欧拉 Orla",
    )
    [ranked] = rerank("Orla K3 退货", [page])
    assert ranked.score != page.score
    assert ranked == replace(page, score=ranked.score)
    assert concepts(page.text, frozenset({"return", "warranty", "price"})) == frozenset({"return", "warranty"})


def _place_texts() -> list[str]:
    """Sentences naming places every way `places` reads them: full names in both languages (the Chinese
    ones from its own table), abbreviation runs, a lone abbreviation, exceptions, words that only look
    like a place."""
    han = [n for names in PLACES.values() for n in names.split("|") if n and "\u4e00" <= n[0] <= "\u9fff"]
    latin = ["United States", "USA", "the U.S.", "us", "North America", "Latin America", "america", "Canada"]
    latin += ["the UK", "South Korea", "Xi'an", "Hong Kong", "Asia", "Zhejiang", "Inner Mongolia", "Europe"]
    runs = ["江浙沪包邮", "京津冀次日达", "港澳台不发货", "云贵川", "江西", "新品", "台灯", "沪上门店"]
    exceptions = ["其他地区（甘肃、宁夏除外）", "all regions (except Beijing) ship free", "除新疆以外"]
    names = han + latin + runs + exceptions
    rnd = random.Random(11)
    texts = [f"寄到{n}运费多少" for n in names] + [f"Shipping to {n} takes 3 days." for n in names]
    texts += [" ".join(rnd.sample(names, 3)) for _ in range(300)]
    return texts


def test_a_chunk_names_one_of_the_questions_places_exactly_when_its_places_include_one() -> None:
    texts = _place_texts()
    keys = sorted({k for t in texts for k in places(t)})
    rnd = random.Random(5)
    wanted = [frozenset({k}) for k in keys] + [places(t) for t in rnd.sample(texts, 60)]
    for among in wanted:
        for text in texts:
            assert names_place_among(text, among) == bool(places(text) & among), (text, among)


def test_a_phrase_inside_a_longer_glossary_phrase_is_no_concept_of_its_own() -> None:
    # 换新 (exchange) inside 以旧换新 (trade-in), 数据 (data) inside 数据线 (a cable), 税 (tax) inside 关税 (customs).
    assert concepts("旧滑板车参加以旧换新可以折多少") >= {"trade_in"}
    assert "exchange" not in concepts("旧滑板车参加以旧换新可以折多少")
    assert "exchange" in concepts("刚买的滑板车坏了能换新吗")
    assert "exchange" in concepts("以旧换新，或者坏了直接换新")
    assert "data" not in concepts("数据线多少钱") and "charger" in concepts("数据线多少钱")
    assert concepts("寄到海外要交关税吗", frozenset({"tax", "customs"})) == frozenset({"customs"})
    # 能退 (can return) inside 能退税 (can get a tax refund).
    assert concepts("离境时能退税吗") == frozenset({"tax_refund"})
    # A washing machine is no cleaning service.
    assert "cleaning" not in concepts("How wide is the washing machine?")


def test_a_trade_in_question_finds_the_trade_in_page_over_the_exchange_policy() -> None:
    question = "滑板车骑了两年，参加以旧换新可以折多少"
    exchange = chunk("returns", "退换货政策", "质量问题签收后 15 天内包换新，运费由本店承担。", 0.90)
    trade_in = chunk(
        "trade", "Scooter Trade-In Scheme", "Bring your old scooter and get credit towards a new one.", 0.84, "en"
    )
    assert rerank(question, [exchange, trade_in])[0].doc_id == "trade"


@pytest.mark.parametrize(
    ("question", "page", "concept"),
    [
        ("租帐篷押金多少", "A 300 yuan deposit is taken when you collect the kayak.", "security_deposit"),
        ("Returning the kayak a day late, what happens?", "逾期归还按天加收租金。", "late"),
        ("这单急用，可以加急处理吗", "Express orders cannot be expedited.", "rush"),
        ("How do I get a number plate for the scooter?", "电动滑板车上牌需要购车发票和合格证。", "registration"),
        ("有哪些配件", "Accessories and spare parts price list", "accessory"),
        ("游客购物可以办退税吗", "Tax refunds for visitors are handled at the airport.", "tax_refund"),
        (
            "Can I move my installation to a later date? I need to reschedule",
            "上门安装如需改期请提前一天告知。",
            "reschedule",
        ),
        ("滑板车多久要保养一次", "A basic tune-up costs 80 yuan.", "maintenance"),
        ("Do you clean rugs?", "地毯清洗 99 元一张。", "cleaning"),
        ("Is the charger sold separately?", "充电器需单独购买。", "sold_separately"),
        ("Which stove should I take camping?", "野营炉具价目表", "stove"),
        ("气罐能寄吗", "Gas canisters cannot be shipped by air.", "gas_canister"),
        ("验光要多少钱", "An eye exam takes 20 minutes.", "eye_exam"),
        ("Which papers should I bring along to the counter?", "请带上购买凭证到门店。", "bring"),
        ("送修要出示什么", "Bring the scooter and your receipt to any branch.", "bring"),
        ("Can the pump run below freezing?", "环境温度低于 0℃ 时请勿使用。", "temperature"),
        ("What does a full service cost?", "全面保养 199 元。", "maintenance"),
        ("How much is the contact lens solution?", "护理液 360 ml 45 元。", "lens_solution"),
        ("Is there an express service for repairs?", "维修可以加急，另收 50 元。", "rush"),
        ("How often should she come in for a check-up?", "配镜后每半年复查一次。", "check_up"),
        ("The kettle leaks, may I send it back to you?", "7 天内可以无理由退货。", "return"),
    ],
)
def test_ordinary_shop_words_have_a_concept_in_either_language(question: str, page: str, concept: str) -> None:
    assert concept in concepts(question) and concept in concepts(page)


def test_a_remembered_bonus_is_the_chunks_own() -> None:
    # The reranker remembers each chunk's bonus by the question and the chunk's fields: the same chunk again
    # gets the same order, and a chunk that differs in any field the bonus reads is scored anew.
    care = chunk("care", "Vento Pro 保修说明", FAMILY_CARE, 0.80)
    rows = chunk("rows", "Vento 商品详情", FAMILY_ROWS, 0.81)
    first = rerank("Vento Pro 保修多久", [care, rows])
    again = rerank("Vento Pro 保修多久", [care, rows])
    assert [(c.id, c.score) for c in again] == [(c.id, c.score) for c in first]
    for changed in (
        replace(care, title="Orla K3 保修说明"),
        replace(care, section="Vento Max"),
        replace(care, text=PRICE_LIST),
        replace(care, lang="en"),
    ):
        remembered = [c.score for c in rerank("Vento Pro 保修多久", [changed, rows])]
        _BONUSES.clear()
        assert [c.score for c in rerank("Vento Pro 保修多久", [changed, rows])] == remembered


def test_a_texts_concepts_are_those_whose_phrases_it_mentions() -> None:
    # The whole reading (by the text's first characters, the English prefilter inline) against the reference:
    # each concept's own phrases looked for one concept at a time.
    texts = _phrase_samples() + [
        f"请问{zh}和{other}" for _, (_, zh) in CONCEPTS.items() for other in ("运费", "以旧换新")
    ]
    for text in texts:
        lowered = text.lower()
        expected = {key for key in DEFAULT._terms if DEFAULT._mentions(text, lowered, key)}
        if {"shipping", "price"} <= expected:
            expected.add("shipping_fee")
        assert concepts(text) == expected, text


def test_a_contact_lens_is_no_contact_with_the_shop() -> None:
    assert "contact" not in concepts("Do you sell coloured contact lenses?")
    assert "contact" not in concepts("How long do contacts lenses last?")
    assert "contact" in concepts("How can I contact the Lakeside branch?")
    assert "contact" in concepts("Which contacts can I reach on weekends?")
