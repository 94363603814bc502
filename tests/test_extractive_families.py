"""Product pages with one section or one table row per model, sibling editions, English questions over
Chinese pages that name the brand in characters: on an invented bicycle shop."""

from __future__ import annotations

from rag_core.text import name_aliases
from rag_service.extractive import asked_editions
from rag_service.facts import Ask, product_fit, products, question_asks
from tests.extractive_kit import answer, chunk

# An English spec page: a heading per model, "Label: value" lines under each.
BIKES_EN = chunk(
    "bikes",
    "Ridgeline Bikes",
    "\n".join(
        [
            "Ridgeline Bikes",
            "There are three models: the Ridgeline Air, the Ridgeline 7S and the Ridgeline 9X Pro.",
            "Ridgeline Air",
            "Price: ¥2,380",
            "Frame weight (size L): 1.9 kg",
            "Frame sizes: M to XL",
            "Warranty: 2 years",
            "Ridgeline 7S",
            "Price: ¥3,150",
            "Frame weight (size L): 1.6 kg",
            "Frame sizes: S to XL",
            "Warranty: 3 years",
        ]
    ),
)

# A Chinese page introducing its brand's romanisation, a section per edition.
SCOOTERS_ZH = chunk(
    "scooters",
    "风驰滑板车 商品详情",
    "\n".join(
        [
            "风驰滑板车 商品详情",
            "风驰（Fengchi）是本店的自有品牌滑板车，在售两款：风驰 3 标准版和风驰 5 旅行版。",
            "风驰 3 标准版",
            "- 售价：1580 元",
            "- 适用人数：1 人",
            "- 折叠尺寸：96 × 40 × 35 cm",
            "- 整车重量：11.5 kg",
            "风驰 5 旅行版",
            "- 售价：2460 元",
            "- 适用人数：1–2 人",
            "- 折叠尺寸：110 × 46 × 40 cm",
            "- 整车重量：14.2 kg",
        ]
    ),
)


def test_a_named_model_gets_its_own_section_not_its_siblings() -> None:
    out = answer("How much is the Ridgeline Air?", [BIKES_EN])
    assert "2,380" in out and "3,150" not in out


def test_how_much_does_it_weigh_asks_for_a_weight_not_a_price() -> None:
    assert Ask.PRICE not in question_asks("How much does the Ridgeline Air weigh?")
    out = answer("How much does the Ridgeline Air weigh?", [BIKES_EN])
    assert "1.9 kg" in out and "2,380" not in out


def test_the_label_that_names_what_is_asked_wins_over_a_qualifier_in_parentheses() -> None:
    out = answer("What sizes does the Ridgeline 7S come in?", [BIKES_EN])
    assert "S to XL" in out and "1.6 kg" not in out


def test_a_romanised_brand_is_read_as_the_chinese_name() -> None:
    assert name_aliases(SCOOTERS_ZH.text) == {"Fengchi": "风驰"}
    out = answer("How heavy is the Fengchi 5?", [SCOOTERS_ZH])
    assert "14.2 kg" in out and "11.5 kg" not in out


def test_a_spec_concept_matches_a_chinese_label_for_an_english_question() -> None:
    out = answer("What is the folded size of the Fengchi 5?", [SCOOTERS_ZH])
    assert "110 × 46 × 40" in out and "96 × 40" not in out


def test_a_chinese_edition_name_is_a_product_and_the_standard_edition_is_the_plain_model() -> None:
    assert [p.text for p in products("风驰 3 标准版和风驰 5 旅行版")] == ["风驰 3 标准版", "风驰 5 旅行版"]
    named = list(products("风驰 3 标准版"))
    assert product_fit(list(products("风驰 3 Pro")), True, named) == 1.0  # "那标准版呢" after the Pro
    assert product_fit(list(products("风驰 3 Pro")), False, named) == 0.0
    out = answer("那标准版多少钱", [SCOOTERS_ZH], query="风驰 3 Pro 那标准版多少钱")
    assert "1580" in out and "2460" not in out


def test_english_edition_words_name_the_chinese_editions() -> None:
    assert asked_editions("How much is the travel one?") == frozenset({"旅行"})
    out = answer("How much is the travel edition?", [SCOOTERS_ZH])
    assert "2460" in out and "1580" not in out


def test_a_daily_rate_is_not_what_a_thing_costs() -> None:
    rental = chunk("rental", "Rentals", "Rentals\nRidgeline Air: 45 yuan per day, deposit 600 yuan.")
    out = answer("How much is the Ridgeline Air?", [rental, BIKES_EN])
    assert out.index("2,380") < out.index("45 yuan") if "45 yuan" in out else "2,380" in out


def test_a_model_number_the_parser_does_not_see_as_a_name_still_picks_its_section() -> None:
    heaters = chunk(
        "heaters",
        "暖阳取暖器 商品详情",
        "\n".join(
            [
                "暖阳取暖器 商品详情",
                "暖阳 HT-318S 壁挂款",
                "- 外形尺寸：60 × 12 × 45 cm",
                "暖阳 HT-226D 落地款",
                "- 外形尺寸：38 × 30 × 72 cm",
            ]
        ),
    )
    out = answer("尺寸多大", [heaters], query="暖阳 318 尺寸多大")
    assert "60 × 12" in out and "38 × 30" not in out


def test_a_label_about_the_topic_is_no_answer_to_a_yes_no_question_about_it() -> None:
    stores = chunk(
        "stores",
        "门店与热线",
        "门店与热线\n东湖店\n门店电话：027-8811 2233\n襄阳暂未开店，可以在线下单。",
    )
    out = answer(
        "Is there a shop of yours in Xiangyang?", [stores], query="Is there a shop of yours in Xiangyang (襄阳)?"
    )
    assert "襄阳暂未开店" in out
