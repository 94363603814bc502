"""Which contact line answers "what's the number", on an invented piano shop: the general line, not one
labelled for another purpose."""

from __future__ import annotations

from tests.extractive_kit import answer, chunk

# Retrieval ranks the chunk that holds only the repair line first (a chunk boundary fell after the general line).
CONTACTS = [
    chunk(
        "contacts",
        "琴韵乐器 门店与热线",
        "\n".join(["- 售后维修热线：400-661-2093，每天 9:00–18:00。", "- 官网在线客服每天 9:00–21:00 在线。"]),
        section="热线",
        index=1,
    ),
    chunk(
        "contacts",
        "琴韵乐器 门店与热线",
        "\n".join(
            [
                "西湖店",
                "- 门店电话：0571-8800 1234",
                "热线",
                "- 全国客服热线：400-661-2090，每天 9:00–21:00。",
                "- 售后维修热线：400-661-2093，每天 9:00–18:00。",
            ]
        ),
        section="西湖店",
        index=0,
    ),
]


def test_a_line_labelled_for_another_purpose_gives_way_to_the_general_line() -> None:
    out = answer("Customer service number, please?", CONTACTS)
    assert "400-661-2090" in out and "2093" not in out and "2097" not in out
