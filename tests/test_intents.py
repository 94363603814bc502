"""Intent configuration, typed slot extractors, the task tracker and the LLM reply parser (no model)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pytest

from rag_service.intents.config import IntentConfigError, load_catalog
from rag_service.intents.llm_recognizer import BadReply, parse_reply
from rag_service.intents.recognize import NONE, IntentScore
from rag_service.intents.slots import ProductCatalog, SlotExtractor, dates, enum_values, order_numbers, phones
from rag_service.intents.switch import (
    ExampleSet,
    SwitchDecision,
    SwitchDetector,
    SwitchInput,
    buys_the_product,
    calibrate_margin,
    landing_margin,
    unrelated_similarities,
)
from rag_service.intents.task import Recognition, TaskState, TaskTracker

ROOT = Path(__file__).resolve().parent.parent
ECOMMERCE = str(ROOT / "configs" / "intents" / "ecommerce.yaml")
TITLES = ["iPhone 16 Pro 商品详情", "iPhone 16 商品详情 - 星辰数码", "小米 15 Pro 商品详情", "星辰数码退换货政策"]
TODAY = dt.date(2025, 3, 20)


def test_shipped_intents_load_with_their_slots() -> None:
    catalog = load_catalog([ECOMMERCE])
    assert catalog.names == ["order_status", "return_request", "warranty_claim", "installment_inquiry"]
    spec = catalog.get("return_request")
    assert spec is not None and [s.name for s in spec.slots] == ["order_no", "product", "reason"]
    assert all(s.ask.get("zh") and s.ask.get("en") for i in catalog.intents for s in i.slots)


def test_config_errors_name_the_problem(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_text("intents:\n  - name: x\n    examples: [a]\n    slots: [{name: k, type: enum}]\n", encoding="utf-8")
    with pytest.raises(IntentConfigError, match="enum slot needs `values`"):
        load_catalog([str(bad)])
    with pytest.raises(IntentConfigError, match="does not exist"):
        load_catalog([str(tmp_path / "missing.yaml")])
    with pytest.raises(IntentConfigError, match="no intent file defines"):
        load_catalog([ECOMMERCE], {"nope": "http://127.0.0.1:1/"})


def test_order_numbers_phones_and_the_last_value_wins() -> None:
    assert order_numbers("不对，订单号是 XC20250301000456，不是 XC20250301000123") == [
        "XC20250301000456",
        "XC20250301000123",
    ]
    assert order_numbers("order no. 318765432109") == ["318765432109"]
    assert order_numbers("我的手机号 13812345678") == []
    assert phones("电话 138-1234-5678 或 +86 139 8765 4321") == ["13812345678", "13987654321"]


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2025年1月10日买的", "2025-01-10"),
        ("去年十二月五号", "2024-12-05"),
        ("3月2日", "2025-03-02"),
        ("bought on February 3, 2025", "2025-02-03"),
        ("12 January 2025", "2025-01-12"),
        ("2025-01-28", "2025-01-28"),
        ("昨天", "2025-03-19"),
        ("two weeks ago", "2025-03-06"),
    ],
)
def test_dates_in_chinese_and_english_forms(text: str, expected: str) -> None:
    assert dates(text, TODAY)[-1] == expected


def test_enum_synonyms_respect_numbers_and_words() -> None:
    periods = {"3": ["3期", "三期"], "12": ["12期", "12 期", "12 months"], "24": ["24期"]}
    assert enum_values("分12期", periods) == ["12"]
    assert enum_values("MacBook Air M3 能分期吗", periods) == []
    assert enum_values("ThinkPad Gen 12 月供", periods) == []
    assert enum_values("pay over 12 months", periods) == ["12"]


def test_products_come_from_titles_longest_first_with_brand_aliases() -> None:
    catalog = ProductCatalog(TITLES)
    assert catalog.find("我想退 iphone16pro") == ["iPhone 16 Pro"]
    assert catalog.find("iPhone 16 多少钱") == ["iPhone 16"]
    assert catalog.find("The Xiaomi 15 Pro is broken") == ["小米 15 Pro"]
    assert catalog.find("不是 iPhone 16，是小米 15 Pro")[-1] == "小米 15 Pro"
    assert catalog.find("订单 XC20250301000123") == []


def _rec(intent: str | None, slots: dict[str, dict[str, str]], switch: bool = False) -> Recognition:
    return Recognition(IntentScore(intent, 0.9, {}), slots, "offline", switch=SwitchDecision(switch, "test"))


def test_tracker_asks_fills_corrects_and_starts_new_tasks() -> None:
    catalog = load_catalog([ECOMMERCE])
    tracker = TaskTracker(catalog)
    step = tracker.step(TaskState(), "我要退货", 0, _rec("return_request", {"return_request": {}}))
    assert step.action == "ask" and step.ask == "order_no" and step.state.missing == ["order_no", "product", "reason"]
    state = step.state
    step = tracker.step(state, "小米 15 Pro", 1, _rec(None, {"return_request": {"product": "小米 15 Pro"}}))
    assert step.action == "ask" and step.state.slots == {"product": "小米 15 Pro"} and not step.new_task
    step = tracker.step(
        step.state, "…", 2, _rec("return_request", {"return_request": {"order_no": "XC1", "reason": "quality"}})
    )
    assert step.action == "act" and step.state.missing == []
    done = step.state.model_copy(update={"done": True})
    step = tracker.step(done, "不对", 3, _rec(None, {"return_request": {"order_no": "XC2"}}))
    assert step.corrected == ["order_no"] and step.action == "act" and step.state.slots["order_no"] == "XC2"
    step = tracker.step(done, "门店在哪", 4, _rec(None, {"return_request": {}}, switch=True))
    assert step.new_task and step.state.intent is None and step.state.task_started_at_round == 4
    assert "return_request" in step.state.previous


def test_state_round_trips_and_bad_json_is_no_state() -> None:
    state = TaskState(intent="order_status", slots={"order_no": "XC1"}, missing=[], task_started_at_round=2)
    assert TaskState.from_json(state.to_json()) == state
    assert TaskState.from_json("{not json") == TaskState()
    assert TaskState.from_json("") == TaskState()


def test_llm_replies_are_validated() -> None:
    catalog = load_catalog([ECOMMERCE])
    extractor = SlotExtractor(ProductCatalog(TITLES), today=TODAY)
    intent, slots, new = parse_reply(
        '```json\n{"intent": "return_request", "slots": {"order_no": "xc20250301000123", "reason": "quality"},'
        ' "task": "continue"}\n```',
        catalog,
        extractor,
    )
    assert (intent, slots, new) == ("return_request", {"order_no": "XC20250301000123", "reason": "quality"}, False)
    for bad in ("not json", '{"intent": "fly_to_moon", "slots": {}, "task": "new"}', '{"intent": null}'):
        with pytest.raises(BadReply):
            parse_reply(bad, catalog, extractor)
    # A value the slot's type cannot read is dropped, not trusted.
    _, slots, _ = parse_reply(
        '{"intent": "order_status", "slots": {"order_no": "soon"}, "task": "new"}', catalog, extractor
    )
    assert slots == {}


class TableEmbedder:
    """Each text's vector from a table (unknown texts: the last axis), so similarities are set by hand."""

    name = "table"
    dim = 4
    remote = False

    def __init__(self, table: dict[str, list[float]]) -> None:
        self.table = table

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        v = np.asarray(self.table.get(text, [0.0, 0.0, 0.0, 1.0]), dtype=np.float32)
        return v / (np.linalg.norm(v) or 1.0)

    def embed_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return np.stack([self.embed_query(t) for t in texts])


def test_landing_margin_is_measured_against_the_tasks_best_document() -> None:
    landed = [("shipping", 0.91), ("shipping", 0.9), ("returns", 0.86), ("stores", 0.8)]
    assert landing_margin(landed, {"returns"}) == ("shipping", pytest.approx(0.05))
    # A task document the search did not reach counts at the lowest score it returned.
    assert landing_margin(landed, {"invoices"}) == ("shipping", pytest.approx(0.11))
    assert landing_margin(landed, {"shipping", "returns"}) is None  # lands on the task's own document
    assert landing_margin([], {"returns"}) is None


def test_a_question_landing_away_from_the_tasks_documents_is_a_switch() -> None:
    # Every question equally near the earlier one (above both thresholds): only the landing can decide.
    near = [1.0, 0.2, 0.0, 0.0]
    emb = TableEmbedder({"What is the return window?": [1.0, 0.0, 0.0, 0.0], "Do you ship to Canada?": near})
    detector = SwitchDetector(emb, threshold=0.5, strict=0.5, margin=0.04)
    earlier = ["What is the return window?"]
    away = [("shipping", 0.9), ("shipping", 0.88), ("returns", 0.84)]
    d = detector.decide(SwitchInput("Do you ship to Canada?", earlier, landed=away, task_documents={"returns"}))
    assert d.switch and "lands on document 'shipping'" in d.reason and d.away == pytest.approx(0.06)
    home = [("returns", 0.9), ("shipping", 0.89)]
    d = detector.decide(SwitchInput("Do you ship to Canada?", earlier, landed=home, task_documents={"returns"}))
    assert not d.switch and d.away == 0.0
    close = [("shipping", 0.9), ("returns", 0.88)]
    assert not detector.decide(
        SwitchInput("Do you ship to Canada?", earlier, landed=close, task_documents={"returns"})
    ).switch
    # Without the task's documents, or without a calibrated margin, the knowledge base has no say.
    assert not detector.decide(SwitchInput("Do you ship to Canada?", earlier, landed=away)).switch
    no_margin = SwitchDetector(emb, threshold=0.5, strict=0.5)
    assert not no_margin.decide(
        SwitchInput("Do you ship to Canada?", earlier, landed=away, task_documents={"returns"})
    ).switch
    # A question that refers back is never read against the knowledge base.
    d = detector.decide(SwitchInput("Do you ship it to Canada?", earlier, landed=away, task_documents={"returns"}))
    assert not d.switch and d.follows


def test_an_announcing_also_is_not_a_reference_marker() -> None:
    detector = SwitchDetector(TableEmbedder({}), threshold=0.5)
    earlier = ["What is the return window?"]
    assert (
        detector.decide(SwitchInput("Also, do you sell gift wrapping for birthdays?", earlier)).reason
        == "announces a new subject"
    )
    assert detector.decide(SwitchInput("Also, can I get an invoice for it?", earlier)).follows
    # The existential "there" is no place reference; "there" after a place is.
    assert "refers back" not in detector.decide(SwitchInput("Is there a discount for teachers?", earlier)).reason
    assert detector.decide(SwitchInput("Is the cafe open late there?", earlier)).follows


def test_the_landing_margin_follows_the_embedders_spread() -> None:
    groups = [["a1", "a2"], ["b1", "b2"], ["c1"]]

    def embedder(common: float) -> TableEmbedder:
        # A large shared component crowds every cosine near 1 (as multilingual-e5 does); a small one spreads them.
        rest = {"a1": [1, 0, 0], "a2": [1, 0.5, 0], "b1": [0, 1, 0], "b2": [0.3, 1, 0], "c1": [0.5, 0, 1]}
        return TableEmbedder({k: [common, *v] for k, v in rest.items()})

    tight, wide = embedder(5.0), embedder(0.2)
    sims = unrelated_similarities(tight, groups)
    assert len(sims) == 2 * (2 * 2 + 2 * 1 + 2 * 1)  # the ordered pairs of different groups
    expected = float(np.quantile(sims, 0.5) - np.quantile(sims, 0.1))
    assert calibrate_margin(tight, groups, 0.1) == pytest.approx(expected)
    assert calibrate_margin(wide, groups, 0.1) > 5 * calibrate_margin(tight, groups, 0.1) > 0


def test_a_switch_beats_a_slot_named_in_passing_but_not_the_slot_asked_for() -> None:
    catalog = load_catalog([ECOMMERCE])
    tracker = TaskTracker(catalog)
    state = TaskState(intent="return_request", missing=["order_no", "product", "reason"])
    named = _rec(None, {"return_request": {"product": "小米 15 Pro"}}, switch=True)
    step = tracker.step(state, "小米 15 Pro 支持无线充电吗", 3, named)
    assert step.new_task and step.state.intent is None and step.state.documents == []
    asked = state.model_copy(update={"asked": "product"})
    step = tracker.step(asked, "小米 15 Pro", 3, named)
    assert not step.new_task and step.state.slots == {"product": "小米 15 Pro"}
    # A value given for another slot than the one asked for is an answer too, not a question elsewhere.
    other = state.model_copy(update={"asked": "order_no"})
    step = tracker.step(other, "是一台小米 15 Pro", 3, named)
    assert not step.new_task and step.state.slots == {"product": "小米 15 Pro"}
    # A question the recognizer reads as the task's own intent continues it, whatever the detector says.
    own = Recognition(IntentScore("return_request", 0.9, {}), {}, "offline", switch=SwitchDecision(True, "test"))
    assert not tracker.step(state, "退货要多久", 3, own).new_task


# A bike shop's configured examples: two intents and plain questions, in English, and Chinese ones the
# embedder gives one vector (as an English-only model does).
_BIKE_EXAMPLES = {
    "Can you fix my brakes?": ("repair", [1.0, 0.0, 0.0, 0.0]),
    "My gears slip, can you repair them?": ("repair", [0.95, 0.3, 0.0, 0.0]),
    "Where is my parcel?": ("delivery", [0.0, 0.0, 0.0, 1.0]),
    "When will my order arrive?": ("delivery", [0.0, 0.25, 0.0, 0.97]),
    "Do you rent tandem bikes?": (NONE, [0.0, 0.0, 1.0, 0.0]),
    "What time do you open on Sundays?": (NONE, [0.0, 0.3, 0.95, 0.0]),
    "能修刹车吗": ("repair", [-1.0, -1.0, 0.0, 0.0]),
    "包裹到哪了": ("delivery", [-1.0, -1.0, 0.0, 0.0]),
    "周日几点开门": (NONE, [-1.0, -1.0, 0.0, 0.01]),
}


def _bike_examples(quantile: float = 0.5) -> ExampleSet:
    texts = list(_BIKE_EXAMPLES)
    labels = [_BIKE_EXAMPLES[t][0] for t in texts]
    rows = np.array([_BIKE_EXAMPLES[t][1] for t in texts], dtype=np.float32)
    matrix = (rows / np.linalg.norm(rows, axis=1, keepdims=True)).astype(np.float32)
    intent_texts = {name: [t for t in texts if _BIKE_EXAMPLES[t][0] == name] for name in ("repair", "delivery")}
    return ExampleSet.build(matrix, labels, texts, intent_texts, quantile, 0.9)


def _unit(v: list[float]) -> npt.NDArray[np.float32]:
    a = np.asarray(v, dtype=np.float32)
    return a / np.linalg.norm(a)


def test_a_question_phrased_like_an_opening_and_far_from_the_conversation_stands_alone() -> None:
    examples = _bike_examples()
    rent = _unit([0.0, 0.0, 1.0, 0.1])  # phrased as "Do you rent tandem bikes?"
    why = examples.stands_alone(rent, "Do you rent cargo bikes for a day?", 0.02, "repair")
    assert why is not None and why.startswith("stands alone")
    # Near the conversation, or phrased like none of the examples: not by this rule.
    assert examples.stands_alone(rent, "Do you rent cargo bikes for a day?", 0.99, "repair") is None
    vague = _unit([0.5, 0.5, 0.5, 0.5])
    assert examples.stands_alone(vague, "Anything for kids?", 0.02, None) is None


def test_a_question_about_the_tasks_own_business_does_not_stand_alone() -> None:
    examples = _bike_examples()
    rent = _unit([0.0, 0.0, 1.0, 0.1])
    # Its nearest intent is the task's (delivery is nearer than repair).
    assert examples.stands_alone(rent, "Do you rent cargo bikes for a day?", 0.02, "delivery") is None
    # It names one of the task's words ("parcel", from the delivery examples) though its nearest intent is
    # another: about the task's business all the same.
    lockers = _unit([0.2, 0.0, 1.0, 0.0])
    assert examples.stands_alone(lockers, "Is there a bike locker at the shop?", 0.02, "delivery") is not None
    assert examples.stands_alone(lockers, "Is there a parcel locker at the shop?", 0.02, "delivery") is None


def test_the_standalone_rule_is_off_for_a_language_the_embedder_does_not_read() -> None:
    examples = _bike_examples()
    assert examples.unread == frozenset({"zh"})
    assert set(examples.near) == {"", "en", "zh"}
    same = _unit([-1.0, -1.0, 0.0, 0.0])
    assert examples.stands_alone(same, "能租双人自行车吗", 0.0, None) is None


def test_the_detector_calls_a_standalone_question_a_switch_and_will_that_refers_back() -> None:
    examples = _bike_examples()
    emb = TableEmbedder(
        {"Can you fix my brakes?": [1.0, 0.0, 0.0, 0.0], "Do you run group rides?": [0.0, 0.0, 1.0, 0.1]}
    )
    detector = SwitchDetector(emb, threshold=0.5, strict=-1.0, examples=examples)
    d = detector.decide(SwitchInput("Do you run group rides?", ["Can you fix my brakes?"], task_intent="repair"))
    assert d.switch and d.reason.startswith("stands alone")
    assert not detector.decide(
        SwitchInput("Do you run group rides?", ["Can you fix my brakes?"], task_intent="delivery")
    ).switch
    assert detector.decide(SwitchInput("Could that be done by Friday?", ["Can you fix my brakes?"])).follows


def test_the_standalone_rule_is_on_by_default_and_can_be_switched_off_with_the_rules_deciding() -> None:
    from typing import Any

    from rag_core.settings import Settings
    from rag_core.tokens import make_counter
    from rag_service.wiring import build_intents

    counter = make_counter(Settings().tokens)
    index: Any = object()  # read only when a turn runs
    intents: dict[str, Any] = {"files": [ECOMMERCE], "recognizer": "offline"}
    on = build_intents(Settings(intents=intents), TableEmbedder({}), index, counter, [])
    rules = {**intents, "switch_model": False}
    rules_on = build_intents(Settings(intents=rules), TableEmbedder({}), index, counter, [])
    off = build_intents(Settings(intents={**rules, "switch_standalone": False}), TableEmbedder({}), index, counter, [])
    # The learned decision is the default; it reads the rules as trained (the standalone rule on).
    assert on is not None and on.switch.model is not None and on.switch.examples is not None
    assert rules_on is not None and rules_on.switch.model is None and rules_on.switch.examples is not None
    assert off is not None and off.switch.examples is None


def _bike_detector(table: dict[str, list[float]]) -> SwitchDetector:
    # strict -1: no question is far enough for the similarity rule alone; only the examples can call a switch.
    return SwitchDetector(TableEmbedder(table), threshold=0.5, strict=-1.0, examples=_bike_examples())


def test_an_answer_to_the_assistants_question_is_never_a_switch() -> None:
    detector = SwitchDetector(TableEmbedder({"Can you fix my brakes?": [1.0, 0.0, 0.0, 0.0]}), 0.5, strict=0.9)
    asked = ["Which bike is it, and when did you buy it?"]
    d = detector.decide(SwitchInput("A Cruzo 7 tourer, in the spring", ["Can you fix my brakes?"], asked))
    assert not d.switch and d.follows
    # The same words after an answer that asked nothing: the similarity rule may call it.
    assert detector.decide(SwitchInput("A Cruzo 7 tourer, in the spring", ["Can you fix my brakes?"], ["Done."])).switch


def test_that_as_a_pronoun_refers_back_but_not_as_a_complementiser() -> None:
    detector = _bike_detector({"Do you rent tandem bikes?": [0.0, 0.0, 1.0, 0.0]})
    assert detector.decide(SwitchInput("Can I spread that over three payments?", ["How much is the Cruzo 7?"])).follows
    assert detector.decide(SwitchInput("How much is that?", ["Do you have the Cruzo 7 in red?"])).follows
    # A complementiser ("read that you …") points at nothing earlier.
    assert not detector.decide(
        SwitchInput("I read that tandems come in two sizes, how much per day?", ["Can you fix my brakes?"])
    ).follows


def test_a_pronoun_whose_antecedent_the_question_names_does_not_refer_back() -> None:
    # The question is far from the earlier one (unknown texts lie on the last axis).
    detector = SwitchDetector(TableEmbedder({"Where is my parcel?": [1.0, 0.0, 0.0, 0.0]}), 0.5, strict=0.5)
    d = detector.decide(SwitchInput("My old scooter squeaks, can you look at it?", ["Where is my parcel?"]))
    assert not d.follows and d.switch
    assert detector.decide(SwitchInput("Can you look at it?", ["Where is my parcel?"])).follows


def test_buying_the_product_under_discussion_is_not_a_new_subject() -> None:
    # Phrased exactly like an opening ("Do you rent tandem bikes?" stands for a payment-plan example).
    ask = "Could I get a discount and monthly payments?"
    table = {
        "How heavy is the Cruzo 7?": [1.0, 0.0, 0.0, 0.0],
        "能分期吗": [0.0, 0.0, 1.0, 0.0],
        ask: [0.0, 0.0, 1.0, 0.0],
    }
    detector = _bike_detector(table)
    d = detector.decide(SwitchInput(ask, ["How heavy is the Cruzo 7?"]))
    assert not d.switch and d.follows and "Cruzo 7" in d.reason
    # No product in the conversation: nothing for the question to be about buying.
    assert detector.decide(SwitchInput(ask, ["Can you fix my brakes?"])).switch


def test_a_question_to_the_shop_far_from_the_conversation_is_a_switch() -> None:
    # Phrased like no example (the vague vector), so only the cue and the distance can call it.
    vague = [0.0, 1.0, 0.0, 0.0]  # nearest intent example: the gears (repair), at 0.3
    table = {"Can you fix my brakes?": [1.0, 0.0, 0.0, 0.0], "Do you offer helmet fitting?": vague}
    table["Is helmet fitting cheap?"] = vague
    detector = _bike_detector(table)
    d = detector.decide(SwitchInput("Do you offer helmet fitting?", ["Can you fix my brakes?"], task_intent="delivery"))
    assert d.switch and d.reason.startswith("asks the shop")
    # The cue alone is not enough: without it, or about the task's own business, no switch.
    assert not detector.decide(
        SwitchInput("Is helmet fitting cheap?", ["Can you fix my brakes?"], task_intent="delivery")
    ).switch
    assert not detector.decide(
        SwitchInput("Do you offer helmet fitting?", ["Can you fix my brakes?"], task_intent="repair")
    ).switch


def test_the_tasks_business_includes_the_intents_its_turns_were_taken_for() -> None:
    detector = _bike_detector(
        {"Do you run group rides?": [0.0, 0.0, 1.0, 0.1], "Can you fix my brakes?": [1.0, 0, 0, 0]}
    )
    q, before = "Do you run group rides?", ["Can you fix my brakes?"]
    assert detector.decide(SwitchInput(q, before, task_intent="repair")).switch
    # The task drifted to "repair" on a later turn, but it began as a delivery: its business still.
    assert not detector.decide(SwitchInput(q, before, task_intent="repair", recent_intents={"delivery"})).switch


def test_another_order_number_is_another_task_but_a_correction_or_a_bare_number_is_not() -> None:
    # Near the conversation on purpose (one vector for all): only the order number can call the switch.
    detector = SwitchDetector(TableEmbedder({}), threshold=-1.0, strict=-1.0)
    before = ["Where is order BK2031000777?"]
    d = detector.decide(SwitchInput("Did order BK2031000999 leave the depot yet?", before, ["It is on its way."]))
    assert d.switch and d.new_order == "BK2031000999"
    d = detector.decide(SwitchInput("订单 BK2031000999 什么时候发货", before, ["已发出。"]))
    assert d.switch and d.new_order == "BK2031000999"
    # A correction, a bare number given, or the same order again: the same task.
    assert detector.decide(SwitchInput("Sorry, I meant BK2031000999, where is it?", before)).new_order is None
    assert not detector.decide(SwitchInput("BK2031000999", before)).switch
    assert detector.decide(SwitchInput("订单 BK2031000777 能改地址吗", before)).new_order is None


def test_the_tracker_starts_a_new_task_for_another_order_of_the_same_intent() -> None:
    catalog = load_catalog([ECOMMERCE])
    tracker = TaskTracker(catalog)
    done = TaskState(intent="order_status", slots={"order_no": "BK2031000777"}, done=True)
    other = Recognition(
        IntentScore("order_status", 0.9, {}),
        {"order_status": {"order_no": "BK2031000999"}},
        "offline",
        switch=SwitchDecision(True, "test", new_order="BK2031000999"),
    )
    step = tracker.step(done, "BK2031000999 到哪了", 4, other)
    assert step.new_task and step.state.slots == {"order_no": "BK2031000999"} and step.state.task_started_at_round == 4
    # The order number the open task asked for fills it, however the turn is worded.
    asked = TaskState(intent="return_request", missing=["order_no", "product", "reason"], asked="order_no")
    filled = Recognition(
        IntentScore(None, 0.9, {}),
        {"return_request": {"order_no": "BK2031000999"}},
        "offline",
        switch=SwitchDecision(True, "test", new_order="BK2031000999"),
    )
    step = tracker.step(asked, "BK2031000999, how long will the refund take?", 4, filled)
    assert not step.new_task and step.state.slots == {"order_no": "BK2031000999"}


def test_asking_whether_the_shop_sells_a_new_thing_is_a_switch_even_near_the_conversation() -> None:
    near = [1.0, 0.0, 0.0, 0.0]
    table = {"Can you fix my brakes?": near, "Do you sell kids' balance bikes?": near, "你们有没有卖儿童平衡车": near}
    table["Do you sell them in blue?"] = near
    detector = _bike_detector(table)
    d = detector.decide(
        SwitchInput("Do you sell kids' balance bikes?", ["Can you fix my brakes?"], task_intent="repair")
    )
    assert d.switch and d.reason.startswith("asks whether the shop sells")
    assert detector.decide(SwitchInput("你们有没有卖儿童平衡车", ["能修刹车吗"])).switch
    # What the conversation is about, referred back to: a follow-up.
    assert detector.decide(SwitchInput("Do you sell them in blue?", ["Can you fix my brakes?"])).follows


def test_whether_something_exists_short_questions_and_delivery_ask_about_the_thing_discussed() -> None:
    far = [0.0, 0.0, 1.0, 0.0]  # phrased like an opening ("Do you rent tandem bikes?"), far from the repair
    questions = ["Is there a fee for the loan bike?", "有没有免费的车锁", "Which days closed?", "几号放假"]
    questions += ["Can you deliver to my office on Saturday?"]
    detector = _bike_detector({"Can you fix my brakes?": [1.0, 0.0, 0.0, 0.0], **{q: far for q in questions}})
    for q in questions:
        d = detector.decide(SwitchInput(q, ["Can you fix my brakes?"], task_intent="repair"))
        assert not d.switch, (q, d.reason)
    # Put to the shop ("your stores"), an existential question may open a subject of its own.
    shop = "Are there any of your stores open late on Fridays?"
    detector = _bike_detector({"Can you fix my brakes?": [1.0, 0.0, 0.0, 0.0], shop: [0.0, 1.0, 0.0, 0.0]})
    assert detector.decide(SwitchInput(shop, ["Can you fix my brakes?"], task_intent="delivery")).switch


def test_a_purchase_of_the_customers_own_far_from_the_conversation_is_a_switch() -> None:
    vague = [0.0, 1.0, 0.0, 0.0]  # phrased like no example
    own = ["I ordered mudguards last week and they have not come yet", "My e-bike charger from you gets very hot"]
    table = {"Can you fix my brakes?": [1.0, 0.0, 0.0, 0.0], **{q: vague for q in own}}
    detector = _bike_detector(table)
    for q in own:
        d = detector.decide(SwitchInput(q, ["Can you fix my brakes?"]))
        assert d.switch and d.reason.startswith("brings up a purchase"), (q, d.reason)
    # The same words near the conversation: no switch by this rule.
    near = _bike_detector({"Can you fix my brakes?": [1.0, 0.0, 0.0, 0.0], **{q: [1.0, 0.0, 0.0, 0.0] for q in own}})
    assert not any(near.decide(SwitchInput(q, ["Can you fix my brakes?"])).switch for q in own)


def _sure(
    intent: str | None, slots: dict[str, dict[str, str]], sure: bool = True, announced: bool = False
) -> Recognition:
    decision = SwitchDecision(True, "test", sure=sure, announced=announced)
    return Recognition(IntentScore(intent, 0.9, {}), slots, "offline", switch=decision)


def test_a_sure_switch_starts_a_new_task_of_the_same_intent_unless_it_answers_or_corrects() -> None:
    catalog = load_catalog([ECOMMERCE])
    tracker = TaskTracker(catalog)
    claim = TaskState(
        intent="warranty_claim", slots={"product": "Cruzo 7"}, missing=["purchase_date", "fault"], asked="purchase_date"
    )
    # "Oh, and my daughter's scooter is broken as well": the same kind of request about another thing.
    other = {"warranty_claim": {"product": "Zippa 2"}}
    step = tracker.step(claim, "对了，我女儿的 Zippa 2 滑板车也坏了，能保修吗", 5, _sure("warranty_claim", other))
    assert step.new_task and step.reason == "sure topic switch"
    assert step.state.intent == "warranty_claim" and step.state.slots == {"product": "Zippa 2"}
    assert step.state.task_started_at_round == 5 and "Cruzo 7" in step.state.previous
    # The same turn with a switch the decision is not sure of: the task goes on, as before.
    assert not tracker.step(
        claim, "对了，我女儿的 Zippa 2 滑板车也坏了", 5, _sure("warranty_claim", other, False)
    ).new_task
    # Nothing of the task read, the intent kept: still a new task when sure.
    step = tracker.step(claim, "Separately, my nephew's helmet strap snapped", 5, _sure("warranty_claim", {}))
    assert step.new_task and step.state.intent == "warranty_claim" and step.state.slots == {}
    # The slot the task asked for, given with a side question of its own: an answer.
    dated = {"warranty_claim": {"purchase_date": "2025-01-10"}}
    assert not tracker.step(claim, "2025年1月10日买的，要带发票吗", 5, _sure(None, dated)).new_task
    # A filled slot corrected, in correcting words or as a bare value: the same task.
    fixed = {"warranty_claim": {"product": "Cruzo 8"}}
    step = tracker.step(claim, "Sorry, I meant the Cruzo 8, can you check?", 5, _sure("warranty_claim", fixed))
    assert not step.new_task and step.corrected == ["product"]
    assert not tracker.step(claim, "Cruzo 8", 5, _sure(None, fixed)).new_task
    # A finished task, another thing of the same kind asked about: a new task, not an overwrite.
    done = claim.model_copy(update={"done": True, "missing": [], "asked": None})
    step = tracker.step(done, "By the way, my Cruzo 8 squeaks too, is it covered?", 6, _sure("warranty_claim", fixed))
    assert step.new_task and step.state.slots == {"product": "Cruzo 8"} and step.corrected == []
    step = tracker.step(done, "不对，应该是 Cruzo 8", 6, _sure(None, fixed))
    assert not step.new_task and step.corrected == ["product"]
    # After the task asked, a value of another slot it misses, given as a statement, is an answer too (the
    # slot question need not end in a question mark: "请提供订单号。") — unless a new subject was announced.
    asked = TaskState(intent="warranty_claim", missing=["product", "purchase_date", "fault"], asked="purchase_date")
    assert not tracker.step(asked, "是一辆 Cruzo 8", 2, _sure(None, fixed)).new_task
    announced = _sure(None, {"warranty_claim": {"fault": "链条断了"}}, announced=True)
    assert tracker.step(asked, "另外，我儿子那辆车链条断了", 2, announced).new_task


def test_a_person_of_the_customers_is_no_antecedent_of_it() -> None:
    # Far from the earlier turn (unknown texts lie on the last axis): only a reference can hold it back.
    detector = SwitchDetector(TableEmbedder({"What does the gold service plan cover?": [1, 0, 0, 0]}), 0.5, strict=0.5)
    earlier = ["What does the gold service plan cover?"]
    for q in ("Can my grandson use it as well?", "Could our neighbours join it too?", "我的表弟能用它吗"):
        d = detector.decide(SwitchInput(q, earlier))
        assert d.follows and not d.switch, (q, d.reason)
    # A thing of that person's is what the pronoun stands for.
    assert not detector.decide(SwitchInput("My grandson's scooter rattles, can you look at it?", earlier)).follows


@pytest.mark.parametrize(
    "question",
    [
        "Switching gears: do you run repair workshops?",
        "On a different note, where can I park?",
        "Unrelated, but do you repair scooters?",
        "Totally separate question: gift cards?",
        "While I have you, can I get a receipt for last month?",
        "Another thing: can I book a fitting?",
        "Changing the subject, are you open on holidays?",
        "换个话题，周末有活动吗",
        "跟这个没关系，积分怎么查",
        "还有件事，发票能寄吗",
        "问点别的，门店能停车吗",
        "顺便问下，会员怎么办",
    ],
)
def test_ways_of_announcing_a_new_subject(question: str) -> None:
    detector = SwitchDetector(TableEmbedder({}), threshold=0.5)
    d = detector.decide(SwitchInput(question, ["How heavy is the Cruzo 7?"]))
    assert d.switch and d.sure and d.reason == "announces a new subject", d.reason


def test_phrases_that_do_not_announce_a_new_subject() -> None:
    detector = SwitchDetector(TableEmbedder({}), threshold=-1.0, strict=-1.0)
    for q in ("我没有别的问题了", "One more thing, does it fold?", "Do you have another colour of it?"):
        assert detector.decide(SwitchInput(q, ["How heavy is the Cruzo 7?"])).reason != "announces a new subject", q


def test_a_reference_after_an_announced_subject_points_inside_the_question() -> None:
    detector = SwitchDetector(TableEmbedder({}), threshold=0.5)
    earlier = ["How heavy is the Cruzo 7?"]
    d = detector.decide(SwitchInput("Switching gears: my nephew wants a helmet. Is that in stock?", earlier))
    assert d.switch and d.reason == "announces a new subject"
    d = detector.decide(SwitchInput("顺便问一下，我想给我妈买个车筐。那个能装吗", earlier))
    assert d.switch, d.reason
    # Right after the announcement, or within the clause, it points back.
    assert detector.decide(SwitchInput("By the way, is that still on sale?", earlier)).follows
    assert detector.decide(SwitchInput("Also, can I get an invoice for it?", earlier)).follows


def test_a_buying_question_after_the_customer_decides_to_buy_is_about_that_purchase() -> None:
    # Phrased exactly like an opening (the plain "Do you rent tandem bikes?" example) and far from the turns.
    table = {"How much are the clip-on lights?": [1.0, 0.0, 0.0, 0.0], "How much is shipping?": [0.0, 0.0, 1.0, 0.0]}
    detector = _bike_detector(table)
    d = detector.decide(SwitchInput("How much is shipping?", ["How much are the clip-on lights?", "OK, I'll take two"]))
    assert not d.switch and d.follows and "take two" in d.reason
    # Nothing being bought: the same question may open a subject of its own.
    assert detector.decide(SwitchInput("How much is shipping?", ["Can you fix my brakes?"])).switch
    assert buys_the_product("信用卡能分期吗", ["这款车灯多少钱", "先拿两盏"]) is None  # 盏: not a counter read
    assert buys_the_product("信用卡能分期吗", ["这款车筐多少钱", "先拿两个"]) == "拿两个"
    assert buys_the_product("邮费怎么收", ["我要退货", "不想要了"]) is None


def test_a_switch_that_did_not_earn_clearing_is_reported_and_moves_nothing() -> None:
    """The tracker reads a switch whose decision may not clear (`clears` False: the embedder did not reach the
    bar) as none: the task, its slots and its rounds stay; the step and the state say a switch was detected,
    not cleared, and why."""
    catalog = load_catalog([ECOMMERCE])
    tracker = TaskTracker(catalog)
    claim = TaskState(intent="warranty_claim", slots={"product": "Cruzo 7"}, missing=["purchase_date", "fault"])
    held = SwitchDecision(True, "learned: sure (announce)", sure=True, announced=True, clears=False, kept="not earned")
    rec = Recognition(IntentScore(None, 0.9, {}), {"warranty_claim": {}}, "offline", switch=held)
    step = tracker.step(claim, "By the way, where is your nearest store?", 5, rec)
    assert not step.new_task and step.state.intent == "warranty_claim" and step.state.slots == {"product": "Cruzo 7"}
    assert step.state.task_started_at_round == claim.task_started_at_round
    assert step.switch is not None and not step.switch.cleared and step.switch.round == 5
    assert "not earned" in step.switch.reason and step.state.switch == step.switch
    # The same decision allowed to clear: a new task, said so; the note stays in the state on the next turn.
    cleared = Recognition(rec.candidate, rec.slots, "offline", switch=replace(held, clears=True, kept=""))
    step = tracker.step(claim, "By the way, where is your nearest store?", 5, cleared)
    assert step.new_task and step.switch is not None and step.switch.cleared
    after = tracker.step(step.state, "Is it open on Sundays?", 6, _rec(None, {}))
    assert after.switch is None and after.state.switch == step.switch
    assert after.state.public()["switch"] == {"round": 5, "cleared": True, "reason": "learned: sure (announce)"}
