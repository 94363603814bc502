"""Price bands on an invented lamp shop: a care-plan table that a PDF's text layer flattened into lines, an
amount said with a Chinese multiplier ("四千多"), and a follow-up that leans on the amount said before."""

from __future__ import annotations

from rag_service.extractive import sentences_of
from rag_service.facts import Ask, question_asks
from rag_service.table_rows import asked_numbers, spans, spoken_amounts
from tests.extractive_kit import answer, chunk, conversation

TITLE = "Lumen Care Plans"
PLAN_PAGE = chunk(
    "lumen-care",
    TITLE,
    "\n".join(
        [
            "Lumen Care Plans",
            "Lumen Care extends the warranty of any lamp bought from Lumen House.",
            "Plan prices by the lamp's purchase price",
            "Lamp price +1 year +2 years",
            "below 1,000 yuan 39 yuan 69 yuan",
            "1,000 to 3,999 yuan 99 yuan 179 yuan",
            "4,000 to 7,999 yuan 159 yuan 289 yuan",
            "8,000 yuan and above 239 yuan 429 yuan",
            "A plan must be bought within 30 days of delivery.",
        ]
    ),
)
OTHER_PAGE = chunk("lumen-returns", "退换货政策", "降价保护\n签收之日起 10 天内，同一商品降价的，可以申请退还差价。")


def test_spoken_amounts_are_figures() -> None:
    assert spoken_amounts("落地灯四千多买的").split() == ["落地灯", "4000", "多买的"]
    assert spoken_amounts("两千五").strip() == "2500"
    assert spoken_amounts("一万二的吊灯").split()[0] == "12000"
    assert spoken_amounts("3千块").split()[0] == "3000"
    assert spoken_amounts("保两年") == "保两年"  # no multiplier: a count, not an amount
    assert asked_numbers("八百多的台灯加一年保障几块", []) == frozenset({"800"})


def test_spans_read_thousands_separators_and_open_ends() -> None:
    assert spans("1,000 to 3,999 yuan 99 yuan 179 yuan") == [(1000.0, 3999.0)]
    assert spans("8,000 yuan and above 239 yuan 429 yuan") == [(8000.0, float("inf"))]
    assert spans("below 1,000 yuan 39 yuan 69 yuan") == [(0.0, 1000.0)]


def test_a_flattened_table_row_is_a_sentence_not_a_heading() -> None:
    read = {c.text: c.section for c in sentences_of([PLAN_PAGE])}
    assert read["4,000 to 7,999 yuan 159 yuan 289 yuan"] == "Lamp price +1 year +2 years"
    # The rule after the table is under the table's heading, not under its last row read as a heading.
    assert read["A plan must be bought within 30 days of delivery."] == "Lamp price +1 year +2 years"
    assert "Plan prices by the lamp's purchase price" not in read  # a heading stays a heading


def test_an_amount_said_in_chinese_picks_its_band() -> None:
    out = answer("给四千多的落地灯加两年保障，收费多少", [PLAN_PAGE, OTHER_PAGE])
    assert "4,000 to 7,999 yuan 159 yuan 289 yuan" in out
    assert "179 yuan" not in out and "429 yuan" not in out


def test_a_follow_up_keeps_the_amount_the_rewriter_carried() -> None:
    memory = conversation(
        ("给四千多的落地灯加两年保障，收费多少", "- 4,000 to 7,999 yuan 159 yuan 289 yuan（Lumen Care Plans）")
    )
    out = answer("换成一年的呢", [PLAN_PAGE, OTHER_PAGE], query="给四千多的落地灯加一年保障，收费多少", memory=memory)
    assert "159 yuan" in out and "1,000 to 3,999" not in out and "8,000 yuan and above" not in out


def test_the_clause_after_a_condition_is_what_is_asked() -> None:
    assert question_asks("If the lamp's price falls next week, is a refund of the gap possible?") == [Ask.YESNO]
    assert question_asks("If I buy two, what is the price?")[0] is Ask.PRICE
    assert question_asks("What's the price if I buy two?")[0] is Ask.PRICE
    # "When" opens a condition only before its subject; "when will …" asks a date as well.
    assert question_asks("When I send the lamp back, who pays the postage?") == [Ask.PAYER]
    assert Ask.DATE in question_asks("When will the lamp arrive, and how much is shipping?")


def test_which_one_to_get_for_a_use_is_no_price_question() -> None:
    assert Ask.PRICE not in question_asks("Which kayak would you get for a windy lake?")
    assert question_asks("What could I get for my old kayak?")[0] is Ask.PRICE
