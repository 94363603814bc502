"""A follow-up's lean toward the pages the questions it continues found (`rag_service.retrieval.lean`), across
languages, and the chain of follow-ups it reads them from (invented tea shop)."""

from __future__ import annotations

from typing import Any

from rag_core.settings import RetrievalSettings
from rag_service.domain import Chunk
from rag_service.retrieval import ACROSS_KEPT_OWN_RANK, ACROSS_KEPT_RANK, PRIOR_CHUNKS, Retriever, Searched, lean


def _chunk(doc: str, score: float, lang: str, text: str = "text") -> Chunk:
    return Chunk(f"{doc}-{score}", doc, f"{doc}.md", doc, text, score, 10, lang=lang)


# The Chinese price lists of every tin outscore the English page of the tin the previous question was about.
PRICE_LISTS = [_chunk(f"prices-{i}", 0.99 - i / 100, "zh") for i in range(6)]


def test_a_continued_page_in_the_other_language_keeps_its_place_on_top() -> None:
    tin = _chunk("cloudleaf-tin", 0.84, "en")
    leaned = lean("大罐的多少钱", [*PRICE_LISTS, tin], {"cloudleaf-tin": 1.0})
    assert [c.doc_id for c in leaned].index("cloudleaf-tin") == ACROSS_KEPT_RANK


def test_a_continued_page_in_the_questions_language_is_only_lifted() -> None:
    tin = _chunk("cloudleaf-tin", 0.84, "zh")
    leaned = lean("大罐的多少钱", [*PRICE_LISTS, tin], {"cloudleaf-tin": 1.0})
    assert [c.doc_id for c in leaned].index("cloudleaf-tin") == len(PRICE_LISTS)


def test_a_follow_up_with_its_own_page_keeps_the_continued_page_below_it() -> None:
    # Its own best chunk has a specific concept of the question's: the question names what it moves on to (its
    # own page first), and the page in the other language it continues may have its own terms on that.
    tin = _chunk("cloudleaf-tin", 0.84, "en")
    leaned = lean("大罐的多少钱", [*PRICE_LISTS, tin], {"cloudleaf-tin": 1.0}, own_page=True)
    assert [c.doc_id for c in leaned].index("cloudleaf-tin") == ACROSS_KEPT_OWN_RANK
    assert leaned[0].doc_id == "prices-0"


def test_a_follow_up_whose_own_page_the_conversation_showed_is_only_lifted() -> None:
    tin = _chunk("cloudleaf-tin", 0.84, "en")
    leaned = lean("大罐的多少钱", [*PRICE_LISTS, tin], {"cloudleaf-tin": 1.0, "prices-0": 0.5}, own_page=True)
    assert [c.doc_id for c in leaned].index("cloudleaf-tin") == len(PRICE_LISTS)
    # Only the page the previous question found first is kept, not the next one it found.
    leaned = lean("大罐的多少钱", [*PRICE_LISTS, tin], {"prices-5": 1.0, "cloudleaf-tin": 0.5})
    assert [c.doc_id for c in leaned].index("cloudleaf-tin") == len(PRICE_LISTS)


async def test_a_follow_up_leans_on_what_the_previous_follow_up_found_in_its_conversation() -> None:
    # The previous follow-up ("And the gift tin?") continued two questions; the next one passes on a history cut
    # at the same depth, so the oldest question is left out. Leaning the remembered candidates again on the
    # shorter history would find the page the previous question found without the oldest one (the price list),
    # not the page it found in the conversation (the gift service).
    retriever = Retriever(None, None, RetrievalSettings())  # type: ignore[arg-type]
    n = retriever.settings.candidates
    gifts, prices = _chunk("gift-service", 0.90, "en"), _chunk("prices", 0.91, "en")
    retriever.found.put(("", "And the gift tin?", n), Searched((prices, gifts), 1.0))
    retriever.found.put(("", "Do you wrap orders?", n), Searched((prices, gifts), 1.0))
    retriever.shown.put(("", "And the gift tin?", n, ("Do you wrap orders?",)), (gifts, prices))
    prior = await retriever.prior(["And the gift tin?", "Do you wrap orders?"], None)
    assert next(iter(prior)) == "gift-service"
    # Without it, the remembered candidates are leaned again.
    retriever.shown.clear()
    prior = await retriever.prior(["And the gift tin?", "Do you wrap orders?"], None)
    assert next(iter(prior)) == "prices"


async def test_a_follow_up_remembers_what_it_found_for_the_next_one() -> None:
    retriever = Retriever(_NoIndex(), None, RetrievalSettings())  # type: ignore[arg-type]
    n = retriever.settings.candidates
    ranked = [_chunk("prices", 0.91, "en"), _chunk("gift-service", 0.90, "en")]
    result = retriever._remember(None, "And the gift tin?", n, ranked, 1.0, {"gift-service": 1.0}, ("a", "b"))
    assert result[0].doc_id == "gift-service"
    for history in (("a", "b"), ("a",)):
        shown = retriever.shown.get(("", "And the gift tin?", n, history))
        assert shown is not None and [c.doc_id for c in shown] == [c.doc_id for c in result[:PRIOR_CHUNKS]]
        assert not any(c.text for c in shown)


class _NoIndex:
    def __getattr__(self, name: str) -> Any:
        raise AssertionError(f"no index call expected: {name}")
