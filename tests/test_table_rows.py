"""Table rows and per-variant clauses, on an invented bicycle-lamp shop (not any evaluation set's shop)."""

from __future__ import annotations

from rag_service.domain import Chunk, GenerationInput
from rag_service.extractive import MARKER, ExtractiveGenerator
from rag_service.table_rows import Row, asked_numbers, rows_of, split_cells, variant_clauses

LAMP_MD = "\n".join(
    [
        "LumaBeam 车灯 商品详情",
        "型号与价格",
        "| 型号 | 亮度 | 续航 | 售价 |",
        "|---|---|---|---|",
        "| LumaBeam 基础款 | 400 lm | 3 小时 | 159 元 |",
        "| LumaBeam Pro | 800 lm | 5 小时 | 239 元 |",
        "| LumaBeam Max | 1500 lm | 7 小时 | 369 元 |",
        "规格",
        "重量：基础款 90 g，Pro 120 g，Max 180 g。",
        "基础款和 Pro 保修 1 年；Max 保修 3 年。",
    ]
)
# A chunk that starts below the header (chunks overlap): its first row is a data row.
LAMP_TAIL = "\n".join(["| LumaBeam Pro | 800 lm | 5 小时 | 239 元 |", "| LumaBeam Max | 1500 lm | 7 小时 | 369 元 |"])

PUMP_HTML = "\n".join(
    [
        "Flowa Pumps",
        "Models",
        "Model | Flow | Tank | Price",
        "Flowa 20 | 20 l/min | 3 l | 880 yuan",
        "Flowa 30 | 30 l/min | 6 l | 1240 yuan",
    ]
)
KETTLE_DOCX = "\n".join(
    [
        "茶壶价目表",
        "品类 | 型号 | 容量 | 售价",
        "品类: 茶壶 | 型号: Tella T1 | 容量: 0.8 L | 售价: 99 元",
        "品类: 茶壶 | 型号: Tella T2 | 容量: 1.2 L | 售价: 149 元",
    ]
)


def chunk(doc: str, title: str, text: str, index: int = 0, score: float = 0.9) -> Chunk:
    return Chunk(f"{doc}-{index}", doc, f"docs/{doc}", title, text, score, index, lang="zh")


async def answer(question: str, chunks: list[Chunk], query: str = "") -> str:
    turn = GenerationInput(question, query or question, chunks, None)
    text = await ExtractiveGenerator(3).complete([], turn)
    assert text.startswith(MARKER)
    return text


def test_rows_are_read_with_their_header_in_all_three_layouts() -> None:
    md = rows_of(LAMP_MD.splitlines())
    assert [r.name for r in md] == ["LumaBeam 基础款", "LumaBeam Pro", "LumaBeam Max"]
    assert md[1].render() == "型号 LumaBeam Pro，亮度 800 lm，续航 5 小时，售价 239 元。"
    html = rows_of(PUMP_HTML.splitlines())
    assert [r.cells[-1] for r in html] == ["880 yuan", "1240 yuan"] and html[0].header[0] == "Model"
    docx = rows_of(KETTLE_DOCX.splitlines())
    assert docx[1].name == "Tella T2" and docx[1].header == ("品类", "型号", "容量", "售价")
    assert split_cells("普通的一句话，没有表格。") is None


def test_a_data_row_at_the_top_of_a_chunk_is_no_header() -> None:
    rows = rows_of(LAMP_TAIL.splitlines())
    assert len(rows) == 2 and rows[0].name == "LumaBeam Pro"
    assert "LumaBeam Pro LumaBeam Max" not in rows[1].render()


def test_a_row_fits_the_figure_the_question_names() -> None:
    rows = rows_of(PUMP_HTML.splitlines())
    numbers = asked_numbers("How much is the one with a 6 litre tank?", [])
    assert [r.number_fit(numbers) for r in rows] == [0.7, 1.5]
    assert rows[0].number_fit(frozenset()) == 1.0
    assert asked_numbers("Flowa 30 price", ["Flowa 30"]) == frozenset()
    assert isinstance(rows[0], Row)


def test_variant_clauses() -> None:
    assert variant_clauses("重量：基础款 90 g，Pro 120 g，Max 180 g。", frozenset({"max"})) == "重量：Max 180 g。"
    assert variant_clauses("基础款和 Pro 保修 1 年；Max 保修 3 年。", frozenset({"pro"})) == "基础款和 Pro 保修 1 年。"
    assert variant_clauses("基础款和 Pro 保修 1 年；Max 保修 3 年。", frozenset({"base"})) == "基础款和 Pro 保修 1 年。"
    assert variant_clauses("Pro 保修 1 年。", frozenset({"pro"})) is None  # one variant: nothing to choose
    assert variant_clauses("重量：基础款 90 g，Pro 120 g。", frozenset()) is None


async def test_the_price_of_the_variant_asked_is_read_from_its_row() -> None:
    chunks = [chunk("lamp", "LumaBeam 车灯 商品详情", LAMP_MD), chunk("lamp", "LumaBeam 车灯 商品详情", LAMP_TAIL, 1)]
    text = await answer("LumaBeam Max 多少钱", chunks)
    assert "369" in text and "239" not in text and "159" not in text
    text = await answer("LumaBeam Pro 多少钱", chunks)
    assert "239" in text and "369" not in text and "159" not in text


async def test_a_per_variant_sentence_is_cut_to_the_variant_asked() -> None:
    text = await answer("LumaBeam Max 有多重", [chunk("lamp", "LumaBeam 车灯 商品详情", LAMP_MD)])
    assert "180 g" in text and "90 g" not in text and "120 g" not in text


async def test_key_figures_are_those_of_the_row_quoted() -> None:
    text = await answer("How much is the Flowa 30 pump?", [chunk("pump", "Flowa Pumps", PUMP_HTML)])
    assert "1240" in text and "880" not in text
    text = await answer("How much is the Tella T2 kettle?", [chunk("kettle", "茶壶价目表", KETTLE_DOCX)])
    assert "149" in text and "99 元" not in text


async def test_a_variant_clause_on_a_family_page_answers_for_that_variant() -> None:
    lamp = [chunk("lamp", "LumaBeam 车灯 商品详情", LAMP_MD + "\n灯头均保修 5 年。")]
    text = await answer("LumaBeam Max 保修几年", lamp)
    assert "3 年" in text and "1 年" not in text
    text = await answer("LumaBeam Pro 灯头保修多久", lamp)
    assert "5 年" in text  # said of the whole family, so of the Pro too
