"""Running a conversation file through the service for `rag-eval answers`.

The knowledge base is ingested into a temporary store (Qdrant local mode and a SQLite archive in a
temporary directory); each pass builds the app with the one app factory and talks to it over HTTP
in-process (httpx's ASGI transport), one session per conversation.

- Pass 1, the embedded default: no LLM, extractive answers.
- Pass 2: the LLM endpoint is the project's own recording upstream (`FakeLLM`). Every request it gets
  is kept with the turn it belongs to and classified (answer, rewrite, summary, other); the answer
  request's messages are what an LLM would have had to answer from. Its replies become the
  conversation's history, so they must be plausible: an answer request gets the project's extractive
  answer over the documents in that request, a summary request the extractive summary (the pipeline
  pins the facts on top), a rewrite request the question unchanged. With `Upstream`, every request
  is forwarded to a real endpoint instead, and recorded with its reply.

After every turn the pipeline's background work (compression) is drained, so the next turn always
sees the same memory: runs are deterministic.
"""

from __future__ import annotations

import asyncio
import dataclasses
import re
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import httpx

from rag_core.documents.loaders import LoadError
from rag_core.documents.pipeline import ingest_file, iter_files
from rag_core.embedding import Embedder, Vector, make_embedder
from rag_core.settings import Settings
from rag_core.tokens import TokenCounter, make_counter
from rag_core.vectorstore import open_index
from rag_service.api import create_app
from rag_service.domain import Chunk, GenerationInput, MemoryView, Message, Round
from rag_service.evaluation.answers import ConversationSpec, PassTurn, TurnResult, check_facts, doc_hit, score_answer
from rag_service.evaluation.cache import EmbeddingCache, Matrix
from rag_service.extractive import ExtractiveGenerator
from rag_service.prompt import CLOSE_DOCS, CLOSE_SUMMARY, OPEN_DOCS, OPEN_SUMMARY, parse_final_user_message
from rag_service.summary import ExtractiveSummarizer
from rag_service.testing.fake_llm import FakeLLM, Fault, default_responder, message_text
from rag_service.wiring import build_services

RequestKind = Literal["answer", "rewrite", "summary", "other"]
Log = Callable[[str], None]

# `rag_service.prompt.chunk_block`'s shape; "</document" inside a chunk is escaped there, so the first
# closing tag ends the block.
# `rag_service.summary.LLMSummarizer`'s user message and `rag_service.rewrite.rewrite_messages`' last line.
_SUMMARY_REQUEST = re.compile(r"\AExisting summary:\n(?P<previous>.*?)\n\nNew rounds:\n(?P<rounds>.*)\Z", re.S)
_ROUND_START = re.compile(r"^User: ", re.M)
_LAST_QUESTION = re.compile(r"(?:\A|\n)Last question: (?P<q>.*)\Z", re.S)


# --- settings ----------------------------------------------------------------------------------------


def deep_merge(base: Mapping[str, Any], extra: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in extra.items():
        out[k] = deep_merge(out[k], v) if isinstance(v, Mapping) and isinstance(out.get(k), Mapping) else v
    return out


def pass_settings(overrides: Mapping[str, Any], tmp: Path, name: str, llm_url: str | None, **llm: Any) -> Settings:
    """The settings of one pass: `overrides` (config file and --set), then what the evaluation fixes.

    The store is always the temporary one, in-process and open (no tenants, no rate limit: one client
    sends every turn as fast as it can). `llm_url` None is the no-LLM default whatever the environment
    says; otherwise every LLM-using stage goes to `llm_url` (no separate rewrite or summary endpoint).
    """
    fixed: dict[str, Any] = {
        "qdrant": {"path": str(tmp / "qdrant"), "url": None},
        "database": {"url": f"sqlite+aiosqlite:///{tmp / name}.db"},
        "redis": {"url": None},
        "auth": {"tenants": {}, "admins": {}, "rate_limit": {"per_key": "", "per_session": "", "per_address": ""}},
        "llm": {"base_url": llm_url, **llm},
        "memory": {"summary_llm": None},
        "rewrite": {"llm": None},
    }
    return Settings(**deep_merge(overrides, fixed))


def settings_json(settings: Settings, replace: Mapping[str, str]) -> dict[str, Any]:
    """The settings as JSON, secrets redacted and run-specific strings (temporary paths, ports) named."""

    def clean(value: Any, key: str = "") -> Any:
        if key in ("api_key", "encryption_key") and value:
            return "<redacted>"
        if key == "tenants" and value:
            return {t: ["<redacted>"] for t in value}
        if isinstance(value, dict):
            return {k: clean(v, k) for k, v in value.items()}
        if isinstance(value, list):
            return [clean(v) for v in value]
        if isinstance(value, str):
            for old, new in replace.items():
                value = value.replace(old, new)
        return value

    out: dict[str, Any] = clean(settings.model_dump(mode="json"))
    return out


# --- the recording upstream --------------------------------------------------------------------------


def _texts(request: Mapping[str, Any]) -> list[tuple[str, str]]:
    messages = request.get("messages")
    if not isinstance(messages, list):
        return []
    return [(str(m.get("role") or ""), message_text(m.get("content"))) for m in messages if isinstance(m, dict)]


def classify_request(request: Mapping[str, Any], settings: Settings) -> RequestKind:
    """Which stage sent a chat-completion request, from the prompt's structure.

    Rewrite and summary requests open with their configured system prompt (their user message has a
    fixed shape too); the answer request's last user message holds the `<documents>` block.
    """
    texts = _texts(request)
    if not texts or texts[-1][0] != "user":
        return "other"
    system = texts[0][1] if texts[0][0] == "system" else ""
    last = texts[-1][1]
    if system == settings.rewrite.prompt:
        return "rewrite"
    if system == settings.memory.summary_prompt.format(max_tokens=settings.memory.summary_max_tokens):
        return "summary"
    if OPEN_DOCS in last and CLOSE_DOCS in last:
        return "answer"
    # Prompts are settings: a request built from another prompt still has its stage's message layout.
    if len(texts) == 2 and _LAST_QUESTION.search(last):
        return "rewrite"
    if len(texts) == 2 and _SUMMARY_REQUEST.match(last):
        return "summary"
    return "other"


def request_context(request: Mapping[str, Any]) -> str:
    """Everything the model is shown: every message's text, in order."""
    return "\n".join(text for _, text in _texts(request))


def parse_answer_request(request: Mapping[str, Any], settings: Settings) -> tuple[str, list[Chunk]]:
    """The question and the retrieved chunks of an answer request."""
    return parse_final_user_message(settings.prompt, _texts(request)[-1][1])


def read_as_passages(chunks: Sequence[Chunk]) -> list[Chunk]:
    """The chunks of a prompt as a reader takes them: each document named by its source, and two blocks of
    one document that overlap (the chunker repeats a few lines across a boundary) read as one passage, so
    a line keeps the heading printed above it in the other block. Only what the prompt shows is used: the
    order of the blocks, their sources and their text (no scores, ids or sections)."""
    passages: list[Chunk] = []
    for chunk in chunks:
        chunk = dataclasses.replace(chunk, doc_id=chunk.source)
        for i, other in enumerate(passages):
            if other.source != chunk.source:
                continue
            joined = _join(other.text, chunk.text) or _join(chunk.text, other.text)
            if joined is not None:
                passages[i] = dataclasses.replace(other, text=joined)
                break
        else:
            passages.append(chunk)
    return passages


def _join(head: str, tail: str) -> str | None:
    """`head` then `tail` when the last lines of `head` are the first lines of `tail` (or `tail` is all inside
    `head`), else None."""
    a, b = head.splitlines(), tail.splitlines()
    if not a or not b:
        return None
    if "\n".join(b) in "\n".join(a):
        return head
    for k in range(min(len(a), len(b)), 0, -1):
        if a[-k:] == b[:k] and sum(len(line.strip()) for line in b[:k]) >= 8:
            return "\n".join(a + b[k:])
    return None


def parse_answer_memory(request: Mapping[str, Any]) -> MemoryView:
    """The summary and the earlier rounds an answer request carries (`prompt.build_messages`' layout)."""
    texts = _texts(request)[1:-1]  # without the system prompt and the final user message
    summary = ""
    rounds: list[Round] = []
    i = 0
    while i < len(texts):
        role, text = texts[i]
        if role == "user" and i + 1 < len(texts) and texts[i + 1][0] == "assistant":
            rounds.append(Round(Message("user", text, 0, 0.0), Message("assistant", texts[i + 1][1], 0, 0.0)))
            i += 2
            continue
        if role == "user" and OPEN_SUMMARY in text:
            body = text.partition(OPEN_SUMMARY)[2].rpartition(CLOSE_SUMMARY)[0]
            summary = body.strip().replace("&lt;", "<")
        i += 1
    return MemoryView(summary, 0, tuple(rounds))


def parse_summary_request(request: Mapping[str, Any]) -> tuple[str, list[Round]] | None:
    """The previous summary and the rounds to fold, or None if the request has another shape."""
    m = _SUMMARY_REQUEST.match(_texts(request)[-1][1])
    if m is None:
        return None
    previous = "" if m["previous"] == "(none)" else m["previous"]
    rounds: list[Round] = []
    for piece in _ROUND_START.split(m["rounds"])[1:]:
        user, sep, assistant = piece.partition("\nAssistant: ")
        if not sep:
            return None
        rounds.append(
            Round(Message("user", user.strip(), 0, 0.0), Message("assistant", assistant.rstrip("\n"), 0, 0.0))
        )
    return previous, rounds


@dataclass(frozen=True, slots=True)
class Upstream:
    """A real OpenAI-compatible endpoint that pass 2 forwards to (through the recorder)."""

    url: str
    model: str | None = None
    api_key: str = "not-needed"


@dataclass(slots=True)
class RecordedCall:
    index: int
    conversation: str | None
    turn: int | None
    kind: RequestKind
    request: dict[str, Any]
    response: str | None = None
    error: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "index": self.index,
            "conversation": self.conversation,
            "turn": self.turn,
            "kind": self.kind,
            "request": self.request,
            "response": self.response,
            "error": self.error,
        }


class LLMRecorder:
    """The `FakeLLM` responder of pass 2: records every request under the current turn and answers it.

    FakeLLM calls it from its handler threads, so the turn marker and the records sit behind its lock
    (the turns themselves are sequential).
    """

    def __init__(self, settings: Settings, counter: TokenCounter, upstream: Upstream | None = None) -> None:
        self.settings, self.upstream = settings, upstream
        p = settings.prompt
        self.generator = ExtractiveGenerator(p.extractive_sentences)
        self.summarizer = ExtractiveSummarizer(counter, settings.memory)
        self.calls: list[RecordedCall] = []
        self._turn: tuple[str, int] | None = None
        self._http: httpx.Client | None = None
        if upstream is not None:
            self._http = httpx.Client(timeout=settings.llm.timeout_s, trust_env=True)
        self._lock = threading.Lock()

    def begin(self, conversation: str, turn: int) -> None:
        with self._lock:
            self._turn = (conversation, turn)

    def end(self) -> None:
        with self._lock:
            self._turn = None

    def close(self) -> None:
        if self._http is not None:
            self._http.close()

    def for_turn(self, conversation: str, turn: int) -> list[RecordedCall]:
        with self._lock:
            return [c for c in self.calls if c.conversation == conversation and c.turn == turn]

    def __call__(self, request: dict[str, Any]) -> str | Fault:
        kind = classify_request(request, self.settings)
        with self._lock:
            where = self._turn or (None, None)
            call = RecordedCall(len(self.calls), where[0], where[1], kind, request)
            self.calls.append(call)
        reply = self._forward(request) if self.upstream is not None else self._emulate(kind, request)
        if isinstance(reply, Fault):
            call.error = f"HTTP {reply.status}: {reply.body}"
        else:
            call.response = reply
        return reply

    def _emulate(self, kind: RequestKind, request: dict[str, Any]) -> str | Fault:
        if kind == "answer":
            question, chunks = parse_answer_request(request, self.settings)
            chunks = read_as_passages(chunks)
            # A model reads the conversation it is sent too: a question about it is answered from there.
            memory = parse_answer_memory(request)
            return asyncio.run(self.generator.complete([], GenerationInput(question, question, chunks, memory)))
        if kind == "summary":
            parsed = parse_summary_request(request)
            if parsed is None:
                return Fault(500, body="rag-eval's upstream cannot read this summary request")
            return asyncio.run(self.summarizer.summarize(*parsed))
        if kind == "rewrite":
            m = _LAST_QUESTION.search(_texts(request)[-1][1])
            return m["q"].strip() if m else _texts(request)[-1][1]
        return default_responder(request)

    def _forward(self, request: dict[str, Any]) -> str | Fault:
        assert self.upstream is not None and self._http is not None
        body = {k: v for k, v in request.items() if k != "stream_options"} | {"stream": False}
        url = self.upstream.url.rstrip("/") + "/chat/completions"
        try:
            resp = self._http.post(url, json=body, headers={"Authorization": f"Bearer {self.upstream.api_key}"})
        except httpx.HTTPError as exc:
            return Fault(502, body=f"{url}: {type(exc).__name__}: {exc}"[:500])
        if resp.status_code >= 400:
            # 502 whatever the upstream said: to the service this recorder is the upstream, and it failed.
            return Fault(502, body=f"{url}: HTTP {resp.status_code}: {resp.text}"[:500])
        try:
            return str(resp.json()["choices"][0]["message"]["content"] or "")
        except (ValueError, KeyError, IndexError, TypeError) as exc:
            return Fault(502, body=f"{url}: not a chat completion ({type(exc).__name__}: {exc})"[:500])


# --- ingest and the passes ---------------------------------------------------------------------------


class PassageCache:
    """An embedder whose passage vectors come from an `EmbeddingCache` on disk: re-running over the same
    knowledge base embeds nothing. Queries go to the embedder (and its in-memory cache) as in the service."""

    def __init__(self, inner: Embedder, cache: EmbeddingCache) -> None:
        self.inner, self.cache = inner, cache
        self.name, self.dim, self.remote = inner.name, inner.dim, inner.remote

    def embed_query(self, text: str) -> Vector:
        return self.inner.embed_query(text)

    def embed_passages(self, texts: Sequence[str]) -> Matrix:
        return self.cache.embed(texts, "passage", self.inner.embed_passages)


@dataclass(frozen=True, slots=True)
class IngestSummary:
    documents: int
    chunks: int
    failed: tuple[str, ...]

    def to_json(self) -> dict[str, Any]:
        return {"documents": self.documents, "chunks": self.chunks, "failed": list(self.failed)}


async def ingest_kb(kb: Path, settings: Settings, embedder: Embedder, counter: TokenCounter) -> IngestSummary:
    """Every supported file under `kb`, stored under its path relative to `kb`."""
    index = open_index(settings.qdrant, embedder.dim, embedder.name)
    documents = chunks = 0
    failed: list[str] = []
    try:
        for path in iter_files([kb], settings.ingest.extensions):
            source = path.relative_to(kb).as_posix()
            try:
                report = await ingest_file(
                    path, index=index, embedder=embedder, counter=counter, settings=settings, source=source
                )
            except LoadError as exc:
                failed.append(f"{source}: {exc}")
                continue
            documents += 1
            chunks += report.chunks
        await index.optimize()
    finally:
        await index.close()
    return IngestSummary(documents, chunks, tuple(failed))


def _pass_turn(resp: httpx.Response, conv: ConversationSpec, index: int) -> PassTurn:
    spec = conv.turns[index]
    if resp.status_code != 200:
        out = PassTurn(error=f"HTTP {resp.status_code}: {resp.text[:500]}")
        out.verdict = score_answer("", spec.expect_any, spec.reject_any)
        out.doc_hit = doc_hit([], spec.doc)
        return out
    body = resp.json()
    receipt = body.get("receipt") or {}
    sources = [str(s.get("source") or "") for s in body.get("sources") or []]
    answer = str(body.get("answer") or "")
    return PassTurn(
        answer=answer,
        mode=str(body.get("mode") or ""),
        rewritten_query=str(body.get("rewritten_query") or ""),
        rewrite_action=str(receipt.get("rewrite") or ""),
        topic_switch=bool(receipt.get("topic_switch")),
        sources=sources,
        verdict=score_answer(answer, spec.expect_any, spec.reject_any),
        doc_hit=doc_hit(sources, spec.doc),
    )


async def run_pass(
    settings: Settings,
    embedder: Embedder,
    counter: TokenCounter,
    conversations: Sequence[ConversationSpec],
    recorder: LLMRecorder | None = None,
    log: Log | None = None,
    label: str = "",
) -> dict[tuple[str, int], PassTurn]:
    """Every conversation through the HTTP API, one session each; the result of each (conversation, turn)."""
    # Off the event loop, as the app's own lifespan does: migrating the archive runs its own loop.
    services = await asyncio.to_thread(build_services, settings, counter=counter, embedder=embedder)
    app = create_app(services=services)
    out: dict[tuple[str, int], PassTurn] = {}
    try:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
            async with httpx.AsyncClient(transport=transport, base_url="http://rag-eval", timeout=None) as http:
                for n, conv in enumerate(conversations, start=1):
                    if log:
                        log(f"{label}conversation {n}/{len(conversations)}: {conv.id} ({len(conv.turns)} turns)")
                    created = await http.post("/v1/sessions")
                    created.raise_for_status()
                    session = created.json()["session_id"]
                    for i, turn in enumerate(conv.turns):
                        if recorder is not None:
                            recorder.begin(conv.id, i)
                        try:
                            resp = await http.post(f"/v1/sessions/{session}/chat", json={"question": turn.q})
                            # Compression runs after the answer; finish it so the next turn's memory is fixed.
                            await services.pipeline.drain()
                        finally:
                            if recorder is not None:
                                recorder.end()
                        out[(conv.id, i)] = _pass_turn(resp, conv, i)
    finally:
        await services.close()
    return out


def attach_context(turn: PassTurn, calls: Sequence[RecordedCall], expect_any: Sequence[Sequence[str]]) -> None:
    """context_has_fact from the turn's recorded requests: the last answer request is the one answered."""
    turn.requests = [c.index for c in calls]
    answers = [c for c in calls if c.kind == "answer"]
    context = request_context(answers[-1].request) if answers else ""
    facts = check_facts(context, expect_any)
    turn.context_has_fact, turn.context_missing = facts.found, facts.missing


@dataclass(slots=True)
class AnswerReport:
    results: list[TurnResult]
    ingest: IngestSummary
    settings: dict[str, Any]
    calls: list[RecordedCall] = field(default_factory=list)
    upstream: str | None = None


async def evaluate_answers(
    kb: Path,
    conversations: Sequence[ConversationSpec],
    overrides: Mapping[str, Any] | None = None,
    *,
    llm_pass: bool = True,
    upstream: Upstream | None = None,
    cache_dir: Path | None = None,
    log: Log | None = None,
) -> AnswerReport:
    """Both passes over `conversations`; `cache_dir` keeps passage embeddings between runs."""
    overrides = dict(overrides or {})
    with tempfile.TemporaryDirectory(prefix="rag-eval-answers-") as tmp_name:
        tmp = Path(tmp_name)
        first = pass_settings(overrides, tmp, "archive-extractive", None)
        counter = make_counter(first.tokens)
        embedder: Embedder = make_embedder(first.embedding)
        if cache_dir is not None:
            embedder = PassageCache(embedder, EmbeddingCache(cache_dir, embedder.name, embedder.dim))
        ingest = await ingest_kb(kb, first, embedder, counter)
        if not ingest.documents:
            raise LoadError(f"{kb}: no document could be ingested ({'; '.join(ingest.failed) or 'no files'})")
        if log:
            log(f"ingested {ingest.documents} documents, {ingest.chunks} chunks")
        hidden = {tmp_name: "<tmp>"}
        settings: dict[str, Any] = {"extractive": settings_json(first, hidden)}
        extractive = await run_pass(first, embedder, counter, conversations, log=log, label="extractive pass: ")
        results = [
            TurnResult(conv.id, i, turn, extractive[(conv.id, i)])
            for conv in conversations
            for i, turn in enumerate(conv.turns)
        ]
        report = AnswerReport(results, ingest, settings)
        if not llm_pass:
            return report
        with FakeLLM() as fake:
            hidden[fake.base_url] = "<recording upstream>"
            # The fake's replies cannot rewrite; the rules do, unless the overrides say otherwise.
            base = overrides if upstream is not None else deep_merge({"rewrite": {"mode": "rule"}}, overrides)
            llm = {"model": upstream.model} if upstream is not None and upstream.model else {}
            second = pass_settings(base, tmp, "archive-llm", fake.base_url, **llm)
            recorder = LLMRecorder(second, counter, upstream)
            fake.set_responder(recorder)
            try:
                turns = await run_pass(second, embedder, counter, conversations, recorder, log, "LLM pass: ")
            finally:
                recorder.close()
        settings["llm"] = settings_json(second, hidden)
        for r in results:
            r.llm = turns[(r.conversation, r.index)]
            attach_context(r.llm, recorder.for_turn(r.conversation, r.index), r.spec.expect_any)
        report.calls = recorder.calls
        report.upstream = upstream.url if upstream is not None else "rag-eval's fake upstream (extractive replies)"
        return report
