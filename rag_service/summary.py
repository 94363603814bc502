"""Compressing older rounds into the running summary.

Whatever the summarizer writes, the order numbers, amounts, dates and identifiers of the folded rounds
survive: those missing from its text are appended as one pinned-facts line. An order number counts as
kept only where the summary still calls it one, and is pinned with its label ("订单号 3187…"): the
summary is PII-masked before it is stored, and a bare 16-19 digit run that passes the Luhn check would
be masked as a bank card (rag_service.privacy keeps a number only in its order context). The line is bounded
(`memory.pinned_facts_max` facts, the most recently mentioned kept; a fact over MAX_FACT_CHARS is not a
fact but a blob): otherwise it grows with every compression until the summary no longer fits the budget
and is dropped whole. What leaves the line is still in the archived messages, which keep every message.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

from rag_core.settings import MemorySettings
from rag_core.tokens import TokenCounter
from rag_service.domain import Round
from rag_service.llm import ChatClient
from rag_service.privacy import ORDER_CONTEXT

PINNED_HEADER = "Pinned facts:"
MAX_FACT_CHARS = 40

_MONTHS = (
    "Jan(?:uary)?|Feb(?:ruary)?|Mar(?:ch)?|Apr(?:il)?|May|June?|July?|Aug(?:ust)?|Sep(?:t(?:ember)?)?|"
    "Oct(?:ober)?|Nov(?:ember)?|Dec(?:ember)?"
)
# 8999, 8,999, 1,099.00 (a thousands comma never ends the number: "USD 99, and")
_NUMBER = r"\d(?:[\d,]*\d)?(?:\.\d+)?"
_FACT_PATTERNS = [
    # dates: 2024-11-05, 2024/11/5, 2024年11月5日, 11月5日, 11月5号
    r"\d{4}[-/.]\d{1,2}[-/.]\d{1,2}",
    r"\d{4}年\d{1,2}月(?:\d{1,2}[日号])?",
    r"\d{1,2}月\d{1,2}[日号]",
    # phone-like ids: 400-820-1234, 13812345678
    r"\d{3,4}-\d{3,4}-\d{4}",
    r"(?<!\d)1[3-9]\d{9}(?!\d)",
    # amounts with a currency: 7,999 元, ¥299, $1,099.00, 299元, 1.5万元, RMB 500
    rf"[¥￥$]\s?{_NUMBER}",
    rf"{_NUMBER}\s?(?:万元|元|块钱|块|rmb|RMB|CNY|USD|dollars?)",
    rf"(?:RMB|CNY|USD)\s?{_NUMBER}",
    # English dates: March 1, 2025 / Mar 1 2025 / 1 March 2025
    rf"(?<![A-Za-z])(?:{_MONTHS})\.?\s\d{{1,2}}(?:st|nd|rd|th)?,?\s\d{{4}}",
    rf"\d{{1,2}}\s(?:{_MONTHS})\.?,?\s\d{{4}}",
    # order numbers and other identifiers: letters and digits mixed, at least 6 long (XC20241105001).
    # ASCII boundaries, not \b: Chinese text runs straight into them ("订单号XC20241105001的").
    r"(?<![A-Za-z0-9-])(?=[A-Za-z0-9-]*\d)(?=[A-Za-z0-9-]*[A-Za-z])[A-Za-z0-9][A-Za-z0-9-]{5,}(?![A-Za-z0-9-])",
    # long digit runs (order / tracking numbers written without letters)
    r"(?<![\d.])\d{8,}(?![\d.])",
]
_FACTS = re.compile("|".join(f"(?:{p})" for p in _FACT_PATTERNS))


def key_facts(text: str, *, by_recency: bool = False) -> list[str]:
    """The facts of `text`, each once however spaced ("8999元" = "8,999 元"), in their spelling at first
    mention: in order of first appearance, or with `by_recency` of last appearance."""
    spelling: dict[str, str] = {}
    position: dict[str, int] = {}
    found = [(m.start(), m.group().strip()) for m in _FACTS.finditer(text)]
    # Whatever the conversation calls an order number is one, even when no other pattern takes it.
    found += [(m.start("value"), m.group("value")) for m in ORDER_CONTEXT.finditer(text)]
    for start, fact in sorted(found):
        if len(fact) > MAX_FACT_CHARS:
            continue
        key = _norm(fact)
        spelling.setdefault(key, fact)
        if by_recency or key not in position:
            position[key] = start
    return [spelling[key] for key in sorted(position, key=position.__getitem__)]


def pin_facts(summary: str, rounds: Sequence[Round], previous_summary: str, limit: int | None = None) -> str:
    """Append the facts of `rounds` (and of the previous summary) that `summary` no longer contains, at
    most `limit` of them: the most recently mentioned. A pinned line the summarizer copied into its text
    is replaced, so there is one line and the limit holds for it."""
    body = "\n".join(line for line in summary.splitlines() if not line.startswith(PINNED_HEADER)).rstrip()
    source = previous_summary + "\n" + "\n".join(f"{r.user.content}\n{r.assistant.content}" for r in rounds)
    labels = {_norm(m.group("value")): m.group("label") for m in ORDER_CONTEXT.finditer(source)}
    normalized = _norm(body)
    kept_orders = {_norm(m.group("value")) for m in ORDER_CONTEXT.finditer(body)}
    missing: list[str] = []
    for fact in key_facts(source, by_recency=True):
        key = _norm(fact)
        if key in labels:
            if key not in kept_orders:
                missing.append(f"{labels[key]} {fact}")
        elif key not in normalized:
            missing.append(fact)
    if limit is not None:
        missing = missing[-limit:] if limit > 0 else []
    lines = [body] if body else []
    if missing:
        lines.append(f"{PINNED_HEADER} {'; '.join(missing)}")
    return "\n".join(lines) or summary


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
    """No-LLM default: the user's questions in order, capped, newest kept when over the cap."""

    def __init__(self, counter: TokenCounter, settings: MemorySettings) -> None:
        self.counter, self.settings = counter, settings

    async def summarize(self, previous: str, rounds: Sequence[Round]) -> str:
        lines = [line for line in previous.splitlines() if line and not line.startswith(PINNED_HEADER)]
        lines += [f"- The user asked: {r.user.content.strip()}" for r in rounds]
        while len(lines) > 1 and self.counter.count("\n".join(lines)) > self.settings.summary_max_tokens:
            lines.pop(0)
        return "\n".join(lines)
