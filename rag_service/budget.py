"""The per-turn token budget.

chunk_budget = total - system - generation_reserve - query - history, never below the minimum (one
chunk). When history does not fit, older rounds go first, then the summary; the newest
`protected_rounds` outrank retrieved context and are dropped only if the context window itself
would overflow.
"""

from __future__ import annotations

from dataclasses import dataclass

from rag_core.settings import BudgetSettings
from rag_service.domain import MemoryView, Round


@dataclass(frozen=True, slots=True)
class BudgetPlan:
    chunk_budget: int
    summary: str
    summary_tokens: int  # of the summary message as sent, overhead included; 0 when not sent
    rounds: tuple[Round, ...]
    history_tokens: int  # of the verbatim rounds as sent, overhead included
    rounds_dropped: int


def round_cost(r: Round, overhead: int) -> int:
    """A round's tokens as sent: its two messages' content plus each message's framing overhead."""
    return r.tokens + 2 * overhead


def plan_budget(
    settings: BudgetSettings,
    *,
    system_tokens: int,
    query_tokens: int,
    view: MemoryView,
    summary_message_tokens: int,
    overhead: int,
) -> BudgetPlan:
    """`system_tokens`, `query_tokens` and `summary_message_tokens` include message overhead."""
    fixed = system_tokens + settings.generation_reserve + query_tokens
    room = settings.total_budget - fixed - settings.min_chunk_budget
    costs = [round_cost(r, overhead) for r in view.rounds]
    protected = min(settings.protected_rounds, len(view.rounds))
    keep_from = 0
    summary_cost = summary_message_tokens if view.summary else 0

    def used() -> int:
        return sum(costs[keep_from:]) + summary_cost

    # Older rounds first, then the summary.
    while used() > room and keep_from < len(costs) - protected:
        keep_from += 1
    if used() > room and summary_cost:
        summary_cost = 0
    # Protected rounds stay unless the context window itself would overflow.
    hard_room = settings.context_window - fixed - settings.min_chunk_budget
    while used() > hard_room and keep_from < len(costs):
        keep_from += 1
    history = sum(costs[keep_from:])
    chunk_budget = max(settings.min_chunk_budget, settings.total_budget - fixed - history - summary_cost)
    return BudgetPlan(
        chunk_budget=chunk_budget,
        summary=view.summary if summary_cost else "",
        summary_tokens=summary_cost,
        rounds=view.rounds[keep_from:],
        history_tokens=history,
        rounds_dropped=keep_from,
    )
