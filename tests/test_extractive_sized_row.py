"""A figure said with its unit ("a 250g bag") names the row whose name holds it, not the rows that list it among
their specs ("fits 250g / 500g bags"), on an invented coffee shop."""

from __future__ import annotations

from tests.extractive_kit import answer, chunk

GRINDERS = chunk(
    "grinders",
    "Millstone Coffee Grinders",
    "\n".join(
        [
            "| Model | Motor | Hopper | Price |",
            "|---|---|---|---|",
            "| Millstone G1 | 150 W | fits 250g / 500g bags | 399 yuan |",
            "| Millstone G2 | 200 W | fits 250g / 500g bags | 599 yuan |",
        ]
    ),
)
BEANS = chunk(
    "beans",
    "Coffee Bean Price List",
    "\n".join(
        [
            "| Category | Item | Roast | Price |",
            "|---|---|---|---|",
            "| Beans | House blend 250g | medium | 68 yuan |",
            "| Beans | House blend 500g | medium | 118 yuan |",
        ]
    ),
    index=0,
)


def test_a_row_named_by_a_figure_with_its_unit_is_the_one_asked() -> None:
    # "250g" is the bag's name, not a spec of it: the grinder rows that list the bag sizes they fit are not it.
    out = answer("What does a 250g bag cost?", [GRINDERS, BEANS])
    assert "68 yuan" in out.splitlines()[1], out
    assert "399 yuan" not in out and "599 yuan" not in out, out


def test_a_figure_without_its_unit_still_picks_by_the_spec_cells() -> None:
    # "the 200 W one": a bare figure is a spec the row holds in a cell, as before.
    out = answer("How much is the 200 W grinder?", [GRINDERS, BEANS])
    assert "599 yuan" in out.splitlines()[1], out
