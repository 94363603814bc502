"""Siblings picked by a common word on an invented garden-and-aquarium shop: an English question's variant
word over a Chinese page's rows ("the outdoor one" is the row "… 户外 …"), a membership level named by its
own heading, and a size chosen by a figure the customer states (the span that holds it most tightly)."""

from __future__ import annotations

from rag_service.extractive import _distinct_parts
from rag_service.glossary import variant_terms
from rag_service.table_rows import holding_bound
from tests.extractive_kit import answer, chunk, conversation

LAMPS = chunk(
    "lamps",
    "青禾 植物补光灯 商品详情",
    "\n".join(
        [
            "青禾 植物补光灯 商品详情",
            "| 型号 | 适用 | 功率 | 售价 |",
            "|---|---|---|---|",
            "| 青禾 补光灯 30cm | 窗台盆栽 | 12 W | 88 元 |",
            "| 青禾 户外补光灯 30cm | 阳台和露台，防水 | 18 W | 136 元 |",
            "| 青禾 老年款补光灯 30cm | 按键大、定时简单 | 12 W | 99 元 |",
        ]
    ),
)

CLUB = chunk(
    "club",
    "绿芽俱乐部 会员等级",
    "\n".join(
        [
            "绿芽俱乐部 会员等级",
            "铜芽会员",
            "- 条件：注册即可",
            "- 绿植打 98 折",
            "银芽会员",
            "- 条件：一年实付满 800 元",
            "- 绿植打 95 折",
            "金芽会员",
            "- 条件：一年实付满 3000 元",
            "- 绿植打 9 折",
        ]
    ),
)

TANKS = chunk(
    "tanks",
    "Lumen Fish Tanks",
    "\n".join(
        [
            "Lumen Fish Tanks",
            "Lumen Tank 20",
            "The compact tank, for up to 6 small fish. It costs 158 yuan.",
            "Lumen Tank 45",
            "The middle tank, for up to 14 small fish. It costs 299 yuan.",
            "Lumen Tank 80",
            "The large tank, for up to 30 small fish. It costs 520 yuan.",
        ]
    ),
)


def test_english_variant_words_name_chinese_ones() -> None:
    assert variant_terms("the outdoor one for an elderly user") == frozenset({"户外", "室外", "老年"})
    assert variant_terms("户外款") == frozenset()


def test_distinct_parts_drop_what_siblings_share() -> None:
    parts = _distinct_parts(frozenset(["铜芽会员", "银芽会员", "金芽会员"]))
    assert parts == {"铜芽会员": "铜", "银芽会员": "银", "金芽会员": "金"}
    assert _distinct_parts(frozenset(["户外补光灯", "补光灯"])) == {"户外补光灯": "户外"}


def test_an_english_variant_word_picks_the_chinese_row() -> None:
    text = answer("How much is the outdoor lamp from Qinghe?", [LAMPS])
    assert "136" in text and "88 元" not in text


def test_a_level_named_by_its_heading_gets_that_levels_lines() -> None:
    text = answer("我是银芽会员，买绿植打几折", [CLUB])
    assert "95 折" in text and "98 折" not in text


def test_the_size_whose_span_holds_the_figure_most_tightly() -> None:
    assert holding_bound(frozenset({"10"}), "It is for up to 14 small fish.", frozenset({"fish"})) == (2.0, 14.0, 0.0)
    assert holding_bound(frozenset({"10"}), "It is for up to 6 small fish.", frozenset({"fish"})) is None
    text = answer("I keep 10 small fish. Which Lumen tank size should I buy?", [TANKS])
    assert "Tank 45" in text or "middle" in text
    assert "large tank" not in text


# A web page's list comes out without its markers: short lines under each level's heading.
SEED_CLUB = chunk(
    "seeds",
    "种子会 等级说明",
    "\n".join(
        [
            "种子会 等级说明",
            "青苗会员",
            "条件：注册即可",
            "种子打 98 折",
            "花期会员",
            "条件：一年实付满 2000 元",
            "种子打 9 折",
            "每年 3 次免费换盆",
            "专属顾问，预约优先",
            "生日券 60 元",
        ]
    ),
)

SOIL = chunk(
    "soil",
    "沃土 营养土 商品详情",
    "\n".join(
        [
            "沃土 营养土 商品详情",
            "| 型号 | 适用 | 售价 |",
            "|---|---|---|",
            "| 沃土 通用土 2.5L | 绿萝、吊兰 | 19 元 |",
            "| 沃土 通用土 10L | 绿萝、吊兰 | 59 元 |",
            "| 沃土 多肉土 2.5L | 多肉、仙人掌 | 25 元 |",
            "| 沃土 多肉土 10L | 多肉、仙人掌 | 79 元 |",
        ]
    ),
)


def test_short_lines_after_a_levels_lines_are_its_items() -> None:
    text = answer("花期会员的生日券多少钱", [SEED_CLUB])
    assert "60 元" in text


def test_a_figure_and_its_unit_name_the_row() -> None:
    text = answer("Succulent soil, 10 L size: price?", [SOIL], query="沃土 多肉土 10 L 价格")
    assert "79 元" in text and "25 元" not in text


LEAF_CLUB = chunk(
    "leaf",
    "叶友会 会员",
    "\n".join(
        [
            "叶友会 会员",
            "嫩叶会员",
            "- 绿植 98 折",
            "- 花盆和工具 95 折",
            "绿叶会员",
            "- 绿植 96 折",
            "- 花盆和工具 9 折",
        ]
    ),
)


def test_a_follow_up_moving_on_keeps_the_level_settled_on() -> None:
    before = "[extractive answer, no LLM configured] 根据知识库：\n- 绿叶会员：绿植 96 折（叶友会 会员）"
    text = answer("花盆呢", [LEAF_CLUB], query="花盆 打几折", memory=conversation(("我是绿叶会员，绿植打几折", before)))
    assert "9 折" in text and "95 折" not in text


def test_a_topic_heading_is_no_level() -> None:
    from rag_service.extractive import _model_heading

    assert _model_heading("绿叶会员") and not _model_heading("会员等级")


FERTILISER = chunk(
    "feed",
    "Sprout Plant Food",
    "\n".join(
        [
            "| Category | Item | Size | Price |",
            "|---|---|---|---|",
            "| Plant food | Sprout liquid feed | 250 ml | 18 yuan |",
            "| Plant food | Sprout liquid feed | 1000 ml | 49 yuan |",
            "| Tools | Mister spray | 500 ml | 25 yuan |",
        ]
    ),
)


def test_the_big_pack_is_the_largest_size_of_the_product() -> None:
    text = answer("Sprout liquid feed: price of the large bottle?", [FERTILISER])
    assert "49 yuan" in text and "18 yuan" not in text and "25 yuan" not in text
    text = answer("Sprout liquid feed: price of the small bottle?", [FERTILISER])
    assert "18 yuan" in text and "49 yuan" not in text
