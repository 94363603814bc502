"""Subjects the rule rewriter must not take, and follow-ups the gate must not call topic switches
(invented shops and wording)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt

from rag_core.settings import RewriteSettings
from rag_service.domain import MemoryView, Message, Round
from rag_service.rewrite import Gate, KnownNames, RuleRewriter, latest_place_first, with_brand
from rag_service.rewrite_rules import Entity, antecedent_inside, attribute_only, content_size, entities, find_marker


def view(*turns: tuple[str, str]) -> MemoryView:
    rounds = tuple(Round(Message("user", q, 1, 0.0), Message("assistant", a, 1, 0.0)) for q, a in turns)
    return MemoryView("", 0, rounds)


class Orthogonal:
    """Every text its own direction: any two questions are dissimilar (similarity 0)."""

    name = "orthogonal"
    dim = 64
    remote = False

    def __init__(self) -> None:
        # An axis per distinct text, in the order met: `hash(text) % dim` made two texts share one in about
        # one process of 64 (str hashes are salted per process), and the test then saw a similar pair.
        self._axes: dict[str, int] = {}

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        axis = self._axes.setdefault(text, len(self._axes))
        assert axis < self.dim, "more distinct texts than axes"
        v = np.zeros(self.dim, dtype=np.float32)
        v[axis] = 1.0
        return v

    def embed_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return np.stack([self.embed_query(t) for t in texts])


def rule(question: str, *turns: tuple[str, str]) -> str:
    return RuleRewriter(RewriteSettings(mode="rule")).rewrite_now(question, view(*turns)).query


def test_a_verb_after_a_subject_is_no_noun_phrase() -> None:
    found = {e.key for e in entities("What if it breaks down after a month?")}
    assert "breaks" not in found
    found = {e.key for e in entities("How much clearance should I keep behind the heater?")}
    assert "heater" in found and not any("keep" in k or "behind" in k for k in found)
    assert "sticky" not in {e.key for e in entities("Could the lid ever be sticky?")}
    # The verb still counts as what the question says of its own.
    assert content_size("Why can't I remove filters?") == 2


def test_it_never_stands_for_a_lone_plural() -> None:
    query = rule("How deep is it?", ("Can your technicians take away my broken dishwasher?", ""))
    assert "technicians" not in query and "dishwasher" in query


def test_they_after_the_thing_asked_for_is_still_a_reference() -> None:
    marker = find_marker("What hours are they staffed?")
    gate = Gate(RewriteSettings())
    decision = gate.decide("What hours are they staffed?", view(("Does anyone answer the phone in French?", "")))
    assert marker is not None and decision.kind == "dependent"


def test_is_this_points_back() -> None:
    assert find_marker("Is this a sensible plan?") is not None
    assert find_marker("Is that still valid?") is not None


def test_a_definite_question_without_a_name_is_no_topic_switch() -> None:
    gate = Gate(RewriteSettings(topic_similarity=0.84), Orthogonal())
    history = view(("Do freelancers have to file their taxes every quarter?", ""))
    assert gate.decide("What are the penalties?", history).kind != "switch"
    # A subject of its own, dissimilar to everything before, still is one.
    assert gate.decide("How do volcanoes form?", history).kind == "switch"


def test_a_device_demonstrative_takes_no_place() -> None:
    query = rule("刚才说的省电那台多少钱", ("苏州那家店晚上几点关门", ""))
    assert "苏州" not in query


def test_another_service_of_the_shop_keeps_no_earlier_subject() -> None:
    # After questions about a receipt, a short question about the hotline is not about the receipt.
    turns = [("增值税发票怎么开", ""), ("发票抬头能改吗", "")]
    result = RuleRewriter(RewriteSettings(mode="rule")).rewrite_now("热线电话几点有人接", view(*turns))
    assert result.query == "热线电话几点有人接" and result.action == "skipped"


def test_the_same_service_still_follows_up() -> None:
    # A store's hours after a question about the store still carry the store's city.
    turns = [("你们在厦门有门店吗", "")]
    query = rule("几点开门", *turns)
    assert "厦门" in query


def test_the_customers_old_appliance_is_not_the_conversations_product() -> None:
    turns = [("How much is the Frostline FX-300 freezer?", ""), ("Does it come in white?", "")]
    query = rule("Will you collect my old freezer? How much?", *turns)
    assert "FX-300" not in query


def test_a_device_demonstrative_with_its_own_name_is_left_alone() -> None:
    query = rule("刚才那台海鸥 X5 多少钱", ("宁波那家店晚上几点关门", ""))
    assert query == "刚才那台海鸥 X5 多少钱"


def test_a_break_word_inside_a_name_keeps_the_name() -> None:
    assert "Ada Week" in {e.text for e in entities("Who was Ada Week married to?")}


def test_the_product_stays_the_topic_over_questions_that_do_not_name_it() -> None:
    turns = [
        ("How much is the Frostline FX-300 freezer?", ""),
        ("Can you deliver at the weekend?", ""),
        ("Which cities get evening deliveries?", ""),
        ("Will you collect my old freezer? How much?", ""),
    ]
    assert "FX-300" in rule("How heavy is it?", *turns)


def test_a_condition_follow_up_carries_the_previous_question() -> None:
    query = rule("办年卡的话呢", ("买咖啡豆有优惠吗", ""))
    assert "咖啡豆" in query and "办年卡" in query
    # A clause of its own is no condition.
    assert rule("觉得他怎么样", ("买咖啡豆有优惠吗", "")) != "买咖啡豆有优惠吗，觉得他的话？"


def test_a_sibling_variant_replaces_the_old_one_not_stacked_on_it() -> None:
    first = ("Brisa 3L Pro 吹风机多少钱", "")
    query = rule("2L 保修多长时间", first, ("噪音多大", ""), ("那 2L 呢", ""))
    assert "3L" not in query and "Brisa" in query and "2L" in query
    query = rule("那入门版多少钱", ("Ventoro 3 Max 风扇多少钱", ""))
    assert "Max" not in query and "Ventoro 3" in query


def test_no_other_variant_keeps_the_product() -> None:
    assert "Ventoro 3 Max" in rule("噪音大吗", ("Ventoro 3 Max 风扇多少钱", ""))


def test_an_attribute_and_its_value_in_an_answer_are_no_product() -> None:
    found = {e.key for e in entities("Lumo 台灯：亮度 400，功率 12 W，单价 259")}
    assert "lumo" in found and not any(ch.isdigit() for k in found for ch in k)
    assert "青禾 15 pro" in {e.key for e in entities("青禾 15 Pro 多少钱")}  # a brand and its model still are


def test_a_lone_attribute_word_is_no_subject() -> None:
    assert "厚度" not in {e.key for e in entities("我家窗户多宽，该选哪个厚度")}
    query = rule("门店能退货吗", ("窗帘该选哪个厚度", ""))
    assert "厚度" not in query


def test_it_after_a_thing_the_customer_bought_stands_for_that_thing() -> None:
    history = ("How much is the Vela K3 blender?", "The Vela K3 blender costs 499 yuan.")
    bought = rule("I bought a desk lamp here last week, never used. Can I send it back?", history)
    opened = rule("Can I return a bottle once it's opened?", history)
    assert "Vela" not in bought and "Vela" not in opened


def test_it_after_a_noun_asked_about_still_points_back() -> None:
    # "a fee", "a warranty": what the question asks for, not a thing the customer has.
    history = ("How much is the Vela K3 blender?", "The Vela K3 blender costs 499 yuan.")
    assert "Vela K3" in rule("Is there a fee if I return it?", history)
    assert "Vela K3" in rule("Is there a warranty on it?", history)


def test_one_as_the_object_of_a_verb_points_back() -> None:
    history = ("Can I get a paper receipt for my order?", "Yes, a paper receipt can be mailed to you.")
    assert "receipt" in rule("How many weeks after buying can I still request one?", history)
    assert "receipt" in rule("Do I need one for a refund?", history)
    # A count, not a reference: "one" before its own noun, or as the subject.
    assert find_marker("Can I order one lamp and two shades?") is None
    assert find_marker("Is one enough for two people?") is None


def test_a_day_or_a_month_is_no_new_subject() -> None:
    history = ("What's the phone number of your Harbourside store?", "The Harbourside store: 0571-5550 1234.")
    assert "Harbourside" in rule("Open at weekends?", history)
    assert "Harbourside" in rule("Still open in December?", history)


def test_a_switch_on_similarity_alone_still_leans_on_the_previous_pages() -> None:
    # The question shares no word with the conversation and the embedder finds it unlike every earlier one,
    # but it names nothing new: the customer may well still be asking about the backpack. It is searched as
    # asked (nothing is glued on) and its retrieval leans on the previous question's pages, which its own
    # words outweigh where another page fits clearly better.
    rules = RuleRewriter(RewriteSettings(mode="rule", topic_similarity=0.84), Orthogonal())
    history = view(("How much is the Torva 35L backpack?", "The Torva 35L costs 499 yuan."))
    kept = rules.rewrite_now("Can a child carry that on school trips?", history)
    assert kept.topic_switch and kept.query == "Can a child carry that on school trips?"
    assert kept.continues == ("How much is the Torva 35L backpack?",)
    # A switch the customer announces, or one to a product the conversation never named, carries nothing.
    assert rules.rewrite_now("Unrelated, but where is your Oslo store?", history).continues == ()
    assert rules.rewrite_now("Do you sell the Kelda 2 tent?", history).continues == ()


def test_he_or_she_never_stands_for_a_product_model() -> None:
    turns = (("My nephew wants the Zipper K7 scooter. What's the top speed?", "The Zipper K7 does 25 km/h."),)
    query = rule("Can he ride it in the rain?", *turns)
    assert "Can he ride" in query and "Zipper K7" in query
    query = rule("Can she wear them all day?", ("How much are the Brightlane Pro reading glasses?", "320 yuan."))
    assert "she" in query
    # A person keeps taking he/she, an inner capital notwithstanding.
    assert "DeMarco grow up" in rule("Where did he grow up?", ("Who wrote the DeMarco songbook?", "Rafe DeMarco."))


def test_a_relative_clause_verb_is_no_noun_phrase() -> None:
    found = {e.key for e in entities("Do you offer a care plan that lists lens cleaning for couples?")}
    assert "care plan" in found and not any("lists" in k for k in found)
    found = {e.key for e in entities("What about the silver card which includes free vouchers?")}
    assert not any("includes" in k for k in found)
    assert "lists" not in rule("Who can sign up for it?", ("Do you have a card that lists free cleanings?", ""))
    # "that" as a determiner keeps its noun.
    assert "strap waterproof" in {e.key for e in entities("Is that strap waterproof?")}


def test_an_attribute_noun_is_no_subject() -> None:
    assert not {e.key for e in entities("远视 300 度的话，也能按度数做吗")}
    assert not {e.key for e in entities("有别的颜色吗")} & {"颜色"}
    # "版本 E7": a label before a model, not the model's brand.
    assert {e.text for e in entities("当前版本 E7 的充电器怎么卖")} & {"E7", "版本 E7"} == {"E7"}


def test_a_switch_on_similarity_alone_keeps_the_conversations_subject() -> None:
    """A differently worded question about use is a switch on similarity only; the product asked about before it
    stays the subject of the follow-ups after it (not a later question's attribute)."""
    rw = RuleRewriter(RewriteSettings(mode="rule"), Orthogonal())
    turns = [
        ("晴川 Wave 泳镜怎么卖", "晴川 Wave 售价 599 元。"),
        ("游泳时能戴吗", "可以。"),
        ("远视 300 度的话，也能按度数做吗", "可以。"),
    ]
    assert rw.rewrite_now("游泳时能戴吗", view(*turns[:1])).topic_switch
    assert "晴川 Wave" in rw.rewrite_now("那款有几种颜色", view(*turns)).query
    # An announced switch still ends what the earlier questions lend.
    turns[1] = ("换个话题，你们门店几点开门", "早 10 点。")
    assert "晴川" not in rw.rewrite_now("那款有几种颜色", view(*turns)).query


def test_a_switch_on_similarity_alone_still_ends_the_topics_product() -> None:
    """After a question about a thing an answer offered, a standalone price question is not about the earlier
    product: only a reference marker takes the earlier subject."""
    rw = RuleRewriter(RewriteSettings(mode="rule"), Orthogonal())
    turns = (
        ("How much is the Glint K4 lens cleaner?", "The Glint K4 is 199 yuan."),
        ("How many wipes come in one pack?", "Ten."),
    )
    assert "K4" not in rw.rewrite_now("What do spare hinge screws cost?", view(*turns)).query


def test_the_weathers_it_is_no_reference() -> None:
    turns = (("How much is the Vento S7 scooter?", "The Vento S7 is 1999 yuan."),)
    assert "if it's freezing" in rule("Does the display still work if it's freezing outside?", *turns)
    assert "if it rains" in rule("Can I ride it if it rains?", *turns)
    assert "Vento S7" in rule("Can I ride it if it rains?", *turns)


def test_a_follow_up_asking_nothing_of_its_own_goes_on_asking_about_the_service() -> None:
    turns = (("My Vento S7 scooter's brake squeaks. Does the warranty cover that?", ""),)
    query = rule("Which papers should I bring along?", *turns)
    assert "warranty" in query and "Vento S7" in query
    assert "租" in rule("到哪儿拿", ("想租两根鱼竿，按天怎么收费", "每天 50 元。"))
    # A follow-up with a concept of its own asks it, whatever the service before.
    assert "分期" not in rule("多少钱", ("晴川 A3 能分期吗", "可以。"))
    assert "warranty" not in rule("Can I pay for it in instalments?", *turns)
    # Something else asked of the product is no question about the service.
    history = ("晴川 Wave 冲锋衣保修几年", "两年。")
    assert "保修" not in rule("可以机洗吗", history)


def test_it_handled_by_hand_is_never_the_customers_city() -> None:
    turns = (
        ("How much is the Vento S7 scooter?", "The Vento S7 is 1999 yuan."),
        ("We are in Suzhou; is delivery free there?", "Delivery to Suzhou is free."),
    )
    query = rule("Can your fitter install it on Friday?", *turns)
    assert "Suzhou" not in query


def test_thanks_is_no_subject_of_a_follow_up() -> None:
    """jieba tags 谢谢 as a person's name: a thanks before the next question made it a "new entity" switch."""
    assert not entities("谢谢！那保修多久")
    assert [e.text for e in entities("谢谢你，Lumo K7 多少钱")] == ["Lumo K7"]
    rw = RuleRewriter(RewriteSettings(mode="rule"), Orthogonal())
    turns = view(("Lumo K7 台灯多少钱", "Lumo K7 售价 299 元。"))
    result = rw.rewrite_now("谢谢！那保修多久", turns)
    assert not result.topic_switch
    assert "Lumo K7" in result.query


def test_a_variant_s_aspect_in_a_contrast_is_the_sibling_s() -> None:
    # "Pro 的…呢" asks the aspect of the product's Pro, not of the product with "Pro" as a noun of its own.
    query = rule("Max 的滤网呢", ("Breezo 5 除湿机换滤网多少钱", "滤网 199 元。"))
    assert query.startswith("Breezo 5 Max 的滤网"), query
    # The product's own variant stays as it is.
    assert rule("Max 的滤网呢", ("Breezo 5 Max 换滤网多少钱", "")).startswith("Breezo 5 Max 的滤网")


def test_a_chinese_brand_with_a_variant_word_is_a_product() -> None:
    # "星川 Max" has no model number: it is still the conversation's product, and a later "Plus 保几年" its sibling.
    turns = (("星川 Max 多少钱", "星川 Max 899 元。"), ("戴着睡觉舒服吗", "舒服。"))
    assert rule("Plus 保几年", *turns).startswith("星川 Plus"), rule("Plus 保几年", *turns)
    # Its standard edition is the brand's own name.
    query = rule("标准版呢", ("星川 Max 的电池能撑几小时", "12 小时。"))
    assert "Max" not in query and query.startswith("星川"), query


def test_that_noun_points_back_to_the_thing_just_asked_not_the_product() -> None:
    turns = (
        ("How much is the Breezo 5 air purifier?", "1299."),
        ("Does it need a yearly filter service first?", "Yes, a filter service is advised."),
    )
    query = rule("What does that service cost?", *turns)
    assert "filter service" in query and "Breezo" not in query, query
    # A noun that ends the product's own name is the product.
    assert rule("How much is that purifier?", ("How much is the Breezo 5 air purifier?", "1299.")).startswith("Breezo")


def test_a_trade_in_follow_up_carries_the_trade_in_not_the_old_item() -> None:
    turns = [("我家有台用了三年的旧冰箱，参加以旧换新折多少", "按成色估价。")]
    first = rule("最高多少", *turns)
    assert first.startswith("以旧换新") and "冰箱" not in first, first
    # And the follow-up after it, which asked by the carried service.
    turns.append(("最高多少", "最高 800 元。"))
    second = RuleRewriter(RewriteSettings(mode="rule"))
    second.rewrite_now("最高多少", view(turns[0]))
    assert second.rewrite_now("换什么能用", view(*turns)).query.startswith("以旧换新")


def test_a_return_question_leans_on_the_previous_pages_another_service_does_not() -> None:
    rules = RuleRewriter(RewriteSettings(mode="rule"))
    history = view(("星川 K2 电热毯多少钱", "299 元。"), ("能定时关机吗", "可以，1 到 8 小时。"))
    returning = rules.rewrite_now("用过了还可以退吗", history)
    assert returning.query == "用过了还可以退吗" and returning.continues, returning
    # A service whose rules a product's page does not write (opening hours) leaves the product's pages.
    assert rules.rewrite_now("周末营业到几点", history).continues == ()


def test_they_after_a_question_that_called_the_product_it_is_that_question_s_plural_noun() -> None:
    turns = (("How much is the Lumo 7 scooter?", "2499 yuan."), ("Can I fit side baskets on it?", "Yes."))
    query = rule("What do they cost?", *turns)
    assert "side baskets" in query and "Lumo" not in query, query
    # A plural asked for is what the answer listed, not what "they" stands for.
    assert rule("What do they cost?", turns[0], ("Which finishes does it come in?", "Red and grey.")).startswith("Lumo")


def test_what_a_follow_up_asks_to_bring_is_part_of_the_service() -> None:
    rules = RuleRewriter(RewriteSettings(mode="rule"))
    history = view(("My Vento S7 scooter's brake squeaks. Is it still under warranty?", "Yes, for two years."))
    # The receipt is what the warranty claim needs, not a question about invoices (another service).
    brought = rules.rewrite_now("Should I bring my receipt with me?", history)
    assert "warranty" in brought.query and brought.continues, brought
    # Asked on its own, the receipt is the invoice service's.
    assert rules.rewrite_now("Can I get a receipt with my company name?", history).continues == ()


def test_he_or_she_is_the_relative_named_earlier_than_the_recent_rounds() -> None:
    turns = [
        ("My brother just bought a Kestrel E2 e-scooter. Does he need a licence?", "No."),
        ("Can your store register it for him?", "Yes."),
        ("How much is the Drift 3 helmet?", "189 yuan."),
        ("Do you have it in black?", "Yes."),
    ]
    query = rule("Can he ride it in the snow?", *turns)
    assert "Drift 3" not in query and "Kestrel" not in query, query


def test_an_old_item_the_customer_also_has_is_no_follow_up_on_the_product() -> None:
    turns = [("我想以旧换新，旧冰箱能抵多少", "按成色估价。"), ("雪峰 B5 够不够", "够。")]
    query = rule("家里还有台旧空调，换新机能抵多少", *turns)
    assert "雪峰" not in query, query
    # A pronoun still points at the product.
    assert "雪峰 B5" in rule("我的旧空调能换这个吗", *turns)


def test_a_bare_that_as_the_object_after_a_service_question_is_that_service() -> None:
    rules = RuleRewriter(RewriteSettings(mode="rule"))
    history = view(("What does the express service for a scooter repair add to the bill?", "80 yuan."))
    pointed = rules.rewrite_now("Could I have that for my e-bike too?", history)
    assert "express service" in pointed.query and "repair" in pointed.query, pointed
    assert pointed.continues, pointed
    history = view(("My neighbour bought a moped. Does he have to register it with the police?", "Yes."))
    assert "regist" in rules.rewrite_now("Will your branch handle that for him?", history).query
    # "that" with a noun of its own, or after a question about a product's aspect, is left to the other rules.
    plain = view(("How heavy is the Vento S7 scooter?", "12 kg."))
    assert not rules.rewrite_now("Will you arrange that for my e-bike as well?", plain).query.startswith("weigh")


def test_another_old_item_in_a_trade_in_conversation_is_for_the_trade_in() -> None:
    turns = [
        ("家里那台旧洗碗机想参加以旧换新，大概折多少", "按成色估价。"),
        ("最高多少", "最高 600 元。"),
        ("雪峰 D7 够不够", "够。"),
    ]
    query = rule("我还有台旧空调，买新机的话能折多少", *turns)
    assert query.startswith("以旧换新") and "雪峰" not in query, query
    # An old item asked about for another service is that service's question.
    assert not rule("我的旧空调坏了，保修能修吗", *turns).startswith("以旧换新")


def test_an_older_noun_phrase_is_no_subject_after_a_question_asked_as_it_stood() -> None:
    # The customer moved on to a branch: the phrase of the question before ("moving flats next") is no subject.
    turns = [
        ("Separate question: I'm moving flats next month. Can you store my kayak for a while?", "Yes."),
        ("Is there a branch near the airport?", "Yes, in Eastgate."),
    ]
    for question in ("And when does it open?", "What's the phone number?"):
        query = rule(question, *turns)
        assert "moving" not in query and "branch" in query, query
    # An instalment follow-up takes the latest question's subject, not the membership asked about twice before.
    turns = [
        ("会员积分可以干什么", "可以抵现。"),
        ("积分抵扣运费可以吗", "不能。"),
        ("白条分期起步金额是多少", "满 800 元。"),
    ]
    for question in ("最多能分几期", "每期费率多少"):
        query = rule(question, *turns)
        assert "会员" not in query and "分期" in query, query
    # A name stays the subject across a policy question asked in between.
    turns = [("How much is the Tundra X5 tent?", "899 yuan."), ("What is your return policy?", "7 days.")]
    assert "Tundra X5" in rule("Can I return it once I've pitched it?", *turns)


def test_a_quantity_an_age_or_a_date_alone_is_no_subject() -> None:
    found = {e.key for e in entities("My terrier is a 6-year-old, and we leave on 3 March. Is the 250ml bottle big?")}
    assert not found & {"6-year-old", "3 march", "250ml"}
    assert "bottle" in found
    assert not {e.key for e in entities("200 毫升 的怎么卖")}
    # "it" is the balm, not the day the customer travels.
    query = rule(
        "If it suits me, can I order a bigger one later?",
        ("We drive north on 22 August. Do you sell a lip balm for cold weather?", "Yes, the Frostguard balm."),
    )
    assert "August" not in query
    assert "balm" in query.lower()


def test_a_bottle_size_after_a_sized_question_replaces_the_size() -> None:
    query = rule(
        "and the 75ml one?",
        ("How much is the Lumera night cream in 40ml?", "The 40ml jar costs 120."),
    )
    assert "75ml" in query and "40ml" not in query
    assert "Lumera" in query and "night cream" in query


def test_no_subject_after_how_nor_of_a_sentence_adverb() -> None:
    found = {e.key for e in entities("How quick is the refill service?")}
    assert "quick" not in found
    assert "refill service" in found
    found = {e.key for e in entities("What is in the repair kit exactly?")}
    assert "repair kit" in found and not any("exactly" in k for k in found)


def test_a_procedure_follow_up_in_words_of_its_own_carries_the_service_asked_for_before() -> None:
    returning = ("Who pays the postage when I return a faulty kettle?", "We do.")
    # Asked in words of its own (where to, by post): still the course of the return.
    assert rule("Where do I post the parcel?", returning).startswith("return ")
    # A question in between that asks for nothing of the glossary's does not end the service.
    aside = ("Would you also cover my burnt fingers?", "No.")
    assert rule("Where do I post the parcel?", returning, aside).startswith("return ")
    # One that asks about something else does.
    other = ("How much is your descaler?", "Nine.")
    assert not rule("Where do I post the parcel?", returning, other).startswith("return")


def test_he_or_she_is_never_a_place_nor_the_product_of_a_customer_with_a_pet() -> None:
    # A city named before: he is someone (here the customer's rabbit), so the city goes in front, not in his place.
    query = rule(
        "When is the latest I can pick him up?",
        ("Does your Ningbo branch look after rabbits over a weekend?", "Yes, for 60 yuan a night."),
    )
    assert "Ningbo" in query and "pick him up" in query
    # The customer named a pet: she is the pet, no product of the conversation takes her place.
    query = rule(
        "She is about 4 kg now. How many scoops a day?",
        ("My kitten keeps sneezing. Is the Brindle Kitten Mix gentle enough?", "It is grain-free."),
    )
    assert query.startswith("She is about 4 kg")
    assert rule("他能用吗", ("我有个室友想买 Vela 8 台灯，多少钱", "Vela 8 售价 199 元。")).startswith("他能用吗")


def test_what_the_customer_says_they_are_is_no_subject() -> None:
    # "我是金叶会员" describes the customer: a later question about the gift box does not take it as its subject.
    found = {e.text for e in entities("我是金叶会员，这个礼袋还要钱吗")}
    assert not any("金叶" in t for t in found)
    found = {e.text for e in entities("外国同事让我在官网帮忙下单，得填哪些信息")}
    assert not found & {"外国", "官网", "信息"}
    # A doubled verb is no noun ("试试"), nor jieba's 要点 of the colloquial 要(一)点.
    found = {e.text for e in entities("下单时顺便要点试用装试试行不行")}
    assert not any("试试" in t or "要点" in t for t in found)


def test_an_announced_question_about_paying_in_instalments_takes_no_product() -> None:
    turns = (("How much is the Orsa 3 kettle in 1.7L?", "The Orsa 3 1.7L costs 459 yuan."),)
    question = "On another note, my basket totals 900 yuan; could that be split over 12 instalments?"
    assert rule(question, *turns) == question
    # Without the announcement "it" still stands for the kettle.
    assert "Orsa 3" in rule("Can I pay for it in 12 instalments?", *turns)


def test_what_was_asked_of_a_store_is_no_subject() -> None:
    # "it" is the branch, not its phone number; an ellipsis goes on about the branch, not the number.
    query = rule(
        "And when does it shut?",
        ("Is the Riverside branch open on holidays?", ""),
        ("What's the hotline?", ""),
    )
    assert "hotline" not in query
    query = rule("开车怎么过去", ("滨江店周六营业到几点", ""), ("电话多少", ""))
    assert "电话" not in query
    assert not attribute_only(Entity("Riverside branch", False)) and attribute_only(Entity("营业时间", False))


def test_the_place_the_latest_question_named_goes_before_an_earlier_one() -> None:
    earlier, tea, latest = Entity("成都", True), Entity("茶叶", False), Entity("昆明店", False)
    assert latest_place_first([earlier, tea, latest], "还有昆明店能自取吗") == [latest, earlier, tea]
    # A latest question naming no place, or only the earlier one, leaves the order as it is.
    assert latest_place_first([earlier, tea, latest], "能自取吗") == [earlier, tea, latest]
    assert latest_place_first([earlier, tea, latest], "成都能自取吗") == [earlier, tea, latest]


def test_a_verb_after_a_contracted_subject_is_no_noun_phrase() -> None:
    found = {e.key for e in entities("Sorry, I'm travelling abroad next week. Can you hold my parcel?")}
    assert not any("travelling" in k for k in found) and "parcel" in found
    assert not any("booked" in k for k in {e.key for e in entities("We’ve booked a fitting, what should we bring?")})


def test_a_bare_model_number_takes_the_brand_the_titles_spell() -> None:
    known = KnownNames(["乐乐（Lele）智能猫砂盆 商品详情", "退换货政策"])
    rewriter = RuleRewriter(RewriteSettings(mode="rule"))
    turns = (("买的乐乐 K3，App 怎么绑定", ""),)
    assert rewriter.rewrite_now("一次能铺多少砂", view(*turns), known).query.startswith("乐乐 K3 ")
    # Named by its model number, it is not put in front a second time.
    assert rewriter.rewrite_now("K3 能连 5G 吗", view(*turns), known).query.count("K3") == 1
    # Without the titles' brand the model number stays as it is.
    plain = RuleRewriter(RewriteSettings(mode="rule"))
    assert plain.rewrite_now("一次能铺多少砂", view(*turns)).query.startswith("K3 ")
    assert with_brand("K3", ["买的乐乐 K3"], known) == "乐乐 K3" and with_brand("K3", ["买的 K3"], known) == "K3"


def test_that_service_is_the_service_asked_for_before() -> None:
    query = rule("Is that service free?", ("Do you do same day delivery to the suburbs?", ""))
    assert "same day" in query
    turns = (("旧平板可以参与以旧换新活动不", ""), ("屏幕有划痕还收吗", ""))
    query = rule("这项服务什么时候结束", *turns)
    assert "以旧换新" in query and query.endswith("这项服务什么时候结束")


def test_that_after_a_clause_of_the_question_points_inside_it() -> None:
    question = "Unrelated: my lips keep cracking in winter. Do you stock anything for that?"
    query = rule(question, ("What does the Breeze 3 humidifier cost?", ""))
    assert "Breeze" not in query
    marker = find_marker("My lips keep cracking, anything for that?")
    assert marker is not None and antecedent_inside("My lips keep cracking, anything for that?", marker, [])
    marker = find_marker("Any charge for that?")
    assert marker is not None and not antecedent_inside("Any charge for that?", marker, [])


def test_a_chinese_noun_takes_the_brand_the_titles_spell_before_it() -> None:
    known = KnownNames(["跳跳（Tiaotiao）冻干猫零食 商品详情", "配送说明"])
    turns = (("家里猫 2 岁，跳跳冻干零食一袋多少钱", ""),)
    query = RuleRewriter(RewriteSettings(mode="rule")).rewrite_now("开封后能放多久", view(*turns), known).query
    assert query == "跳跳冻干零食 开封后能放多久", query
    # Without the titles the brand (read as a verb) is left out.
    plain = RuleRewriter(RewriteSettings(mode="rule")).rewrite_now("开封后能放多久", view(*turns)).query
    assert plain == "冻干零食 开封后能放多久", plain
