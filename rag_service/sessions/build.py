"""Composes the session store the settings ask for: masking over write-behind over a live store and
the archive."""

from __future__ import annotations

from pathlib import Path

from rag_core.settings import Settings
from rag_core.tokens import TokenCounter
from rag_service.metrics import Metrics
from rag_service.privacy import Masker
from rag_service.sessions.archive import Archive, migrate
from rag_service.sessions.archive.engine import normalize_url, sqlite_in_memory
from rag_service.sessions.interface import LiveStore, SessionStore
from rag_service.sessions.live_memory import MemoryStore
from rag_service.sessions.masking import MaskedStore, masked
from rag_service.sessions.spool import Spool
from rag_service.sessions.writebehind import ArchivedStore


def open_archive(settings: Settings) -> Archive:
    """The archive at `database.url`, migrated (here, at start-up)."""
    migrate(settings.database.url)
    return Archive(settings.database.url, settings.database.encryption_key)


def build_store(
    settings: Settings,
    counter: TokenCounter | None = None,
    metrics: Metrics | None = None,
    *,
    archive: Archive | None = None,
) -> SessionStore:
    """The live store (Redis when `redis.url` is set, else in-process) in front of the SQL archive
    (`archive`, else open_archive's), behind the PII masking layer unless privacy is off. The store owns
    the archive from here on (closing it closes the archive). `counter` recounts message tokens after
    masking; `metrics` gets the archive backlog and conflicts."""
    s = settings.session
    live: LiveStore
    if settings.redis.url:
        from rag_service.sessions.live_redis import RedisStore

        live = RedisStore(
            settings.redis.url,
            ttl_s=s.ttl_s,
            lock_timeout_s=s.lock_timeout_s,
            lock_lease_s=s.lock_lease_s,
            on_busy=s.on_busy,
        )
    else:
        live = MemoryStore(s.ttl_s, s.lock_timeout_s, s.on_busy)
    db = settings.database
    archive = archive or open_archive(settings)
    archived = ArchivedStore(
        live,
        archive,
        flush_interval_s=db.flush_interval_s,
        retry_max_s=db.flush_retry_max_s,
        spool=Spool(spool_dir(settings), archive.cipher),
        on_conflict=metrics.archive_conflicts.inc if metrics is not None else None,
    )
    if metrics is not None:
        metrics.track_backlog(lambda: archived.pending)
    masker = Masker.from_settings(settings.privacy)
    if masker is None:
        return archived
    return masked(archived, masker, counter.count if counter is not None else None)


def write_behind(store: SessionStore) -> ArchivedStore | None:
    """The write-behind `build_store` put under `store` (behind the masking layer or not), if any."""
    inner = store.inner if isinstance(store, MaskedStore) else store
    return inner if isinstance(inner, ArchivedStore) else None


def spool_dir(settings: Settings) -> Path:
    """`database.spool_dir`, else next to a SQLite archive file, else ./data/archive-spool."""
    if settings.database.spool_dir:
        return Path(settings.database.spool_dir).expanduser()
    url = normalize_url(settings.database.url)
    if url.get_backend_name() == "sqlite" and not sqlite_in_memory(url):
        return Path(str(url.database)).expanduser().parent / "archive-spool"
    return Path("data") / "archive-spool"
