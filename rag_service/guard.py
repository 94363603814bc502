"""Output filter: the system prompt is never echoed back to the user.

A leak is any run of `window` characters of the system prompt appearing in the answer, compared on
folded text: HTML entities decoded, Unicode NFKC (full-width letters are letters), case-folded, and only
letters and digits kept, so spacing the prompt out, changing its punctuation, wrapping it in markdown or
HTML, escaping it or inserting zero-width characters does not hide it. Any `window` consecutive characters count, so a partial leak is
caught as soon as it is that long. Base64 in the answer is decoded and checked the same way.

Not caught, by design: a paraphrase, a translation, or the prompt interleaved with other letters; those
need a model to judge, and the price of a looser match is refusing honest answers that happen to share a
phrase with the prompt.

Streaming holds back whatever a leak still in progress could need: the text from the last `window - 1`
folded characters on, and a base64 run that has not ended yet. Nothing of a leak reaches the client
before it is detected.
"""

from __future__ import annotations

import base64
import binascii
import html
import itertools
import re
import unicodedata
from collections.abc import Iterator
from functools import lru_cache
from itertools import compress

# Base64 as a model writes it: one run, or lines of one wrapped run. At least 16 characters: shorter
# runs cannot carry `window` characters of the prompt at any sensible window.
_BASE64 = re.compile(r"[A-Za-z0-9+/_-]{16,}={0,2}(?:[ \t]*\r?\n[ \t]*[A-Za-z0-9+/_-]+={0,2})*")
_LINE = re.compile(r"[A-Za-z0-9+/_-]+={0,2}")
_TAIL = re.compile(r"[A-Za-z0-9+/_=-]+\Z")
_URLSAFE = str.maketrans("-_", "+/")


# An HTML entity ("&lt;", "&#60;", "&#x3c;"): one unit of folding, as every other character is.
_ENTITY = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});")
# An entity that a later piece of a stream may still complete.
_OPEN_ENTITY = re.compile(r"&#?[A-Za-z0-9]{0,32}\Z")


def fold(text: str, offset: int = 0) -> tuple[str, list[int]]:
    """The folded text and, for each of its characters, the index in `text` (+ `offset`) it came from."""
    if "&" not in text:
        # Every character is a unit; when each folds to at most one character (all but ligatures and the
        # like), the folded characters' sources are the characters that did not fold away. Mapped in C: the
        # loop below costs ~0.4 us a character.
        units = list(map(_fold_unit, text))
        folded = "".join(units)
        if len(folded) == len(units) - units.count(""):
            return folded, list(compress(range(offset, offset + len(text)), units))
    out: list[str] = []
    where: list[int] = []
    for start, unit in _units(text):
        folded = _fold_unit(unit)
        if folded:
            out.append(folded)
            where += [start + offset] * len(folded)
    return "".join(out), where


def _units(text: str) -> Iterator[tuple[int, str]]:
    """The units of folding with their starts: the entities, and every other character on its own."""
    pos = 0
    if "&" in text:
        for m in _ENTITY.finditer(text):
            yield from enumerate(text[pos : m.start()], pos)
            yield m.start(), m.group()
            pos = m.end()
    yield from enumerate(text[pos:], pos)


@lru_cache(maxsize=65536)
def _fold_unit(unit: str) -> str:
    # Every streamed answer is folded character by character: a character folds the same way every time.
    normalized = unicodedata.normalize("NFKC", html.unescape(unit) if len(unit) > 1 else unit).casefold()
    return "".join(c for c in normalized if c.isalnum())


def _decode(run: str) -> str:
    compact = "".join(run.split()).translate(_URLSAFE).rstrip("=")
    if len(compact) % 4 == 1:
        compact = compact[:-1]
    try:
        raw = base64.b64decode(compact + "=" * (-len(compact) % 4))
    except (binascii.Error, ValueError):
        return ""
    return raw.decode("utf-8", errors="ignore")


class OutputGuard:
    def __init__(self, system_prompt: str, window: int, refusal: str) -> None:
        folded, _ = fold(system_prompt)
        self.window, self.refusal = window, refusal
        self._shingles = {folded[i : i + window] for i in range(max(0, len(folded) - window + 1))}

    def _folded_leaks(self, folded: str, start: int = 0) -> bool:
        """Whether a shingle of `folded` starting at `start` or later is one of the prompt's."""
        w = self.window
        first = max(0, start)
        # `any(folded[i : i + w] in shingles ...)`, with the slices made and looked up in C.
        windows = map(folded.__getitem__, map(slice, range(first, len(folded) - w + 1), itertools.count(first + w)))
        return not self._shingles.isdisjoint(windows)

    def _base64_leaks(self, run: str) -> bool:
        candidates = [run, *_LINE.findall(run)] if "\n" in run else [run]
        return any(self._folded_leaks(fold(_decode(c))[0]) for c in candidates)

    def leaks(self, text: str) -> bool:
        if self._folded_leaks(fold(text)[0]):
            return True
        return any(self._base64_leaks(m.group()) for m in _BASE64.finditer(text))

    def clean(self, text: str) -> str:
        return self.refusal if self.leaks(text) else text

    def stream(self) -> StreamGuard:
        return StreamGuard(self)


class StreamGuard:
    """Feed pieces as they arrive; emit what is safe. After a leak, nothing more is emitted."""

    def __init__(self, guard: OutputGuard) -> None:
        self.guard = guard
        self.text = ""
        self.emitted = 0
        self.leaked = False
        self._folded = ""
        self._where: list[int] = []
        self._folded_upto = 0  # the raw text before this index is folded
        # Where the base64 scan resumes: the start of a run that may still be growing.
        self._b64_from = 0

    def feed(self, piece: str) -> str:
        if self.leaked:
            return ""
        self.text += piece
        upto = len(self.text)
        if entity := _OPEN_ENTITY.search(self.text, self._folded_upto):
            upto = entity.start()  # folded once it is complete (or clearly not an entity)
        folded, where = fold(self.text[self._folded_upto : upto], self._folded_upto)
        self._folded_upto = upto
        checked = len(self._folded)
        self._folded += folded
        self._where += where
        # Only shingles that end in the new characters are new.
        if self.guard._folded_leaks(self._folded, checked - self.guard.window + 1) or self._base64_leaks(final=False):
            self.leaked = True
            return ""
        held = len(self._folded) - (self.guard.window - 1)
        safe_upto = self._where[held] if held > 0 else 0
        safe_upto = max(self.emitted, min(safe_upto, self._b64_from, self._folded_upto))
        out = self.text[self.emitted : safe_upto]
        self.emitted = safe_upto
        return out

    def _base64_leaks(self, *, final: bool) -> bool:
        """Checks the runs since `_b64_from`; a run that reaches the end of the text (it may go on) is
        checked again with the next piece, and held back until then."""
        resume = len(self.text)
        for m in _BASE64.finditer(self.text, self._b64_from):
            if self.guard._base64_leaks(m.group()):
                return True
            if not final and not self.text[m.end() :].strip():
                resume = min(resume, m.start())
        if not final and (tail := _TAIL.search(self.text, self._b64_from)):
            resume = min(resume, tail.start())  # a run too short to scan yet, which may grow into one
        self._b64_from = resume
        return False

    def finish(self) -> str:
        """The held-back rest, unless the answer leaked."""
        if self.leaked:
            return ""
        folded, _ = fold(self.text[self._folded_upto :])
        if self.guard._folded_leaks(self._folded + folded, len(self._folded) - self.guard.window + 1):
            self.leaked = True
            return ""
        if self._base64_leaks(final=True):
            self.leaked = True
            return ""
        out = self.text[self.emitted :]
        self.emitted = len(self.text)
        return out

    @property
    def answer(self) -> str:
        return self.guard.refusal if self.leaked else self.text
