"""The embedded Qdrant Edge index, on its own (no model: four-dimensional vectors); local mode beside it where
both share a behaviour."""

from __future__ import annotations

import uuid
from pathlib import Path

import numpy as np
import pytest

from rag_core.lexical import SparseVec, document_vector, query_vector
from rag_core.settings import QdrantSettings
from rag_core.vectorstore import ChunkPoint
from rag_core.vectorstore.edge import EdgeIndex, _key
from rag_core.vectorstore.qdrant import QdrantIndex


def point(vector: list[float], text: str) -> ChunkPoint:
    dense = np.asarray(vector, dtype=np.float32)
    payload = {"doc_id": "d1", "text": text, "lang": "en"}
    return ChunkPoint(str(uuid.uuid4()), dense, SparseVec([], []), payload)


async def test_a_tenant_without_a_shard_finds_nothing_until_it_has_one(tmp_path: Path) -> None:
    index = EdgeIndex(QdrantSettings(path=str(tmp_path), collection="chunks", engine="edge"), 4, "test-embedder")
    query = np.asarray([1.0, 0.0, 0.0, 0.0], dtype=np.float32)
    try:
        assert await index.search(query, None, 5, 60, tenant="acme") == []
        assert "acme" not in await index.tenants()  # asking created nothing
        await index.upsert([point([1.0, 0.1, 0.0, 0.0], "Returns within 14 days.")], tenant="acme")
        found = await index.search(query, None, 5, 60, tenant="acme")
        assert [h.payload["text"] for h in found] == ["Returns within 14 days."]
        assert await index.search(query, None, 5, 60) == []  # the default tenant's shard is still empty
    finally:
        await index.close()


@pytest.mark.parametrize("engine", ["edge", "local"])
async def test_a_search_for_the_language_and_document_alone_reads_them_from_memory_and_sees_writes(
    tmp_path: Path, engine: str
) -> None:
    """Both embedded indexes (Qdrant Edge, and qdrant-client's local mode) answer it from their table."""
    settings = QdrantSettings(path=str(tmp_path), collection="chunks", engine="edge")
    index: EdgeIndex | QdrantIndex = (
        EdgeIndex(settings, 4, "test-embedder") if engine == "edge" else QdrantIndex.open(settings, 4, "test-embedder")
    )
    query = np.asarray([1.0, 0.0, 0.0, 0.0], dtype=np.float32)
    first, second = point([1.0, 0.1, 0.0, 0.0], "Returns within 14 days."), point([0.9, 0.3, 0.0, 0.0], "退货")
    second.payload.update(lang="zh", doc_id="d2")
    bare = point([0.8, 0.5, 0.1, 0.0], "No language recorded.")
    del bare.payload["lang"]
    try:
        await index.upsert([first, second, bare])

        async def fields(*names: str) -> list[tuple[str, dict[str, object]]]:
            return [(h.id, h.payload) for h in await index.search(query, None, 5, 60, payload=list(names))]

        read = await index.search(query, None, 5, 60)  # whole payloads, read by the engine
        expected = [(h.id, {k: h.payload[k] for k in ("lang", "doc_id") if k in h.payload}) for h in read]
        assert await fields("lang", "doc_id") == expected
        assert await fields("lang") == [(i, {k: v for k, v in p.items() if k == "lang"}) for i, p in expected]
        assert await index.pool(query, None, 5, 60) == [(h.id, h.score, str(h.payload.get("lang", ""))) for h in read]
        assert index._fields.table("chunks") is not None  # remembered
        # a write to the shard is seen by the next search
        second.payload.update(lang="en")
        await index.upsert([second])
        assert dict(await fields("lang"))[second.id] == {"lang": "en"}
        await index.delete_ids([first.id])
        assert first.id not in dict(await fields("lang", "doc_id"))
        await index.delete_doc("d2")
        assert [i for i, _ in await fields("doc_id")] == [bare.id]
    finally:
        await index.close()


def test_the_fields_table_keys_a_uuid_by_its_number_and_any_other_id_by_its_text() -> None:
    u = uuid.uuid4()
    assert _key(u) == u.int and _key(str(u)) == str(u) and _key(u.int) == str(u.int) != _key(u)


async def test_local_modes_pool_ranks_as_its_own_search_does(tmp_path: Path) -> None:
    """Local mode's pool is computed from its collection's arrays, not through `query_points`: same ids,
    same scores, same order (ties and all) as the search the client runs, with deleted points left out."""
    settings = QdrantSettings(path=str(tmp_path), collection="chunks", engine="local")
    index = QdrantIndex.open(settings, 8, "test-embedder")
    rng = np.random.default_rng(7)
    vectors = rng.standard_normal((60, 8)).round(1).tolist()
    vectors[5] = vectors[4]  # a tie
    points = [point(v, f"Kettle spare part {i}.") for i, v in enumerate(vectors)]
    try:
        await index.upsert(points)
        await index.delete_ids([points[9].id, points[30].id])
        # The installed qdrant-client keeps what the pool reads where `_in_memory` looks (else every
        # comparison below would pass on the public path and the saving would be gone unnoticed).
        name = await index._readable(None)
        assert name is not None and index._in_memory(name) is not None
        for _ in range(5):
            query = rng.standard_normal(8).astype(np.float32)
            for limit in (10, 200):
                read = await index.search(query, None, limit, 60)  # whole payloads: the client's query_points
                pool = await index.pool(query, None, limit, 60)
                # (Scores to float32's precision: local mode normalises its stored vectors in place at every
                # search, and its dot product is not bit-stable between two calls either: two of its own
                # searches for one query differ in the last bits now and then.)
                assert [i for i, _, _ in pool] == [h.id for h in read]
                assert [score for _, score, _ in pool] == pytest.approx([h.score for h in read], rel=1e-6)
                assert len(pool) == min(limit, 58)
        # payloads are read where local mode keeps them, and the deleted ones are not found
        wanted = [points[i].id for i in (3, 9, 4)]
        assert await index.payloads(wanted) == {points[3].id: points[3].payload, points[4].id: points[4].payload}
    finally:
        await index.close()


@pytest.mark.parametrize("engine", ["edge", "local"])
async def test_matching_finds_the_chunks_of_one_language_that_have_the_words_and_ranks_them_by_dense_score(
    tmp_path: Path, engine: str
) -> None:
    """`matching`: the best BM25 matches of the words among one language's chunks, with their dense scores
    (the pool's scale), the nearest first."""
    settings = QdrantSettings(path=str(tmp_path), collection="chunks", engine="edge")
    index: EdgeIndex | QdrantIndex = (
        EdgeIndex(settings, 4, "test-embedder") if engine == "edge" else QdrantIndex.open(settings, 4, "test-embedder")
    )

    def chunk(vector: list[float], text: str, lang: str) -> ChunkPoint:
        p = point(vector, text)
        p.payload["lang"] = lang
        return ChunkPoint(p.id, p.dense, document_vector(text, 120, 1.2, 0.75), p.payload)

    near = chunk([1.0, 0.2, 0.0, 0.0], "帐篷防潮垫单独购买，售价 59 元。", "zh")
    far = chunk([0.2, 1.0, 0.0, 0.0], "防潮垫可以机洗。", "zh")
    unrelated = chunk([1.0, 0.0, 0.0, 0.0], "营业时间每天 9 点到 21 点。", "zh")  # nearest, but none of the words
    english = chunk([1.0, 0.1, 0.0, 0.0], "防潮垫 ground sheet, sold separately.", "en")  # the words, another language
    query = np.asarray([1.0, 0.0, 0.0, 0.0], dtype=np.float32)
    try:
        await index.upsert([near, far, unrelated, english])
        found = await index.matching(query, query_vector("防潮垫"), 3, 3, lang="zh")
        assert [i for i, _ in found] == [near.id, far.id]
        by_dense = {h.id: h.score for h in await index.search(query, None, 10, 60)}
        assert [score for _, score in found] == pytest.approx([by_dense[near.id], by_dense[far.id]], rel=1e-5)
        assert [i for i, _ in await index.matching(query, query_vector("防潮垫"), 1, 3, lang="zh")] == [near.id]
        assert await index.matching(query, query_vector("防潮垫"), 3, 3, lang="zh", tenant="other") == []
        assert await index.matching(query, SparseVec([], []), 3, 3, lang="zh") == []
        # (Local mode remembers the word search until the collection is written to.)
        thicker = chunk([1.0, 0.05, 0.0, 0.0], "加厚防潮垫，售价 89 元。", "zh")
        await index.upsert([thicker])
        found = await index.matching(query, query_vector("防潮垫"), 3, 3, lang="zh")
        assert [i for i, _ in found] == [thicker.id, near.id, far.id]
    finally:
        await index.close()


async def test_local_word_search_finds_what_local_modes_own_search_finds(tmp_path: Path) -> None:
    """Local mode's word search from the inverted index (`_LocalWords`) against the client's `query_points`: the
    same ids in the same order, with IDF over the live points, ties, points sharing no word and a deleted point."""
    from qdrant_client import models

    from rag_core.vectorstore.base import SPARSE
    from rag_core.vectorstore.qdrant import _LocalWords

    index = QdrantIndex.open(
        QdrantSettings(path=str(tmp_path), collection="chunks", engine="local"), 4, "test-embedder"
    )
    rng = np.random.default_rng(7)
    vocabulary = ["滤芯", "更换", "水壶", "保温", "价格", "filter", "kettle", "warranty", "price", "descale", "外壳"]
    points = []
    for n in range(40):
        words = " ".join(rng.choice(vocabulary, size=int(rng.integers(1, 5))))
        p = point(list(rng.random(4)), words)
        p.payload["lang"] = "zh" if n % 2 else "en"
        points.append(ChunkPoint(p.id, p.dense, document_vector(words, 120, 1.2, 0.75), p.payload))
    try:
        await index.upsert(points)
        await index.client.delete("chunks", points_selector=models.PointIdsList(points=[points[3].id]))
        name = "chunks"
        words_index = _LocalWords.build(index._in_memory(name))
        assert words_index is not None
        for text in ["滤芯 更换", "kettle price", "保温 水壶 价格", "descale warranty filter", "外壳", "missing word"]:
            for lang in ("zh", "en"):
                language = models.Filter(must=[models.FieldCondition(key="lang", match=models.MatchValue(value=lang))])
                words = query_vector(text)
                for limit in (1, 3, 10):
                    theirs = await index.client.query_points(
                        name,
                        query=models.SparseVector(indices=words.indices, values=words.values),
                        using=SPARSE,
                        query_filter=language,
                        limit=limit,
                        with_payload=False,
                    )
                    assert words_index.search(words, language, limit) == [str(h.id) for h in theirs.points]
    finally:
        await index.close()
