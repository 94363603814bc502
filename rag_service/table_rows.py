"""Table rows and per-variant clauses read as units.

A product table is written three ways by the loaders: Markdown (`| 型号 | 容量 | 售价 |`, a `|---|` line,
then a row per model), plain pipes (`Model | Size | Price`, as HTML tables come out) and named cells
(`型号: X | 容量: Y | 售价: Z`, as .docx tables come out). Whichever, a row is one sentence whose cells are
named by the table's header, so "the Pro's price" is read from the Pro's row and not from a neighbour.

A chunk may start in the middle of a table (chunks overlap): its first row is then a data row, not the
header. The header is the row above a `|---|` line or a row with no digit in any cell, and it is shared by
the other chunks of the same document with as many columns.

A sentence may also carry one clause per variant ("重量：基础款 2 kg，Pro 3 kg，Max 4 kg"); the clause of the
variant asked about is the answer.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

from rag_service.facts import BASE_WORDS, VARIANT_WORDS, Product

_SEPARATOR = re.compile(r"^\|?\s*:?-{2,}:?\s*(?:\|\s*:?-{2,}:?\s*)*\|?$")
# A cell saying the row has none of its column: "无", "无烘干", "不带辅助轮", "不支持", "none", "n/a", "—".
_ABSENT = re.compile(r"\s*(?:无|不带|没有|不支持|不含|(?:none|no|n/a|not available)\b|[—–-]\s*$|[/×✗]\s*$)", re.I)
_NAME_HEADER = re.compile(r"型号|机型|名称|产品|商品|款式|型號|\b(?:model|name|product|item)s?\b", re.I)
_NAMED_CELL = re.compile(r"^([^:：|]{1,40})[:：]\s*(.+)$")


_AMOUNT = r"(\d[\d,]*(?:\.\d+)?)(?![\d:：])"
_THRESHOLD_CELL = re.compile(
    rf"(?:满|达到|超过|≥|>=|\b(?:over|from|at least|above)\s?[¥$€£]?)\s?{_AMOUNT}"
    rf"|[¥$€£]?{_AMOUNT}\s?(?:元|块|yuan|rmb)?\s?(?:以上|及以上|起|\+|\s?(?:and|or) (?:above|more|over)\b)",
    re.I,
)
_SPENT = re.compile(r"买了|消费了?|花了|累计|\b(?:spent|spend|bought|purchased|ordered)\b", re.I)


def stated_spend(question: str) -> float | None:
    """The amount a customer says they spent ("我今年买了 3500 块"), which picks the tier it reaches."""
    if not _SPENT.search(question):
        return None
    said = spoken_amounts(question)  # "今年买了三千多"
    amounts = [float(a.replace(",", "")) for a in re.findall(r"(?<![\d.])(\d[\d,]*(?:\.\d+)?)(?![\d.])", said)]
    amounts = [a for a in amounts if a >= 10]
    return max(amounts) if amounts else None


def states_threshold(text: str) -> bool:
    """Whether a sentence sets an amount from which something applies ("实付满 600 元才可以分期")."""
    return any(float((m.group(1) or m.group(2)).replace(",", "")) >= 10 for m in _THRESHOLD_CELL.finditer(text))


def reached_tier(rows: Iterable[Row], spend: float) -> float | None:
    """The threshold of the highest tier the spend reaches among rows that each start at an amount."""
    reached = [t for r in rows if (t := r.threshold()) is not None and t <= spend]
    return max(reached) if reached else None


@dataclass(frozen=True, slots=True)
class Row:
    header: tuple[str, ...]
    cells: tuple[str, ...]

    @property
    def name_index(self) -> int:
        """The column that names the row's product: a name column ("型号", "Model"), else the first."""
        return next((i for i, h in enumerate(self.header) if _NAME_HEADER.search(h)), 0)

    @property
    def name(self) -> str:
        i = self.name_index
        return self.cells[i] if i < len(self.cells) else ""

    def number_fit(self, numbers: frozenset[str]) -> float:
        """How a row fits figures the question names instead of a model ("the 5-litre one"): 1.5 when a
        cell other than the name holds one of them, else 0.7; 1.0 when the question names none."""
        if not numbers:
            return 1.0
        for i, v in enumerate(self.cells):
            if i == self.name_index:
                continue
            if set(re.findall(r"\d+(?:\.\d+)?", v)) & numbers:
                return 1.5
        return 0.7

    def threshold(self) -> float | None:
        """The amount from which the row applies ("满 3000 元", "5,000 yuan and above"), or None."""
        for i, v in enumerate(self.cells):
            if i == self.name_index:
                continue
            found = _THRESHOLD_CELL.search(v)
            if found:
                return float((found.group(1) or found.group(2)).replace(",", ""))
        return None

    def render(self) -> str:
        """ "型号 A1，容量 5 L，售价 300 元。": each cell after its column's name."""
        named = [f"{h} {v}" if h and h != v else v for h, v in zip(self.header, self.cells, strict=False)]
        return "，".join(named + list(self.cells[len(self.header) :])) + "。"

    def stated(self) -> str:
        """`render` without the cells that say the row lacks its column ("烘干容量 无烘干", "Remote: none"): the
        column's name is in every row, and a row saying "none" under it does not have what it names."""
        if not any(_ABSENT.match(v) for v in self.cells):
            return self.render()
        kept = [(h, v) for h, v in zip(self.header, self.cells, strict=False) if not _ABSENT.match(v)]
        named = [f"{h} {v}" if h and h != v else v for h, v in kept]
        return "，".join(named + list(self.cells[len(self.header) :])) + "。"


def is_separator(line: str) -> bool:
    return bool(_SEPARATOR.match(line.strip()))


def split_cells(line: str) -> list[str] | None:
    """The cells of a table line, or None when the line is no table row (fewer than three cells)."""
    stripped = line.strip()
    if stripped.startswith("|") or stripped.endswith("|"):
        parts = stripped.strip("|").split("|")
    elif stripped.count(" | ") >= 2:
        parts = stripped.split(" | ")
    elif stripped.count("\t") >= 2:
        parts = stripped.split("\t")
    else:
        return None
    cells = [c.strip() for c in parts]
    if len(cells) < 3 and not stripped.startswith("|"):
        return None
    return cells


def looks_like_header(cells: list[str]) -> bool:
    """Column names carry no figures; a data row almost always does (a price, a size, a model number)."""
    return bool(cells) and not any(re.search(r"\d", c) for c in cells) and all(len(c) <= 30 for c in cells)


class TableReader:
    """Reads the lines of one document's chunks: keeps the header of each table so that a row (even in a
    chunk that starts below the header) becomes a `Row`."""

    def __init__(self) -> None:
        self.known: dict[int, tuple[str, ...]] = {}  # a header by its number of columns
        self.header: tuple[str, ...] | None = None

    def reset(self) -> None:
        """A line that is no table row ends the table (the known headers stay for later chunks)."""
        self.header = None

    def feed(self, line: str, following: str | None) -> Row | bool:
        """The row of a table line; True when the line was the table's header or a separator (nothing to
        quote); False when it is no table line at all."""
        if is_separator(line):
            return True
        cells = split_cells(line)
        if cells is None:
            self.reset()
            return False
        if all(not c for c in cells):
            return True
        named = [_NAMED_CELL.match(c) for c in cells]
        if all(named):
            header = tuple(m.group(1).strip() for m in named if m)
            values = tuple(m.group(2).strip() for m in named if m)
            self.known.setdefault(len(header), header)
            return Row(header, values)
        if self.header is None and ((following is not None and is_separator(following)) or looks_like_header(cells)):
            self.header = tuple(cells)
            self.known[len(cells)] = self.header
            return True
        header = self.header or self.known.get(len(cells), ())
        return Row(
            header, tuple(_unnamed(h, c) for h, c in zip(header, cells, strict=False)) + tuple(cells[len(header) :])
        )


def _unnamed(name: str, cell: str) -> str:
    """A cell that repeats its column's name ("Price: 1499 yuan" under "Price") without it."""
    m = _NAMED_CELL.match(cell)
    return m.group(2).strip() if m and name and m.group(1).strip().casefold() == name.casefold() else cell


def headers_of(chunks: Iterable[tuple[str, str]]) -> dict[str, TableReader]:
    """A reader per document that already knows the headers of its tables in any of the chunks
    (`(doc_id, text)`), so a chunk below the header, ranked first, still gets its column names."""
    readers: dict[str, TableReader] = {}
    for doc_id, text in chunks:
        reader = readers.setdefault(doc_id, TableReader())
        listed = [ln.strip() for ln in text.splitlines() if ln.strip()]
        for i, line in enumerate(listed):
            reader.feed(line, listed[i + 1] if i + 1 < len(listed) else None)
        reader.reset()
    return readers


def rows_of(lines: Iterable[str]) -> list[Row]:
    """Every data row of a text's tables (a helper for tests and callers that only want rows)."""
    reader = TableReader()
    listed = [ln.strip() for ln in lines if ln.strip()]
    out: list[Row] = []
    for i, line in enumerate(listed):
        got = reader.feed(line, listed[i + 1] if i + 1 < len(listed) else None)
        if isinstance(got, Row):
            out.append(got)
    return out


# --- per-variant clauses ------------------------------------------------------------------------------

_CLAUSE = re.compile(r"(?<=[，；;,])|(?<=[。.!?！？])\s*")
_SUBJECT = re.compile(r"^[^：:，,；;。]{1,16}[：:]\s*")
_LATIN_WORD = re.compile(r"[A-Za-z][A-Za-z+]*")


def variant_marks(text: str) -> frozenset[str]:
    """The variant words a clause names ("Pro 和 Max" -> {pro, max}; "基础款 ..." -> {base})."""
    found = {w.lower() for w in _LATIN_WORD.findall(text) if w.lower() in VARIANT_WORDS}
    found |= {w for w in VARIANT_WORDS if not w.isascii() and w in text}
    if BASE_WORDS.search(text):
        found.add("base")
    return frozenset(found)


def variant_clauses(text: str, wanted: frozenset[str]) -> str | None:
    """The clauses of `text` about the variant `wanted` names ({"max"}; {"base"} for the model without a
    variant word), when the text has clauses for several variants; None when it has not (or names no
    clause of the wanted one). A clause naming no variant stays: it carries the shared subject
    ("重量：" before "基础款 2 kg")."""
    if not wanted:
        return None
    subject = ""
    head = _SUBJECT.match(text)
    if head and not variant_marks(head.group()):
        subject, text = head.group(), text[head.end() :]  # "重量：" is shared by all the clauses
    clauses = [c for c in _CLAUSE.split(text) if c and c.strip()]
    marks = [variant_marks(c) for c in clauses]
    if len({m for m in marks if m}) < 2:
        return None
    if not any(m & wanted for m in marks):
        return None
    kept = [c for c, m in zip(clauses, marks, strict=True) if not m or m & wanted]
    # A leading clause without a variant is the shared subject; trailing ones without a variant after a
    # dropped clause belong to that clause ("Max 4 kg，含底座" ) and go with it.
    out: list[str] = []
    keep_tail = True
    for c, m in zip(clauses, marks, strict=True):
        if m:
            keep_tail = bool(m & wanted)
            if keep_tail:
                out.append(c)
        elif keep_tail:
            out.append(c)
    kept = out or kept
    joined = subject + "".join(kept).strip().rstrip("，,；; ")
    if re.search(r"[。.!?！？]$", joined):
        return joined
    return joined + ("." if joined.isascii() else "。")


def asked_numbers(question: str, product_names: Iterable[str]) -> frozenset[str]:
    """Figures of the question outside the product names it uses ("5" of "the 5-litre one"), a height said
    the spoken way ("一米七二") in centimetres."""
    for name in product_names:
        question = question.replace(name, " ")
    question = spoken_amounts(spoken_heights(question))
    return frozenset(re.findall(r"(?<![\d.])\d+(?:\.\d+)?(?![\d.])", question))


_DIGIT = {c: str(i) for i, c in enumerate("零一二三四五六七八九")} | {"两": "2"}
# "一米七二", "1米7", "一米八": metres and the centimetres after them, the way heights are said.
_SPOKEN_HEIGHT = re.compile(
    r"([一两1])\s?米\s?([零一二三四五六七八九\d])([零一二三四五六七八九\d])?(?![\d零一二三四五六七八九十])"
)
_METRES = re.compile(r"(?<![\d.])([12])\.(\d{2})\s?(?:米|m\b)")


# "五千多", "两千五", "一万二", "3千": an amount said with a Chinese multiplier, and the digit of the next place.
_SPOKEN_AMOUNT = re.compile(
    r"(?<![\d零一二两三四五六七八九十百千万])([一二两三四五六七八九]|[1-9]\d?)\s?([万千百])([一二三四五六七八九])?"
)
_MULTIPLIER = {"百": 100, "千": 1000, "万": 10000}


def spoken_amounts(text: str) -> str:
    """Amounts said with a Chinese multiplier ("五千多", "两千五", "一万二") written as figures ("5000", "2500",
    "12000"); "多" (a bit more) is left to the reader: a band that holds the round figure holds the amount."""

    def figure(m: re.Match[str]) -> str:
        lead = int(_DIGIT.get(m.group(1), m.group(1)))
        unit = _MULTIPLIER[m.group(2)]
        tail = int(_DIGIT[m.group(3)]) * unit // 10 if m.group(3) else 0
        return f" {lead * unit + tail} "

    return _SPOKEN_AMOUNT.sub(figure, text)


def spoken_heights(text: str) -> str:
    """Heights said in metres ("一米七二", "1.72 米") written as centimetres ("172 cm")."""

    def cm(first: str, second: str, third: str | None) -> str:
        digits = "".join(_DIGIT.get(ch, ch) for ch in (first, second, third or "0"))
        return f"{int(digits)} cm"

    text = _SPOKEN_HEIGHT.sub(lambda m: cm(m.group(1), m.group(2), m.group(3)), text)
    return _METRES.sub(lambda m: f"{m.group(1)}{m.group(2)} cm", text)


def with_variants(family: list[Product], marks: frozenset[str]) -> list[Product]:
    """The models a sentence means by bare variant words under a family's name ("Pro 和 Max ..." under
    "Beamo": Beamo Pro, Beamo Max; a base word: the family's model without a variant)."""
    words = {m for m in marks if m.isascii() and m != "base"}
    if not words and "base" not in marks:
        return family
    out: list[Product] = []
    for p in family:
        if p.variants:
            out.append(p)
            continue
        if "base" in marks:
            out.append(p)
        out.extend(Product(f"{p.text} {w}", p.tokens | {w}) for w in sorted(words))
    return out


# A span of figures a rule or a size applies to: "身高 160–175 cm", "200 到 400 度", "ages 4 to 7", and an open
# one: "200 度以内", "up to 120 kg", "800 度以上", "over 12". Not a model number ("KX-350") nor a date.
_NUMBER = r"(\d+(?:\.\d+)?)"
_SPAN = re.compile(
    rf"(?<![A-Za-z\d.\-:：]){_NUMBER}\s?(?:[A-Za-z°℃%]{{0,3}}\s?)?(?:–|—|-|~|～|至|到|\bto\b)\s?{_NUMBER}(?![\d.\-:：])"
)
_UP_TO = re.compile(
    rf"(?:≤|<=|不超过|不高于|最多|最高|\bup to\b|\bunder\b|\bbelow\b|\bmax(?:imum)?\.?\b)\s?{_NUMBER}"
    rf"|(?<![\d.]){_NUMBER}\s?[^\d\s，,；;。]{{0,3}}\s?(?:以内|以下|之内|or (?:less|under|below))",
    re.I,
)
_FROM = re.compile(
    rf"(?:≥|>=|不低于|至少|\bover\b|\babove\b|\bat least\b)\s?{_NUMBER}"
    rf"|(?<![\d.]){_NUMBER}\s?[^\d\s，,；;。]{{0,5}}\s?(?:以上|及以上|(?:or|and) (?:more|over|above))",
    re.I,
)
_CLAUSE_END = re.compile(r"[，,；;。]")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3}(?!\d))")


def spans(text: str) -> list[tuple[float, float]]:
    """The spans of figures a text states, closed ("160–175") or open ("800 度以上")."""
    out: list[tuple[float, float]] = []
    text = _THOUSANDS.sub("", text)  # "1,000 to 2,999 yuan"
    for m in _SPAN.finditer(text):
        low, high = float(m.group(1)), float(m.group(2))
        if low < high:
            out.append((low, high))
    for m in _UP_TO.finditer(text):
        out.append((0.0, float(m.group(1) or m.group(2))))
    for m in _FROM.finditer(text):
        out.append((float(m.group(1) or m.group(2)), math.inf))
    return out


def span_fit(numbers: frozenset[str], text: str, asked: frozenset[str]) -> float:
    """How a sentence's spans fit a figure the question states ("I'm 176 cm", "近视 450 度"): 2 when a clause
    with a span holding the figure also shares a word with the question (`asked`: its words), 1.3 when only
    the span holds it, 0.5 when the sentence states spans and none holds it, 1 when it states none."""
    figures = [float(n) for n in numbers if len(n.split(".")[0]) <= 5]
    return _span_fit(figures, text, asked)


def stated_figures(question: str, numbers: frozenset[str]) -> frozenset[str]:
    """The figures of `numbers` the question states as amounts, not a model number's ("KX-350", "E3") nor
    a date's ("9 October", "3 月 5 日")."""
    out = set()
    for n in numbers:
        glued = re.search(rf"[A-Za-z]-?{re.escape(n)}(?![\d.])|(?<![\d.]){re.escape(n)}\s?(?:月|日|号)", question)
        date = re.search(
            rf"(?<![\d.]){re.escape(n)}\s(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)", question, re.I
        )
        if not glued and not date:
            out.add(n)
    return frozenset(out)


def _span_fit(figures: list[float], text: str, asked: frozenset[str]) -> float:
    if not figures:
        return 1.0
    best = 1.0
    stated = False
    for clause in _CLAUSE_END.split(_THOUSANDS.sub("", text)):
        found = spans(clause)
        if not found:
            continue
        stated = True
        if any(low <= f <= high for f in figures for low, high in found):
            lowered = clause.lower()
            shared = any(len(w) >= 2 and not w.isdigit() and w in lowered for w in asked)
            best = max(best, 2.0 if shared else 1.3)
    return best if best > 1 or not stated else 0.5


def holding_bound(numbers: frozenset[str], text: str, asked: frozenset[str]) -> tuple[float, float, float] | None:
    """For a sentence whose spans hold a figure the question states: how well (as `span_fit`: 2 or 1.3) and the
    tightest such span's upper and lower ends ("up to 9 kg" is tighter than "up to 16 kg" for 7 kg); None when
    none holds it."""
    figures = [float(n) for n in numbers if len(n.split(".")[0]) <= 5]
    best: tuple[float, float, float] | None = None
    for clause in _CLAUSE_END.split(_THOUSANDS.sub("", text)):
        held = [(low, high) for low, high in spans(clause) if any(low <= f <= high for f in figures)]
        if not held:
            continue
        lowered = clause.lower()
        shared = any(len(w) >= 2 and not w.isdigit() and w in lowered for w in asked)
        level = 2.0 if shared else 1.3
        high = min(h for _, h in held)
        low = max(lo for lo, _ in held)
        if best is None or (level, -high, low) > (best[0], -best[1], best[2]):
            best = (level, high, low)
    return best
