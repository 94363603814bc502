"""Memory strategies: which stored messages a turn sends to the model, and when to compress.

The store keeps every message; a strategy only chooses. Each strategy also names the first message
index it needs (`load_from`), so a turn loads a bounded tail rather than the whole conversation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

from rag_core.settings import MemorySettings
from rag_service.budget import round_cost
from rag_service.domain import MemoryView, Message, Round, SessionMeta


@dataclass(frozen=True, slots=True)
class CompressionPlan:
    """Fold messages [meta.summarized, upto) into the summary."""

    start: int
    upto: int
    rounds: tuple[Round, ...]


class MemoryStrategy(Protocol):
    name: str

    def load_from(self, meta: SessionMeta) -> int: ...

    def select(self, meta: SessionMeta, messages: Sequence[Message], offset: int) -> MemoryView: ...

    def compression_due(
        self, meta: SessionMeta, messages: Sequence[Message], offset: int, topic_switch: bool
    ) -> CompressionPlan | None: ...


def pair_rounds(messages: Sequence[Message], offset: int = 0) -> list[tuple[int, Round]]:
    """(index of the user message, round) for each user message followed by its answer.

    A question whose answer never arrived (upstream failure, client gone mid-stream) stays stored but is
    not a round: sending a question without its answer would invite the model to answer it again.
    """
    out: list[tuple[int, Round]] = []
    for i in range(len(messages) - 1):
        a, b = messages[i], messages[i + 1]
        if a.role == "user" and b.role == "assistant":
            out.append((offset + i, Round(a, b)))
    return out


class FullHistory:
    name = "full"

    def load_from(self, meta: SessionMeta) -> int:
        return 0

    def select(self, meta: SessionMeta, messages: Sequence[Message], offset: int) -> MemoryView:
        return MemoryView("", 0, tuple(r for _, r in pair_rounds(messages, offset)))

    def compression_due(
        self, meta: SessionMeta, messages: Sequence[Message], offset: int, topic_switch: bool
    ) -> CompressionPlan | None:
        return None


class SlidingWindow(FullHistory):
    name = "window"

    def __init__(self, rounds: int) -> None:
        self.rounds = rounds

    def load_from(self, meta: SessionMeta) -> int:
        # Dangling questions may sit inside the tail (a user retrying through an upstream outage): load
        # room for one per window round, plus one, so the window still holds N whole rounds.
        return max(0, meta.message_count - 3 * self.rounds - 2)

    def select(self, meta: SessionMeta, messages: Sequence[Message], offset: int) -> MemoryView:
        rounds = [r for _, r in pair_rounds(messages, offset)]
        return MemoryView("", 0, tuple(rounds[-self.rounds :] if self.rounds else ()))


class TokenTruncation(FullHistory):
    """Newest whole rounds that fit `budget` tokens (content plus per-message overhead)."""

    name = "truncate"

    def __init__(self, budget: int, overhead: int, min_round_tokens: int) -> None:
        self.budget, self.overhead = budget, overhead
        # No round is smaller than this, so this many rounds bound what can ever fit.
        self.max_rounds = max(1, budget // max(1, min_round_tokens))

    def load_from(self, meta: SessionMeta) -> int:
        return max(0, meta.message_count - 2 * self.max_rounds - 2)

    def select(self, meta: SessionMeta, messages: Sequence[Message], offset: int) -> MemoryView:
        kept: list[Round] = []
        used = 0
        for _, r in reversed(pair_rounds(messages, offset)):
            cost = round_cost(r, self.overhead)
            if used + cost > self.budget:
                break
            kept.append(r)
            used += cost
        return MemoryView("", 0, tuple(reversed(kept)))


class SummaryMemory:
    """Summary of older rounds + the newest `keep_rounds` verbatim (0 for the pure summary strategy).

    Rounds after `meta.summarized` are always sent verbatim until they are compressed: if the summarizer
    fails, nothing is dropped, and the budget stage trims what does not fit.
    """

    def __init__(self, name: str, keep_rounds: int, settings: MemorySettings, overhead: int) -> None:
        self.name, self.keep, self.settings, self.overhead = name, keep_rounds, settings, overhead

    def load_from(self, meta: SessionMeta) -> int:
        return meta.summarized

    def select(self, meta: SessionMeta, messages: Sequence[Message], offset: int) -> MemoryView:
        rounds = tuple(r for i, r in pair_rounds(messages, offset) if i >= meta.summarized)
        return MemoryView(meta.summary, meta.summary_tokens, rounds)

    def compression_due(
        self, meta: SessionMeta, messages: Sequence[Message], offset: int, topic_switch: bool
    ) -> CompressionPlan | None:
        pending = [(i, r) for i, r in pair_rounds(messages, offset) if i >= meta.summarized]
        foldable = pending[: max(0, len(pending) - self.keep)]
        if not foldable:
            return None
        trigger = self.settings.summary_trigger
        if trigger == "tokens":
            verbatim = sum(round_cost(r, self.overhead) for _, r in pending)
            # When the kept window alone nears the threshold, every turn would pay a summarizer call to
            # fold a single round; wait until a few can be folded at once.
            due = (
                verbatim > self.settings.summary_threshold_tokens
                and len(foldable) >= self.settings.summary_min_fold_rounds
            )
        elif trigger == "rounds":
            due = len(foldable) >= self.settings.summary_every_rounds
        else:
            due = topic_switch
        if not due:
            return None
        upto = foldable[-1][0] + 2
        return CompressionPlan(meta.summarized, upto, tuple(r for _, r in foldable))


def make_memory(settings: MemorySettings, history_budget: int, overhead: int) -> MemoryStrategy:
    match settings.strategy:
        case "full":
            return FullHistory()
        case "window":
            return SlidingWindow(settings.window_rounds)
        case "truncate":
            return TokenTruncation(history_budget, overhead, settings.min_round_tokens)
        case "summary":
            return SummaryMemory("summary", 0, settings, overhead)
        case _:
            return SummaryMemory("hybrid", settings.window_rounds, settings, overhead)
