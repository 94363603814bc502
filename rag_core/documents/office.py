"""Word, PowerPoint and Excel files, and FAQ spreadsheets (CSV or XLSX), as text blocks and FAQ pairs.

python-docx, python-pptx and openpyxl read the files (well-kept, pure Python over lxml). What the chunker
needs from their structure is kept as lines: a heading is a line of its own (the chunker records the
heading in effect for every chunk), a table row is one line of `header: value` cells, so a chunk that
starts in the middle of a table still says what each value is.

An FAQ sheet is a sheet (or CSV file) whose header row names a question and an answer column (names
configurable: `ingest.faq_question_headers`, `ingest.faq_answer_headers`). Several questions may share
one answer: more than one question column, several questions in one cell (one per line), or rows whose
answer cell is empty continuing the answer above (a merged cell reads that way).
"""

from __future__ import annotations

import csv
import io
import re
import zipfile
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rag_core.settings import IngestSettings

_BYTES_PER_MB = 1024 * 1024
CELL_SEPARATOR = " | "
# Beyond this many rows a sheet is data, not knowledge worth a chunk per few rows; the rest is refused
# rather than silently cut.
MAX_SHEET_ROWS = 100_000


class OfficeError(Exception):
    """The file is not what its extension says, or holds nothing to index; the message says why."""


@dataclass(frozen=True, slots=True)
class FaqPair:
    """Questions that share one answer (an FAQ entry per question)."""

    questions: tuple[str, ...]
    answer: str


@dataclass(frozen=True, slots=True)
class OfficeDoc:
    title: str | None
    lines: list[str]
    faq: list[FaqPair]
    # The lines the file's structure marks as headings (heading styles, slide titles, sheet names): they
    # name a section whatever their wording, even a question ("Can I pay later?").
    headings: frozenset[str] = frozenset()


# ---------------------------------------------------------------- zip containers


def check_zip(path: Path, settings: IngestSettings, what: str) -> None:
    """An Office file is a zip: refuse one that is not, or whose parts expand beyond the limit (a small
    file can expand enormously, like a PDF)."""
    try:
        with zipfile.ZipFile(path) as archive:
            expanded = sum(info.file_size for info in archive.infolist())
    except (zipfile.BadZipFile, OSError, ValueError) as exc:
        raise OfficeError(f"not a valid {what} file ({exc})") from exc
    limit = settings.office_max_content_mb * _BYTES_PER_MB
    if expanded > limit:
        raise OfficeError(
            f"the {what} file expands to {expanded / _BYTES_PER_MB:.3g} MB, more than "
            f"ingest.office_max_content_mb = {settings.office_max_content_mb:g} MB"
        )


# ---------------------------------------------------------------- Word

# Word's built-in "Title" and "Heading 1".."Heading 9"; python-docx names built-in styles in English
# whatever the language Word was set to.
_DOCX_HEADING_STYLE = re.compile(r"^(?:Title|Heading [1-9])$")


def load_docx(path: Path, settings: IngestSettings) -> OfficeDoc:
    import docx
    from docx.table import Table
    from docx.text.paragraph import Paragraph

    check_zip(path, settings, "Word (.docx)")
    try:
        document = docx.Document(str(path))
    except Exception as exc:  # python-docx raises whatever its zip/XML layers raise
        raise OfficeError(f"not a valid Word (.docx) file ({type(exc).__name__}: {exc})") from exc
    lines: list[str] = []
    headings: set[str] = set()
    title: str | None = _clean(document.core_properties.title or "") or None
    for item in document.iter_inner_content():
        if isinstance(item, Paragraph):
            text = _clean(item.text)
            if not text:
                continue
            style = (item.style.name if item.style is not None else "") or ""
            if title is None and (style == "Title" or style == "Heading 1"):
                title = text
            if _DOCX_HEADING_STYLE.match(style):
                headings.add(text)
            lines.append(text)
        elif isinstance(item, Table):
            lines.extend(table_lines([[cell.text for cell in row.cells] for row in item.rows]))
    return OfficeDoc(title, lines, [], frozenset(headings))


# ---------------------------------------------------------------- PowerPoint


def load_pptx(path: Path, settings: IngestSettings) -> OfficeDoc:
    import pptx

    check_zip(path, settings, "PowerPoint (.pptx)")
    try:
        presentation = pptx.Presentation(str(path))
    except Exception as exc:
        raise OfficeError(f"not a valid PowerPoint (.pptx) file ({type(exc).__name__}: {exc})") from exc
    title: str | None = _clean(presentation.core_properties.title or "") or None
    lines: list[str] = []
    headings: set[str] = set()
    for slide in presentation.slides:
        heading_shape = slide.shapes.title
        heading = _clean(heading_shape.text_frame.text) if heading_shape is not None else ""
        if heading:
            title = title or heading
            lines.append(heading)
            headings.add(heading)
        for shape in slide.shapes:
            if heading_shape is not None and shape.shape_id == heading_shape.shape_id:
                continue
            lines.extend(_shape_lines(shape))
        if slide.has_notes_slide:
            notes = slide.notes_slide.notes_text_frame
            if notes is not None:
                lines.extend(t for t in (_clean(p) for p in notes.text.split("\n")) if t)
    return OfficeDoc(title, lines, [], frozenset(headings))


def _shape_lines(shape: Any) -> Iterator[str]:
    from pptx.enum.shapes import MSO_SHAPE_TYPE

    if shape.shape_type == MSO_SHAPE_TYPE.GROUP:
        for inner in shape.shapes:
            yield from _shape_lines(inner)
    elif getattr(shape, "has_table", False) and shape.has_table:
        yield from table_lines([[cell.text for cell in row.cells] for row in shape.table.rows])
    elif getattr(shape, "has_text_frame", False) and shape.has_text_frame:
        for paragraph in shape.text_frame.paragraphs:
            text = _clean("".join(run.text for run in paragraph.runs) or paragraph.text)
            if text:
                yield text


# ---------------------------------------------------------------- Excel and CSV


def load_xlsx(path: Path, settings: IngestSettings) -> OfficeDoc:
    import openpyxl

    check_zip(path, settings, "Excel (.xlsx)")
    try:
        workbook = openpyxl.load_workbook(str(path), read_only=True, data_only=True)
    except Exception as exc:
        raise OfficeError(f"not a valid Excel (.xlsx) file ({type(exc).__name__}: {exc})") from exc
    lines: list[str] = []
    headings: set[str] = set()
    faq: list[FaqPair] = []
    try:
        for sheet in workbook.worksheets:
            rows = _bounded_rows(([_cell(v) for v in row] for row in sheet.iter_rows(values_only=True)), sheet.title)
            pairs = faq_pairs(rows, settings)
            if pairs is not None:
                faq.extend(pairs)
                continue
            body = table_lines(rows)
            if body:
                lines.append(_clean(sheet.title))
                headings.add(_clean(sheet.title))
                lines.extend(body)
    except OfficeError:
        raise
    except Exception as exc:
        raise OfficeError(f"cannot read the Excel (.xlsx) file ({type(exc).__name__}: {exc})") from exc
    finally:
        workbook.close()
    title = _clean(workbook.properties.title or "") or None
    return OfficeDoc(title, lines, faq, frozenset(headings))


def load_faq_csv(data: str, settings: IngestSettings) -> OfficeDoc:
    """A CSV file is an FAQ file: its header must name the question and answer columns."""
    try:
        dialect: type[csv.Dialect] | csv.Dialect = csv.Sniffer().sniff(data[:4096], delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    try:
        rows = _bounded_rows(csv.reader(io.StringIO(data), dialect), "CSV")
    except csv.Error as exc:
        raise OfficeError(f"not a valid CSV file ({exc})") from exc
    pairs = faq_pairs(rows, settings)
    if pairs is None:
        header = [c for c in (rows[0] if rows else []) if c]
        raise OfficeError(
            "a CSV file is read as an FAQ and needs a question and an answer column; the header is "
            f"{header!r}, expected one of {settings.faq_question_headers!r} and one of {settings.faq_answer_headers!r} "
            "(ingest.faq_question_headers / faq_answer_headers)"
        )
    return OfficeDoc(None, [], pairs)


def faq_pairs(rows: Sequence[Sequence[str]], settings: IngestSettings) -> list[FaqPair] | None:
    """The FAQ entries of a table whose first non-empty row names question and answer columns, or None
    when it is not an FAQ table."""
    start = next((i for i, row in enumerate(rows) if any(row)), None)
    if start is None:
        return None
    header = [_header_key(c) for c in rows[start]]
    questions_at = [i for i, name in enumerate(header) if name in _keys(settings.faq_question_headers)]
    answers_at = [i for i, name in enumerate(header) if name in _keys(settings.faq_answer_headers)]
    if not questions_at or not answers_at:
        return None
    answer_col = answers_at[0]
    groups: list[tuple[list[str], str]] = []
    for row in rows[start + 1 :]:
        questions = [q for i in questions_at for q in _split_questions(_at(row, i))]
        answer = _at(row, answer_col).strip()
        if not questions and not answer:
            continue
        if not answer and groups:
            groups[-1][0].extend(questions)  # continues the answer above (a merged answer cell)
        elif answer and not questions and groups:
            groups[-1] = (groups[-1][0], groups[-1][1] + "\n" + answer)
        elif answer and questions:
            groups.append((questions, answer))
    pairs = [FaqPair(tuple(dict.fromkeys(qs)), answer) for qs, answer in groups if qs and answer]
    return pairs


def table_lines(rows: Iterable[Sequence[str]]) -> list[str]:
    """One line per row, each cell named by its column's header (the first row with text)."""
    header: list[str] | None = None
    out: list[str] = []
    for raw in rows:
        row = [_clean(c) for c in raw]
        # Merged cells repeat their text in every cell they cover.
        if not any(row):
            continue
        if header is None:
            header = row
            out.append(CELL_SEPARATOR.join(dict.fromkeys(c for c in row if c)))
            continue
        out.append(table_row(header, row))
    return out


def table_row(header: Sequence[str], row: Sequence[str]) -> str:
    """A body row as one line of `header: value` cells, so that the row read alone (a chunk that starts in
    the middle of a table, a sentence quoted in an answer) still says what each value is."""
    cells = []
    for i, value in enumerate(row):
        if not value or (i and row[i - 1] == value):
            continue
        name = header[i] if i < len(header) else ""
        cells.append(f"{name}: {value}" if name and name != value else value)
    return CELL_SEPARATOR.join(cells)


def _bounded_rows(rows: Iterable[Sequence[str]], where: str) -> list[list[str]]:
    out: list[list[str]] = []
    for row in rows:
        if len(out) >= MAX_SHEET_ROWS:
            raise OfficeError(f"{where} has more than {MAX_SHEET_ROWS} rows; split it")
        out.append(list(row))
    while out and not any(out[-1]):
        out.pop()
    return out


def _cell(value: object) -> str:
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def _at(row: Sequence[str], i: int) -> str:
    return row[i] if i < len(row) and row[i] is not None else ""


def _split_questions(cell: str) -> list[str]:
    return [q for q in (_clean(part) for part in cell.replace("\r", "\n").split("\n")) if q]


def _header_key(name: str) -> str:
    return " ".join(str(name).split()).casefold()


def _keys(names: Iterable[str]) -> set[str]:
    return {_header_key(n) for n in names}


def _clean(text: str) -> str:
    return " ".join(str(text).split())
