"""Across languages the extractive answerer has no shared word to tell sentences apart, only the glossary's
concepts: the question's own words that the dictionary bridge translated into the collection's other language
(`GenerationInput.translated`) are those words there. Over an invented kite shop."""

from __future__ import annotations

from rag_service.domain import Chunk, GenerationInput
from rag_service.extractive import ExtractiveGenerator


def page(doc: str, title: str, text: str, lang: str) -> Chunk:
    return Chunk(f"{doc}-0", doc, f"docs/{doc}", title, text, 0.9, 50, lang=lang)


PARTS = page(
    "parts",
    "风筝配件价格表",
    "\n".join(["风筝配件价格表", "备用线轮 50 米售价 35 元。", "碳纤维骨架售价 60 元。", "补丁三片装售价 25 元。"]),
    "zh",
)
GUIDE = page(
    "guide", "Flying Guide", "Launch the kite with the wind at your back. A beginner lesson costs 80 yuan.", "en"
)
PATCH = (("patch", frozenset({"补丁"})),)


def first_line(question: str, chunks: list[Chunk], translated: tuple[tuple[str, frozenset[str]], ...]) -> str:
    """The first sentence the answer quotes."""
    text = ExtractiveGenerator(3).answer(GenerationInput(question, question, chunks, None, translated))
    return next(line for line in text.splitlines() if line.startswith("- "))


def test_the_other_languages_line_with_the_translated_word_answers() -> None:
    assert "25 元" in first_line("How much is a patch?", [GUIDE, PARTS], PATCH)


def test_without_the_translation_no_line_says_the_word() -> None:
    # The rule's evidence: without it nothing tells the patch line from the other prices.
    assert "25 元" not in first_line("How much is a patch?", [GUIDE, PARTS], ())


def test_a_word_the_questions_own_language_says_is_not_bridged() -> None:
    # The Chinese page names the patch itself: its line is the evidence, and the English line that translates
    # the word gets no lift to stand beside it.
    repairs = page("repairs", "Repairs", "A sail patch kit costs 40 yuan and takes five minutes to apply.", "en")
    assert "25 元" in first_line("补丁多少钱", [repairs, PARTS], (("补丁", frozenset({"patch"})),))
