"""`rag-serve` without API keys listens on loopback only, unless told `auth.allow_open`."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import uvicorn

from rag_core.settings import Settings
from rag_service.api import create_app
from rag_service.auth import hash_key, open_bind_problem
from rag_service.cli import _chat
from tests.conftest import AppClient

SUBPROCESS_TIMEOUT_S = 120


@pytest.mark.parametrize("host", ["0.0.0.0", "::", "192.0.2.10", "my-host.example"])
def test_open_mode_refuses_a_non_loopback_address(host: str) -> None:
    problem = open_bind_problem(Settings(), host)
    assert problem is not None and host in problem and "auth.allow_open" in problem


@pytest.mark.parametrize("host", ["127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"])
def test_open_mode_may_listen_on_loopback(host: str) -> None:
    assert open_bind_problem(Settings(), host) is None


@pytest.mark.parametrize(
    "auth",
    [{"tenants": {"t": [hash_key("k")]}}, {"admins": {"t": [hash_key("k")]}}, {"allow_open": True}],
)
def test_keys_or_allow_open_may_listen_anywhere(auth: dict[str, object]) -> None:
    assert open_bind_problem(Settings(auth=auth), "0.0.0.0") is None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_rag_serve_on_every_interface_without_keys_exits_without_binding(tmp_path: Path) -> None:
    config = tmp_path / "rag.yaml"
    config.write_text(json.dumps({"qdrant": {"path": str(tmp_path / "qdrant")}}))  # JSON is YAML
    port = _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAG_")}
    env["RAG_CONFIG"] = str(config)
    result = subprocess.run(
        [str(Path(sys.executable).parent / "rag-serve"), "--host", "0.0.0.0", "--port", str(port)],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=SUBPROCESS_TIMEOUT_S, check=False,
    )  # fmt: skip
    assert result.returncode == 2, result.stdout + result.stderr
    assert "refusing to listen on 0.0.0.0" in result.stderr and "RAG_AUTH__TENANTS" in result.stderr
    assert "Traceback" not in result.stderr
    # It stopped before the app was built (which makes the index folder) and before uvicorn started.
    assert not (tmp_path / "qdrant").exists()
    assert "Uvicorn running" not in result.stderr + result.stdout


async def test_rag_chat_sends_its_api_key(app_factory: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """`rag-chat --server URL --api-key KEY` against a server with keys; without the key it says why."""
    app: AppClient = await app_factory(auth={"tenants": {"shop": [hash_key("chat-key")]}})
    port = _free_port()
    server = uvicorn.Server(uvicorn.Config(create_app(services=app.services), port=port, log_level="warning"))
    serving = asyncio.create_task(server.serve())
    try:
        while not server.started:
            await asyncio.sleep(0.01)
        url = f"http://127.0.0.1:{port}"
        assert await _chat(url, ["退货政策是什么？"], False, "chat-key") == 0
        assert "answer (extractive)" in capsys.readouterr().out
        assert await _chat(url, ["退货政策是什么？"], False) == 1
        assert "error 401: missing API key" in capsys.readouterr().out
    finally:
        server.should_exit = True
        await serving
