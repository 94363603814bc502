"""Compressing older rounds into the running summary.

Whatever the summarizer writes, the order numbers, amounts, dates and identifiers of the folded rounds
survive: those missing from its text are appended as one pinned-facts line. An order number counts as
kept only where the summary still calls it one, and is pinned with its label ("订单号 3187…"): the
summary is PII-masked before it is stored, and a bare 16-19 digit run that passes the Luhn check would
be masked as a bank card (rag_service.privacy keeps a number only in its order context). The line is bounded
(`memory.pinned_facts_max` facts, the most recently mentioned kept; a fact over MAX_FACT_CHARS is not a
fact but a blob): otherwise it grows with every compression until the summary no longer fits the budget
and is dropped whole. What leaves the line is still in the archived messages, which keep every message.

A bare "8999 元" answers no later question ("what did you say the 512GB one costs?"), so each pinned fact
carries its label: the few words before it in its clause, and the product its line names when those
words do not ("iPhone 16 Pro 128GB 版本售价 7999 元"). A label re-read from the pinned line is the same label,
so facts keep it across compressions.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from rag_core.settings import MemorySettings
from rag_core.tokens import TokenCounter
from rag_service import recall
from rag_service.domain import Round
from rag_service.llm import ChatClient
from rag_service.privacy import order_numbers
from rag_service.recall import ANSWER_LINE, USER_LINE, product_names

PINNED_HEADER = recall.PINNED_HEADER  # recall reads the line back
MAX_FACT_CHARS = 40
# A fact's label: at most this many characters (product name included), cut at a word.
MAX_LABEL_CHARS = 48

_MONTHS = (
    "Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?|"
    "Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?"
)
# 8999, 8,999, 1,099.00 (a thousands comma never ends the number: "USD 99, and")
_NUMBER = r"\d(?:[\d,]*\d)?(?:\.\d+)?"
_FACT_PATTERNS = [
    # dates: 2024-11-05, 2024/11/5, 2024年11月5日, 11月5日, 11月5号
    r"\d{4}[-/.]\d{1,2}[-/.]\d{1,2}",
    r"\d{4}\s?年\s?\d{1,2}\s?月(?:\s?\d{1,2}\s?[日号])?",
    r"(?<!\d)\d{1,2}\s?月\s?\d{1,2}\s?[日号]",
    # phone-like ids: 400-820-1234, 13812345678
    r"\d{3,4}-\d{3,4}-\d{4}",
    r"(?<!\d)1[3-9]\d{9}(?!\d)",
    # amounts with a currency: 7,999 元, ¥299, $1,099.00, 299元, 1.5万元, RMB 500
    rf"[¥￥$]\s?{_NUMBER}",
    rf"{_NUMBER}\s?(?:万元|元|块钱|块|rmb|RMB|CNY|USD|dollars?|yuan\b)",
    rf"(?:RMB|CNY|USD)\s?{_NUMBER}",
    # English dates: March 1, 2025 / Mar 1 2025 / 1 March 2025 / June 18 / the 18th of June
    rf"(?<![A-Za-z])(?:{_MONTHS})\.?\s\d{{1,2}}(?:st|nd|rd|th)?\b(?:,?\s\d{{4}})?",
    rf"(?<!\d)\d{{1,2}}(?:st|nd|rd|th)?\s(?:of\s)?(?:{_MONTHS})\b\.?(?:,?\s\d{{4}})?",
    # order numbers and other identifiers: letters and digits mixed, at least 6 long (XC20241105001).
    # ASCII boundaries, not \b: Chinese text runs straight into them ("订单号XC20241105001的").
    r"(?<![A-Za-z0-9-])(?=[A-Za-z0-9-]*\d)(?=[A-Za-z0-9-]*[A-Za-z])[A-Za-z0-9][A-Za-z0-9-]{5,}(?![A-Za-z0-9-])",
    # long digit runs (order / tracking numbers written without letters)
    r"(?<![\d.])\d{8,}(?![\d.])",
]
_FACTS = re.compile("|".join(f"(?:{p})" for p in _FACT_PATTERNS))
# Every fact has a digit at most this many characters after its start (a month name, a dot and a space:
# "September. 5"), except an identifier, which starts where its run of ASCII letters, digits and hyphens
# does (its digit may even be the non-ASCII one just after the run: \d is any digit, "ABCDEF４").
# What comes before a fact's first digit starts with a letter or a currency mark.
_DIGIT_REACH = 11
_DIGIT = re.compile(r"\d")
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
_ID_CHARS = frozenset(_LETTERS + "0123456789-")
_LEADS = frozenset(_LETTERS + "¥￥$")


def _fact_matches(text: str) -> list[re.Match[str]]:
    """`_FACTS.finditer(text)`, trying a match only where one can start: the alternation has no literal
    prefix (lookbehinds lead), so the full scan tries all 13 patterns at every character."""
    found: list[re.Match[str]] = []
    match, next_digit = _FACTS.match, _DIGIT.search
    lo = 0  # no fact starts between the end of the last one and lo
    while (digit := next_digit(text, lo)) is not None:
        # The first digit from lo: a fact starting in [lo, d] has it, or one after it, within reach.
        d = digit.start()
        start = max(lo, d - _DIGIT_REACH)
        first = start
        while first > lo and text[first - 1] in _ID_CHARS:
            first -= 1  # an identifier's digit can be far into its run
        m = match(text, first) if first < start else None
        if m is None:
            for p in range(start, d):
                if text[p] in _LEADS:
                    m = match(text, p)
                    if m is not None:
                        break
            else:
                m = match(text, d)
        if m is None:
            lo = d + 1
        else:
            found.append(m)
            lo = m.end()  # which may be d itself: "ABCDEF４元" is an identifier and then an amount
    return found


def _occurrences(text: str) -> list[tuple[int, int, str]]:
    """(start, end, fact) of every fact in `text`, in order; whatever the conversation calls an order number
    is one, even when no other pattern takes it."""
    found = [(m.start(), m.end(), m.group().strip()) for m in _fact_matches(text)]
    found += [(m.start("value"), m.end("value"), m.group("value")) for m in order_numbers(text)]
    return sorted(f for f in found if len(f[2]) <= MAX_FACT_CHARS)


def key_facts(text: str, *, by_recency: bool = False) -> list[str]:
    """The facts of `text`, each once however spaced ("8999元" = "8,999 元"), in their spelling at first
    mention: in order of first appearance, or with `by_recency` of last appearance."""
    spelling: dict[str, str] = {}
    position: dict[str, int] = {}
    for start, _, fact in _occurrences(text):
        key = _norm(fact)
        spelling.setdefault(key, fact)
        if by_recency or key not in position:
            position[key] = start
    return [spelling[key] for key in sorted(position, key=position.__getitem__)]


# Where a fact's label starts: the clause mark before it (a list mark or a pinned line's "; " too).
_CLAUSE_MARK = re.compile(r"[，,；;：:、。！!？?（）()\[\]【】\n]|\s-\s|^\s*-\s")


def fact_label(text: str, start: int, end: int) -> str:
    """The words before the fact at text[start:end] in its clause, with the product its line names when
    they name none ("- 128GB 版本售价 7999 元。（iPhone 16 Pro 商品详情）" -> "iPhone 16 Pro 128GB 版本售价")."""
    line_start = text.rfind("\n", 0, start) + 1
    line_end = text.find("\n", end)
    line_end = line_end if line_end >= 0 else len(text)
    if text.startswith(PINNED_HEADER, line_start):
        # A pinned line is one fact per entry, each already labelled.
        line_start = max(line_start + len(PINNED_HEADER), text.rfind("; ", line_start, start) + 2)
        entry_end = text.find("; ", end, line_end)
        line_end = entry_end if entry_end >= 0 else line_end
    line = text[line_start:line_end]
    before = line[: start - line_start]
    marks = list(_CLAUSE_MARK.finditer(before))
    label = " ".join((before[marks[-1].end() :] if marks else before).split())
    listing = not label and re.search(r"[;；]", line[end - line_start :]) is not None
    if marks and marks[-1].group() in "：:" and not listing:
        # "金卡会员：满 10000 元": what the colon introduces is the fact's subject (not so for a heading over a
        # list of figures: "要点：7999 元; 8999 元").
        head = before[marks[-2].end() if len(marks) > 1 else 0 : marks[-1].start()].strip(" -")
        if 0 < len(head) <= 12:
            label = f"{head}{'：' if not head.isascii() else ': '}{label}" if label else head
    named = product_names(before)
    product = named[-1] if named else next(iter(product_names(line)), "")
    if product and {w.lower() for w in product.split()} & {w.lower() for w in re.findall(r"[A-Za-z0-9]+", label)}:
        product = ""  # the clause names it already
    room = MAX_LABEL_CHARS - (len(product) + 1 if product else 0)
    if len(label) > max(room, 16):
        label = label[-max(room, 16) :]
        if label[:1].isascii() and label[:1].isalnum() and " " in label:
            label = label.split(" ", 1)[1]  # not half a word
    return f"{product} {label}".strip()


def pin_facts(summary: str, rounds: Sequence[Round], previous_summary: str, limit: int | None = None) -> str:
    """Append the facts of `rounds` (and of the previous summary) that `summary` no longer contains, each
    with its label, at most `limit` of them: the most recently mentioned. A pinned line the summarizer
    copied into its text is replaced, so there is one line and the limit holds for it."""
    body = "\n".join(line for line in summary.splitlines() if not line.startswith(PINNED_HEADER)).rstrip()
    source = previous_summary + "\n" + "\n".join(f"{r.user.content}\n{r.assistant.content}" for r in rounds)
    labels = {_norm(m.group("value")): m.group("label") for m in order_numbers(source)}
    normalized = _norm(body)
    kept_orders = {_norm(m.group("value")) for m in order_numbers(body)}
    # One entry per labelled fact, at its latest mention (a value said of two products is two facts).
    entries: dict[str, tuple[int, str, str, bool]] = {}
    for start, end, fact in _occurrences(source):
        key = _norm(fact)
        if key in labels:
            if key in kept_orders:
                continue
            text, labelled = f"{labels[key]} {fact}", True
        elif key in normalized:
            continue
        else:
            label = fact_label(source, start, end)
            text, labelled = (f"{label} {fact}" if label else fact), bool(label)
        entry = key if key in labels else _norm(text)
        entries.pop(entry, None)
        entries[entry] = (start, text, _digits(fact), labelled)
    # A bare mention ("要点：7999 元") of a value pinned with its label elsewhere, or stated in the summary,
    # adds nothing.
    with_label = {digits for _, _, digits, labelled in entries.values() if labelled}
    with_label |= set(re.findall(r"\d+", body.replace(",", "")))
    missing = [text for _, text, digits, labelled in entries.values() if labelled or digits not in with_label]
    if limit is not None:
        missing = missing[-limit:] if limit > 0 else []
    lines = [body] if body else []
    if missing:
        lines.append(f"{PINNED_HEADER} {'; '.join(missing)}")
    return "\n".join(lines) or summary


def _digits(fact: str) -> str:
    return "".join(ch for ch in fact if ch.isdigit()) or fact


def _norm(text: str) -> str:
    return re.sub(r"[\s,]", "", text)


class Summarizer(Protocol):
    async def summarize(self, previous: str, rounds: Sequence[Round]) -> str: ...


class LLMSummarizer:
    def __init__(self, client: ChatClient, settings: MemorySettings) -> None:
        self.client, self.settings = client, settings

    async def summarize(self, previous: str, rounds: Sequence[Round]) -> str:
        transcript = "\n".join(f"User: {r.user.content}\nAssistant: {r.assistant.content}" for r in rounds)
        messages = [
            {
                "role": "system",
                "content": self.settings.summary_prompt.format(max_tokens=self.settings.summary_max_tokens),
            },
            {
                "role": "user",
                "content": f"Existing summary:\n{previous or '(none)'}\n\nNew rounds:\n{transcript}",
            },
        ]
        text = (await self.client.complete(messages, max_tokens=self.settings.summary_max_tokens)).strip()
        if not text:
            raise ValueError("the summarizer returned an empty summary")
        return text


class ExtractiveSummarizer:
    """No-LLM default: the user's questions in order, each with the lines of its answer that state a fact
    (a price, a date, an order number), capped, newest kept when over the cap. What the cap drops,
    `pin_facts` pins."""

    def __init__(self, counter: TokenCounter, settings: MemorySettings) -> None:
        self.counter, self.settings = counter, settings

    async def summarize(self, previous: str, rounds: Sequence[Round]) -> str:
        lines = [line for line in previous.splitlines() if line and not line.startswith(PINNED_HEADER)]
        for r in rounds:
            lines.append(f"{USER_LINE} {r.user.content.strip()}")
            lines += [f"  {ANSWER_LINE} {line}" for line in answer_facts(r.assistant.content)]
        # Over the cap, the oldest answer lines go first (`pin_facts` keeps their figures, labelled), then
        # the oldest questions.
        while len(lines) > 1 and self.counter.count("\n".join(lines)) > self.settings.summary_max_tokens:
            answers = [i for i, line in enumerate(lines) if line.lstrip().startswith(ANSWER_LINE)]
            lines.pop(answers[0] if answers else 0)
        return "\n".join(lines)


ANSWER_FACT_LINES = 3
ANSWER_LINE_CHARS = 120
_LIST_ITEM = re.compile(r"^\s*(?:[-*•·]|\d+[.、)])\s+")
_FRAMING = re.compile(r"^\[[^\]]*\]\s*")  # a generator's marker ("[extractive answer, …]")


def answer_facts(answer: str) -> list[str]:
    """The lines of an answer that state a fact, at most ANSWER_FACT_LINES: its list items when it has any
    (an answer's figures heading repeats them), else any line."""
    lines = [_FRAMING.sub("", line).strip() for line in answer.splitlines()]
    with_facts = [line for line in lines if line and _occurrences(line)]
    items = [line for line in with_facts if _LIST_ITEM.match(line)]
    out: list[str] = []
    for line in (items or with_facts)[:ANSWER_FACT_LINES]:
        line = _LIST_ITEM.sub("", line)
        out.append(line if len(line) <= ANSWER_LINE_CHARS else line[:ANSWER_LINE_CHARS] + "…")
    return out
