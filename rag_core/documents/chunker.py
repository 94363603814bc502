"""Sentence splitting and token-bounded, overlapping chunks, as a stream.

Text arrives as blocks (pieces of a file of any size). Sentences are cut at Chinese and English sentence
ends and at line breaks, then packed whole into chunks of at most `chunk_tokens` tokens; consecutive
chunks share whole trailing sentences worth at most `overlap_tokens`. A sentence too long for one chunk
is cut by characters so that every chunk meets the bound, whatever the input.
"""

from __future__ import annotations

import re
from collections import deque
from collections.abc import Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass

from rag_core.tokens import TokenCounter

# A byte-level BPE spends at most four tokens on one character (a 4-byte UTF-8 sequence); below a
# few characters per chunk the bound could not be met.
MIN_CHUNK_TOKENS = 8
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


@dataclass(frozen=True, slots=True)
class _Piece:
    text: str
    tokens: int
    sep: str  # what joins this piece to the next one: "\n", " " or ""


def split_sentences(text: str) -> list[str]:
    """The sentences of `text`, whitespace-normalised, in order."""
    return [sentence for sentence, _ in _sentences([text])]


def chunk_text(blocks: Iterable[str], counter: TokenCounter, chunk_tokens: int, overlap_tokens: int) -> Iterator[str]:
    """Pack the sentences of `blocks` into chunks of at most `chunk_tokens` tokens (by `counter`).

    Validates eagerly, then returns a lazy iterator: blocks are consumed only as chunks are taken.
    """
    if chunk_tokens < MIN_CHUNK_TOKENS:
        raise ValueError(f"chunk_tokens must be at least {MIN_CHUNK_TOKENS}, got {chunk_tokens}")
    if not 0 <= overlap_tokens < chunk_tokens:
        raise ValueError(f"overlap_tokens must be in [0, chunk_tokens), got {overlap_tokens}")
    pieces = _bounded_pieces(_sentences(blocks), counter, chunk_tokens)
    return _pack(pieces, counter, chunk_tokens, overlap_tokens)


# ---------------------------------------------------------------- sentences


def _sentences(blocks: Iterable[str]) -> Iterator[tuple[str, str]]:
    """(sentence, separator to the next one) across block boundaries; never an empty sentence."""
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


# ---------------------------------------------------------------- hard split


def _bounded_pieces(sentences: Iterable[tuple[str, str]], counter: TokenCounter, limit: int) -> Iterator[_Piece]:
    for text, sep in sentences:
        tokens = counter.count(text)
        if tokens <= limit:
            yield _Piece(text, tokens, sep)
        else:
            yield from _hard_split(text, sep, counter, limit)


def _hard_split(text: str, sep: str, counter: TokenCounter, limit: int) -> Iterator[_Piece]:
    """Cut an over-long sentence into pieces within `limit`, at a space when one is near the cut."""
    rest = text
    while rest:
        cut = _fitting_prefix(rest, counter, limit)
        if cut == len(rest):
            yield _Piece(rest, counter.count(rest), sep)
            return
        space = rest.rfind(" ", 0, cut + 1)
        if space > cut // 2 and (tokens := counter.count(rest[:space])) <= limit:
            yield _Piece(rest[:space], tokens, " ")
            rest = rest[space + 1 :]
        else:
            yield _Piece(rest[:cut], counter.count(rest[:cut]), "")
            rest = rest[cut:]


def _fitting_prefix(text: str, counter: TokenCounter, limit: int) -> int:
    """The longest prefix length (checked by `counter`) within `limit`: gallop, then bisect.

    Only lengths that were actually counted are returned, so the bound holds even where a BPE count is
    not monotonic in the prefix length.
    """
    fits, too_long = 0, min(len(text), limit)
    while counter.count(text[:too_long]) <= limit:
        fits = too_long
        if fits == len(text):
            return fits
        too_long = min(len(text), 2 * too_long)
    while too_long - fits > 1:
        middle = (fits + too_long) // 2
        if counter.count(text[:middle]) <= limit:
            fits = middle
        else:
            too_long = middle
    if fits == 0:
        raise ValueError(f"chunk_tokens={limit} cannot hold the single character {text[0]!r}")
    return fits


# ---------------------------------------------------------------- packing


def _pack(pieces: Iterable[_Piece], counter: TokenCounter, limit: int, overlap: int) -> Iterator[str]:
    window: deque[_Piece] = deque()
    size = 0  # estimated tokens of the joined window; `_emit` checks the real count
    fresh = 0  # pieces of the window not yet part of an emitted chunk
    for piece in pieces:
        if window and size + _join_cost(window[-1]) + piece.tokens > limit:
            yield from _emit(list(window), counter, limit)
            window = _overlap_tail(window, counter, overlap)
            while window and _estimate(window) + _join_cost(window[-1]) + piece.tokens > limit:
                window.popleft()
            size, fresh = _estimate(window), 0
        size += (_join_cost(window[-1]) if window else 0) + piece.tokens
        window.append(piece)
        fresh += 1
    if fresh:
        yield from _emit(list(window), counter, limit)


def _emit(pieces: Sequence[_Piece], counter: TokenCounter, limit: int) -> Iterator[str]:
    text = _join(pieces)
    # The estimate charges one token per join; should merging across a join cost more, halve the chunk.
    if len(pieces) == 1 or counter.count(text) <= limit:
        yield text
        return
    middle = len(pieces) // 2
    yield from _emit(pieces[:middle], counter, limit)
    yield from _emit(pieces[middle:], counter, limit)


def _overlap_tail(window: deque[_Piece], counter: TokenCounter, overlap: int) -> deque[_Piece]:
    """The trailing whole pieces of `window` worth at most `overlap` tokens, never all of it."""
    tail: deque[_Piece] = deque()
    size = 0
    for piece in list(window)[:0:-1]:
        cost = piece.tokens + (_join_cost(piece) if tail else 0)
        if size + cost > overlap:
            break
        tail.appendleft(piece)
        size += cost
    while tail and counter.count(_join(list(tail))) > overlap:
        tail.popleft()
    return tail


def _join(pieces: Sequence[_Piece]) -> str:
    return "".join(p.text + p.sep for p in pieces[:-1]) + pieces[-1].text


def _join_cost(piece: _Piece) -> int:
    return 1 if piece.sep else 0


def _estimate(window: Iterable[_Piece]) -> int:
    pieces = list(window)
    return sum(p.tokens for p in pieces) + sum(_join_cost(p) for p in pieces[:-1])
