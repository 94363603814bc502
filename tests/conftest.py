"""Shared fixtures: one ingested copy of the sample knowledge base per test session, apps built on it,
and the project's own OpenAI-compatible server."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from rag_core.documents.pipeline import ingest_file, iter_files
from rag_core.embedding import Embedder, make_embedder
from rag_core.settings import EmbeddingSettings, Settings
from rag_core.tokens import TokenCounter, make_counter
from rag_core.vectorstore import VectorIndex, open_index
from rag_service.api import create_app
from rag_service.sessions.archive import migrate
from rag_service.testing.fake_llm import FakeLLM
from rag_service.wiring import Services, build_services
from tests.servers import fresh_database

ROOT = Path(__file__).resolve().parent.parent
KB = ROOT / "examples" / "kb"


@pytest.fixture(scope="session", autouse=True)
def _clean_environment(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Tests see the repository's default config, never the developer's RAG_* variables."""
    saved = {k: v for k, v in os.environ.items() if k.startswith("RAG_")}
    for k in saved:
        del os.environ[k]
    os.environ["RAG_CONFIG"] = str(ROOT / "configs" / "default.yaml")
    yield
    os.environ.pop("RAG_CONFIG", None)
    os.environ.update(saved)


@pytest.fixture(scope="session")
def tiktoken_dir(tmp_path_factory: pytest.TempPathFactory) -> str:
    return str(tmp_path_factory.mktemp("tiktoken"))


def deep_merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in extra.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


@pytest.fixture(scope="session")
def settings_factory(tmp_path_factory: pytest.TempPathFactory, tiktoken_dir: str) -> Callable[..., Settings]:
    def make(**overrides: Any) -> Settings:
        tmp = tmp_path_factory.mktemp("rag")
        base: dict[str, Any] = {
            "qdrant": {"path": str(tmp / "qdrant")},
            "tokens": {"cache_dir": tiktoken_dir},
            "database": {"url": f"sqlite+aiosqlite:///{tmp}/archive.db"},
        }
        return Settings(**deep_merge(base, overrides))

    return make


@pytest.fixture(scope="session")
def counter(settings_factory: Callable[..., Settings]) -> TokenCounter:
    return make_counter(settings_factory().tokens)


@pytest.fixture(scope="session")
def embedder() -> Embedder:
    return make_embedder(EmbeddingSettings())


@pytest.fixture(scope="session")
def kb_index(settings_factory: Callable[..., Settings], embedder: Embedder, counter: TokenCounter) -> VectorIndex:
    """The sample knowledge base, ingested once for the whole session."""
    settings = settings_factory()
    index = open_index(settings.qdrant, embedder.dim, embedder.name)

    async def ingest_all() -> None:
        for path in iter_files([KB], settings.ingest.extensions):
            await ingest_file(
                path, index=index, embedder=embedder, counter=counter, settings=settings,
                source=f"examples/kb/{path.name}",
            )  # fmt: skip

    # An Edge index holds no event loop of its own: the tests' loop can use it after this one.
    asyncio.run(ingest_all())
    return index


@pytest.fixture(scope="session")
def services_factory(
    settings_factory: Callable[..., Settings], kb_index: VectorIndex, embedder: Embedder, counter: TokenCounter
) -> Callable[..., Services]:
    def make(*, embedder_wrap: Callable[[Embedder], Embedder] | None = None, **overrides: Any) -> Services:
        used = embedder_wrap(embedder) if embedder_wrap is not None else embedder
        return build_services(settings_factory(**overrides), counter=counter, embedder=used, index=kb_index)

    return make


@pytest.fixture
def fake_llm() -> Iterator[FakeLLM]:
    with FakeLLM() as server:
        yield server


class AppClient:
    """An httpx client on an app whose services the test can reach."""

    def __init__(self, http: httpx.AsyncClient, services: Services) -> None:
        self.http, self.services = http, services

    async def new_session(self) -> str:
        resp = await self.http.post("/v1/sessions")
        assert resp.status_code == 201, resp.text
        return str(resp.json()["session_id"])

    async def ask(self, session_id: str, question: str) -> dict[str, Any]:
        resp = await self.http.post(f"/v1/sessions/{session_id}/chat", json={"question": question})
        assert resp.status_code == 200, resp.text
        return dict(resp.json())


@pytest.fixture
async def app_factory(services_factory: Callable[..., Services]) -> AsyncIterator[Callable[..., Any]]:
    opened: list[tuple[Any, Services]] = []

    async def make(**overrides: Any) -> AppClient:
        services = services_factory(**overrides)
        app = create_app(services=services)
        ctx = app.router.lifespan_context(app)
        await ctx.__aenter__()
        http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://test", timeout=30)
        opened.append((ctx, services))
        client = AppClient(http, services)
        opened.append((http, services))
        return client

    yield make
    for obj, services in reversed(opened):
        if isinstance(obj, httpx.AsyncClient):
            await obj.aclose()
        else:
            await services.pipeline.drain()
            for c in services.clients:
                await c.close()
            await obj.__aexit__(None, None, None)


@pytest.fixture
async def sqlite_url(tmp_path: Path) -> AsyncIterator[str]:
    """A migrated archive in a fresh SQLite file."""
    async with fresh_database("sqlite", tmp_path) as url:
        migrate(url)
        yield url
