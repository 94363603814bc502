"""Reordering retrieved chunks with what the dense score misses (stage 4, after the vector search).

The packaged multilingual embedder ranks text in the question's language first and cannot tell sibling
products apart ("iPhone 16" and "iPhone 16 Pro" pages score alike). Cheap signals fix most of it:
- customer-service concepts shared across languages (`glossary`): a page whose title covers the question's
  concepts ("return policy" ~ "退换货政策") is lifted above same-language pages that merely mention them;
- the product named by the question against the product in the page title: a sibling or another model
  is pushed down, the model itself lifted;
- a place named by the question (a country or city, in either language) in the chunk;
- the other language is always in the pool: its best chunks are fetched even when the dense search
  filled the pool with chunks in the question's language.
Weights are in cosine units (the dense scores here sit in 0.75-0.95 and the cross-language gap is
~0.05-0.08); they were chosen on the project's development questions and checked on a held-back set.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from functools import lru_cache

from rag_core.text import is_heading, language
from rag_service.domain import Chunk
from rag_service.facts import BASE_WORDS, Product, places, product_fit, products
from rag_service.glossary import concepts, coverage

# The dense score already reflects shared words in the question's language; across languages the shared
# concepts are new evidence, so they weigh more there.
TITLE_CONCEPTS = (0.10, 0.14)
TEXT_CONCEPTS = (0.04, 0.06)
PLACE = (0.03, 0.06)
SAME_PRODUCT = 0.08
OTHER_PRODUCT = -0.10


@dataclass(frozen=True, slots=True)
class Query:
    lang: str
    ideas: frozenset[str]
    named: tuple[Product, ...]
    base_model: bool
    places: frozenset[str]

    @classmethod
    def parse(cls, query: str) -> Query:
        named = products(query)
        return cls(language(query), concepts(query), named, BASE_WORDS.search(query) is not None, places(query))


@lru_cache(maxsize=4096)
def headings(text: str, section: str) -> str:
    """The headings over the chunk's text: those inside it, and the one it starts under unless its first
    line is a heading itself (then that section's body is in the previous chunk, not this one)."""
    lines = [line.strip() for line in text.split("\n") if line.strip()]
    inside = [line for line in lines if is_heading(line)]
    starts_under = section if section and not (lines and is_heading(lines[0])) else ""
    return " ".join([starts_under, *inside]).strip()


def bonus(q: Query, chunk: Chunk) -> float:
    title = chunk.title
    across = int((chunk.lang or language(chunk.text)) != q.lang)
    b = TITLE_CONCEPTS[across] * coverage(q.ideas, concepts(f"{title} {headings(chunk.text, chunk.section)}"))
    b += TEXT_CONCEPTS[across] * coverage(q.ideas, concepts(chunk.text))
    if q.places and q.places & (places(chunk.text) | places(f"{title} {chunk.section}")):
        # A place is named the same way in any language ("美国" ~ "the United States").
        b += PLACE[across]
    if q.named:
        fit = product_fit(list(q.named), q.base_model, list(products(title)))
        if fit is not None:
            b += OTHER_PRODUCT if fit == 0 else SAME_PRODUCT * fit
    return b


def rerank(query: str, chunks: Sequence[Chunk], scale: float = 1.0) -> list[Chunk]:
    """The chunks reordered by dense score plus the bonuses (times `scale`); scores are the adjusted ones."""
    q = Query.parse(query)
    scored = [replace(c, score=c.score + scale * bonus(q, c)) for c in chunks]
    return sorted(scored, key=lambda c: -c.score)


def other_language(query: str) -> str:
    return "en" if language(query) == "zh" else "zh"
