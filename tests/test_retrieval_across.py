"""The other language's chunks that have a question's concepts in their own words enter the candidates
(`Retriever.across`), on a made-up shop; the index is the real embedded one (Qdrant Edge, and local mode beside
it) with four-dimensional vectors, and the query's embedding is fixed: the dense ranking is set by hand."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from rag_core.lexical import document_vector
from rag_core.settings import QdrantSettings, RetrievalSettings
from rag_core.vectorstore import ChunkPoint, VectorIndex
from rag_core.vectorstore.edge import EdgeIndex
from rag_core.vectorstore.qdrant import QdrantIndex
from rag_service.glossary import phrases
from rag_service.retrieval import Retriever, concept_words

QUERY = [1.0, 0.0, 0.0, 0.0]


class FixedEmbedder:
    """Every query embeds to QUERY."""

    name, dim, remote = "fixed", 4, False

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        return np.asarray(QUERY, dtype=np.float32)

    def embed_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        raise AssertionError("not used")


def point(title: str, text: str, lang: str, closeness: float) -> ChunkPoint:
    """A chunk whose dense score against QUERY falls with `closeness` (1: the query itself)."""
    dense = np.asarray([closeness, 1.0 - closeness, 0.0, 0.0], dtype=np.float32)
    payload = {"doc_id": title, "source": f"docs/{title}", "title": title, "text": text, "lang": lang}
    return ChunkPoint(str(uuid.uuid4()), dense, document_vector(f"{title}\n{text}", 120, 1.2, 0.75), payload)


def counted_matching(index: VectorIndex) -> list[Any]:
    """The index's `matching` calls from now on (their arguments), in the list returned."""
    calls: list[Any] = []
    original = index.matching

    async def counted(*args: Any, **kwargs: Any) -> list[tuple[str, float]]:
        calls.append(args)
        return await original(*args, **kwargs)

    index.matching = counted  # type: ignore[method-assign]
    return calls


# A kite shop: English pages close to any question (the embedder prefers its language), Chinese pages about
# kites, and the Chinese price list's row for the spare line below every other chunk in the dense ranking.
SPARE_LINE = point("配件价格表", "品类: 风筝线 | 商品: 备用线轮 50 米 | 售价: 35 元", "zh", 0.70)
SHOP = [
    point("Flying Guide", "Launch the kite with the wind at your back.", "en", 0.95),
    point("Visitor FAQ", "We ship kites to Hong Kong and Macao.", "en", 0.93),
    point("燕尾风筝 商品详情", "燕尾风筝翼展 1.8 米，适合三级风。", "zh", 0.80),
    point("燕尾风筝 商品详情", "颜色：天蓝、橙红。售价 168 元。", "zh", 0.78),
    point("门店与营业时间", "西湖店每天 9:00–18:00 营业。", "zh", 0.76),
    SPARE_LINE,
]


@asynccontextmanager
async def opened(engine: str, tmp_path: Path, points: Sequence[ChunkPoint]) -> AsyncIterator[VectorIndex]:
    """An embedded index of either engine (4 dimensions, the fixed embedder's) holding `points`."""
    settings = QdrantSettings(path=str(tmp_path), collection="chunks", engine="edge")
    index: VectorIndex = EdgeIndex(settings, 4, "fixed") if engine == "edge" else QdrantIndex.open(settings, 4, "fixed")
    await index.upsert(points)
    try:
        yield index
    finally:
        await index.close()


@pytest.fixture(params=["edge", "local"])
async def shop_index(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[VectorIndex]:
    async with opened(request.param, tmp_path, SHOP) as index:
        yield index


def retriever(index: VectorIndex, **settings: Any) -> Retriever:
    # Two candidates, and one of the other language: the pool holds the whole shop, read by its language. The
    # dictionary bridge off: the glossary's concepts alone (tests/test_bridge.py has the bridge).
    defaults: dict[str, Any] = {
        "candidates": 2,
        "other_language_chunks": 1,
        "concept_chunks": 2,
        "concept_pool": 2,
        "bridge_chunks": 0,
        "bridge_lift": 0.0,
    }
    return Retriever(index, FixedEmbedder(), RetrievalSettings(**{**defaults, **settings}))  # type: ignore[arg-type]


async def test_an_english_question_takes_in_the_chinese_chunk_that_has_its_concept(shop_index: VectorIndex) -> None:
    # "accessory" is the question's specific concept (配件); the kite page's chunks, the other language's best
    # by dense score, have none of its words.
    question = "Do you sell spare parts for the swallow kite?"
    found = await retriever(shop_index).search(question)
    assert SPARE_LINE.id in [c.id for c in found]
    without = await retriever(shop_index, concept_chunks=0).search(question)
    assert SPARE_LINE.id not in [c.id for c in without]


async def test_no_search_when_a_candidate_in_the_other_language_has_all_the_questions_concepts(
    shop_index: VectorIndex,
) -> None:
    # A price is a generic concept (no search at all); the opening hours and the store are both on the store
    # page, among the candidates when more of the other language are taken. More chunks of a page the
    # reranker can lift already would only push other lines out of the prompt.
    calls = counted_matching(shop_index)
    await retriever(shop_index).search("How much is the swallow kite?")
    await retriever(shop_index, other_language_chunks=3).search("When does the West Lake store open on Sundays?")
    assert calls == []
    await retriever(shop_index).search("When does the West Lake store open on Sundays?")
    assert len(calls) == 1
    # A shop whose pages are all in one language: no candidate in the other, and nothing to search for.
    await shop_index.upsert([point(p.payload["title"], p.payload["text"], "en", 0.9) for p in SHOP[:2]], "english")
    found = await retriever(shop_index).search("Do you sell spare parts for the swallow kite?", tenant="english")
    assert len(found) == 2 and len(calls) == 1


def test_concept_words_are_the_concepts_phrases_in_the_pages_language() -> None:
    assert "配件" in phrases(frozenset({"accessory"}), "zh").split()
    english = phrases(frozenset({"accessory"}), "en").split()
    # A pattern's word comes with its endings (a word index matches whole words), its marks dropped.
    assert {"accessory", "accessories", "spare", "part", "parts"} <= set(english)
    assert not any(mark in w for w in english for mark in "*!?|")
    assert phrases(frozenset({"color"}), "en").split()[:2] == ["color", "colors"]
    assert "colour" in phrases(frozenset({"color"}), "en").split()
    # Each concept weighs alike: one written a dozen ways counts no more than one written once.
    words = concept_words(frozenset({"accessory", "lens_solution"}), "zh")
    assert words is not None
    assert sum(words.values) == pytest.approx(2.0)
    assert concept_words(frozenset({"no-such-concept"}), "zh") is None
