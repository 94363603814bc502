"""`rag-admin report` on an archive holding rated turns (receipts encrypted at rest)."""

from __future__ import annotations

import asyncio
import json
import time
from pathlib import Path

import pytest
import sqlalchemy as sa
from cryptography.fernet import Fernet
from typer.testing import CliRunner

from rag_service.admin_cli import app
from rag_service.feedback import FeedbackStore, TurnRecord
from rag_service.sessions.archive import Archive, migrate_async

KEY = Fernet.generate_key().decode()


def _turn(mid: str, question: str, rewrite: str, rounds: int) -> TurnRecord:
    receipt = {"rewrite": rewrite, "rounds_kept": rounds, "compressed": False, "total_prompt_tokens": 900}
    return TurnRecord(mid, "shop", "shop:s1", question, "答案", question, "llm", [], receipt, time.time())


async def _fill(url: str) -> None:
    await migrate_async(url)
    archive = Archive(url, KEY)
    try:
        store = FeedbackStore(archive)
        await store.record_turn(_turn("m1", "退货运费谁出？", "skipped", 0))
        await store.record_turn(_turn("m2", "那换货呢？", "rule", 1))
        await store.record_turn(_turn("m3", "要几天？", "rule", 2))
        await store.rate("shop", "shop:s1", "m1", "down", "wrong", "没回答运费")
        await store.rate("shop", "shop:s1", "m2", "up")
        await store.rate("shop", "shop:s1", "m3", "down")
        async with archive.engine.connect() as conn:
            stored = (
                await conn.execute(sa.text("SELECT question FROM turn_receipts WHERE message_id = 'm1'"))
            ).scalar()
        assert stored != "退货运费谁出？"  # encrypted at rest
    finally:
        await archive.close()


def test_report_lists_ratings_hit_rate_and_worst_questions(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite+aiosqlite:///{tmp_path}/archive.db"
    asyncio.run(_fill(url))
    monkeypatch.setenv("RAG_DATABASE__URL", url)
    monkeypatch.setenv("RAG_DATABASE__ENCRYPTION_KEY", KEY)
    result = CliRunner().invoke(app, ["report", "--since", "1d", "--tenant", "shop", "--json"])
    assert result.exit_code == 0, result.output
    out = json.loads(result.output)
    assert (out["ratings"], out["up"], out["down"]) == (3, 1, 2)
    assert out["by_turn_kind"] == {"first": {"up": 0, "down": 1}, "follow_up": {"up": 1, "down": 1}}
    assert out["memory_hit_rate"] == 0.5
    assert [q["question"] for q in out["worst"]] == ["要几天？", "退货运费谁出？"]
    assert out["worst"][1]["turns"][0]["comment"] == "没回答运费"

    text = CliRunner().invoke(app, ["report", "--since", "1d", "--tenant", "shop"])
    assert text.exit_code == 0 and "memory hit rate: 50.0% of 2 rated follow-ups" in text.output
    assert CliRunner().invoke(app, ["report", "--since", "soon"]).exit_code == 2
