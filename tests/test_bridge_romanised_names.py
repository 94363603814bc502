"""A Chinese name an English page introduces after its romanisation ("Lumo (鹿鸣) lamps"): a Chinese question that
names it in characters links to the English page (`bridge.Bridge.names`, `retrieval._name_lift`). Invented lamp
shop."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rag_core.vectorstore import VectorIndex
from rag_service.bridge import build, romanised_names
from tests.test_bridge import retriever, texts
from tests.test_retrieval_across import opened, point

LAMP_PAGE = point("Lumo Desk Lamps", "Lumo (鹿鸣) is our own lamp range. The Lumo Arc sells for 260 yuan.", "en", 0.74)
LAMP_ROW = point("Lumo Desk Lamps", "The Lumo Arc Mini sells for 180 yuan.", "en", 0.73)
SHOP = [
    point("灯泡价格表", "品类: 灯泡 | 商品: 暖光灯泡 | 售价: 12 元", "zh", 0.80),
    point("台灯保修", "台灯整机保修 1 年。", "zh", 0.79),
    point("English FAQ", "We deliver to mainland China only.", "en", 0.70),
    LAMP_PAGE,
    LAMP_ROW,
]


def test_an_english_text_introduces_a_chinese_name_after_its_romanisation() -> None:
    assert romanised_names("Lumo (鹿鸣) is our own lamp range.") == {"鹿鸣": "Lumo"}
    assert romanised_names("Ming Yue（明月）lamps") == {"明月": "Ming Yue"}
    # Not a romanisation: a word of other syllables than the characters, or a note in brackets.
    assert romanised_names("See the parts list (配件价格表).") == {}
    assert romanised_names("Bright (鹿鸣灯具) is our brand.") == {}


def test_a_chinese_question_naming_it_in_characters_links_to_the_name() -> None:
    bridge = build(texts(SHOP))
    assert bridge.named("鹿鸣台灯多少钱") == (("lumo",),)
    assert ("lumo",) not in [tuple(g) for g in bridge.groups("台灯多少钱", "en")]
    assert bridge.share(LAMP_ROW.id, bridge.groups("鹿鸣台灯多少钱", "en")) > 0
    # A question that writes the name in letters is matched by them.
    assert bridge.named("鹿鸣 Arc Mini 多少钱") == ()


@pytest.fixture(params=["edge", "local"])
async def shop_index(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[VectorIndex]:
    async with opened(request.param, tmp_path, SHOP) as index:
        yield index


async def test_the_english_page_of_the_named_brand_outranks_the_chinese_pages(
    shop_index: VectorIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = await retriever(shop_index, candidates=3, other_language_chunks=2).search("鹿鸣台灯多少钱")
    assert found[0].doc_id == "Lumo Desk Lamps"
    # Without the title's lift the Chinese pages stay first: the dense score and the word share cannot lift it.
    monkeypatch.setattr("rag_service.retrieval.NAME_LIFT", 0.0)
    found = await retriever(shop_index, candidates=3, other_language_chunks=2).search("鹿鸣台灯多少钱")
    assert found[0].doc_id != "Lumo Desk Lamps"
