"""Offline intent recognition: the question's embedding against the configured example utterances.

Each intent, and "no intent" (the knowledge examples), scores as its nearest example (cosine). The best
intent wins if it beats "no intent" and reaches the threshold. The threshold is not a constant: what
counts as near depends on the embedder (multilingual-e5 scores unrelated text ~0.8, MiniLM ~0.1), so it
is calibrated at start from the embedder's own scores on the configured examples, leave-one-out: each
example is classified against the others, and the threshold is the middle of the range that classifies
the most correctly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from rag_core.embedding import Embedder, Vector
from rag_service.intents.config import IntentCatalog

NONE = "__none__"


@dataclass(frozen=True, slots=True)
class IntentScore:
    intent: str | None
    score: float
    # The best score of each class (intent name, or NONE for plain knowledge questions).
    scores: dict[str, float]


def _unit(m: npt.NDArray[np.float32]) -> npt.NDArray[np.float32]:
    norms = np.linalg.norm(m, axis=-1, keepdims=True)
    norms[norms == 0] = 1.0
    out: npt.NDArray[np.float32] = (m / norms).astype(np.float32)
    return out


class IntentRecognizer:
    def __init__(self, catalog: IntentCatalog, embedder: Embedder, threshold: float | None = None) -> None:
        self.catalog, self.embedder = catalog, embedder
        labels: list[str] = []
        texts: list[str] = []
        for intent in catalog.intents:
            for ex in intent.examples:
                labels.append(intent.name)
                texts.append(ex)
        for ex in catalog.knowledge_examples:
            labels.append(NONE)
            texts.append(ex)
        self.labels = labels
        self.classes = [*catalog.names, NONE]
        # Queries against queries: the examples are embedded the way a question is.
        self.matrix: npt.NDArray[np.float32] = (
            _unit(np.stack([embedder.embed_query(t) for t in texts])) if texts else np.zeros((0, 1), dtype=np.float32)
        )
        self._class_index = np.array([self.classes.index(label) for label in labels])
        self.calibrated = calibrate(self.matrix, self._class_index, len(self.classes))
        self.threshold = threshold if threshold is not None else self.calibrated

    def class_scores(self, vector: Vector, exclude: int | None = None) -> npt.NDArray[np.float32]:
        sims = self.matrix @ (vector / (float(np.linalg.norm(vector)) or 1.0))
        if exclude is not None:
            sims = sims.copy()
            sims[exclude] = -np.inf
        out = np.full(len(self.classes), -np.inf, dtype=np.float32)
        np.maximum.at(out, self._class_index, sims)
        return out

    def score(self, question: str) -> IntentScore:
        return self.score_vector(self.embedder.embed_query(question))

    def score_vector(self, vector: Vector) -> IntentScore:
        scores = self.class_scores(vector)
        by_class = {c: float(s) for c, s in zip(self.classes, scores, strict=True)}
        intents = scores[:-1]
        if not len(intents):
            return IntentScore(None, 0.0, by_class)
        best = int(np.argmax(intents))
        top = float(intents[best])
        if top >= self.threshold and top > float(scores[-1]):
            return IntentScore(self.classes[best], top, by_class)
        return IntentScore(None, top, by_class)


def calibrate(matrix: npt.NDArray[np.float32], classes: npt.NDArray[np.int_], n_classes: int) -> float:
    """The threshold that classifies the most examples right, each against all the others.

    An example's own intent wins when its nearest same-intent example beats "no intent" and every other
    intent and reaches the threshold; a knowledge example is right when no intent reaches it (or "no
    intent" is nearer). Ties: the middle of the best range, so neither side sits on its edge.
    """
    n = len(matrix)
    if n < 2 or n_classes < 2:
        return 0.0
    sims = matrix @ matrix.T
    np.fill_diagonal(sims, -np.inf)
    per_class = np.full((n, n_classes), -np.inf, dtype=np.float32)
    for c in range(n_classes):
        mask = classes == c
        if mask.any():
            per_class[:, c] = sims[:, mask].max(axis=1)
    none = n_classes - 1
    best_intent = per_class[:, :none].argmax(axis=1)
    top = per_class[np.arange(n), best_intent]
    beats_none = top > per_class[:, none]
    finite = top[np.isfinite(top)]
    if not len(finite):
        return 0.0
    candidates = np.unique(np.concatenate([finite, [finite.min() - 1e-3, finite.max() + 1e-3]]))
    accuracy = []
    for t in candidates:
        predicted = np.where(beats_none & (top >= t), best_intent, none)
        accuracy.append(float((predicted == classes).mean()))
    scores = np.array(accuracy)
    best = np.flatnonzero(scores == scores.max())
    # The best range runs from candidates[best[0]] to just below the next candidate after best[-1].
    low = float(candidates[best[0]])
    high = float(candidates[min(best[-1] + 1, len(candidates) - 1)])
    return (low + high) / 2 if best[-1] + 1 < len(candidates) else low


def pair_similarities(embedder: Embedder, texts: Sequence[str]) -> npt.NDArray[np.float32]:
    m = _unit(np.stack([embedder.embed_query(t) for t in texts]))
    return m @ m.T
