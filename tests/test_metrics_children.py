"""`Metrics.child` remembers labelled children; what a turn records is what `labels()` would record."""

from __future__ import annotations

from rag_service.metrics import Metrics


def test_child_is_the_labelled_child() -> None:
    m = Metrics()
    assert m.child(m.turns, "llm", "false") is m.turns.labels("llm", "false")
    assert m.child(m.turns, "llm", "false") is m.child(m.turns, "llm", "false")
    assert m.child(m.turns, "llm", "true") is not m.child(m.turns, "llm", "false")


def test_turns_counted_per_label() -> None:
    m = Metrics()
    for streamed in (False, False, True):
        m.observe_turn("llm", streamed, {"retrieve": 0.02}, {"rewrite": "kept", "query_tokens": 7}, 0.0)
    value = m.registry.get_sample_value
    assert value("rag_turns_total", {"mode": "llm", "streamed": "false"}) == 2
    assert value("rag_turns_total", {"mode": "llm", "streamed": "true"}) == 1
    assert value("rag_rewrite_total", {"action": "kept"}) == 3
    assert value("rag_stage_seconds_count", {"stage": "retrieve"}) == 3
    assert value("rag_prompt_tokens_sum", {"part": "query_tokens"}) == 21
