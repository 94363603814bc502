"""Load, chunk, embed and store one document, idempotently.

A point's id derives from the content it holds, so re-ingesting an unchanged file finds every id
already stored and does no work; a changed file adds its new points first and removes the stale ones
after, so readers never see the document without chunks.

Documents belong to a tenant: its name is in every chunk's payload and in the document id, so the same
`source` in two tenants is two documents. The default tenant's ids are those of the time before tenants,
so a knowledge base ingested then is still up to date.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import os
import threading
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from rag_core.documents.chunker import chunk_text
from rag_core.documents.faq import FAQ_KIND, faq_chunk_texts, faq_points
from rag_core.documents.loaders import LoadCancelled, LoadError, load_document
from rag_core.documents.office import CELL_SEPARATOR, FaqPair
from rag_core.embedding import Embedder, Vector
from rag_core.lexical import document_vector
from rag_core.settings import DEFAULT_TENANT, Settings
from rag_core.text import is_heading, language, name_aliases
from rag_core.tokens import TokenCounter
from rag_core.vectorstore import ChunkPoint

# Fixed forever: document and point ids are uuid5 names in this namespace.
ID_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "urn:rag-service:ingest")
# Part of every point id: a payload that gains fields (2: `section`, `lang`) re-ingests every chunk once,
# instead of leaving old points without them.
PAYLOAD_VERSION = 2
ALIAS_PAYLOAD_VERSION = 1

__all__ = [
    "ID_NAMESPACE",
    "ChunkIndex",
    "IngestReport",
    "LoadError",
    "delete_document",
    "doc_id_for",
    "ingest_file",
    "iter_files",
    "point_id",
    "source_for",
    "write_document",
]


class ChunkIndex(Protocol):
    """The part of `rag_core.vectorstore.VectorIndex` that ingestion uses."""

    async def upsert(self, points: Sequence[ChunkPoint], tenant: str | None = None) -> None: ...

    async def doc_point_ids(self, doc_id: str, tenant: str | None = None) -> set[str]: ...

    async def delete_ids(self, ids: Iterable[str], tenant: str | None = None) -> None: ...

    async def delete_doc(self, doc_id: str, tenant: str | None = None) -> int: ...


@dataclass(frozen=True)
class IngestReport:
    source: str
    doc_id: str
    title: str
    chunks: int
    upserted: int
    deleted: int
    unchanged: bool
    # FAQ entries (one per question) of an FAQ file or sheet.
    faq_entries: int = 0


@dataclass(frozen=True)
class _Chunk:
    id: str
    index: int
    text: str
    content_hash: str
    section: str = ""
    kind: str = ""
    # Romanised names of the document's Chinese names that this chunk uses ("林语 Linyu"): embedded with the
    # text so an English question naming the brand finds the Chinese page (`rag_core.text.name_aliases`).
    aliases: str = ""


def source_for(path: Path) -> str:
    """The name a file is stored under: relative to the working directory when inside it, else absolute."""
    absolute = Path(os.path.abspath(path))
    cwd = Path.cwd()
    for candidate, base in ((absolute, cwd), (absolute.resolve(), cwd.resolve())):
        try:
            return candidate.relative_to(base).as_posix()
        except ValueError:
            continue
    return absolute.as_posix()


def doc_id_for(source: str, tenant: str = DEFAULT_TENANT) -> str:
    name = source if tenant == DEFAULT_TENANT else json.dumps([tenant, source], ensure_ascii=False)
    return str(uuid.uuid5(ID_NAMESPACE, name))


def point_id(
    doc_id: str,
    chunk_index: int,
    content_hash: str,
    title: str,
    embedder_name: str,
    section: str = "",
    aliases: str = "",
) -> str:
    """A point's id names everything its vectors and payload depend on.

    Beyond the chunk's position and text, the title and section heading (embedded with the text and
    stored in the payload) and the embedder are part of it: a retitled document or a switch to another
    model of the same size must re-embed, not keep stale points whose ids happen to match.
    """
    parts: list[object] = [doc_id, chunk_index, content_hash, title, embedder_name, section, PAYLOAD_VERSION]
    if aliases:
        # Only then: the ids of chunks without aliases stay what they were. ALIAS_PAYLOAD_VERSION: the aliases
        # went into the payload too (the reranker reads them), so such a chunk is written again on re-ingest.
        parts.extend([aliases, ALIAS_PAYLOAD_VERSION])
    name = json.dumps(parts, ensure_ascii=False)
    return str(uuid.uuid5(ID_NAMESPACE, name))


def chunk_sections(texts: Iterable[str], headings: AbstractSet[str] = frozenset()) -> Iterator[tuple[str, str]]:
    """(chunk text, the heading in effect where it starts). A chunk that starts inside a section (or
    inside the previous chunk's overlap) has lost its heading; the answerer needs it to tell "256GB 版本售价
    8999 元" under one product's price list from the same line on a sibling's page.

    A line names a section when it reads like a heading (`rag_core.text.is_heading`) or, among `headings`
    (the lines the document's markup marks as headings, `LoadedDoc.headings`), when it would but for the
    question mark that ends it."""
    previous: list[tuple[str, str]] = []  # (line, heading in effect before it) of the previous chunk
    current = ""
    for text in texts:
        lines = [line.strip() for line in text.split("\n") if line.strip()]
        # An overlap that opens inside a line (sentences are cut inside lines) matches no line of the previous
        # chunk: the chunk is then under the heading its own, non-overlap text starts under, even where a heading
        # inside the overlap follows the opening sentence. Filing it under the heading where the overlap opens
        # (consistent with the whole-line case) was measured in the eleventh session: it lost doc@3 and context
        # on dev and the home shop (the chunk's section is embedded and read by the reranker, and most of its
        # text is the later section's).
        start = current
        if lines:
            earlier = [h for line, h in previous if line == lines[0]]
            if earlier:
                start = earlier[-1]
            # A chunk that opens with a heading is under that heading, even when the line was also the
            # previous chunk's last (overlap): its text is that section's, not the one before. (The first
            # chunk's opening line is the document's own heading, which the title already says.)
            if previous and _names_section(lines[0], headings):
                start = lines[0]
        yield text, start
        heading = start
        previous = []
        for line in lines:
            previous.append((line, heading))
            if _names_section(line, headings):
                heading = line
        current = heading


def _names_section(line: str, headings: AbstractSet[str]) -> bool:
    # A table's row (its header row too) is short and unpunctuated, but not a heading: the rows name
    # their columns themselves, and the heading above the table says what it is about.
    if CELL_SEPARATOR in line:
        return False
    # A marked-up heading may be a question ("Can I pay later?", "多久能到货？"), as FAQ pages word them;
    # otherwise it must still read like a heading. The answerer finds the headings inside a chunk by
    # `is_heading` alone, so a label it cannot see there carries over the next such heading onto that
    # section's sentences: accepting every marked-up heading ("Step 2: Memory", with its colon) measured
    # worse answers, question headings better retrieval.
    return is_heading(line) or (line in headings and is_heading(line.rstrip("?？")))


async def ingest_file(
    path: Path,
    *,
    index: ChunkIndex,
    embedder: Embedder,
    counter: TokenCounter,
    settings: Settings,
    source: str | None = None,
    tenant: str = DEFAULT_TENANT,
    on_chunks: Callable[[int], None] | None = None,
    cancel: threading.Event | None = None,
    faq_index: ChunkIndex | None = None,
) -> IngestReport:
    """Bring `tenant`'s copy of `path` in the index up to date; `on_chunks(n)` reports n more chunks processed.

    An FAQ file's pairs become chunks of `index` and, when `faq_index` is given, FAQ entries there
    (rag_core/documents/faq.py), kept up to date the same way.

    Raises `LoadError` for a file that cannot be read; the document's stored chunks are then left as
    they were (points added before a late read error are removed again). Setting `cancel` (from another
    thread) stops the work at the next batch, or kills a PDF being parsed, with `LoadCancelled`; the
    index is left as it was.

    Reading, chunking and embedding run in worker threads and the index is awaited, so the caller's event
    loop keeps serving meanwhile.
    """
    source = source or source_for(path)
    doc_id = doc_id_for(source, tenant)
    doc = await asyncio.to_thread(load_document, path, settings.ingest, name=source, cancel=cancel)
    return await write_document(
        doc.title, doc.blocks, doc.faq, index=index, embedder=embedder, counter=counter, settings=settings,
        source=source, doc_id=doc_id, tenant=tenant, on_chunks=on_chunks, cancel=cancel, faq_index=faq_index,
        headings=doc.headings,
    )  # fmt: skip


async def write_document(
    title: str,
    blocks: Iterator[str],
    faq: Sequence[FaqPair],
    *,
    index: ChunkIndex,
    embedder: Embedder,
    counter: TokenCounter,
    settings: Settings,
    source: str,
    doc_id: str,
    tenant: str = DEFAULT_TENANT,
    on_chunks: Callable[[int], None] | None = None,
    cancel: threading.Event | None = None,
    faq_index: ChunkIndex | None = None,
    headings: AbstractSet[str] = frozenset(),
) -> IngestReport:
    """Bring the stored copy of a loaded document (text blocks and FAQ pairs) up to date: what
    `ingest_file` does after reading the file, and what an annotation (an FAQ pair written by an
    admin) does without one. `headings`: the lines the file's markup marks as headings."""
    existing = await index.doc_point_ids(doc_id, tenant)
    chunks = _chunks(doc_id, title, blocks, faq, counter, settings, embedder.name, headings)
    # Pulling a batch reads (and for a PDF parses) more of the file: done in a worker thread.
    batches = _batches(chunks, settings.ingest.upsert_batch)
    writer = _Writer(index, embedder, counter, settings, tenant=tenant, source=source, doc_id=doc_id, title=title)
    seen: set[str] = set()
    faq_written: list[str] = []
    faq_existing: set[str] = set()
    faq_ids: list[str] = []
    try:
        while (batch := await asyncio.to_thread(next, batches, None)) is not None:
            if cancel is not None and cancel.is_set():
                raise LoadCancelled(f"{source}: cancelled")
            seen.update(c.id for c in batch)
            await writer.write([c for c in batch if c.id not in existing])
            if on_chunks is not None:
                on_chunks(len(batch))
        if faq_index is not None:
            faq_existing = await faq_index.doc_point_ids(doc_id, tenant)
            # Embedding the questions is CPU work: off the event loop, as the chunks' is.
            faq_ids, points = await asyncio.to_thread(
                faq_points, faq, doc_id=doc_id, source=source, title=title, tenant=tenant, embedder=embedder,
                settings=settings, skip=faq_existing,
            )  # fmt: skip
            # Noted before they are sent: a batch that fails half-way is removed again too.
            faq_written.extend(p.id for p in points)
            for start in range(0, len(points), settings.ingest.upsert_batch):
                await faq_index.upsert(points[start : start + settings.ingest.upsert_batch], tenant)
    except BaseException:
        # Shielded: a cancelled upload still removes what it added.
        await asyncio.shield(_undo(index, writer.written, faq_index, faq_written, tenant))
        raise
    if not seen:
        # Only invisible characters (zero-width spaces, control codes): as good as an empty file.
        raise LoadError(f"{source}: no text to index")
    stale = existing - seen
    await index.delete_ids(stale, tenant)
    faq_stale = faq_existing - set(faq_ids)
    if faq_index is not None:
        await faq_index.delete_ids(faq_stale, tenant)
    upserted = len(writer.written) + len(faq_written)
    deleted = len(stale) + len(faq_stale)
    return IngestReport(
        source=source,
        doc_id=doc_id,
        title=title,
        chunks=len(seen),
        upserted=upserted,
        deleted=deleted,
        unchanged=upserted == 0 and not deleted,
        faq_entries=len(faq_ids) if faq_index is not None else sum(len(p.questions) for p in faq),
    )


async def _undo(
    index: ChunkIndex, written: list[str], faq_index: ChunkIndex | None, faq_written: list[str], tenant: str
) -> None:
    await index.delete_ids(written, tenant)
    if faq_index is not None:
        await faq_index.delete_ids(faq_written, tenant)


async def delete_document(
    index: ChunkIndex, doc_id: str, tenant: str | None = None, faq_index: ChunkIndex | None = None
) -> int:
    """Remove every chunk of a document (only if it is `tenant`'s, when given), and its FAQ entries;
    the number of points removed (0: it was not in the index)."""
    removed = await index.delete_doc(doc_id, tenant)
    return removed + (await faq_index.delete_doc(doc_id, tenant) if faq_index is not None else 0)


def iter_files(paths: Iterable[Path], extensions: Iterable[str]) -> Iterator[Path]:
    """Files named directly, and the files with one of `extensions` under named directories
    (recursively, sorted). Hidden files and folders inside a directory are skipped: they are editor
    and VCS litter, never knowledge. A named path that does not exist raises `LoadError` naming it.
    """
    suffixes = {e.lower() for e in extensions}
    for path in paths:
        if path.is_dir():
            yield from _walk(path, suffixes)
        elif path.exists():
            yield path
        else:
            raise LoadError(f"{path}: no such file or directory")


def _walk(root: Path, suffixes: set[str], seen: frozenset[Path] = frozenset()) -> Iterator[Path]:
    # `seen` holds the real paths of the folders above: a symlink back up the tree is not followed.
    real = root.resolve()
    if real in seen:
        return
    for path in sorted(root.iterdir()):
        if path.name.startswith("."):
            continue
        if path.is_dir():
            yield from _walk(path, suffixes, seen | {real})
        elif path.is_file() and path.suffix.lower() in suffixes:
            yield path


def _chunks(
    doc_id: str,
    title: str,
    blocks: Iterator[str],
    faq: Sequence[FaqPair],
    counter: TokenCounter,
    settings: Settings,
    embedder_name: str,
    headings: AbstractSet[str] = frozenset(),
) -> Iterator[_Chunk]:
    texts = chunk_text(blocks, counter, settings.chunking.chunk_tokens, settings.chunking.overlap_tokens)
    # An FAQ answer's chunk starts with its question, which is heading enough.
    faq_texts = ((text, "", FAQ_KIND) for text in faq_chunk_texts(faq, counter, settings))
    doc_texts = ((text, section, "") for text, section in chunk_sections(texts, headings))
    known = name_aliases(title)
    for i, (text, section, kind) in enumerate(itertools.chain(doc_texts, faq_texts)):
        section = "" if section == title else section
        digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
        # A name is introduced once, near the top: later chunks use the characters alone.
        known.update((k, v) for k, v in name_aliases(text).items() if k not in known)
        aliases = " ".join(f"{han} {latin}" for latin, han in known.items() if han in text or han in title)
        yield _Chunk(
            point_id(doc_id, i, digest, title, embedder_name, section, aliases),
            i, text, digest, section, kind, aliases,
        )  # fmt: skip


def _batches(chunks: Iterable[_Chunk], size: int) -> Iterator[list[_Chunk]]:
    batch: list[_Chunk] = []
    for chunk in chunks:
        batch.append(chunk)
        if len(batch) >= size:
            yield batch
            batch = []
    if batch:
        yield batch


class _Writer:
    """Embeds and upserts new chunks of one document, remembering what it wrote for a rollback."""

    def __init__(
        self,
        index: ChunkIndex,
        embedder: Embedder,
        counter: TokenCounter,
        settings: Settings,
        *,
        tenant: str,
        source: str,
        doc_id: str,
        title: str,
    ) -> None:
        self._index, self._embedder, self._counter, self._settings = index, embedder, counter, settings
        self._tenant, self._source, self._doc_id, self._title = tenant, source, doc_id, title
        self.written: list[str] = []

    async def write(self, chunks: Sequence[_Chunk]) -> None:
        if not chunks:
            return
        points = await asyncio.to_thread(self._points, chunks)
        # Recorded before the call: a failed upsert may still have stored some of the points, and
        # deleting an id that was never stored is harmless.
        self.written.extend(p.id for p in points)
        await self._index.upsert(points, self._tenant)

    def _points(self, chunks: Sequence[_Chunk]) -> list[ChunkPoint]:
        # The title goes into both vectors: a chunk about warranty terms inside the iPhone page then
        # matches "iPhone warranty" even though the chunk itself never names the product.
        texts = [f"{self._title}\n{c.section}\n{c.text}" if c.section else f"{self._title}\n{c.text}" for c in chunks]
        texts = [f"{t}\n{c.aliases}" if c.aliases else t for t, c in zip(texts, chunks, strict=True)]
        dense = self._embed(texts)
        retrieval = self._settings.retrieval
        return [
            ChunkPoint(
                id=chunk.id,
                dense=vector,
                sparse=document_vector(text, retrieval.bm25_avg_tokens, retrieval.bm25_k1, retrieval.bm25_b),
                payload=self._payload(chunk),
            )
            for chunk, text, vector in zip(chunks, texts, dense, strict=True)
        ]

    def _embed(self, texts: Sequence[str]) -> list[Vector]:
        size = self._settings.embedding.batch_size
        vectors: list[Vector] = []
        for start in range(0, len(texts), size):
            vectors.extend(self._embedder.embed_passages(texts[start : start + size]))
        return vectors

    def _payload(self, chunk: _Chunk) -> dict[str, Any]:
        return (
            {
                "tenant": self._tenant,
                "doc_id": self._doc_id,
                "source": self._source,
                "title": self._title,
                "chunk_index": chunk.index,
                "text": chunk.text,
                "content_hash": chunk.content_hash,
                "section": chunk.section,
                "lang": language(chunk.text),
                "token_count": self._counter.count(chunk.text),
            }
            | ({"kind": chunk.kind} if chunk.kind else {})
            | ({"aliases": chunk.aliases} if chunk.aliases else {})
        )
