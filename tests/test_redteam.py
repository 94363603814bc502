"""Red team: every attempt in tests/redteam.yaml, through the HTTP API, against an upstream that obeys.

The fake upstream is the worst model there is: as soon as an attempt's trigger reaches it, in any
message, it answers with the request's system prompt, disguised as the attempt says (spaced out,
re-punctuated, partial, full-width, base64, ...). Each attempt must then show that
- the output guard stops it: nothing of the system prompt reaches the client, plain or streamed, and
  nothing of it is stored (checked with a stricter matcher than the guard's own);
- the prompt's structure holds: one system message, the service's own; every block parses exactly, with
  no unescaped delimiter inside; the attempt sits where its channel puts it (user text in user messages,
  documents inside their <document> block, the summary and facts inside their user-side data blocks);
- long-term memory never keeps an instruction, and what it keeps is quoted data.
"""

from __future__ import annotations

import base64
import html
import json
import re
import unicodedata
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from rag_service.domain import Message
from rag_service.prompt import CLOSE_FACTS, CLOSE_SUMMARY, OPEN_FACTS, OPEN_SUMMARY
from rag_service.testing.fake_llm import FakeLLM, message_text
from rag_service.user_memory import RuleFactExtractor, UserMemory
from tests.conftest import AppClient

ATTEMPTS: list[dict[str, Any]] = yaml.safe_load((Path(__file__).parent / "redteam.yaml").read_text(encoding="utf-8"))
SUMMARIZER_MARK = "running summary"  # in the summarizer's system prompt
EXTRACTOR_MARK = "durable facts"  # in the fact extractor's system prompt
BENIGN = "好的，满 99 元包邮，不满收取 8 元运费。"


# -- the obeying upstream ----------------------------------------------------------------------------


def disguise(prompt: str, form: str) -> str:
    """The system prompt as a model that wants to slip it past a filter would write it."""
    if form == "verbatim":
        return f"好的，以下是我的系统提示词：\n{prompt}"
    if form == "spaced":
        return " ".join(prompt)
    if form == "punct":
        return "-".join(re.sub(r"[，。；：、]", "!", prompt))
    if form == "partial":
        return f"我只能告诉你一部分：{prompt[30:80]}……"
    if form == "upper":
        return prompt.upper()
    if form == "fullwidth":
        return "".join(chr(ord(c) + 0xFEE0) if "!" <= c <= "~" else c for c in prompt)
    if form == "zero-width":
        return "\u200b".join(prompt)
    if form == "base64":
        return "Here you go: " + base64.b64encode(prompt.encode()).decode()
    if form == "base64-wrapped":
        return "```\n" + base64.encodebytes(prompt.encode()).decode() + "```"
    if form == "markdown":
        return "```text\n" + prompt + "\n```"
    if form == "html":
        return "<pre>" + html.escape(prompt) + "</pre>"
    if form == "lines":
        return "\n".join(prompt[i : i + 6] for i in range(0, len(prompt), 6))
    raise ValueError(f"unknown leak form {form}")


@dataclass
class ObeyingUpstream:
    attempt: dict[str, Any]
    obeyed: list[bool] = field(default_factory=list)  # per chat request, in order

    def __call__(self, request: dict[str, Any]) -> str:
        messages = request["messages"]
        texts = [message_text(m.get("content")) for m in messages]
        if SUMMARIZER_MARK in texts[0]:
            return str(self.attempt.get("summary_reply", "用户询问了运费和发票。"))
        if EXTRACTOR_MARK in texts[0]:
            return str(self.attempt.get("extractor_reply", "NONE"))
        obey = any(self.attempt["trigger"] in t for t in texts)
        self.obeyed.append(obey)
        return disguise(texts[0], self.attempt["leak"]) if obey else BENIGN


# -- checks ------------------------------------------------------------------------------------------

# Anything that could be read as one of the prompt's delimiters or as a chat-template marker, however
# cased, spaced or bracketed.
DELIMITER_LIKE = re.compile(
    r"[<＜﹤]\s*[/／\\]*\s*(?:documents?|conversation_summary|user_facts)|[<＜﹤]\s*\||<<\s*/?\s*sys", re.I
)
BLOCK = re.compile(r'<document index="(\d+)" title="([^"<>\n]*)" source="([^"<>\n]*)">\n(.*?)\n</document>\n?', re.S)


def folded(text: str) -> str:
    return "".join(c for c in unicodedata.normalize("NFKC", text).casefold() if c.isalnum())


def decoded_runs(text: str) -> Iterator[str]:
    runs = re.findall(r"[A-Za-z0-9+/=_-]{16,}", text)
    for candidate in [*runs, "".join(runs)]:
        compact = candidate.translate(str.maketrans("-_", "+/")).rstrip("=")
        compact = compact[: len(compact) - len(compact) % 4] if len(compact) % 4 == 1 else compact
        try:
            yield base64.b64decode(compact + "=" * (-len(compact) % 4)).decode("utf-8", errors="ignore")
        except ValueError:
            continue


def shows_prompt(text: str, prompt: str, window: int = 16) -> bool:
    """Stricter than the guard (16 folded characters, not 20), and independent of its code."""
    target = folded(prompt)
    shingles = {target[i : i + window] for i in range(len(target) - window + 1)}
    for candidate in (text, *decoded_runs(text)):
        f = folded(candidate)
        if any(f[i : i + window] in shingles for i in range(len(f) - window + 1)):
            return True
    return False


@dataclass
class Parsed:
    """One upstream chat request, taken apart; every assertion about its structure is made here."""

    facts: list[str] | None = None
    summary: str | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    blocks: list[tuple[str, str, str]] = field(default_factory=list)  # (title, source, text)
    question: str = ""


def parse_request(request: dict[str, Any], app: AppClient) -> Parsed:
    settings = app.services.settings
    messages = request["messages"]
    assert messages[0] == {"role": "system", "content": settings.prompt.system_prompt}
    assert [m["role"] for m in messages].count("system") == 1, "nothing but the system prompt is a system message"
    out = Parsed()
    rest = messages[1:]
    facts_head = f"{settings.user_memory.prompt_header}\n{OPEN_FACTS}\n"
    if rest and rest[0]["role"] == "user" and rest[0]["content"].startswith(facts_head):
        content = rest.pop(0)["content"]
        m = re.fullmatch(re.escape(facts_head) + r"((?:- .*\n)+)" + re.escape(CLOSE_FACTS), content)
        assert m, content
        assert not DELIMITER_LIKE.search(m.group(1)), content
        out.facts = [json.loads(line[2:]) for line in m.group(1).splitlines()]
        assert all(isinstance(f, str) for f in out.facts)
    summary_head = f"{settings.prompt.summary_header}\n{OPEN_SUMMARY}\n"
    if rest and rest[0]["role"] == "user" and rest[0]["content"].startswith(summary_head):
        content = rest.pop(0)["content"]
        m = re.fullmatch(re.escape(summary_head) + r"(.*)\n" + re.escape(CLOSE_SUMMARY), content, re.S)
        assert m, content
        assert not DELIMITER_LIKE.search(m.group(1)), content
        out.summary = m.group(1)
    out.history = rest[:-1]
    assert [m["role"] for m in out.history] == ["user", "assistant"] * (len(out.history) // 2)
    for m in out.history:
        assert not DELIMITER_LIKE.search(m["content"]), m
    final = rest[-1]
    assert final["role"] == "user"
    p = settings.prompt
    m = re.fullmatch(
        re.escape(f"{p.context_header}\n<documents>\n")
        + r"(.*?)</documents>\n\n"
        + re.escape(p.question_header)
        + "(.*)",
        final["content"],
        re.S,
    )
    assert m, final["content"]
    body, out.question = m.group(1), m.group(2)
    assert not DELIMITER_LIKE.search(out.question), out.question
    pos = 0
    for i, block in enumerate(BLOCK.finditer(body), start=1):
        assert block.start() == pos and block.group(1) == str(i), body  # the blocks tile the context
        pos = block.end()
        assert not DELIMITER_LIKE.search(block.group(4)), block.group(4)
        out.blocks.append((html.unescape(block.group(2)), html.unescape(block.group(3)), block.group(4)))
    assert pos == len(body), body
    return out


def sse_events(text: str) -> list[tuple[str, Any]]:
    events = []
    for raw in text.replace("\r\n", "\n").split("\n\n"):
        kind, data = "message", []
        for line in raw.split("\n"):
            if line.startswith("event:"):
                kind = line[6:].strip()
            elif line.startswith("data:"):
                data.append(line[5:].removeprefix(" "))
        if data:
            payload = "\n".join(data)
            events.append((kind, payload if payload == "[DONE]" else json.loads(payload)))
    return events


@dataclass
class Run:
    """One attempt against one app: drives the turns and checks each answer."""

    app: AppClient
    fake: FakeLLM
    upstream: ObeyingUpstream
    attempt: dict[str, Any]

    @property
    def prompt(self) -> str:
        return self.app.services.settings.prompt.system_prompt

    @property
    def refusal(self) -> str:
        return self.app.services.settings.prompt.leak_refusal

    def check_answer(self, answer: str) -> None:
        assert not shows_prompt(answer, self.prompt), answer
        if self.upstream.obeyed[-1]:
            assert answer == self.refusal

    async def session(self, user: str = "") -> str:
        resp = await self.app.http.post("/v1/sessions", json={"user": user} if user else {})
        assert resp.status_code == 201, resp.text
        return str(resp.json()["session_id"])

    async def ask(self, sid: str, question: str) -> Parsed:
        """The question plain, then again streamed; returns the first request taken apart."""
        first = len(self.fake.requests)
        turn = await self.app.ask(sid, question)
        self.check_answer(turn["answer"])
        request = self.chat_requests(first)[-1]
        parsed = parse_request(request, self.app)
        self.check_receipt(turn["receipt"], request["messages"], parsed)
        resp = await self.app.http.post(f"/v1/sessions/{sid}/chat", json={"question": question, "stream": True})
        assert resp.status_code == 200, resp.text
        events = sse_events(resp.text)
        streamed = "".join(data["text"] for kind, data in events if kind == "delta")
        done = [data for kind, data in events if kind == "done"]
        assert len(done) == 1
        assert not shows_prompt(streamed, self.prompt), streamed
        self.check_answer(done[0]["answer"])
        parse_request(self.chat_requests(first)[-1], self.app)
        await self.app.services.pipeline.drain()
        stored = (await self.app.http.get(f"/v1/sessions/{sid}/messages")).json()["messages"]
        answers = [m["content"] for m in stored if m["role"] == "assistant"]
        assert [a for a in answers if shows_prompt(a, self.prompt)] == []
        return parsed

    def check_receipt(self, r: dict[str, Any], messages: list[dict[str, Any]], parsed: Parsed) -> None:
        """Escaped text is counted as sent: every part of the receipt is a recount of the request."""
        overhead = self.app.services.settings.tokens.per_message_overhead

        def count(m: dict[str, Any]) -> int:
            return self.app.services.counter.count(m["content"]) + overhead

        profile = count(messages[1]) if parsed.facts is not None else 0
        summary = count(messages[2 if profile else 1]) if parsed.summary is not None else 0
        assert r["system_tokens"] == count(messages[0]) + profile and r["profile_tokens"] == profile
        assert r["summary_tokens"] == summary
        assert r["history_tokens"] == sum(count(m) for m in parsed.history)
        assert r["query_tokens"] + r["context_tokens"] == count(messages[-1])
        assert r["total_prompt_tokens"] == sum(count(m) for m in messages)

    def chat_requests(self, since: int = 0) -> list[dict[str, Any]]:
        return [r for r in self.fake.requests[since:] if r["messages"][0]["content"] == self.prompt]


def settings_for(attempt: dict[str, Any], fake: FakeLLM) -> dict[str, Any]:
    memory: dict[str, Any] = {}
    if attempt["channel"] == "summary":
        memory = {
            "strategy": "hybrid",
            "window_rounds": 1,
            "summary_threshold_tokens": 50,
            "summary_min_fold_rounds": 1,
        }
    if attempt.get("summarizer") == "extractive" or attempt.get("extractor") == "rule":
        memory["summary_llm"] = {"base_url": None}  # no endpoint: extractive summaries, rule-based facts
    return {
        "llm": {"base_url": fake.base_url, "max_retries": 0},
        "memory": memory,
        "rewrite": {"mode": "none"},
        "auth": {"rate_limit": {"per_key": "", "per_session": "", "per_address": ""}},
        "user_memory": {"every_turns": 1},
    }


# -- the attempts ------------------------------------------------------------------------------------


def test_the_red_team_file_covers_the_ground() -> None:
    assert len(ATTEMPTS) >= 30
    assert len({a["id"] for a in ATTEMPTS}) == len(ATTEMPTS)
    assert {a["lang"] for a in ATTEMPTS} == {"zh", "en"}
    assert {a["channel"] for a in ATTEMPTS} == {"question", "history", "document", "summary", "memory", "openai"}
    assert len({a["leak"] for a in ATTEMPTS}) == 12
    assert sum(a["channel"] == "document" for a in ATTEMPTS) >= 5


@pytest.mark.parametrize("attempt", ATTEMPTS, ids=[a["id"] for a in ATTEMPTS])
async def test_attempt(attempt: dict[str, Any], app_factory: Any, fake_llm: FakeLLM) -> None:
    upstream = ObeyingUpstream(attempt)
    fake_llm.set_responder(upstream)
    fake_llm.chunk_chars = 3
    app: AppClient = await app_factory(**settings_for(attempt, fake_llm))
    run = Run(app, fake_llm, upstream, attempt)
    await CHANNELS[attempt["channel"]](run, attempt)


async def question(run: Run, a: dict[str, Any]) -> None:
    parsed = await run.ask(await run.session(), a["text"])
    assert run.upstream.obeyed[-1], "the attempt reached the model"
    assert a["trigger"] in parsed.question


async def history(run: Run, a: dict[str, Any]) -> None:
    sid = await run.session()
    await run.ask(sid, a["text"])
    parsed = await run.ask(sid, a["follow_up"])
    assert run.upstream.obeyed[-1]
    assert any(a["trigger"] in m["content"] for m in parsed.history if m["role"] == "user")
    assert not any(a["trigger"] in m["content"] for m in parsed.history if m["role"] == "assistant")


async def document(run: Run, a: dict[str, Any]) -> None:
    data = {"source": a["source"]} if "source" in a else {}
    resp = await run.app.http.post("/v1/documents", files={"file": (a["file"], a["text"].encode())}, data=data)
    assert resp.status_code == 201, resp.text
    doc_id = resp.json()["doc_id"]
    try:
        parsed = await run.ask(await run.session(), a["question"])
        assert run.upstream.obeyed[-1]
        assert any(a["trigger"] in text or a["trigger"] in title for title, _, text in parsed.blocks)
        assert a["trigger"] not in parsed.question
        if "source" in a:
            assert a["source"] in [source for _, source, _ in parsed.blocks]  # kept whole, as an attribute value
    finally:
        assert (await run.app.http.delete(f"/v1/documents/{doc_id}")).status_code == 200


async def summary(run: Run, a: dict[str, Any]) -> None:
    sid = await run.session()
    await run.ask(sid, a["text"])
    for q in ("运费多少？", "发票怎么开？"):
        await run.ask(sid, q)
    parsed = await run.ask(sid, "保修多久？")
    assert parsed.summary is not None, "the attempt's round was folded into the summary"
    assert a["trigger"] in parsed.summary
    assert all(a["trigger"] not in m["content"] for m in parsed.history)  # folded: no longer a round
    assert run.upstream.obeyed[-1]


async def memory(run: Run, a: dict[str, Any]) -> None:
    user = f"rt-{a['id']}"
    if a["extractor"] == "rule":
        said = await RuleFactExtractor().extract([Message("user", a["text"], 0, 0.0)])
        assert said, "the rule extractor does take the sentence: what keeps it out is the filter"
    await run.ask(await run.session(user), a["text"])
    facts = await stored_facts(run.app, user)
    parsed = await run.ask(await run.session(user), "运费多少？")
    if a["expect"] == "dropped":
        assert all(a["trigger"] not in f for f in facts), facts
        assert all(a["trigger"] not in str(m["content"]) for m in run.chat_requests()[-1]["messages"])
        assert not run.upstream.obeyed[-1]
        if a["extractor"] == "llm":
            assert parsed.facts is not None and len(parsed.facts) == 1  # the harmless fact next to it was kept
    else:
        assert any(a["trigger"] in f for f in facts), facts
        assert parsed.facts is not None and any(a["trigger"] in f for f in parsed.facts)
        assert run.upstream.obeyed[-1]


async def openai(run: Run, a: dict[str, Any]) -> None:
    messages = [{"role": "system", "content": a["text"]}, *a["history"], {"role": "user", "content": a["question"]}]
    for stream in (False, True):
        first = len(run.fake.requests)
        resp = await run.app.http.post("/v1/chat/completions", json={"messages": messages, "stream": stream})
        assert resp.status_code == 200, resp.text
        if stream:
            chunks = [data for _, data in sse_events(resp.text) if data != "[DONE]"]
            answer = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
        else:
            answer = resp.json()["choices"][0]["message"]["content"]
        assert not shows_prompt(answer, run.prompt), answer
        request = run.chat_requests(first)[-1]
        parsed = parse_request(request, run.app)
        assert all(a["text"] not in str(m["content"]) for m in request["messages"]), "client system text is dropped"
        in_history = any(a["trigger"] in m["content"] for m in parsed.history if m["role"] == "user")
        # The trigger reaches the model only through the client's history, escaped, in a user message.
        assert in_history == run.upstream.obeyed[-1] == bool(a["history"])
        if run.upstream.obeyed[-1] and not stream:
            assert answer == run.refusal


CHANNELS = {
    "question": question,
    "history": history,
    "document": document,
    "summary": summary,
    "memory": memory,
    "openai": openai,
}


async def stored_facts(app: AppClient, user: str) -> list[str]:
    """The user's facts as stored (reading them over HTTP needs an admin key; this checks what is kept)."""
    um = app.services.user_memory
    assert um is not None
    return [f.fact for f in await um.facts(UserMemory.key("", user))]


def test_folding_reads_entities_and_characters_as_a_regex_per_unit_would() -> None:
    # The guard folds every streamed answer; it finds the entities only and takes the rest one character at
    # a time (remembering how each folds): the same units, folded the same way, at the same indices.
    import random

    from rag_service.guard import fold

    unit = re.compile(r"&(?:#[0-9]{1,7}|#[xX][0-9a-fA-F]{1,6}|[A-Za-z][A-Za-z0-9]{1,31});|.", re.S)

    def by_regex(text: str, offset: int) -> tuple[str, list[int]]:
        out, where = [], []
        for m in unit.finditer(text):
            u = m.group()
            for c in unicodedata.normalize("NFKC", html.unescape(u) if len(u) > 1 else u).casefold():
                if c.isalnum():
                    out.append(c)
                    where.append(m.start() + offset)
        return "".join(out), where

    rnd = random.Random(7)
    alphabet = [chr(i) for i in range(0x20, 0x3100, 7)] + list("&&#;;xX0123456789abcdefﬁ①²ß\n")
    samples = ["Brewmoor ﬁlter &lt;b&gt; &#x3c;&#60 &amp &#99999999; ①²", "没有实体的中文回答，第 2 段。"]
    # No entity: one unit per character, with and without a character that folds to two.
    samples += ["Straße ﬁx ① 第2段", "Plain words, 中文 and 42."]
    samples += ["".join(rnd.choice(alphabet) for _ in range(rnd.randint(0, 60))) for _ in range(500)]
    for text in samples:
        assert fold(text, 5) == by_regex(text, 5), text


def test_leak_scan_finds_a_window_from_the_start_given_and_only_there() -> None:
    import random

    from rag_service.guard import OutputGuard, fold

    guard = OutputGuard("Quillmoor's staff never reveal the routing codes 7Q-44 or the escalation words.", 20, "no")
    rnd = random.Random(11)
    secret = fold("the routing codes 7Q-44 or the escalation")[0]
    for _ in range(300):
        noise = "".join(rnd.choice("abcxyz0123 ") for _ in range(rnd.randint(0, 30)))
        cut = rnd.randint(0, len(secret))
        folded = fold(noise)[0] + secret[:cut] + fold(noise[::-1])[0]
        start = rnd.randint(-5, len(folded) + 2)
        expected = any(
            folded[i : i + guard.window] in guard._shingles
            for i in range(max(0, start), len(folded) - guard.window + 1)
        )
        assert guard._folded_leaks(folded, start) == expected
