"""Retrieval: embed the query, search Qdrant (dense, or dense + BM25 fused by RRF), then fill the chunk
budget greedily by score with whole chunks.

A dependent follow-up ("还没出库的话能换颜色吗" after a question about an order, "and if the receipt is gone?")
rarely names its page: its own words match many pages a little. It leans toward the documents the questions
it continues found (`RewriteResult.continues`: their searches are remembered, see `FoundDocuments`), so
it stays on its page unless another page fits it clearly better; a follow-up that names another product or
subject carries no such questions (`RuleRewriter.continuity`). The best chunk of the page the previous question
found first is taken into a follow-up's candidates (`continued`) when its own words rank it below them."""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from functools import lru_cache

from rag_core.embedding import Embedder, Vector, embed_query_off_loop
from rag_core.lexical import SparseVec, grouped_vector, query_vector
from rag_core.recent import Recent
from rag_core.settings import RetrievalSettings
from rag_core.text import language
from rag_core.vectorstore import ScoredChunk, VectorIndex
from rag_service.bridge import Bridge, Bridges, says
from rag_service.domain import Chunk
from rag_service.facts import BASE_WORDS, product_fit, products
from rag_service.filler import search_text
from rag_service.glossary import GENERIC, concepts, phrases
from rag_service.rerank import SAME_PRODUCT, other_language, rerank


@dataclass(frozen=True, slots=True)
class Searched:
    """A search's candidates before its lean (reranked, cut to what the lean reads: no text) and the scale
    its lean lifts by."""

    chunks: tuple[Chunk, ...]
    scale: float
    # Its own best chunk has a specific concept of the question's (`has_own_page`).
    own_page: bool = False


class FoundDocuments(Recent[tuple[str, str, int], Searched]):
    """(tenant, query, limit) -> that search's `Searched`, for the recent searches. A follow-up leans on
    the documents its predecessors found, each leaned on its own predecessors: that is their remembered
    candidates leaned again (cheap), not their searches run again (an embedding and an index search each).
    A document deleted since is harmless here (the lean only reads which documents were found, and no chunk
    of a deleted one is found to lift), so entries need no invalidation, only a bound."""

    def __init__(self, size: int = 2048) -> None:
        super().__init__(size)


class ShownDocuments(Recent[tuple[str, str, int, tuple[str, ...]], tuple[Chunk, ...]]):
    """(tenant, query, limit, the questions it continued) -> the best `PRIOR_CHUNKS` chunks (no text) a
    follow-up's search returned. The next follow-up leans on what this one found, and leaning the remembered
    candidates again gives that only with the same history: the history passed on is cut at a fixed depth, and
    its oldest question, leaned on nothing, may have found another page first than it did in the conversation."""

    def __init__(self, size: int = 2048) -> None:
        super().__init__(size)


@dataclass(frozen=True, slots=True)
class Retriever:
    index: VectorIndex
    embedder: Embedder
    settings: RetrievalSettings
    found: FoundDocuments = field(default_factory=FoundDocuments)
    shown: ShownDocuments = field(default_factory=ShownDocuments)
    bridges: Bridges = field(default_factory=Bridges)

    async def search(
        self, query: str, limit: int | None = None, *, tenant: str | None = None, continues: Sequence[str] = ()
    ) -> list[Chunk]:
        """Candidates for `query` from `tenant`'s documents (None: the default tenant's); `continues`: the
        earlier questions a follow-up continues, the latest first (their documents are lifted)."""
        cfg = self.settings
        n = limit or cfg.candidates
        # The embedding alone reads the query without its filler; the reranker and the lean read it whole.
        dense = await embed_query_off_loop(self.embedder, search_text(query))
        sparse = query_vector(query) if cfg.mode == "hybrid" else None
        prior = await self.prior(continues, tenant) if continues else {}
        if not cfg.rerank:
            found = [_to_chunk(h) for h in await self.index.search(dense, sparse, n, cfg.rrf_k, tenant=tenant)]
            scale = 1.0 if cfg.mode == "dense" else _rrf_scale(found)
            return self._remember(tenant, query, n, found, scale, prior, continues)
        # A wide pool with only the language of each hit (cheap), narrowed to the best `n` plus the other
        # language's best: the embedder ranks the question's own language first, and an English question
        # may have its answer on a Chinese page. Whole payloads are read for the narrowed pool only.
        other = other_language(query)
        size = max(n, cfg.rerank_pool)
        # The documents of the pool's chunks: a follow-up takes in the pages it continues (below), and a page
        # the best chunk refers to is taken in from the pool (`_referred`).
        scored = await self.index.search(dense, sparse, size, cfg.rrf_k, tenant=tenant, payload=["lang", "doc_id"])
        pool = [(h.id, h.score, str(h.payload.get("lang", ""))) for h in scored]
        docs = {h.id: str(h.payload.get("doc_id", "")) for h in scored}
        picked = [(i, score) for i, score, _ in pool[:n]]
        others = [(i, score) for i, score, lang in pool[n:] if lang == other][: cfg.other_language_chunks]
        have = sum(lang == other for _, _, lang in pool[:n]) + len(others)
        # (Dense scores only: fused hybrid scores are reciprocal ranks and would not compare.)
        if cfg.mode == "dense" and have < cfg.other_language_chunks and len(pool) >= cfg.rerank_pool:
            seen = {i for i, _, _ in pool}
            extra = await self.index.search(
                dense, None, cfg.other_language_chunks, cfg.rrf_k, tenant=tenant, lang=other, payload=False
            )
            others.extend((h.id, h.score) for h in extra if h.id not in seen)
        hits = picked + others[: cfg.other_language_chunks]
        if prior:
            hits += continued(pool[n:], docs, prior, {i for i, _ in hits})
        payloads = await self.index.payloads([i for i, _ in hits], tenant)
        chunks = [_to_chunk(ScoredChunk(i, score, payloads[i])) for i, score in hits if i in payloads]
        if cfg.mode == "dense" and cfg.concept_chunks:
            chunks += await self.across(query, dense, other, tenant, chunks)
        scale = 1.0 if cfg.mode == "dense" else _rrf_scale(chunks)
        if cfg.bridged:
            chunks = await self.bridged(query, dense, other, tenant, chunks, scale)
        ranked = numbered(query, rerank(query, chunks, scale), scale)
        result = self._remember(tenant, query, n, ranked, scale, prior, continues)
        if cfg.bridged and result:
            result = await self._referred(query, result, pool, docs, tenant)
        return result

    async def _referred(
        self,
        query: str,
        result: list[Chunk],
        pool: Sequence[tuple[str, float, str]],
        docs: dict[str, str],
        tenant: str | None,
    ) -> list[Chunk]:
        """`result` with the best chunk of the page its best chunk refers to by title ("替换件的价格见《配件价格表》")
        second, when that page is not among its first `REFERRED_WITHIN` chunks: the page that says where the answer
        is ranks above the page that has it, which the question's words may not reach (another language, the
        table's terse rows), when the sentence that refers to it says something of the question's (`_refers_for`):
        a product page points to the price list for its spare parts, which a question about instalments is not."""
        bridge = await self.bridges.get(self.index, tenant)
        near = {c.doc_id for c in result[:REFERRED_WITHIN]}
        found = next(
            (
                (d, why)
                for d, why in bridge.referred(result[0].text)
                if d not in near and _refers_for(query, why, bridge)
            ),
            None,
        )
        if found is None:
            return result
        wanted, why = found
        # The pool's chunks of that page (its best few by the question's dense score), read whole: the one
        # sharing most of the referring sentence's words ("替换剑麻柱的价格") is the row it points at.
        theirs = [(i, score) for i, score, _ in pool if docs.get(i) == wanted][:REFERRED_READ]
        taken = {c.id for c in result}
        payloads = await self.index.payloads([i for i, _ in theirs if i not in taken], tenant) if theirs else {}
        read = [c for c in result if c.doc_id == wanted]
        read += [_to_chunk(ScoredChunk(i, score, payloads[i])) for i, score in theirs if i in payloads]
        if not read:
            return result
        clue = _bigrams(why)
        best = max(read, key=lambda c: (len(clue & _bigrams(c.text)), c.score))
        kept = [c for c in result if c.id != best.id]
        return [kept[0], best, *kept[1:]][: len(result)]

    async def translated(self, query: str, tenant: str | None = None) -> tuple[tuple[str, frozenset[str]], ...]:
        """The query's own words that the glossary does not know, each with its alternatives in the collection's
        other language by its dictionary bridge (`rag_service.bridge`; none with the bridge off)."""
        if not self.settings.bridged:
            return ()
        bridge = await self.bridges.get(self.index, tenant)
        return tuple((w, frozenset(g)) for w, g in bridge.translations(query, other_language(query)))

    async def across(
        self, query: str, dense: Vector, other: str, tenant: str | None, chunks: Sequence[Chunk]
    ) -> list[Chunk]:
        """Chunks of language `other` with the query's specific concepts, when no candidate in that language
        (`chunks`) has them all: the best `concept_pool` matches of those concepts' phrases in that language
        (`concept_words`), at most `concept_chunks` of them (the best by dense score), less the candidates.
        The embedder ranks text in the question's language first: "how much is the lens solution?" may find
        its Chinese price table's row below a dozen Chinese chunks about lenses and prices, and the reranker
        can only lift what the candidates hold. When a candidate in that language says all the question asks
        about already, the reranker has its page to lift ("is it still under warranty?": more chunks of the
        warranty page would only push the product's own warranty line out of the prompt)."""
        ideas = concepts(query) - GENERIC
        theirs = [c for c in chunks if c.lang == other]
        # None in that language: the collection has none (the pool is all of it, or that language's own dense
        # search found none: `search`), as in a shop with pages in one language only.
        if not ideas or not theirs:
            return []
        for c in theirs:
            if concepts(f"{c.title}\n{c.section}\n{c.text}", ideas) == ideas:
                return []
        words = concept_words(ideas, other)
        if words is None:
            return []
        cfg = self.settings
        found = await self.index.matching(dense, words, cfg.concept_chunks, cfg.concept_pool, lang=other, tenant=tenant)
        return await self._joining(found, chunks, tenant)

    async def _joining(
        self, found: Sequence[tuple[str, float]], chunks: Sequence[Chunk], tenant: str | None
    ) -> list[Chunk]:
        """The matches (id, dense score) that are not among the candidates yet, read whole."""
        taken = {c.id for c in chunks}
        new = [(i, score) for i, score in found if i not in taken]
        payloads = await self.index.payloads([i for i, _ in new], tenant) if new else {}
        return [_to_chunk(ScoredChunk(i, score, payloads[i])) for i, score in new if i in payloads]

    async def bridged(
        self, query: str, dense: Vector, other: str, tenant: str | None, chunks: list[Chunk], scale: float
    ) -> list[Chunk]:
        """The candidates with the question's own words in language `other` by the collection's dictionary
        bridge (`rag_service.bridge`): when no candidate in that language has them all, that language's best word-
        index matches of them join (dense mode; `bridge_chunks` of `bridge_pool`), and each candidate in that
        language is lifted by the share of them it has (`bridge_lift`). The glossary gives the other language's
        wording of customer-service words; a shop's own goods and their parts are not in it, and the embedder
        keeps the question's language on top ("is there a patch for a torn sail?" finds the English pages about
        repairs above the Chinese page that sells 补丁)."""
        cfg = self.settings
        if not any(c.lang == other for c in chunks):
            return chunks
        bridge = await self.bridges.get(self.index, tenant)
        groups = bridge.groups(query, other)
        if not groups:
            return chunks
        out = list(chunks)
        if (
            cfg.mode == "dense"
            and cfg.bridge_chunks
            and sum(bridge.share(c.id, groups) >= 1.0 for c in chunks if c.lang == other) < BRIDGE_HAVING
        ):
            found = await self.index.matching(
                dense, bridge.vector(groups), cfg.bridge_chunks, cfg.bridge_pool, lang=other, tenant=tenant
            )
            out += await self._joining(found, chunks, tenant)
        if not cfg.bridge_lift:
            return out
        named = bridge.named(query) if other == "en" else ()
        return [
            c.rescored(c.score + scale * (cfg.bridge_lift * bridge.share(c.id, groups) + _name_lift(named, c)))
            if c.lang == other
            else c
            for c in out
        ]

    def _remember(
        self,
        tenant: str | None,
        query: str,
        n: int,
        ranked: list[Chunk],
        scale: float,
        prior: dict[str, float],
        continues: Sequence[str] = (),
    ) -> list[Chunk]:
        """The search's result (its candidates leaned on `prior`); the candidates are remembered for the
        follow-ups that will lean on this search, and so are the documents of its result (`ShownDocuments`)."""
        own_page = has_own_page(query, ranked)
        self.found.put((tenant or "", query, n), Searched(tuple(c.without_text() for c in ranked), scale, own_page))
        result = lean(query, ranked, prior, scale, own_page)[:n]
        if continues:
            shown = tuple(c.without_text() for c in result[:PRIOR_CHUNKS])
            key = tenant or ""
            # A follow-up passes its history on cut at a fixed depth: the next question reads this one with its
            # oldest question left out.
            self.shown.put((key, query, n, tuple(continues[:-1])), shown)
            self.shown.put((key, query, n, tuple(continues)), shown)
        return result

    async def prior(self, continues: Sequence[str], tenant: str | None) -> dict[str, float]:
        """Document id -> weight: the documents of the best chunks the previous question found (itself read
        with what it continued), the best one most."""
        return _weights(await self._leaned(continues, tenant))

    async def _leaned(self, chain: Sequence[str], tenant: str | None) -> list[Chunk]:
        """What `search(chain[0], continues=chain[1:])` returns (its order and documents; remembered chunks
        carry no text). The previous turns usually ran these very searches, so their candidates are
        remembered and only leaned again; a search not remembered is run."""
        n = self.settings.candidates
        shown = self.shown.get((tenant or "", chain[0], n, tuple(chain[1:])))
        if shown is not None:
            return list(shown)
        searched = self.found.get((tenant or "", chain[0], n))
        if searched is None:
            return await self.search(chain[0], tenant=tenant, continues=chain[1:])
        prior = _weights(await self._leaned(chain[1:], tenant)) if len(chain) > 1 else {}
        return lean(chain[0], searched.chunks, prior, searched.scale, searched.own_page)[:n]


@lru_cache(maxsize=1024)
def concept_words(ideas: frozenset[str], lang: str) -> SparseVec | None:
    """A word-index query for the concepts as a page in `lang` writes them (`glossary.phrases`), each concept
    weighing alike; None when they have no phrase in that language."""
    words = grouped_vector([phrases(frozenset([idea]), lang) for idea in sorted(ideas)])
    return words if words.indices else None


def continued(
    pool: Sequence[tuple[str, float, str]], docs: dict[str, str], prior: dict[str, float], taken: set[str]
) -> list[tuple[str, float]]:
    """The best `CONTINUED_CHUNKS` chunks of the page the previous question found first (weight 1 in `prior`)
    that the pool holds beyond what was taken. A follow-up's own words may rank every chunk of the page it
    continues below the candidates (a question in the other language, a question that names nothing): the
    lean can only lift what is there. The pages found after it are left to the follow-up's own words: taken in
    and lifted, an older page of the chain came to outrank the one the customer had moved on to."""
    out: list[tuple[str, float]] = []
    count: dict[str, int] = {}
    for i, score, _ in pool:
        doc = docs.get(i, "")
        if i in taken or prior.get(doc, 0.0) < 1.0 or count.get(doc, 0) >= CONTINUED_CHUNKS:
            continue
        count[doc] = count.get(doc, 0) + 1
        out.append((i, score))
    return out


def _name_lift(named: Sequence[Sequence[str]], chunk: Chunk) -> float:
    """`NAME_LIFT` for an English chunk whose title names, in letters, a name the question writes in characters
    ("鹿鸣台灯多少钱" over "Lumo Desk Lamps", which introduces "Lumo (鹿鸣)"): the page is the named brand's,
    as a title naming the asked product is (`rerank.SAME_PRODUCT`)."""
    if not named:
        return 0.0
    title = set(_LATIN_WORDS.findall(chunk.title.lower()))
    return NAME_LIFT if any(all(w in title for w in name) for name in named) else 0.0


_LATIN_WORDS = re.compile(r"[a-z]+")


def _refers_for(query: str, sentence: str, bridge: Bridge) -> bool:
    """Does the sentence say something of the query's: one of its specific concepts, one of its words in the
    other language by the dictionary bridge, or one of its words (a pair of Chinese characters, a Latin word)?"""
    ideas = concepts(query) - GENERIC
    if ideas and concepts(sentence, ideas):
        return True
    if any(says(bridge.groups(query, other_language(query)), sentence)):
        return True
    return bool(_bigrams(query) & _bigrams(sentence))


_BIGRAM_TEXT = re.compile(r"[\u4e00-\u9fff]{2,}|[A-Za-z]{3,}")


def _bigrams(text: str) -> frozenset[str]:
    """The text's runs of Chinese characters as character pairs, and its Latin words (lowercase)."""
    out: set[str] = set()
    for run in _BIGRAM_TEXT.findall(text):
        if run.isascii():
            out.add(run.lower())
        else:
            out.update(run[i : i + 2] for i in range(len(run) - 1))
    return frozenset(out)


def _weights(found: Sequence[Chunk]) -> dict[str, float]:
    weights: dict[str, float] = {}
    for chunk in found[:PRIOR_CHUNKS]:
        if chunk.doc_id not in weights:
            weights[chunk.doc_id] = PRIOR_DECAY ** len(weights)
    return weights


# A follow-up's lean toward the previous question's documents, in cosine units (dense scores of one query
# spread over ~0.2; a page fitting the follow-up clearly better still wins), for the documents of that
# question's best `PRIOR_CHUNKS` chunks, each next document `PRIOR_DECAY` times the one before.
DOC_PRIOR = 0.08
PRIOR_CHUNKS = 3
PRIOR_DECAY = 0.5
# Where a follow-up's own best chunk on a page not leaned on is kept at the latest (0-based, `lean`).
OWN_BEST_RANK = 2
# ... when its score is above the best chunk of the leaned-on pages by this much (a quarter of the full lean):
# a question that moves on fits its own page clearly better; a follow-up that continues fits both about alike.
OWN_BEST_MARGIN = DOC_PRIOR / 4
# Where the best chunk of the continued page in the other language is kept at the latest (0-based, `lean`).
ACROSS_KEPT_RANK = 0
# ... and at the latest this one when the follow-up has a page of its own (`has_own_page`): its own page stays
# first, and the continued page may still have the answer ("can I cancel it?" after questions about a plan: the
# returns policy is the question's own page, the plan's page has its own terms).
ACROSS_KEPT_OWN_RANK = 2
# A page the best chunk refers to is taken in second unless it has one of the first this many chunks (`_referred`).
REFERRED_WITHIN = 3
# How many of the referred page's best chunks in the pool are read for the one the reference points at.
REFERRED_READ = 10
# The lift of an English page whose title names the brand a Chinese question names in characters (`_name_lift`):
# the reranker's for a page whose title names the asked product.
NAME_LIFT = SAME_PRODUCT
# The other language's word-index matches join unless this many candidates in it have all the question's translated
# words: one that has them may only name them in passing (a product page's "can it take mudguards?" above the
# price list's row of them).
BRIDGE_HAVING = 2
# How many chunks of the continued page a follow-up's candidates take in beyond its own best (`continued`).
CONTINUED_CHUNKS = 1


def has_own_page(query: str, ranked: Sequence[Chunk]) -> bool:
    """Does the query's own best chunk have one of its specific concepts (not a generic one: "多少钱", "要几天")?
    A short follow-up's own words match a page by chance; a question that moves on names what its page is about."""
    ideas = concepts(query) - GENERIC
    return bool(ideas and ranked and concepts(ranked[0].text, ideas))


def lean(
    query: str, chunks: Sequence[Chunk], prior: dict[str, float], scale: float = 1.0, own_page: bool = False
) -> list[Chunk]:
    """The chunks reordered with the documents of `prior` lifted by their weight times `DOC_PRIOR`. A page
    whose title names the query's product is lifted by the reranker already ("Zeta 14 Pro 教师买能便宜多少"
    may be answered on the teacher-discount page): the two do not add up."""
    if not prior:
        return list(chunks)
    named = list(products(query))
    base = BASE_WORDS.search(query) is not None

    def lift(c: Chunk) -> float:
        weight = prior.get(c.doc_id, 0.0)
        if weight and named and (product_fit(named, base, list(products(c.title))) or 0.0) > 0:
            return 0.0
        return scale * DOC_PRIOR * weight

    leaned = sorted((c.rescored(c.score + lift(c)) for c in chunks), key=lambda c: -c.score)
    # The question's own best chunk (`own_page`), on a page the previous questions did not find, stays among
    # the first `OWN_BEST_RANK` + 1: a question that moves on ("Is there a yearly plan …?" after questions
    # about a service) has its page there, and the lean would fill the prompt with the previous pages' chunks.
    own = chunks[0] if chunks and own_page else None
    rival = next((c.score for c in chunks if c.doc_id in prior), None)
    if own is not None and own.doc_id not in prior and (rival is None or own.score - rival >= OWN_BEST_MARGIN * scale):
        at = next(i for i, c in enumerate(leaned) if c.id == own.id)
        if at > OWN_BEST_RANK:
            leaned.insert(OWN_BEST_RANK, leaned.pop(at))
    return _across_kept(query, leaned, prior, own_page)


def _across_kept(query: str, leaned: list[Chunk], prior: dict[str, float], own_page: bool) -> list[Chunk]:
    """`leaned` with the best chunk of the page the previous question found first (weight 1 in `prior`) among
    the first `ACROSS_KEPT_RANK` + 1 (`ACROSS_KEPT_OWN_RANK` + 1 after the follow-up's own new page) when that page
    is in the other language than the follow-up. The lean is in
    cosine units, and a follow-up's own words score a page in the other language lower by the cross-language
    gap as well as by what they leave unsaid: "100ml 的多少钱" after a question answered on an English product
    page finds the Chinese price lists of every product above it, and the lift cannot bridge both."""
    rank = ACROSS_KEPT_RANK
    if own_page:
        # Only a follow-up that moves to a page the conversation has not shown: one whose own page is among the
        # previous pages is on them already.
        if not leaned or leaned[0].doc_id in prior:
            return leaned
        rank = ACROSS_KEPT_OWN_RANK
    lang = language(query)
    at = next((i for i, c in enumerate(leaned) if prior.get(c.doc_id, 0.0) >= 1.0), None)
    if at is None or at <= rank or leaned[at].lang in ("", lang):
        return leaned
    leaned.insert(rank, leaned.pop(at))
    return leaned


# A chunk that has the figures the question names ("the 2.5 mm cable", "the 72-hour test", "a 450g
# pan") is lifted by this times the share of them it has, in cosine units: a figure is written alike in
# either language, which the embedder barely weighs, and more so across languages (same, other).
NUMBERS = (0.04, 0.06)
# What a question's figure must look like to name something: two digits at least, or a decimal; not a year,
# nor an order or phone number (several digits), nor part of a model name ("E3", "Gen 5").
_FIGURE = re.compile(r"(?<![\w.:])(\d+\.\d+|[1-9]\d{1,5})(?![\d.:]\d)")
_THOUSANDS = re.compile(r"(?<=\d),(?=\d{3})")
_YEAR = re.compile(r"^(?:19|20)\d\d$")


@lru_cache(maxsize=4096)
def figures(text: str) -> frozenset[str]:
    """The figures a question names (`_FIGURE`)."""
    return frozenset(f for f in _FIGURE.findall(_THOUSANDS.sub("", text)) if not _YEAR.match(f))


def numbered(query: str, ranked: Sequence[Chunk], scale: float = 1.0) -> list[Chunk]:
    """`ranked` reordered with the chunks that have the query's figures lifted (`NUMBERS`)."""
    wanted = figures(query)
    if not wanted:
        return list(ranked)
    lang = language(query)

    def lift(c: Chunk) -> float:
        share = len(wanted & figures(f"{c.title} {c.section} {c.text}")) / len(wanted)
        return scale * NUMBERS[int((c.lang or language(c.text)) != lang)] * share

    return sorted((c.rescored(c.score + lift(c)) for c in ranked), key=lambda c: -c.score)


def fill_budget(
    chunks: Sequence[Chunk],
    budget: int,
    max_chunks: int,
    cost: Callable[[Chunk], int],
    per_document: int = 0,
    neighbours: int = 0,
) -> list[Chunk]:
    """Best-scored whole chunks while they fit, in the order given; a chunk too big for what is left is skipped,
    not cut.

    `per_document` (0: no limit): at most this many of one document while another document's chunks are left
    to take. A product page whose every chunk outscores the rest would otherwise fill the prompt, and a question
    about the product often needs a second page (the instalment terms, the parts price list, the workshop's
    rates), while that page's sixth-best chunk rarely holds what its five better ones did not.

    `neighbours`: up to this many more beyond `max_chunks`, the best candidates next to a picked chunk of their
    document. A page is cut into chunks by length, not by meaning: the line that answers may sit in the chunk
    after the one whose heading matched the question (or before the one that names it), and that chunk, scored
    on its own, is rarely among the best."""
    picked: list[Chunk] = []
    held: list[Chunk] = []  # past their document's share, taken only if nothing else is left
    left = budget
    per_doc: dict[str, int] = {}
    for chunk in chunks:
        if len(picked) >= max_chunks:
            break
        c = cost(chunk)
        if c > left:
            continue
        if per_document and per_doc.get(chunk.doc_id, 0) >= per_document:
            held.append(chunk)
            continue
        picked.append(chunk)
        per_doc[chunk.doc_id] = per_doc.get(chunk.doc_id, 0) + 1
        left -= c
    for chunk in held:
        if len(picked) >= max_chunks:
            break
        if (c := cost(chunk)) <= left:
            picked.append(chunk)
            left -= c
    taken = {c.id for c in picked}
    near = {(c.doc_id, c.index + step) for c in picked for step in (-1, 1)}
    added = 0
    for chunk in chunks:
        if added >= neighbours:
            break
        if chunk.id in taken or (chunk.doc_id, chunk.index) not in near:
            continue
        if (c := cost(chunk)) <= left:
            picked.append(chunk)
            left -= c
            added += 1
    rank = {c.id: i for i, c in enumerate(chunks)}
    return sorted(picked, key=lambda c: rank[c.id])


def _rrf_scale(chunks: Sequence[Chunk]) -> float:
    # Fused scores are reciprocal ranks (~0.03 at most), not cosines (a pool's cosines spread over ~0.2):
    # the bonuses shrink in proportion.
    scores = [c.score for c in chunks]
    return (max(scores) - min(scores)) / 0.2 if len(scores) > 1 else 1.0


def _to_chunk(hit: ScoredChunk) -> Chunk:
    p = hit.payload
    return Chunk(
        id=hit.id,
        doc_id=str(p.get("doc_id", "")),
        source=str(p.get("source", "")),
        title=str(p.get("title", "")),
        text=str(p.get("text", "")),
        score=hit.score,
        token_count=int(p.get("token_count", 0)),
        section=str(p.get("section", "")),
        lang=str(p.get("lang", "")),
        index=int(p.get("chunk_index", 0)),
        aliases=str(p.get("aliases", "")),
    )
