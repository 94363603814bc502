"""A table row whose cell says it has none of its column, and an order number in the question, on an invented
shop of dehumidifiers and kids' lenses."""

from __future__ import annotations

from tests.extractive_kit import answer, chunk

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
