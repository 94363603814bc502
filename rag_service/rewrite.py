"""Query rewriting: turn a follow-up into a standalone query for retrieval.

Every turn first goes through the `Gate` (history = the summary and the last `history_rounds` rounds):
- no history                                                    -> "first": unchanged ("skipped");
- a name of its own (iPhone 16 Pro, HIV, 上海) and no reference marker:
  low similarity to the recent questions, or a name the history
  never mentioned                                               -> "switch": unchanged, `topic_switch=True`;
- a name of its own                                             -> "standalone": unchanged ("skipped");
  (a pronoun then points inside the question: "Is Herpes lethal, how is it spread?")
- a reference marker (它/这个/那…/…呢/it/they/what about/the movement…) -> "dependent";
- no marker and low similarity                                  -> "switch";
- at most one noun phrase of its own (ellipsis: "那保修期呢", "population back then") -> "dependent";
- otherwise                                                     -> "standalone".

`RuleRewriter` rewrites dependent questions by adding only the salient history entity they lack
(`rewrite_rules`); `LLMRewriter` asks a small model and checks its reply, falling back to the rules on a
timeout, an upstream error or a reply that is empty, too long or reads like an answer. The user's question
is never lost: the query is the question, the question with an entity, or a checked LLM rewrite.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal, Protocol

import numpy as np

from rag_service.domain import MemoryView, RewriteResult, Round
from rag_service.embedding import Embedder, Vector
from rag_service.llm import ChatClient, ChatMessages, UpstreamError
from rag_service.rewrite_rules import (
    Entity,
    HistoryText,
    content_size,
    definite_reference,
    has_determiner,
    history_texts,
    is_fragment,
    mentions,
    normalize,
    own_names,
    personal_pronoun,
    reference_marker,
    rule_rewrite,
    salient_entities,
)
from rag_service.settings import LLMEndpoint, RewriteSettings, Settings


class Rewriter(Protocol):
    async def rewrite(self, question: str, view: MemoryView) -> RewriteResult: ...


class NoRewriter:
    """Retrieval sees the question as asked."""

    async def rewrite(self, question: str, view: MemoryView) -> RewriteResult:
        return RewriteResult(question, "none", detail="rewriting is off")


class History:
    """The conversation as the rules see it (the summary and the recent rounds); entities are extracted
    once, on first use."""

    def __init__(self, summary: str, rounds: Sequence[Round]) -> None:
        self.summary, self.rounds = summary, rounds

    @cached_property
    def texts(self) -> list[HistoryText]:
        return history_texts(self.summary, [(r.user.content, r.assistant.content) for r in self.rounds])

    @cached_property
    def candidates(self) -> list[Entity]:
        """Salient entities, most salient first."""
        return salient_entities(self.texts, limit=5)

    def knows(self, entity: Entity) -> bool:
        return any(entity.key in normalize(t.text) or mentions(t.text, entity) for t in self.texts)


@dataclass(frozen=True, slots=True)
class Decision:
    kind: Literal["first", "standalone", "switch", "dependent"]
    reason: str
    history: History


class Gate:
    """Decides whether a question needs the conversation at all."""

    def __init__(self, settings: RewriteSettings, embedder: Embedder | None = None) -> None:
        self.settings, self.embedder = settings, embedder

    def recent(self, view: MemoryView) -> tuple[Round, ...]:
        n = self.settings.history_rounds
        return view.rounds[-n:] if n > 0 else ()

    def decide(self, question: str, view: MemoryView) -> Decision:
        rounds = self.recent(view)
        history = History(view.summary, rounds)
        if not rounds and not view.summary:
            return Decision("first", "first turn", history)
        marker = reference_marker(question)
        if marker is None and has_determiner(question):
            definite = definite_reference(question, history.candidates)
            marker = definite[0] if definite else None
        names = own_names(question)
        if names and marker is None:
            sim = self.similarity(question, rounds)
            if sim is not None and sim < self.settings.topic_similarity:
                return Decision("switch", f"similarity {sim:.2f} < {self.settings.topic_similarity:.2f}", history)
            new = [e for e in names if not history.knows(e)]
            if new:
                return Decision("switch", f"new entity {new[0].text!r}", history)
        if names:
            # Its own name: any pronoun points inside the question ("Is Herpes lethal, how is it spread?").
            return Decision("standalone", f"names {names[0].text!r}", history)
        if marker is not None:
            return Decision("dependent", f"reference marker {marker!r}", history)
        sim = self.similarity(question, rounds)
        if sim is not None and sim < self.settings.topic_similarity:
            return Decision("switch", f"similarity {sim:.2f} < {self.settings.topic_similarity:.2f}", history)
        if content_size(question) <= 1 and not is_fragment(question):
            return Decision("dependent", "ellipsis: too little of its own", history)
        return Decision("standalone", "has content of its own", history)

    def similarity(self, question: str, rounds: Sequence[Round]) -> float | None:
        """Highest cosine between the question and recent user questions.

        Questions without a marker were embedded as asked on their own turn (by this gate or by retrieval),
        so the embedder's query LRU already holds them; questions with one are compared only if none
        without one is left, so a turn costs at most the question's own embedding (which retrieval reuses
        when the question stays unchanged).
        """
        if self.embedder is None:
            return None
        previous = [r.user.content for r in rounds if r.user.content.strip()]
        plain = [q for q in previous if reference_marker(q) is None] or previous[-1:]
        if not plain:
            return None
        q = self.embedder.embed_query(question)
        return max(_cosine(q, self.embedder.embed_query(p)) for p in plain)


def _cosine(a: Vector, b: Vector) -> float:
    denom = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b) / denom if denom else 0.0


class RuleRewriter:
    """The default without an LLM, and the LLM's fallback."""

    def __init__(self, settings: RewriteSettings, embedder: Embedder | None = None) -> None:
        self.settings = settings
        self.gate = Gate(settings, embedder)

    async def rewrite(self, question: str, view: MemoryView) -> RewriteResult:
        # Run on the event loop, like retrieval: see the note on `ChatPipeline._prepare`.
        return self.rewrite_now(question, view)

    def rewrite_now(self, question: str, view: MemoryView) -> RewriteResult:
        d = self.gate.decide(question, view)
        if d.kind == "dependent" or (d.kind == "standalone" and not self.settings.skip_standalone):
            return self.resolve(question, d, "rule")
        return RewriteResult(question, "skipped", d.kind == "switch", d.reason)

    def resolve(self, question: str, decision: Decision, action: str, why: str = "") -> RewriteResult:
        query, detail = rule_rewrite(question, decision.history.candidates, personal_pronoun(question))
        if len(query) > self.settings.max_query_chars:
            query, detail = question, "entity would exceed max_query_chars"
        return RewriteResult(query, action, False, f"{why or decision.reason}; {detail}")


class LLMRewriter:
    def __init__(self, client: ChatClient, settings: RewriteSettings, rules: RuleRewriter) -> None:
        self.client, self.settings, self.rules = client, settings, rules
        self.timeout_s = client.endpoint.timeout_s
        self.max_tokens = min(client.endpoint.max_tokens, max(64, settings.max_query_chars))

    async def rewrite(self, question: str, view: MemoryView) -> RewriteResult:
        d = self.rules.gate.decide(question, view)
        if d.kind in ("first", "switch") or (d.kind == "standalone" and self.settings.skip_standalone):
            return RewriteResult(question, "skipped", d.kind == "switch", d.reason)
        messages = rewrite_messages(self.settings.prompt, question, view.summary, self.rules.gate.recent(view))
        try:
            reply = await asyncio.wait_for(
                self.client.complete(messages, max_tokens=self.max_tokens, timeout_s=self.timeout_s), self.timeout_s
            )
        except TimeoutError:
            problem = f"timed out after {self.timeout_s:g}s"
        except UpstreamError as exc:
            problem = str(exc)
        else:
            query, problem_or_none = check_output(reply, question, self.settings.max_query_chars)
            if problem_or_none is None:
                return RewriteResult(query, "called", False, d.reason)
            problem = problem_or_none
        return self.rules.resolve(question, d, "fallback", f"llm {problem}")


_ANSWER_CHARS = 400


def rewrite_messages(prompt: str, question: str, summary: str, rounds: Sequence[Round]) -> ChatMessages:
    parts: list[str] = []
    if summary:
        parts.append(f"Conversation summary:\n{summary}")
    if rounds:
        lines = []
        for r in rounds:
            lines.append(f"User: {r.user.content}")
            if r.assistant.content:
                lines.append(f"Assistant: {_clip(r.assistant.content, _ANSWER_CHARS)}")
        parts.append("Conversation:\n" + "\n".join(lines))
    parts.append(f"Last question: {question}")
    return [{"role": "system", "content": prompt}, {"role": "user", "content": "\n\n".join(parts)}]


def _clip(text: str, n: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= n else text[:n] + "…"


_PREFIX = re.compile(
    r"^(?:(?:standalone|rewritten|search|final)\s+)*(?:query|question|rewrite)\s*[:：]\s*"
    r"|^(?:改写后?的?(?:问题|查询)?|查询|问题|检索词)\s*[:：]\s*",
    re.IGNORECASE,
)
_QUOTES = "\"'`“”‘’「」『』«»"
_ANSWER_START = re.compile(
    r"^(?:yes\b|no\b|sure\b|sorry\b|certainly\b|of course\b|i\b|i'm\b|i am\b|as an ai\b|the answer\b|according to\b"
    r"|here is\b|here's\b|based on\b|是的|不是|好的|抱歉|对不起|您好|你好|根据|当然|答案)",
    re.IGNORECASE,
)


def check_output(reply: str, question: str, max_chars: int) -> tuple[str, str | None]:
    """(query, problem): the reply cleaned of prefixes and quotes, and why it is unusable (None if usable)."""
    lines = [_PREFIX.sub("", line.strip()).strip().strip(_QUOTES).strip() for line in reply.strip().splitlines()]
    lines = [line for line in lines if line]
    if not lines:
        return question, "returned an empty reply"
    if len(lines) > 1:
        return question, "returned several lines"
    text = lines[0]
    if len(text) > max_chars:
        return question, f"reply longer than max_query_chars ({len(text)} > {max_chars})"
    if len(text) > 2 * len(question) + 60:
        return question, f"reply too long for the question ({len(text)} chars)"
    if _ANSWER_START.match(text) and not _ANSWER_START.match(question.strip()):
        return question, "reply reads like an answer"
    return text, None


_REWRITE_DEFAULTS = {"temperature": 0.0, "timeout_s": 5.0, "max_tokens": 128}


def rewrite_endpoint(settings: Settings) -> LLMEndpoint:
    """`Settings.rewrite_endpoint()`, with a rewriter's own defaults (temperature 0, 5 s timeout, 128 tokens)
    for whatever `rewrite.llm` does not set itself, instead of the answer generator's values."""
    endpoint = settings.rewrite_endpoint()
    explicit = settings.rewrite.llm.model_fields_set if settings.rewrite.llm else set()
    return endpoint.model_copy(update={k: v for k, v in _REWRITE_DEFAULTS.items() if k not in explicit})
