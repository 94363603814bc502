"""Questions about the conversation itself, answered from memory: the value tied to what the question
names, the product an earlier answer recommended, and — once compression has folded the round that held
the fact — the summary's labelled pinned facts, with no LLM and in the prompt an LLM gets."""

from __future__ import annotations

from typing import Any

import pytest

from rag_core.settings import MemorySettings, PromptSettings
from rag_core.tokens import TokenCounter
from rag_service.domain import MemoryView, Message, Round
from rag_service.prompt import OPEN_SUMMARY
from rag_service.recall import is_recall, recall_answer
from rag_service.summary import PINNED_HEADER, ExtractiveSummarizer, pin_facts
from rag_service.testing.fake_llm import FakeLLM, message_text, scripted
from tests.conftest import AppClient
from tests.kb_questions import QUESTIONS


def _round(user: str, assistant: str) -> Round:
    return Round(Message("user", user, 1, 0.0), Message("assistant", assistant, 1, 0.0))


def _memory(*rounds: tuple[str, str], summary: str = "") -> MemoryView:
    return MemoryView(summary, 0, tuple(_round(u, a) for u, a in rounds))


def _recall(question: str, memory: MemoryView) -> str:
    lang = "en" if question.isascii() else "zh"
    answer = recall_answer(question, memory, lang)
    assert answer is not None, question
    return answer


def test_of_several_values_in_a_line_the_one_tied_to_what_is_named_is_the_answer() -> None:
    memory = _memory(
        ("Flex 保障怎么收费", "- 平板的 Flex 保障价格为 1 年 199 元，3 年 459 元。"),
        ("旧机怎么回收", "- Nova 5 64GB：成色完美 820 元，轻度使用 700 元，重度磨损 510 元。"),
        ("And delivery?", "- Orders over ¥99 ship free; otherwise the fee is ¥12 per order."),
    )
    three_years = _recall("你前面说 Flex 保障三年的多少钱？", memory)
    assert "459" in three_years.split("（")[0] and "199" not in three_years.split("（")[0]
    worn = _recall("刚才说的轻度使用的回收价是多少来着？", memory)
    assert "700" in worn.split("（")[0] and "820" not in worn.split("（")[0]
    free = _recall("What did you say the free delivery threshold was?", memory)
    assert "¥99" in free.split("(")[0] and "¥12" not in free.split("(")[0]
    # Nothing in the question tells the values apart: all of them, as said.
    both = _recall("你刚才说 Flex 保障多少钱？", memory)
    assert "199" in both and "459" in both


def test_a_threshold_is_the_amount_a_condition_names_not_a_later_rate() -> None:
    memory = _memory(
        ("How do I reach platinum?", "- 白金会员：一年内累计消费满 20000 元即可升级。"),
        ("And the points?", "- 白金会员每消费 1 元积 2 分，生日当月再送 500 元券。"),
    )
    answer = _recall("What was the platinum threshold you mentioned?", memory)
    assert "20000" in answer.split("(")[0] and "500" not in answer.split("(")[0]


def test_which_one_did_you_recommend_is_the_product_named_in_that_answer() -> None:
    memory = _memory(
        ("打游戏用哪台好", "- 玩大型游戏建议选 Vortex G7 Pro，它配有独立显卡。（选购指南）"),
        ("那经常出差呢", "- 经常出差推荐 Feather 13，重量不到 1 千克。（选购指南）"),
        ("保修多久", "- 笔记本整机保修 2 年。（保修政策）"),
    )
    games = _recall("你刚才推荐打游戏的是哪一款？", memory)
    assert games.startswith("根据我们之前的对话，我提到的产品是 Vortex G7 Pro。") and "Feather" not in games
    trips = _recall("出差的话你之前推荐的是哪台来着？", memory)
    assert "产品是 Feather 13" in trips
    # No earlier answer recommended anything for this: not from memory (the knowledge base answers it).
    assert recall_answer("你之前推荐给学生的是哪一款？", memory, "zh") is None
    # A code that only looks like a model name is not a product.
    codes = _memory(("耐用吗", "- 通过 MIL-STD-810H 军标测试，订单 QX20251101 可查。"))
    assert recall_answer("你刚才说耐用测试的是哪一款？", codes, "zh") is None


@pytest.mark.parametrize(
    "question",
    [
        "你们刚说的运费是多少？",
        "How much did you say the case costs?",
        "你上一条回复里说的金额是多少",
        "Can you repeat the price?",
        "When did you say it ships?",
        "那个价格再说一遍",
    ],
)
def test_questions_about_what_was_said_are_recall(question: str) -> None:
    assert is_recall(question)


@pytest.mark.parametrize(
    "question", ["刚买的手机能退吗", "我刚收到货屏幕有问题想问下", "How do I repeat an order?", "Is the discount 8%?"]
)
def test_questions_about_the_shop_are_not_recall(question: str) -> None:
    assert not is_recall(question)


def test_a_discount_is_recalled_as_a_rate_or_as_money_off() -> None:
    memory = _memory(
        ("学生买平板有优惠吗", "- 学生购买平板享 9 折，配件另减 50 元。"),
        ("会员呢", "- 金卡会员购买平板可叠加 95 折。"),
    )
    rate = _recall("你刚才说学生买平板打几折来着？", memory)
    assert "9 折" in rate.split("（")[0] and "95" not in rate.split("（")[0]


def test_a_sibling_model_s_line_does_not_answer_for_the_model_named() -> None:
    memory_rounds = [
        ("扫地机多少钱", "- Orbit V5 售价 1999 元。（Orbit V5 商品详情）"),
        ("Pro 呢", "- Orbit V5 Pro 售价 2599 元。（Orbit V5 Pro 商品详情）"),
    ]
    memory = _memory(*memory_rounds)
    base = _recall("你前面说 Orbit V5 多少钱？", memory)
    assert "1999" in base.split("（")[0] and "2599" not in base.split("（")[0]
    assert "2599" in _recall("你前面说 Orbit V5 Pro 多少钱？", memory).split("（")[0]
    # Only the sibling's price was said: memory cannot answer, the knowledge base does.
    assert recall_answer("你前面说 Orbit V5 Max 多少钱？", memory, "zh") is None
    # A shorter name of the model is no other model.
    assert "1999" in _recall("你前面说 Orbit 多少钱？", _memory(memory_rounds[0])).split("（")[0]


def test_what_the_customer_said_is_found_without_a_currency_or_in_spaced_dates() -> None:
    memory = _memory(
        ("别的店卖 3,299，你们能便宜点吗？型号是 K9 256GB", "- 本店售价以页面为准。"),
        ("我想 6 月 18 日 送到，可以吗", "- 可以预约配送时间。"),
        ("好的", "- 好的，已记录。"),
    )
    quoted = _recall("我刚才说别的店卖多少来着？", memory)
    assert "3,299" in quoted.split("（")[0] and "256" not in quoted.split("（")[0]
    day = _recall("我之前说想哪天送到？", memory)
    assert "6 月 18 日" in day.split("（")[0]
    # The assistant's prices have a currency, the customer's does not: the customer's is the one asked for.
    quoted = _memory(
        ("I saw the Orbit V5 256GB for 8,799 at another shop. Your price?", "- The 256GB model costs ¥9699."),
        ("And delivery?", "- Delivery is free over ¥99."),
    )
    other = _recall("What price did I say the other shop had?", quoted)
    assert "8,799" in other.split("(")[0] and "9699" not in other.split("(")[0]


def test_values_in_one_english_sentence_and_a_figures_heading() -> None:
    marker = "[extractive answer, no LLM configured] "
    memory = _memory(
        (
            "How much is the Aero 7 fan?",
            marker
            + "From the knowledge base:\nKey figures: ¥399\n- The Aero 7 costs ¥399 and the Aero 7 Max costs ¥599.",
        ),
        ("I want it delivered on Friday, May 9.", "- Weekday delivery is available."),
    )
    base = _recall("How much did you say the Aero 7 costs?", memory)
    assert "¥399" in base.split("(")[0] and "¥599" not in base.split("(")[0] and "Key figures" not in base
    assert "¥599" in _recall("Remind me what the Max version costs?", memory).split("(")[0]
    day = _recall("What day did I want it delivered?", memory)
    assert "Friday" in day.split("(")[0] and "May 9" in day.split("(")[0]


ZETA = [
    (
        "Zeta 14 多少钱",
        "[extractive answer, no LLM configured] 根据知识库：\n- 256GB 版本售价 5999 元。（Zeta 14 商品详情）",
    ),
    ("那 Pro 呢", "- 256GB 版本售价 7499 元。（Zeta 14 Pro 商品详情）"),
    ("我的订单号是 QK2025112233，金额 7499 元", "好的，已为您记录。"),
]


def test_pinned_facts_keep_their_label_so_a_folded_value_is_still_told_apart() -> None:
    rounds = [_round(u, a) for u, a in ZETA]
    summary = pin_facts("用户咨询了两款笔记本的价格，并报了订单。", rounds, "")
    entries = summary.splitlines()[-1].removeprefix(PINNED_HEADER).strip().split("; ")
    assert "Zeta 14 256GB 版本售价 5999 元" in entries
    assert "Zeta 14 Pro 256GB 版本售价 7499 元" in entries
    assert "订单号 QK2025112233" in entries and "金额 7499 元" in entries  # one value, two facts
    # The labels survive the next compression, which re-reads the pinned line.
    again = pin_facts("用户又问了颜色。", [_round("有几种颜色", "两种。")], summary)
    assert again.splitlines()[-1] == summary.splitlines()[-1]
    # Read back by recall, with no verbatim round left.
    memory = MemoryView(again, 0, ())
    pro = _recall("你之前说 Zeta 14 Pro 多少钱？", memory)
    assert "7499" in pro.split("（")[0] and "5999" not in pro.split("（")[0]
    base = _recall("第一次你说的价格是多少来着？", memory)
    assert "5999" in base.split("（")[0]
    assert "QK2025112233" in _recall("我之前报的订单号你还记得吗？", memory)


async def test_extractive_summary_keeps_the_answers_figures(counter: TokenCounter) -> None:
    summarizer = ExtractiveSummarizer(counter, MemorySettings())
    text = await summarizer.summarize("", [_round(u, a) for u, a in ZETA])
    assert "Answer: 256GB 版本售价 5999 元。（Zeta 14 商品详情）" in text
    assert "extractive answer" not in text and "好的" not in text  # no marker, no line without a fact
    # The summary tells who said what: recall reads the customer's and the assistant's lines apart.
    memory = MemoryView(pin_facts(text, [_round(u, a) for u, a in ZETA], ""), 0, ())
    assert "7499" in _recall("What did you say the Zeta 14 Pro costs?", memory).split("(")[0]


# --- through the API, after compression folded the round -----------------------------------------------

FOLD_FAST = {
    "memory": {"strategy": "hybrid", "window_rounds": 1, "summary_threshold_tokens": 50, "summary_min_fold_rounds": 1},
    "rewrite": {"mode": "none"},
    "auth": {"rate_limit": {"per_key": "", "per_session": "", "per_address": ""}},
}


async def _talk_until_folded(app: AppClient, sid: str, first: str) -> list[dict[str, Any]]:
    """Ask `first`, then knowledge-base questions until a compression has folded the first round (each
    turn's background compression is awaited, so this waits for the event, not for time)."""
    replies = [await app.ask(sid, first)]
    await app.services.pipeline.drain()
    for question, _, _ in QUESTIONS[:8]:
        meta, _, _ = await app.services.store.load(sid, lambda m: 0)
        if meta.summarized >= 2:
            return replies
        replies.append(await app.ask(sid, question))
        await app.services.pipeline.drain()
    meta, _, _ = await app.services.store.load(sid, lambda m: 0)
    assert meta.summarized >= 2, "compression never folded the first round"
    return replies


async def test_recall_after_the_fact_was_folded_with_no_llm(app_factory: Any) -> None:
    app: AppClient = await app_factory(**FOLD_FAST)
    question, _, price = QUESTIONS[4]  # a knowledge-base price question
    sid = await app.new_session()
    replies = await _talk_until_folded(app, sid, f"你好，订单号 QK2025112233 的发票开了吗？另外{question}")
    assert price in replies[0]["answer"], "the first answer states the price"
    meta, _, _ = await app.services.store.load(sid, lambda m: 0)
    assert price in meta.summary and "QK2025112233" in meta.summary

    said = await app.ask(sid, "一开始你报的价格是多少来着？")
    assert said["mode"] == "extractive" and "之前的对话" in said["answer"]
    assert price in said["answer"].split("（原话")[0]
    order = await app.ask(sid, "我之前报的订单号你还记得吗？")
    assert "QK2025112233" in order["answer"].split("（原话")[0]


async def test_recall_after_the_fact_was_folded_reaches_the_llm_prompt(app_factory: Any, fake_llm: FakeLLM) -> None:
    # The summarizer writes a fine summary that keeps no number at all; the answers carry the facts.
    def answer(request: dict[str, Any]) -> str:
        question = message_text(request["messages"][-1].get("content")).rsplit("用户的问题：", 1)[-1]
        if "Zeta" in question:
            return "Zeta 14 的 256GB 版本售价 5999 元；Zeta 14 Pro 的 256GB 版本售价 7499 元。"
        return "您好，这个问题请参考商品详情页。"

    fake_llm.set_responder(scripted([("running summary", "用户比较了两款笔记本，并询问了几个售后问题。")], answer))
    app: AppClient = await app_factory(**FOLD_FAST, llm={"base_url": fake_llm.base_url, "max_retries": 0})
    sid = await app.new_session()
    await _talk_until_folded(app, sid, "Zeta 14 和 Zeta 14 Pro 各多少钱？")

    await app.ask(sid, "你之前说 Pro 多少钱来着？")
    prompt = fake_llm.requests[-1]["messages"]
    rounds = "\n".join(m["content"] for m in prompt[1:-1] if OPEN_SUMMARY not in m["content"])
    assert "7499" not in rounds, "the round is folded: only the summary can hold the price"
    summary = next(m["content"] for m in prompt[1:] if m["content"].startswith(PromptSettings().summary_header))
    pinned = next(line for line in summary.splitlines() if line.startswith(PINNED_HEADER))
    entries = pinned.removeprefix(PINNED_HEADER).split(";")
    assert any("Zeta 14 Pro" in e and "7499 元" in e for e in entries)
    assert any("Zeta 14" in e and "Pro" not in e and "5999 元" in e for e in entries)


def test_a_phone_number_asked_back_is_the_number_not_an_amount() -> None:
    memory = _memory(
        ("滨海店电话多少", "- 滨海店电话：0512-6688 4421（门店信息）"),
        ("营业到几点", "- 每天 9:30–20:30（门店信息）"),
        ("镜布多少钱", "- 镜布售价 15 元。（配件价格表）"),
    )
    text = _recall("你刚才给我的滨海店电话是多少", memory)
    assert "电话号码是 0512-6688 4421" in text and "15 元" not in text.split("（")[0]


@pytest.mark.parametrize(
    "question",
    ["我跟你说过我是哪种会员？", "你报给我的安装费是多少？", "前面我那张单子的单号是多少？", "我之前说过我家猫几岁吗"],
)
def test_who_said_it_to_whom_is_a_recall_without_a_time_word(question: str) -> None:
    assert is_recall(question)


@pytest.mark.parametrize(
    "question", ["我的订单号在哪里能查到？", "How do I find my order number?", "Where can I see my tracking number?"]
)
def test_how_to_find_my_identifier_is_a_knowledge_question(question: str) -> None:
    assert not is_recall(question)


def test_which_one_with_no_product_in_memory_quotes_the_line_about_it() -> None:
    memory = _memory(
        ("狗 22 公斤项圈选多大尺码", "- 体重 18–30 公斤选 XL 码。（项圈尺码表）"),
        ("多少钱", "- XL 码售价 45 元。（项圈尺码表）"),
        ("能退吗", "- 未使用可 7 天内退。（退货政策）"),
    )
    text = _recall("你刚才推荐的码数是哪个？", memory)
    assert "XL" in text and "退" not in text
    # A model asked for is not answered by a line that names none.
    assert recall_answer("你刚才推荐的是哪一款？", memory, "zh") is None


def test_a_mobile_number_asked_back_is_read_as_stored_masked() -> None:
    memory = _memory(("我手机 139****2231，想约周六试驾", "- 周六 9:00 起可预约。（门店）"), ("要带驾照吗", "- 需要。"))
    assert "139****2231" in _recall("你还记得我的手机号吗", memory)
