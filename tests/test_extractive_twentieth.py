"""Line choice of the twentieth session, on invented shops:
- a question on the opening hours that names no holiday or date asks the regular hours, not the line on a
  holiday's hours; one that names a holiday asks that line; a line stating the regular week with a holiday note
  ("每天 9:00–20:00，节假日照常") is the regular hours;
- a bare line of figures from another page's price table does not ride along after the best line;
- across languages, a word the glossary reads as two concepts ("installments": instalments and "install*") is said in
  part by a line that has one of them;
- "below that" after an answer that quoted a threshold asks the other side of that threshold, not another region's;
- a city named earlier picks its store by the city, not by the province it shares with another store."""

from __future__ import annotations

from rag_service.domain import GenerationInput
from rag_service.extractive import ExtractiveGenerator
from tests.extractive_kit import answer, chunk, conversation

KITE_STORES = [
    chunk(
        "kite-stores",
        "纸鸢文具 门店与营业时间",
        "地址是苏州市姑苏区观前街 12 号。营业时间为每天 9:30 至 21:00。",
        section="苏州观前店",
    ),
    chunk(
        "kite-stores",
        "纸鸢文具 门店与营业时间",
        "地址是无锡市梁溪区崇安寺 8 号。营业时间为每天 10:00 至 21:30。",
        section="无锡崇安寺店",
        index=1,
    ),
    chunk(
        "kite-stores",
        "纸鸢文具 门店与营业时间",
        "中秋节当天所有门店提前到 17:00 关门，次日恢复正常营业。",
        section="节假日营业安排",
        index=2,
    ),
]


def test_hours_asked_with_no_holiday_get_the_regular_hours() -> None:
    out = answer("What are your store hours?", KITE_STORES)
    assert "9:30" in out, out
    assert "17:00" not in out.splitlines()[1], out


def test_hours_asked_for_a_holiday_get_the_holiday_line() -> None:
    out = answer("中秋节那天门店开吗", KITE_STORES)
    assert "17:00" in out.splitlines()[1], out


def test_a_regular_week_with_a_holiday_note_is_the_regular_hours() -> None:
    hotline = chunk(
        "kite-service",
        "纸鸢文具 客服",
        "\n".join(
            ["客服热线 400-100-2020，服务时间为每天 9:00 至 20:00，节假日照常。", "春节期间客服暂停，初八恢复。"]
        ),
    )
    out = answer("你们客服晚上几点下班", [hotline])
    assert "20:00" in out.splitlines()[1], out


def test_bare_figure_lines_of_another_page_do_not_ride_along() -> None:
    fees = chunk(
        "lamp-warranty",
        "灯饰保修政策",
        "\n".join(["上门费 40 元；", "维修工时费：台灯 30 元，吊灯 90 元，另加配件费。"]),
        section="保修期外的收费",
    )
    plans = chunk(
        "lamp-care",
        "Glow Care Extended Warranty Plans",
        "\n".join(["below 500 yuan 39 yuan 99 yuan", "500 to 1,999 yuan 89 yuan 199 yuan"]),
        section="Lamp price +1 year +3 years",
    )
    cover = chunk("lamp-care", "Glow Care Extended Warranty Plans", "Glow Care extends the maker's warranty.", index=1)
    out = answer("保修过期了，上门检测要收多少钱", [plans, fees, cover], query="延保 保修过期了，上门检测要收多少钱")
    assert "40 元" in out.splitlines()[1], out
    assert "39 yuan" not in out, out


def test_a_word_read_as_two_concepts_is_said_in_part_by_a_line_of_one() -> None:
    # "installments" is read as the `installment` concept and as "install*": a Chinese instalment line has the first.
    student = chunk(
        "pen-student",
        "Student Offers",
        "\n".join(
            [
                "Students get 5% off fountain pens.",
                "The student offer can be combined with interest-free installment plans.",
            ]
        ),
        section="Combining with other offers",
    )
    plans = chunk(
        "pen-installments",
        "分期付款说明",
        "\n".join(
            ["墨池文具支持花呗分期和信用卡分期，可选 3 期、6 期和 12 期。", "花呗分期：单笔订单实付满 300 元可用。"]
        ),
    )
    question = "Can I pay in installments?"
    turn = GenerationInput(question, question, [student, plans], None, (("in installment", frozenset({"分期"})),))
    out = ExtractiveGenerator(3).answer(turn)
    quoted = [line for line in out.splitlines() if line.startswith("- ")]
    assert "分期" in quoted[0], out


TEA_SHIPPING = [
    chunk(
        "tea-shipping",
        "茶语 配送说明",
        "订单发货前可以在“我的订单”里修改收货地址；\n已经发货的订单不能改地址。",
        section="修改地址",
    ),
    chunk(
        "tea-shipping",
        "茶语 配送说明",
        "\n".join(
            [
                "闽粤地区：订单满 88 元包邮，不满 88 元收 8 元运费，一般 1–2 天送达。",
                "其他大陆地区：订单满 168 元包邮，不满 168 元收 12 元运费，一般 2–4 天送达。",
            ]
        ),
        section="配送区域和运费",
        index=1,
    ),
]


def test_below_that_after_a_threshold_gets_the_threshold_said_before() -> None:
    earlier = conversation(
        (
            "I'm in Xiamen, is shipping free?",
            "[extractive answer, no LLM configured] From the knowledge base:\n"
            "- 闽粤地区：订单满 88 元包邮，不满 88 元收 8 元运费，一般 1–2 天送达。 (茶语 配送说明)",
        )
    )
    out = answer("What if my basket is below that?", TEA_SHIPPING, memory=earlier)
    assert "收 8 元运费" in out, out
    assert "12 元" not in out, out


def test_a_city_named_before_picks_its_store_not_another_of_its_province() -> None:
    stores = chunk(
        "kite-south",
        "纸鸢文具 华南门店",
        "\n".join(
            [
                "深圳福田店",
                "地址是深圳市福田区华富路 8 号。营业时间为每天 9:00 至 20:30。",
                "广州海珠店",
                "地址是广州市海珠区江南大道 66 号。营业时间为每天 10:00 至 22:00。",
            ]
        ),
    )
    earlier = conversation(
        (
            "深圳那家店在哪里",
            "[extractive answer, no LLM configured] 根据知识库：\n- 地址是深圳市福田区华富路 8 号。（纸鸢文具 华南门店）",
        )
    )
    out = answer("几点关门", [stores], memory=earlier)
    assert "20:30" in out, out
    assert "22:00" not in out, out


def test_a_question_naming_no_model_keeps_the_model_the_last_answer_settled_on() -> None:
    kettles = [
        chunk(
            "kettle", "汀泉电水壶 商品详情", "容量：1.5 L\n售价：129 元\n底座保修：12 个月", section="汀泉 K1 经典款"
        ),
        chunk(
            "kettle",
            "汀泉电水壶 商品详情",
            "容量：1.7 L\n售价：199 元\n底座保修：24 个月",
            section="汀泉 K3 恒温款",
            index=1,
        ),
        chunk(
            "kettle",
            "汀泉电水壶 商品详情",
            "容量：1.2 L\n售价：99 元\n底座保修：6 个月",
            section="汀泉 K0 便携款",
            index=2,
        ),
    ]
    earlier = conversation(
        (
            "恒温那款能装多少水",
            "[extractive answer, no LLM configured] 根据知识库：\n- 汀泉 K3 恒温款：容量：1.7 L（汀泉电水壶 商品详情）",
        )
    )
    out = answer("底座坏了保多久", kettles, memory=earlier)
    assert "24 个月" in out, out
    assert "12 个月" not in out and "6 个月" not in out, out
