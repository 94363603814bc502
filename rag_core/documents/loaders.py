"""Turn a knowledge-base file into a title and a stream of text blocks.

Plain text and Markdown are decoded incrementally in blocks of about `BLOCK_BYTES`, so a large file never
sits in memory whole. HTML and PDF parsers need the whole file anyway; `ingest.max_file_mb` bounds them. A
PDF is parsed in a child process (rag_core/documents/pdf_worker.py) under limits on time, pages, expanded content and
extracted text, because a small PDF can expand enormously.
Every failure is a `LoadError` whose message names the file and the reason, raised before any text is
produced whenever the problem can be seen up front.
"""

from __future__ import annotations

import codecs
import json
import os
import re
import subprocess
import sys
import threading
import time
import unicodedata
from collections.abc import Callable, Iterator
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bs4 import BeautifulSoup
from bs4.element import NavigableString, Tag

from rag_core.documents.office import (
    CELL_SEPARATOR,
    FaqPair,
    OfficeDoc,
    OfficeError,
    load_docx,
    load_faq_csv,
    load_pptx,
    load_xlsx,
    table_row,
)
from rag_core.documents.pdf_worker import PdfLimits
from rag_core.settings import IngestSettings
from rag_core.text import UNSPACED_CHARS

BLOCK_BYTES = 1 << 20
MAX_TITLE_CHARS = 200
# Only the start of a line matters for titles; capping the carried line bounds memory on
# files with megabyte-long lines.
_LINE_SCAN_CHARS = 4 * MAX_TITLE_CHARS
_BYTES_PER_MB = 1024 * 1024
# UTF-8 first (the -sig variant drops a BOM); GB18030 is the superset of GBK/GB2312 that legacy
# Chinese files are written in.
TEXT_ENCODINGS = ("utf-8-sig", "gb18030")
_UTF16_BOMS = (codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)
# Text never holds NUL or most other C0 controls; binary data often decodes "successfully" anyway
# (UTF-8 accepts NUL bytes, GB18030 and UTF-16 accept many byte pairs).
_BINARY_CHAR = re.compile("[\x00-\x08\x0e-\x1a\x1c-\x1f\x7f]")
# A charset declared by the page itself is trusted before guessing; it sits near the top.
_HTML_SNIFF_BYTES = 4096
_HTML_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:\-]+)""", re.IGNORECASE)

_KIND_BY_EXTENSION = {
    ".txt": "text",
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
    ".pdf": "pdf",
    ".docx": "docx",
    ".pptx": "pptx",
    ".xlsx": "xlsx",
    ".csv": "csv",
}

_MD_HEADING = re.compile(r"^ {0,3}(#{1,6})[ \t]+(.*?)(?:[ \t]+#+)?[ \t]*$")
_MD_FENCE = re.compile(r"^ {0,3}(```|~~~)")
_MD_IMAGE = re.compile(r"!\[([^\]]*)\]\([^)]*\)")
_MD_LINK = re.compile(r"\[([^\]]+)\]\([^)]*\)")
# A pipe table's delimiter row ("|---|:---:|"): at least one pipe, so a thematic break ("---") is not one.
_MD_TABLE_DELIMITER = re.compile(r"^\s*\|?\s*:?-+:?\s*(?:\|\s*:?-+:?\s*)*\|?\s*$")
_MD_CELL_SPLIT = re.compile(r"(?<!\\)\|")

_HTML_DROP = ("script", "style", "nav", "noscript", "template", "svg", "head")
_HTML_BLOCKS = (
    "p", "div", "section", "article", "main", "header", "footer", "aside", "h1", "h2", "h3", "h4", "h5",
    "h6", "li", "ul", "ol", "dl", "dt", "dd", "pre", "blockquote", "figure", "figcaption", "caption",
    "address", "table", "hr", "details", "summary",
)  # fmt: skip
_HTML_HEADINGS = ("h1", "h2", "h3", "h4", "h5", "h6")
_HTML_CELL_SEPARATOR = CELL_SEPARATOR
_SPACES = re.compile(r"\s+")
# A source line break between two CJK characters is not a space in the rendered text either.
_CJK_LINE_BREAK = re.compile(rf"(?<=[{UNSPACED_CHARS}])[ \t\r]*\n\s*(?=[{UNSPACED_CHARS}])")

# PDF text comes with the page's visual line breaks. A line that spans (nearly) the full text width and
# does not end a sentence was wrapped by the layout, and is glued back to the next line.
_SOFT_WRAP_WIDTH_RATIO = 0.85
_LINE_ENDS = tuple("。！？；：.!?;:")
_LIST_ITEM = re.compile(r"\s*(?:\d{1,3}[.、)）]|[一二三四五六七八九十]{1,3}、|[•·▪◦*\-–—])")

_PROJECT_ROOT = Path(__file__).resolve().parent.parent
# How often a PDF worker is checked for cancellation while it runs.
_PDF_POLL_S = 0.05


class LoadError(Exception):
    """A file that cannot be ingested; the message names the file and says why."""


class LoadCancelled(LoadError):
    """The caller gave up on the file (its client left, the server is stopping)."""


@dataclass(frozen=True)
class LoadedDoc:
    title: str
    blocks: Iterator[str]
    # Question/answer pairs of an FAQ file (CSV, or FAQ sheets of a workbook); indexed as FAQ entries.
    faq: tuple[FaqPair, ...] = ()
    # Lines the markup marks as headings (Markdown `#`, HTML h1-h6, Word heading styles, slide titles),
    # whitespace-normalised: they name a section even when worded as a question, which a plain-text line
    # does not. For Markdown the set fills as `blocks` is read, always before the chunk holding the line.
    headings: AbstractSet[str] = frozenset()


def supported_extensions(settings: IngestSettings) -> list[str]:
    """The configured extensions that have a loader, lowercase, in configuration order."""
    configured = [e.lower() if e.startswith(".") else f".{e.lower()}" for e in settings.extensions]
    return [e for e in dict.fromkeys(configured) if e in _KIND_BY_EXTENSION]


def check_file(path: Path, settings: IngestSettings, name: str | None = None) -> int:
    """Validate what can be told without reading the file; return its size in bytes."""
    label = name or str(path)
    try:
        if not path.exists():
            raise LoadError(f"{label}: no such file or directory")
        if not path.is_file():
            raise LoadError(f"{label}: not a regular file")
        supported = supported_extensions(settings)
        if path.suffix.lower() not in supported:
            raise LoadError(
                f"{label}: unsupported file type {path.suffix or '(none)'!r}; supported: {', '.join(supported)}"
            )
        size = path.stat().st_size
    except OSError as exc:
        raise LoadError(f"{label}: cannot access the file ({exc.strerror or exc})") from exc
    limit = settings.max_file_mb * _BYTES_PER_MB
    if size > limit:
        raise LoadError(
            f"{label}: file is {size / _BYTES_PER_MB:.3g} MB, larger than ingest.max_file_mb = "
            f"{settings.max_file_mb:g} MB; raise the setting or split the file"
        )
    if size == 0:
        raise LoadError(f"{label}: empty file")
    return size


def load_document(
    path: Path, settings: IngestSettings, *, name: str | None = None, cancel: threading.Event | None = None
) -> LoadedDoc:
    """Open `path` as a document. `name` (default: the path) is used in messages and for the fallback
    title, so an uploaded temporary file can be reported under its real source name. Setting `cancel`
    abandons a PDF being parsed (LoadCancelled)."""
    label = name or str(path)
    check_file(path, settings, label)
    stem = Path(label).stem or path.stem
    kind = _KIND_BY_EXTENSION[path.suffix.lower()]
    try:
        if kind == "pdf":
            return _load_pdf(path, label, settings, cancel)
        if kind == "html":
            return _load_html(path, label, stem)
        if kind in _OFFICE_LOADERS:
            return _load_office(path, label, stem, kind, settings)
        return _load_text(path, label, stem, markdown=kind == "markdown")
    except OSError as exc:
        raise LoadError(f"{label}: cannot read the file ({exc.strerror or exc})") from exc


# ---------------------------------------------------------------- plain text and Markdown


def _load_text(path: Path, label: str, stem: str, *, markdown: bool) -> LoadedDoc:
    encoding, title = _probe_text(path, label, markdown=markdown)
    blocks = _checked_blocks(path, encoding, label)
    if not markdown:
        return LoadedDoc(title=title or stem, blocks=blocks)
    cleaner = _MarkdownLines()
    return LoadedDoc(title=title or stem, blocks=_map_lines(blocks, cleaner), headings=cleaner.headings)


def _candidate_encodings(path: Path) -> tuple[str, ...]:
    with path.open("rb") as fh:
        head = fh.read(len(codecs.BOM_UTF16_LE))
    return ("utf-16",) if head in _UTF16_BOMS else TEXT_ENCODINGS


def _probe_text(path: Path, label: str, *, markdown: bool) -> tuple[str, str | None]:
    """Find an encoding that decodes the whole file, and the title, in one streaming pass per encoding.

    Reading the file twice (probe, then the real pass) keeps memory bounded and lets every decoding
    error surface before the pipeline touches the index.
    """
    first_error: UnicodeDecodeError | None = None
    for encoding in _candidate_encodings(path):
        finder = _TitleFinder(markdown=markdown)
        has_text = False
        try:
            for block in _decode_blocks(path, encoding):
                if binary := _BINARY_CHAR.search(block):
                    raise LoadError(
                        f"{label}: looks like binary data, not text (control character U+{ord(binary.group()):04X})"
                    )
                has_text = has_text or not block.isspace()
                finder.feed(block)
        except UnicodeDecodeError as exc:
            first_error = first_error or exc
            continue
        if not has_text:
            raise LoadError(f"{label}: the file contains only whitespace")
        return encoding, finder.finish()
    where = f" ({first_error.reason} at byte {first_error.start})" if first_error else ""
    tried = ", ".join(_encoding_label(e) for e in _candidate_encodings(path))
    raise LoadError(f"{label}: cannot decode the text as {tried}{where}")


def _encoding_label(encoding: str) -> str:
    return {"utf-8-sig": "UTF-8", "gb18030": "GB18030", "utf-16": "UTF-16"}.get(encoding, encoding)


def _decode_blocks(path: Path, encoding: str) -> Iterator[str]:
    # The incremental decoder keeps a multi-byte character that straddles two reads intact.
    decoder = codecs.getincrementaldecoder(encoding)(errors="strict")
    with path.open("rb") as fh:
        while data := fh.read(BLOCK_BYTES):
            text = decoder.decode(data)
            if text:
                yield text
        tail = decoder.decode(b"", final=True)
        if tail:
            yield tail


def _checked_blocks(path: Path, encoding: str, label: str) -> Iterator[str]:
    # The probe already decoded the file; failing here means it changed in between.
    try:
        yield from _decode_blocks(path, encoding)
    except UnicodeDecodeError as exc:
        raise LoadError(f"{label}: cannot decode the text as {_encoding_label(encoding)} ({exc.reason})") from exc
    except OSError as exc:
        raise LoadError(f"{label}: cannot read the file ({exc.strerror or exc})") from exc


class _TitleFinder:
    """Feeds on text blocks; remembers the first non-empty line (text) or `# ` heading (Markdown)."""

    def __init__(self, *, markdown: bool) -> None:
        self._markdown = markdown
        self._carry = ""
        self._in_fence = False
        self.title: str | None = None

    def feed(self, block: str) -> None:
        if self.title is not None:
            return
        lines = (self._carry + block).split("\n")
        self._carry = lines.pop()[:_LINE_SCAN_CHARS]
        for line in lines:
            if self._offer(line):
                return

    def finish(self) -> str | None:
        if self.title is None and self._carry:
            self._offer(self._carry)
        return self.title

    def _offer(self, line: str) -> bool:
        candidate = self._markdown_title(line) if self._markdown else line
        if candidate is None:
            return False
        title = _clean_title(candidate)
        if title:
            self.title = title
        return bool(title)

    def _markdown_title(self, line: str) -> str | None:
        if _MD_FENCE.match(line):
            self._in_fence = not self._in_fence
            return None
        heading = None if self._in_fence else _MD_HEADING.match(line)
        if heading is None or len(heading.group(1)) != 1:
            return None
        return _strip_markdown_inline(heading.group(2))


def _clean_title(text: str) -> str:
    return " ".join(text.split())[:MAX_TITLE_CHARS]


def _strip_markdown_inline(line: str) -> str:
    return _MD_LINK.sub(r"\1", _MD_IMAGE.sub(r"\1", line))


def _heading_name(text: str) -> str:
    """A marked-up heading as its line reads in a chunk, or "" for one too long to be a section's name
    (a whole paragraph set in a heading tag)."""
    name = " ".join(text.split())
    return name if len(name) <= MAX_TITLE_CHARS else ""


class _MarkdownLines:
    """Markdown lines without heading marks and link targets (which only cost tokens), the headings noted
    in `headings`, and pipe tables read as tables: the header row stays a line of column names, the
    delimiter row goes, and every body row becomes a line of `header: value` cells (as Word tables are
    read), so a row read alone says what each value is."""

    def __init__(self) -> None:
        self._in_fence = False
        self._previous: list[str] | None = None  # cells of the line before, when it had a pipe
        self._header: list[str] | None = None
        self.headings: set[str] = set()

    def __call__(self, line: str) -> str:
        if _MD_FENCE.match(line):
            self._in_fence = not self._in_fence
            self._previous = self._header = None
            return line
        if self._in_fence:
            return line
        cells = _markdown_cells(line)
        if cells is None:
            self._previous = self._header = None
            heading = _MD_HEADING.match(line)
            if heading is None:
                return _strip_markdown_inline(line)
            text = _strip_markdown_inline(heading.group(2))
            if name := _heading_name(text):
                self.headings.add(name)
            return text
        if self._header is not None:
            return table_row(self._header, cells)
        if self._previous is not None and _MD_TABLE_DELIMITER.match(line):
            self._header, self._previous = self._previous, None
            return ""
        self._previous = cells
        return CELL_SEPARATOR.join(c for c in cells if c)


def _markdown_cells(line: str) -> list[str] | None:
    """The cells of a line that may be a pipe-table row, or None for a line without a pipe."""
    text = line.strip()
    if "|" not in text:
        return None
    if text.startswith("|"):
        text = text[1:]
    if text.endswith("|") and not text.endswith("\\|"):
        text = text[:-1]
    return [" ".join(_strip_markdown_inline(c).replace("\\|", "|").split()) for c in _MD_CELL_SPLIT.split(text)]


def _map_lines(blocks: Iterator[str], clean: Callable[[str], str]) -> Iterator[str]:
    """Apply `clean` to every complete line of a block stream, carrying partial lines across blocks."""
    carry = ""
    for block in blocks:
        lines = (carry + block).split("\n")
        carry = lines.pop()
        out = "".join(clean(line) + "\n" for line in lines)
        if len(carry) > BLOCK_BYTES:
            # A line longer than a block has no Markdown structure worth cleaning; don't hoard it.
            out, carry = out + carry, ""
        if out:
            yield out
    if carry:
        yield clean(carry)


# ---------------------------------------------------------------- HTML


def _load_html(path: Path, label: str, stem: str) -> LoadedDoc:
    soup = BeautifulSoup(_decode_html(path.read_bytes(), label), "html.parser")
    title = _html_title(soup)
    headings: set[str] = set()
    text = _html_text(soup, headings)
    if not text:
        raise LoadError(f"{label}: the page has no text outside scripts, styles and navigation")
    return LoadedDoc(title=title or stem, blocks=iter([text]), headings=frozenset(headings))


def _decode_html(data: bytes, label: str) -> str:
    if data.startswith(codecs.BOM_UTF8):
        data = data[len(codecs.BOM_UTF8) :]
    declared = _HTML_CHARSET.search(data[:_HTML_SNIFF_BYTES])
    candidates = ["utf-8"]
    if declared:
        candidates.append(declared.group(1).decode("ascii").lower())
    candidates.append("gb18030")
    for encoding in dict.fromkeys(candidates):
        try:
            return data.decode(encoding)
        except (UnicodeDecodeError, LookupError):
            continue
    raise LoadError(f"{label}: cannot decode the page as {', '.join(dict.fromkeys(candidates))}")


def _html_title(soup: BeautifulSoup) -> str | None:
    for tag in (soup.title, soup.find("h1")):
        if isinstance(tag, Tag):
            title = _clean_title(tag.get_text(" "))
            if title:
                return title
    return None


def _html_text(soup: BeautifulSoup, headings: set[str]) -> str:
    """The page's text, a line per block; adds the h1-h6 lines to `headings`."""
    for tag in soup.find_all(list(_HTML_DROP)):
        tag.decompose()
    _collapse_source_whitespace(soup)
    for tag in soup.find_all(_HTML_HEADINGS):
        # One with a <br> inside is two lines in the text, and no single line names the section.
        if (
            tag.find("br") is None
            and tag.find_parent(["table", "tr"]) is None
            and (name := _heading_name(tag.get_text()))
        ):
            headings.add(name)
    # Inner tables first, so an outer table's cells hold their rows' text.
    for table in reversed(soup.find_all("table")):
        table.replace_with("\n" + "\n".join(_html_table_lines(table)) + "\n")
    for row in soup.find_all("tr"):  # rows outside any table
        cells = (c.get_text(" ", strip=True) for c in row.find_all(["td", "th"]))
        row.replace_with("\n" + _HTML_CELL_SEPARATOR.join(c for c in cells if c) + "\n")
    for br in soup.find_all("br"):
        br.replace_with("\n")
    for tag in soup.find_all(list(_HTML_BLOCKS)):
        tag.insert_before("\n")
        tag.append("\n")
    lines = (" ".join(line.split()) for line in soup.get_text().split("\n"))
    return "\n".join(line for line in lines if line)


def _html_table_lines(table: Tag) -> list[str]:
    """A table's rows, one line each. When the first row is a header (all `<th>`, or in `<thead>`), every
    later row's cells are named by their column's header, as Word and Markdown tables are read; a table
    without one (label/value pairs) keeps its rows as they are."""
    lines: list[str] = []
    header: list[str] | None = None
    for i, row in enumerate(table.find_all("tr")):
        found = row.find_all(["td", "th"])
        cells = [" ".join(c.get_text(" ", strip=True).split()) for c in found]
        if not any(cells):
            continue
        if i == 0 and found and (all(c.name == "th" for c in found) or row.find_parent("thead") is not None):
            header = cells
        elif header is not None:
            lines.append(table_row(header, cells))
            continue
        lines.append(_HTML_CELL_SEPARATOR.join(c for c in cells if c))
    return lines


def _collapse_source_whitespace(soup: BeautifulSoup) -> None:
    # Line breaks in HTML source are layout, not structure; only <pre> keeps them.
    for node in soup.find_all(string=True):
        if type(node) is NavigableString and node.find_parent("pre") is None:
            node.replace_with(_SPACES.sub(" ", _CJK_LINE_BREAK.sub("", str(node))))


# ---------------------------------------------------------------- Office files and FAQ tables

_OFFICE_LOADERS: dict[str, Callable[[Path, IngestSettings], OfficeDoc]] = {
    "docx": load_docx,
    "pptx": load_pptx,
    "xlsx": load_xlsx,
    "csv": lambda path, settings: load_faq_csv(_decode_whole(path, path.name), settings),
}


def _load_office(path: Path, label: str, stem: str, kind: str, settings: IngestSettings) -> LoadedDoc:
    try:
        doc = _OFFICE_LOADERS[kind](path, settings)
    except OfficeError as exc:
        raise LoadError(f"{label}: {exc}") from exc
    if not doc.lines and not doc.faq:
        raise LoadError(f"{label}: the file has no text")
    title = _clean_title(doc.title or "") or (_clean_title(doc.lines[0]) if kind != "xlsx" and doc.lines else "")
    return LoadedDoc(
        title=title or stem,
        blocks=iter(["\n".join(doc.lines) + "\n"] if doc.lines else []),
        faq=tuple(doc.faq),
        headings=frozenset(name for name in map(_heading_name, doc.headings) if name),
    )


def _decode_whole(path: Path, label: str) -> str:
    data = path.read_bytes()
    encodings = ("utf-16",) if data[:2] in _UTF16_BOMS else TEXT_ENCODINGS
    for encoding in encodings:
        try:
            text = data.decode(encoding)
        except UnicodeDecodeError:
            continue
        if binary := _BINARY_CHAR.search(text):
            raise OfficeError(f"looks like binary data, not text (control character U+{ord(binary.group()):04X})")
        return text
    raise OfficeError(f"cannot decode the text as {', '.join(_encoding_label(e) for e in encodings)}")


# ---------------------------------------------------------------- PDF


def _load_pdf(path: Path, label: str, settings: IngestSettings, cancel: threading.Event | None) -> LoadedDoc:
    found = _extract_pdf(path, label, settings, cancel)
    pages = [unwrap_lines(str(text)) for text in found["pages"]]
    # A PDF of scanned images must fail before indexing starts.
    first = next((i for i, text in enumerate(pages) if text.strip()), None)
    if first is None:
        raise LoadError(f"{label}: the PDF has no extractable text (scanned images need OCR first)")
    raw_title = found.get("title")
    title = (_clean_title(raw_title) if isinstance(raw_title, str) and raw_title.strip() else None) or (
        _first_line(pages[first]) or Path(label).stem
    )
    # Pages are separate blocks; the newline keeps the last word of a page off the first of the next.
    return LoadedDoc(title=title, blocks=iter([text + "\n" for text in pages[first:] if text.strip()]))


def _extract_pdf(path: Path, label: str, settings: IngestSettings, cancel: threading.Event | None) -> dict[str, Any]:
    """Runs rag_core.documents.pdf_worker on the file; kills it past the time limit or when `cancel` is set."""
    limits = PdfLimits(
        max_pages=settings.pdf_max_pages,
        max_chars=settings.pdf_max_chars,
        max_content_mb=settings.pdf_max_content_mb,
        max_memory_mb=settings.pdf_max_memory_mb,
        cpu_s=settings.pdf_timeout_s,
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(_PROJECT_ROOT), env.get("PYTHONPATH", "")) if p)
    proc = subprocess.Popen(
        [sys.executable, "-m", "rag_core.documents.pdf_worker", str(path), limits.to_json()],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    deadline = time.monotonic() + settings.pdf_timeout_s
    try:
        while True:
            try:
                out, err = proc.communicate(timeout=_PDF_POLL_S)
                break
            except subprocess.TimeoutExpired:
                if cancel is not None and cancel.is_set():
                    raise LoadCancelled(f"{label}: cancelled") from None
                if time.monotonic() > deadline:
                    raise LoadError(
                        f"{label}: reading the PDF took longer than ingest.pdf_timeout_s = "
                        f"{settings.pdf_timeout_s:g} s (a PDF whose content expands enormously?)"
                    ) from None
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    try:
        found: dict[str, Any] = json.loads(out)
    except ValueError:
        # Killed by its own CPU or memory cap, or crashed inside a C extension.
        detail = err.decode("utf-8", "replace").strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
        raise LoadError(f"{label}: the PDF could not be read within the limits ({detail[0][:200]})") from None
    kind = found.get("kind")
    if kind == "invalid":
        raise LoadError(f"{label}: not a valid PDF ({found['error']})")
    if kind is not None:
        raise LoadError(f"{label}: {found['error']}")
    return found


def unwrap_lines(text: str) -> str:
    """Undo the layout's line wrapping inside paragraphs of extracted PDF text."""
    lines = [line.rstrip() for line in text.split("\n")]
    width = max((_display_width(line) for line in lines), default=0)
    out: list[str] = []
    for line in lines:
        if out and line.strip() and _soft_wrapped(out[-1], width) and not _LIST_ITEM.match(line):
            out[-1] = _glue(out[-1], line.lstrip())
        else:
            out.append(line)
    return "\n".join(out)


def _display_width(line: str) -> int:
    # CJK characters take two columns, so Chinese and Latin lines of the same width compare equal.
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


def _soft_wrapped(line: str, width: int) -> bool:
    stripped = line.strip()
    return (
        bool(stripped) and not stripped.endswith(_LINE_ENDS) and _display_width(line) >= _SOFT_WRAP_WIDTH_RATIO * width
    )


def _glue(line: str, following: str) -> str:
    # Chinese has no spaces between words; a Latin word broken at a hyphen continues directly.
    wide = unicodedata.east_asian_width(line[-1]) in "WF" or unicodedata.east_asian_width(following[0]) in "WF"
    return line + following if wide or line.endswith("-") else f"{line} {following}"


def _first_line(text: str) -> str | None:
    for line in text.splitlines():
        title = _clean_title(line)
        if title:
            return title
    return None
