"""Loaders: every format, titles, encodings, streaming, and each way a file can be refused."""

from __future__ import annotations

import builtins
import os
import pathlib
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from fpdf import FPDF

from rag_core.documents import loaders
from rag_core.documents.loaders import LoadError, load_document, supported_extensions, unwrap_lines
from rag_core.settings import IngestSettings

KB = Path(__file__).resolve().parent.parent / "examples" / "kb"
MB = 1024 * 1024


def settings(**overrides: Any) -> IngestSettings:
    return IngestSettings(**overrides)


def text_of(path: Path, **overrides: Any) -> tuple[str, str]:
    doc = load_document(path, settings(**overrides))
    return doc.title, "".join(doc.blocks)


def make_pdf(path: Path, lines: list[str], title: str | None = None) -> Path:
    pdf = FPDF()
    if title:
        pdf.set_title(title)
    pdf.add_page()
    pdf.set_font("Helvetica", size=12)
    for line in lines:
        pdf.cell(0, 10, line, new_x="LMARGIN", new_y="NEXT")
    pdf.output(str(path))
    return path


# ---------------------------------------------------------------- formats and titles


def test_txt_title_is_first_non_empty_line(tmp_path: Path) -> None:
    path = tmp_path / "policy.txt"
    path.write_text("\n\n   退货政策  \n七天无理由退货。\n", encoding="utf-8")
    title, text = text_of(path)
    assert title == "退货政策"
    assert "七天无理由退货。" in text


def test_markdown_title_is_first_h1_and_syntax_is_trimmed(tmp_path: Path) -> None:
    path = tmp_path / "phone.md"
    path.write_text(
        "Intro line\n\n```bash\n# not a title\n```\n\n## Second level\n\n# iPhone 16 指南\n\n"
        "详情见[官网](https://example.com/very/long/url)。![图](img.png)\n",
        encoding="utf-8",
    )
    title, text = text_of(path)
    assert title == "iPhone 16 指南"
    assert "Second level" in text and "## " not in text
    assert "详情见官网。" in text and "https://" not in text


def test_markdown_headings_are_noted_whatever_their_punctuation(tmp_path: Path) -> None:
    path = tmp_path / "kettle-faq.md"
    path.write_text(
        "# Kettle FAQ\n\n## Can I descale it with  vinegar?\nYes, once a month.\n\n"
        "### 水壶能干烧吗？\n不能。\n\nIs the lid dishwasher safe?\nNo.\n\n"
        "```sh\n# a shell comment?\n```\n## Step 2: [Fill](https://example.com) it\n",
        encoding="utf-8",
    )
    doc = load_document(path, IngestSettings())
    text = "".join(doc.blocks)  # the set fills as the blocks are read
    assert "Can I descale it with  vinegar?" in text
    assert set(doc.headings) == {"Kettle FAQ", "Can I descale it with vinegar?", "水壶能干烧吗？", "Step 2: Fill it"}
    # A question on a line of its own is not a heading: only the markup says so.
    assert "Is the lid dishwasher safe?" not in doc.headings


def test_html_headings_are_noted_whatever_their_punctuation(tmp_path: Path) -> None:
    path = tmp_path / "faq.html"
    path.write_text(
        "<html><body><h1>Lamp help</h1><h2>Does the  <b>bulb</b> get hot?</h2><p>Not very.</p>"
        "<h3>灯泡多久换一次？</h3><p>两年。</p><p><strong>Is it dimmable?</strong></p>"
        "<h4>Two<br>lines</h4><table><tr><th><h5>In a cell?</h5></th></tr></table></body></html>",
        encoding="utf-8",
    )
    doc = load_document(path, IngestSettings())
    lines = "".join(doc.blocks).splitlines()
    assert set(doc.headings) == {"Lamp help", "Does the bulb get hot?", "灯泡多久换一次？"}
    assert all(h in lines for h in doc.headings)  # each is a whole line of the text, as a chunk holds it


def test_plain_text_has_no_marked_up_headings(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("# Not markup here?\nSome text.\n", encoding="utf-8")
    assert load_document(path, IngestSettings()).headings == frozenset()


def test_markdown_without_h1_falls_back_to_the_file_stem(tmp_path: Path) -> None:
    path = tmp_path / "store-locations.markdown"
    path.write_text("## 门店\n北京店。\n", encoding="utf-8")
    assert text_of(path)[0] == "store-locations"


def test_html_title_text_and_stripping(tmp_path: Path) -> None:
    path = tmp_path / "page.html"
    path.write_text(
        """<!doctype html><html><head><title> 退货政策 - 星辰数码 </title><style>p {color: red}</style>
        <script>var secret = "do not index";</script></head><body>
        <nav><a href="/">首页</a> | <a href="/help">帮助</a></nav>
        <h1>退货</h1><p>七天无理由
        退货，请保留<b>发票</b>。</p><!-- a comment -->
        <ul><li>第一项</li><li>第二项</li></ul>
        <table><tr><th>机型</th><th>价格</th></tr><tr><td>iPhone 16</td><td>5999 元</td></tr></table>
        </body></html>""",
        encoding="utf-8",
    )
    title, text = text_of(path)
    assert title == "退货政策 - 星辰数码"
    assert text.splitlines() == [
        "退货",
        "七天无理由退货，请保留发票。",
        "第一项",
        "第二项",
        "机型 | 价格",
        "机型: iPhone 16 | 价格: 5999 元",
    ]
    for hidden in ("secret", "color", "首页", "comment"):
        assert hidden not in text


def test_table_rows_name_their_columns_when_the_table_has_a_header(tmp_path: Path) -> None:
    # A row read alone (a chunk starting mid-table) must still say what each value is; a table without a
    # header row (label/value pairs) keeps its rows as they are.
    md = tmp_path / "kettles.md"
    md.write_text(
        "# Kettles\n\n| Model | Price |\n|:---|---:|\n| Vela 2 | 129 元 |\n| Vela 2 [Pro](/pro) | 199 元 |\n\n"
        "After the table.\n\n---\n\n```\n| a | b |\n|---|---|\n```\n",
        encoding="utf-8",
    )
    lines = [line for line in text_of(md)[1].splitlines() if line]
    assert lines == [
        "Kettles",
        "Model | Price",
        "Model: Vela 2 | Price: 129 元",
        "Model: Vela 2 Pro | Price: 199 元",
        "After the table.",
        "---",
        "```",
        "| a | b |",
        "|---|---|",
        "```",
    ]
    page = tmp_path / "tiers.html"
    page.write_text(
        "<h1>Tiers</h1><table><thead><tr><td>Tier</td><td>Points</td></tr></thead>"
        "<tr><td>Gold</td><td>1.5x</td></tr></table>"
        "<table><tr><td>Colour</td><td>Black</td></tr><tr><td>Weight</td><td>1.2 kg</td></tr></table>",
        encoding="utf-8",
    )
    assert text_of(page)[1].splitlines() == [
        "Tiers",
        "Tier | Points",
        "Tier: Gold | Points: 1.5x",
        "Colour | Black",
        "Weight | 1.2 kg",
    ]


def test_html_title_falls_back_to_h1_then_stem(tmp_path: Path) -> None:
    with_h1 = tmp_path / "a.htm"
    with_h1.write_text("<html><body><h1>Student <i>Discount</i></h1><p>10% off.</p></body></html>")
    assert text_of(with_h1)[0] == "Student Discount"
    bare = tmp_path / "bare-page.html"
    bare.write_text("<p>Only a paragraph.</p>")
    assert text_of(bare) == ("bare-page", "Only a paragraph.")


def test_html_in_gb18030_with_declared_charset(tmp_path: Path) -> None:
    path = tmp_path / "legacy.html"
    path.write_bytes('<html><head><meta charset="gbk"><title>保修</title></head><body><p>一年保修。</p>'.encode("gbk"))
    assert text_of(path) == ("保修", "一年保修。")


def test_pdf_with_metadata_title(tmp_path: Path) -> None:
    path = make_pdf(tmp_path / "guide.pdf", ["Warranty guide", "The warranty lasts one year."], title="Warranty")
    title, text = text_of(path)
    assert title == "Warranty"
    assert "The warranty lasts one year." in text


def test_pdf_title_falls_back_to_first_line(tmp_path: Path) -> None:
    path = make_pdf(tmp_path / "guide.pdf", ["", "Shipping guide", "Orders over 99 ship free."])
    title, text = text_of(path)
    assert title == "Shipping guide"
    assert "Orders over 99 ship free." in text


def test_pdf_pages_are_separate_lines(tmp_path: Path) -> None:
    pdf = FPDF()
    pdf.set_font("Helvetica", size=12)
    for word in ("Alpha", "Bravo"):
        pdf.add_page()
        pdf.cell(0, 10, f"Page {word} ends here")
    path = tmp_path / "pages.pdf"
    pdf.output(str(path))
    text = text_of(path)[1]
    assert "Page Alpha ends here\nPage Bravo ends here" in text


def test_sample_kb_pdf_yields_chinese_text() -> None:
    pdfs = sorted(KB.glob("*.pdf"))
    if not pdfs:
        pytest.skip("examples/kb has no PDF yet")
    title, text = text_of(pdfs[0])
    assert any("\u4e00" <= ch <= "\u9fff" for ch in title)
    assert sum("\u4e00" <= ch <= "\u9fff" for ch in text) > 200


def test_unwrap_glues_layout_wrapped_lines_only() -> None:
    text = (
        "一、标题\n"
        "这是一段很长的中文文字，排版时在页面的右边缘被自动折行了，所以下一行其实是同\n"
        "一句话的继续部分。\n"
        "1. 列表项目也很长很长很长很长很长很长很长很长很长很长很长很长很长很长很长\n"
        "2. 第二项\n"
    )
    assert unwrap_lines(text).splitlines() == [
        "一、标题",
        "这是一段很长的中文文字，排版时在页面的右边缘被自动折行了，所以下一行其实是同一句话的继续部分。",
        "1. 列表项目也很长很长很长很长很长很长很长很长很长很长很长很长很长很长很长",
        "2. 第二项",
    ]


# ---------------------------------------------------------------- encodings and streaming


def test_utf8_bom_is_dropped(tmp_path: Path) -> None:
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbf" + "发票说明\n内容。".encode())
    assert text_of(path) == ("发票说明", "发票说明\n内容。")


def test_gb18030_file_is_decoded(tmp_path: Path) -> None:
    path = tmp_path / "legacy.txt"
    path.write_bytes("旧系统导出的说明\n保修一年，欢迎咨询。𠀀\n".encode("gb18030"))
    title, text = text_of(path)
    assert title == "旧系统导出的说明"
    assert "保修一年，欢迎咨询。𠀀" in text


def test_multibyte_characters_straddling_read_blocks(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(loaders, "BLOCK_BYTES", 5)  # every 3-byte character ends up split somewhere
    content = "标题\n" + "中文字符跨越读取块的边界。" * 20
    for encoding in ("utf-8", "gb18030"):
        path = tmp_path / f"split-{encoding}.txt"
        path.write_bytes(content.encode(encoding))
        doc = load_document(path, settings())
        blocks = list(doc.blocks)
        assert len(blocks) > 10
        assert "".join(blocks) == content


def test_large_text_is_read_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "big.txt"
    line = ("星辰数码保修政策说明第一条。" * 8 + "\n").encode()
    with path.open("wb") as fh:
        fh.write(line * (24 * MB // len(line)))
    tracemalloc.start()
    try:
        doc = load_document(path, settings(max_file_mb=64))
        total = sum(len(block) for block in doc.blocks)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert total > 7 * MB  # characters: 24 MB of 3-byte UTF-8
    assert peak < 10 * MB


# ---------------------------------------------------------------- refusals


def test_missing_path(tmp_path: Path) -> None:
    with pytest.raises(LoadError, match=r"nope\.md: no such file"):
        load_document(tmp_path / "nope.md", settings())


def test_empty_file(tmp_path: Path) -> None:
    path = tmp_path / "empty.txt"
    path.touch()
    with pytest.raises(LoadError, match=r"empty\.txt: empty file"):
        load_document(path, settings())


@pytest.mark.parametrize("name", ["blank.txt", "blank.md"])
def test_whitespace_only_file(tmp_path: Path, name: str) -> None:
    path = tmp_path / name
    path.write_text(" \n\t\n\u3000 \r\n", encoding="utf-8")
    with pytest.raises(LoadError, match=rf"{name.replace('.', '[.]')}: .*only whitespace"):
        load_document(path, settings())


def test_html_without_text(tmp_path: Path) -> None:
    path = tmp_path / "empty.html"
    path.write_text("<html><head><script>x()</script></head><body><nav>Menu</nav></body></html>")
    with pytest.raises(LoadError, match=r"empty\.html: .*no text"):
        load_document(path, settings())


def test_binary_garbage_named_pdf(tmp_path: Path) -> None:
    path = tmp_path / "garbage.pdf"
    path.write_bytes(os.urandom(4096))
    with pytest.raises(LoadError, match=r"garbage\.pdf: not a valid PDF"):
        load_document(path, settings())


def test_pdf_without_extractable_text(tmp_path: Path) -> None:
    pdf = FPDF()
    pdf.add_page()
    pdf.rect(20, 20, 100, 50, style="F")  # a drawing, like a scanned page: nothing to extract
    path = tmp_path / "scan.pdf"
    pdf.output(str(path))
    with pytest.raises(LoadError, match=r"scan\.pdf: .*no extractable text"):
        load_document(path, settings())


def test_undecodable_text(tmp_path: Path) -> None:
    path = tmp_path / "binary.txt"
    path.write_bytes(b"valid start\n" + b"\xff\xfe\xff\x80" * 100)
    with pytest.raises(LoadError, match=r"binary\.txt: cannot decode .*UTF-8.*GB18030"):
        load_document(path, settings())


def test_binary_data_named_txt(tmp_path: Path) -> None:
    path = tmp_path / "image.txt"
    path.write_bytes(b"GIF89a\x00\x01\x02" + bytes(range(32)) * 10)
    with pytest.raises(LoadError, match=r"image\.txt: looks like binary data"):
        load_document(path, settings())


def test_utf16_with_bom(tmp_path: Path) -> None:
    path = tmp_path / "notepad.txt"
    path.write_bytes("记事本导出\r\n内容。".encode("utf-16"))
    assert text_of(path) == ("记事本导出", "记事本导出\r\n内容。")


def test_unsupported_extension_lists_the_supported_ones(tmp_path: Path) -> None:
    path = tmp_path / "sheet.odt"
    path.write_bytes(b"PK\x03\x04")
    with pytest.raises(LoadError) as info:
        load_document(path, settings())
    message = str(info.value)
    assert "sheet.odt" in message and "unsupported" in message
    for ext in (".txt", ".md", ".markdown", ".html", ".htm", ".pdf", ".docx", ".pptx", ".xlsx", ".csv"):
        assert ext in message


def test_extensions_follow_the_settings(tmp_path: Path) -> None:
    path = tmp_path / "notes.md"
    path.write_text("# Notes\nText.")
    assert supported_extensions(settings(extensions=[".TXT", "pdf", ".rst"])) == [".txt", ".pdf"]
    with pytest.raises(LoadError, match="unsupported"):
        load_document(path, settings(extensions=[".txt"]))


def test_oversize_file_is_refused_without_reading_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    path = tmp_path / "big.txt"
    path.write_text("x" * 4096)

    def no_reading(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("the file was opened")

    monkeypatch.setattr(builtins, "open", no_reading)
    monkeypatch.setattr(pathlib.Path, "open", no_reading)
    monkeypatch.setattr(pathlib.Path, "read_bytes", no_reading)
    with pytest.raises(LoadError) as info:
        load_document(path, settings(max_file_mb=0.001))
    assert "big.txt" in str(info.value) and "ingest.max_file_mb" in str(info.value)


def test_50_mb_file_is_refused_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "huge.pdf"
    with path.open("wb") as fh:
        fh.truncate(50 * MB)  # sparse: instant, and no disk space used
    tracemalloc.start()
    try:
        with pytest.raises(LoadError, match=r"huge\.pdf: file is 50 MB, larger than ingest\.max_file_mb = 20 MB"):
            load_document(path, settings(max_file_mb=20))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 10 * MB


def test_messages_use_the_given_name(tmp_path: Path) -> None:
    path = tmp_path / "tmp123.txt"
    path.write_text("  ")
    with pytest.raises(LoadError, match=r"^kb/original\.txt: "):
        load_document(path, settings(), name="kb/original.txt")
    upload = tmp_path / "tmp456.md"
    upload.write_text("no heading here")
    assert load_document(upload, settings(), name="kb/original.md").title == "original"
