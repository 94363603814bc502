"""`rag-admin`: operator reports read from the archive database.

    rag-admin report --since 7d [--tenant T] [--worst 20] [--json]

The same report as `GET /v1/feedback/report` (rag_service/feedback.py): ratings per day, by mode and
by turn kind, the memory hit rate (rated follow-ups rated up), and the worst-rated questions with the
receipts of their turns. Reads `database.url` (and `database.encryption_key`) from the settings.
"""

from __future__ import annotations

import asyncio
import json
import os
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from rag_core.settings import DEFAULT_TENANT, Settings
from rag_service.feedback import FeedbackStore, parse_since, report
from rag_service.sessions.archive import Archive, migrate_async

app = typer.Typer(add_completion=False, rich_markup_mode=None, help="Operator reports from the archive.")


@app.callback()
def _main() -> None:
    """Operator reports from the archive."""


async def _report(settings: Settings, tenant: str, since: float, worst: int) -> dict[str, Any]:
    await migrate_async(settings.database.url)
    archive = Archive(settings.database.url, settings.database.encryption_key)
    try:
        rows = await FeedbackStore(archive).rows(tenant, since)
    finally:
        await archive.close()
    return {"tenant": tenant, "since": since, **report(rows, worst=worst)}


def _tallies(console: Console, title: str, tallies: dict[str, dict[str, int]]) -> None:
    table = Table(title=title)
    for column in ("", "up", "down", "share up"):
        table.add_column(column, justify="left" if not column else "right")
    for name, t in tallies.items():
        total = t["up"] + t["down"]
        table.add_row(name, str(t["up"]), str(t["down"]), f"{t['up'] / total:.0%}" if total else "")
    console.print(table)


@app.command("report")
def report_command(
    since: Annotated[str, typer.Option(help="7d, 24h, 30m or epoch seconds")] = "7d",
    tenant: Annotated[str, typer.Option(help="The tenant (default: open mode's)")] = DEFAULT_TENANT,
    worst: Annotated[int, typer.Option(min=1, max=500, help="How many worst-rated questions")] = 20,
    as_json: Annotated[bool, typer.Option("--json", help="Print the report as JSON")] = False,
    config: Annotated[Path | None, typer.Option("--config", help="Settings YAML (same as RAG_CONFIG).")] = None,
) -> None:
    """Ratings per day, by mode and turn kind, the memory hit rate and the worst-rated questions."""
    if config is not None:
        os.environ["RAG_CONFIG"] = str(config)
    try:
        start = parse_since(since)
    except ValueError as exc:
        raise typer.BadParameter(str(exc)) from None
    out = asyncio.run(_report(Settings(), tenant, start, worst))
    console = Console(highlight=False)
    if as_json:
        typer.echo(json.dumps(out, ensure_ascii=False, indent=1))
        return
    rate = out["memory_hit_rate"]
    console.print(
        f"{out['ratings']} ratings ({out['up']} up, {out['down']} down); memory hit rate: "
        + (f"{rate:.1%} of {out['rated_follow_ups']} rated follow-ups" if rate is not None else "no rated follow-ups")
    )
    _tallies(console, "by day", out["by_day"])
    _tallies(console, "by mode", out["by_mode"])
    _tallies(console, "by turn kind", out["by_turn_kind"])
    table = Table(title="worst-rated questions")
    for column in ("question", "down", "up", "last answer", "rewritten query", "mode"):
        table.add_column(column, overflow="fold")
    for q in out["worst"]:
        last = q["turns"][0]
        table.add_row(
            q["question"], str(q["down"]), str(q["up"]), (last["answer"] or "")[:120], last["rewritten_query"] or "",
            last["mode"],
        )  # fmt: skip
    console.print(table)


def main() -> None:
    app()
