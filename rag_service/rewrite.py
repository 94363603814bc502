"""Query rewriting: turn a follow-up into a standalone query for retrieval.

Every turn first goes through the `Gate` (history = the summary and the last `history_rounds` rounds):
- no history                                                    -> "first": unchanged ("skipped");
- a contrast follow-up ("那标准款呢？", "and the 512GB one?", "what about Japan?") -> "dependent";
- a pronoun with its antecedent inside the question ("Is Herpes lethal, how is it spread?"), or an
  ellipsis cue (and …/那…/…呢/else) with a name of its own      -> treated as having no marker;
- a reference marker (它/这个/那…/…呢/it/they/what about/the movement…) -> "dependent";
- a subject of its own (a name, or a noun when the question is similar to nothing recent) that shares
  no word with the conversation: a name the history never mentioned, or low similarity to the recent
  questions                                                     -> "switch": unchanged, `topic_switch=True`;
- a name of its own                                             -> "standalone": unchanged ("skipped");
- at most one noun phrase of its own (ellipsis: "那保修期呢", "population back then") -> "dependent";
- otherwise                                                     -> "standalone".

A switch needs both: no shared word and (with an embedder) low similarity. Similarity alone fires on
every short, differently worded follow-up ("Which one protects more?", "Explain Spark."), and a false
switch both leaves a dependent question unresolved and cuts the session's topic.

`RuleRewriter` rewrites dependent questions: a contrast follow-up is read against the previous question
(itself rewritten first, so chains such as "那标准款呢" -> "那 512GB 呢" work); otherwise it adds only
the salient history entity the question lacks (`rewrite_rules`). `LLMRewriter` asks a small model and
checks its reply, falling back to the rules on a timeout, an upstream error or a reply that is empty, too
long or reads like an answer. The user's question is never lost: the query is the question, the
question with an entity, the previous question with the new value, or a checked LLM rewrite.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal, Protocol

import numpy as np

from rag_core.embedding import Embedder, Vector
from rag_core.settings import LLMEndpoint, RewriteSettings, Settings
from rag_service.domain import MemoryView, RewriteResult, Round
from rag_service.llm import ChatClient, ChatMessages, UpstreamError
from rag_service.rewrite_rules import (
    Contrast,
    Entity,
    HistoryText,
    antecedent_inside,
    content_size,
    contrast_followup,
    definite_reference,
    entities,
    find_marker,
    has_determiner,
    has_subject,
    history_texts,
    is_fragment,
    mentions,
    normalize,
    own_names,
    personal_pronoun,
    rule_rewrite,
    salient_entities,
    strip_framing,
    substitute,
    topic_words,
)


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

    @cached_property
    def words(self) -> set[str]:
        """The words the conversation is about: those of the user's questions, the summary and the answers
        (asking about what an answer said is following it up, not changing the topic)."""
        out: set[str] = set()
        for t in self.texts:
            out |= topic_words(entities(t.text))
        return out

    def knows(self, entity: Entity) -> bool:
        return any(entity.key in normalize(t.text) or mentions(t.text, entity) for t in self.texts)

    def shares(self, question: str) -> bool:
        """Does the question use a word of the conversation's topic?"""
        return bool(topic_words(entities(question)) & self.words)


@dataclass(frozen=True, slots=True)
class Decision:
    kind: Literal["first", "standalone", "switch", "dependent"]
    reason: str
    history: History
    contrast: Contrast | None = None


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
        contrast = contrast_followup(question)
        if contrast is not None:
            return Decision("dependent", f"contrast follow-up ({contrast.kind} {contrast.core!r})", history, contrast)
        names = own_names(question)
        found = find_marker(question)
        marker = found.text if found is not None and not antecedent_inside(question, found, names) else None
        if found is None and has_determiner(question):
            definite = definite_reference(question, history.candidates)
            marker = definite[0] if definite else None
        if marker is not None:
            return Decision("dependent", f"reference marker {marker!r}", history)
        shared = history.shares(question)
        if names:
            if not shared:
                new = [e for e in names if not history.knows(e)]
                if len(new) == len(names):
                    return Decision("switch", f"new entity {new[0].text!r}", history)
                sim = self.similarity(question, rounds)
                if sim is not None and sim < self.settings.topic_similarity:
                    return Decision("switch", f"similarity {sim:.2f} < {self.settings.topic_similarity:.2f}", history)
            return Decision("standalone", f"names {names[0].text!r}", history)
        if not shared and has_subject(question):
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
        plain = [q for q in previous if find_marker(q) is None] or previous[-1:]
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
        query, detail = "", ""
        if decision.contrast is not None:
            previous = self.previous_query(decision.history)
            read = substitute(previous, decision.contrast, question) if previous else None
            if read is not None:
                query, detail = read
        if not query:
            query, detail = rule_rewrite(question, decision.history.candidates, personal_pronoun(question))
        if len(query) > self.settings.max_query_chars:
            query, detail = question, "rewrite would exceed max_query_chars"
        return RewriteResult(query, action, False, f"{why or decision.reason}; {detail}")

    def previous_query(self, history: History) -> str:
        """The previous question as this rewriter made it standalone (its own previous question read the
        same way), so a chain of contrast follow-ups keeps every value the user chose."""
        if not history.rounds:
            return ""
        *earlier, last = history.rounds
        if not last.user.content.strip():
            return ""
        return self.rewrite_now(last.user.content, MemoryView(history.summary, 0, tuple(earlier))).query


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


_PROMPT_ANSWER_CHARS = 400  # of each answer, shown to the rewriting model


def rewrite_messages(prompt: str, question: str, summary: str, rounds: Sequence[Round]) -> ChatMessages:
    parts: list[str] = []
    if summary:
        parts.append(f"Conversation summary:\n{summary}")
    if rounds:
        lines = []
        for r in rounds:
            lines.append(f"User: {r.user.content}")
            if r.assistant.content:
                # The model sees what the answer said, not the service's framing around it.
                lines.append(f"Assistant: {_clip(strip_framing(r.assistant.content), _PROMPT_ANSWER_CHARS)}")
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
