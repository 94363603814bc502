"""Sibling models filed under headings that name them without a digit or a variant word, on an invented
headlamp shop's page: "Kestrel Ridge Dusk" and the bare "Kestrel Ridge" are models beside "Kestrel Ridge Max"."""

from __future__ import annotations

from rag_service.domain import Chunk
from tests.extractive_kit import answer, chunk
from tests.extractive_kit import conversation as _memory

TITLE = "Kestrel Ridge Headlamps - Product Details"


def _section(name: str, lines: list[str], index: int) -> Chunk:
    return chunk("headlamps", TITLE, "\n".join([name, *lines]), section=name, index=index)


PAGE = [
    _section("Kestrel Ridge", ["Warranty: 1 year", "Weight: 48 g"], 0),
    _section("Kestrel Ridge Max", ["Warranty: 3 years", "Weight: 71 g"], 1),
    _section("Kestrel Ridge Dusk", ["Warranty: 20 months", "Weight: 55 g"], 2),
]


def test_a_sibling_named_by_a_plain_word_takes_its_own_line() -> None:
    out = answer("Kestrel Ridge Dusk 保修多久", PAGE)
    assert "20 months" in out
    assert "3 years" not in out and "1 year" not in out


def test_the_model_the_rewriter_carried_picks_its_heading_for_a_follow_up() -> None:
    memory = _memory(("Kestrel Ridge Dusk 头灯有货吗", "[extractive answer, no LLM configured] 根据知识库：\n- 暂无"))
    out = answer("这款多重", PAGE, query="Kestrel Ridge Dusk 这款多重", memory=memory)
    assert "55 g" in out and "71 g" not in out and "48 g" not in out


def test_a_topic_heading_under_the_family_name_is_no_model() -> None:
    care = _section("Kestrel Ridge care", ["Warranty claims need the receipt and 5 working days."], 3)
    out = answer("Kestrel Ridge Max warranty?", [*PAGE, care])
    assert "3 years" in out and "20 months" not in out
