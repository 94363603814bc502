"""Retrieval metrics (binary relevance) and rewrite-similarity metrics."""

from __future__ import annotations

import math
import re
import string
from collections import Counter
from collections.abc import Iterable, Sequence

from rag_core.text import HAN_CLASS, has_han

# --- retrieval ---------------------------------------------------------------------------------------


def recall_at(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    g = set(gold)
    return len(g & set(ranked[:k])) / len(g) if g else 0.0


def ndcg_at(ranked: Sequence[str], gold: Iterable[str], k: int) -> float:
    g = set(gold)
    if not g:
        return 0.0
    dcg = sum(1.0 / math.log2(i + 2) for i, d in enumerate(ranked[:k]) if d in g)
    ideal = sum(1.0 / math.log2(i + 2) for i in range(min(len(g), k)))
    return dcg / ideal


def reciprocal_rank(ranked: Sequence[str], gold: Iterable[str]) -> float:
    g = set(gold)
    return next((1.0 / (i + 1) for i, d in enumerate(ranked) if d in g), 0.0)


def turn_scores(ranked: Sequence[str], gold: Iterable[str], ks: Sequence[int]) -> dict[str, float]:
    g = list(gold)
    out = {f"recall@{k}": recall_at(ranked, g, k) for k in ks}
    out["ndcg@10"] = ndcg_at(ranked, g, 10)
    out["mrr"] = reciprocal_rank(ranked, g)
    return out


def mean_scores(rows: Sequence[dict[str, float]]) -> dict[str, float]:
    if not rows:
        return {}
    return {key: sum(r[key] for r in rows) / len(rows) for key in rows[0]}


# --- rewrites ----------------------------------------------------------------------------------------

_WORD = re.compile(rf"{HAN_CLASS}|[^\W_]+", re.UNICODE)
_EN_ARTICLES = re.compile(r"\b(a|an|the)\b")


def rewrite_tokens(text: str) -> list[str]:
    """Lowercased word tokens without punctuation; each Chinese character is one token."""
    return _WORD.findall(text.lower())


def normalize_answer(text: str) -> str:
    """SQuAD-style normalization for exact match: lowercase, no punctuation or articles, single spaces;
    Chinese keeps its characters and drops its punctuation and spaces."""
    text = text.lower()
    if has_han(text):
        return "".join(rewrite_tokens(text))
    text = "".join(ch for ch in text if ch not in string.punctuation)
    return " ".join(_EN_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str) -> float:
    p, g = rewrite_tokens(prediction), rewrite_tokens(gold)
    if not p or not g:
        return float(p == g)
    common = sum((Counter(p) & Counter(g)).values())
    if common == 0:
        return 0.0
    precision, recall = common / len(p), common / len(g)
    return 2 * precision * recall / (precision + recall)


def _lcs(a: Sequence[str], b: Sequence[str]) -> int:
    if not a or not b:
        return 0
    prev = [0] * (len(b) + 1)
    for x in a:
        cur = [0]
        for j, y in enumerate(b):
            cur.append(prev[j] + 1 if x == y else max(prev[j + 1], cur[j]))
        prev = cur
    return prev[-1]


def rouge_l(prediction: str, gold: str) -> float:
    """ROUGE-L F1 over `rewrite_tokens` (characters for Chinese)."""
    p, g = rewrite_tokens(prediction), rewrite_tokens(gold)
    if not p or not g:
        return float(p == g)
    lcs = _lcs(p, g)
    if lcs == 0:
        return 0.0
    precision, recall = lcs / len(p), lcs / len(g)
    return 2 * precision * recall / (precision + recall)
