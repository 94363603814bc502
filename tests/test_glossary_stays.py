"""Stays, holidays and insurance follow-ups in either language (`glossary.CONCEPTS`; invented shops and wording):
leaving something in a shop's care by the night, public holidays by name, a policy's renewal and premiums, a return
visit after a fitting, stock, trying a thing on; and a night's rate is a price, not interest."""

from __future__ import annotations

import pytest

from rag_service.domain import Chunk
from rag_service.glossary import concepts
from rag_service.rerank import rerank


def _chunk(doc: str, title: str, text: str, score: float, lang: str) -> Chunk:
    return Chunk(f"{doc}-0", doc, f"docs/{doc}", title, text, score, 50, lang=lang)


@pytest.mark.parametrize(
    ("question", "line", "concept"),
    [
        # Invented rabbit hotel: an English question, a Chinese page.
        ("Can you board my rabbit while I'm away?", "兔子寄养只在总店提供。", "boarding"),
        ("兔子能寄养几天", "Our rabbit kennels are cleaned twice a day.", "boarding"),
        ("What does a cage cost per night?", "标准笼位每晚 45 元。", "per_night"),
        ("住一晚多少钱", "The standard cage is 45 yuan a night.", "per_night"),
        # Invented tea shop: a holiday by name in one language, the other's word in the other.
        ("Are you open over the Spring Festival?", "春节期间门店休息三天。", "holiday"),
        ("过年还发货吗", "No dispatch during the Lunar New Year holiday.", "holiday"),
        # Invented bicycle insurer: a follow-up names the renewal or the premium, not the insurance.
        ("明年还能续保吗", "The bike theft insurance can be renewed every year.", "insurance"),
        ("保费怎么交", "Premiums are paid once a year.", "insurance"),
        # Invented hearing-aid shop: a return visit after a fitting.
        ("Do we need to come back for a check after the fitting?", "配戴后一个月回店复验一次。", "check_up"),
    ],
)
def test_a_question_and_the_line_in_the_other_language_share_a_concept(question: str, line: str, concept: str) -> None:
    assert concept in concepts(question) and concept in concepts(line)


@pytest.mark.parametrize(
    "question", ["What's the nightly rate for a rabbit?", "Is there a daily rate for renting the kayak?"]
)
def test_a_rate_for_a_night_or_a_day_is_no_interest(question: str) -> None:
    assert "interest" not in concepts(question)
    # A rate alone is what something costs (and so no word for the dictionary bridge to translate as a fee rate).
    assert "price" in concepts(question)
    assert "interest" in concepts("Is the interest rate 0 for 12 months?")
    assert "interest" in concepts("分期有利息吗")


def test_an_english_nightly_rate_question_finds_the_chinese_room_rates() -> None:
    # The instalment page's fee line outscores the hotel's rate card on the embedding alone; read as interest, the
    # question's "rate" kept it first.
    fees = _chunk("instalments", "付款方式", "按月付：费率每期千分之六。", 0.86, "zh")
    rooms = _chunk("hotel", "兔子寄养", "标准笼位每晚 45 元，豪华笼位每晚 68 元。", 0.82, "zh")
    assert rerank("Rabbit boarding: nightly rate?", [fees, rooms])[0].doc_id == "hotel"


@pytest.mark.parametrize(
    ("question", "line", "concept"),
    [
        # Invented shoe shop: stock and trying a pair on, in either language.
        ("Is the trail runner in stock in size 42?", "42 码现货，43 码缺货。", "stock"),
        ("这双鞋还有货吗", "The trail runner is sold out until May.", "stock"),
        ("Can I try them on in the store?", "门店可以试穿所有款式。", "try_on"),
        ("可以试穿吗", "Every pair can be tried on in our stores.", "try_on"),
    ],
)
def test_what_any_shop_is_asked_is_one_concept_in_either_language(question: str, line: str, concept: str) -> None:
    assert concept in concepts(question) and concept in concepts(line)


def test_an_arrival_is_delivery_not_stock() -> None:
    # "什么时候到货" asks when a parcel arrives.
    assert "stock" not in concepts("什么时候到货")
