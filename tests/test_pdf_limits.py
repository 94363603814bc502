"""PDFs that expand enormously: parsed in a child process under limits on time, pages, expanded content
and extracted text; the child is killed when the limit passes, the caller cancels, the upload's client
leaves or its request is cancelled (a server stopping)."""

from __future__ import annotations

import asyncio
import os
import threading
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

from rag_core.documents.loaders import LoadCancelled, LoadError, load_document
from rag_core.settings import IngestSettings
from rag_service.api import create_app
from tests.conftest import AppClient


def build_pdf(content: bytes, *, pages: int = 1, declared: int | None = None) -> bytes:
    """A PDF whose `pages` pages all draw one Flate-compressed content stream."""
    packed = zlib.compress(content, 9)
    kids = " ".join(f"{4 + i} 0 R" for i in range(pages))
    font = b"<< /Font << /F1 << /Type /Font /Subtype /Type1 /BaseFont /Helvetica >> >> >>"
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        f"<< /Type /Pages /Kids [{kids}] /Count {declared or pages} >>".encode(),
        b"<< /Length %d /Filter /FlateDecode >>\nstream\n" % len(packed) + packed + b"\nendstream",
        *[b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 3 0 R /Resources " + font + b" >>"] * pages,
    ]
    out, offsets = b"%PDF-1.4\n", []
    for n, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % n + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % o for o in offsets)
    return out + b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)


def text_ops(repeat: int) -> bytes:
    return b"BT /F1 12 Tf 72 720 Td " + b"(Invoices are issued within one day.) Tj " * repeat + b"ET"


# Sixty megabytes of drawing operators from a few dozen kilobytes: far more than any limit below lets
# pypdf interpret (it parses content in pure Python, at a few MB/s at best), and no text to count.
HUGE_DRAWING = b"0 0 m 1 1 l S " * 4_300_000


def write(tmp_path: Path, name: str, data: bytes) -> Path:
    path = tmp_path / name
    path.write_bytes(data)
    return path


def pdf_workers() -> list[int]:
    """This process's running PDF worker children."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes()
            ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if b"rag_core.documents.pdf_worker" in cmdline and ppid == os.getpid():
            found.append(int(entry.name))
    return found


async def until(condition: Callable[[], bool]) -> None:
    for _ in range(1500):  # a safety net of ~30 s; normally true within a few polls
        if condition():
            return
        await asyncio.sleep(0.02)
    raise AssertionError("condition never held")


def test_a_normal_pdf_still_loads(tmp_path: Path) -> None:
    doc = load_document(write(tmp_path, "ok.pdf", build_pdf(text_ops(3), pages=2)), IngestSettings())
    text = "".join(doc.blocks)
    assert text.count("Invoices are issued within one day.") == 6 and doc.title.startswith("Invoices")


def test_extracted_text_is_bounded(tmp_path: Path) -> None:
    path = write(tmp_path, "wordy.pdf", build_pdf(text_ops(2000), pages=3))
    with pytest.raises(LoadError, match=r"wordy\.pdf: .*exceeds ingest\.pdf_max_chars = 5000 characters"):
        load_document(path, IngestSettings(pdf_max_chars=5000))


def test_pages_are_bounded_before_the_page_tree_is_flattened(tmp_path: Path) -> None:
    declared = write(tmp_path, "declared.pdf", build_pdf(text_ops(1), declared=10_000_000))
    with pytest.raises(LoadError, match=r"declares 10000000 pages; ingest\.pdf_max_pages is 2000"):
        load_document(declared, IngestSettings())
    shared = write(tmp_path, "shared.pdf", build_pdf(text_ops(1), pages=40, declared=1))  # a lying /Count
    with pytest.raises(LoadError, match=r"has 40 pages; ingest\.pdf_max_pages is 30"):
        load_document(shared, IngestSettings(pdf_max_pages=30))


def test_expanded_content_is_bounded(tmp_path: Path) -> None:
    """One small stream drawn by many pages: each page counts its decoded content."""
    path = write(tmp_path, "shared.pdf", build_pdf(b"0 0 m 1 1 l S " * 20_000, pages=50))
    assert path.stat().st_size < 20_000
    with pytest.raises(LoadError, match=r"expands beyond ingest\.pdf_max_content_mb = 1 MB \(by page 4\)"):
        load_document(path, IngestSettings(pdf_max_content_mb=1))
    # A single stream larger than the limit is stopped by pypdf while it decompresses.
    with pytest.raises(
        LoadError,
        match=r"bomb\.pdf: page 1 exceeds the parser's limits \(a stream may expand to ingest\.pdf_max_content_mb = 10 MB",
    ):
        load_document(write(tmp_path, "bomb.pdf", build_pdf(HUGE_DRAWING)), IngestSettings(pdf_max_content_mb=10))


def test_parse_time_is_bounded_and_the_worker_killed(tmp_path: Path) -> None:
    path = write(tmp_path, "bomb.pdf", build_pdf(HUGE_DRAWING))
    assert path.stat().st_size < 200_000
    with pytest.raises(LoadError, match=r"bomb\.pdf: reading the PDF took longer than ingest\.pdf_timeout_s = 1 s"):
        load_document(path, IngestSettings(pdf_timeout_s=1))
    assert pdf_workers() == []


async def test_cancel_kills_the_worker(tmp_path: Path) -> None:
    path = write(tmp_path, "bomb.pdf", build_pdf(HUGE_DRAWING))
    cancel = threading.Event()
    loading = asyncio.ensure_future(
        asyncio.to_thread(load_document, path, IngestSettings(pdf_timeout_s=600), cancel=cancel)
    )
    await until(lambda: bool(pdf_workers()))
    cancel.set()
    with pytest.raises(LoadCancelled):
        await loading
    assert pdf_workers() == []


def multipart(name: str, data: bytes) -> tuple[bytes, list[tuple[bytes, bytes]]]:
    request = httpx.Request("POST", "http://t/v1/documents", files={"file": (name, data, "application/pdf")})
    return request.read(), [(k.lower().encode(), v.encode()) for k, v in request.headers.items()]


async def upload_asgi(app: Any, body: bytes, headers: list[tuple[bytes, bytes]], leave: asyncio.Event) -> list[Any]:
    """POST the body straight to the ASGI app; the client "leaves" (http.disconnect) once `leave` is set."""
    sent: list[Any] = []
    delivered = False

    async def receive() -> dict[str, Any]:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        await leave.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/documents",
        "raw_path": b"/v1/documents",
        "query_string": b"",
        "headers": [(b"host", b"t"), *headers],
        "client": ("127.0.0.1", 1),
        "server": ("t", 80),
    }
    await app(scope, receive, send)
    return sent


async def test_upload_too_expensive_to_parse_is_a_422(app_factory: Any) -> None:
    app: AppClient = await app_factory(
        ingest={"pdf_timeout_s": 1}, auth={"rate_limit": {"per_key": "", "per_session": "", "per_address": ""}}
    )
    resp = await app.http.post("/v1/documents", files={"file": ("bomb.pdf", build_pdf(HUGE_DRAWING))})
    assert resp.status_code == 422 and "ingest.pdf_timeout_s" in resp.json()["detail"]
    assert pdf_workers() == []
    docs = (await app.http.get("/v1/documents")).json()["documents"]
    assert "uploads/bomb.pdf" not in [d["source"] for d in docs]


@pytest.mark.parametrize("how", ["client leaves", "request cancelled"])
async def test_upload_is_abandoned_when_its_client_leaves_or_the_server_stops(app_factory: Any, how: str) -> None:
    app: AppClient = await app_factory(
        ingest={"pdf_timeout_s": 600}, auth={"rate_limit": {"per_key": "", "per_session": "", "per_address": ""}}
    )
    asgi = create_app(services=app.services)
    body, headers = multipart("bomb.pdf", build_pdf(HUGE_DRAWING))
    leave = asyncio.Event()
    async with asgi.router.lifespan_context(asgi):
        request = asyncio.ensure_future(upload_asgi(asgi, body, headers, leave))
        await until(lambda: bool(pdf_workers()))
        if how == "client leaves":
            leave.set()
            await request  # the route returns without waiting for the parse
        else:  # what uvicorn does to requests still running when its graceful-shutdown timeout ends
            request.cancel()
            await asyncio.gather(request, return_exceptions=True)
        await until(lambda: not pdf_workers())
    docs = (await app.http.get("/v1/documents")).json()["documents"]
    assert "uploads/bomb.pdf" not in [d["source"] for d in docs]
