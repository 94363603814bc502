"""Filling the prompt's chunk budget (`fill_budget`), on a made-up shop's pages."""

from __future__ import annotations

from rag_service.domain import Chunk
from rag_service.retrieval import PRIOR_DECAY, continued, fill_budget


def chunk(doc: str, index: int, score: float, tokens: int = 100) -> Chunk:
    return Chunk(f"{doc}-{index}", doc, f"docs/{doc}", doc, f"{doc} part {index}", score, tokens, index=index)


def cost(c: Chunk) -> int:
    return c.token_count


def test_the_best_chunks_fill_up_to_max_chunks_without_neighbours() -> None:
    ranked = [chunk("kettle", 0, 0.9), chunk("kettle", 3, 0.8), chunk("rice", 1, 0.7), chunk("kettle", 1, 0.6)]
    assert [c.id for c in fill_budget(ranked, 1000, 2, cost)] == ["kettle-0", "kettle-3"]


def test_a_candidate_next_to_a_picked_chunk_of_its_page_is_taken_beyond_max_chunks() -> None:
    # The heading matched in chunk 3 of the kettle page; its rows went on into chunk 4.
    ranked = [chunk("kettle", 3, 0.9), chunk("rice", 0, 0.85), chunk("rice", 5, 0.8), chunk("kettle", 4, 0.7)]
    picked = fill_budget(ranked, 1000, 2, cost, neighbours=1)
    assert [c.id for c in picked] == ["kettle-3", "rice-0", "kettle-4"]


def test_only_neighbours_are_taken_beyond_max_chunks_and_at_most_as_many_as_allowed() -> None:
    ranked = [
        chunk("kettle", 3, 0.9),
        chunk("rice", 0, 0.85),
        chunk("fan", 2, 0.8),  # not next to anything picked
        chunk("rice", 1, 0.75),
        chunk("kettle", 2, 0.7),
    ]
    assert [c.id for c in fill_budget(ranked, 1000, 2, cost, neighbours=1)] == ["kettle-3", "rice-0", "rice-1"]
    assert [c.id for c in fill_budget(ranked, 1000, 2, cost, neighbours=2)][2:] == ["rice-1", "kettle-2"]


def test_a_chunk_of_another_page_with_the_same_index_is_no_neighbour() -> None:
    ranked = [chunk("kettle", 3, 0.9), chunk("fan", 4, 0.8)]
    assert [c.id for c in fill_budget(ranked, 1000, 1, cost, neighbours=1)] == ["kettle-3"]


def test_a_neighbour_must_fit_the_budget_left() -> None:
    ranked = [chunk("kettle", 3, 0.9, 300), chunk("kettle", 4, 0.8, 300), chunk("kettle", 2, 0.7, 100)]
    picked = fill_budget(ranked, 450, 1, cost, neighbours=1)
    assert [c.id for c in picked] == ["kettle-3", "kettle-2"]


def test_one_page_leaves_a_slot_to_another_page_when_it_has_a_share_limit() -> None:
    # Every chunk of the kettle page outscores the price list; with a share of two the list gets the third slot.
    ranked = [chunk("kettle", i, 0.95 - i / 100) for i in range(4)] + [chunk("prices", 2, 0.8)]
    assert [c.id for c in fill_budget(ranked, 1000, 3, cost)] == ["kettle-0", "kettle-1", "kettle-2"]
    shared = fill_budget(ranked, 1000, 3, cost, per_document=2)
    assert [c.id for c in shared] == ["kettle-0", "kettle-1", "prices-2"]


def test_a_page_past_its_share_still_fills_the_slots_no_other_page_takes() -> None:
    ranked = [chunk("kettle", i, 0.95 - i / 100) for i in range(4)]
    assert [c.id for c in fill_budget(ranked, 1000, 3, cost, per_document=2)] == ["kettle-0", "kettle-1", "kettle-2"]


def test_a_chunk_held_back_by_the_share_can_come_back_as_a_neighbour() -> None:
    ranked = [chunk("kettle", i, 0.95 - i / 100) for i in range(3)] + [chunk("prices", 2, 0.8)]
    picked = fill_budget(ranked, 1000, 3, cost, per_document=2, neighbours=1)
    # Kept in the order of the candidates: the neighbour is read beside its page's other chunks.
    assert [c.id for c in picked] == ["kettle-0", "kettle-1", "kettle-2", "prices-2"]


def test_a_follow_up_takes_in_the_best_chunk_of_the_page_it_continues() -> None:
    # The pool past the candidates: the follow-up's own words rank the kettle page (found first by the previous
    # question, weight 1) below everything; the rice page, found second, is left to the follow-up's own words.
    pool = [("rice-1", 0.71, "zh"), ("kettle-4", 0.70, "zh"), ("kettle-2", 0.69, "zh"), ("fan-0", 0.68, "en")]
    docs = {"rice-1": "rice", "kettle-4": "kettle", "kettle-2": "kettle", "fan-0": "fan"}
    prior = {"kettle": 1.0, "rice": PRIOR_DECAY}
    assert continued(pool, docs, prior, set()) == [("kettle-4", 0.70)]
    # A chunk already among the candidates is not taken twice; the next best of the page is taken instead.
    assert continued(pool, docs, prior, {"kettle-4"}) == [("kettle-2", 0.69)]
    assert continued(pool, docs, {}, set()) == []
