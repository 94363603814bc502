"""Throw-away databases and Redis key prefixes on the servers of the test machine.

Every test module gets its own freshly created PostgreSQL / MariaDB database (dropped at the end) and
every Redis test its own random key prefix (its keys deleted at the end; never FLUSHDB), so parallel
runs and other developers' data never collide. Server addresses (no RAG_ prefix: the suite clears those):

    TEST_POSTGRES_URL  default postgresql+asyncpg://postgres@127.0.0.1:5432/test
    TEST_MYSQL_URL     default mysql+aiomysql://root@127.0.0.1:3306/test
    TEST_REDIS_URL     default redis://127.0.0.1:6379/0

A test is skipped (with the reason) only when its server cannot be reached.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import shutil
import socket
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import redis.asyncio as aioredis
import sqlalchemy as sa
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import create_async_engine

POSTGRES_URL = os.environ.get("TEST_POSTGRES_URL", "postgresql+asyncpg://postgres@127.0.0.1:5432/test")
MYSQL_URL = os.environ.get("TEST_MYSQL_URL", "mysql+aiomysql://root@127.0.0.1:3306/test")
REDIS_URL = os.environ.get("TEST_REDIS_URL", "redis://127.0.0.1:6379/0")

DIALECTS = ["sqlite", "postgresql", "mysql"]


@asynccontextmanager
async def fresh_database(kind: str, tmp: Path) -> AsyncIterator[str]:
    """The URL of a new, empty database of `kind`; dropped afterwards."""
    if kind == "sqlite":
        yield f"sqlite+aiosqlite:///{tmp / f'archive-{secrets.token_hex(4)}.db'}"
        return
    admin = POSTGRES_URL if kind == "postgresql" else MYSQL_URL
    name = f"rag_test_{secrets.token_hex(6)}"
    engine = create_async_engine(admin, isolation_level="AUTOCOMMIT")
    try:
        try:
            conn = await engine.connect()
        except (OSError, sa.exc.DBAPIError) as exc:
            pytest.skip(f"{kind} server unreachable at {make_url(admin).render_as_string()}: {exc}")
        try:
            if kind == "postgresql":
                await conn.execute(sa.text(f"CREATE DATABASE \"{name}\" ENCODING 'UTF8'"))
            else:
                await conn.execute(sa.text(f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin"))
        finally:
            await conn.close()
        try:
            yield make_url(admin).set(database=name).render_as_string(hide_password=False)
        finally:
            async with engine.connect() as conn:
                if kind == "postgresql":
                    await conn.execute(sa.text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
                else:
                    await conn.execute(sa.text(f"DROP DATABASE IF EXISTS `{name}`"))
    finally:
        await engine.dispose()


@asynccontextmanager
async def redis_prefix() -> AsyncIterator[tuple[aioredis.Redis, str]]:
    """A client and a random key prefix; every key under the prefix is deleted afterwards."""
    client = aioredis.Redis.from_url(REDIS_URL, decode_responses=True)
    try:
        await client.ping()
    except (OSError, aioredis.ConnectionError) as exc:
        await client.aclose()
        pytest.skip(f"Redis unreachable at {REDIS_URL}: {exc}")
    prefix = f"ragtest:{secrets.token_hex(6)}:"
    try:
        yield client, prefix
    finally:
        keys = [k async for k in client.scan_iter(match=prefix + "*", count=500)]
        if keys:
            await client.delete(*keys)
        await client.aclose()


class PrivateRedis:
    """A redis-server of the test's own, on a free port, with no persistence: `kill()` (SIGKILL, as a
    crash) loses everything, as a Redis restarted without a disk copy does. Only this test's process
    talks to it, so it may be killed and restarted freely."""

    def __init__(self, tmp: Path) -> None:
        self.dir = tmp
        self.port = _free_port()
        self.proc: subprocess.Popen[bytes] | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    async def start(self) -> None:
        binary = shutil.which("redis-server")
        if binary is None:
            pytest.skip("redis-server is not installed")
        options = {"port": str(self.port), "bind": "127.0.0.1", "dir": str(self.dir), "save": "", "appendonly": "no"}
        options |= {"protected-mode": "no", "daemonize": "no", "loglevel": "warning"}
        self.proc = subprocess.Popen(
            [binary, *(part for k, v in options.items() for part in (f"--{k}", v))],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        client = aioredis.Redis(port=self.port, socket_connect_timeout=0.5)
        try:
            for _ in range(400):  # a safety net only: usually up within a few tries
                try:
                    if await client.ping():
                        return
                except (OSError, aioredis.ConnectionError):
                    if self.proc.poll() is not None:
                        raise RuntimeError(f"redis-server exited with {self.proc.returncode}") from None
                    await asyncio.sleep(0.025)
            raise RuntimeError("redis-server did not come up")
        finally:
            await client.aclose()

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        self.proc = None

    async def __aenter__(self) -> PrivateRedis:
        await self.start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.kill()


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])
