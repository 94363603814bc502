"""What a follow-up is about when it does not say, on an invented kids' scooter shop: the sibling the previous
answer settled on (a row of the page's table it quoted)."""

from __future__ import annotations

from rag_service.domain import Chunk
from rag_service.extractive import sentences_of
from rag_service.facts import products
from rag_service.recall import recall_answer
from tests.extractive_kit import answer, chunk
from tests.extractive_kit import conversation as _memory

SCOOTERS = chunk(
    "scooters",
    "跳跳（Tiaotiao）儿童滑板车 商品详情",
    "\n".join(
        [
            "跳跳（Tiaotiao）儿童滑板车 商品详情",
            "选车先看身高：孩子握住把手时手肘微弯就是合适的高度。",
            "型号与价格",
            "| 型号 | 适合身高 | 刹车 | 车重 | 售价 |",
            "| --- | --- | --- | --- | --- |",
            "| 跳跳 三轮款 | 85–105 cm | 后踩刹 | 2.1 kg | 239 元 |",
            "| 跳跳 6 寸 | 100–125 cm | 后踩刹 | 2.9 kg | 329 元 |",
            "| 跳跳 8 寸 | 120–150 cm | 手刹 + 后踩刹 | 3.6 kg | 459 元 |",
        ]
    ),
)

EARLIER = (
    "- 选车先看身高：孩子握住把手时手肘微弯就是合适的高度。（跳跳（Tiaotiao）儿童滑板车 商品详情）\n"
    "- 型号 跳跳 8 寸，适合身高 120–150 cm，刹车 手刹 + 后踩刹，车重 3.6 kg，售价 459 元。（跳跳（Tiaotiao）儿童滑板车 商品详情）"
)


def test_a_follow_up_naming_no_model_is_about_the_row_the_last_answer_quoted() -> None:
    memory = _memory(("孩子一米三五，选哪款", f"[extractive answer, no LLM configured] 根据知识库：\n{EARLIER}"))
    out = answer("那这个卖多少", [SCOOTERS], query="跳跳 那这个卖多少", memory=memory)
    assert "459" in out and "239" not in out and "329" not in out


def test_the_settled_row_gives_way_to_a_sibling_the_customer_names() -> None:
    memory = _memory(("孩子一米三五，选哪款", f"[extractive answer, no LLM configured] 根据知识库：\n{EARLIER}"))
    out = answer("6 寸的呢，多少钱", [SCOOTERS], query="跳跳 6 寸 多少钱", memory=memory)
    assert "329" in out and "459" not in out


def test_without_an_earlier_answer_the_whole_price_list_answers() -> None:
    out = answer("跳跳滑板车多少钱", [SCOOTERS])
    assert all(price in out for price in ("239", "329", "459"))


def _kayak(name: str, seats: str, colours: str, index: int) -> Chunk:
    return chunk(
        "kayaks",
        "飞鱼充气皮划艇 商品详情",
        "\n".join([name, f"- 乘坐人数：{seats}", f"- 颜色：{colours}"]),
        section=name,
        index=index,
    )


# Retrieval ranks the rewriter's carried model first and the picked sibling last.
KAYAKS = [
    _kayak("飞鱼 2 Pro", "2 人", "珊瑚橙", 0),
    _kayak("飞鱼 2 标准版", "2 人", "湖蓝、珊瑚橙", 1),
    _kayak("飞鱼 3 家庭版", "3 人，带一个儿童座", "湖蓝、松绿", 2),
]


def test_a_sibling_picked_by_what_it_has_drops_the_model_the_rewriter_carried() -> None:
    out = answer("能坐 3 人那款有哪些颜色", KAYAKS, query="飞鱼 2 Pro 能坐 3 人那款有哪些颜色")
    assert "松绿" in out and "珊瑚橙" not in out


SERVICES = chunk(
    "tuning",
    "琴韵钢琴服务价目",
    "\n".join(
        [
            "服务与收费",
            "| 服务项目 | 内容 | 时长 | 收费 |",
            "| --- | --- | --- | --- |",
            "| 常规调律 | 全音域调律，出具调律单 | 约 2 小时 | 买琴客户免费，单独上门调律 280 元 |",
            "| 精细调律 | 买琴满 10 年的老琴上门调律并整音 | 约 4 小时 | 460 元 |",
            "| 除湿保养 | 放置除湿棒，检查击弦机 | 约 1 小时 | 150 元 |",
        ]
    ),
)


def test_a_row_that_says_less_of_what_is_asked_is_another_item_of_the_list() -> None:
    out = answer("没在这买琴，单独上门调律多少钱", [SERVICES])
    assert "280" in out and "460" not in out and "150" not in out


FANS = chunk(
    "fans",
    "ZephAir Tower Fans",
    "\n".join(
        [
            "ZephAir Tower Fans",
            "Warranty",
            "Every ZephAir fan has a 2-year warranty on the whole unit and a 5-year warranty on the motor.",
        ]
    ),
)
DISHWASHERS = chunk(
    "dishwashers",
    "Lumo Dishwashers",
    "\n".join(["Lumo Dishwashers", "Warranty", "The Lumo D3 has a 10-year warranty on its motor."]),
)


def test_a_determiner_opening_a_sentence_is_no_part_of_a_name() -> None:
    assert [p.text for p in products("Every ZephAir fan has a motor warranty.")] == ["ZephAir"]
    out = answer("What warranty comes with the motor?", [DISHWASHERS, FANS], query="ZephAir 300 Max motor warranty")
    assert "5-year" in out.splitlines()[1]


SKI_FAQ = chunk(
    "ski-faq",
    "FAQ for Visitors",
    "\n".join(
        [
            "FAQ for Visitors",
            "**Q: Can I rent skis instead of buying?**",
            "A: Yes, at the Hangzhou store only. A full ski set costs 180 yuan per day, with a 1,000 yuan deposit. "
            "Bring your passport.",
            "**Q: Do you wax skis?**",
            "A: Yes, a hot wax is 60 yuan and takes one hour.",
            "**Q: Can I rent a snowboard?**",
            "A: No, snowboards are for sale only.",
        ]
    ),
)


def test_a_faq_answer_is_quoted_as_a_unit() -> None:
    out = answer("My brother visits Hangzhou next month, can he rent skis from you?", [SKI_FAQ])
    assert "Hangzhou store" in out and "180 yuan" in out and "hot wax" not in out


# A chunk that opens inside the overlap of the section before its own heading: the first line is the Lite's.
SCALES = chunk(
    "scales",
    "Libra Kitchen Scales",
    "\n".join(
        [
            "Maximum load 3 kg. Price: 99 yuan.",
            "Libra K2",
            "A glass top with a tare button and a 5 kg range. Price: 159 yuan.",
            "Libra K2 Pro",
            "A steel top, a 10 kg range and a pour-over timer. Price: 239 yuan.",
        ]
    ),
    section="Libra K2",
    index=1,
)


def test_text_before_the_heading_a_chunk_is_filed_under_is_no_fact_of_that_heading() -> None:
    out = answer("Libra K2 多少钱", [SCALES])
    assert "159" in out and "99 yuan" not in out


SCALES_LITE = chunk(
    "scales",
    "Libra Kitchen Scales",
    "\n".join(["Libra K2 Lite", "A plastic top and a 3 kg range.", "Maximum load 3 kg. Price: 99 yuan.", "Libra K2"]),
    section="Libra K2 Lite",
    index=0,
)


def test_a_sentence_of_an_overlap_keeps_the_rank_of_the_better_chunk_that_holds_it() -> None:
    read = {(c.section, c.text): c.rank for c in sentences_of([SCALES, SCALES_LITE])}
    assert read[("Libra K2 Lite", "Price: 99 yuan.")] == 0
    assert ("Libra K2", "Price: 99 yuan.") not in read


def test_recall_does_not_take_a_line_that_shares_only_the_word_naming_the_kind_of_value() -> None:
    memory = _memory(
        (
            "How much is the Aero 5 Pro?",
            "…\n- 版本 Aero 5 Pro，电池 48V，续航 约 90 km，售价 5299 元。（Aero 电动滑板车 商品详情）",
        ),
        (
            "Can my friend rent a scooter?",
            "…\n- A: Yes, at the city store only. (FAQ)\n- A city scooter rental will cost 45 yuan per day, with a 300 yuan deposit. (FAQ)",
        ),
    )
    out = recall_answer("Sorry, what does the Pro cost again?", memory, "en")
    assert out is not None and "5299" in out and "45 yuan" not in out.split("(Said earlier")[0]


def _lamp(name: str, lines: list[str], index: int) -> Chunk:
    return chunk("lamps", "Lumen Desk Lamps", "\n".join([name, *lines]), section=name, index=index)


# Retrieval ranks the family's standard model first; the answer before settled on the Mini.
LAMPS = [
    _lamp("Lumen L2", ["Weight: 1.4 kg.", "Brightness: 3 levels."], 0),
    _lamp("Lumen L2 Mini", ["Weight: 0.6 kg.", "Brightness: 1 level."], 1),
    _lamp("Lumen L2 Pro", ["Weight: 2.2 kg.", "Brightness: 5 levels."], 2),
]
MINI_ANSWER = "[extractive answer, no LLM configured] From the knowledge base:\n- Lumen L2 Mini: Price: 199 yuan. (Lumen Desk Lamps)"


def test_an_elliptic_follow_up_is_about_the_sibling_the_last_answer_settled_on() -> None:
    memory = _memory(("Which is the cheapest Lumen lamp?", MINI_ANSWER))
    out = answer("Weight?", LAMPS, memory=memory)
    assert "0.6 kg" in out and "1.4 kg" not in out and "2.2 kg" not in out


def test_a_longer_question_naming_no_model_is_not_read_as_elliptic() -> None:
    memory = _memory(("Which is the cheapest Lumen lamp?", MINI_ANSWER))
    out = answer("What do the desk lamps you sell weigh?", LAMPS, memory=memory)
    assert "1.4 kg" in out


KICK_SCOOTERS = [
    chunk(
        "scooters",
        "逐风滑板车 商品详情",
        "逐风 S1\n- 售价：1299 元\n- S1 的刹车为鼓刹，免维护。",
        section="逐风 S1",
        index=0,
    ),
    chunk(
        "scooters",
        "逐风滑板车 商品详情",
        "逐风 S3 Pro\n- 售价：2399 元\n- 收起后尺寸：90 × 40 × 38 cm\n- S3 Pro 的液压碟刹保修 2 年，每骑行 500 公里需要做一次保养。",
        section="逐风 S3 Pro",
        index=1,
    ),
    chunk(
        "scooters",
        "逐风滑板车 商品详情",
        "折叠方法\n- 先松开车头的快拆扣。\n- 再把立管向后折到后轮挡泥板的挂钩上。",
        section="折叠方法",
        index=2,
    ),
]


def test_a_bare_question_is_about_the_model_the_last_answer_settled_on_not_the_rewriters() -> None:
    # The rewriter still carries the conversation's first model; the last answer settled on the other one.
    memory = _memory(
        ("逐风 S1 多少钱", "- 逐风 S1：售价：1299 元（逐风滑板车 商品详情）"),
        ("碟刹那款刹车保几年", "- S3 Pro 的液压碟刹保修 2 年，每骑行 500 公里需要做一次保养。（逐风滑板车 商品详情）"),
    )
    out = answer("得常保养吗", KICK_SCOOTERS, query="逐风 S1 得常保养吗", memory=memory)
    assert "500 公里" in out.splitlines()[1], out


def test_a_bare_how_to_question_keeps_the_family_procedure() -> None:
    memory = _memory(("S3 Pro 多少钱", "- 逐风 S3 Pro：售价：2399 元（逐风滑板车 商品详情）"))
    out = answer("具体怎么折", KICK_SCOOTERS, query="逐风 具体怎么折", memory=memory)
    assert "挂钩" in out or "快拆扣" in out, out
    assert "90 × 40" not in out, out


TENTS = [
    chunk(
        "tents",
        "Brook Tents",
        "Brook 2\nIt weighs 1.9 kg and packs to 45 × 15 cm.\nPrice: 899 yuan.",
        section="Brook 2",
        index=0,
    ),
    chunk(
        "tents",
        "Brook Tents",
        "Accessories\nA footprint that fits under it is 59 yuan. A repair kit is 29 yuan.",
        section="Accessories",
        index=1,
    ),
]


def test_a_verb_and_a_figure_of_the_last_answer_are_no_model() -> None:
    # "weighs 1" of "It weighs 1.9 kg" is read as a name by the product reader; the answer was about no such model.
    memory = _memory(("How heavy is the Brook 2?", "- It weighs 1.9 kg and packs to 45 × 15 cm. (Brook Tents)"))
    out = answer("Is there a footprint for it?", TENTS, query="Is there a footprint for Brook 2?", memory=memory)
    assert "59 yuan" in out.splitlines()[1], out
