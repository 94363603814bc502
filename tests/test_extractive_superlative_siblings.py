"""A superlative asked across a page's sibling models ("which of the three ... longest"), on an invented kayak
shop's page with one section per model: each sibling's own line competes, whichever model the rewriter carried."""

from __future__ import annotations

from rag_service.domain import Chunk
from rag_service.facts import Ask, question_asks
from tests.extractive_kit import answer, chunk

TITLE = "鸥行（Ouxing）K2 系列皮划艇 商品详情"


def _section(name: str, lines: list[str], index: int) -> Chunk:
    return chunk("kayaks", TITLE, "\n".join([name, *lines]), section=name, index=index)


PAGE = [
    _section("鸥行 K2", ["- 艇身保修 2 年", "- 艇身重量：17 kg"], 0),
    _section("鸥行 K2 Lite", ["- 艇身保修 1 年", "- 艇身重量：14 kg"], 1),
    _section("鸥行 K2 Pro", ["- 艇身保修 4 年", "- 艇身重量：19 kg"], 2),
]


def test_a_compared_warranty_asks_for_a_length() -> None:
    assert Ask.DURATION in question_asks("Which model has the longest warranty?")
    assert Ask.DURATION in question_asks("which one comes with the shortest guarantee?")


def test_the_longest_is_read_among_all_siblings_not_the_carried_one() -> None:
    out = answer(
        "Out of these, which carries the longest warranty?",
        PAGE,
        query="Ouxing K2: which one carries the longest warranty?",
    )
    assert "K2 Pro" in out and "4 年" in out
    assert "2 年" not in out


def test_the_shortest_too() -> None:
    out = answer("And the shortest warranty?", PAGE, query="Ouxing K2 Pro: which has the shortest warranty?")
    assert "K2 Lite" in out and "1 年" in out
    assert "4 年" not in out


def test_a_model_the_customer_names_keeps_its_own_line() -> None:
    out = answer("鸥行 K2 Pro 保修多久", PAGE)
    assert "4 年" in out and "1 年" not in out
