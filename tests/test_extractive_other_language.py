"""Lines in the other language than the question (fifteenth session): they are judged by the evidence they have
across languages (the glossary's concepts, the dictionary bridge's translations, names written in letters), not
left at full weight because no word of the question can be looked for in them. Over an invented coffee-gear shop
with an English grinder page and a Chinese kettle page."""

from __future__ import annotations

from rag_service.domain import Chunk, GenerationInput
from rag_service.extractive import ExtractiveGenerator


def page(doc: str, title: str, lines: list[str], lang: str) -> Chunk:
    return Chunk(f"{doc}-0", doc, f"docs/{doc}", title, "\n".join([title, *lines]), 0.9, 50, lang=lang)


GRINDER = page(
    "grinder",
    "Burr Grinder Warranty",
    ["The motor carries a 5-year warranty.", "Burrs are wear parts and are not covered."],
    "en",
)
KETTLE = page("kettle", "手冲壶 保修说明", ["壶身保修 1 年。", "温控底座保修 2 年。"], "zh")
Translated = tuple[tuple[str, frozenset[str]], ...]


def answer(question: str, chunks: list[Chunk], translated: Translated = ()) -> str:
    return ExtractiveGenerator(3).answer(GenerationInput(question, question, chunks, None, translated))


def first_line(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("- "))


def test_a_same_language_line_that_answers_wins_over_the_other_languages_lines() -> None:
    # "grind every day" is said by no line; the Chinese lines of the asked type used to keep full weight for it.
    out = answer("What warranty period covers the motor when I grind every day?", [KETTLE, GRINDER])
    assert "5-year" in first_line(out), out
    assert "壶身" not in out, out


def test_a_translation_the_other_languages_line_lacks_counts_against_it() -> None:
    # The Chinese page says the base (底座); the English motor line does not say its translation.
    out = answer("底座保修几年", [GRINDER, KETTLE], (("底座", frozenset({"base", "stand"})),))
    assert "2 年" in first_line(out), out
    assert "5-year" not in out, out


def test_the_other_languages_line_that_answers_still_wins() -> None:
    # An English question whose answer is only on the Chinese page, told by the bridge's translations.
    translated = (("temperature", frozenset({"温控", "温度"})), ("base", frozenset({"底座"})))
    out = answer("What warranty period covers the kettle's temperature base?", [GRINDER, KETTLE], translated)
    assert "2 年" in first_line(out), out
    assert "5-year" not in out, out


def test_a_name_in_letters_is_said_by_a_chinese_line() -> None:
    grinders = page("models", "磨豆机 保修", ["G2 型号电机保修 3 年。", "G5 型号电机保修 5 年。"], "zh")
    out = answer("How long is the G5 motor warranty?", [grinders, KETTLE], (("motor", frozenset({"电机"})),))
    assert "5 年" in first_line(out), out
