"""The tenant's knowledge base: `/v1/documents` (admin keys, or anyone in open mode)."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import threading
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, File, Form, HTTPException, Request, UploadFile

from rag_service.api.deps import LibrarianDep, LibraryDep, SettingsDep
from rag_service.api.errors import ClientGone
from rag_service.api.models import DocumentDeleted, DocumentIngested, DocumentList

router = APIRouter(prefix="/v1/documents", tags=["documents"])

UPLOAD_BLOCK = 1 << 20
# How long a cancelled upload's worker thread is waited for: it stops at its next check.
UPLOAD_CANCEL_WAIT_S = 30.0
T = TypeVar("T")


@router.post("", status_code=201, response_model=DocumentIngested)
async def upload_document(
    request: Request,
    settings: SettingsDep,
    library: LibraryDep,
    principal: LibrarianDep,
    file: Annotated[
        UploadFile, File(description="A .txt, .md, .html, .pdf, .docx, .pptx or .xlsx document, or a .csv FAQ")
    ],
    source: Annotated[str | None, Form(max_length=1024)] = None,
) -> dict[str, Any]:
    name = Path(file.filename or "upload.txt").name
    suffix = Path(name).suffix.lower()
    name = Path(name).stem + suffix
    if suffix not in settings.ingest.extensions:
        raise HTTPException(
            422, f"unsupported file type {suffix or '(none)'}; supported: {', '.join(settings.ingest.extensions)}"
        )
    limit = int(settings.server.max_upload_mb * (1 << 20))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / name
        size = 0
        with path.open("wb") as out:
            while block := await file.read(UPLOAD_BLOCK):
                size += len(block)
                if size > limit:
                    raise HTTPException(
                        413, f"file is larger than server.max_upload_mb = {settings.server.max_upload_mb}"
                    )
                out.write(block)
        doc_source = source or f"uploads/{name}"
        async with library.lock(principal.tenant, doc_source):
            report = await _unless_client_leaves(
                request, lambda cancel: library.ingest(path, doc_source, principal.tenant, cancel)
            )
    return {
        "tenant": principal.tenant,
        "doc_id": report.doc_id,
        "source": report.source,
        "title": report.title,
        "chunks": report.chunks,
        "upserted": report.upserted,
        "deleted": report.deleted,
        "unchanged": report.unchanged,
        "faq_entries": report.faq_entries,
    }


@router.get("", response_model=DocumentList)
async def list_documents(library: LibraryDep, principal: LibrarianDep) -> dict[str, Any]:
    """The caller's tenant's documents."""
    return {"tenant": principal.tenant, "documents": await library.documents(principal.tenant)}


@router.delete("/{doc_id}", response_model=DocumentDeleted)
async def remove_document(doc_id: str, library: LibraryDep, principal: LibrarianDep) -> dict[str, Any]:
    """Removes one of the caller's tenant's documents; another tenant's is unknown here (404)."""
    removed = await library.delete(doc_id, principal.tenant)
    if not removed:
        raise HTTPException(404, f"no document with id {doc_id}")
    return {"doc_id": doc_id, "deleted": removed}


async def _unless_client_leaves(request: Request, work: Callable[[threading.Event], Awaitable[T]]) -> T:
    """`work(cancel)` as a task of its own. If the client disconnects, or this request is cancelled (the
    server stopping), `cancel` is set, which kills a PDF parser and stops indexing at the next batch; the
    task is waited for (briefly) so the document's lock outlives its cleanup."""
    cancel = threading.Event()
    job = asyncio.ensure_future(work(cancel))
    gone = asyncio.ensure_future(_disconnected(request))
    try:
        await asyncio.wait({job, gone}, return_when=asyncio.FIRST_COMPLETED)
        if not job.done():
            raise ClientGone()
        return job.result()
    finally:
        gone.cancel()
        if not job.done():
            cancel.set()
            with contextlib.suppress(BaseException):
                await asyncio.wait_for(asyncio.shield(job), UPLOAD_CANCEL_WAIT_S)


async def _disconnected(request: Request) -> None:
    # The body has been read by now: the next message is the disconnect (or the end of the response).
    while (await request.receive())["type"] != "http.disconnect":
        pass
