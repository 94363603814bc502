"""`facts.products` on running English text: a lowercase word and a figure with a unit after it is a
measurement, not a product name; a lowercase product line and its model number still are one."""

from __future__ import annotations

from rag_service.facts import products


def _names(text: str) -> list[str]:
    return [p.text for p in products(text)]


def test_a_verb_and_a_measured_figure_name_no_product() -> None:
    assert _names("It weighs 2.4 kg and folds flat.") == []
    assert _names("I'm 176 cm, which frame fits?") == []
    assert _names("it costs 450 yuan") == []


def test_a_named_model_beside_a_measurement_is_still_read() -> None:
    assert _names("The Ferro 7 weighs 2.4 kg.") == ["Ferro 7"]


def test_a_lowercase_line_with_a_model_number_is_a_name() -> None:
    assert _names("how much is the corvo 12") == ["corvo 12"]
    assert _names("corvo 12 256GB in stock?") == ["corvo 12"]
