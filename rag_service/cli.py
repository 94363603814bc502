"""Console scripts: `rag-serve` runs the HTTP service, `rag-chat` is a terminal chat.

`rag-chat` speaks the HTTP API: to a running server with `--server`, otherwise to the same app started
in-process (so the main job needs no server).
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from rich.console import Console
from rich.panel import Panel

from rag_core.settings import Settings

console = Console()


def _use_config(config: Path | None) -> None:
    if config is not None:
        os.environ["RAG_CONFIG"] = str(config)


serve_app = typer.Typer(add_completion=False, help="Run the chat service (FastAPI + uvicorn).")


def workers_problem(settings: Settings, workers: int) -> str | None:
    """Why `workers` processes cannot share these settings' stores, or None.

    What one process owns cannot be shared by several: the in-process session store (and with it the
    session locks and rate-limit counts), a SQLite archive (one writer; several would queue on its file
    lock and the write-behind of each would time out) and an embedded Qdrant folder (locked by its
    owner, an Edge shard by its writer; the other workers would not start).
    """
    if workers <= 1:
        return None
    from sqlalchemy.engine import make_url

    needs: list[str] = []
    if not settings.redis.url:
        needs.append("redis.url (RAG_REDIS__URL): sessions, their locks and rate limits shared by every worker")
    if make_url(settings.database.url).get_backend_name() == "sqlite":
        needs.append("database.url (RAG_DATABASE__URL) on PostgreSQL or MySQL: a SQLite archive has one writer process")
    in_memory = settings.qdrant.engine == "local" and settings.qdrant.path == IN_MEMORY_INDEX
    if not settings.qdrant.url and not in_memory:
        needs.append("qdrant.url (RAG_QDRANT__URL), a Qdrant server: the embedded index folder is owned by one process")
    if not needs:
        return None
    return f"--workers {workers} needs " + "; ".join(needs) + ". Or run one worker (--workers 1)."


# With `qdrant.engine: local`, every worker then has an index of its own in memory, empty at start: for
# load tests of the stores only.
IN_MEMORY_INDEX = ":memory:"


def prepare_metrics_dir(workers: int) -> Path | None:
    """Several workers write metrics to one folder (Prometheus multiprocess mode, rag_service.metrics):
    PROMETHEUS_MULTIPROC_DIR if set (then also for one worker), else a new temporary folder. Values from
    an earlier run are removed, or they would be added to this run's."""
    from rag_service.metrics import MULTIPROC_ENV

    given = os.environ.get(MULTIPROC_ENV)
    if workers <= 1 and not given:
        return None
    directory = Path(given) if given else Path(tempfile.mkdtemp(prefix="rag-metrics-"))
    directory.mkdir(parents=True, exist_ok=True)
    for stale in directory.glob("*.db"):
        stale.unlink()
    os.environ[MULTIPROC_ENV] = str(directory)
    return directory


@serve_app.command()
def serve(
    host: Annotated[str | None, typer.Option(help="Bind address (default: server.host)")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default: server.port)")] = None,
    config: Annotated[Path | None, typer.Option(help="YAML settings file (same as RAG_CONFIG)")] = None,
    workers: Annotated[
        int,
        typer.Option(min=1, help="Worker processes; more than 1 needs Redis, a database server and a Qdrant server"),
    ] = 1,
) -> None:
    import uvicorn

    from rag_service.auth import open_bind_problem

    _use_config(config)
    settings = Settings()
    bind = host or settings.server.host
    for problem in (open_bind_problem(settings, bind), workers_problem(settings, workers)):
        if problem:
            Console(stderr=True).print(
                f"rag-serve: {problem}", style="red", soft_wrap=True, markup=False, highlight=False
            )
            raise typer.Exit(2)
    prepare_metrics_dir(workers)
    uvicorn.run(
        "rag_service.api:create_app",
        factory=True,
        host=bind,
        port=port or settings.server.port,
        workers=workers,
        log_level="info",
        # The app logs one structured line per request itself.
        access_log=False,
        timeout_graceful_shutdown=settings.server.shutdown_grace_s,
    )


chat_app = typer.Typer(add_completion=False, help="Chat with the knowledge base in the terminal.")


@asynccontextmanager
async def _client(server: str | None, api_key: str | None = None) -> AsyncIterator[httpx.AsyncClient]:
    if server:
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        async with httpx.AsyncClient(base_url=server, timeout=120, headers=headers) as client:
            yield client
        return
    from rag_service.api import create_app

    # In-process, the service's per-request log lines would interleave with the conversation.
    os.environ.setdefault("RAG_OBSERVABILITY__LOG_LEVEL", "WARNING")
    app = create_app()
    async with app.router.lifespan_context(app):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://in-process", timeout=120) as client:
            yield client


def _show(turn: dict[str, Any], verbose: bool) -> None:
    console.print(Panel(turn["answer"], title=f"answer ({turn['mode']})", border_style="green"))
    if turn["rewritten_query"]:
        console.print(f"[dim]query used for retrieval:[/dim] {turn['rewritten_query']}")
    for i, src in enumerate(turn["sources"], 1):
        console.print(f"[dim]  [{i}] {src['title']} — {src['source']} (score {src['score']:.3f})[/dim]")
    r = turn["receipt"]
    console.print(
        f"[dim]tokens: prompt {r['total_prompt_tokens']} = system {r['system_tokens']} + summary {r['summary_tokens']}"
        f" + history {r['history_tokens']} + query {r['query_tokens']} + context {r['context_tokens']}"
        f" (chunk budget {r['chunk_budget']}, window {r['context_window']})[/dim]"
    )
    if verbose:
        console.print_json(json.dumps(r, ensure_ascii=False))


async def _chat(server: str | None, questions: list[str], verbose: bool, api_key: str | None = None) -> int:
    async with _client(server, api_key) as client:
        resp = await client.post("/v1/sessions")
        if resp.status_code >= 400:
            console.print(f"[red]error {resp.status_code}: {resp.json().get('detail')}[/red]")
            return 1
        session = resp.json()["session_id"]
        interactive = not questions
        while True:
            if interactive:
                try:
                    question = console.input("[bold cyan]你/you> [/bold cyan]").strip()
                except (EOFError, KeyboardInterrupt):
                    return 0
                if question in {"", "/quit", "/exit"}:
                    return 0
            elif questions:
                question = questions.pop(0)
                console.print(f"[bold cyan]你/you>[/bold cyan] {question}")
            else:
                return 0
            resp = await client.post(f"/v1/sessions/{session}/chat", json={"question": question})
            if resp.status_code >= 400:
                console.print(f"[red]error {resp.status_code}: {resp.json().get('detail')}[/red]")
                if not interactive:
                    return 1
                continue
            _show(resp.json(), verbose)


@chat_app.command()
def chat(
    question: Annotated[
        list[str] | None, typer.Option("--question", "-q", help="Ask and exit (repeatable: one session)")
    ] = None,
    server: Annotated[str | None, typer.Option(help="URL of a running rag-serve; default: in-process")] = None,
    config: Annotated[Path | None, typer.Option(help="YAML settings file (same as RAG_CONFIG)")] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Print the full budget receipt")] = False,
    api_key: Annotated[
        str | None, typer.Option("--api-key", envvar="RAG_API_KEY", help="API key for a --server that has keys")
    ] = None,
) -> None:
    _use_config(config)
    raise typer.Exit(asyncio.run(_chat(server, list(question or []), verbose, api_key)))


def serve_main() -> None:
    serve_app()


def chat_main() -> None:
    chat_app()
