"""Everyday words a question uses where a shop's page writes its own (`glossary.CONCEPTS`): an opened
package, brakes, tinted lenses, balance bikes, small travel sizes (invented shops and wording)."""

from __future__ import annotations

import pytest

from rag_service.glossary import concepts


@pytest.mark.parametrize(
    ("question", "line", "concept"),
    [
        # Invented tea shop: the English question says its seal is broken, the rule 拆封.
        ("Can a kettle be sent back with its seal broken?", "茶壶已拆封的不退。", "activation"),
        ("Can I still send the kettle back if I unsealed it?", "茶壶拆封后不影响退换。", "activation"),
        ("How do I adjust the brakes?", "刹车松了可到店免费调整。", "brake"),
        ("有没有带颜色的镜片", "Tinted lenses cost 80 yuan extra.", "tinted"),
        ("Do you sell balance bikes?", "滑步车适合两岁以上。", "balance_bike"),
        ("这款面霜有便携装吗", "Each cream comes in a 15 ml travel size.", "sample"),
    ],
)
def test_a_question_and_the_line_that_words_it_otherwise_share_a_concept(
    question: str, line: str, concept: str
) -> None:
    assert concept in concepts(question) and concept in concepts(line)


@pytest.mark.parametrize(
    ("text", "concept"),
    [
        ("滤网可拆开清洗。", "activation"),
        ("The shop opens at nine.", "activation"),
        ("拆卸螺丝需要工具。", "activation"),
        ("颜色有黑白两种。", "tinted"),
    ],
)
def test_unrelated_text_gets_none_of_the_new_concepts(text: str, concept: str) -> None:
    assert concept not in concepts(text)
