"""The Word and PDF writers the shops' `make_binary_docs.py` scripts share; each script holds only its
shop's facts. fpdf2's core fonts are Latin-1, so the PDFs are English only (the machine that made them had no
CJK font)."""

from __future__ import annotations

from pathlib import Path

from docx import Document
from fpdf import FPDF

Row = tuple[str, ...]
# A paragraph (a leading "## " makes a heading) or a table (a list of rows).
Part = str | list[Row]


def write_docx(path: Path, title: str, parts: list[Part]) -> None:
    """A level-1 heading, then the parts; "## " headings are level 2."""
    doc = Document()
    doc.core_properties.title = title
    doc.add_heading(title, level=1)
    for part in parts:
        if isinstance(part, str):
            if part.startswith("## "):
                doc.add_heading(part[3:], level=2)
            else:
                doc.add_paragraph(part)
            continue
        table = doc.add_table(rows=len(part), cols=len(part[0]))
        for r, row in enumerate(part):
            for c, value in enumerate(row):
                table.cell(r, c).text = value
    doc.save(str(path))


def write_pdf(path: Path, title: str, parts: list[Part], cell_width: float = 60) -> None:
    """A bold title, then the parts: paragraphs, bold "## " headings, tables of bordered cells."""
    pdf = FPDF()
    pdf.set_title(title)
    pdf.add_page()
    pdf.set_font("Helvetica", "B", 16)
    pdf.multi_cell(0, 10, title, new_x="LMARGIN", new_y="NEXT")
    pdf.set_font("Helvetica", "", 11)
    for part in parts:
        if isinstance(part, list):
            for row in part:
                for value in row:
                    pdf.cell(cell_width, 7, value, border=1)
                pdf.ln(7)
            pdf.ln(3)
        elif part.startswith("## "):
            pdf.set_font("Helvetica", "B", 12)
            pdf.multi_cell(0, 8, part[3:], new_x="LMARGIN", new_y="NEXT")
            pdf.set_font("Helvetica", "", 11)
        else:
            pdf.multi_cell(0, 6, part, new_x="LMARGIN", new_y="NEXT")
            pdf.ln(2)
    pdf.output(str(path))


def sections(pairs: list[tuple[str, str]]) -> list[Part]:
    """(heading, text) pairs as parts: each text under its "## " heading."""
    return [part for heading, text in pairs for part in (f"## {heading}", text)]
