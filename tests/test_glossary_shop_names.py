"""Glossary words of any shop that a page in the other language names its own way: putting a thing together is
its installation; couriers by their names; trial kits are samples. Made-up questions of a lamp shop."""

from __future__ import annotations

import pytest

from rag_service.glossary import concepts


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
        ("Is paying by Huabei possible for the lamp?", "installment", True),
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
