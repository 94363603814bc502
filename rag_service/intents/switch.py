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

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from rag_core.embedding import Embedder, Vector
from rag_service.rewrite_rules import content_size, contrast_followup, entities, find_marker, is_fragment, topic_words

# Chosen on half A of eval/intents/switches.jsonl (docs/intents.md reports half B).
DEFAULT_QUANTILE = 0.75
RECENT_TURNS = 3


@dataclass(frozen=True, slots=True)
class SwitchDecision:
    switch: bool
    reason: str
    similarity: float | None = None


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


class SwitchDetector:
    def __init__(self, embedder: Embedder, threshold: float, recent_turns: int = RECENT_TURNS) -> None:
        self.embedder, self.threshold, self.recent_turns = embedder, threshold, recent_turns

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
            return SwitchDecision(False, f"reference marker {marker.text!r}")
        if contrast_followup(question) is not None:
            return SwitchDecision(False, "contrast follow-up")
        if content_size(question) <= 1 or is_fragment(question):
            return SwitchDecision(False, "too little of its own (ellipsis)")
        words = topic_words(entities(question))
        context = [*recent, *[a for a in previous_answers if a.strip()][-self.recent_turns :]]
        shared = words & set().union(*(topic_words(entities(t)) for t in context))
        if shared:
            return SwitchDecision(False, f"shares {sorted(shared)[0]!r}")
        q = vector if vector is not None else self.embedder.embed_query(question)
        sim = max(_cos(q, self.embedder.embed_query(p)) for p in recent)
        if sim < self.threshold:
            return SwitchDecision(True, f"similarity {sim:.3f} < {self.threshold:.3f}", sim)
        return SwitchDecision(False, f"similarity {sim:.3f} >= {self.threshold:.3f}", sim)
