"""Token-bounded, overlapping chunks, as a stream.

Text arrives as blocks (pieces of a file of any size). Sentences are cut by `rag_core.text` (Chinese and
English sentence ends, line breaks), then packed whole into chunks of at most `chunk_tokens` tokens; consecutive
chunks share whole trailing sentences worth at most `overlap_tokens`. A sentence too long for one chunk
is cut by characters so that every chunk meets the bound, whatever the input.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

from rag_core.text import MAX_PENDING_CHARS, split_sentences, stream_sentences
from rag_core.tokens import TokenCounter

__all__ = ["MAX_PENDING_CHARS", "MIN_CHUNK_TOKENS", "chunk_text", "split_sentences"]

# A byte-level BPE spends at most four tokens on one character (a 4-byte UTF-8 sequence); below a
# few characters per chunk the bound could not be met.
MIN_CHUNK_TOKENS = 8


@dataclass(frozen=True, slots=True)
class _Piece:
    text: str
    tokens: int
    sep: str  # what joins this piece to the next one: "\n", " " or ""


def chunk_text(blocks: Iterable[str], counter: TokenCounter, chunk_tokens: int, overlap_tokens: int) -> Iterator[str]:
    """Pack the sentences of `blocks` into chunks of at most `chunk_tokens` tokens (by `counter`).

    Validates eagerly, then returns a lazy iterator: blocks are consumed only as chunks are taken.
    """
    if chunk_tokens < MIN_CHUNK_TOKENS:
        raise ValueError(f"chunk_tokens must be at least {MIN_CHUNK_TOKENS}, got {chunk_tokens}")
    if not 0 <= overlap_tokens < chunk_tokens:
        raise ValueError(f"overlap_tokens must be in [0, chunk_tokens), got {overlap_tokens}")
    pieces = _bounded_pieces(stream_sentences(blocks), counter, chunk_tokens)
    return _pack(pieces, counter, chunk_tokens, overlap_tokens)


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
