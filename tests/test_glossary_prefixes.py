"""A concept's English word with any ending must not take in another word that begins with it."""

from __future__ import annotations

import pytest

from rag_service.glossary import concepts


@pytest.mark.parametrize(
    ("text", "concept"),
    [
        ("Is the mountain tent in stock?", "install"),
        ("Does the bird feeder come with a hook?", "price"),
        ("How does the wool feel?", "price"),
        ("Is the lantern charging cable included?", "price"),
        ("Is the cardboard box recyclable?", "payment"),
        ("Is the edition special?", "specs"),
        ("Was the police report needed?", "policy"),
    ],
)
def test_a_longer_word_is_not_the_concept_its_start_names(text: str, concept: str) -> None:
    assert concept not in concepts(text)


@pytest.mark.parametrize(
    ("text", "concept"),
    [
        ("Who will install the rack?", "install"),
        ("Is installation included?", "install"),
        ("Can it be mounted on a wall?", "install"),
        ("What is the fee?", "price"),
        ("Are there any charges?", "price"),
        ("Can I pay by card?", "payment"),
        ("Where are the specs?", "specs"),
        ("What is your policy?", "policy"),
    ],
)
def test_the_concepts_own_words_still_name_it(text: str, concept: str) -> None:
    assert concept in concepts(text)
