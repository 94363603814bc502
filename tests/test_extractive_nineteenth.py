"""Line choice of the nineteenth session, on invented shops:
- a how-to question whose best line sits under a heading that names steps ("组装步骤") gets the section's steps in
  order, though the steps carry no number or step word of their own;
- a line that is the exception to a rule ("唯一的例外是…") answers only a question that raises its case;
- a size written as figures times figures ("55 x 35 x 30 cm") in the previous answer names no model."""

from __future__ import annotations

from rag_service.extractive import _says, answer_subject, sentences_of
from tests.extractive_kit import answer, chunk

SHELF_STEPS = chunk(
    "shelf",
    "松木书架 商品详情",
    "\n".join(
        [
            "先把两块侧板平放在地毯上，孔位朝上。",
            "把四根横杆的榫头敲进侧板的孔里。",
            "装上背板，用附带的小钉固定。",
            "把层板搁在横杆上，推到底。",
            "最后拧紧顶部的两颗防倒螺丝，靠墙固定。",
        ]
    ),
    section="组装步骤（松木书架）",
)


def test_steps_under_a_steps_heading_are_read_together() -> None:
    out = answer("松木书架怎么装", [SHELF_STEPS])
    assert "先把两块侧板" in out, out
    assert "拧紧顶部的两颗防倒螺丝" in out, out
    assert out.index("先把两块侧板") < out.index("拧紧顶部"), out


def test_a_topic_heading_that_asks_how_is_no_list_of_steps() -> None:
    points = chunk(
        "points",
        "竹叶会员 积分规则",
        "\n".join(["每消费 1 元得 1 分。", "积分在确认收货 10 天后到账。", "评价晒图另加 5 分。"]),
        section="怎么攒积分",
    )
    spend = chunk("points", "竹叶会员 积分规则", "200 积分当 1 元用，结账时抵扣。", section="怎么花积分", index=1)
    out = answer("积分能当钱花吗，怎么折算", [points, spend])
    assert "200 积分当 1 元用" in out, out


TEA_RETURNS = chunk(
    "tea-returns",
    "茶语退换货规则",
    "\n".join(
        [
            "已开封的茶叶原则上不退不换。",
            "唯一的例外是受潮：收到时茶叶已经受潮结块，签收后 3 天内可以申请退货，需要拍照。",
        ]
    ),
    section="已拆封的茶叶",
)


def test_the_rule_not_its_exception_for_a_question_that_does_not_raise_the_case() -> None:
    out = answer("茶叶开封后觉得味道一般，能申请退货吗", [TEA_RETURNS])
    assert "原则上不退不换" in out.splitlines()[1], out


def test_the_exception_for_a_question_that_raises_its_case() -> None:
    out = answer("开封的茶叶发现受潮了，能退吗", [TEA_RETURNS])
    assert "唯一的例外是受潮" in out, out


def test_a_size_in_figures_times_figures_names_no_model() -> None:
    named, _, _ = answer_subject(
        "[extractive answer, no LLM configured] From the knowledge base:\n- Outer size 55 x 35 x 30 cm, weight 2.1 kg. (Carriers)"
    )
    assert not any(p.text.lower().startswith("x ") for p in named), named


WRAP_OPTIONS = chunk(
    "wrap",
    "茶语 礼品包装",
    "\n".join(["牛皮纸礼袋：售价 9 元。", "木质礼盒：售价 42 元。"]),
    section="包装选项与价格",
)


def test_a_better_one_of_a_price_list_is_its_dearest_option() -> None:
    out = answer("好些的那款包装什么价", [WRAP_OPTIONS])
    assert "42 元" in out, out
    assert "9 元" not in out, out


def test_a_dearer_option_named_as_no_thing_still_gets_the_list() -> None:
    out = answer("How much is the gift wrapping, is the more expensive choice worth it?", [WRAP_OPTIONS])
    assert "42 元" in out and "9 元" in out, out


def test_a_chinese_word_the_english_page_title_says_is_said_by_its_lines() -> None:
    page = chunk("student-offer", "Student Pricing at Fenglin Audio", "Headphones get 10% off the list price.")
    line = sentences_of([page])[0]
    read = f"{line.section} {line.text} {line.chunk.title}".lower()
    assert _says("学生", line, read, "en", set()) == 1.0


def test_a_line_on_every_storage_size_answers_for_the_size_asked() -> None:
    prices = chunk(
        "buyback",
        "青松回收 价格表",
        "\n".join(
            [
                "青松 Q8 64GB：完好 900 元，有划痕 700 元。",
                "青松 Q8 的存储容量每高一档，回收价加 150 元。",
                "青松 Q9 128GB：完好 1500 元，有划痕 1200 元。",
            ]
        ),
        section="二、手机回收价格",
    )
    out = answer("换成 256GB 那款呢", [prices], query="青松 Q8 256GB 成色好收多少钱")
    assert "每高一档" in out.splitlines()[1], out
