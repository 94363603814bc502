"""Layouts and wordings the first shops did not have, on an invented lamp-and-bag shop: sibling models
named without a model number ("晨光 Mini", "晨光 标准款"), model names with a unit ("远足 20L"), follow-ups
whose rewritten query still carries the previous model."""

from __future__ import annotations

from rag_service.facts import places
from tests.extractive_kit import answer, chunk, conversation

# A Chinese table whose model names carry no model number: a family name and a variant or edition word.
LAMPS = chunk(
    "lamps",
    "晨光露营灯系列",
    "\n".join(
        [
            "| 型号 | 类型 | 重量 | 售价 | 保修 |",
            "|---|---|---|---|---|",
            "| 晨光 Duo 双头 | 双头挂灯 | 1.4 kg | 299 元 | 2 年 |",
            "| 晨光 Mini | 口袋灯 | 75 g | 89 元 | 1 年 |",
            "| 晨光 Lite | 头灯 | 120 g | 129 元 | 1 年 |",
            "| 晨光 标准款 | 营地灯 | 420 g | 169 元 | 1 年 |",
            "| 晨光 豪华版 | 营地灯，带蓝牙音箱 | 610 g | 359 元 | 2 年 |",
        ]
    ),
)

# A Chinese page with a heading per model, the model named by its volume.
BAGS = chunk(
    "bags",
    "远足背包 商品详情",
    "\n".join(
        [
            "远足背包 商品详情",
            "远足（Yuanzu）是本店的自有品牌背包，在售两款：远足 20L 城市包和远足 35L 登山包。",
            "远足 20L 城市包",
            "- 售价：259 元",
            "- 空包重量：0.7 kg",
            "远足 35L 登山包",
            "- 售价：489 元",
            "- 空包重量：1.2 kg",
        ]
    ),
)


def test_a_row_named_by_a_variant_word_without_a_model_number() -> None:
    out = answer("多重", [LAMPS], query="晨光 Mini 多重")
    assert "75 g" in out
    assert "1.4 kg" not in out and "420 g" not in out


def test_the_customers_own_edition_word_beats_the_model_the_rewriter_carried() -> None:
    memory = conversation(("晨光 Mini 多重", "- 型号 晨光 Mini，重量 75 g。（晨光露营灯系列）"))
    out = answer("标准款呢", [LAMPS], query="晨光 Mini 多重", memory=memory)
    assert "420 g" in out and "75 g" not in out
    out = answer("标准款保修多久", [LAMPS], query="晨光 Mini 标准款保修多久", memory=memory)
    assert "169 元" in out and "89 元" not in out and "359 元" not in out


def test_an_english_edition_word_picks_the_chinese_edition_row() -> None:
    out = answer("How much does the deluxe one weigh?", [LAMPS], query="晨光 Mini: How much does the deluxe one weigh?")
    assert "610 g" in out and "75 g" not in out


def test_a_heading_that_names_the_model_by_its_volume() -> None:
    out = answer("远足 20L 多重", [BAGS])
    assert "0.7 kg" in out and "1.2 kg" not in out


# An English rental page beside the Chinese product page: a daily rate per model, the model named first.
RENTAL = chunk(
    "rental",
    "Lamp and Bag Rental",
    "\n".join(
        [
            "Rental prices (per day)",
            "- Yuanzu 20L bag: 15 yuan per day, deposit 200 yuan.",
            "- Yuanzu 35L bag: 25 yuan per day, deposit 300 yuan.",
            "- Chenguang 4 lantern: 12 yuan per day, deposit 150 yuan.",
        ]
    ),
)


def test_a_daily_rate_is_not_what_a_thing_costs() -> None:
    out = answer("How much is the Yuanzu 35L bag?", [RENTAL, BAGS])
    assert "489" in out and "25 yuan" not in out


def test_a_rate_asked_for_is_read_from_the_line_naming_the_model() -> None:
    out = answer("租一个远足 35L 一天多少钱", [RENTAL, BAGS])
    assert "25 yuan" in out and "15 yuan" not in out


# An English page with a heading per model.
SHELLS = chunk(
    "shells",
    "Breeze Shell Jackets",
    "\n".join(
        [
            "Breeze Shell Jackets",
            "Breeze Shell Lite",
            "Price: ¥690",
            "Breeze Shell 3L",
            "Price: ¥1,290",
        ]
    ),
)


def test_a_variant_word_shared_with_another_line_does_not_pick_its_row() -> None:
    out = answer("How much is the Breeze Shell Lite?", [LAMPS, SHELLS])
    assert "690" in out and "129 元" not in out and "1,290" not in out


# A Chinese shipping page written per province group, with an exception list.
SHIPPING = chunk(
    "shipping",
    "配送费用说明",
    "\n".join(
        [
            "配送区域和运费",
            "京津冀地区：满 69 元包邮，不满收 5 元运费。",
            "港澳台和海外：暂不配送。",
            "其他地区（甘肃、宁夏、西藏除外）：满 129 元包邮，不满收 9 元运费。",
            "甘肃、宁夏、西藏：每单收 22 元运费。",
        ]
    ),
)


def test_provinces_in_both_languages_and_abbreviation_runs() -> None:
    assert {"bj", "tj", "hb_"} <= places("京津冀地区") and {"hk", "mo", "tw"} <= places("港澳台")
    assert "xz_" in places("shipping to Tibet") and "nx_" in places("寄到宁夏")
    assert not places("其他地区（甘肃、宁夏除外）")  # the exceptions are not where it applies
    assert places("浙江") & {"zj_"} and "js_" not in places("浙江")  # a name in full is no run
    assert "hb_" in places("石家庄，河北") and not places("新品青春版")


def test_large_cities_in_both_languages_are_places_of_their_province() -> None:
    assert {"qd", "sd_"} <= places("寄到青岛几天到") and {"nb", "zj_"} <= places("Can you ship to Ningbo?")
    assert {"heb", "hl_"} <= places("哈尔滨冬天能送货吗") and "hb_" not in places("哈尔滨")
    assert not places("Jinanite stone")  # a word that only begins like a city's name


def test_a_province_picks_its_shipping_row() -> None:
    out = answer("What does shipping to Ningxia cost?", [SHIPPING])
    assert "22 元" in out and "5 元" not in out
    out = answer("我在天津，运费怎么算", [SHIPPING])
    assert "69 元" in out and "22 元" not in out and "129 元" not in out


def test_a_city_is_not_its_provinces_other_city() -> None:
    stores = chunk(
        "stores",
        "门店与营业时间",
        "\n".join(["南湖店（广州）", "营业时间：每天 9:00–21:00", "北岸店（深圳）", "营业时间：每天 10:00–22:30"]),
    )
    out = answer("深圳的店几点关门", [stores])
    assert "22:30" in out and "21:00" not in out


def test_recall_of_what_was_said_at_the_start_in_other_words() -> None:
    memory = conversation(
        ("你好，我的订单号是 QX20270311-4410，想问下晨光 Mini 多少钱", "- 晨光 Mini：售价 89 元。（晨光露营灯系列）"),
        ("那标准款呢", "- 晨光 标准款：售价 169 元。（晨光露营灯系列）"),
        ("我的另一单是 QX20270315-0042", "好的。"),
    )
    out = answer("我刚开始报的订单号是多少", [LAMPS], memory=memory)
    assert "QX20270311-4410" in out and "QX20270315-0042" not in out
    out = answer("What was the price of the first lamp I asked about?", [LAMPS], memory=memory)
    assert "89" in out and "169" not in out


def test_who_pays_a_fee_is_a_rule_not_an_amount() -> None:
    repairs = chunk(
        "repairs",
        "维修与配送",
        "\n".join(
            [
                "配送费用",
                "普通地区：满 129 元包邮，不满收 9 元运费。",
                "寄修说明",
                "保修期内寄修的往返运费都由本店承担。",
            ]
        ),
    )
    out = answer("寄修的往返运费谁出", [repairs])
    assert "本店承担" in out and "9 元" not in out
    out = answer("Who pays the shipping when I send it in for repair?", [repairs])
    assert "本店承担" in out


STORES = chunk(
    "stores",
    "门店与热线",
    "\n".join(
        [
            "天津滨海店",
            "营业时间：10:00–21:00，每周三店休",
            "电话：022-6612 0408",
            "重庆解放碑店",
            "营业时间：每天 10:00–22:00",
            "电话：023-6381 2290",
        ]
    ),
)


def test_there_is_the_place_the_customer_named_before() -> None:
    memory = conversation(
        ("Is the Tianjin store open on Wednesdays?", "- 天津滨海店：营业时间：10:00–21:00，每周三店休（门店与热线）")
    )
    out = answer("What's the phone number there?", [STORES], memory=memory)
    assert "022-6612 0408" in out and "023-6381 2290" not in out
    out = answer("Is there a phone number I can call?", [STORES])
    assert "022-6612 0408" in out and "023-6381 2290" in out  # "is there" points at no place
