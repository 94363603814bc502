"""Extractive answers that depend on a page's structure (FAQ questions, edition and store headings, a family
named as such) and recall of what only the conversation knows, on an invented appliance shop."""

from __future__ import annotations

from rag_service.recall import is_recall, recall_answer
from tests.extractive_kit import answer, chunk
from tests.extractive_kit import conversation as _memory

FAQ = chunk(
    "faq",
    "Help for Visitors",
    "\n".join(
        [
            "Help for Visitors",
            "Do you take foreign cards?",
            "Yes. We accept Visa and Mastercard. Diners Club cards are not accepted.",
            "Can you post my order to Canada?",
            "No. Parcels go to home addresses in the country only.",
        ]
    ),
)


def test_a_faq_question_heads_its_answer_and_is_never_quoted() -> None:
    text = answer("Do you take Diners Club?", [FAQ])
    assert "Diners Club cards are not accepted" in text
    assert "Do you take foreign cards?" not in text and "Can you post" not in text


def test_a_bare_no_is_read_with_the_sentence_after_it() -> None:
    text = answer("Will you post a parcel to Canada?", [FAQ])
    assert "No. Parcels go to home addresses in the country only." in text


HEATERS = chunk(
    "heaters",
    "暖峰取暖器 商品详情",
    "\n".join(
        [
            "暖峰取暖器 商品详情",
            "暖峰 2000W 标准版（NF-20A）",
            "售价 459 元。",
            "暖峰 2000W 遥控版（NF-20R）",
            "售价 629 元。",
        ]
    ),
)


def test_an_edition_word_picks_the_edition_s_heading() -> None:
    text = answer("暖峰 2000W 遥控版多少钱", [HEATERS])
    assert "629" in text and "459" not in text
    assert "遥控版" in text  # quoted with the heading that says whose price it is
    text = answer("换成标准版呢", [HEATERS], query="暖峰 2000W 遥控版多少钱")
    assert "459" in text and "629" not in text


MOPS = chunk(
    "mops",
    "Tidy T5 洗地机 商品详情",
    "\n".join(
        [
            "Tidy T5 洗地机 商品详情",
            "价格",
            "- Tidy T5：售价 1599 元。",
            "- Tidy T5 Max：售价 2299 元，电解水除菌，一桶水可用 40 分钟。",
            "保修",
            "Tidy T5 系列均享 3 年整机保修，电池 1 年。",
        ]
    ),
)


def test_a_family_named_as_such_covers_the_variant_asked() -> None:
    text = answer("保修几年", [MOPS], query="Tidy T5 Max 保修几年")
    assert "3 年" in text and "40 分钟" not in text


STORES = chunk(
    "stores",
    "门店信息",
    "\n".join(
        [
            "门店信息",
            "广州天河店",
            "- 地址：广州市天河区体育西路 12 号",
            "- 营业时间：每天 10:00–22:00",
            "成都春熙店",
            "- 地址：成都市锦江区春熙路 8 号",
            "- 营业时间：每天 10:00–21:30",
            "武汉江汉店",
            "- 地址：武汉市江汉区解放大道 66 号",
            "- 营业时间：每天 10:00–22:00",
        ]
    ),
)


def test_the_same_line_under_two_store_headings_is_each_store_s_and_says_which() -> None:
    text = answer("How late is the Wuhan shop open?", [STORES])
    assert "武汉江汉店" in text and "22:00" in text
    assert "21:30" not in text and "广州天河店" not in text


def test_a_question_for_the_customer_s_own_number_is_recall() -> None:
    assert is_recall("劳驾瞅瞅我的单号")
    assert is_recall("what's my tracking number?")
    # Stating one is not asking for it.
    assert not is_recall("单号 KT2031000123，请问几天能发出")
    memory = _memory(("单号 KT2031000123，请问几天能发出", "- 现货订单 48 小时内发货。"))
    got = recall_answer("劳驾瞅瞅我的单号", memory, "zh")
    assert got is not None and "KT2031000123" in got


def test_what_the_customer_said_at_the_start() -> None:
    memory = _memory(
        ("我是黑钻会员，邮费如何计", "- 黑钻会员全场包邮。"),
        ("退货要多久", "- 退货审核通过后 3 天内退款。"),
    )
    got = recall_answer("开头我讲过自己是哪档会员", memory, "zh")
    assert got is not None and "黑钻" in got


def test_a_fee_is_recalled_as_a_rate_or_an_amount() -> None:
    memory = _memory(
        ("The seal is broken but it is unused; any fee for returning?", "- 已拆封未使用的，收取售价 8% 的折旧费。"),
        ("And collecting it from my flat?", "- 上门收件另收 60 元服务费。"),
    )
    got = recall_answer("Remind me, the fee you quoted when the seal is broken?", memory, "en")
    assert got is not None and "8%" in got


def test_a_time_of_day_is_recalled_as_a_time() -> None:
    memory = _memory(
        ("Where is the Wuhan store?", "- 武汉江汉店：地址：武汉市江汉区解放大道 66 号"),
        ("Till when is it open?", "- 武汉江汉店：营业时间：每天 10:00–22:00"),
    )
    got = recall_answer("You told me when the Wuhan shop shuts, what time was it?", memory, "en")
    assert got is not None and "22:00" in got


def test_a_cell_that_repeats_its_column_s_name_is_read_once() -> None:
    from rag_service.table_rows import rows_of

    rows = rows_of(
        [
            "Model | Clean air delivery rate (CADR) | Price",
            "|---|---|---|",
            "Model: Zefir 4 | Clean air delivery rate (CADR): 410 m³/h | Price: 1499 yuan",
        ]
    )
    assert rows[0].render() == "Model Zefir 4，Clean air delivery rate (CADR) 410 m³/h，Price 1499 yuan。"


def test_air_before_an_appliance_noun_is_no_variant_word() -> None:
    from rag_service.facts import products

    assert [p.text for p in products("Price of the Crispo 6 air fryer, please")] == ["Crispo 6"]
    assert [p.text for p in products("Is the MacBook Air 13 in stock?")] == ["MacBook Air 13"]


SPECS = chunk(
    "fans",
    "Brisa 风扇 商品详情",
    "\n".join(
        [
            "Brisa 风扇 商品详情",
            "参数",
            "Brisa 5 适用面积 10–20 ㎡，重量 3.2 kg。",
            "Brisa 5 睡眠档噪音 24 dB，售价 399 元。",
            "保修",
            "Brisa 5 主机质保 1 年，无刷电机质保 5 年。",
        ]
    ),
)


def test_an_english_question_finds_the_unit_or_part_it_names_on_a_chinese_page() -> None:
    assert "24 dB" in answer("How noisy is the Brisa 5?", [SPECS])
    assert "10–20 ㎡" in answer("Brisa 5 能用在多大面积的屋子", [SPECS])
    text = answer("What is the guarantee on the Brisa 5 motor?", [SPECS])
    assert "无刷电机质保 5 年" in text and "24 dB" not in text


def test_an_opened_box_is_no_opening_hours_and_a_price_drop_no_accident() -> None:
    from rag_service.glossary import concepts

    assert "opening_hours" not in concepts("The carton was opened yesterday, nothing inside touched")
    assert "opening_hours" in concepts("Are you open on Sunday evenings?")
    assert "accident" not in concepts("Should the price drop next week, is there a refund of the gap?")
    assert "price_protection" in concepts("Should the price drop next week, is there a refund of the gap?")
    assert "accident" in concepts("I dropped it and the screen cracked")


CLUB = chunk(
    "club",
    "会员俱乐部",
    "\n".join(
        [
            "会员俱乐部",
            "怎么获得积分",
            "积分按消费金额乘以等级倍数发放。",
            "会员等级",
            "- 铜卡：积分倍数 1 倍。",
            "- 银卡：积分倍数 1.3 倍。",
            "- 金卡：积分倍数 1.6 倍。",
        ]
    ),
)


def test_the_level_the_customer_names_is_answered_for_that_level() -> None:
    text = answer("银卡会员的积分倍数是多少", [CLUB])
    assert "1.3 倍" in text and "1.6 倍" not in text


def test_a_basic_model_and_a_category_are_recalled_across_languages() -> None:
    memory = _memory(
        ("Price of the Boil 2 Pro kettle?", "- 品类 电水壶，型号 Boil 2 Pro，售价 219 元。"),
        ("and the basic Boil 2?", "- 品类 电水壶，型号 Boil 2，售价 139 元。"),
        ("Any bundle discount?", "- 购买两件及以上，立减 20 元。"),
    )
    got = recall_answer("Remind me of the price you gave for the basic kettle", memory, "en")
    assert got is not None and "139" in got and "219" not in got.split("(")[0]


DELIVERY = chunk(
    "delivery",
    "送货服务",
    "\n".join(
        [
            "送货服务",
            "送货时段",
            "大件商品送货时间可选：",
            "上午 8:30–11:30",
            "下午 14:00–17:30",
            "上楼费",
            "无电梯楼房 4 层以上收搬运费：冰箱每层 25 元。",
        ]
    ),
)
FRIDGE = chunk(
    "fridge",
    "冰川冰箱 商品详情",
    "\n".join(
        [
            "冰川冰箱 商品详情",
            "嵌入安装",
            "冰川 D12 都可以全嵌入橱柜，柜体开口需 600 mm 宽。",
            "搬运收费详见《送货服务》。",
        ]
    ),
)


def test_a_sentence_ending_in_a_colon_is_quoted_with_its_items() -> None:
    text = answer("What time windows are there for delivering a Bingchuan D12?", [FRIDGE, DELIVERY])
    assert "8:30–11:30" in text and "14:00–17:30" in text
    assert "详见《送货服务》" not in text  # a pointer to the page that has the answer is not the answer


def test_the_words_decide_when_the_question_names_only_a_category() -> None:
    text = answer("冰箱搬到 6 楼，楼里没电梯的话收费吗", [FRIDGE, DELIVERY])
    assert "每层 25 元" in text


def test_how_much_after_a_quoted_price_asks_for_the_price() -> None:
    page = chunk("mops2", "Tidy T5 洗地机 商品详情", MOPS.text)
    text = answer("网上 Tidy T5 Max 卖 1999，店里多少", [page])
    assert "2299" in text and "1599" not in text


def test_a_measurable_concept_asks_for_a_figure_in_its_unit() -> None:
    page = chunk(
        "grill",
        "Sizzla 电烤盘 商品详情",
        "\n".join(
            [
                "Sizzla 电烤盘 商品详情",
                "功能",
                "Sizzla 3 可以同时用不同温度烤两种食材。",
                "Sizzla 3 控温 60 到 250 ℃，带定时关机。",
            ]
        ),
    )
    text = answer("Which temperatures can it be set to?", [page], query="Which temperatures can Sizzla 3 be set to?")
    assert "60 到 250 ℃" in text


def test_a_verb_before_a_name_is_not_part_of_it() -> None:
    from rag_service.facts import products

    assert [p.text for p in products("Can you replace Aqua R7 for me?")] == ["Aqua R7"]
    assert [p.text for p in products("how much is iphone 16 pro")] == ["iphone 16 pro"]


def test_a_model_number_recalls_the_line_of_the_product_code_that_holds_it() -> None:
    memory = _memory(
        ("冰川 640 多少钱", "- 冰川 BCD-640WX 对开门：售价 6299 元。"),
        ("上楼要钱吗", "- 没有电梯时，冰箱每层 25 元。"),
    )
    got = recall_answer("之前你报的 640 那款价格是？", memory, "zh")
    assert got is not None and "6299" in got


def test_when_points_expire_is_answered_by_the_validity_rule() -> None:
    text = answer(
        "我的积分哪天失效",
        [CLUB, chunk("pts", "积分规则", "积分规则\n积分有效期\n上一年度的积分在次年 6 月 30 日清零。")],
    )
    assert "6 月 30 日" in text


def test_a_faq_question_heading_does_not_outrank_the_product_page() -> None:
    faq = chunk(
        "help",
        "Help Centre",
        "Help Centre\nQ: What guarantee comes as standard?\nA: Every item has a guarantee of at least 1 year.",
    )
    page = chunk("zed", "Zed Book 5 商品详情", "Zed Book 5 商品详情\nGuarantee: 3-year on-site service.")
    text = answer("What is the guarantee period?", [faq, page])
    assert "3-year" in text
