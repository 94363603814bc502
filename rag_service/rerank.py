"""Reordering retrieved chunks with what the dense score misses (stage 4, after the vector search).

The packaged multilingual embedder ranks text in the question's language first and cannot tell sibling
products apart ("iPhone 16" and "iPhone 16 Pro" pages score alike). Cheap signals fix most of it:
- customer-service concepts shared across languages (`glossary`): a page whose title covers the question's
  concepts ("return policy" ~ "退换货政策") is lifted above same-language pages that merely mention them;
- the product named by the question against the product in the page title: a sibling or another model
  is pushed down, the model itself lifted;
- a place named by the question (a country or city, in either language) in the chunk;
- the other language is always in the pool: its best chunks are fetched even when the dense search
  filled the pool with chunks in the question's language, and its chunks that have the question's concepts in
  their own words when none of those does (`Retriever.across`).
Weights are in cosine units (the dense scores here sit in 0.75-0.95 and the cross-language gap is
~0.05-0.08); they were chosen on the project's development questions and checked on a held-back set.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import lru_cache

from rag_core.text import language
from rag_service.domain import Chunk
from rag_service.facts import (
    BASE_WORDS,
    Product,
    names_place_among,
    places,
    product_fit,
    products,
    related_product,
    title_products,
)
from rag_service.glossary import concepts, weight

# The dense score already reflects shared words in the question's language; across languages the shared
# concepts are new evidence, so they weigh more there.
TITLE_CONCEPTS = (0.10, 0.14)
TEXT_CONCEPTS = (0.04, 0.06)
PLACE = (0.03, 0.06)
SAME_PRODUCT = 0.08
OTHER_PRODUCT = -0.10
# A page whose title names no product but whose chunk names only other products (a row of a price table
# for another item) is about them, not about the product asked: a lighter push than a sibling's page.
OTHER_PRODUCTS_NAMED = -0.05
# A question's concepts weighing less than this (one generic concept: "多少钱", "说明") say little about
# which page answers it, so a page sharing only them gets a proportional share of the concept bonuses.
FULL_CONCEPT_WEIGHT = 1.0
# A title (or a chunk's name) this close to the asked product names the product itself (`same_product`).
OWN_PAGE_FIT = 0.8


@dataclass(frozen=True, slots=True)
class Query:
    lang: str
    ideas: frozenset[str]
    named: tuple[Product, ...]
    base_model: bool
    places: frozenset[str]
    # The query's Latin words, lowercase (matched against the romanised names a Chinese page introduces).
    words: frozenset[str] = frozenset()
    # The query's runs of Chinese characters (matched against the Chinese names a page romanises in its title).
    han: tuple[str, ...] = ()

    @classmethod
    def parse(cls, query: str) -> Query:
        named = products(query)
        words = frozenset(w.lower() for w in _LATIN_WORD.findall(query))
        base = BASE_WORDS.search(query) is not None
        return cls(language(query), concepts(query), named, base, places(query), words, tuple(_HAN_RUN.findall(query)))


_LATIN_WORD = re.compile(r"[A-Za-z]{2,}")
_HAN_RUN = re.compile(r"[\u4e00-\u9fff]+")
# A Latin word of a Chinese question that names nothing by itself (a unit, an app, a card, a size letter).
_GENERIC_LATIN_WORDS = "app vip pdf wifi usb id ok pro max plus mini lite air se kg km cm mm ml gb tb"
_GENERIC_LATIN = frozenset(_GENERIC_LATIN_WORDS.split())


@lru_cache(maxsize=4096)
def concept_match(wanted: frozenset[str], got: frozenset[str]) -> float:
    """The weighted share of the question's concepts that the text has, normalised by at least
    `FULL_CONCEPT_WEIGHT`: sharing only the generic concept of "<product> 多少钱" (price) with a price list's
    title is weak evidence that the price list answers it; sharing "return" with a return policy is strong."""
    total = max(FULL_CONCEPT_WEIGHT, sum(weight(c) for c in wanted))
    return sum(weight(c) for c in wanted & got) / total if wanted else 0.0


def bonus(q: Query, chunk: Chunk, own_page: bool = True) -> float:
    """The chunk's bonus. `own_page`: the pool holds a page whose title names the asked product itself
    (then pages titled by its family or a sibling are siblings' pages); without one, a page of the product's
    family whose chunk names the asked model is the product's page (one page for "X / X Pro / X Max")."""
    title = chunk.title
    across = int((chunk.lang or language(chunk.text)) != q.lang)
    # Only the question's concepts count, so only they are looked for in a chunk not read before.
    b = TITLE_CONCEPTS[across] * concept_match(q.ideas, concepts(_heading(chunk, bool(across)), q.ideas))
    b += TEXT_CONCEPTS[across] * concept_match(q.ideas, concepts(chunk.text, q.ideas))
    if names_place_among(f"{title} {chunk.section}", q.places) or names_place_among(chunk.text, q.places):
        # A place is named the same way in any language ("美国" ~ "the United States").
        b += PLACE[across]
    if alias_names_page(q.words, chunk):
        # "How much is the Acme 45L?" over a Chinese page titled "雅可背包": the query names the page's brand by the
        # romanisation the page introduces ("雅可（Acme）"). Its product parser reads the two scripts as two
        # products, so this stands for the product bonus (a family page's share of it).
        b += SAME_PRODUCT * 0.5
    elif q.named:
        b += _product_bonus(q, chunk, own_page)
    elif q.lang == "zh" and across:
        b += SAME_PRODUCT * latin_name_share(q.words, chunk)
    return b


def latin_name_share(words: frozenset[str], chunk: Chunk) -> float:
    """The share of a Chinese question's Latin name words ("曜日 Coast Polar 多少钱": coast, polar) that an
    English page files the chunk under (its title and section). A Chinese question writes a product's name in
    Latin letters only when that is its name, and the English page titles that product with the same words; the
    product parser does not take a name without a digit or a variant word for a product."""
    named = {w for w in words if len(w) >= 3 and w not in _GENERIC_LATIN}
    if not named:
        return 0.0
    heading = {w.lower() for w in _LATIN_WORD.findall(f"{chunk.title} {chunk.section}")}
    return len(named & heading) / len(named)


def romanised_brand(han: Sequence[str], chunk: Chunk, titled: Sequence[Product]) -> bool:
    """Are the page title's products the romanisation of a Chinese name the query writes in characters
    ("青岚 T5 Plus 多少钱" over "青岚（Qinglan）跑步机": the title's product is "Qinglan")? Then the page is the
    family's, not another product's."""
    pairs = _alias_pairs(chunk.aliases)
    if not han or not titled or not pairs:
        return False
    glossed = {latin for h, latin in pairs if h in chunk.title and any(h in run for run in han)}
    return all(t.text.lower() in glossed for t in titled)


def _line_names(asked: list[Product], base: bool, named: list[Product], titled: list[Product], aliases: str) -> bool:
    """Does the chunk name the asked product as a product of the title's line ("Daily 50ml" as "ShieldLight Daily
    SPF50" on the page titled "ShieldLight Sunscreen"), or name it on a page whose title's products are only the
    brand it romanises ("喂喂（Weiwei）智能喂食器": every product on it is the brand's)? Then the page is the line's,
    with the asked model on it, though the question leaves the line's name out."""
    glossed = {latin for _, latin in _alias_pairs(aliases)}
    brand_page = all(t.text.lower() in glossed for t in titled)
    return any(
        (fit := product_fit(asked, base, [p])) is not None
        and fit >= OWN_PAGE_FIT
        and (brand_page or related_product([p], titled))
        for p in named
    )


def alias_names_page(words: frozenset[str], chunk: Chunk) -> bool:
    """Does the query name, in Latin letters, a Chinese name in the chunk's title (by the page's own aliases)?"""
    return bool(words) and any(latin in words and han in chunk.title for han, latin in _alias_pairs(chunk.aliases))


@lru_cache(maxsize=1024)
def _alias_pairs(aliases: str) -> tuple[tuple[str, str], ...]:
    parts = aliases.split()
    return tuple((parts[i], parts[i + 1].lower()) for i in range(0, len(parts) - 1, 2))


def _heading(chunk: Chunk, across: bool) -> str:
    """What the chunk is filed under: its title and its section. A chunk that opens with its section's
    heading, in the question's language, is filed under its title only: the dense score has read the
    heading already (it is the chunk's first line, and embedded with the section too), and a heading inside
    a page is weaker evidence than the page's title (an uploaded page about one thing should not lose to a
    policy page with a matching heading). Across languages the heading's concepts are new evidence."""
    if chunk.section and (across or not chunk.text.startswith(chunk.section)):
        return f"{chunk.title} {chunk.section}"
    return chunk.title


def _product_bonus(q: Query, chunk: Chunk, own_page: bool) -> float:
    asked, titled = list(q.named), list(title_products(chunk.title))
    if romanised_brand(q.han, chunk, titled):
        # The title names the brand only ("青岚（Qinglan）"), which the query writes in characters: the family's page,
        # the asked model's own where the chunk names it.
        mentioned = product_fit(asked, q.base_model, list(products(f"{chunk.section}\n{chunk.text}")))
        return SAME_PRODUCT * (1.0 if mentioned is not None and mentioned >= OWN_PAGE_FIT else 0.5)
    fit = product_fit(asked, q.base_model, titled)
    if fit is not None and (own_page or fit >= OWN_PAGE_FIT):
        return OTHER_PRODUCT if fit == 0 else SAME_PRODUCT * fit
    named = list(products(f"{chunk.section}\n{chunk.text}"))
    mentioned = product_fit(asked, q.base_model, named)
    if fit is None:
        # No product in the title (a price list, a consumables page): the chunk's own names decide, more
        # weakly than a title does (a mention is not a page about it).
        if mentioned is None:
            return 0.0
        if mentioned >= OWN_PAGE_FIT:
            return SAME_PRODUCT * 0.5
        return 0.0 if related_product(asked, named) else OTHER_PRODUCTS_NAMED
    if not related_product(asked, titled):
        # The line's page names the asked model as a price list does: a mention, not a page about it.
        return SAME_PRODUCT * 0.5 if _line_names(asked, q.base_model, named, titled, chunk.aliases) else OTHER_PRODUCT
    # The title names the asked product's family (or the family under another naming).
    return SAME_PRODUCT * (1.0 if mentioned is not None and mentioned >= OWN_PAGE_FIT else 0.5)


def rerank(query: str, chunks: Sequence[Chunk], scale: float = 1.0) -> list[Chunk]:
    """The chunks reordered by dense score plus the bonuses (times `scale`); scores are the adjusted ones."""
    q = _parsed(query)
    own_page = bool(q.named) and any(_names_itself(query, c.title) for c in chunks)
    scored = [c.rescored(c.score + scale * _remembered_bonus(query, q, c, own_page)) for c in chunks]
    return sorted(scored, key=lambda c: -c.score)


# The same question meets the same chunks again on later turns (retrieval of a dependent follow-up, the
# conversation's pages): a chunk's bonus is a function of the question and the chunk's own fields.
# A plain dict, emptied when full: each read and write is atomic, so a reranker shared by threads needs no lock.
_BONUSES: dict[tuple[str, str, str, str, str, str, bool], float] = {}
_BONUS_MEMO = 4096


@lru_cache(maxsize=1024)
def _parsed(query: str) -> Query:
    return Query.parse(query)


@lru_cache(maxsize=4096)
def _names_itself(query: str, title: str) -> bool:
    """Does the title name the product the query asks about itself (`OWN_PAGE_FIT`)?"""
    q = _parsed(query)
    fit = product_fit(list(q.named), q.base_model, list(title_products(title)))
    return fit is not None and fit >= OWN_PAGE_FIT


def _remembered_bonus(query: str, q: Query, chunk: Chunk, own_page: bool) -> float:
    key = (query, chunk.title, chunk.section, chunk.text, chunk.lang, chunk.aliases, own_page)
    found = _BONUSES.get(key)
    if found is None:
        found = bonus(q, chunk, own_page)
        if len(_BONUSES) >= _BONUS_MEMO:
            _BONUSES.clear()
        _BONUSES[key] = found
    return found


def other_language(query: str) -> str:
    return "en" if language(query) == "zh" else "zh"
