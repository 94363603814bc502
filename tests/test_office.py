"""Word, PowerPoint and Excel files and FAQ tables: structure kept for the chunker, broken files refused
with a clear message, FAQ entries ingested idempotently beside the chunks."""

from __future__ import annotations

import json
import zipfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import docx
import openpyxl
import pptx
import pytest
from pptx.util import Inches
from typer.testing import CliRunner

from ingest.cli import app
from rag_core.documents.faq import faq_collection
from rag_core.documents.loaders import LoadError, load_document
from rag_core.documents.pipeline import delete_document, doc_id_for, ingest_file
from rag_core.embedding import Embedder
from rag_core.settings import IngestSettings, QdrantSettings, Settings
from rag_core.tokens import TokenCounter
from rag_core.vectorstore import VectorIndex, open_index


def make_docx(path: Path) -> Path:
    document = docx.Document()
    document.add_heading("售后服务手册", level=1)
    document.add_paragraph("本手册说明保修与退货。")
    document.add_heading("保修期限", level=2)
    document.add_paragraph("整机保修一年，电池保修六个月。")
    table = document.add_table(rows=3, cols=2)
    for r, (a, b) in enumerate([("型号", "保修"), ("X1", "一年"), ("X2", "两年")]):
        table.cell(r, 0).text, table.cell(r, 1).text = a, b
    document.add_paragraph("以上政策自 2024 年起执行。")
    document.save(str(path))
    return path


def make_pptx(path: Path) -> Path:
    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "Shipping options"
    slide.placeholders[1].text_frame.text = "Standard delivery takes three days."
    second = deck.slides.add_slide(deck.slide_layouts[5])
    second.shapes.title.text = "Fees"
    table = second.shapes.add_table(2, 2, Inches(1), Inches(2), Inches(4), Inches(1)).table
    for r, (a, b) in enumerate([("Method", "Fee"), ("Express", "$12")]):
        table.cell(r, 0).text, table.cell(r, 1).text = a, b
    second.notes_slide.notes_text_frame.text = "Express ships the same day."
    deck.save(str(path))
    return path


def make_xlsx(path: Path, faq_rows: list[tuple[str, str]] | None = None) -> Path:
    book = openpyxl.Workbook()
    prices = book.active
    assert prices is not None
    prices.title = "价格表"
    rows: list[tuple[str, str, str | int]] = [("型号", "容量", "价格"), ("X1", "128GB", 3999), ("X1", "256GB", 4599)]
    for price_row in rows:
        prices.append(price_row)
    faq = book.create_sheet("常见问题")
    faq.append(("问题", "答案"))
    for row in faq_rows or [
        ("怎么退货？\n如何申请退货？", "在订单页点击申请退货。"),
        ("发票怎么开？", "下单时选择电子发票。"),
    ]:
        faq.append(row)
    book.save(str(path))
    return path


# ---------------------------------------------------------------- formats


def test_docx_headings_and_tables_are_lines(tmp_path: Path) -> None:
    doc = load_document(make_docx(tmp_path / "manual.docx"), IngestSettings())
    text = "".join(doc.blocks)
    assert doc.title == "售后服务手册"
    lines = text.splitlines()
    assert "保修期限" in lines  # the heading is a line of its own, so the chunker records it
    assert "型号: X1 | 保修: 一年" in lines and "型号: X2 | 保修: 两年" in lines
    # Document order: the table sits between the paragraphs around it.
    assert (
        lines.index("整机保修一年，电池保修六个月。")
        < lines.index("型号 | 保修")
        < lines.index("以上政策自 2024 年起执行。")
    )


def test_docx_heading_styles_and_slide_titles_are_headings_even_as_questions(tmp_path: Path) -> None:
    document = docx.Document()
    document.add_heading("Blender guide", level=0)
    document.add_heading("Can the jug go in the dishwasher?", level=2)
    document.add_paragraph("Yes, the top rack.")
    document.add_paragraph("Does it crush ice?")  # a question in body text is not a heading
    document.add_paragraph("Only with the pulse button.")
    document.save(str(tmp_path / "blender.docx"))
    loaded = load_document(tmp_path / "blender.docx", IngestSettings())
    assert set(loaded.headings) == {"Blender guide", "Can the jug go in the dishwasher?"}
    deck = pptx.Presentation()
    slide = deck.slides.add_slide(deck.slide_layouts[1])
    slide.shapes.title.text = "What is in the box?"
    slide.placeholders[1].text_frame.text = "Is a charger included?"
    deck.save(str(tmp_path / "box.pptx"))
    assert set(load_document(tmp_path / "box.pptx", IngestSettings()).headings) == {"What is in the box?"}


def test_pptx_slide_titles_bodies_tables_and_notes(tmp_path: Path) -> None:
    doc = load_document(make_pptx(tmp_path / "deck.pptx"), IngestSettings())
    lines = "".join(doc.blocks).splitlines()
    assert doc.title == "Shipping options"
    assert lines[:2] == ["Shipping options", "Standard delivery takes three days."]
    assert "Fees" in lines and "Method: Express | Fee: $12" in lines
    assert "Express ships the same day." in lines


def test_xlsx_table_sheets_are_text_and_faq_sheets_are_pairs(tmp_path: Path) -> None:
    doc = load_document(make_xlsx(tmp_path / "book.xlsx"), IngestSettings())
    lines = "".join(doc.blocks).splitlines()
    assert lines[0] == "价格表"
    assert "型号: X1 | 容量: 256GB | 价格: 4599" in lines
    assert "常见问题" not in lines and "在订单页点击申请退货。" not in "".join(lines)
    assert [(p.questions, p.answer) for p in doc.faq] == [
        (("怎么退货？", "如何申请退货？"), "在订单页点击申请退货。"),
        (("发票怎么开？",), "下单时选择电子发票。"),
    ]


@pytest.mark.parametrize("encoding", ["utf-8-sig", "gb18030"])
def test_csv_faq_with_configured_headers_and_continued_answers(tmp_path: Path, encoding: str) -> None:
    path = tmp_path / "faq.csv"
    path.write_text(
        "Question,Similar question,Answer\n"
        "How do I return an item?,Can I send it back?,Open the order and choose Return.\n"
        ",What is the return address?,\n"
        'Do you ship abroad?,,"Yes, to 30 countries."\n',
        encoding=encoding,
    )
    settings = IngestSettings(faq_question_headers=["question", "similar question"])
    doc = load_document(path, settings)
    assert [(p.questions, p.answer) for p in doc.faq] == [
        (
            ("How do I return an item?", "Can I send it back?", "What is the return address?"),
            "Open the order and choose Return.",
        ),
        (("Do you ship abroad?",), "Yes, to 30 countries."),
    ]


def test_csv_without_faq_columns_says_which_headers_it_needs(tmp_path: Path) -> None:
    path = tmp_path / "prices.csv"
    path.write_text("model,price\nX1,3999\n", encoding="utf-8")
    with pytest.raises(LoadError, match=r"prices\.csv: a CSV file is read as an FAQ .*'model', 'price'.*问题"):
        load_document(path, IngestSettings())


@pytest.mark.parametrize("suffix", [".docx", ".pptx", ".xlsx"])
def test_broken_office_files_are_refused_by_name(tmp_path: Path, suffix: str) -> None:
    truncated = tmp_path / f"truncated{suffix}"
    make = {".docx": make_docx, ".pptx": make_pptx, ".xlsx": make_xlsx}[suffix]
    data = make(tmp_path / f"whole{suffix}").read_bytes()
    truncated.write_bytes(data[: len(data) // 2])
    with pytest.raises(LoadError, match=rf"truncated\{suffix}: not a valid .*\({suffix}\) file"):
        load_document(truncated, IngestSettings())
    # A zip that is not an Office document (no [Content_Types].xml and main part).
    other = tmp_path / f"other{suffix}"
    with zipfile.ZipFile(other, "w") as z:
        z.writestr("readme.txt", "hello")
    with pytest.raises(LoadError, match=rf"other\{suffix}: not a valid"):
        load_document(other, IngestSettings())


def test_an_office_file_expanding_beyond_the_limit_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "bomb.docx"
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_DEFLATED) as z:
        z.writestr("word/document.xml", b"\0" * (3 * 1024 * 1024))
    with pytest.raises(LoadError, match=r"bomb\.docx: the Word \(\.docx\) file expands to 3 MB.*office_max_content_mb"):
        load_document(path, IngestSettings(office_max_content_mb=1))


# ---------------------------------------------------------------- FAQ entries in the index


@pytest.fixture
async def indexes(tmp_path: Path, embedder: Embedder) -> AsyncIterator[tuple[VectorIndex, VectorIndex]]:
    index = open_index(QdrantSettings(path=str(tmp_path / "qdrant"), collection="kb"), embedder.dim, embedder.name)
    yield index, index.sibling(faq_collection("kb"))
    await index.close()


async def _ingest(
    path: Path, indexes: tuple[VectorIndex, VectorIndex], embedder: Embedder, counter: TokenCounter
) -> Any:
    settings = Settings(chunking={"chunk_tokens": 120, "overlap_tokens": 20})  # type: ignore[arg-type]
    index, faq = indexes
    return await ingest_file(
        path, index=index, embedder=embedder, counter=counter, settings=settings, source=path.name, faq_index=faq
    )


async def test_faq_pairs_become_entries_per_question_and_chunks_per_answer(
    tmp_path: Path, indexes: tuple[VectorIndex, VectorIndex], embedder: Embedder, counter: TokenCounter
) -> None:
    path = make_xlsx(tmp_path / "book.xlsx")
    report = await _ingest(path, indexes, embedder, counter)
    assert report.faq_entries == 3
    index, faq = indexes
    doc_id = doc_id_for("book.xlsx")
    entries = await faq.payloads(sorted(await faq.doc_point_ids(doc_id)))
    assert {(p["question"], p["answer"]) for p in entries.values()} == {
        ("如何申请退货？", "在订单页点击申请退货。"),
        ("怎么退货？", "在订单页点击申请退货。"),
        ("发票怎么开？", "下单时选择电子发票。"),
    }
    chunks = (await index.payloads(sorted(await index.doc_point_ids(doc_id)))).values()
    faq_chunks = {p["text"] for p in chunks if p.get("kind") == "faq"}
    assert faq_chunks == {"发票怎么开？\n下单时选择电子发票。", "怎么退货？\n如何申请退货？\n在订单页点击申请退货。"}
    assert any("价格: 3999" in p["text"] for p in chunks if "kind" not in p)
    # Found by its question: a paraphrase is nearest to the entry of that question.
    hit = (await faq.search(embedder.embed_query("退货怎么申请"), None, 1, 60))[0]
    assert hit.payload["answer"] == "在订单页点击申请退货。"

    again = await _ingest(path, indexes, embedder, counter)
    assert again.unchanged and again.upserted == 0

    make_xlsx(path, [("发票怎么开？", "下单时选择电子发票或纸质发票。")])
    changed = await _ingest(path, indexes, embedder, counter)
    assert changed.faq_entries == 1 and not changed.unchanged
    assert [p["answer"] for p in (await faq.payloads(sorted(await faq.doc_point_ids(doc_id)))).values()] == [
        "下单时选择电子发票或纸质发票。"
    ]

    assert await delete_document(index, doc_id, None, faq) > 0
    assert not await faq.doc_point_ids(doc_id) and not await index.doc_point_ids(doc_id)


def test_rag_ingest_takes_office_and_faq_files_and_skips_a_broken_one(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiktoken_dir: str
) -> None:
    monkeypatch.chdir(tmp_path)
    kb = tmp_path / "kb"
    kb.mkdir()
    make_docx(kb / "manual.docx")
    make_pptx(kb / "deck.pptx")
    (kb / "faq.csv").write_text("问题,答案\n怎么开发票？,下单时选择电子发票。\n", encoding="utf-8")
    (kb / "broken.xlsx").write_bytes(b"PK\x03\x04 not really a workbook")
    (tmp_path / "rag.yaml").write_text(
        json.dumps({"qdrant": {"path": str(tmp_path / "qdrant"), "url": None}, "tokens": {"cache_dir": tiktoken_dir}})
    )
    result = CliRunner().invoke(app, ["--config", "rag.yaml", "kb"])
    assert result.exit_code == 1, result.output
    assert "kb/broken.xlsx: not a valid Excel (.xlsx) file" in result.output
    assert "kb/faq.csv: 1 chunks, 1 FAQ entries" in result.output
    assert "3 updated, 0 unchanged, 1 failed" in result.output
    again = CliRunner().invoke(app, ["--config", "rag.yaml", "kb/faq.csv"])
    assert "1 unchanged" in again.output, again.output
