"""What the extractive answer read wrong on shops it was not tuned on (a cell saying "none", an order number, the
default line for other brands, a part, a model name the product reader misses, site navigation, letter sizes, a
time to do something), on an invented shop of dehumidifiers, lenses, watches, scooters, packs, mattresses,
fleeces and wardrobes."""

from __future__ import annotations

from rag_service.domain import Chunk
from tests.extractive_kit import answer, chunk
from tests.extractive_kit import conversation as _memory

DRYERS = chunk(
    "dryers",
    "润田除湿机 商品详情",
    "\n".join(
        [
            "润田除湿机 商品详情",
            "型号与价格",
            "| 型号 | 除湿量 | 干衣功能 | 水箱 | 售价 |",
            "| --- | --- | --- | --- | --- |",
            "| 润田 D20 基础款 | 20 升/天 | 无干衣功能 | 3 升 | 1299 元 |",
            "| 润田 D20 衣物款 | 20 升/天 | 干衣模式 2 小时 | 3 升 | 1699 元 |",
            "| 润田 D40 | 40 升/天 | 干衣模式 1.5 小时 | 6 升 | 2699 元 |",
        ]
    ),
)


def test_a_row_saying_it_has_none_of_a_column_does_not_state_what_the_column_names() -> None:
    # "干衣功能 无干衣功能": the basic one has no clothes drying, though its row repeats the column's name.
    out = answer("How much is the Runtian D20 with clothes drying?", [DRYERS])
    assert "1699" in out and "1299" not in out


def test_whether_it_has_it_is_still_answered_by_the_row_saying_none() -> None:
    out = answer("润田 D20 基础款能干衣吗", [DRYERS])
    assert "无干衣功能" in out


LENSES = chunk(
    "lenses",
    "青禾（Qinghe）护眼镜片 商品详情",
    "\n".join(
        [
            "青禾 标准版",
            "售价：980 元 / 副",
            "加工周期：4 个工作日",
            "青禾 Pro",
            "售价：1580 元 / 副",
            "加工周期：9 个工作日",
            "配戴后每 6 个月可以回店免费复查一次。",
        ]
    ),
)


def test_an_order_number_is_no_product_the_question_is_about() -> None:
    # Read as a product, the order number matched no sentence and every line of the page fitted it as badly.
    out = answer("订单号 QH20270314005521，我买的青禾 Pro，加工要几个工作日", [LENSES])
    assert "9 个工作日" in out and "4 个工作日" not in out


WARRANTY = chunk(
    "warranty",
    "保修条款",
    "\n".join(
        [
            "默认保修期",
            "商品详情页写明保修期的，以详情页为准；没有写明的，按下面的默认期限。",
            "- 其他品牌手表：1 年",
            "- 其他品牌表带：6 个月",
        ]
    ),
)
WATCH = chunk(
    "watch",
    "岚山（Lanshan）L2 系列机械表 商品详情",
    "\n".join(["岚山 L2", "- 售价：3280 元", "- 机芯保修 3 年", "岚山 L2 Lite", "- 售价：1980 元", "- 机芯保修 1 年"]),
    index=1,
)


def test_the_default_for_other_brands_gives_way_to_the_asked_models_own_line() -> None:
    # The warranty page is better retrieved and its title is the question's topic, but its line is for the
    # brands that have no line of their own.
    out = answer("I have a Lanshan L2, bought 20 months ago. For what period is it guaranteed?", [WARRANTY, WATCH])
    assert "3 年" in out and "其他品牌" not in out


def test_a_brand_with_no_line_of_its_own_gets_the_default() -> None:
    out = answer("My Zenova watch is 8 months old; what guarantee period applies?", [WARRANTY, WATCH])
    assert "其他品牌手表：1 年" in out


SCOOTER = chunk(
    "scooter",
    "飞驰（Feichi）S2 电动滑板车 商品详情",
    "\n".join(
        [
            "版本与价格",
            "| 版本 | 电池 | 续航 | 售价 |",
            "| --- | --- | --- | --- |",
            "| 飞驰 S2 标准版 | 36V 7.5Ah | 30 km | 2199 元 |",
            "| 飞驰 S2 长续航版 | 36V 12Ah | 50 km | 2899 元 |",
        ]
    ),
)
PARTS = chunk(
    "parts",
    "配件价格表",
    "\n".join(
        [
            "| 品类 | 商品 | 售价 |",
            "| --- | --- | --- |",
            "| 电池 | 飞驰 S2 备用电池 36V 7.5Ah | 899 元 |",
            "| 轮胎 | 飞驰 S2 实心胎 | 129 元 |",
        ]
    ),
    index=1,
)


def test_a_question_about_a_part_is_answered_by_the_parts_line_not_the_models_price() -> None:
    out = answer("Feichi S2 spare battery: what is the price?", [SCOOTER, PARTS])
    assert "899" in out and "2199" not in out and "2899" not in out


def _pack(name: str, price: str, index: int) -> Chunk:
    return chunk(
        "packs", "远行骑行包 商品详情", f"{name}\n- 售价：{price}\n- 颜色：黑色、橄榄绿", section=name, index=index
    )


PACK_EXTRAS = chunk(
    "pack-extras",
    "骑行配件价目表",
    "\n".join(
        [
            "| 品类 | 型号 | 规格 | 售价 |",
            "| --- | --- | --- | --- |",
            "| 防雨罩 | 包用防雨罩 S | 适合 15–30 L 的包 | 35 元 |",
            "| 水壶 | 保温水壶 300ml | 不锈钢 | 30 元 |",
        ]
    ),
    index=5,
)


def test_a_model_the_product_reader_misses_is_still_named_by_the_customers_words() -> None:
    # "远行 30L" is no product name the reader knows, but it is one of the page's two siblings, and the figure it
    # shares with the accessories' rows is no reason to quote them.
    chunks = [_pack("远行 30L 通勤包", "459 元", 2), _pack("远行 50L 旅行包", "689 元", 3), PACK_EXTRAS]
    out = answer("订单号 YX20270101-5521，远行 30L 卖几块", chunks)
    assert "459" in out and "35 元" not in out and "689" not in out


MATTRESS = chunk(
    "mattress",
    "云眠（Yunmian）M3 床垫 商品详情",
    "\n".join(
        [
            "云眠家居 · 睡好每一天 | 首页 · 床垫 · 枕头 · 门店",
            "云眠（Yunmian）M3 是独立袋装弹簧床垫，软硬适中。",
            "云眠 M3：整垫保修 5 年。",
        ]
    ),
)
REPAIRS = chunk("terms", "保修条款", "\n".join(["保修期从签收当天开始计算。", "需要返厂的，约 15 个工作日。"]), index=1)


def test_a_site_navigation_line_is_no_answer() -> None:
    # "睡好每一天" holds "一天", a duration, and the line is on the asked model's page.
    out = answer("If my Yunmian M3 is sent to the factory, how many days will fixing it need?", [MATTRESS, REPAIRS])
    assert "首页" not in out and "保修 5 年" in out


FLEECE = chunk(
    "fleece",
    "Ridgeway Fleece Jackets",
    "\n".join(
        [
            "Ridgeway Fleece 200",
            "- Weight (size M): 330 g",
            "- Sizes: S to XL",
            "Ridgeway Fleece 300",
            "- Weight (size M): 410 g",
            "- Sizes: XS to XXL",
        ]
    ),
)


def test_a_range_of_letter_sizes_answers_what_sizes_there_are() -> None:
    # After "how heavy", the rewriter's words ask for the sizes: the sizes line has no figure, yet it is the value.
    memory = _memory(("How heavy is the Ridgeway Fleece 200?", "It weighs 330 g in size M."))
    out = answer("and the 300?", [FLEECE], query="What sizes does Ridgeway Fleece 300 come in?", memory=memory)
    assert "XS to XXL" in out and "S to XL " not in out


WARDROBE = chunk(
    "wardrobe",
    "木语（Muyu）W2 衣柜 商品详情",
    "\n".join(["木语 W2", "- 售价：2380 元", "- 整柜保修：3 年", "- 柜体板材：E0 级颗粒板"]),
)
FITTING = chunk(
    "fitting",
    "配送与安装",
    "\n".join(["安装说明", "大件家具送到后由师傅上门安装。", "一般衣柜约 2 小时装好，转角柜另加 1 小时。"]),
    index=3,
)


def test_how_long_something_takes_is_not_how_long_it_is_guaranteed() -> None:
    out = answer("木语 W2 装好要多久", [WARDROBE, FITTING])
    # The fitting time is quoted first, though the model's own page is better retrieved and fits its name.
    assert "2 小时" in out and ("3 年" not in out or out.index("2 小时") < out.index("3 年"))
