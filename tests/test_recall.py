"""Questions about the conversation itself, answered from memory: the value tied to what the question
names, the product an earlier answer recommended, and — once compression has folded the round that held
the fact — the summary's labelled pinned facts, with no LLM and in the prompt an LLM gets."""

from __future__ import annotations

from typing import Any

from rag_core.settings import MemorySettings, PromptSettings
from rag_core.tokens import TokenCounter
from rag_service.domain import MemoryView, Message, Round
from rag_service.prompt import OPEN_SUMMARY
from rag_service.recall import recall_answer
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
