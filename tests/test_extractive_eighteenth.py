"""Line choice of the eighteenth session, on invented shops:
- a period in one cell of a price row ("每天最多 6 次") does not make the row's price a rate ("49 元/天" does);
- an item of a list headed by what the shop refuses ("不能退的商品") is quoted with that heading;
- "要加钱吗", "is there a fee?" ask whether something costs: a share added to the price ("加收 20%") answers;
- a rule's label stating a value ("另行保修 3 年：") names no sibling model;
- a sibling picked by its price ("实惠点的那个") is the table row at that end of the prices."""

from __future__ import annotations

from rag_service.extractive import Candidate, _rate, _sibling_name
from tests.extractive_kit import answer, chunk, conversation

LAMP_PAGE = chunk(
    "lamp-page",
    "晴窗 智能台灯 商品详情",
    "\n".join(
        [
            "## 型号对比",
            "| 型号 | 亮度 | 定时 | 语音 | 售价 |",
            "|---|---|---|---|---|",
            "| 晴窗 L2 基础版 | 500 流明 | 每天最多 6 次 | 无 | 199 元 |",
            "| 晴窗 L2 语音版 | 500 流明 | 每天最多 6 次 | 支持语音开关 | 329 元 |",
        ]
    ),
)
SPARES_PAGE = chunk(
    "lamp-spares",
    "配件价格表",
    "\n".join(
        [
            "| 品类 | 商品 | 适用 | 售价 |",
            "|---|---|---|---|",
            "| 配件 | 晴窗 L2 替换灯罩 | 适用 L2 基础版和 L2 语音版 | 39 元 |",
        ]
    ),
)


def test_a_period_in_another_cell_of_a_price_row_is_no_rate() -> None:
    out = answer("能语音控制的那个卖几块", [LAMP_PAGE, SPARES_PAGE], query="晴窗 L2 能语音控制的那个卖几块")
    assert "329 元" in out, out


def test_a_period_beside_the_amount_is_a_rate() -> None:
    assert _rate("帐篷租金 49 元/天，押金 300 元")
    assert _rate("Yunshan 2 tent: 59 yuan per day, deposit 500 yuan.")
    assert _rate("小型房每晚 98 元")
    assert not _rate("型号 晴窗 L2，定时 每天最多 6 次，语音 无，售价 199 元。")


RETURNS_PAGE = chunk(
    "returns",
    "松林户外 退换货政策",
    "\n".join(
        [
            "## 七天无理由退货",
            "签收后 7 天内，商品未使用、吊牌完好，可以无理由退货。",
            "## 不能退的商品",
            "- 已经下过水的皮划艇",
            "- 定制尺寸的睡袋",
        ]
    ),
)


def test_an_item_under_a_denying_heading_is_quoted_with_it() -> None:
    out = answer("皮划艇下水用过一回，可以退货不", [RETURNS_PAGE])
    assert "不能退的商品：已经下过水的皮划艇" in out, out


def test_an_item_stating_its_own_verdict_keeps_no_heading() -> None:
    page = chunk("returns-2", "松林户外 退换货政策", "## 不能退的商品\n- 贴身的内衣，拆封后不退")
    out = answer("内衣拆封了能退吗", [page])
    assert "- 贴身的内衣，拆封后不退" in out, out


def test_a_kind_of_return_is_no_denying_heading() -> None:
    page = chunk("returns-3", "松林户外 退换货政策", "## 无理由退货\n- 签收后 7 天内可以申请")
    out = answer("多少天内能申请退货", [page])
    assert "无理由退货：" not in out, out


HOTEL_PAGE = chunk(
    "cat-hotel",
    "喵居 寄养服务",
    "\n".join(
        [
            "## 房型与价格",
            "标准间每晚 80 元，豪华间每晚 120 元。",
            "## 节假日",
            "国庆节期间照常接待，需要提前 10 天预订。",
            "国庆期间房费加收 20%。",
        ]
    ),
)


def test_an_extra_charge_asked_is_answered_by_the_share_added() -> None:
    out = answer("国庆寄养要加钱吗", [HOTEL_PAGE])
    assert "20%" in out.split("\n")[1], out


def _line(text: str, section: str = "") -> Candidate:
    return Candidate(text, chunk("tents", "青山帐篷 商品详情", text, section=section), 0, section, 0)


def test_a_rule_label_stating_a_value_names_no_model() -> None:
    assert _sibling_name(_line("拉链损坏另行保修 3 年：在保修期内免费更换拉链头。", "拉链保修")) == ""
    assert _sibling_name(_line("满 199 元：全国包邮。", "运费")) == ""
    assert _sibling_name(_line("Brook 3 canoe: 49 yuan per day.", "Rentals")) == "Brook 3 canoe"


TENT_PAGE = chunk(
    "tents",
    "青山帐篷 商品详情",
    "\n".join(
        [
            "## 青山 2 标准版",
            "- 售价：599 元",
            "- 整帐保修：1 年",
            "## 青山 2 Pro",
            "- 售价：899 元",
            "- 整帐保修：2 年",
            "## 拉链保修",
            "拉链损坏另行保修 3 年：在保修期内坏掉的拉链头，可以到门店免费更换。",
        ]
    ),
)


def test_a_rule_under_its_own_topic_heading_is_no_sibling_of_the_asked_model() -> None:
    memory = conversation(("青山 2 Pro 多少钱", "- 青山 2 Pro：售价：899 元（青山帐篷 商品详情）"))
    out = answer("拉链头坏了怎么弄", [TENT_PAGE], query="青山 2 Pro 拉链头坏了怎么弄", memory=memory)
    assert "3 年" in out, out


LAMPS = chunk(
    "gear-prices",
    "户外配件价目表",
    "\n".join(
        [
            "| 品类 | 型号 | 规格 | 售价 |",
            "|---|---|---|---|",
            "| 营地灯 | 星野 L800 Pro | 800 流明，Type-C 充电锂电池 | 289 元 |",
            "| 营地灯 | 星野 L200 | 200 流明，3 节 AAA 电池 | 99 元 |",
            "| 气罐 | 高山气罐 230g | 丁烷丙烷混合气 | 29 元 |",
        ]
    ),
)


def test_a_sibling_picked_by_its_price_is_the_row_at_that_end() -> None:
    out = answer("实惠点的那个营地灯配啥电池", [LAMPS], query="星野 L800 Pro 实惠点的那个营地灯配啥电池")
    assert "L200" in out and "L800" not in out, out


def test_the_dearer_one() -> None:
    out = answer("贵一些的那个营地灯亮度几流明", [LAMPS], query="星野 L200 贵一些的那个营地灯亮度几流明")
    assert "L800 Pro" in out and "L200" not in out, out


def test_a_price_question_is_no_pick_by_price() -> None:
    out = answer("星野的营地灯各卖几块", [LAMPS])
    assert "L800 Pro" in out and "L200" in out, out
