"""The other language's word-index matches of a question's translated words join the candidates unless two
candidates in that language have them (`retrieval.BRIDGE_HAVING`): a product page that names a part in passing
("可以加装挡泥板") is no reason to leave out the price list's row of it. Invented bicycle shop."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rag_core.vectorstore import VectorIndex
from tests.test_bridge import retriever
from tests.test_retrieval_across import counted_matching, opened, point

BIKE_PAGE = point("青柳 城市车 商品详情", "青柳城市车车架为铝合金，可以加装挡泥板和货架。", "zh", 0.80)
PART_ROW = point("配件价格表", "品类: 配件 | 商品: 挡泥板 一对 | 售价: 55 元", "zh", 0.60)
SHOP = [
    point("Riding Guide", "Check the tyre pressure before every ride.", "en", 0.95),
    point("Visitor FAQ", "Our workshop is open on weekends.", "en", 0.93),
    BIKE_PAGE,
    point("门店与营业时间", "东湖店每天 10:00–19:00 营业。", "zh", 0.76),
    PART_ROW,
]


@pytest.fixture(params=["edge", "local"])
async def shop_index(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[VectorIndex]:
    async with opened(request.param, tmp_path, SHOP) as index:
        yield index


async def test_a_row_joins_though_a_page_names_its_word_in_passing(
    shop_index: VectorIndex, monkeypatch: pytest.MonkeyPatch
) -> None:
    question = "Do you sell a mudguard set?"
    found = await retriever(shop_index, bridge_lift=0.3).search(question)
    assert PART_ROW.id in [c.id for c in found]
    # One candidate having the word was enough to skip the word index before.
    monkeypatch.setattr("rag_service.retrieval.BRIDGE_HAVING", 1)
    found = await retriever(shop_index, bridge_lift=0.3).search(question)
    assert PART_ROW.id not in [c.id for c in found]


async def test_no_search_when_two_candidates_have_the_word(shop_index: VectorIndex) -> None:
    calls = counted_matching(shop_index)
    await retriever(shop_index, other_language_chunks=3).search("Do you sell a mudguard set?")
    assert calls == []
