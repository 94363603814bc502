"""Shop words the dictionary lacks (`bridge.SHOP_WORDS`), on a made-up shelving shop: a word jieba cuts into parts is
still a word of the bridge, in a chunk and in a question, and the word index is asked for it by its parts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from rag_core.lexical import terms
from rag_core.vectorstore import VectorIndex
from rag_service.bridge import SHOP_WORDS, build, glosses
from tests.test_bridge import retriever, texts
from tests.test_retrieval_across import counted_matching, opened, point

# The fixing row of a Chinese parts list ranks below everything; a Chinese shelf page above it.
FIXING_ROW = point("配件价格表", "品类: 固定 | 商品: 膨胀螺丝 四颗装 | 售价: 6 元", "zh", 0.60)
SAMPLE_ROW = point("试用价格表", "木蜡油体验装 50ml，售价 15 元；正装 750ml，售价 98 元。", "zh", 0.62)
SHELF_PAGE = point("松木书架 商品详情", "松木书架高 180 厘米，五层，每层承重 15 公斤。", "zh", 0.80)
SHOP = [
    point("Shelf Guide", "Level the shelf before you load it.", "en", 0.95),
    point("Wall Fixing", "Every tall shelf needs two wall anchors, sold with the shelf.", "en", 0.93),
    SHELF_PAGE,
    SAMPLE_ROW,
    FIXING_ROW,
]


def test_a_shop_word_jieba_cuts_apart_links_as_a_whole() -> None:
    assert "膨胀螺丝" not in terms("膨胀螺丝")
    bridge = build(texts(SHOP))
    assert bridge.groups("Does it need to be anchored?", "zh") == ({"膨胀螺丝": 1.0},)
    assert bridge.share(FIXING_ROW.id, bridge.groups("Is an anchor included?", "zh")) == 1.0
    # A Chinese question names it whole too, and meets the English page's word.
    (group,) = bridge.groups("书架要用膨胀螺丝吗", "en")
    assert group["anchors"] == 1.0


def test_a_shop_word_of_another_dictionary_sense_means_the_shop_sense() -> None:
    # CC-CEDICT's 正装 is formal dress; a shop's is the full size beside the trial one.
    assert any(g.phrase == "full size" for g in glosses()["正装"])
    bridge = build(texts(SHOP))
    assert bridge.groups("How much is the full size?", "zh") == ({"正装": 1.0},)
    assert bridge.groups("Is there a trial pack?", "zh") == ({"体验装": 1.0},)


def test_the_word_index_is_asked_for_a_cut_word_by_its_parts() -> None:
    bridge = build(texts(SHOP))
    vector = bridge.vector(bridge.groups("Is an anchor included?", "zh"))
    assert len(vector.indices) == len(terms("膨胀螺丝")) == 2


def test_every_shop_word_has_a_definition_the_bridge_reads() -> None:
    known = glosses()
    for word in SHOP_WORDS:
        assert any(g.content for g in known[word]), word


@pytest.fixture(params=["edge", "local"])
async def shop_index(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[VectorIndex]:
    async with opened(request.param, tmp_path, SHOP) as index:
        yield index


async def test_an_english_question_takes_in_the_chinese_row_of_the_cut_word(shop_index: VectorIndex) -> None:
    calls = counted_matching(shop_index)
    question = "Do I have to buy the anchors separately?"
    found = [c.id for c in await retriever(shop_index, bridge_lift=0.3).search(question)]
    assert FIXING_ROW.id in found
    assert len(calls) == 1
