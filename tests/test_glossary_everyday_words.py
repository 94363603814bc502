"""Everyday words a customer uses that a shop's page words otherwise, and words that look like a concept's but are
not (`glossary.CONCEPTS`; invented shops and wording)."""

from __future__ import annotations

import pytest

from rag_service.glossary import concepts


@pytest.mark.parametrize(
    ("question", "line", "concept"),
    [
        # Invented pet salon: a customer asks for a bath, the price list says 洗护.
        ("Can you bathe a rabbit?", "兔子洗护每次 70 元。", "grooming"),
        ("给仓鼠洗澡要多少钱", "Small pet grooming: 60 yuan.", "grooming"),
        # Invented aquarium shop: a yearly plan for fish named as British English does.
        ("鱼有保险吗", "The Fin Health Cover pays vet bills up to 2,000 yuan a year.", "insurance"),
        # Money that comes back is a refund, however many words stand between.
        ("When is the money back in my account?", "退款 3 个工作日内原路退回。", "refund"),
        ("When will I get my money back?", "退款 3 个工作日内原路退回。", "refund"),
    ],
)
def test_a_question_and_the_line_that_words_it_otherwise_share_a_concept(
    question: str, line: str, concept: str
) -> None:
    assert concept in concepts(question) and concept in concepts(line)


def test_a_credit_card_is_no_instalment_plan() -> None:
    # A refund to a credit card asks nothing about instalments; paying on credit does.
    assert "installment" not in concepts("When does the refunded sum reach a credit card?")
    assert "installment" not in concepts("Do you take credit cards?")
    assert "bank_card" in concepts("Do you take credit cards?")
    assert "installment" in concepts("Can I buy the aquarium on credit?")
