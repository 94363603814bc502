"""Glossary words of any shop that a page in the other language names its own way: putting a thing together is
its installation; an instalment service and couriers by their names; trial kits are samples. Made-up questions and
rows of a lamp shop."""

from __future__ import annotations

import pytest

from rag_service.domain import Chunk
from rag_service.glossary import concepts
from rag_service.rerank import rerank


@pytest.mark.parametrize(
    ("text", "concept", "named"),
    [
        ("Can I spread the desk lamp over 6 installments?", "installment", True),
        ("Who will install the ceiling lamp?", "install", True),
        ("Is the installation of the pendant free?", "install", True),
        ("Does the floor lamp need assembling?", "install", True),
        ("Can someone put it together for me?", "install", True),
        # A rewrite that names "it" puts the name between the words.
        ("Can someone put the Arc Floor Lamp together for me?", "install", True),
        ("落地灯可以上门组装吗", "install", True),
        ("Can I pay with Huabei?", "huabei", True),
        ("用花呗付款能分三期吗", "huabei", True),
        ("Do you ship with SF?", "sf_express", True),
        ("默认顺丰速运发货", "sf_express", True),
        ("大件走京东物流", "jd_logistics", True),
        ("偏远地区走中国邮政", "china_post", True),
        ("Is there a starter kit of the bulbs?", "sample", True),
    ],
)
def test_shop_words_name_their_concept(text: str, concept: str, named: bool) -> None:
    assert (concept in concepts(text)) is named


@pytest.mark.parametrize(
    "text",
    [
        # A courier's Chinese name inside other words is not the courier.
        "门店在北京东路 18 号",
        "其中通常有两种灯罩",
        "These items and systems ship in one box.",
    ],
)
def test_a_courier_name_inside_other_words_is_no_courier(text: str) -> None:
    assert not concepts(text) & {"jd_logistics", "zto", "china_post"}


def _chunk(doc: str, title: str, section: str, text: str, score: float) -> Chunk:
    return Chunk(f"{doc}-0", doc, f"docs/{doc}", title, text, score, 50, section=section, lang="zh")


def test_a_question_naming_the_instalment_service_lifts_its_row() -> None:
    # Both rows are instalments; only the service's name sets the one asked apart.
    cards = _chunk("pay", "分期付款说明", "信用卡分期", "信用卡分期 6 期，每期费率 0.6%。", 0.90)
    huabei = _chunk("pay2", "分期付款说明", "花呗分期", "花呗分期 6 期，总费率 4.5%。", 0.86)
    assert rerank("What's the fee for 6 Huabei installments?", [cards, huabei])[0].doc_id == "pay2"
