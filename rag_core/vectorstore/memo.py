"""A few payload fields of every point of a collection, in memory, for an embedded index (this process is its
collection's only writer: Edge's write-ahead log and local mode's folder are locked by it).

The retrieval pool asks ~100-200 hits a turn for their language (a follow-up's pool for their document too),
and an embedded engine reads each hit's whole payload, text and all, to pick those fields out: with local mode
a copy of it and a model object per hit. A search for these fields alone runs without payloads and takes them
from here. Both embedded indexes use it; a server's index does not (other processes write to it)."""

from __future__ import annotations

import threading
from collections.abc import Hashable, Iterator
from contextlib import contextmanager
from typing import Any, TypeGuard

MEMO_FIELDS = ("lang", "doc_id")

# Point id (as the engine hands it over, or its key) -> the id as text and its MEMO_FIELDS (those it has).
Table = dict[Hashable, tuple[str, dict[str, Any]]]


def memo_only(payload: bool | list[str]) -> TypeGuard[list[str]]:
    """Does a search ask for MEMO_FIELDS alone (and at least one)?"""
    return isinstance(payload, list) and bool(payload) and set(payload) <= set(MEMO_FIELDS)


def pick(known: dict[str, Any], fields: list[str]) -> dict[str, Any]:
    """The payload a search for `fields` returns, from a point's remembered fields."""
    return {k: known[k] for k in fields if k in known}


class FieldsMemo:
    """Collection name -> its table, read once; dropped by every write to the collection."""

    def __init__(self) -> None:
        self._tables: dict[str, Table] = {}
        self._writes: dict[str, int] = {}  # name -> writes so far (a read racing one keeps no table)
        self._lock = threading.Lock()

    def table(self, name: str) -> Table | None:
        return self._tables.get(name)

    def writes(self, name: str) -> int:
        """To pass to `keep` with the table read after this call."""
        with self._lock:
            return self._writes.get(name, 0)

    def keep(self, name: str, writes: int, table: Table) -> None:
        """Remember `table` unless the collection was written to since `writes` was read."""
        with self._lock:
            if self._writes.get(name, 0) == writes:
                self._tables[name] = table

    @contextmanager
    def writing(self, name: str) -> Iterator[None]:
        """Around a write to the collection: its table is dropped before and after (a search that read the
        fields while the write ran must not keep them: `keep` checks the count)."""
        self._wrote(name)
        try:
            yield
        finally:
            self._wrote(name)

    def _wrote(self, name: str) -> None:
        with self._lock:
            self._writes[name] = self._writes.get(name, 0) + 1
            self._tables.pop(name, None)
