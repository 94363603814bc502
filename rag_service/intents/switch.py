"""Topic-switch detection that may clear a task's context, so it must be right when it fires.

A later turn is a switch only when all of these hold:
- it has no reference to the conversation: no marker (它/这个/那…呢/it/they/what about …), no contrast
  follow-up ("那 256GB 呢", "And the 512GB one?"), and enough content of its own ("Price?", "How fast?",
  "要多久" are follow-ups, whatever words they use);
- it shares no topic word with the recent turns (the user's and the answers');
- it is far from every recent user turn: its best cosine lies below the calibrated threshold.

The threshold is the embedder's own: at start, the configured example utterances (intents and plain
knowledge questions) are embedded and the similarities between examples of *different* classes form
the embedder's distribution of unrelated customer-service questions; the threshold is a quantile of it
(`quantile`). A question no nearer to the conversation than most unrelated pairs are to each other has
left the topic. The same quantile gives 0.8x for multilingual-e5 and 0.1x-0.2x for MiniLM, with no
constant tuned for one model.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rag_core.embedding import Embedder, Vector
from rag_service.facts import products
from rag_service.intents.slots import order_numbers
from rag_service.rewrite_rules import (
    contrast_followup,
    entities,
    find_marker,
    has_subject,
    normalize,
    topic_words,
)

# Chosen on half A of eval/intents/switches.jsonl (docs/intents.md reports half B).
DEFAULT_QUANTILE = 0.9
DEFAULT_STRICT_QUANTILE = 0.25
RECENT_TURNS = 3


@dataclass(frozen=True, slots=True)
class SwitchDecision:
    switch: bool
    reason: str
    similarity: float | None = None
    # The question refers back (a marker, a contrast, a shared word, too little of its own): nothing
    # else may call it a switch either.
    follows: bool = False


def _cos(a: Vector, b: Vector) -> float:
    denom = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b) / denom if denom else 0.0


def calibrate_threshold(embedder: Embedder, groups: Sequence[Sequence[str]], quantile: float) -> float:
    """The `quantile` of the cosines between texts of different groups (the embedder's unrelated pairs)."""
    vectors: list[Vector] = []
    labels: list[int] = []
    for g, texts in enumerate(groups):
        for t in texts:
            vectors.append(embedder.embed_query(t))
            labels.append(g)
    if len(set(labels)) < 2:
        raise ValueError("calibrating the switch threshold needs examples of at least two groups")
    m = np.stack(vectors)
    m = m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)
    sims = m @ m.T
    lab = np.array(labels)
    cross = sims[lab[:, None] != lab[None, :]]
    return float(np.quantile(cross, quantile))


# Words customers use to announce a new subject ("对了，…", "By the way, …"): a switch unless the rest
# of the question refers back.
_ANNOUNCE = re.compile(
    r"对了|顺便问|顺便说|另外问|另外[，,]|还有个问题|还有一个问题|换个话题|再问一下别的|题外话"
    r"|\bby the way\b|\bbtw\b|\bseparately\b|\bon another note\b|\bdifferent question\b|\bunrelated\b"
    r"|\banother question\b|^also[,:]\s|\balso, (?:can|do|is|are|how|what|where|when)\b",
    re.IGNORECASE,
)


# Place and time references the rewriter's markers leave out ("Can I try it there?", "那边能自提吗").
_BACK = re.compile(
    r"\b(?:there|then|that one|those|these)\b|那里|那边|这边|那儿|这儿|那家|这家|那时|到时", re.IGNORECASE
)


class SwitchDetector:
    """`threshold`: below it a question with a new name of its own has left the topic; `strict`: below it
    any question with a subject of its own has (no name needed)."""

    def __init__(
        self, embedder: Embedder, threshold: float, strict: float | None = None, recent_turns: int = RECENT_TURNS
    ) -> None:
        self.embedder, self.threshold, self.recent_turns = embedder, threshold, recent_turns
        self.strict = threshold if strict is None else strict

    def decide(
        self,
        question: str,
        previous_questions: Sequence[str],
        previous_answers: Sequence[str] = (),
        vector: Vector | None = None,
    ) -> SwitchDecision:
        recent = [q for q in previous_questions if q.strip()][-self.recent_turns :]
        if not recent:
            return SwitchDecision(False, "no earlier turn")
        marker = find_marker(question)
        if marker is not None:
            return SwitchDecision(False, f"reference marker {marker.text!r}", follows=True)
        back = _BACK.search(question)
        if back is not None:
            return SwitchDecision(False, f"refers back with {back.group()!r}", follows=True)
        if contrast_followup(question) is not None:
            return SwitchDecision(False, "contrast follow-up", follows=True)
        if _ANNOUNCE.search(question):
            return SwitchDecision(True, "announces a new subject")
        answers = [a for a in previous_answers if a.strip()][-self.recent_turns :]
        context = [*recent, *answers]
        words = topic_words(entities(question))
        shared = words & set().union(*(topic_words(entities(t)) for t in context))
        if shared:
            return SwitchDecision(False, f"shares {sorted(shared)[0]!r}", follows=True)
        seen = normalize(" ".join(context))
        new_names = [
            p.text
            for p in products(question)
            if not order_numbers(p.text) and not p.text[:1].islower() and normalize(p.text) not in seen
        ]
        q = vector if vector is not None else self.embedder.embed_query(question)
        sim = max(_cos(q, self.embedder.embed_query(p)) for p in recent)
        if new_names and sim < self.threshold:
            return SwitchDecision(True, f"new name {new_names[0]!r}, similarity {sim:.3f} < {self.threshold:.3f}", sim)
        if not has_subject(question):
            return SwitchDecision(False, f"no subject of its own, similarity {sim:.3f}", sim, follows=True)
        if sim < self.strict:
            return SwitchDecision(True, f"similarity {sim:.3f} < {self.strict:.3f}", sim)
        return SwitchDecision(False, f"similarity {sim:.3f}", sim)
