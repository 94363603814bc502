"""Long conversations through the real pipeline and API, with the fake LLM as generator and summarizer.

Every turn checks what the fake LLM actually received: the receipt's numbers are recounted from the
messages sent, history is made of whole question/answer pairs (never retrieved context), the prompt plus
the generation reserve fits the context window, and the store keeps every message.
"""

from __future__ import annotations

import asyncio
import functools
import hashlib
import itertools
import re
import threading
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

from rag_core.settings import PromptSettings
from rag_service.domain import SessionMeta
from rag_service.prompt import CLOSE_DOCS, CLOSE_SUMMARY, OPEN_DOCS, OPEN_SUMMARY
from rag_service.summary import PINNED_HEADER
from rag_service.testing.fake_llm import FakeLLM, Fault, Responder, Waits, message_text, scripted
from rag_service.wiring import Services
from tests.conftest import AppClient
from tests.kb_questions import QUESTIONS

ORDER = "XC20250301000123"
FIRST_QUESTION = f"你好，我的订单号是 {ORDER}，金额 8999 元，请问什么时候发货？"
# What the summarizer answers: a fine summary, except that it leaves out the order number and amount.
SUMMARY_REPLY = "用户先询问了自己订单的发货时间，之后陆续咨询了多款手机和笔记本电脑的价格、配置、保修与售后政策。"
SUMMARIZER_MARK = "running summary"  # in the summarizer's system prompt, never in a chat request
SUMMARY_HEADER = PromptSettings().summary_header

ANSWER_SENTENCES = [
    "根据资料，这款产品支持七天无理由退货，但激活后需要经过检测。",
    "标准版本提供一年的官方保修，延保可以在收货后三十天内购买。",
    "您可以选择花呗或者信用卡分期付款，部分期数免手续费。",
    "门店和线上商城的价格一致，会员还可以用积分抵扣一部分金额。",
    "如果需要开具增值税专用发票，请在订单页面填写公司抬头和税号。",
    "Orders shipped abroad usually arrive within seven to twelve business days.",
    "The student discount applies to laptops and tablets with a valid student ID.",
    "如有其他问题，欢迎随时联系人工客服，服务时间为每天九点到二十一点。",
]


def answer_for(question: str) -> str:
    """A deterministic, realistically long answer (about 60-250 tokens) that depends on the question."""
    digest = hashlib.sha256(question.encode()).digest()
    n = 2 + digest[0] % 6
    return "您好！" + "".join(ANSWER_SENTENCES[(digest[1] + i) % len(ANSWER_SENTENCES)] for i in range(n))


def chat_answer(request: dict[str, Any]) -> str:
    final = message_text(request["messages"][-1].get("content"))
    return answer_for(final.rsplit("用户的问题：", 1)[-1])


def upstream(summary: str | Fault = SUMMARY_REPLY) -> Responder:
    return scripted([(SUMMARIZER_MARK, summary)], default=chat_answer)


def is_summarizer(request: dict[str, Any]) -> bool:
    return any(SUMMARIZER_MARK in message_text(m.get("content")) for m in request["messages"])


def script(turns: int) -> list[str]:
    """Round 1 gives the order number; the rest ask about the knowledge base's products and policies."""
    return [FIRST_QUESTION] + [QUESTIONS[i % len(QUESTIONS)][0] for i in range(turns - 1)]


@dataclass
class Conversation:
    """Drives one session turn by turn and checks every turn against what the fake LLM received."""

    app: AppClient
    fake: FakeLLM
    sid: str
    rounds: list[tuple[str, str]] = field(default_factory=list)
    receipts: list[dict[str, Any]] = field(default_factory=list)
    prompts: list[list[dict[str, Any]]] = field(default_factory=list)
    summarizer_calls: list[dict[str, Any]] = field(default_factory=list)
    # Awaited after each turn's compression: a request the summarizer gave up on may still be on its way to
    # the fake, which then has to have recorded it before the turn's requests are counted.
    settle: Callable[[], Awaitable[Any]] | None = None

    @property
    def services(self) -> Services:
        return self.app.services

    async def meta(self) -> SessionMeta:
        meta, _, _ = await self.services.store.load(self.sid, lambda m: m.message_count)
        return meta

    async def turn(self, question: str) -> dict[str, Any]:
        first = len(self.fake.requests)
        reply = await self.app.ask(self.sid, question)
        await self.services.pipeline.drain()  # compressions land before the next turn
        if self.settle is not None:
            await self.settle()
        sent = self.fake.requests[first:]
        system_prompt = self.services.settings.prompt.system_prompt
        chats = [r for r in sent if r["messages"][0]["content"] == system_prompt]
        assert len(chats) == 1, "one generation request per turn"
        self.summarizer_calls += [r for r in sent if is_summarizer(r)]
        self.rounds.append((question, reply["answer"]))
        self.receipts.append(reply["receipt"])
        self.prompts.append(chats[0]["messages"])
        await self.check(question, reply["receipt"], chats[0]["messages"])
        return reply

    def history(self, messages: list[dict[str, Any]]) -> list[tuple[str, str]]:
        """The verbatim rounds of a prompt, checked to be whole question/answer pairs."""
        start = 2 if has_summary(messages) else 1
        middle = messages[start:-1]
        assert [m["role"] for m in middle] == ["user", "assistant"] * (len(middle) // 2)
        return [(middle[i]["content"], middle[i + 1]["content"]) for i in range(0, len(middle), 2)]

    async def check(self, question: str, r: dict[str, Any], messages: list[dict[str, Any]]) -> None:
        settings = self.services.settings
        overhead = settings.tokens.per_message_overhead
        b = settings.budget

        def count(m: dict[str, Any]) -> int:
            return self.services.counter.count(m["content"]) + overhead

        # The receipt is a recount of what was sent.
        assert messages[0] == {"role": "system", "content": settings.prompt.system_prompt}
        assert r["system_tokens"] == count(messages[0])
        summary = messages[1] if has_summary(messages) else None
        assert r["summary_tokens"] == (count(summary) if summary else 0)
        assert r["compressed"] is (summary is not None)
        history = self.history(messages)
        assert r["history_tokens"] == sum(count(m) for m in messages[(2 if summary else 1) : -1])
        assert r["query_tokens"] == self.services.counter.count(settings.prompt.question_header + question) + overhead
        assert r["query_tokens"] + r["context_tokens"] == count(messages[-1])
        assert r["total_prompt_tokens"] == sum(count(m) for m in messages)
        assert r["rounds_kept"] == len(history)
        assert r["strategy"] == settings.memory.strategy
        assert (r["generation_reserve"], r["context_window"]) == (b.generation_reserve, b.context_window)

        # The budget: the window is never overrun, context gets at least its minimum budget and stays in it.
        assert r["total_prompt_tokens"] + r["generation_reserve"] <= r["context_window"]
        assert r["chunk_budget"] == max(
            b.min_chunk_budget,
            b.total_budget
            - r["system_tokens"]
            - b.generation_reserve
            - r["query_tokens"]
            - r["history_tokens"]
            - r["summary_tokens"],
        )
        assert r["context_tokens"] <= r["chunk_budget"]

        # History is the newest whole rounds, questions and answers only; context only in the last message.
        assert history == self.rounds[:-1][len(self.rounds) - 1 - len(history) :]
        assert all(OPEN_DOCS not in m["content"] for m in messages[1:-1])  # (the system prompt names it)
        final = messages[-1]
        assert final["role"] == "user" and OPEN_DOCS in final["content"] and CLOSE_DOCS in final["content"]
        assert final["content"].endswith(settings.prompt.question_header + question)

        # The store keeps every message, whatever the prompt kept.
        resp = await self.app.http.get(f"/v1/sessions/{self.sid}/messages")
        stored = [(m["role"], m["content"]) for m in resp.json()["messages"]]
        assert stored == [(role, text) for q, a in self.rounds for role, text in (("user", q), ("assistant", a))]


def has_summary(messages: list[dict[str, Any]]) -> bool:
    """The summary travels right after the system prompt, as a delimited data block in a user message
    (it is made of what the user said, so it never goes into a system message)."""
    return messages[1]["role"] == "user" and str(messages[1]["content"]).startswith(
        f"{SUMMARY_HEADER}\n{OPEN_SUMMARY}\n"
    )


def settings_for(strategy: str, fake: FakeLLM, **extra: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "llm": {"base_url": fake.base_url, "max_retries": 0},
        "memory": {
            "strategy": strategy,
            "window_rounds": 4,
            "summary_trigger": "tokens",
            "summary_threshold_tokens": 900,
            "summary_max_tokens": 200,
        },
        "budget": {"history_budget": 1200},
        # Retrieval sees the question as asked: rewriting has its own tests, and memory does not depend on it.
        "rewrite": {"mode": "none"},
        # Hundreds of requests in a few seconds: the per-key and per-session rate limits would answer 429.
        "auth": {"rate_limit": {"per_key": "", "per_session": ""}},
    }
    for key, value in extra.items():
        base[key] = {**base.get(key, {}), **value}
    return base


async def start(app_factory: Callable[..., Any], fake: FakeLLM, strategy: str, **extra: Any) -> Conversation:
    fake.set_responder(upstream())
    app: AppClient = await app_factory(**settings_for(strategy, fake, **extra))
    return Conversation(app, fake, await app.new_session())


# -- one 60-round conversation per strategy ---------------------------------------------------------

TURNS = 60


async def test_full_history_grows_every_turn(app_factory: Any, fake_llm: FakeLLM) -> None:
    conv = await start(app_factory, fake_llm, "full", budget={"context_window": 32768, "total_budget": 30000})
    for k, question in enumerate(script(TURNS), start=1):
        await conv.turn(question)
        assert len(conv.history(conv.prompts[-1])) == k - 1
    history = [r["history_tokens"] for r in conv.receipts]
    assert all(a < b for a, b in itertools.pairwise(history))
    assert not conv.summarizer_calls


async def test_window_keeps_exactly_the_newest_rounds(app_factory: Any, fake_llm: FakeLLM) -> None:
    conv = await start(app_factory, fake_llm, "window")
    n = conv.services.settings.memory.window_rounds
    for k, question in enumerate(script(TURNS), start=1):
        await conv.turn(question)
        assert conv.history(conv.prompts[-1]) == conv.rounds[:-1][-n:]
        assert len(conv.history(conv.prompts[-1])) == min(n, k - 1)
    assert ORDER not in str(conv.prompts[-1])  # window forgets: that is what summary/hybrid fix
    assert not conv.summarizer_calls


async def test_truncate_keeps_whole_rounds_within_its_budget(app_factory: Any, fake_llm: FakeLLM) -> None:
    conv = await start(app_factory, fake_llm, "truncate")
    settings = conv.services.settings
    limit, overhead = settings.budget.history_budget, settings.tokens.per_message_overhead

    def cost(q: str, a: str) -> int:
        return conv.services.counter.count(q) + conv.services.counter.count(a) + 2 * overhead

    for question in script(TURNS):
        await conv.turn(question)
        kept = conv.history(conv.prompts[-1])
        r = conv.receipts[-1]
        assert r["history_tokens"] == sum(cost(q, a) for q, a in kept) <= limit
        older = conv.rounds[: len(conv.rounds) - 1 - len(kept)]
        if older:  # the newest rounds that fit: the next older one would not
            assert r["history_tokens"] + cost(*older[-1]) > limit
    assert min(len(conv.history(p)) for p in conv.prompts[10:]) >= 1
    assert max(r["history_tokens"] for r in conv.receipts) > limit // 2
    assert not conv.summarizer_calls


@pytest.mark.parametrize("strategy", ["hybrid", "summary"])
async def test_summaries_keep_pinned_facts_across_60_rounds(app_factory: Any, fake_llm: FakeLLM, strategy: str) -> None:
    conv = await start(app_factory, fake_llm, strategy)
    window = conv.services.settings.memory.window_rounds if strategy == "hybrid" else 0
    summaries: list[str] = []
    header = conv.services.settings.prompt.summary_header
    for k, question in enumerate(script(TURNS), start=1):
        before = await conv.meta()
        calls = len(conv.summarizer_calls)
        await conv.turn(question)
        prompt = conv.prompts[-1]
        kept = conv.history(prompt)
        # Nothing is lost: every round is either in the summary or sent verbatim, and hybrid always keeps
        # its window verbatim.
        assert len(kept) == (k - 1) - before.summarized // 2
        assert len(kept) >= min(window, k - 1)
        if before.summary:
            assert prompt[1] == {
                "role": "user",
                "content": f"{header}\n{OPEN_SUMMARY}\n{before.summary}\n{CLOSE_SUMMARY}",
            }
            assert [m["role"] for m in prompt].count("system") == 1
        else:
            assert not has_summary(prompt)
        # The order number is in every prompt from round 2 on, verbatim or pinned.
        if k > 1:
            assert ORDER in str(prompt)
        if len(conv.summarizer_calls) > calls:
            assert len(conv.summarizer_calls) == calls + 1
            summaries.append((await conv.meta()).summary)

    # Compression happened, incrementally: each call merged the previous summary with the rounds leaving.
    assert len(conv.summarizer_calls) >= 3
    folded: list[str] = []
    for i, call in enumerate(conv.summarizer_calls):
        text = call["messages"][1]["content"]
        previous = summaries[i - 1] if i else "(none)"
        assert text.startswith(f"Existing summary:\n{previous}\n\nNew rounds:\n")
        folded += re.findall(r"^User: (.*)$", text, flags=re.M)
    sent_as_rounds = [q for q, _ in conv.rounds]
    assert folded == sent_as_rounds[: len(folded)], "each round is folded once, in order"

    # Round 60: round 1 is long compressed, the summarizer never wrote the order number, yet it is there.
    last = conv.prompts[-1]
    assert has_summary(last)
    assert all(ORDER not in q + a for q, a in conv.history(last))
    assert ORDER not in SUMMARY_REPLY and "8999" not in SUMMARY_REPLY
    pinned = [line for line in last[1]["content"].splitlines() if line.startswith(PINNED_HEADER)]
    assert len(pinned) == 1 and ORDER in pinned[0] and "8999 元" in pinned[0]
    r = conv.receipts[-1]
    assert r["compressed"] and r["compressed_tokens_before"] > r["compressed_tokens_after"] > 0


# -- tight budget -----------------------------------------------------------------------------------

LONG_PADDING = "我想先说明一下情况，这样您能更准确地帮我判断。" * 12  # about 300 tokens


async def test_tight_budget_keeps_the_last_two_rounds_and_drops_older_history_and_summary(
    app_factory: Any, fake_llm: FakeLLM
) -> None:
    conv = await start(
        app_factory,
        fake_llm,
        "hybrid",
        budget={
            "context_window": 2400,
            "total_budget": 1800,
            "generation_reserve": 256,
            "query_allowance": 400,
            "min_chunk_budget": 400,
        },
        memory={"window_rounds": 4, "summary_threshold_tokens": 600},
    )
    questions = [LONG_PADDING + q for q in script(16)]
    dropped_summary = 0
    for k, question in enumerate(questions, start=1):
        await conv.turn(question)
        prompt, r = conv.prompts[-1], conv.receipts[-1]
        assert r["total_prompt_tokens"] + r["generation_reserve"] <= r["context_window"]
        kept = conv.history(prompt)
        # The last two rounds always, older ones never (they do not fit once context has its minimum).
        assert kept == conv.rounds[:-1][-2:]
        assert OPEN_DOCS in prompt[-1]["content"] and "<document index=" in prompt[-1]["content"]
        if k > 3:
            assert r["rounds_dropped_for_budget"] >= 1
            assert r["chunk_budget"] == conv.services.settings.budget.min_chunk_budget
        meta = await conv.meta()
        if meta.summary:
            assert not has_summary(prompt) and r["summary_tokens"] == 0
            dropped_summary += 1
    assert dropped_summary >= 5, "the scenario must really compress, and the summary must really be dropped"


# -- a failing summarizer loses nothing -------------------------------------------------------------


async def test_failing_or_hanging_summarizer_loses_nothing_and_compression_resumes(
    app_factory: Any, fake_llm: FakeLLM
) -> None:
    conv = await start(
        app_factory,
        fake_llm,
        "hybrid",
        memory={"summary_threshold_tokens": 500, "summary_llm": {"timeout_s": 0.4, "max_retries": 0}},
    )
    questions = script(14)
    waits = fake_llm.waits = Waits()  # a hang lasts until the test ends it: only timeout_s can cut it

    async def verbatim_turns(faulty: Fault, turns: list[str]) -> None:
        fake_llm.set_responder(upstream(faulty))
        for question in turns:
            calls = len(conv.summarizer_calls)
            if faulty.hang_s:
                assert len(conv.rounds) >= 5  # so this turn tries to compress, and hangs once
                hangs = len(waits.requested) + 1
                conv.settle = functools.partial(asyncio.to_thread, waits.wait_entered, hangs)
            await conv.turn(question)
            conv.settle = None
            meta = await conv.meta()
            assert meta.summarized == 0 and meta.summary == ""
            # Every round so far is still sent verbatim.
            assert conv.history(conv.prompts[-1]) == conv.rounds[:-1]
            assert not has_summary(conv.prompts[-1])
            if len(conv.rounds) > 5:  # compression is due, was tried, failed, and is tried again next turn
                assert len(conv.summarizer_calls) == calls + 1

    await verbatim_turns(Fault(500), questions[:6])
    try:
        # A safety net only: were the hangs not cut by timeout_s, the turns' drain() would never return.
        await asyncio.wait_for(verbatim_turns(Fault(status=200, hang_s=3.0), questions[6:9]), 300)
        # Three compressions were tried and given up on while their upstream calls were all still hanging.
        assert waits.requested == [3.0] * 3 and waits.returned == 0
    finally:
        waits.open()

    fake_llm.set_responder(upstream())
    await conv.turn(questions[9])
    meta = await conv.meta()
    window = conv.services.settings.memory.window_rounds
    assert meta.summarized == 2 * (10 - window)  # everything but the window, folded in one go
    assert SUMMARY_REPLY in meta.summary and ORDER in meta.summary
    for question in questions[10:]:
        await conv.turn(question)
        prompt = conv.prompts[-1]
        assert has_summary(prompt) and ORDER in prompt[1]["content"]
    folded = re.findall(r"^User: (.*)$", conv.summarizer_calls[-1]["messages"][1]["content"], flags=re.M)
    assert folded and FIRST_QUESTION not in folded  # later compressions only take the new rounds


async def test_compression_runs_after_the_answer_is_returned(app_factory: Any, fake_llm: FakeLLM) -> None:
    conv = await start(
        app_factory,
        fake_llm,
        "hybrid",
        memory={"window_rounds": 1, "summary_threshold_tokens": 50, "summary_min_fold_rounds": 1},
    )

    summarizing, done = threading.Event(), threading.Event()

    def slow_summarizer(request: dict[str, Any]) -> str | Fault:
        if is_summarizer(request):
            summarizing.set()
            done.wait(60)  # until the test has looked (the timeout is only a safety net)
            return SUMMARY_REPLY
        return chat_answer(request)

    fake_llm.set_responder(slow_summarizer)
    try:
        await conv.app.ask(conv.sid, FIRST_QUESTION)
        await conv.app.ask(conv.sid, QUESTIONS[0][0])
        # The answer is back while the summarizer is still working.
        assert conv.services.pipeline._background
        assert await asyncio.to_thread(summarizing.wait, 60)
        assert (await conv.meta()).summarized == 0
    finally:
        done.set()
    await conv.services.pipeline.drain()
    meta = await conv.meta()
    assert meta.summarized == 2 and ORDER in meta.summary


async def test_unanswered_question_is_stored_but_never_sent_as_history(app_factory: Any, fake_llm: FakeLLM) -> None:
    conv = await start(app_factory, fake_llm, "window", llm={"fallback_extractive": False})
    await conv.turn(FIRST_QUESTION)
    fake_llm.fail_next(1, Fault(500))
    resp = await conv.app.http.post(f"/v1/sessions/{conv.sid}/chat", json={"question": "这个问题没有回答"})
    assert resp.status_code == 502
    reply = await conv.app.ask(conv.sid, QUESTIONS[0][0])
    sent = fake_llm.requests[-1]["messages"]
    assert [m["content"] for m in sent[1:-1]] == [FIRST_QUESTION, conv.rounds[0][1]]
    stored = (await conv.app.http.get(f"/v1/sessions/{conv.sid}/messages")).json()["messages"]
    assert [m["content"] for m in stored] == [
        FIRST_QUESTION,
        conv.rounds[0][1],
        "这个问题没有回答",
        QUESTIONS[0][0],
        reply["answer"],
    ]
