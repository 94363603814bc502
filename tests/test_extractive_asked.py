"""What the question asks, read from the customer's own words, on an invented piano-stool and smartwatch shop:
a variant the customer names over an edition the rewriter added, "how light", a bare "多少", a type carried
from an earlier question that the follow-up's own words overrule, lines under an accessories heading, and an
introduction cut off from its items."""

from __future__ import annotations

from rag_service.extractive import Question, _model_heading
from rag_service.facts import Ask, question_asks
from rag_service.table_rows import spoken_heights
from tests.extractive_kit import answer, chunk
from tests.extractive_kit import conversation as _memory

STOOLS = chunk(
    "stools",
    "云帆（Yunfan）琴凳 商品详情",
    "\n".join(
        [
            "云帆（Yunfan）琴凳 商品详情",
            "云帆 标准版",
            "- 售价：1200 元 / 张",
            "- 重量：约 6.5 kg",
            "云帆 Pro",
            "- 售价：1900 元 / 张",
            "- 重量：约 4.8 kg",
        ]
    ),
)

STOOL_INTRO = chunk(
    "stool-table",
    "云帆（Yunfan）琴凳 规格对比",
    "\n".join(
        [
            "云帆（Yunfan）琴凳 规格对比",
            "高度怎么选",
            "按身高选框架高度：",
            "云帆 S2 Pro 的框架比 S2 宽 5 cm，适合四手联弹。",
        ]
    ),
)

STOOL_SIZES = chunk(
    "stool-table",
    "云帆（Yunfan）琴凳 规格对比",
    "\n".join(
        ["云帆（Yunfan）琴凳 规格对比", "尺码", "按身高选框架尺码：", "框架尺码分 S、M 两种，S 适合 1.6 米以下。"]
    ),
)

STOOL_TABLE = chunk(
    "stool-table",
    "云帆（Yunfan）琴凳 规格对比",
    "\n".join(
        [
            "规格对比",
            "| 型号 | 框架 | 重量 | 售价 |",
            "| --- | --- | --- | --- |",
            "| 云帆 S2 | 榉木 | 6.5 kg | 1200 元 |",
            "| 云帆 S2 Pro | 胡桃木 | 5.1 kg | 1900 元 |",
        ]
    ),
    index=3,
)


def test_the_variant_the_customer_names_beats_an_edition_the_rewriter_added() -> None:
    out = answer("What about the Pro edition?", [STOOLS], query="How much is the Yunfan Pro standard stool?")
    assert "1900" in out and "1200" not in out


def test_how_light_asks_for_a_measure() -> None:
    assert Ask.SPEC in question_asks("How light is this one?")
    assert Ask.SPEC in question_asks("how thin are the legs?")


def test_a_follow_up_after_how_light_asks_for_the_weight_not_the_price() -> None:
    memory = _memory(("How much is the Yunfan Pro?", "…"), ("How light is this one?", "…"))
    out = answer("and the standard one?", [STOOLS], query="and the Yunfan standard one?", memory=memory)
    assert "6.5 kg" in out and "1200" not in out


def test_a_bare_how_much_asks_for_the_value_asked_before_else_an_amount() -> None:
    memory = _memory(("云帆 S2 什么价", "…"))
    out = answer("Pro 版卖多少", [STOOL_INTRO, STOOL_TABLE], query="云帆 S2 Pro 版卖多少", memory=memory)
    assert "1900" in out.splitlines()[1]
    alone = answer("S2 Pro 要多少", [STOOL_INTRO, STOOL_TABLE])
    assert "1900" in alone.splitlines()[1]


def test_an_introduction_without_its_items_is_no_answer() -> None:
    out = answer("框架尺码有哪些", [STOOL_SIZES, STOOL_TABLE], query="云帆 框架尺码有哪些")
    assert "S、M 两种" in out.splitlines()[1]


WATCHES = chunk(
    "watches",
    "星迹 W3 手表 商品详情",
    "\n".join(
        [
            "星迹 W3 手表 商品详情",
            "售后服务",
            "- 整机保修 2 年。",
            "- 电池属于易耗件，电池保修 1 年。",
            "- 表带更换价格为 129 元。",
            "English summary",
            "Warranty: 2 years for the watch, 1 year for the battery. "
            "Out-of-warranty strap replacement costs ¥129 and screen replacement costs ¥480.",
            "Accessories",
            "A charging dock that clips onto the strap is 59 yuan.",
            "Buying",
            "售价 1299 元。",
        ]
    ),
)


def test_a_type_carried_from_an_earlier_question_gives_way_to_the_follow_ups_own_words() -> None:
    memory = _memory(("How much is the Xingji W3?", "…"), ("How long is the warranty?", "…"))
    out = answer(
        "What about the strap, if it snaps after the warranty?",
        [WATCHES],
        query="What about the strap, if Xingji W3 snaps after the warranty?",
        memory=memory,
    )
    assert "129" in out.splitlines()[1]


def test_a_line_under_an_accessories_heading_is_no_price_of_the_product() -> None:
    out = answer("星迹 W3 多少钱", [WATCHES])
    assert "1299" in out.splitlines()[1]


FRAMES = chunk(
    "frames",
    "明眸镜架 商品详情",
    "\n".join(
        [
            "明眸镜架 商品详情",
            "加工时间",
            "- 定制镜片需要 7 个工作日。",
            "退换说明",
            "- 取镜后 30 天内如有头晕等不适，可以免费重配一次。",
        ]
    ),
)


def test_a_function_character_of_the_question_says_nothing_about_a_sentence() -> None:
    # "等" asks "how long to wait" here and lists ("头晕等不适") there: no shared content.
    out = answer("镜片要等几天", [FRAMES])
    assert "7 个工作日" in out.splitlines()[1]


SHELLS = chunk(
    "shells",
    "Breeze Shell Jackets",
    "\n".join(
        [
            "Breeze Shell Jackets",
            "Breeze Shell 2L",
            "- Waterproof rating: 10,000 mm",
            "- Warranty: 2 years",
            "Breeze Shell 3L Pro",
            "- Waterproof rating: 20,000 mm",
            "- Warranty: 3 years",
        ]
    ),
)


def test_a_model_mark_the_customer_writes_is_their_subject_not_the_last_answers() -> None:
    earlier = "From the knowledge base:\n- Breeze Shell 3L Pro: Waterproof rating: 20,000 mm (Breeze Shell Jackets)"
    memory = _memory(("Breeze Shell 3L Pro 防水指数多少", earlier))
    out = answer("2L 保修多长时间", [SHELLS], query="Breeze Shell 2L 保修多长时间", memory=memory)
    assert "2 years" in out and "3 years" not in out


TENTS = chunk(
    "tents",
    "雁栖帐篷 商品详情",
    "\n".join(
        [
            "雁栖帐篷 商品详情",
            "雁栖 2 Pro",
            "- 适用人数：2 人",
            "- 颜色：岩灰",
            "雁栖 4 家庭版",
            "- 适用人数：4 人",
            "- 颜色：松绿、雾蓝",
        ]
    ),
)


def test_a_sibling_picked_by_what_it_has_is_not_the_product_the_rewriter_carried() -> None:
    memory = _memory(("雁栖 2 Pro 保修多久", "…"))
    out = answer("4 人的那个是什么颜色", [TENTS], query="雁栖 2 Pro 4 人的那个是什么颜色", memory=memory)
    assert "松绿" in out.splitlines()[1] and "岩灰" not in out


EARPHONES = chunk(
    "earphones",
    "听风耳机 商品详情",
    "\n".join(
        [
            "听风耳机 商品详情",
            "听风 Lite",
            "- 音乐续航约 4 小时",
            "听风 Pro",
            "- 音乐续航约 8 小时，支持快充",
        ]
    ),
)


def test_a_sentence_under_a_variants_heading_is_quoted_with_it() -> None:
    out = answer("续航最长的是哪款", [EARPHONES])
    assert "听风 Pro" in out.splitlines()[1] and "8 小时" in out.splitlines()[1]


def test_millilitres_are_a_measure() -> None:
    cleaners = chunk(
        "cleaners",
        "清洗机价格表",
        "\n".join(
            [
                "清洗机价格表",
                "| 商品 | 规格 | 售价 |",
                "| --- | --- | --- |",
                "| 清洗机 K2 | 380 ml 水槽 | 159 元 |",
                "| 清洗机 K2 Pro | 600 ml 水槽 | 239 元 |",
            ]
        ),
    )
    hours = chunk("stores", "门店", "门店\n滨湖店\n- 凭小票免费停车 2 小时。")
    out = answer("How big is that one's tank?", [hours, cleaners], query="K2: How big is that one's tank?")
    assert "380 ml" in out.splitlines()[1]


LENSES_HIGH = chunk(
    "lenses",
    "明澈镜片 商品详情",
    "\n".join(["明澈 1.67 防蓝光", "- 售价：760 元 / 副", "度数怎么选", "近视 300 度以内", "- 建议 1.56。"]),
)
LENSES_CARE = chunk("lenses", "明澈镜片 商品详情", "\n".join(["镜片护理", "- 用清水冲洗后再擦干。"]), index=1)
LENSES_BASIC = chunk("lenses", "明澈镜片 商品详情", "\n".join(["明澈 1.56 标准", "- 售价：380 元 / 副"]), index=2)


def test_a_sibling_sharing_only_the_familys_word_is_not_the_one_named() -> None:
    # The better-retrieved chunk is the other sibling's: the family word alone must not make it a rival.
    out = answer("明澈 1.56 镜片多少钱", [LENSES_HIGH, LENSES_CARE, LENSES_BASIC])
    assert "380" in out and "760" not in out


def test_the_tail_of_a_contraction_names_no_model_nor_size() -> None:
    assert Question.parse("I'm 176 cm. Size?", "Langban: I'm 176 cm. Size?").named == ()
    sizes = chunk(
        "boards",
        "浪板 商品详情",
        "\n".join(
            [
                "浪板 商品详情",
                "尺码怎么选",
                "- M 码（7 尺板）：身高 165–175 cm",
                "- L 码（8 尺板）：身高 175–185 cm",
            ]
        ),
    )
    out = answer("I'm 178 cm. Size?", [sizes], query="Langban: I'm 178 cm. Size?")
    quoted = [line for line in out.splitlines() if line.startswith("- ")]
    assert "L 码" in quoted[0] and "M 码" not in out


def test_how_much_of_a_thing_it_has_is_a_measure_not_a_price() -> None:
    assert question_asks("How much legroom does the Pro have?") == [Ask.SPEC]
    assert Ask.PRICE in question_asks("How much do I have to pay?")
    kayak = chunk(
        "kayaks",
        "浪舟皮划艇 商品详情",
        "\n".join(["浪舟皮划艇 商品详情", "浪舟 K3 Pro", "- 售价：4200 元", "- 舱容：120 L", "- 船长：4.2 m"]),
    )
    out = answer(
        "How much cargo volume does it have?", [kayak], query="How much cargo volume does Langzhou K3 Pro have?"
    )
    assert "4200" not in out


def test_a_heading_naming_the_asked_model_loosely_is_a_siblings_when_the_page_names_the_asked_one() -> None:
    kettles = chunk(
        "kettles",
        "青岚水壶 商品详情",
        "\n".join(
            [
                "青岚水壶 商品详情",
                "青岚 T3",
                "- 售价：1999 元",
                "青岚 T3 Plus",
                "- 售价：2599 元",
                "青岚 T7 Pro",
                "- 售价：3999 元",
            ]
        ),
    )
    out = answer("青岚 T3 Plus 什么价", [kettles])
    assert "2599" in out and "1999" not in out


def test_a_lowercase_variant_word_in_a_heading_is_a_verb_not_a_model() -> None:
    assert not _model_heading("How to fold it")
    assert _model_heading("Breeze Fold")


def test_a_height_said_in_metres_is_read_in_centimetres() -> None:
    assert spoken_heights("我一米七二，选啥码") == "我172 cm，选啥码"
    assert spoken_heights("身高1米8") == "身高180 cm"
    assert spoken_heights("1.72米的人") == "172 cm的人"
    assert spoken_heights("这根绳 1 米长") == "这根绳 1 米长"
    skates = chunk(
        "skates",
        "疾风轮滑鞋 商品详情",
        "\n".join(
            [
                "疾风轮滑鞋 商品详情",
                "尺码怎么选",
                "- S 码：身高 150–165 cm",
                "- M 码：身高 165–180 cm",
                "- L 码：身高 180–195 cm",
            ]
        ),
    )
    out = answer("我一米七二，选啥码", [skates], query="疾风 我一米七二，选啥码")
    assert "M 码" in out.splitlines()[1]


def test_a_yes_or_no_question_with_a_figure_lifts_the_span_holding_it() -> None:
    suits = chunk(
        "suits",
        "潜影潜水服 商品详情",
        "\n".join(
            [
                "潜影潜水服 商品详情",
                "规格说明",
                "- 重量按 M 码、不含配重带称重。",
                "尺码",
                "- 身高在两个尺码之间的，建议到店试穿。",
                "- M 码：身高 165–180 cm",
                "- XL 码：身高 185–198 cm（仅 Pro 款有 XL 码）",
            ]
        ),
    )
    out = answer("我 192，有我能穿的码不", [suits], query="潜影 Pro 我 192，有我能穿的码不")
    assert "XL 码" in out.splitlines()[1]
