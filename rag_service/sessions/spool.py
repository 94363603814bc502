"""The archive's spool: writes the archive could not take at shutdown, kept on disk for the next start.

Without it, an archive outage at shutdown would leave the unarchived turns only in the live store: gone
with the process (in-process store) or expiring with their TTL (Redis). One JSON line per session (its
meta and its unwritten messages by seq), written to a temporary file, fsynced and renamed into place, so
a file is either complete or absent. With `database.encryption_key` every line is a Fernet token, as
the archive's own content is. Replaying is idempotent (the archive skips messages it holds already), so
several processes starting at once may all replay a file.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from rag_service.domain import Message, SessionMeta
from rag_service.sessions.interface import ArchiveWrite

log = logging.getLogger(__name__)

SUFFIX = ".jsonl"


class Sealer(Protocol):
    def encrypt(self, text: str) -> str: ...

    def decrypt(self, token: str) -> str: ...


class Spool:
    def __init__(self, directory: Path, sealer: Sealer | None = None) -> None:
        self.directory, self.sealer = directory, sealer

    def save(self, writes: Sequence[ArchiveWrite]) -> Path:
        self.directory.mkdir(parents=True, exist_ok=True)
        name = f"spool-{time.time_ns()}-{os.getpid()}-{secrets.token_hex(4)}{SUFFIX}"
        path, tmp = self.directory / name, self.directory / f".{name}.tmp"
        with tmp.open("w", encoding="utf-8") as out:
            for w in writes:
                line = json.dumps(_encode(w), ensure_ascii=False, separators=(",", ":"))
                out.write((self.sealer.encrypt(line) if self.sealer else line) + "\n")
            out.flush()
            os.fsync(out.fileno())
        tmp.replace(path)
        return path

    def read(self) -> tuple[list[Path], list[ArchiveWrite]]:
        """Every spool file and the writes in them, oldest file first (a session's later writes win)."""
        if not self.directory.is_dir():
            return [], []
        paths = sorted(self.directory.glob(f"spool-*{SUFFIX}"))
        writes: list[ArchiveWrite] = []
        for path in paths:
            for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                try:
                    writes.append(_decode(json.loads(self.sealer.decrypt(line) if self.sealer else line)))
                except Exception as exc:  # one unreadable line must not cost the others
                    log.error("spool %s line %d is unreadable (%s); skipped", path.name, n, exc)
        return paths, writes

    def discard(self, paths: Sequence[Path]) -> None:
        for path in paths:
            path.unlink(missing_ok=True)


def _encode(w: ArchiveWrite) -> dict[str, Any]:
    return {
        "session_id": w.session_id,
        "meta": w.meta.to_dict() if w.meta is not None else None,
        "messages": [[seq, m.role, m.content, m.tokens, m.created_at] for seq, m in w.messages],
    }


def _decode(d: dict[str, Any]) -> ArchiveWrite:
    meta = SessionMeta(**d["meta"]) if d.get("meta") else None
    items = tuple(
        (int(seq), Message(role, content, int(tokens), float(at))) for seq, role, content, tokens, at in d["messages"]
    )
    return ArchiveWrite(str(d["session_id"]), meta, items)
