"""Sparse BM25-style vectors for hybrid retrieval.

Terms come from jieba's search-mode segmentation (Chinese words and their sub-words) plus lowercase
Latin words and numbers. Documents carry BM25 term-frequency weights; queries carry 1 per term; Qdrant's
IDF modifier supplies the inverse document frequency, so the index needs no corpus statistics here.
"""

from __future__ import annotations

import logging
import re
import zlib
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import lru_cache

import jieba

from rag_core.text import EN_STOP_WORDS, HAN_CLASS, ZH_STOP_WORDS

jieba.setLogLevel(logging.WARNING)

_TOKEN = re.compile(rf"[a-z0-9]+(?:[.\-][a-z0-9]+)*|{HAN_CLASS}+")
_STOP = ZH_STOP_WORDS | EN_STOP_WORDS


@dataclass(frozen=True)
class SparseVec:
    indices: list[int]
    values: list[float]


def terms(text: str) -> list[str]:
    return list(_terms(text))


# The same texts come back on every turn (a knowledge base's chunks and sentences, the session's earlier
# questions) and jieba's segmentation is the costly part of reading them: remember recent ones.
@lru_cache(maxsize=16384)
def _terms(text: str) -> tuple[str, ...]:
    out: list[str] = []
    for match in _TOKEN.finditer(text.lower()):
        piece = match.group()
        if not piece[0].isascii():
            out.extend(w for w in jieba.lcut_for_search(piece) if w not in _STOP)
        elif piece not in _STOP:
            out.append(piece)
    return tuple(out)


def _index(term: str) -> int:
    return zlib.crc32(term.encode("utf-8"))


def document_vector(text: str, avg_len: int, k1: float, b: float) -> SparseVec:
    counts = Counter(_index(t) for t in terms(text))
    length = sum(counts.values()) or 1
    norm = k1 * (1 - b + b * length / avg_len)
    idx = sorted(counts)
    return SparseVec(idx, [counts[i] * (k1 + 1) / (counts[i] + norm) for i in idx])


def query_vector(text: str) -> SparseVec:
    idx = sorted({_index(t) for t in terms(text)})
    return SparseVec(idx, [1.0] * len(idx))


def grouped_vector(groups: Sequence[str]) -> SparseVec:
    """A query of several texts that weigh alike (a question's concepts, each written several ways): each
    text's terms share a weight of 1, so a text of many words or spellings counts no more than a text of one."""
    weights: dict[int, float] = {}
    for text in groups:
        found = {_index(t) for t in terms(text)}
        for i in found:
            weights[i] = max(weights.get(i, 0.0), 1.0 / len(found))
    idx = sorted(weights)
    return SparseVec(idx, [weights[i] for i in idx])


def term_vector(weights: Mapping[str, float]) -> SparseVec:
    """A query of given terms (words as `terms` cuts them) with given weights."""
    found: dict[int, float] = {}
    for term, w in weights.items():
        i = _index(term)
        found[i] = max(found.get(i, 0.0), w)
    idx = sorted(found)
    return SparseVec(idx, [found[i] for i in idx])


def warm_up() -> None:
    """jieba loads its dictionary lazily (~1 s); do it at start-up, not on the first turn."""
    jieba.initialize()
