"""A page with a section per model where the plain model's heading is the line's name without a variant word
("Brisk K2" beside "Brisk K2 Plus"), on an invented folding-scooter shop: a question about the Plus takes the
Plus's line, not the plain model's."""

from __future__ import annotations

from rag_service.extractive import _line_products
from tests.extractive_kit import answer, chunk

TITLE = "Brisk (疾风) K2 Folding Scooters - Product Details"


PAGE = [
    chunk(
        "scooters",
        TITLE,
        "\n".join(
            [
                "The K2 comes in two versions: the plain K2 and the K2 Plus.",
                "Brisk K2",
                "The lighter one, for short rides to the station.",
                "It weighs 9.4 kg, folds to 90 × 40 × 35 cm and carries riders up to 90 kg.",
                "Brisk K2 Plus",
                "It weighs 10.6 kg, folds to 98 × 44 × 38 cm and carries riders up to 120 kg.",
            ]
        ),
    )
]


def test_the_plain_models_line_gives_way_to_the_asked_variants() -> None:
    out = answer("收好以后占多大地方", PAGE, query="Brisk K2 Plus 收好以后占多大地方")
    assert "98 × 44 × 38" in out and "90 × 40 × 35" not in out


def test_the_plain_model_asked_keeps_its_own_line() -> None:
    out = answer("Brisk K2 收好以后占多大地方", PAGE)
    assert "90 × 40 × 35" in out


def test_a_measurement_in_a_pages_prose_names_no_model() -> None:
    # "weighs 9" of "It weighs 9.4 kg", "least 2" of "at least 2 days": a word and a measured figure.
    assert _line_products("It weighs 9.4 kg and folds flat.") == ()
    assert _line_products("Book at least 2 days ahead.") == ()
    assert [p.text for p in _line_products("The Brisk K2 weighs 9.4 kg.")] == ["Brisk K2"]
    assert [p.text for p in _line_products("the corvo 12 is in stock")] == ["corvo 12"]
