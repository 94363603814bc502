"""Loaders for the evaluation files (JSON lines)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class Passage:
    doc_id: str
    domain: str
    text: str


@dataclass(frozen=True, slots=True)
class Turn:
    question: str
    answer: str
    gold: tuple[str, ...]
    reference: str | None


@dataclass(frozen=True, slots=True)
class Conversation:
    conv_id: str
    domain: str
    turns: tuple[Turn, ...]


@dataclass(frozen=True, slots=True)
class RewriteItem:
    history: tuple[str, ...]
    question: str
    gold: str
    conv_id: str = ""


def _lines(path: Path) -> list[dict[str, Any]]:
    with Path(path).open(encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def passage_text(row: dict[str, Any]) -> str:
    """The text that is embedded and indexed: the title leads, once."""
    title, text = str(row.get("title") or "").strip(), str(row.get("text") or "").strip()
    return text if not title or text.startswith(title) else f"{title}\n{text}"


def load_corpus(path: Path) -> list[Passage]:
    return [Passage(str(r["doc_id"]), str(r.get("domain") or ""), passage_text(r)) for r in _lines(path)]


def load_conversations(path: Path) -> list[Conversation]:
    out: list[Conversation] = []
    for r in _lines(path):
        turns = tuple(
            Turn(
                question=str(t.get("question") or "").strip(),
                answer=str(t.get("answer") or "").strip(),
                gold=tuple(str(d) for d in t.get("gold_doc_ids") or ()),
                reference=t.get("reference_rewrite"),
            )
            for t in r["turns"]
        )
        out.append(Conversation(str(r.get("conv_id", "")), str(r.get("domain") or ""), turns))
    return out


def load_rewrites(path: Path) -> list[RewriteItem]:
    return [
        RewriteItem(
            tuple(str(h) for h in r.get("history") or ()),
            str(r["question"]),
            str(r["gold_rewrite"]),
            str(r.get("conv_id", "")),
        )
        for r in _lines(path)
        if r.get("gold_rewrite")
    ]
