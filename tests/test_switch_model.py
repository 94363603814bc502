"""The learned topic-switch decision: its features (embedder-neutral), the model's decision, the shipped
model's reasonable behaviour and the training's threshold and vetoes (no model download: vectors by hand)."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import numpy.typing as npt
import pytest

from rag_service.evaluation.switch_train import Row, earned, fold_models, threshold_for_precision, train
from rag_service.intents.recognize import NONE
from rag_service.intents.slots import title_concepts, title_words
from rag_service.intents.switch import (
    FEATURES,
    MODEL_FILE,
    SURE_PROBABILITY,
    ExampleSet,
    SwitchDetector,
    SwitchInput,
    SwitchModel,
)

# A piano shop's configured examples (invented): two intents and plain questions, as 4-d vectors.
_PIANO_EXAMPLES = {
    "Can someone tune my upright?": ("tuning", [1.0, 0.0, 0.0, 0.0]),
    "I need a tuner to come next week": ("tuning", [0.9, 0.4, 0.0, 0.0]),
    "Where is my bench delivery?": ("delivery", [0.0, 0.0, 0.0, 1.0]),
    "When does my metronome arrive?": ("delivery", [0.0, 0.3, 0.0, 0.95]),
    "Do you give lessons for adults?": (NONE, [0.0, 0.0, 1.0, 0.0]),
    "Are you open on public holidays?": (NONE, [0.0, 0.35, 0.9, 0.1]),
}

# The conversation and the questions after it.
_TURNS = {
    "How much is the Adagio 88 digital piano?": [0.2, 0.9, 0.1, 0.0],
    "Does it have weighted keys?": [0.25, 0.85, 0.15, 0.0],
    "How loud are its speakers in a small flat?": [0.15, 0.95, 0.0, 0.05],
    "By the way, do you offer lessons for children?": [0.0, -0.4, 1.0, 0.0],
}
_HISTORY = ["How much is the Adagio 88 digital piano?", "Does it have weighted keys?"]
_ANSWERS = ["It is 5,900 yuan.", "Yes, graded hammer action."]


class ScaledEmbedder:
    """Vectors from a table, with a shared component of weight `k` added: every cosine becomes
    (cos + k²) / (1 + k²), a scale like a multilingual model's (unrelated text ~0.8) from one like an
    English model's (~0.1), with the same order."""

    name = "scaled"
    remote = False

    def __init__(self, table: dict[str, list[float]], k: float) -> None:
        self.table, self.k = table, k
        self.dim = 5

    def embed_query(self, text: str) -> npt.NDArray[np.float32]:
        v = np.asarray(self.table.get(text, [0.0, 0.0, 0.0, 0.0]), dtype=np.float64)
        v = v / (np.linalg.norm(v) or 1.0)
        out = np.append(v, self.k) / np.sqrt(1 + self.k**2)
        return out.astype(np.float32)

    def embed_passages(self, texts: Sequence[str]) -> npt.NDArray[np.float32]:
        return np.stack([self.embed_query(t) for t in texts])


def _detector(k: float = 0.0, model: SwitchModel | None = None) -> SwitchDetector:
    emb = ScaledEmbedder({**{t: v for t, (_, v) in _PIANO_EXAMPLES.items()}, **_TURNS}, k)
    texts = list(_PIANO_EXAMPLES)
    matrix = np.stack([emb.embed_query(t) for t in texts])
    labels = [_PIANO_EXAMPLES[t][0] for t in texts]
    intents = {name: [t for t in texts if _PIANO_EXAMPLES[t][0] == name] for name in ("tuning", "delivery")}
    examples = ExampleSet.build(matrix, labels, texts, intents, 0.5, 0.9)
    return SwitchDetector(emb, threshold=0.5, strict=-1.0, examples=examples, model=model)


def test_similarities_are_quantiles_of_the_embedders_own_scale() -> None:
    """The same conversation under two embedders whose cosines differ in scale but not in order gives the
    same similarity features: what the model learns on one embedder means the same on another."""
    near, far = "How loud are its speakers in a small flat?", "By the way, do you offer lessons for children?"
    for question in (near, far):
        plain = _detector(0.0).features(SwitchInput(question, _HISTORY, _ANSWERS))
        scaled = _detector(3.0).features(SwitchInput(question, _HISTORY, _ANSWERS))
        for name in ("near_recent", "near_previous", "near_task", "opening", "cohesion"):
            assert plain[name] == pytest.approx(scaled[name], abs=1e-6), name
            assert 0.0 <= plain[name] <= 1.0
        assert plain["example_margin"] == pytest.approx(scaled["example_margin"], abs=1e-4)
    close = _detector().features(SwitchInput(near, _HISTORY, _ANSWERS))
    away = _detector().features(SwitchInput(far, _HISTORY, _ANSWERS))
    assert close["near_recent"] > away["near_recent"]
    # The announced question is its own configured example's twin: nearer to it than to the conversation.
    assert away["example_margin"] > 0 > close["example_margin"] and away["nearest_plain"] == 1.0


def test_every_feature_is_computed_and_the_signs_read_the_wording() -> None:
    detector = _detector()
    values = detector.features(SwitchInput("By the way, do you offer lessons for children?", _HISTORY, _ANSWERS))
    assert set(values) == set(FEATURES)
    assert values["announce"] == 1.0 and values["shop"] == 1.0 and values["marker"] == 0.0
    # A reply to the assistant's question, asking nothing.
    reply = detector.features(
        SwitchInput("The black one, bought in May", _HISTORY, [*_ANSWERS[:1], "Which finish is it?"])
    )
    assert reply["answer"] == 1.0 and reply["asks"] == 0.0
    # A pronoun pointing back, and a question of a few words.
    assert detector.features(SwitchInput("Does it come in white?", _HISTORY, _ANSWERS))["marker"] == 1.0
    assert detector.features(SwitchInput("Price?", _HISTORY, _ANSWERS))["short"] == 1.0
    # An order number the conversation never named.
    order = detector.features(SwitchInput("Order PN20240518007 never arrived", _HISTORY, _ANSWERS))
    assert order["new_order"] == 1.0
    longer = detector.features(
        SwitchInput("Could you tell me how long the warranty on the digital models lasts?", _HISTORY, _ANSWERS)
    )
    assert longer["length"] > detector.features(SwitchInput("Warranty length?", _HISTORY, _ANSWERS))["length"]


def _toy_model(threshold: float = 0.5) -> SwitchModel:
    # Standardised like a trained one; a far question that announces a subject is a switch.
    features = ("near_recent", "announce", "answer")
    return SwitchModel(
        features,
        mean=np.array([0.5, 0.0, 0.0]),
        scale=np.array([0.25, 1.0, 1.0]),
        weights=np.array([-2.0, 3.0, 0.0]),
        bias=-1.0,
        threshold=threshold,
        vetoes=("answer",),
    )


def test_the_model_decides_by_its_threshold_after_the_vetoes() -> None:
    model = _toy_model()
    far = {"near_recent": 0.1, "announce": 1.0, "answer": 0.0}
    near = {"near_recent": 0.9, "announce": 0.0, "answer": 0.0}
    d = model.decide(far, "PN20240518007")
    assert d.switch and d.probability is not None and d.probability > 0.9 and d.new_order == "PN20240518007"
    assert "announce" in d.reason
    n = model.decide(near, "PN20240518007")
    assert not n.switch and n.new_order is None
    # A veto decides before the model, however far the question.
    vetoed = model.decide({**far, "answer": 1.0})
    assert not vetoed.switch and vetoed.follows
    # A higher threshold calls fewer switches on the same probabilities.
    assert not _toy_model(threshold=0.9999).decide(far).switch
    # Only a switch at odds of 100 to 1 or more is sure (the tracker then starts a new task of any intent).
    assert d.sure and d.probability >= SURE_PROBABILITY
    middling = model.decide({**far, "near_recent": 0.5})
    assert middling.switch and middling.probability is not None and middling.probability < SURE_PROBABILITY
    assert not middling.sure


def test_the_model_file_round_trips_and_names_only_known_features() -> None:
    model = _toy_model()
    again = SwitchModel.from_dict(model.to_dict())
    values = {"near_recent": 0.3, "announce": 1.0, "answer": 0.0}
    assert again.probability(values) == pytest.approx(model.probability(values), abs=1e-6)
    bad = {**model.to_dict(), "features": [{"name": "mood", "weight": 1.0, "mean": 0.0, "scale": 1.0}]}
    with pytest.raises(ValueError, match="unknown features"):
        SwitchModel.from_dict(bad)


def test_the_detector_with_a_model_reads_the_examples_and_decides_by_it() -> None:
    detector = _detector(model=_toy_model())
    assert not detector.decide(SwitchInput("Does it come in white?", [], [])).switch  # no earlier turn
    switched = detector.decide(SwitchInput("By the way, do you offer lessons for children?", _HISTORY, _ANSWERS))
    assert switched.switch and switched.probability is not None
    reply = detector.decide(
        SwitchInput("The black one, bought in May", _HISTORY, [*_ANSWERS[:1], "Which finish is it?"])
    )
    assert not reply.switch and reply.follows
    with pytest.raises(ValueError, match="examples"):
        SwitchDetector(ScaledEmbedder({}, 0.0), 0.5, model=_toy_model())


def _values(**set_: float) -> dict[str, float]:
    base = dict.fromkeys(FEATURES, 0.0)
    base.update(set_)
    return base


def test_the_shipped_model_separates_a_plain_follow_up_from_an_announced_new_subject() -> None:
    """Not its weights: what any reasonable model trained on labelled conversations must do."""
    model = SwitchModel.load(MODEL_FILE)
    assert set(model.features) <= set(FEATURES) and 0.0 < model.threshold < 1.0
    follow_up = _values(
        near_recent=0.97, near_previous=0.97, near_task=0.97, opening=0.1, example_margin=-2.0, cohesion=0.6,
        marker=1.0, shared=1.0, short=1.0, asks=1.0, length=1.1, in_task=1.0, task_intent=1.0,
    )  # fmt: skip
    new_subject = _values(
        near_recent=0.02, near_previous=0.02, near_task=0.02, opening=0.95, example_margin=2.5, cohesion=0.6,
        rules=1.0, announce=1.0, shop=1.0, asks=1.0, length=2.6, nearest_plain=1.0,
    )  # fmt: skip
    assert not model.decide(follow_up).switch
    assert model.decide(new_subject).switch
    # An answer to the assistant's question is never a switch (a veto, or weights that say so).
    assert not model.decide({**new_subject, "answer": 1.0, "asks": 0.0, "rules": 0.0}).switch


def test_the_threshold_is_the_one_finding_most_switches_at_the_precision_asked() -> None:
    p = np.array([0.99, 0.95, 0.9, 0.8, 0.7, 0.6, 0.0])
    gold = np.array([True, True, False, True, True, False, True])
    # At 0.7: 4 of 5 called are switches (0.8); at 0.95: 2 of 2.
    assert threshold_for_precision(p, gold, 0.8) == pytest.approx(0.7)
    assert threshold_for_precision(p, gold, 0.95) == pytest.approx(0.95)
    # No threshold reaches it: nothing is called a switch.
    assert threshold_for_precision(np.array([0.9, 0.8]), np.array([False, True]), 0.95) == 1.0


def _row(conversation: str, gold: bool, near: float, answer: float = 0.0, turn: int = 1) -> Row:
    values = _values(near_recent=near, near_previous=near, near_task=near, answer=answer, length=1.5)
    return Row("invented", conversation, turn, f"q{turn}", gold, "table", values)


def _synthetic_rows(
    rng: np.random.Generator,
    conversations: int,
    switch_turns: tuple[int, ...],
    switch_near: float,
    noise: float,
    answer_turn: int | None = None,
) -> list[Row]:
    """Six later turns per conversation; a switch's similarity to the conversation centres on `switch_near`, a
    follow-up's on 0.7, each with normal `noise`; the turn `answer_turn` answers the assistant's question."""
    rows: list[Row] = []
    for c in range(conversations):
        for t in range(1, 7):
            gold = t in switch_turns
            near = float(np.clip((switch_near if gold else 0.7) + rng.normal(0, noise), 0, 1))
            rows.append(_row(f"c{c}", gold, near, answer=1.0 if t == answer_turn else 0.0, turn=t))
    return rows


def test_training_keeps_conversations_whole_and_makes_a_never_switching_sign_a_veto() -> None:
    rows = _synthetic_rows(np.random.default_rng(7), 40, (4,), 0.15, 0.12, answer_turn=2)
    training = train(rows, precision=0.9, folds=4)
    assert training.model.vetoes == ("answer",)
    # Every conversation in one fold only; out-of-fold probabilities for every turn not vetoed.
    assert set(training.folds) == {f"invented/c{c}" for c in range(40)}
    vetoed = np.array([r.values["answer"] == 1.0 for r in rows])
    assert np.all(training.oof[vetoed] == 0.0) and np.all(training.oof[~vetoed] > 0.0)
    weights = dict(zip(training.model.features, training.model.weights, strict=True))
    assert weights["near_recent"] < 0  # farther from the conversation, more likely a switch
    gold = np.array([r.gold for r in rows])
    called = training.oof >= training.model.threshold
    assert called.sum() > 0 and (called & gold).sum() / called.sum() >= 0.9
    assert len(fold_models(training)) == 4


def test_a_sign_every_development_turn_of_which_is_a_switch_forces_a_sure_one() -> None:
    rows = _synthetic_rows(np.random.default_rng(11), 40, (3, 5), 0.2, 0.15)
    for row in rows:
        # Every announced turn is a switch, however near its wording is to the conversation.
        row.values["announce"] = 1.0 if row.turn == 5 else 0.0
    training = train(rows, precision=0.9, folds=4)
    assert training.model.forces == ("announce",)
    announced = np.array([r.values["announce"] == 1.0 for r in rows])
    assert np.all(training.oof[announced] == 1.0)
    d = training.model.decide(_values(announce=1.0, near_recent=0.95, near_previous=0.95, near_task=0.95))
    assert d.switch and d.sure and d.probability == 1.0
    # The file keeps it; a veto still wins over it.
    again = SwitchModel.from_dict(training.model.to_dict())
    assert again.forces == ("announce",)
    vetoing = SwitchModel(
        again.features, again.mean, again.scale, again.weights, again.bias, 0.5, ("answer",), ("announce",)
    )
    assert not vetoing.decide(_values(announce=1.0, answer=1.0)).switch
    # One announced turn (the first turn of a conversation, t = 1) that was no switch: no forcing sign then.
    rows[0].values["announce"] = 1.0
    assert train(rows, precision=0.9, folds=4).model.forces == ()


def test_each_embedder_decides_by_its_own_threshold_and_others_by_the_common_one() -> None:
    base = _toy_model(threshold=0.5)
    model = SwitchModel(
        base.features, base.mean, base.scale, base.weights, base.bias, 0.5, base.vetoes, thresholds={"strict": 0.95}
    )
    middling = {"near_recent": 0.3, "announce": 0.0, "answer": 0.0}  # p ~0.62
    assert model.decide(middling).switch and model.decide(middling, embedder="lenient").switch
    strict = model.decide(middling, embedder="strict")
    assert not strict.switch and "0.95" in strict.reason
    # The file keeps the per-embedder thresholds.
    again = SwitchModel.from_dict(model.to_dict())
    assert again.threshold_for("strict") == pytest.approx(0.95) and again.threshold_for(None) == pytest.approx(0.5)
    # The detector passes its embedder's name: a model strict for it calls no middling switch.
    detector = _detector(model=SwitchModel(*_fields(base), thresholds={ScaledEmbedder.name: 0.9999}))
    assert not detector.decide(SwitchInput("By the way, do you offer lessons for children?", _HISTORY, _ANSWERS)).switch
    assert (
        _detector(model=base)
        .decide(SwitchInput("By the way, do you offer lessons for children?", _HISTORY, _ANSWERS))
        .switch
    )


def _fields(m: SwitchModel) -> tuple[object, ...]:
    return (m.features, m.mean, m.scale, m.weights, m.bias, m.threshold, m.vetoes, m.forces)


def test_training_chooses_a_threshold_per_embedder_on_its_own_rows() -> None:
    """Two embedders whose similarities separate switches differently well: each gets the threshold that
    keeps the precision asked on its own out-of-fold calls."""
    rng = np.random.default_rng(3)
    rows = [
        Row(r.dataset, r.conversation, r.turn, r.question, r.gold, name, r.values)
        for name, noise in (("sharp", 0.08), ("blurry", 0.22))
        for r in _synthetic_rows(rng, 40, (4,), 0.2, noise)
    ]
    training = train(rows, precision=0.9, folds=4)
    assert set(training.model.thresholds) == {"sharp", "blurry"}
    gold = np.array([r.gold for r in rows])
    for name in ("sharp", "blurry"):
        own = np.array([r.embedder == name for r in rows])
        called = own & (training.oof >= training.model.threshold_for(name))
        assert called.sum() > 0 and (called & gold).sum() / called.sum() >= 0.9
    assert train(rows, precision=0.9, folds=4, per_embedder=False).model.thresholds == {}
    # The fold models carry them (the tracker is scored out of fold with them).
    assert all(m.thresholds == training.model.thresholds for m in fold_models(training).values())


def test_a_family_of_the_knowledge_bases_titles_the_task_never_named_is_a_sign() -> None:
    # An invented piano shop's titles: the shop's name and the page kind are in many, not a family.
    titles = [
        "Adagio Digital Pianos - Harmonia Music",
        "Metronomes and Tuners - Harmonia Music",
        "Lesson Programme - Harmonia Music",
        "Harmonia Music Returns Policy",
    ]
    words = title_words(titles)
    assert {"metronome", "lesson"} <= words and "harmonia" not in words and "music" not in words
    detector = _detector()
    new = detector.features(SwitchInput("Which metronome is the quietest?", _HISTORY, _ANSWERS, title_words=words))
    assert new["new_family"] == 1.0
    # Named earlier in the task (here in an answer), it is the task's own family; without titles, no sign.
    named = detector.features(
        SwitchInput(
            "Which metronome is the quietest?",
            _HISTORY,
            [_ANSWERS[0], "It comes with a metronome app."],
            title_words=words,
        )
    )
    assert named["new_family"] == 0.0
    assert detector.features(SwitchInput("Which metronome is the quietest?", _HISTORY, _ANSWERS))["new_family"] == 0.0


def test_the_threshold_is_chosen_on_the_calls_of_every_deal_of_conversations_to_folds() -> None:
    rows = _synthetic_rows(np.random.default_rng(5), 30, (4,), 0.3, 0.2)
    once = train(rows, precision=0.9, folds=3, seed=4, repeats=1)
    thrice = train(rows, precision=0.9, folds=3, seed=4, repeats=3)
    # The first deal is the one reported either way.
    assert np.array_equal(once.oof, thrice.oof) and once.folds == thrice.folds
    deals = [train(rows, precision=0.9, folds=3, seed=4 + r, repeats=1).oof for r in range(3)]
    gold = np.array([r.gold for r in rows])
    expected = threshold_for_precision(np.concatenate(deals), np.tile(gold, 3), 0.9)
    assert thrice.model.threshold == pytest.approx(expected)
    assert thrice.model.threshold_for("table") == pytest.approx(expected)  # one embedder: the same rows


def test_the_development_sets_load_and_leave_the_held_out_sets_out() -> None:
    from rag_service.evaluation.intent_eval import load_switches
    from rag_service.evaluation.switch_train import DEV_SETS

    held_out = {"switches_check", "switches_bikeshop", "switches_petshop"}
    ids: set[str] = set()
    for dataset in DEV_SETS:
        assert dataset.path.stem not in held_out
        assert dataset.path.stem != "switches" or dataset.half == "A"  # half B is held out
        assert dataset.kb is not None and dataset.kb.is_dir()
        conversations = load_switches(dataset.path)  # raises on a later turn without a label
        assert conversations and any(t.switch for c in conversations for t in c.turns[1:])
        names = {f"{dataset.path.stem}/{c.id}" for c in conversations}
        assert len(names) == len(conversations) and not names & ids
        ids |= names


def test_a_category_the_task_never_named_in_either_language_is_a_sign() -> None:
    detector = _detector()

    def sign(question: str, questions: Sequence[str], answers: Sequence[str]) -> float:
        return detector.features(SwitchInput(question, questions, answers))["new_category"]

    # A kitchen shop's conversation (invented) about one appliance, named in Chinese.
    asked, told = ["琴韵 3 号空气炸锅多大容量"], ["5 升，适合三到四口人。"]
    # The same appliance named in English is the task's own; another category is new, in either language.
    assert sign("Does the air fryer have a timer?", asked, told) == 0.0
    assert sign("Do you have a rice cooker with a steamer?", asked, told) == 1.0
    assert sign("电饭煲有带蒸笼的吗", asked, told) == 1.0
    # A policy is no product category.
    assert sign("Do you deliver on Saturdays?", asked, told) == 0.0
    # Named earlier in the task (here in an answer, in the other language), it is no longer new.
    assert sign("Do you have a rice cooker with a steamer?", asked, ["5 升，也可以搭配电饭煲。"]) == 0.0


def test_a_family_of_the_titles_named_in_the_other_language_is_a_sign() -> None:
    # An invented kitchen shop whose titles are Chinese; the customer writes English.
    titles = ["琴韵电饭煲 5 升 - 厨好家", "琴韵微波炉 20 升 - 厨好家", "退换货政策 - 厨好家", "会员说明 - 厨好家"]
    words = title_words(titles)
    known = title_concepts(words)
    assert {"rice_cooker", "microwave", "member", "return"} <= known
    detector = _detector()
    asked = ["琴韵电饭煲 5 升多少钱"]

    def sign(question: str, answers: Sequence[str]) -> float:
        turn = SwitchInput(question, asked, answers, title_words=words, title_concepts=known)
        return detector.features(turn)["new_title_concept"]

    assert sign("Is the microwave easy to clean?", ["499 元。"]) == 1.0
    # The title words are Chinese: the word sign misses what the concept sign finds.
    plain = SwitchInput("Is the microwave easy to clean?", asked, ["499 元。"], title_words=words)
    assert detector.features(plain)["new_family"] == 0.0
    # The task's own family in the other language is not new; nor is one the titles do not name.
    assert sign("Does the rice cooker keep food warm?", ["499 元。"]) == 0.0
    assert sign("Is the blender easy to clean?", ["499 元。"]) == 0.0
    assert sign("Is the microwave easy to clean?", ["499 元，比微波炉贵。"]) == 0.0


def test_switches_clear_only_with_an_embedder_whose_tracker_earned_it() -> None:
    """The model keeps, per embedder, whether its switches may clear; the detector's switches say so (and why
    not), for an embedder measured below the bar, one never measured, and the rules alone."""
    base = _toy_model()
    model = SwitchModel(*_fields(base), clearing={ScaledEmbedder.name: True, "blurry": False})
    again = SwitchModel.from_dict(model.to_dict())
    assert again.clearing == {ScaledEmbedder.name: True, "blurry": False}
    assert again.clears(ScaledEmbedder.name) == (True, "")
    assert not again.clears("blurry")[0] and "did not reach" in again.clears("blurry")[1]
    assert not again.clears("unseen")[0] and "no out-of-fold measurement" in again.clears("unseen")[1]
    question = "By the way, do you offer lessons for children?"
    d = _detector(model=model).decide(SwitchInput(question, _HISTORY, _ANSWERS))
    assert d.switch and d.clears and d.kept == ""
    unearned = SwitchModel(*_fields(base), clearing={ScaledEmbedder.name: False})
    d = _detector(model=unearned).decide(SwitchInput(question, _HISTORY, _ANSWERS))
    assert d.switch and not d.clears and "did not reach" in d.kept
    d = _detector(model=base).decide(SwitchInput(question, _HISTORY, _ANSWERS))
    assert d.switch and not d.clears and "no out-of-fold measurement" in d.kept
    # A follow-up is no switch: nothing to clear or keep.
    near = "How loud are its speakers in a small flat?"
    follow = _detector(model=unearned).decide(SwitchInput(near, _HISTORY, _ANSWERS))
    assert not follow.switch and follow.kept == ""


def test_the_trainings_clearing_flag_follows_the_out_of_fold_tracker_numbers() -> None:
    # (issue 14's bar: precision >= 0.9 and recall >= 0.7, both.)
    assert earned({"precision": 0.955, "recall": 0.734})
    assert earned({"precision": 0.9, "recall": 0.7})
    assert not earned({"precision": 0.960, "recall": 0.561})
    assert not earned({"precision": 0.89, "recall": 0.95})
