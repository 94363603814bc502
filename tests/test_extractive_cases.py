"""Which rule a line is written for (sixteenth session), on invented shops:
- "其他省份 …" / "Other regions …" is the default for the places its page does not list: a place the customer asks
  about that has a line of its own is answered by that line;
- a table row whose name cell names a model family ("X 系列") is that family's row, every model of it included;
- the state the customer says the goods are in (opened, used) picks the rule written for that state, not the
  one for goods in the other state ("未拆封的 7 天内可退" is not for an opened pack)."""

from __future__ import annotations

from tests.extractive_kit import answer, chunk

TEA_SHIPPING = chunk(
    "tea-shipping",
    "青禾茶庄 配送说明",
    "\n".join(
        [
            "江苏、浙江、上海：每单 6 元，满 99 元包邮。",
            "其他省份：每单 10 元，满 199 元包邮。",
            "新疆、西藏：每单 20 元，不参加包邮。",
        ]
    ),
    section="快递费用",
)


def test_a_place_with_a_line_of_its_own_is_not_answered_by_the_other_line() -> None:
    out = answer("乌鲁木齐包邮的门槛", [TEA_SHIPPING])
    assert "不参加包邮" in out, out


def test_the_other_line_still_answers_a_place_the_page_does_not_list() -> None:
    out = answer("成都包邮的门槛", [TEA_SHIPPING])
    assert "199 元" in out.splitlines()[1], out


COFFEE_WARRANTY = chunk(
    "coffee-warranty",
    "松果咖啡机 保修政策",
    "\n".join(
        [
            "| 商品 | 保修期 | 说明 |",
            "|---|---|---|",
            "| 松果 K2 系列咖啡机 | 整机 1 年 | 加热模块保修 3 年 |",
            "| 松果 手冲壶 | 6 个月 | 只保温控底座 |",
        ]
    ),
    section="保修期",
)
COFFEE_RETURNS = chunk(
    "coffee-returns",
    "松果咖啡 退换货说明",
    "\n".join(["签收 7 天内出现故障可以直接换新。", "超过 7 天的按保修处理。"]),
    section="质量问题",
)


def test_a_row_naming_the_family_is_the_asked_models_row() -> None:
    out = answer(
        "K2 Pro 的加热模块保修期有几年", [COFFEE_WARRANTY, COFFEE_RETURNS], query="松果 K2 Pro 的加热模块保修期有几年"
    )
    assert "3 年" in out.splitlines()[1], out


LENS_CARE_RETURNS = chunk(
    "lens-care-returns",
    "明眸眼镜 退换货政策",
    "\n".join(["未拆封的护理液 7 天内可以退。", "护理液是卫生用品，拆封后不退不换。"]),
    section="护理用品",
)


def test_an_opened_pack_is_answered_by_the_rule_for_opened_goods() -> None:
    out = answer("护理液拆开以后可以退么", [LENS_CARE_RETURNS])
    assert "拆封后不退不换" in out.splitlines()[1], out


def test_an_unopened_pack_is_answered_by_the_rule_for_unopened_goods() -> None:
    out = answer("护理液还没拆封，能退吗", [LENS_CARE_RETURNS])
    assert "7 天内" in out.splitlines()[1], out


def test_goods_worn_outside_are_answered_by_the_rule_for_used_goods() -> None:
    shoes = chunk(
        "shoe-returns",
        "远山鞋履 退换货政策",
        "\n".join(
            [
                "鞋子没有穿过、鞋盒和吊牌完好的，签收 7 天内可以退货。",
                "已经在户外穿过的不能无理由退。",
            ]
        ),
        section="无理由退货",
    )
    out = answer("鞋子穿出去走了一天，鞋盒还在，还能退货吗", [shoes])
    assert "不能无理由退" in out.splitlines()[1], out


def test_how_long_it_takes_is_no_window_for_a_right() -> None:
    lenses = chunk(
        "lenses",
        "明眸 防控镜片 商品详情",
        "\n".join(
            [
                "配镜后 6 个月内度数增加满 50 度，可免费更换一次同款镜片。",
                "加工周期：10 个工作日。",
            ]
        ),
        section="明眸 Pro",
    )
    out = answer("订的明眸 Pro 镜片，要等几天", [lenses])
    assert "10 个工作日" in out.splitlines()[1], out
    assert "可免费更换" not in out, out


def test_a_number_asked_for_a_purpose_is_the_line_labelled_with_it() -> None:
    faq = chunk(
        "faq-en",
        "FAQ for Visitors",
        "Yes. Our English service line is 021-5555 1234, weekdays 9:00-17:00.",
        section="Help in other languages",
    )
    stores = [
        chunk(f"store-{i}", "门店与营业时间", f"电话：021-5555 000{i}。", section=name, index=i)
        for i, name in enumerate(["上海长宁店", "杭州西湖店"], start=1)
    ]
    out = answer("英语热线的号码", [faq, *stores])
    quoted = [line for line in out.splitlines() if line.startswith("- ")]
    assert "021-5555 1234" in quoted[0], out
    assert "021-5555 0001" not in out and "021-5555 0002" not in out, out


def test_the_amount_the_customer_states_is_not_the_price_asked() -> None:
    # A table read from a PDF: its first row became the heading of the rows under it.
    rule = chunk(
        "plans",
        "Tea Club Installment Payments",
        "Baskets from 600 yuan can be split into installments.",
        section="Plans",
    )
    rates = chunk(
        "plans", "Tea Club Installment Payments", "6 periods 3.9%\n12 periods 6.8%", section="3 periods 1.9%", index=1
    )
    out = answer("My basket comes to 600 yuan. If I split it into 6 installments, what is the fee?", [rule, rates])
    assert "3.9%" in out, out
    assert "1.9%" not in out and "6.8%" not in out, out


def test_a_change_of_mind_is_answered_by_the_no_reason_rule() -> None:
    returns = chunk(
        "frame-returns",
        "青柳眼镜 退换货政策",
        "\n".join(
            [
                "自签收起 10 天内出现质量问题，可以退货或换同款。",
                "按处方加工的镜片不支持无理由退货。",
            ]
        ),
        section="定制镜片",
    )
    out = answer("不喜欢这副镜片，10 天内能退货吗", [returns])
    assert "不支持无理由退货" in out.splitlines()[1], out
