"""Text rules shared by ingest, the service and evaluation: which characters are Chinese, which language a
text is in, which line is a heading, where sentences end, which words carry no topic.

Hand-written: the rules are about mixed Chinese/English shop documents ("iPhone 16 Pro 256GB 多少钱" is
Chinese; "一、7 天无理由退货" is a heading; "e.g. the battery" does not end a sentence), which no
library models as one set of rules.
"""

from __future__ import annotations

import contextlib
import importlib
import re
from collections.abc import Generator, Iterable, Iterator
from functools import lru_cache
from typing import Any

# --- character classes ------------------------------------------------------------------------------
# Ranges for a regex character class (`f"[{HAN_CHARS}]"`), named for what each rule needs.

# Han ideographs: extension A, the unified block, compatibility ideographs, extensions B and later.
HAN_CHARS = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0002ffff"
CJK_PUNCT_CHARS = "\u3000-\u303f"  # 。、「」 and the ideographic space
KANA_CHARS = "\u3040-\u30ff"
HANGUL_CHARS = "\uac00-\ud7af"
FULLWIDTH_CHARS = "\uff00-\uffef"  # ，：！（） and full-width Latin
# Written without spaces between words: a line break between two of these is not a space (Korean
# separates its words with spaces, so Hangul is not among them).
UNSPACED_CHARS = CJK_PUNCT_CHARS + HAN_CHARS + FULLWIDTH_CHARS
# What a BPE tokenizer spends about 1.5 tokens a character on (`tokens.HeuristicCounter`).
WIDE_CHARS = CJK_PUNCT_CHARS + KANA_CHARS + HAN_CHARS + HANGUL_CHARS + FULLWIDTH_CHARS

HAN_CLASS = f"[{HAN_CHARS}]"  # to write inside a larger pattern
HAN = re.compile(HAN_CLASS)
HAN_RUN = re.compile(f"{HAN_CLASS}+")


def has_han(text: str) -> bool:
    return HAN.search(text) is not None


def language(text: str) -> str:
    """ "zh" when Chinese carries the text ("iPhone 16 Pro 256GB 多少钱" is Chinese), else "en"."""
    return _language(text) if len(text) <= CACHED_CHARS else _read_language(text)


# Texts up to a chunk's size are remembered by the functions cached here (the same chunks, lines and
# questions are read again turn after turn); a whole document is not kept alive by a cache.
CACHED_CHARS = 4096


@lru_cache(maxsize=8192)
def _language(text: str) -> str:
    return _read_language(text)


_LATIN_RUN = re.compile(r"[A-Za-z]+")


def _read_language(text: str) -> str:
    # Counted by runs: one string per run, not one per character.
    cjk = sum(map(len, HAN_RUN.findall(text)))
    latin_words = len(_LATIN_RUN.findall(text))
    return "zh" if cjk and cjk * 2 >= latin_words else "en"


# --- headings and list items --------------------------------------------------------------------------

LIST_MARK = re.compile(r"^\s*(?:[-*•·]|\d{1,2}[.、)]|[（(]\d{1,2}[)）])\s*")
_HEADING_NUMBER = re.compile(
    r"^\s*(?:[一二三四五六七八九十]+、|第[一二三四五六七八九十\d]+[章节条部分]|\d+(?:\.\d+)*\s)"
)
_END_PUNCT = re.compile(r"[。！？!?；;：:，,.]\s*$")


@lru_cache(maxsize=8192)
def is_heading(line: str) -> bool:
    """A line that names a section rather than saying something: short, no sentence punctuation, no list
    marker ("价格与存储容量", "一、7 天无理由退货", "Shipping fees and delivery times")."""
    text = line.strip()
    if not text or (LIST_MARK.match(text) and not _HEADING_NUMBER.match(text)):
        return False
    if _END_PUNCT.search(text) or "：" in text[:-1] or ": " in text:
        return False
    size = len(text) if language(text) == "zh" else len(text.split()) * 3
    return size <= 30


# --- sentences -----------------------------------------------------------------------------------------
# One splitter for chunks, extractive answers and rule-extracted user facts: an answer's sentence is one
# the chunker cut too, and a remembered "my budget is 3.5k" is not cut at its decimal point.

# Text with no sentence end or line break for this long is cut anyway, so a pathological file (a
# megabyte on one line) cannot make the splitter hold more than a block plus this much.
MAX_PENDING_CHARS = 1 << 16

_NEWLINES = "\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029"  # what str.splitlines() breaks on
_CLOSERS = "”’」』）》】〕\"')\\]"
# Possessive quantifiers and the look-behind keep the scan linear on long runs of spaces or punctuation.
_BOUNDARY = re.compile(
    rf"(?P<cjk>[。！？；]++[{_CLOSERS}]*+)(?P<cjk_ws>\s*+)"
    rf"|(?P<en>[.!?]++[{_CLOSERS}]*+)(?P<en_ws>\s++)"
    rf"|(?P<nl>(?<![^\S{_NEWLINES}])[^\S{_NEWLINES}]*+[{_NEWLINES}]\s*+)"
)
_WORD_BEFORE = re.compile(r"[A-Za-z][A-Za-z.]*$")
_WORD_LOOKBACK = 24
_INITIALS = re.compile(r"(?:[A-Za-z]\.)+[A-Za-z]")  # e.g, i.e, U.S, a.m
_ABBREVIATIONS = frozenset({
    "Mr", "Mrs", "Ms", "Dr", "Prof", "Sr", "Jr", "St", "Mt", "vs", "etc", "al", "No", "Nos", "Fig", "Figs",
    "Vol", "approx", "cf", "Dept", "Jan", "Feb", "Mar", "Apr", "Jun", "Jul", "Aug", "Sep", "Sept", "Oct",
    "Nov", "Dec",
})  # fmt: skip
# "1. Install" or "b. Press" is a list item, not a sentence.
_ENUMERATOR = re.compile(r"(?:\d{1,3}|[A-Za-z]|[ivxlcdm]{1,5}|[IVXLCDM]{1,5})")
# Control characters (other than whitespace) and invisible marks that PDFs and editors leave behind.
_INVISIBLE = re.compile("[\x00-\x08\x0e-\x1f\x7f\u200b\ufeff]")


def split_sentences(text: str) -> list[str]:
    """The sentences of `text`, whitespace-normalised, in order: cut at Chinese sentence ends (。！？；),
    at English ones followed by a space (not after "e.g.", "Mr.", "1." or before a lowercase word) and at
    line breaks; closing quotes and brackets stay with their sentence."""
    if len(text) > CACHED_CHARS:
        return [sentence for sentence, _ in stream_sentences([text])]
    return list(_sentences(text))


@lru_cache(maxsize=8192)
def _sentences(text: str) -> tuple[str, ...]:
    # All of the text is here: one final reading of it, as `stream_sentences` ends with (it would first read
    # it as a block that more may follow, then read again the rest it left undecided: a line without a
    # sentence end, most of them, twice).
    return tuple(sentence for sentence, _ in _drain(text, final=True))


def stream_sentences(blocks: Iterable[str]) -> Iterator[tuple[str, str]]:
    """`split_sentences` over text that arrives in blocks: (sentence, separator to the next one: "\\n",
    " " or ""), across block boundaries; never an empty sentence."""
    carry = ""
    for block in blocks:
        carry = yield from _drain(carry + block, final=False)
    yield from _drain(carry, final=True)


def _drain(buf: str, *, final: bool) -> Generator[tuple[str, str], None, str]:
    """Emit the sentences of `buf` that are certainly complete; return the undecided rest."""
    start = 0
    for match in _BOUNDARY.finditer(buf):
        if not final and match.end() == len(buf):
            # More closing quotes or whitespace (and the next word) may still come with the next block.
            break
        if not _is_boundary(buf, start, match):
            continue
        text_end = match.end("cjk") if match.group("cjk") else match.end("en") if match.group("en") else match.start()
        yield from _sentence(buf[start:text_end], _separator(match.group()))
        start = match.end()
    rest = buf[start:]
    if final:
        yield from _sentence(rest, "")
        return ""
    while len(rest) > MAX_PENDING_CHARS:
        cut = rest.rfind(" ", MAX_PENDING_CHARS // 2, MAX_PENDING_CHARS)
        cut = cut if cut > 0 else MAX_PENDING_CHARS
        yield from _sentence(rest[:cut], " " if rest[cut] == " " else "")
        rest = rest[cut:]
    return rest


def _is_boundary(buf: str, start: int, match: re.Match[str]) -> bool:
    if not match.group("en") or "\n" in match.group("en_ws") or match.end() == len(buf):
        return True
    if buf[match.end()].islower():
        return False  # "e.g. the", "approx. ten": a lowercase word continues the sentence
    if match.group("en")[0] != ".":
        return True
    if _ENUMERATOR.fullmatch(buf[start : match.start()].strip()):
        return False
    word = _WORD_BEFORE.search(buf, max(start, match.start() - _WORD_LOOKBACK), match.start())
    return word is None or not (word.group() in _ABBREVIATIONS or _INITIALS.fullmatch(word.group()))


def _separator(boundary: str) -> str:
    if any(c in _NEWLINES for c in boundary):
        return "\n"
    return " " if boundary[-1:].isspace() else ""


def _sentence(raw: str, sep: str) -> Iterator[tuple[str, str]]:
    text = " ".join(_INVISIBLE.sub("", raw).split())
    if text:
        yield text, sep


# --- stop words ------------------------------------------------------------------------------------------

# Retrieval stop words: too common to tell passages apart (`lexical.terms` drops them).
_ZH_STOP_WORDS = """
    的 了 和 是 在 我 你 他 她 它 们 吗 呢 吧 啊 有 也 就 都 要 会 可以 怎么 什么 多少 这个 那个
"""
ZH_STOP_WORDS = frozenset(_ZH_STOP_WORDS.split())
_EN_STOP_WORDS = """
    the a an and or of to in on for is are be it its this that what how do does with at by from can i you my
    your we our
"""
EN_STOP_WORDS = frozenset(_EN_STOP_WORDS.split())
# Words that never name what a question is about (the rewriter's entities leave them out): the stop words
# and common verbs, fillers, politeness and customer-service words.
_EN_GENERIC_WORDS = """
    but if then so than as without about into over under after before between during since until up down out
    off again further once here there when where why which who whom whose these those itself they them their
    theirs he him his she her hers us ours yours me mine was were been being am did doing done have has had
    having could would should will shall may might must not no nor yes only just also too very really quite
    more most much many some any all each every both either neither other others another such same own few lot
    lots tell know explain give get got make made want need like think say said mean means let please thanks
    thank okay ok well oh hi hello sure right thing things something anything everything nothing way ways kind
    kinds type types information info question questions answer example examples sort part bit one ones use
    used using go going come still even ever yet already now today currently back else instead actually
    possible able new old good bad best better great big small speaking regarding mentioned talking talk
    saying seems seem understand see look looking thinking wondering name time times i'm i’m you're it's it’s
    that's what's there's don't doesn't didn't isn't aren't can't won't i'd i've written known given taken
    seen gone born became become went first last vs via buy bought pay paid cost costs ship send sent return
    work works help happen happened start started end ended play played call called find found keep put take
    try turn show live believe bring begin run write read provide include continue set learn change lead watch
    follow stop create speak allow add spend grow open win offer remember love consider appear wait serve die
    expect build stay fall reach kill remain suggest sell require decide apply check cancel user users
    customer customers assistant
"""
EN_GENERIC_WORDS = EN_STOP_WORDS | frozenset(_EN_GENERIC_WORDS.split())


# A Chinese name introduced with its romanisation: "林语（Linyu）", "松岚 (Songlan)". One capitalised word (two at
# most), a pinyin syllable per character: its vowel groups say how many characters before the bracket it spells.
_ALIAS = re.compile(f"({HAN_CLASS}{{1,4}})\\s?[（(]([A-Z][a-z]+(?: [A-Z][a-z]+)?)[）)]")
_PINYIN_VOWELS = re.compile(r"[aeiouv]+")


def name_aliases(text: str) -> dict[str, str]:
    """Romanised names the text gives its Chinese names: {"Linyu": "林语"}. An English question names the
    brand as the English pages do; the Chinese pages write it in characters."""
    out: dict[str, str] = {}
    for m in _ALIAS.finditer(text):
        han, latin = m.group(1), m.group(2)
        syllables = len(_PINYIN_VOWELS.findall(latin.lower()))
        if not 1 <= syllables <= len(han):
            continue
        out.setdefault(latin, han[len(han) - syllables :])
    return out


# --- fast failing alternations ------------------------------------------------------------------------------

_sre: Any = None
with contextlib.suppress(ImportError):
    _sre = importlib.import_module("re._parser")  # the parser `re` compiles with (no stable public API)


def fail_fast(pattern: re.Pattern[str]) -> re.Pattern[str]:
    """The same pattern (the same matches, at the same places), behind a look-ahead for the characters a
    match can start with, when those are a known set. A search with a long alternation of names ("北京|beijing|
    上海|shanghai|…") tries every alternative at every position of the text; the look-ahead refuses most
    positions with one character test. The pattern as it is when its first characters cannot be told."""
    if _sre is None:
        return pattern
    try:
        first = _first_chars(list(_sre.parse(pattern.pattern, pattern.flags)), bool(pattern.flags & re.IGNORECASE))
    except Exception:  # a parser of another Python version: the pattern works as it is
        return pattern
    if not first:
        return pattern
    chars = "".join(sorted(re.escape(c) for c in first))
    return re.compile(f"(?=[{chars}])(?:{pattern.pattern})", pattern.flags)


def _first_chars(items: list[Any], ignorecase: bool) -> set[str] | None:
    """The characters the first one a sequence of parsed items consumes can be (a superset), or None if
    unknown. Under the pattern's IGNORECASE the look-ahead's class folds case as the pattern's literals do."""
    c = _sre  # the opcodes, which the parser imports from `re._constants`
    for op, av in items:
        if op is c.AT or op is c.ASSERT or op is c.ASSERT_NOT:
            continue  # \b, ^, look-arounds consume nothing (and only narrow where a match starts)
        if op is c.LITERAL:
            return {chr(av)}
        if op is c.SUBPATTERN:
            added = av[1]
            if added & re.IGNORECASE and not ignorecase:
                return None  # a case-insensitive group in a case-sensitive pattern
            return _first_chars(list(av[3]), ignorecase)
        if op is c.BRANCH:
            out: set[str] = set()
            for branch in av[1]:
                found = _first_chars(list(branch), ignorecase)
                if found is None:
                    return None
                out |= found
            return out
        if op is c.MAX_REPEAT or op is c.MIN_REPEAT or op is c.POSSESSIVE_REPEAT:
            low, _, item = av
            return _first_chars(list(item), ignorecase) if low >= 1 else None
        if op is c.IN:
            chars: set[str] = set()
            for kind, value in av:
                if kind is c.LITERAL:
                    chars.add(chr(value))
                elif kind is c.RANGE and value[1] - value[0] < 256:
                    chars.update(chr(v) for v in range(value[0], value[1] + 1))
                else:
                    return None  # a negated class, a category (\w, \d)
            return chars
        return None  # anything else may start with any character
    return None  # nothing consumed: a match may be empty
