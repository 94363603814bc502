"""Generic slips read off a shop no rule was written on, over an invented tea-and-teaware shop: a size with its
unit is no model's name ("the Plus in 500ml" names the Plus), an order number given with a verb ("my order number
is …") says no product, and a table a PDF flattened to one amount a line keeps its lines as rows, not headings."""

from __future__ import annotations

from rag_service.extractive import Question, _without_order_number, sentences_of
from tests.extractive_kit import answer, chunk

KETTLES = chunk(
    "kettles",
    "澄明 玻璃煮茶壶 商品详情",
    "\n".join(
        [
            "澄明 玻璃煮茶壶 商品详情",
            "| 版本 | 容量 | 材质 | 售价 |",
            "|---|---|---|---|",
            "| 澄明 标准款 | 600ml | 高硼硅玻璃 | 128 元 |",
            "| 澄明 标准款 | 1000ml | 高硼硅玻璃 | 168 元 |",
            "| 澄明 Plus | 600ml | 高硼硅玻璃 + 不锈钢滤网 | 198 元 |",
            "| 澄明 Plus | 1000ml | 高硼硅玻璃 + 不锈钢滤网 | 258 元 |",
        ]
    ),
)

TRIAL_SETS = chunk(
    "trial",
    "茶具体验套装",
    "\n".join(
        [
            "茶具体验套装",
            "| 套装 | 内容 | 售价 |",
            "|---|---|---|",
            "| 一人饮套装 | 澄明 Plus 300ml + 品茗杯 2 只 | 99 元 |",
            "| 办公室套装 | 澄明标准款 300ml + 茶叶罐 | 89 元 |",
        ]
    ),
)


def test_a_size_with_its_unit_is_no_models_name() -> None:
    q = Question.parse("how much is the Plus in 1000ml?", "how much is the Plus in 1000ml?")
    assert q.named == ()
    q = Question.parse("Kettle 20 in 1000ml, how much?", "Kettle 20 in 1000ml, how much?")
    assert [p.text for p in q.named] == ["Kettle 20"]


def test_the_model_asked_in_the_size_asked() -> None:
    text = answer("Hi! About the Chengming glass kettle: how much is the Plus in 1000ml?", [KETTLES, TRIAL_SETS])
    assert "258" in text
    assert "99 元" not in text and "168" not in text


def test_an_order_number_given_with_a_verb_is_no_product() -> None:
    assert _without_order_number("my order number is TW20260304-118, is it shipped?").strip() == "my  , is it shipped?"
    text = answer("My order number is TW20260304-118. How much is the Plus in 1000ml?", [KETTLES])
    assert "258" in text and "198" not in text


RENTAL = chunk(
    "rental",
    "Tea Room Booking",
    "\n".join(
        [
            "Tea Room Booking",
            "Private rooms",
            "Rooms seat up to 6 guests. The price depends on how long you stay:",
            "Length Price (per room)",
            "1 hour 60 yuan",
            "2 hours 110 yuan",
            "4 hours 200 yuan",
            "Tea is charged separately.",
        ]
    ),
)


def test_a_flattened_tables_amount_lines_are_rows_not_headings() -> None:
    found = {c.text: c.section for c in sentences_of([RENTAL])}
    assert "2 hours 110 yuan" in found and "4 hours 200 yuan" in found
    # The line after the rows is under the table's heading, not under its last row.
    assert found["Tea is charged separately."] != "4 hours 200 yuan"


TEA_CLUB = chunk(
    "club",
    "Leaf Club",
    "\n".join(
        [
            "Leaf Club",
            "Joining",
            "Anyone can join the Leaf Club for free in the mini program.",
            "Club members get 15% off every tin of loose tea.",
            "Tins of loose tea cost 68 yuan at the counter; gift tins are 98 yuan.",
        ]
    ),
)


def test_a_share_of_the_price_answers_how_much_cheaper() -> None:
    text = answer("If I join the club, how much cheaper does a tin get?", [TEA_CLUB])
    assert "15%" in text
