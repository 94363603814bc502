"""A deterministic, OpenAI-compatible chat completions server for tests and benchmarks.

Standard library only.  Use it in-process::

    with FakeLLM() as llm:
        client = openai.OpenAI(base_url=llm.base_url, api_key="x")
        ...

or in the foreground from a shell::

    python -m rag_service.testing.fake_llm --host 127.0.0.1 --port 8001 --delay 0.3 --chunk-chars 8

Endpoints: ``POST /v1/chat/completions`` (plain and ``"stream": true``),
``GET /v1/models``; everything else answers 404 in OpenAI's error shape.

To stop a streamed reply at a known point (a client that hangs up mid-answer, a
second request arriving while the first one is still generating), hold it at a
gate the test opens::

    gate = llm.hold_streams(after=40)   # streams pause after 40 content chunks
    ...                                 # start the request
    gate.wait_held()                    # the reply is now paused mid-answer
    gate.release()                      # let it (and every later one) finish

Likewise ``FakeLLM(waits=Waits())`` puts the fake's waits (``delay_s`` and
``Fault.hang_s``) under the test's control: a test can see that a reply is
being delayed, or let a client time out against a hang, without racing a clock.

A benchmark that times the upstream from the server's side passes ``on_exchange``
(each chat request with the monotonic times its handling started and its last byte
left) and ``record=False`` (so a long run does not keep every request), and can add
its own ``GET`` endpoints with :meth:`FakeLLM.route`::

    llm = FakeLLM(respond, record=False, on_exchange=log.append)
    llm.route("/bench/requests", lambda: {"n": len(log)})
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import itertools
import json
import signal
import socket
import sys
import threading
import time
import traceback
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import FrameType, TracebackType
from typing import Any, TypeAlias, cast

__all__ = [
    "DEFAULT_MODEL",
    "Exchange",
    "FakeLLM",
    "Fault",
    "Responder",
    "StreamGate",
    "Waits",
    "default_responder",
    "echo_system",
    "main",
    "message_text",
    "scripted",
    "serve_until_signalled",
]

DEFAULT_MODEL = "fake-model"


@dataclass(frozen=True)
class Fault:
    """An injected failure.

    ``status``: the HTTP status to answer with (e.g. 500, 429, 503).
    ``hang_s``: sleep this long before answering (to trigger client timeouts).
    If ``status == 200`` the request is answered normally but with empty text
    (after the hang, if any).  ``body`` becomes the error message.
    """

    status: int = 500
    hang_s: float = 0.0
    body: str = "upstream failure"
    # A cut stream: a streamed request gets the normal reply's first ``truncate_after`` content deltas,
    # then the response ends cleanly but with no ``finish_reason`` and no ``[DONE]`` (``status`` is not
    # used). A plain request is answered normally.
    truncate_after: int | None = None


class StreamGate:
    """Holds streamed replies after ``after`` content chunks until ``release()``.

    Made by :meth:`FakeLLM.hold_streams`.  Events the test can wait on (from any
    thread, or from asyncio with ``asyncio.to_thread(gate.held.wait, timeout)``):

    ``held``: a stream has sent its first ``after`` content chunks and is paused.
    ``hung_up``: a paused stream's client closed the connection; that stream ends
    at once without sending the rest (a real upstream stops generating, too).

    ``held_count`` and ``hung_up_count`` count the streams concerned.  Once
    released, the gate lets every stream through, now and later.
    """

    def __init__(self, after: int) -> None:
        if after < 0:
            raise ValueError("after must be >= 0")
        self.after = after
        self.held = threading.Event()
        self.hung_up = threading.Event()
        self.held_count = 0
        self.hung_up_count = 0
        self._open = threading.Event()
        self._lock = threading.Lock()

    @property
    def released(self) -> bool:
        return self._open.is_set()

    def release(self) -> None:
        self._open.set()

    def wait_held(self, timeout: float = 60.0) -> None:
        """Block until a stream is paused here; ``TimeoutError`` after ``timeout`` (a safety net only)."""
        if not self.held.wait(timeout):
            raise TimeoutError(f"no stream reached the gate within {timeout} s")

    def wait_hung_up(self, timeout: float = 60.0) -> None:
        """Block until a paused stream's client has gone; ``TimeoutError`` after ``timeout``."""
        if not self.hung_up.wait(timeout):
            raise TimeoutError(f"no paused stream lost its client within {timeout} s")

    def _hold(self, sock: socket.socket, stopping: threading.Event) -> bool:
        """Wait for release (or server stop); False if the client hung up meanwhile.

        Polls: a closed peer only shows on the socket. The period adds latency, never a different outcome."""
        with self._lock:
            self.held_count += 1
        self.held.set()
        while not self._open.is_set() and not stopping.is_set():
            if _peer_closed(sock):
                with self._lock:
                    self.hung_up_count += 1
                self.hung_up.set()
                return False
            self._open.wait(0.02)
        return True


class Waits:
    """The fake's waits (``delay_s`` before a reply, ``Fault.hang_s``), held until the test releases them.

    With ``FakeLLM(waits=Waits())`` (or ``llm.waits = Waits()`` while it runs) every wait records the
    seconds it was asked for in ``requested`` and then blocks, however short or long it was meant to be,
    until ``release()`` or ``open()`` (or the server stops).  ``returned`` counts the waits that ended.
    """

    def __init__(self) -> None:
        self.requested: list[float] = []
        self.returned = 0
        self._released = 0  # waits with an index below this may return
        self._open = False
        self._cond = threading.Condition()

    def __call__(self, seconds: float, stopping: threading.Event) -> None:
        with self._cond:
            index = len(self.requested)
            self.requested.append(seconds)
            self._cond.notify_all()
            # The timeout only lets a server stop wake this wait.
            while not (self._open or index < self._released or stopping.is_set()):
                self._cond.wait(0.05)
            self.returned += 1
            self._cond.notify_all()

    def wait_entered(self, n: int = 1, timeout: float = 60.0) -> None:
        """Block until ``n`` waits in all have begun; ``TimeoutError`` after ``timeout`` (a safety net only)."""
        with self._cond:
            if not self._cond.wait_for(lambda: len(self.requested) >= n, timeout):
                raise TimeoutError(f"{len(self.requested)} of {n} waits began within {timeout} s")

    def wait_returned(self, n: int = 1, timeout: float = 60.0) -> None:
        """Block until ``n`` waits in all have ended; ``TimeoutError`` after ``timeout`` (a safety net only)."""
        with self._cond:
            if not self._cond.wait_for(lambda: self.returned >= n, timeout):
                raise TimeoutError(f"{self.returned} of {n} waits ended within {timeout} s")

    def release(self) -> None:
        """End every wait begun so far; later ones block until the next release."""
        with self._cond:
            self._released = len(self.requested)
            self._cond.notify_all()

    def open(self) -> None:
        """End every wait, now and later."""
        with self._cond:
            self._open = True
            self._cond.notify_all()


def _peer_closed(sock: socket.socket) -> bool:
    """True once the other end has closed (or reset) the connection; never blocks."""
    try:
        return sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b""
    except BlockingIOError:
        return False  # nothing to read: still connected
    except OSError:
        return True


Responder: TypeAlias = Callable[[dict[str, Any]], "str | Fault"]


@dataclass(frozen=True, slots=True)
class Exchange:
    """One chat request as the server handled it, on the ``time.monotonic()`` clock: ``started`` when its
    handling began (before the body was read), ``finished`` after the last byte of the reply was sent."""

    request: dict[str, Any]
    started: float
    finished: float


# --------------------------------------------------------------------------- helpers


def message_text(content: Any) -> str:
    """The text of a message ``content``: a string, ``None`` or a list of parts.

    Text parts (``{"type": "text", "text": ...}``, or bare strings) are joined
    with ``"\\n"``; other parts (images, audio) are ignored.
    """
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts: list[str] = []
        for part in content:
            if isinstance(part, str):
                texts.append(part)
            elif isinstance(part, dict):
                text = part.get("text")
                if isinstance(text, str) and part.get("type", "text") == "text":
                    texts.append(text)
        return "\n".join(texts)
    return ""


def _messages(request: dict[str, Any]) -> list[dict[str, Any]]:
    messages = request.get("messages")
    if not isinstance(messages, list):
        return []
    return [m for m in messages if isinstance(m, dict)]


def default_responder(request: dict[str, Any]) -> str:
    """``"[fake:<model>] "`` + the first 60 characters of the last user message."""
    model = request.get("model") or DEFAULT_MODEL
    last_user = ""
    for message in reversed(_messages(request)):
        if message.get("role") == "user":
            last_user = message_text(message.get("content"))
            break
    return f"[fake:{model}] {last_user[:60]}"


def echo_system(request: dict[str, Any]) -> str:
    """Reply with the full content of the first system message ("" if none)."""
    for message in _messages(request):
        if message.get("role") == "system":
            return message_text(message.get("content"))
    return ""


def scripted(
    rules: list[tuple[str, str | Fault]],
    default: Responder = default_responder,
) -> Responder:
    """A responder driven by substring rules.

    The first rule whose substring (case-sensitive) occurs in the content of
    ANY message of the request decides the reply (text or Fault); when no rule
    matches, ``default`` answers.
    """
    frozen = list(rules)

    def respond(request: dict[str, Any]) -> str | Fault:
        texts = [message_text(m.get("content")) for m in _messages(request)]
        for needle, reply in frozen:
            if any(needle in text for text in texts):
                return reply
        return default(request)

    return respond


def _tokens(text: str) -> int:
    return len(text) // 4 + 1


_ERROR_TYPES: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", "invalid_request"),
    401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", "forbidden"),
    404: ("invalid_request_error", "not_found"),
    408: ("timeout_error", "timeout"),
    413: ("invalid_request_error", "request_too_large"),
    429: ("rate_limit_error", "rate_limit_exceeded"),
    500: ("server_error", "internal_error"),
    502: ("server_error", "bad_gateway"),
    503: ("server_error", "service_unavailable"),
    504: ("server_error", "gateway_timeout"),
}


def _error_body(status: int, message: str, type_: str | None = None, code: str | None = None) -> bytes:
    default_type, default_code = _ERROR_TYPES.get(
        status, ("server_error" if status >= 500 else "invalid_request_error", None)
    )
    payload = {
        "error": {
            "message": message,
            "type": type_ or default_type,
            "param": None,
            "code": code if code is not None else default_code,
        }
    }
    return json.dumps(payload).encode()


def _dumps(obj: Any) -> bytes:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode()


# --------------------------------------------------------------------------- server


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    block_on_close = False
    request_queue_size = 1024

    def __init__(self, address: tuple[str, int], owner: FakeLLM) -> None:
        self.owner = owner
        self._conns: set[socket.socket] = set()
        self._conns_lock = threading.Lock()
        self.accepted = 0
        super().__init__(address, _Handler)

    def get_request(self) -> tuple[socket.socket, Any]:
        sock, addr = super().get_request()
        with contextlib.suppress(OSError):  # e.g. not a TCP socket
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        with self._conns_lock:
            self._conns.add(sock)
            self.accepted += 1
        return sock, addr

    def shutdown_request(self, request: Any) -> None:
        with self._conns_lock:
            self._conns.discard(request)
        super().shutdown_request(request)

    def close_connections(self) -> None:
        """Shut down every open client connection so idle keep-alive threads exit."""
        with self._conns_lock:
            conns = list(self._conns)
        for sock in conns:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, TimeoutError)) or self.owner._stopping.is_set():
            return  # client went away, or we are shutting down: not interesting
        super().handle_error(request, client_address)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "FakeLLM/1.0"
    sys_version = ""
    wbufsize = -1  # buffered: headers + body leave in one send; streams flush per event

    @property
    def _owner(self) -> FakeLLM:
        return cast(_Server, self.server).owner

    def log_message(self, format: str, *args: Any) -> None:
        return

    # ------------------------------------------------------------------ plumbing

    def _path(self) -> str:
        return self.path.split("?", 1)[0]

    def _read_body(self) -> bytes | None:
        """The request body, or None if its length is unusable (connection then closes)."""
        raw = self.headers.get("Content-Length")
        if raw is None:
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                return self._read_chunked()
            return b""
        try:
            length = int(raw)
        except ValueError:
            self.close_connection = True
            return None
        if length < 0:
            self.close_connection = True
            return None
        return self.rfile.read(length)

    def _read_chunked(self) -> bytes:
        parts: list[bytes] = []
        while True:
            line = self.rfile.readline(65537)
            size = int(line.split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline(65537) not in (b"\r\n", b"\n", b""):
                    pass
                return b"".join(parts)
            parts.append(self.rfile.read(size))
            self.rfile.readline(65537)

    def _send_bytes(self, status: int, body: bytes, content_type: str = "application/json") -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        if self.close_connection:
            self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(body)

    def _send_error_json(self, status: int, message: str, type_: str | None = None, code: str | None = None) -> None:
        self._send_bytes(status, _error_body(status, message, type_, code))

    def _not_found(self) -> None:
        self._send_error_json(404, f"Invalid URL ({self.command} {self._path()})", code="not_found")

    # ------------------------------------------------------------------ verbs

    def do_GET(self) -> None:
        path = self._path().rstrip("/")
        route = self._owner._routes.get(path)
        if route is not None:
            self._send_bytes(200, _dumps(route()))
        elif path == "/v1/models":
            body = {
                "object": "list",
                "data": [{"id": DEFAULT_MODEL, "object": "model", "created": 0, "owned_by": "fake-llm"}],
            }
            self._send_bytes(200, _dumps(body))
        else:
            self._not_found()

    def do_POST(self) -> None:
        started = time.monotonic()
        request = self._post()
        on_exchange = self._owner.on_exchange
        if request is not None and on_exchange is not None:
            self.wfile.flush()
            on_exchange(Exchange(request, started, time.monotonic()))

    def _post(self) -> dict[str, Any] | None:
        """Answer a POST; the request object when it was one (recorded), else None."""
        body = self._read_body()
        if self._path().rstrip("/") != "/v1/chat/completions":
            self._not_found()
            return None
        if body is None:
            self._send_error_json(400, "Invalid Content-Length header.")
            return None
        try:
            request = json.loads(body)
        except (ValueError, UnicodeDecodeError) as exc:
            self._send_error_json(400, f"We could not parse the JSON body of your request. ({exc})")
            return None
        if not isinstance(request, dict):
            self._send_error_json(400, "The request body must be a JSON object.")
            return None
        owner = self._owner
        owner._record(request)
        if not isinstance(request.get("messages"), list):
            self._send_error_json(400, "'messages' is a required property and must be an array.", code="invalid_value")
            return request
        try:
            self._chat(owner, request)
        except (ConnectionError, TimeoutError):
            self.close_connection = True
        return request

    # ------------------------------------------------------------------ chat

    def _chat(self, owner: FakeLLM, request: dict[str, Any]) -> None:
        stream = bool(request.get("stream"))
        fault = owner._take_fault()
        if fault is None:
            try:
                reply = owner._responder(request)
            except Exception as exc:  # a broken responder must not kill the thread silently
                traceback.print_exc()
                self._send_error_json(500, f"fake_llm responder raised {exc!r}", type_="fake_llm_responder_error")
                return
            if isinstance(reply, Fault):
                fault = reply
        truncate_after = fault.truncate_after if fault is not None else None
        if fault is not None and truncate_after is not None:
            answer = owner._responder(request)
            fault, reply = None, answer if isinstance(answer, str) else default_responder(request)
        if fault is not None:
            if fault.hang_s > 0:
                owner._sleep(fault.hang_s)
            if fault.status != 200:
                self._send_error_json(fault.status, fault.body)
                return
            text = ""
            delay = 0.0
        else:
            text = str(reply)
            delay = owner.delay_s

        model = str(request.get("model") or DEFAULT_MODEL)
        completion_id = f"chatcmpl-fake{owner._next_id():08d}"
        created = int(time.time())
        prompt_text = "\n".join(message_text(m.get("content")) for m in _messages(request))
        usage = {
            "prompt_tokens": _tokens(prompt_text),
            "completion_tokens": _tokens(text),
            "total_tokens": _tokens(prompt_text) + _tokens(text),
        }
        if stream:
            options = request.get("stream_options")
            include_usage = owner.usage and isinstance(options, dict) and bool(options.get("include_usage"))
            self._stream(
                owner, completion_id, created, model, text, usage if include_usage else None, delay, truncate_after
            )
            return
        if delay > 0:
            owner._sleep(delay)
        payload = {
            "id": completion_id,
            "object": "chat.completion",
            "created": created,
            "model": model,
            "system_fingerprint": None,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": text, "refusal": None},
                    "logprobs": None,
                    "finish_reason": "stop",
                }
            ],
        }
        if owner.usage:
            payload["usage"] = usage
        self._send_bytes(200, _dumps(payload))

    def _stream(
        self,
        owner: FakeLLM,
        completion_id: str,
        created: int,
        model: str,
        text: str,
        usage: dict[str, int] | None,
        delay: float,
        truncate_after: int | None = None,
    ) -> None:
        self.send_response(200)
        self.send_header("Content-Type", "text/event-stream; charset=utf-8")
        self.send_header("Cache-Control", "no-cache")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        if delay > 0:
            owner._sleep(delay)

        def chunk(delta: dict[str, Any], finish: str | None) -> dict[str, Any]:
            obj: dict[str, Any] = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "system_fingerprint": None,
                "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
            }
            if usage is not None:
                obj["usage"] = None
            return obj

        step = max(1, owner.chunk_chars)
        pieces = [text[i : i + step] for i in range(0, len(text), step)]
        gate = owner.stream_gate
        # Event 0 is the role chunk, so content chunk k is event k + 1.
        hold_before = gate.after + 1 if gate is not None and not gate.released and gate.after < len(pieces) else -1
        events: Iterable[dict[str, Any]] = itertools.chain(
            [chunk({"role": "assistant"}, None)],
            (chunk({"content": piece}, None) for piece in pieces),
            [chunk({}, "stop")],
        )
        write = self.wfile.write
        if truncate_after is not None:
            # The role chunk plus that many content deltas, then a well-formed end of the body.
            events = itertools.islice(events, 1 + truncate_after)
        for n, event in enumerate(events):
            if n == hold_before and gate is not None and not gate._hold(self.connection, owner._stopping):
                self.close_connection = True
                return
            data = b"data: " + _dumps(event) + b"\n\n"
            write(b"%x\r\n%s\r\n" % (len(data), data))
            self.wfile.flush()
        if truncate_after is not None:
            write(b"0\r\n\r\n")
            self.wfile.flush()
            return
        tail = b""
        if usage is not None:
            # As OpenAI does: a last chunk with empty choices carries the usage.
            final = {
                "id": completion_id,
                "object": "chat.completion.chunk",
                "created": created,
                "model": model,
                "system_fingerprint": None,
                "choices": [],
                "usage": usage,
            }
            data = b"data: " + _dumps(final) + b"\n\n"
            tail += b"%x\r\n%s\r\n" % (len(data), data)
        done = b"data: [DONE]\n\n"
        tail += b"%x\r\n%s\r\n0\r\n\r\n" % (len(done), done)
        write(tail)
        self.wfile.flush()


class FakeLLM:
    """A deterministic OpenAI-compatible upstream running in a background thread.

    ``base_url`` is ``http://HOST:PORT/v1``.  ``requests`` lists every JSON
    object posted to ``/v1/chat/completions``, in arrival order.  ``delay_s``
    (the wait before the first byte/token of each normal reply), ``chunk_chars``,
    ``stream_gate`` (see :meth:`hold_streams`), ``waits`` (see :class:`Waits`)
    and the responder may be changed while it runs. ``record=False`` keeps
    ``requests`` empty; ``on_exchange`` is called (in the handler's thread) with
    each chat request's :class:`Exchange` once its reply has been sent.

    Replies carry ``usage`` as OpenAI's do (plain replies always; streams in a
    last chunk when the request asks with ``stream_options.include_usage``);
    ``usage=False`` makes an upstream that reports none.
    """

    def __init__(
        self,
        responder: Responder | None = None,
        *,
        delay_s: float = 0.0,
        chunk_chars: int = 8,
        host: str = "127.0.0.1",
        port: int = 0,
        waits: Waits | None = None,
        record: bool = True,
        on_exchange: Callable[[Exchange], None] | None = None,
        usage: bool = True,
    ) -> None:
        if chunk_chars < 1:
            raise ValueError("chunk_chars must be >= 1")
        self._responder: Responder = responder or default_responder
        self.delay_s = delay_s
        self.chunk_chars = chunk_chars
        self.stream_gate: StreamGate | None = None
        self.waits = waits
        self.usage = usage
        self.host = host
        self._port = port
        self.requests: list[dict[str, Any]] = []
        self.record = record
        self.on_exchange = on_exchange
        self._routes: dict[str, Callable[[], Any]] = {}
        self._lock = threading.Lock()
        self._faults: collections.deque[Fault] = collections.deque()
        self._ids = itertools.count(1)
        self._stopping = threading.Event()
        self._server: _Server | None = None
        self._thread: threading.Thread | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> FakeLLM:
        if self._server is not None:
            raise RuntimeError("FakeLLM already started")
        self._stopping.clear()
        server = _Server((self.host, self._port), self)
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, name="fake-llm", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        server, thread = self._server, self._thread
        if server is None:
            return
        self._server = None
        self._thread = None
        self._stopping.set()  # wakes handlers sleeping in a delay or a hang
        server.shutdown()
        server.close_connections()
        server.server_close()
        if thread is not None:
            thread.join(timeout=5.0)

    def __enter__(self) -> FakeLLM:
        if self._server is None:
            self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    # ------------------------------------------------------------------ addresses

    @property
    def port(self) -> int:
        """The bound port (the configured one before ``start``)."""
        if self._server is not None:
            return int(self._server.server_address[1])
        return self._port

    @property
    def base_url(self) -> str:
        """``http://HOST:PORT/v1``; with ``port=0`` only known once started."""
        if self._server is None and self._port == 0:
            raise RuntimeError("FakeLLM with port=0 has no base_url until start()")
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    @property
    def connection_count(self) -> int:
        """TCP connections accepted since ``start`` (to check keep-alive reuse)."""
        return self._server.accepted if self._server is not None else 0

    # ------------------------------------------------------------------ control

    def set_responder(self, responder: Responder) -> None:
        self._responder = responder

    def route(self, path: str, handler: Callable[[], Any]) -> None:
        """``GET path`` answers 200 with ``handler()`` as JSON (an endpoint of a benchmark's own)."""
        self._routes[path.rstrip("/")] = handler

    def hold_streams(self, after: int) -> StreamGate:
        """Streamed replies from now on pause after ``after`` content chunks until the gate is released.

        Replies with at most ``after`` chunks are not held.  A new call replaces the gate for later
        streams; ``stop()`` lets held streams go.
        """
        gate = StreamGate(after)
        self.stream_gate = gate
        return gate

    def fail_next(self, n: int, fault: Fault) -> None:
        """The next ``n`` chat requests get ``fault``; then normal service resumes.

        Calls queue up: ``fail_next(1, a); fail_next(1, b)`` fails with a, then b.
        """
        with self._lock:
            self._faults.extend([fault] * n)

    def clear(self) -> None:
        """Forget the recorded requests (in place: references to ``requests`` stay valid)."""
        with self._lock:
            self.requests.clear()

    # ------------------------------------------------------------------ internals

    def _record(self, request: dict[str, Any]) -> None:
        if self.record:
            with self._lock:
                self.requests.append(request)

    def _take_fault(self) -> Fault | None:
        with self._lock:
            return self._faults.popleft() if self._faults else None

    def _next_id(self) -> int:
        with self._lock:
            return next(self._ids)

    def _sleep(self, seconds: float) -> None:
        if self.waits is not None:
            self.waits(seconds, self._stopping)
        else:
            self._stopping.wait(seconds)


# --------------------------------------------------------------------------- CLI


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m rag_service.testing.fake_llm", description="A deterministic OpenAI-compatible chat server."
    )
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8001)
    parser.add_argument("--delay", type=float, default=0.0, help="seconds before the first byte/token of each reply")
    parser.add_argument("--chunk-chars", type=int, default=8, help="characters per streamed content delta")
    parser.add_argument("--no-usage", action="store_true", help="report no token usage (as some servers do)")
    args = parser.parse_args(argv)
    llm = FakeLLM(
        delay_s=args.delay, chunk_chars=args.chunk_chars, host=args.host, port=args.port, usage=not args.no_usage
    )
    serve_until_signalled(llm, f"fake LLM listening on {{url}} (delay {args.delay}s, chunk {args.chunk_chars} chars)")
    return 0


def serve_until_signalled(llm: FakeLLM, banner: str = "listening {url}") -> None:
    """Run `llm` in the foreground until SIGINT or SIGTERM; print `banner` (``{url}``: the base URL) once
    it listens, so a parent process can read the address of a ``port=0`` server from the first line."""
    stop = threading.Event()

    def on_signal(signum: int, frame: FrameType | None) -> None:
        stop.set()

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    llm.start()
    print(banner.format(url=llm.base_url), flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        llm.stop()


if __name__ == "__main__":
    raise SystemExit(main())
