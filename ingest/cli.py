"""`rag-ingest`: add, update, delete and count knowledge-base documents.

    rag-ingest PATH...            ingest files and directories (idempotent: unchanged files cost nothing)
    rag-ingest --delete PATH...   remove those documents
    rag-ingest --stats            documents and chunks in the index
    rag-ingest --push URL         copy the embedded index to a Qdrant server (then set qdrant.url to it)
    rag-ingest --push edge        copy a local-mode folder (qdrant.engine: local) into Edge shards beside it
    rag-ingest --optimize         build the embedded index's HNSW graphs now (every ingest run does it too)

Documents belong to a tenant (`--tenant`, default: the default tenant of open mode). An embedded index
(Qdrant Edge shards, or local mode's folder) has one owner process at a time. When a running rag-serve
holds it, the files go to that server's HTTP API instead (`--server`, default: the configured host and port); the server then puts them
in the tenant of the API key sent (`--api-key` or RAG_API_KEY, an admin key when the server has keys).
Exit status: 0 success, 1 some file failed or a document to delete was not found, 2 nothing could run.
"""

from __future__ import annotations

import asyncio
import logging
import mimetypes
import os
import re
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Protocol, TypeVar

import httpx
import typer
import yaml
from pydantic import ValidationError
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn
from rich.table import Table

from rag_core.documents.faq import faq_collection
from rag_core.documents.loaders import LoadError, check_file, supported_extensions
from rag_core.documents.pipeline import IngestReport, delete_document, doc_id_for, ingest_file, iter_files, source_for
from rag_core.embedding import make_embedder
from rag_core.settings import DEFAULT_TENANT, TENANT_NAME, QdrantSettings, Settings
from rag_core.tokens import make_counter
from rag_core.vectorstore import IndexBusyError, IndexSchemaError, VectorIndex, check_free, copy_index, open_index

EXIT_FAILED = 1
EXIT_UNUSABLE = 2
CONNECT_TIMEOUT_S = 3.0
# A server bound to every interface is reached through loopback.
_WILDCARD_HOSTS = {"0.0.0.0": "127.0.0.1", "::": "::1", "": "127.0.0.1"}
_ERROR_DETAIL_CHARS = 300

app = typer.Typer(add_completion=False, rich_markup_mode=None)
T = TypeVar("T")


class BackendError(Exception):
    """The index or the server refused one operation; the message names the document."""


class Backend(Protocol):
    def ingest(self, path: Path, source: str, on_chunks: Callable[[int], None]) -> IngestReport: ...

    def delete(self, source: str) -> int | None:
        """Chunks removed; 0 when the document is not in the index, None when the count is unknown."""
        ...

    def documents(self) -> dict[str, dict[str, Any]]: ...

    def tenant(self) -> str:
        """The tenant the documents go to (raises BackendError when it is not the one asked for)."""
        ...

    def finish(self) -> None:
        """After a run that changed documents: build what the index builds (Edge: its HNSW graphs)."""
        ...

    def close(self) -> None: ...


@dataclass(frozen=True)
class _Outcome:
    source: str
    report: IngestReport | None = None
    error: str | None = None


# ---------------------------------------------------------------- backends


class LocalBackend:
    """Works on the index directly (embedded, or a Qdrant server at qdrant.url); settings, embedder,
    counter and index are built once. The index is async: its calls run on one event loop of this
    backend's own, kept for the whole run (a server client's connections belong to it)."""

    def __init__(self, settings: Settings, tenant: str = DEFAULT_TENANT) -> None:
        self._runner = asyncio.Runner()
        self._settings, self._tenant = settings, tenant
        try:
            check_free(settings.qdrant)  # a busy index says so before any model is loaded
            self._embedder = make_embedder(settings.embedding)
            self._counter = make_counter(settings.tokens)
            self._index = open_index(settings.qdrant, self._embedder.dim, self._embedder.name)
            # FAQ entries live beside the chunks; closing the index closes them too.
            self._faq = self._index.sibling(faq_collection(settings.qdrant.collection))
        except BaseException:
            self._runner.close()
            raise

    def _run(self, work: Awaitable[T]) -> T:
        async def wrapped() -> T:
            return await work

        return self._runner.run(wrapped())

    def ingest(self, path: Path, source: str, on_chunks: Callable[[int], None]) -> IngestReport:
        return self._run(ingest_file(
            path, index=self._index, embedder=self._embedder, counter=self._counter, settings=self._settings,
            source=source, tenant=self._tenant, on_chunks=on_chunks, faq_index=self._faq,
        ))  # fmt: skip

    def delete(self, source: str) -> int | None:
        return self._run(delete_document(self._index, doc_id_for(source, self._tenant), self._tenant, self._faq))

    def documents(self) -> dict[str, dict[str, Any]]:
        return self._run(self._index.documents(self._tenant))

    def tenant(self) -> str:
        return self._tenant

    def finish(self) -> None:
        self._run(self._index.optimize())
        self._run(self._faq.optimize())

    def push(self, target: str, on_points: Callable[[str, int], None]) -> dict[str, int]:
        """Every tenant's points into the Qdrant server at `target`, or (`edge`) into Edge shards in this
        local-mode index's folder."""
        q = self._settings.qdrant
        if target == "edge":
            if q.url or q.engine != "local":
                raise BackendError("--push edge copies a local-mode folder: set qdrant.engine: local (and no url)")
            from rag_core.vectorstore.edge import EdgeIndex

            into: VectorIndex = EdgeIndex(
                q.model_copy(update={"engine": "edge"}), self._embedder.dim, self._embedder.name,
                beside_local_mode=True,
            )  # fmt: skip
        else:
            into = open_index(
                QdrantSettings(url=target, api_key=q.api_key, collection=q.collection, timeout_s=q.timeout_s),
                self._embedder.dim, self._embedder.name,
            )  # fmt: skip

        async def copy() -> dict[str, int]:
            batch = self._settings.ingest.upsert_batch
            try:
                copied = await copy_index(self._index, into, batch, on_points)
                # The FAQ entries live in a collection of their own beside the chunks; without them the
                # pushed index would answer nothing on the short path.
                into_faq = into.sibling(faq_collection(q.collection))
                faq = await copy_index(self._faq, into_faq, batch, on_points)
                for tenant, n in faq.items():
                    copied[tenant] = copied.get(tenant, 0) + n
                await into.optimize()
                await into_faq.optimize()
                return copied
            finally:
                await into.close()

        return self._run(copy())

    def close(self) -> None:
        try:
            self._run(self._index.close())
        finally:
            self._runner.close()


class RemoteBackend:
    """Sends files to a running rag-serve, which holds the index. The server decides the tenant (the one
    of the API key); `tenant`, when given, must be that one."""

    def __init__(
        self, base_url: str, settings: Settings, api_key: str | None = None, tenant: str | None = None
    ) -> None:
        self._url = base_url.rstrip("/")
        self._settings = settings
        self._expected_tenant = tenant
        self._tenant: str | None = None
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # The server embeds before it answers: a large upload may legitimately take minutes.
        self._http = httpx.Client(timeout=httpx.Timeout(CONNECT_TIMEOUT_S, read=None, write=None), headers=headers)

    def tenant(self) -> str:
        """The tenant the server files this key's documents under (asked once)."""
        if self._tenant is None:
            body = self._call("GET", "/v1/documents", "--tenant") or {}
            # A server from before tenants has only the default one.
            tenant = str(body.get("tenant", DEFAULT_TENANT))
            if self._expected_tenant is not None and tenant != self._expected_tenant:
                raise BackendError(
                    f"--tenant {self._expected_tenant!r}: the server at {self._url} files this API key's "
                    f"documents under tenant {tenant!r}; use that tenant's admin key"
                )
            self._tenant = tenant
        return self._tenant

    def ingest(self, path: Path, source: str, on_chunks: Callable[[int], None]) -> IngestReport:
        check_file(path, self._settings.ingest, source)  # don't upload what the server must refuse
        self.tenant()
        mime = mimetypes.guess_type(path.name)[0] or "application/octet-stream"
        with path.open("rb") as fh:
            body = self._call("POST", "/v1/documents", source, files={"file": (path.name, fh, mime)},
                              data={"source": source})  # fmt: skip
        report = _report_from_json(body, source)
        on_chunks(report.chunks)
        return report

    def delete(self, source: str) -> int | None:
        body = self._call("DELETE", f"/v1/documents/{doc_id_for(source, self.tenant())}", source, missing_ok=True)
        if body is None:
            return 0
        count = body.get("deleted", body.get("chunks"))
        return count if isinstance(count, int) else None

    def documents(self) -> dict[str, dict[str, Any]]:
        self.tenant()
        body = self._call("GET", "/v1/documents", "--stats") or {}
        listed = body.get("documents")
        if not isinstance(listed, list):
            raise BackendError(f"--stats: unexpected answer from the server at {self._url}")
        return {str(d.get("doc_id")): d for d in listed if isinstance(d, dict)}

    def finish(self) -> None:
        """The server owns the index; its shards are indexed by the next `rag-ingest` run that owns them."""

    def close(self) -> None:
        self._http.close()

    def _call(
        self, method: str, route: str, source: str, *, missing_ok: bool = False, **kwargs: Any
    ) -> dict[str, Any] | None:
        try:
            response = self._http.request(method, self._url + route, **kwargs)
        except httpx.HTTPError as exc:
            raise BackendError(f"{source}: cannot reach the server at {self._url} ({exc})") from exc
        if missing_ok and response.status_code == httpx.codes.NOT_FOUND:
            return None
        if response.is_success:
            body = _json(response)
            return body if isinstance(body, dict) else {}
        raise BackendError(_error_message(response, source))


def server_alive(url: str) -> bool:
    try:
        return httpx.get(f"{url.rstrip('/')}/healthz", timeout=CONNECT_TIMEOUT_S).is_success
    except httpx.HTTPError:
        return False


def default_server(settings: Settings) -> str:
    host = _WILDCARD_HOSTS.get(settings.server.host, settings.server.host)
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{settings.server.port}"


def _json(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _error_message(response: httpx.Response, source: str) -> str:
    body = _json(response)
    detail = body.get("detail") if isinstance(body, dict) else None
    text = str(detail) if detail is not None else response.text[:_ERROR_DETAIL_CHARS]
    message = f"server answered {response.status_code}: {text}"
    return message if source in text else f"{source}: {message}"


def _report_from_json(body: dict[str, Any] | None, source: str) -> IngestReport:
    body = body or {}
    try:
        return IngestReport(
            source=str(body.get("source", source)),
            doc_id=str(body.get("doc_id", doc_id_for(source))),
            title=str(body.get("title", "")),
            chunks=int(body.get("chunks", 0)),
            upserted=int(body.get("upserted", 0)),
            deleted=int(body.get("deleted", 0)),
            unchanged=bool(body.get("unchanged", False)),
            faq_entries=int(body.get("faq_entries", 0)),
        )
    except (TypeError, ValueError) as exc:
        raise BackendError(f"{source}: unexpected answer from the server ({exc})") from exc


# ---------------------------------------------------------------- set-up


@contextmanager
def _config_env(config: Path | None) -> Iterator[None]:
    """`--config` is RAG_CONFIG for the duration of settings loading, and no longer."""
    if config is None:
        yield
        return
    previous = os.environ.get("RAG_CONFIG")
    os.environ["RAG_CONFIG"] = str(config)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("RAG_CONFIG", None)
        else:
            os.environ["RAG_CONFIG"] = previous


def load_settings(config: Path | None) -> Settings:
    with _config_env(config):
        return Settings()


def open_backend(
    settings: Settings, server: str | None, err: Console, *, tenant: str | None = None, api_key: str | None = None
) -> Backend:
    try:
        return LocalBackend(settings, DEFAULT_TENANT if tenant is None else tenant)
    except IndexBusyError as busy:
        url = server or default_server(settings)
        if server_alive(url):
            err.print(f"The index is in use; sending the work to the server at {url}.", markup=False)
            return RemoteBackend(url, settings, api_key, tenant)
        err.print(f"{busy}\n(No server answered at {url}/healthz.)", markup=False, soft_wrap=True)
        raise typer.Exit(EXIT_UNUSABLE) from None
    except IndexSchemaError as exc:
        err.print(str(exc), markup=False, soft_wrap=True)
        raise typer.Exit(EXIT_UNUSABLE) from None


# ---------------------------------------------------------------- commands


def _collect(paths: Sequence[Path], extensions: list[str]) -> tuple[list[Path], list[_Outcome]]:
    """The files to ingest (each once, in order) and the named paths that do not exist."""
    files: dict[str, Path] = {}
    missing: list[_Outcome] = []
    for path in paths:
        try:
            for file in iter_files([path], extensions):
                files.setdefault(source_for(file), file)
        except LoadError as exc:
            missing.append(_Outcome(source=source_for(path), error=str(exc)))
    return list(files.values()), missing


def _ingest_all(backend: Backend, files: list[Path], out: Console) -> list[_Outcome]:
    outcomes: list[_Outcome] = []
    with _progress(out) as progress:
        files_task = progress.add_task("files", total=len(files))
        chunks_task = progress.add_task("chunks", total=None)
        for path in files:
            source = source_for(path)
            progress.update(files_task, description=f"files ({escape(source)})")
            outcome = _ingest_one(backend, path, source, lambda n: progress.advance(chunks_task, n))
            _print_outcome(progress.console, outcome)
            outcomes.append(outcome)
            progress.advance(files_task)
    return outcomes


def _ingest_one(backend: Backend, path: Path, source: str, on_chunks: Callable[[int], None]) -> _Outcome:
    try:
        return _Outcome(source=source, report=backend.ingest(path, source, on_chunks))
    except (LoadError, BackendError) as exc:
        return _Outcome(source=source, error=str(exc))
    except Exception as exc:  # one bad file (a parser crash, say) must not stop the run
        return _Outcome(source=source, error=f"{source}: {type(exc).__name__}: {exc}")


def _progress(console: Console) -> Progress:
    return Progress(
        SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
        console=console, transient=True, disable=not console.is_terminal,
    )  # fmt: skip


def _print_outcome(console: Console, outcome: _Outcome) -> None:
    if outcome.error is not None:
        console.print(f"[red]✗[/] {escape(outcome.error)}", soft_wrap=True)
        return
    report = outcome.report
    assert report is not None
    state = " [dim](unchanged)[/]" if report.unchanged else ""
    faq = f", {report.faq_entries} FAQ entries" if report.faq_entries else ""
    console.print(
        f"[green]✓[/] {escape(report.source)}: {report.chunks} chunks{faq}, {report.upserted} upserted, "
        f"{report.deleted} deleted{state}",
        soft_wrap=True,
    )


def _summary(console: Console, outcomes: list[_Outcome]) -> None:
    table = Table(title="rag-ingest summary")
    table.add_column("File", overflow="fold")  # a path is worth more than a title when space is short
    table.add_column("Title")
    for column in ("Chunks", "Upserted", "Deleted"):
        table.add_column(column, justify="right")
    table.add_column("Status")
    for o in outcomes:
        r = o.report
        if r is None:
            table.add_row(escape(o.source), "", "", "", "", "[red]failed[/]")
        else:
            status = "unchanged" if r.unchanged else "[green]updated[/]"
            table.add_row(escape(r.source), escape(r.title), str(r.chunks), str(r.upserted), str(r.deleted), status)
    console.print(table)
    failed = sum(o.report is None for o in outcomes)
    unchanged = sum(o.report is not None and o.report.unchanged for o in outcomes)
    console.print(
        f"{len(outcomes)} file(s): {len(outcomes) - failed - unchanged} updated, {unchanged} unchanged, {failed} failed"
    )


def _delete_all(backend: Backend, paths: Sequence[Path], extensions: list[str], out: Console) -> bool:
    """Delete the documents of `paths` (directories that still exist expand to their files)."""
    ok = True
    for path in paths:
        targets = list(iter_files([path], extensions)) if path.is_dir() else [path]
        for target in targets:
            source = source_for(target)
            try:
                removed = backend.delete(source)
            except BackendError as exc:
                out.print(f"[red]✗[/] {escape(str(exc))}", soft_wrap=True)
                ok = False
                continue
            if removed == 0:
                out.print(f"[red]✗[/] {escape(source)}: not in the index", soft_wrap=True)
                ok = False
            else:
                count = "its" if removed is None else str(removed)
                out.print(f"[green]✓[/] {escape(source)}: removed {count} chunks", soft_wrap=True)
    return ok


def _print_stats(backend: Backend, out: Console) -> None:
    documents = backend.documents()
    chunks = sum(int(d.get("chunks", 0)) for d in documents.values())
    out.print(f"documents: {len(documents)}, chunks: {chunks}")
    if not documents:
        return
    table = Table()
    for column in ("Source", "Title", "Chunks", "Doc id"):
        table.add_column(column, justify="right" if column == "Chunks" else "left")
    for doc_id, d in sorted(documents.items(), key=lambda item: str(item[1].get("source"))):
        table.add_row(escape(str(d.get("source"))), escape(str(d.get("title"))), str(d.get("chunks")), doc_id)
    out.print(table)


@app.command()
def run(
    paths: Annotated[
        list[Path] | None,
        typer.Argument(metavar="PATH", help="Files or directories to ingest (or delete).", show_default=False),
    ] = None,
    delete: Annotated[bool, typer.Option("--delete", help="Remove the documents of PATH... from the index.")] = False,
    stats: Annotated[bool, typer.Option("--stats", help="Print the documents and chunks in the index.")] = False,
    config: Annotated[Path | None, typer.Option("--config", help="Settings YAML (same as RAG_CONFIG).")] = None,
    server: Annotated[
        str | None, typer.Option("--server", help="rag-serve URL to use when it holds the index.")
    ] = None,
    tenant: Annotated[
        str | None,
        typer.Option("--tenant", help="The tenant the documents belong to (default: open mode's tenant)."),
    ] = None,
    api_key: Annotated[
        str | None,
        typer.Option("--api-key", envvar="RAG_API_KEY", help="Key sent to the server (an admin key when it has keys)."),
    ] = None,
    push: Annotated[
        str | None,
        typer.Option(
            "--push",
            metavar="URL|edge",
            help="Copy every tenant's points to the Qdrant server at URL (then set qdrant.url to it), or "
            "'edge': a local-mode folder into Edge shards beside it.",
        ),
    ] = None,
    optimize: Annotated[
        bool, typer.Option("--optimize", help="Build the embedded index's HNSW graphs now (ingest runs do).")
    ] = False,
) -> None:
    """Ingest PATH... (files, or directories searched recursively) into the knowledge-base index.

    Re-running is cheap: unchanged files are skipped, changed ones replace their old chunks. With
    --delete, remove the documents of PATH... instead. When a running rag-serve holds the local index,
    the work goes to it over HTTP. Exit status: 0 ok, 1 some file failed, 2 nothing could run.
    """
    out, err = Console(highlight=False), Console(stderr=True, highlight=False)
    if not paths and not stats and push is None and not optimize:
        err.print("Nothing to do: give PATH... (with --delete to remove), --stats, --push or --optimize.")
        raise typer.Exit(EXIT_UNUSABLE)
    try:
        settings = load_settings(config)
    except (OSError, ValidationError, ValueError, yaml.YAMLError) as exc:
        err.print(f"Configuration error: {exc}", markup=False, soft_wrap=True)
        raise typer.Exit(EXIT_UNUSABLE) from None
    if tenant is not None and not re.fullmatch(TENANT_NAME, tenant):
        err.print(f"--tenant {tenant!r}: a tenant name must match {TENANT_NAME}", markup=False)
        raise typer.Exit(EXIT_UNUSABLE)
    extensions = supported_extensions(settings.ingest)
    if push is not None or optimize:
        _maintain(settings, push, out, err)
        if not paths and not stats:
            return
    backend = open_backend(settings, server, err, tenant=tenant, api_key=api_key)
    try:
        ok = _run(backend, paths or [], delete=delete, stats=stats, extensions=extensions, out=out)
    except BackendError as exc:
        err.print(str(exc), markup=False, soft_wrap=True)
        raise typer.Exit(EXIT_UNUSABLE) from None
    finally:
        backend.close()
    if not ok:
        raise typer.Exit(EXIT_FAILED)


def _run(
    backend: Backend, paths: Sequence[Path], *, delete: bool, stats: bool, extensions: list[str], out: Console
) -> bool:
    backend.tenant()  # a server filing this key's documents under another tenant stops the run here
    ok = True
    if paths and delete:
        ok = _delete_all(backend, paths, extensions, out)
    elif paths:
        files, missing = _collect(paths, extensions)
        for outcome in missing:
            _print_outcome(out, outcome)
        if not files and not missing:
            out.print("No supported files found (supported: " + ", ".join(extensions) + ").")
        outcomes = missing + _ingest_all(backend, files, out)
        _summary(out, outcomes)
        ok = all(o.report is not None for o in outcomes)
        if any(o.report is not None and not o.report.unchanged for o in outcomes):
            backend.finish()
    if stats:
        _print_stats(backend, out)
    return ok


def _maintain(settings: Settings, push: str | None, out: Console, err: Console) -> None:
    """--push and --optimize: work on the whole index, so this process must own it."""
    try:
        backend = LocalBackend(settings)
    except IndexBusyError as busy:
        err.print(f"{busy}\n(--push and --optimize need the index to themselves: stop rag-serve first.)",
                  markup=False, soft_wrap=True)  # fmt: skip
        raise typer.Exit(EXIT_UNUSABLE) from None
    except IndexSchemaError as exc:
        err.print(str(exc), markup=False, soft_wrap=True)
        raise typer.Exit(EXIT_UNUSABLE) from None
    try:
        if push is not None:
            with _progress(out) as progress:
                task = progress.add_task("points", total=None)
                copied = backend.push(push, lambda _tenant, n: progress.advance(task, n))
            for name, n in copied.items():
                out.print(f"[green]✓[/] tenant {escape(name or '(default)')}: {n} points pushed to {escape(push)}")
            if push != "edge":
                out.print(f"Now point the service at it: qdrant.url: {escape(push)} (RAG_QDRANT__URL={escape(push)}).")
        else:
            backend.finish()
            out.print("[green]✓[/] index optimized")
    except BackendError as exc:
        err.print(str(exc), markup=False, soft_wrap=True)
        raise typer.Exit(EXIT_UNUSABLE) from None
    except Exception as exc:  # the server refusing, or gone: say so, not a traceback
        err.print(f"--push {push}: {type(exc).__name__}: {exc}", markup=False, soft_wrap=True)
        raise typer.Exit(EXIT_UNUSABLE) from None
    finally:
        backend.close()


def main() -> None:
    # pypdf logs every malformed PDF at WARNING; the per-file error line already says what is wrong.
    logging.getLogger("pypdf").setLevel(logging.ERROR)
    app()


if __name__ == "__main__":
    main()
