"""Topic-switch detection that may clear a task's context, so it must be right when it fires.

By default a learned model decides (`SwitchModel`, `intents.switch_model`): a logistic regression over
`FEATURES` — the rules below, their verdict and each of their signs, and the question's similarities to
the conversation and to the configured examples read as quantiles of the embedder's own distributions, so
one model serves any embedder — trained on labelled development conversations by `rag-eval
train-switches` (rag_service/evaluation/switch_train.py) and shipped as `switch_model.json`. Without it
the rules decide:

A later turn is a switch only when all of these hold:
- it has no reference to the conversation: no marker (它/这个/那…呢/it/they/what about …), no contrast
  follow-up ("那 256GB 呢", "And the 512GB one?"), and enough content of its own ("Price?", "How fast?",
  "要多久" are follow-ups, whatever words they use);
- it shares no topic word with the recent turns (the user's and the answers');
- and then either it is far from every recent user turn (its best cosine lies below the calibrated
  threshold), or it lands in the knowledge base away from the task: the document its nearest chunks
  belong to is not one the task's turns were answered from, and beats the best of those by a margin;
  or (`intents.switch_standalone`, `ExampleSet`) it is phrased like a conversation's opening — as near to
  a configured example as the examples are to each other — far from the recent turns, and not about the
  task's own intent;
- or, in the wording alone, it names an order number the conversation never did (another order is another
  task), asks whether the shop sells a thing never named, or brings up a purchase of the customer's own far
  from the recent turns. A question whether something exists ("Is there a waiting list?") or of a few words
  only asks about the thing discussed.

Similarity to the earlier questions alone cannot tell a switch from a follow-up (with multilingual-e5,
real switches score 0.78-0.86 against the recent turns, ordinary follow-ups 0.78-0.93); where the question
lands can: a follow-up stays on the task's documents (or, elliptic, lands nowhere in particular), a new
subject lands squarely on another document.

The thresholds are the embedder's own: at start, the configured example utterances (intents and plain
knowledge questions) are embedded and the similarities between examples of *different* classes form
the embedder's distribution of unrelated customer-service questions; the threshold is a quantile of it
(`quantile`). A question no nearer to the conversation than most unrelated pairs are to each other has
left the topic. The same quantile gives 0.8x for multilingual-e5 and 0.1x-0.2x for MiniLM, with no
constant tuned for one model. The landing margin is a spread of the same distribution (the median
unrelated pair less its low `margin_quantile`): a document must beat the task's documents by more than
unrelated questions differ among themselves (0.05 for multilingual-e5, 0.11 for MiniLM).
"""

from __future__ import annotations

import json
import re
import statistics
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from rag_core.embedding import Embedder, Vector
from rag_service.facts import products
from rag_service.glossary import CATEGORIES, concepts
from rag_service.intents.recognize import NONE
from rag_service.intents.slots import language, order_numbers
from rag_service.rewrite_rules import (
    Marker,
    antecedent_inside,
    contrast_followup,
    entities,
    find_marker,
    has_subject,
    normalize,
    own_names,
    text_topic_words,
    topic_words,
)

# Chosen on half A of eval/intents/switches.jsonl (docs/intents.md reports half B).
DEFAULT_QUANTILE = 0.9
DEFAULT_STRICT_QUANTILE = 0.25
DEFAULT_MARGIN_QUANTILE = 0.1
# A question is phrased like a conversation's opening when its nearest configured example is as near as
# the examples' own nearest neighbours usually are (their median).
DEFAULT_STANDALONE_QUANTILE = 0.5
RECENT_TURNS = 3
# Different examples of a language with (nearly) the same vector: the embedder does not read that
# language's wording (MiniLM, English-only, gives some Chinese examples 0.99-1.00 to one another;
# multilingual-e5 none above 0.98), so no question of it can be said to be phrased like one of them.
SAME_VECTOR = 0.98
SAME_VECTOR_SHARE = 0.05

# Where a question lands: its nearest chunks of the knowledge base as (document id, score), best first.
Landing = Sequence[tuple[str, float]]

# The task's questions the learned decision compares the question with (the stage reads their intents too).
TASK_QUESTIONS = 8

# The learned decision's inputs, in a fixed order. Each means the same whatever the embedder: similarities
# are quantiles of the embedder's own distributions (of unrelated example pairs, or of the examples' nearest
# neighbours), the rest are the wording's signs (0/1) and the question's size.
FEATURES: tuple[str, ...] = (
    "near_recent",  # best cosine to the last RECENT_TURNS questions, as a quantile of unrelated pairs
    "near_previous",  # cosine to the previous question, likewise
    "near_task",  # best cosine to the task's last TASK_QUESTIONS questions, likewise
    "opening",  # nearest configured example, as a quantile of the examples' own nearest neighbours
    "example_margin",  # how much nearer the question is to its nearest example than to the recent turns, in
    # spreads of the unrelated pairs (their 0.9 less their 0.1 quantile)
    "cohesion",  # how near the task's questions are to their predecessors (median), as a quantile
    "nearest_plain",  # the nearest configured example is a plain knowledge question, not an intent's
    "new_intent",  # the recognizer gives the question an intent none of the task's turns was given
    "task_intent",  # the intent nearest to the question is one of the task's
    "task_words",  # the question names a topic word of the task's intents
    "in_task",  # the conversation's turns were given an intent (there is a task's business)
    "rules",  # the hand-written rules call it a switch
    "answer",  # the assistant asked, the turn asks nothing
    "marker",  # a reference marker (它/这个/…呢/it/what about …)
    "back",  # a place, time or "that" reference
    "contrast",  # a contrast follow-up ("那 256GB 呢")
    "new_order",  # an order number the conversation never named
    "announce",  # "对了", "by the way", with nothing in the rest of the question referring back
    "shared",  # a topic word of the recent turns
    "new_name",  # a product name the recent turns never named
    "new_family",  # a word of the knowledge base's titles (a family of products, a service) no turn of the task named
    "new_category",  # a product category (glossary, either language) no turn of the task named in either language
    "new_title_concept",  # a concept of the knowledge base's title words (either language) no turn of the task named
    "short",  # no subject of its own, or a few words only
    "buys",  # buying words only, after turns naming a product
    "exists",  # asks whether something exists
    "sells",  # asks whether the shop sells something
    "own_purchase",  # brings up a purchase of the customer's own
    "shop",  # addressed to the shop ("你们", "Do you …")
    "asks",  # asks something (not a bare value)
    "zh",  # Chinese
    "unread",  # the embedder does not read the question's language (its similarities say little)
    "length",  # log(1 + words), a Chinese character counting half a word
)

# A learned switch this probable (odds of 100 to 1) is beyond doubt: it starts a new task even when the
# question keeps the task's intent or names one of its slots (another product's fault in a warranty claim,
# another person's purchase), unless it answers the task's question or corrects a slot (`TaskTracker`).
SURE_PROBABILITY = 0.99

# Issue 14's bar: a switch clears the old task's rounds only with an embedder whose tracker reached it out of
# fold on the development data (`SwitchModel.clearing`, set by `rag-eval train-switches`): a false clear
# loses what the customer said, a miss only keeps rounds the model can ignore.
CLEAR_PRECISION = 0.9
CLEAR_RECALL = 0.7

# The trained model shipped with the service (`rag-eval switches --train` writes it).
MODEL_FILE = Path(__file__).with_name("switch_model.json")


@dataclass(frozen=True)
class SwitchModel:
    """A logistic regression over `FEATURES` (standardised), trained on labelled development conversations
    (`rag_service/evaluation/switch_train.py`); a turn is a switch when its probability reaches
    `threshold`, chosen on out-of-fold predictions for precision first — per embedder (`thresholds`, by
    `Embedder.name`) where the training had its rows: the features are embedder-neutral, but how sure the
    model is of one embedder's calls is not (`threshold`, chosen on all rows, serves any other embedder).
    A feature in `vetoes`, when set, decides "not a switch" before the model (a sign no development switch
    carried); one in `forces`, when set (and no veto), decides a sure switch (a sign every development turn
    carrying it was a switch). `clearing`: whether the tracker's switches reached `CLEAR_PRECISION` and
    `CLEAR_RECALL` out of fold with that embedder (by `Embedder.name`): only then may they clear context."""

    features: tuple[str, ...]
    mean: npt.NDArray[np.float64]
    scale: npt.NDArray[np.float64]
    weights: npt.NDArray[np.float64]
    bias: float
    threshold: float
    vetoes: tuple[str, ...] = ()
    forces: tuple[str, ...] = ()
    thresholds: Mapping[str, float] = field(default_factory=dict)
    clearing: Mapping[str, bool] = field(default_factory=dict)

    def __post_init__(self) -> None:
        unknown = [f for f in (*self.features, *self.vetoes, *self.forces) if f not in FEATURES]
        if unknown:
            raise ValueError(f"switch model: unknown features {unknown}")
        n = len(self.features)
        if not (len(self.mean) == len(self.scale) == len(self.weights) == n):
            raise ValueError("switch model: mean, scale and weights need one value per feature")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SwitchModel:
        """The model file's form: one entry per feature (name, weight, and the mean and scale it is
        standardised by), the bias, the threshold, the vetoes and the forcing signs (other keys, such as how it was trained,
        are the reader's)."""
        rows = data["features"]
        return cls(
            tuple(str(f["name"]) for f in rows),
            np.array([f["mean"] for f in rows], dtype=np.float64),
            np.array([f["scale"] for f in rows], dtype=np.float64),
            np.array([f["weight"] for f in rows], dtype=np.float64),
            float(data["bias"]),
            float(data["threshold"]),
            tuple(data.get("vetoes", ())),
            tuple(data.get("forces", ())),
            {str(k): float(v) for k, v in data.get("thresholds", {}).items()},
            {str(k): bool(v) for k, v in data.get("clearing", {}).items()},
        )

    @classmethod
    def load(cls, path: Path = MODEL_FILE) -> SwitchModel:
        return cls.from_dict(json.loads(path.read_text(encoding="utf-8")))

    def to_dict(self) -> dict[str, Any]:
        return {
            "threshold": round(self.threshold, 6),
            "thresholds": {name: round(t, 6) for name, t in sorted(self.thresholds.items())},
            "clearing": dict(sorted(self.clearing.items())),
            "bias": round(self.bias, 6),
            "vetoes": list(self.vetoes),
            "forces": list(self.forces),
            "features": [
                {"name": name, "weight": round(float(w), 6), "mean": round(float(m), 6), "scale": round(float(sc), 6)}
                for name, w, m, sc in zip(self.features, self.weights, self.mean, self.scale, strict=True)
            ],
        }

    def contributions(self, values: Mapping[str, float]) -> npt.NDArray[np.float64]:
        x = np.array([values[f] for f in self.features], dtype=np.float64)
        out: npt.NDArray[np.float64] = self.weights * (x - self.mean) / self.scale
        return out

    def probability(self, values: Mapping[str, float]) -> float:
        return float(1.0 / (1.0 + np.exp(-(self.bias + float(np.sum(self.contributions(values)))))))

    def threshold_for(self, embedder: str | None) -> float:
        """The decision threshold for the embedder (`Embedder.name`) the features were computed with."""
        return self.thresholds.get(embedder, self.threshold) if embedder is not None else self.threshold

    def clears(self, embedder: str | None) -> tuple[bool, str]:
        """Whether the embedder's switches may clear context, and why not when they may not."""
        if embedder is None or embedder not in self.clearing:
            return False, f"no out-of-fold measurement for embedder {embedder}: switches do not clear"
        if not self.clearing[embedder]:
            return False, (
                f"embedder {embedder} did not reach precision >= {CLEAR_PRECISION} and recall >= {CLEAR_RECALL} "
                "out of fold: switches do not clear"
            )
        return True, ""

    def decide(
        self, values: Mapping[str, float], order: str | None = None, embedder: str | None = None
    ) -> SwitchDecision:
        """`order`: the order number the question names that the conversation never did (a switch then
        starts a new task even of the same intent); `embedder`: whose similarities `values` holds (its
        threshold decides)."""
        for name in self.vetoes:
            if values[name]:
                return SwitchDecision(False, f"refers back ({name})", follows=True, probability=0.0)
        for name in self.forces:
            if values[name]:
                return SwitchDecision(
                    True,
                    f"learned: sure ({name})",
                    probability=1.0,
                    new_order=order,
                    sure=True,
                    announced=bool(values.get("announce")),
                )
        parts = self.contributions(values)
        p = float(1.0 / (1.0 + np.exp(-(self.bias + float(np.sum(parts))))))
        top = np.argsort(-np.abs(parts))[:3]
        why = ", ".join(f"{self.features[i]} {float(parts[i]):+.1f}" for i in top)
        threshold = self.threshold_for(embedder)
        switch = p >= threshold
        reason = f"learned: p {p:.2f} {'>=' if switch else '<'} {threshold:.2f} ({why})"
        sure = switch and p >= SURE_PROBABILITY
        announced = switch and bool(values.get("announce"))
        return SwitchDecision(
            switch, reason, probability=p, new_order=order if switch else None, sure=sure, announced=announced
        )


@dataclass(frozen=True, slots=True)
class SwitchDecision:
    switch: bool
    reason: str
    similarity: float | None = None
    # The question refers back (a marker, a contrast, a shared word, too little of its own): nothing
    # else may call it a switch either.
    follows: bool = False
    # How far the document the question lands on beats the task's documents (0: it lands on one of
    # them; None: where it lands was not read).
    away: float | None = None
    # The question is about another order than the conversation's (an order number it never named): a new
    # task even when it is the same intent, not a correction of the task's slot.
    new_order: str | None = None
    # The learned decision's probability of a switch (None: the hand-written rules decided).
    probability: float | None = None
    # The switch is beyond doubt (the learned decision at `SURE_PROBABILITY` or more; the rules: an announced
    # new subject): the tracker starts a new task then even when the question keeps the task's intent or
    # names one of its slots, unless it answers the task's question or corrects a slot.
    sure: bool = False
    # The customer announced the new subject ("对了，…", "Separately, …") and nothing refers back.
    announced: bool = False
    # Whether the switch may clear the old task's rounds (`SwitchDetector.decide` sets it from what the decision
    # earned, `SwitchModel.clears`); `kept`: why it may not. The tracker reads a switch that may not clear as none.
    clears: bool = True
    kept: str = ""


def _quantile(ordered: npt.NDArray[np.float32], value: float) -> float:
    """The share of `ordered` (sorted) below `value`, ties counted half."""
    lo = int(np.searchsorted(ordered, value, side="left"))
    hi = int(np.searchsorted(ordered, value, side="right"))
    return (lo + hi) / (2 * len(ordered)) if len(ordered) else 0.5


def _cos(a: Vector, b: Vector) -> float:
    denom = float(np.linalg.norm(a) * np.linalg.norm(b))
    return float(a @ b) / denom if denom else 0.0


def calibrate_threshold(embedder: Embedder, groups: Sequence[Sequence[str]], quantile: float) -> float:
    """The `quantile` of the cosines between texts of different groups (the embedder's unrelated pairs)."""
    return float(np.quantile(unrelated_similarities(embedder, groups), quantile))


def calibrate_margin(embedder: Embedder, groups: Sequence[Sequence[str]], quantile: float) -> float:
    """How much unrelated pairs differ among themselves: the median cosine less the low `quantile`."""
    sims = unrelated_similarities(embedder, groups)
    return float(np.quantile(sims, 0.5) - np.quantile(sims, quantile))


def unrelated_similarities(embedder: Embedder, groups: Sequence[Sequence[str]]) -> npt.NDArray[np.float32]:
    """The cosines between texts of different groups: the embedder's distribution of unrelated questions."""
    vectors: list[Vector] = []
    labels: list[int] = []
    for g, texts in enumerate(groups):
        for t in texts:
            vectors.append(embedder.embed_query(t))
            labels.append(g)
    if len(set(labels)) < 2:
        raise ValueError("calibrating the switch threshold needs examples of at least two groups")
    m = np.stack(vectors)
    m = m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)
    sims = m @ m.T
    lab = np.array(labels)
    cross: npt.NDArray[np.float32] = sims[lab[:, None] != lab[None, :]]
    return cross


# Words customers use to announce a new subject ("对了，…", "By the way, …", "换个话题", "Switching gears, …",
# "Unrelated, but …", "Another thing: …"): a switch unless the rest of the question refers back. Phrases
# that also say "one more thing about this" ("one more thing", "还有", "something else") are left out.
_ANNOUNCE = re.compile(
    # Chinese: "by the way", "besides / another question or matter", "change the subject", "something
    # else", "unrelated to this", "an aside".
    # ("对了" as "oh, right", not "说对了" / "填对了吗"; "顺便问" as "by the way", not "顺便帮我…": "while you are at
    # it", about the same thing.)
    r"(?<![说做填写答选猜算弄搞讲])对了(?=[，,：:！!。\s])|^\W*对了(?![吗吧么没呀啊嘛])|(?:顺便|顺带)(?:问|说|提|请教|咨询)|另外(?:还|再)?(?:想)?(?:问|请教|咨询)|另外[，,]|另(?:一|外一)?(?:个|件)(?:问题|事)|还有(?:一)?(?:个|件)(?:问题|事)"
    r"|[换转]个(?:话题|问题|事)|换(?:一)?下话题|岔开(?:一下|话题)|说(?:点|个)别的|(?:再)?问(?:点|个|一下)?别的|另问"
    r"|(?:跟|和|与)(?:这个|这|此)(?:没关系|没有关系|无关)|无关的问题|题外话|插(?:一句|个问题)"
    # English: "by the way", "separately", "on another note", "a different / separate / unrelated question",
    # "another question / topic", "switching topics", "changing the subject", "while I have you".
    r"|\bby the way\b|\bbtw\b|\bseparately\b|\bon (?:another|a different|a separate|an unrelated) note\b"
    r"|\b(?:different|separate|unrelated|another|other) (?:question|topic|subject|issue|matter)\b|\bnew (?:question|topic)\b"
    r"|\bunrelated\b|\bnot related\b|\bswitch(?:ing)? (?:topics?|gears|subjects?)\b"
    r"|\bchang(?:e|ing) (?:of |the )?(?:topic|subject)\b|\bwhile I (?:have you|'m here|am here)\b"
    r"|(?:^|[.!?]\s*)(?:oh,?\s+)?(?:and\s+)?another thing\b"
    r"|^also[,:]\s|\balso, (?:can|do|is|are|how|what|where|when)\b",
    re.IGNORECASE,
)


def _announcement(question: str) -> re.Match[str] | None:
    """The words announcing a new subject, when the question goes on to say something of its own ("对了。" alone
    agrees, "Unrelated." alone comments)."""
    announced = _ANNOUNCE.search(question)
    if announced is None:
        return None
    rest = question[announced.end() :]
    return announced if _LATIN_WORD.search(rest) or (_CJK_CHAR.search(rest) and not too_short(rest)) else None


_SENTENCE_END = re.compile(r"[.!?。！？；;]")


def _announced_antecedent(question: str, announced: re.Match[str] | None, at: int) -> bool:
    """Whether a reference at `at`, after an announcement of a new subject, points at what the question
    says after the announcement ("Another thing: my nephew needs a helmet. Is that in stock?") rather than back
    at the conversation: it is in a later sentence than one, after the announcement, with a subject of its
    own (within one clause, "an invoice for it" still refers back)."""
    if announced is None or at < announced.end():
        return False
    ends = [m.start() for m in _SENTENCE_END.finditer(question, announced.end(), at)]
    if not ends:
        return False
    stated = question[announced.end() : ends[-1]].strip(" ,，:：;；.。!！?？-—")
    return bool(stated) and has_subject(stated)


# Place and time references the rewriter's markers leave out ("Can I try it there?", "那边能自提吗"); the
# existential "there" ("Is there a …?", "there are …") refers to nothing.
_BACK = re.compile(
    r"(?<!\bis )(?<!\bare )(?<!\bwas )(?<!\bwere )\bthere\b(?!\s+(?:is|are|was|were)\b|'s)"
    r"|\b(?:then|that one|those|these)\b"
    # "that" after an auxiliary is the subject or object of the question ("Could that be done by Friday?").
    r"|\b(?:will|would|does|did|do|can|could|should|is|was|isn't|doesn't)\s+that\b"
    # "that" standing for the thing discussed: before a preposition or at the end of the clause ("Could we
    # break that up …", "what does that cost?"); a determiner or complementiser is followed by a noun or verb.
    r"|\bthat(?=\s+(?:into|for|over|with|in|on|by|from|as|up|off)\b|\s*[?？.!,，]|\s*$)"
    # An additive "too" / "as well" closing the question ("Could I borrow a pump too?"): in addition to what was
    # discussed, a question about the same business.
    r"|\b(?:too|as well)\s*[?？.!]*\s*$"
    # "one" as the object of getting the thing discussed ("Could I reserve one for Friday?", "Can I order one
    # online?"); "one of your …", "one more" name something else.
    r"|\b(?:pick|get|buy|order|take|reserve|book|try|rent|hire|hold|keep|grab|see)\s+one"
    r"(?=\s*(?:[?？.!,，]|$)|\s+(?:up|in|on|online|today|tomorrow|now|for|from|at|there|here|too|delivered|sent|instead)\b)"
    r"|那里|那边|这边|那儿|这儿|那家|这家|那时|到时",
    re.IGNORECASE,
)


# The customer addresses the shop itself ("你们…", "Do you sell …?", "your stores"): a question about the
# shop's business rather than about the thing being discussed, so it may open a subject of its own when
# it is also far from the recent turns (it is one piece of evidence, never enough alone). Delivery is
# left out: whether the shop delivers or ships somewhere or on some day is nearly always about getting
# the thing being discussed (an order, a purchase, a return), whoever the question is addressed to.
_SHOP = re.compile(
    r"你们|贵店|贵公司"
    r"|\b(?:do|does|can|could|will|would)\s+you\s+(?:guys\s+)?(?:sell|have|stock|carry|offer|accept|take|"
    r"open|provide|issue|support|do|make|repair|fix|buy|rent|hire|lease)\b"
    r"|\byour\s+(?:stores?|shops?|branch(?:es)?|company|website|app|members?(?:hip)?)\b",
    re.IGNORECASE,
)

# A customer correcting a value they gave ("不对，订单号是 …", "Sorry, I meant …"): the same task.
_CORRECTION = re.compile(
    r"不对|错了|写错|打错|输错|搞错|弄错|应该是|更正|改成|改为"
    r"|\bsorry\b|\bI mean\b|\bI meant\b|\bwrong\b|\btypo\b|\bactually\b|\bcorrection\b|\binstead\b",
    re.IGNORECASE,
)


def corrects(question: str) -> bool:
    """Whether the customer says they are correcting something they said ("不对，…", "Sorry, I meant …")."""
    return _CORRECTION.search(question) is not None


# The words that label an order number (what is left of "订单号 XC…" without the number is no subject).
_ORDER_LABEL = re.compile(r"订单(?:编号|号码|号)?|单号|\border(?:\s*(?:no\.?|number|num\.?|id|#))?", re.IGNORECASE)


def new_order(question: str, seen: Sequence[str]) -> str | None:
    """The order number the question names that none of `seen` (the conversation's turns) did, when the
    question is about it rather than only giving it: it asks something or says something of its own
    besides the number ("Order AB… came without its manual"), and corrects nothing. An order number identifies
    a task's object as nothing else does: another one is another task."""
    found = order_numbers(question)
    if not found or _CORRECTION.search(question):
        return None
    known = {o for text in seen for o in order_numbers(text)}
    fresh = [o for o in found if o not in known]
    if not fresh:
        return None
    rest = _ORDER_LABEL.sub(" ", re.sub(re.escape(fresh[0]), " ", question, flags=re.IGNORECASE))
    return fresh[0] if asks(question) or has_subject(rest) else None


# The customer asks whether the shop sells (or rents out) something ("Do you sell …?", "你们有没有卖…", "Can I
# hire …?"): when the question names a thing the conversation never did (no shared word, no reference), that
# thing is a new subject, however near its wording is to the recent turns (the similarity of "do you sell X"
# questions is mostly their shared frame).
_SELLS = re.compile(
    r"\b(?:do|does)\s+you\s+(?:guys\s+)?(?:sell|stock|carry|rent|hire|lease)\b"
    r"|\byou\s+(?:sell|stock|carry|rent|hire|lease)\s*(?:out\s*)?[?？]?\s*$|\bcan\s+I\s+(?:rent|hire|lease)\b"
    r"|有没有(?:在)?[卖租]|有[卖租]|卖不卖|租不租|在卖|出售|出租(?!车)",
    re.IGNORECASE,
)


# A question whether something exists ("Is there a waiting list?", "Any spare keys?", "有备用电池吗", "有没有赠品"):
# whether the thing or service under discussion has it. Unless it names its own product or is put to the
# shop ("你们周末有人值班吗"), it is a follow-up, however far its wording is from the recent turns.
_EXISTS = re.compile(
    r"^\W*(?:(?:is|are)\s+there|any)\b|有没有(?!在?[卖租])|(?<![没还])有[^，,。.？?!！]{1,12}[吗么][？?]?\s*$",
    re.IGNORECASE,
)


# The customer brings up a thing of their own they bought ("We purchased a … in May", "our … we got from
# the shop", "我前几天下单的…", a thing "of my home"): a new object (a new order, a new repair) when the
# conversation never named it.
_OWN_PURCHASE = re.compile(
    r"\b(?:I|we)\s+(?:just\s+|recently\s+)?(?:bought|ordered|purchased)\s+(?!(?:it|them|that|one|online|from|on|in|at|last|yesterday)\b)[a-z]"
    r"|\b(?:my|our)\s+(?:[a-z-]+\s+){0,2}?[a-z-]+\s+(?:from you|(?:I|we)\s+(?:bought|ordered|got))\b"
    r"|我(?:们|家)?[^，,。？?]{0,6}?(?:买|订购|购买|下单|入手)的(?!是|时候|话)|我家的",
    re.IGNORECASE,
)


# A question this short ("几号放假", "Which sizes left?", "Does assembly cost?") cannot say what it is about
# as well as what it asks: whatever its words, it asks about the thing under discussion (a new product it
# names is read before this).
SHORT_WORDS = 3
SHORT_CJK = 4
_CJK_CHAR = re.compile(r"[\u4e00-\u9fff]")
_LATIN_WORD = re.compile(r"[A-Za-z0-9]+")


def too_short(question: str) -> bool:
    """At most `SHORT_WORDS` words (English) or `SHORT_CJK` characters and words (Chinese)."""
    cjk = len(_CJK_CHAR.findall(question))
    words = len(_LATIN_WORD.findall(question))
    return cjk + words <= SHORT_CJK if cjk else words <= SHORT_WORDS


# Words of buying the thing under discussion (paying in instalments, a discount on it): a question made
# only of them, naming nothing else, after turns about a product, is about buying that product
# ("能分期吗" after its price), however much it reads like an opening.
# Paying for it (by card, 花呗) and getting it sent (postage) are part of buying it too.
_PURCHASE_WORD_LIST = """分期 付款 分期付款 优惠 折扣 打折 便宜 价格 现货 库存 免息 首付 月供
    运费 邮费 快递费 信用卡 储蓄卡 花呗 支付宝
    instalment installment instalments installments monthly payment payments discount discounts cheaper
    price stock finance financing shipping postage credit debit card"""
_PURCHASE_WORDS = frozenset(_PURCHASE_WORD_LIST.split())
# The customer deciding to buy the thing discussed, named or not ("要三包", "买两件有赠品吗", "I'll take two",
# "add it to my cart"): what a buying question after it ("邮费多少", "Can I pay by card?") is about.
_PURCHASE_ACT = re.compile(
    r"(?:买|拿|要|来|订|购)了?\s*[一两二三四五六七八九十几\d]+\s*"
    r"(?:个|瓶|盒|副|件|台|双|套|份|支|只|包|箱|对|条|张|把|顶|桶|罐|袋|本|块)"
    r"|就(?:要|买|拿|订)(?:这|那|它)|加(?:入|到)?购物车|(?:我|先)下单"
    r"|\bI(?:'ll| will| would| want to|'d like to| would like to)\s+(?:take|buy|order|get)\s+(?:it|them|this|that|one|two|three|\d+|a\s+(?:pair|box|bottle|pack|couple))\b"
    r"|\b(?:add|put)\s+(?:it|them|this|that|one|two|\d+)\b[^.?!]{0,20}\b(?:cart|basket)\b",
    re.IGNORECASE,
)
# A buying verb with no object after it ("老人买能打折吗", "今天下单值不值"): the object is the thing discussed
# ("买的耳机", "买错了" have one, or say what went wrong).
_BUY_ELLIPSIS = re.compile(r"(?:购买|买|入手)(?=[有能可会要划便送还就是吗呢，,？?]|$)")


# A turn that asks something (not a bare value given as an answer): a question mark, a Chinese question
# particle or word, or an English question's opening word.
_ASKS_ZH = re.compile(r"[吗呢么]|什么|怎么|怎样|如何|多少|多久|几|哪|是否|能不能|可不可以|有没有|是不是|要不要")
_ASKS_EN = re.compile(
    r"^\W*(?:what|how|why|when|where|who|which|is|are|was|were|do|does|did|can|could|should|would|will|may|any)\b",
    re.IGNORECASE,
)


def asks(text: str) -> bool:
    """Whether the turn asks something ("小米 15 Pro 支持快充吗", "Does it …?") rather than states a value."""
    return "?" in text or "？" in text or bool(_ASKS_ZH.search(text)) or bool(_ASKS_EN.search(text))


@dataclass(frozen=True, slots=True)
class ExampleSet:
    """The configured example utterances, as the switch detector reads them. A question phrased as near
    to one of them as they are to their own nearest neighbours (the median) could open a conversation;
    it has left the conversation when it is no nearer to the recent turns than unrelated examples are to
    each other (the `near` quantile of cross-class pairs). Both per language: an embedder scores pairs
    of one language on its own scale (MiniLM: unrelated English pairs ~0.17, Chinese ones ~0.5), which a
    distribution pooled over both languages blurs."""

    matrix: npt.NDArray[np.float32]  # unit rows
    labels: Sequence[str]  # each row's class: an intent's name, or NONE for a plain knowledge question
    # Language ("" for both pooled) -> the nearest-example bar, and the similarity to the conversation
    # below which the question has left it; the stricter of its language's and the pooled one applies.
    standalone: Mapping[str, float]
    near: Mapping[str, float]
    # Languages whose wording the embedder does not read (see `SAME_VECTOR`): the rule is off for them.
    unread: frozenset[str]
    # Each intent's topic words (its examples' and description's).
    words: Mapping[str, frozenset[str]]
    # Language ("" pooled) -> the sorted cosines of unrelated example pairs (different classes) and the
    # sorted cosines of each example to its nearest neighbour: the embedder's own scales, on which the
    # learned detector reads a similarity as a quantile.
    unrelated: Mapping[str, npt.NDArray[np.float32]]
    neighbours: Mapping[str, npt.NDArray[np.float32]]
    # Language -> how much unrelated pairs' cosines differ among themselves (their 0.9 less their 0.1
    # quantile): the embedder's unit for a difference of cosines.
    spreads: Mapping[str, float]

    @classmethod
    def build(
        cls,
        matrix: npt.NDArray[np.float32],
        labels: Sequence[str],
        texts: Sequence[str],
        intent_texts: Mapping[str, Sequence[str]],
        quantile: float = DEFAULT_STANDALONE_QUANTILE,
        near_quantile: float = DEFAULT_QUANTILE,
    ) -> ExampleSet:
        """`texts`: the rows' utterances; `intent_texts`: each intent's examples and description."""
        if len(matrix) < 2 or len(set(labels)) < 2:
            raise ValueError("the switch detector's examples need at least two examples of two classes")
        langs = np.array([language(t) for t in texts])
        classes = np.array(labels)
        standalone: dict[str, float] = {}
        near: dict[str, float] = {}
        unread: set[str] = set()
        unrelated: dict[str, npt.NDArray[np.float32]] = {}
        neighbours: dict[str, npt.NDArray[np.float32]] = {}
        spreads: dict[str, float] = {}

        def calibrate(key: str, rows: npt.NDArray[np.intp]) -> None:
            if len(set(classes[rows].tolist())) < 2:
                return
            sims = matrix[rows] @ matrix[rows].T
            cross = sims[classes[rows][:, None] != classes[rows][None, :]]
            np.fill_diagonal(sims, -np.inf)
            neighbour = sims.max(axis=1)
            if key and float(np.mean(neighbour >= SAME_VECTOR)) > SAME_VECTOR_SHARE:
                unread.add(key)
            standalone[key] = float(np.quantile(neighbour, quantile))
            near[key] = float(np.quantile(cross, near_quantile))
            unrelated[key] = np.sort(cross).astype(np.float32)
            neighbours[key] = np.sort(neighbour).astype(np.float32)
            spreads[key] = max(float(np.quantile(cross, 0.9) - np.quantile(cross, 0.1)), 1e-6)

        calibrate("", np.arange(len(matrix)))
        for lang in sorted(set(langs.tolist())):
            calibrate(lang, np.flatnonzero(langs == lang))
        words = {
            name: frozenset(set().union(*(topic_words(entities(t)) for t in found)))
            for name, found in intent_texts.items()
        }
        return cls(matrix, labels, standalone, near, frozenset(unread), words, unrelated, neighbours, spreads)

    def unrelated_quantile(self, similarity: float, lang: str) -> float:
        """Where `similarity` falls among the unrelated example pairs of the language (0: below all of them,
        1: above all): the same reading whatever the embedder's scale."""
        return _quantile(self.unrelated.get(lang, self.unrelated[""]), similarity)

    def spread(self, lang: str) -> float:
        return self.spreads.get(lang, self.spreads[""])

    def neighbour_quantile(self, similarity: float, lang: str) -> float:
        """Where `similarity` (a question's nearest example) falls among the examples' own nearest neighbours."""
        return _quantile(self.neighbours.get(lang, self.neighbours[""]), similarity)

    def scores(self, vector: Vector) -> npt.NDArray[np.float32]:
        """The question's cosine to every example."""
        sims: npt.NDArray[np.float32] = self.matrix @ (vector / (float(np.linalg.norm(vector)) or 1.0))
        return sims

    def nearest_intent(self, sims: npt.NDArray[np.float32]) -> str | None:
        """The intent whose example is nearest (plain knowledge examples left out), threshold or not."""
        intents = [i for i, label in enumerate(self.labels) if label != NONE]
        return self.labels[max(intents, key=lambda i: float(sims[i]))] if intents else None

    def business_words(self, question: str, names: Collection[str]) -> bool:
        """Whether the question names one of the intents' topic words (their examples' and description's)."""
        words = text_topic_words(question)
        return any(words & self.words.get(name, frozenset()) for name in names)

    def stands_alone(
        self, vector: Vector, question: str, similarity: float, task_intent: str | Collection[str] | None
    ) -> str | None:
        """Why the question opens a new subject (`similarity`: its best cosine to the recent turns), or
        None: it is too near the conversation, its nearest example is not near enough, or (within a
        task) it is about the task's own business: the intent nearest to it is the task's, or it names
        one of the task's words ("How long does a refund take?" in a return)."""
        near = self.far_bar(question)
        if near is None or similarity >= near:
            return None
        lang = language(question)
        # The stricter of the language's own scale and the pooled one: precision first.
        bar = max(self.standalone[""], self.standalone.get(lang, self.standalone[""]))
        sims = self.matrix @ (vector / (float(np.linalg.norm(vector)) or 1.0))
        best = float(np.max(sims))
        if best < bar or self.task_business(sims, question, task_intent):
            return None
        return f"stands alone (nearest example {best:.3f} >= {bar:.3f}), similarity {similarity:.3f} < {near:.3f}"

    def asks_the_shop(
        self, vector: Vector, question: str, similarity: float, task_intent: str | Collection[str] | None
    ) -> str | None:
        """Why a question addressed to the shop ("你们…", "Do you sell …?") opens a new subject: it is also
        as far from the recent turns as unrelated examples are from each other, and not about the task's
        own business (two independent signs agreeing; the cue alone is not enough)."""
        cue = _SHOP.search(question)
        near = self.far_bar(question)
        if cue is None or near is None or similarity >= near:
            return None
        sims = self.matrix @ (vector / (float(np.linalg.norm(vector)) or 1.0))
        if self.task_business(sims, question, task_intent):
            return None
        return f"asks the shop ({cue.group()!r}), similarity {similarity:.3f} < {near:.3f}"

    def far_bar(self, question: str) -> float | None:
        """The similarity to the recent turns below which the question has left them (the looser-scored of
        the language's and the pooled calibration, so the stricter bar), or None: the embedder does not read
        the question's language."""
        lang = language(question)
        if lang in self.unread:
            return None
        return min(self.near[""], self.near.get(lang, self.near[""]))

    def task_business(
        self, sims: npt.NDArray[np.float32], question: str, task_intent: str | Collection[str] | None
    ) -> bool:
        """Whether the question is about the open task's own business: the intent nearest to it is the
        task's (or one the task's recent turns were recognised as: a task drifts when a turn is taken for
        another intent), or it names one of their words."""
        names = {task_intent} if isinstance(task_intent, str) else set(task_intent or ())
        if not names:
            return False
        intents = [i for i, label in enumerate(self.labels) if label != NONE]
        if intents and self.labels[max(intents, key=lambda i: float(sims[i]))] in names:
            return True
        words = text_topic_words(question)
        return any(words & self.words.get(name, frozenset()) for name in names)


@dataclass(frozen=True, slots=True)
class SwitchInput:
    """A later turn as the switch detector reads it: the question and the conversation it follows."""

    question: str
    # The current task's questions and answers, oldest first.
    previous_questions: Sequence[str]
    previous_answers: Sequence[str] = ()
    # The question's embedding (None: embedded here).
    vector: Vector | None = None
    # The question's nearest chunks, and the documents the task's turns were answered from: without both,
    # the knowledge base has no say (read by the rules only).
    landed: Landing | None = None
    task_documents: Collection[str] = ()
    # The task's intent (a question about its own business is not a new subject, however it is phrased),
    # and the intents the task's recent turns were recognised as (its business too).
    task_intent: str | None = None
    recent_intents: Collection[str] = ()
    # The intent the recognizer gives the question, and the knowledge base's title words (`title_words`):
    # read by the learned decision only.
    candidate: str | None = None
    title_words: Collection[str] = ()
    # The glossary's concepts of those title words (`title_concepts`): the same families in either language.
    title_concepts: Collection[str] = ()


class SwitchDetector:
    """`threshold`: below it a question with a new name of its own has left the topic; `strict`: below it
    any question with a subject of its own has (no name needed); `margin`: by this much the document a
    question lands on must beat the task's documents; `model`: the learned decision over the rules' signs
    (None: the rules decide; the model needs `examples`); `clearing`: whether switches may clear context
    (None: as earned — the model's flag for the embedder, never for the rules alone, which did not reach the
    bar; True: always, to measure what the tracker would clear)."""

    def __init__(
        self,
        embedder: Embedder,
        threshold: float,
        strict: float | None = None,
        recent_turns: int = RECENT_TURNS,
        margin: float | None = None,
        examples: ExampleSet | None = None,
        model: SwitchModel | None = None,
        clearing: bool | None = None,
    ) -> None:
        if model is not None and examples is None:
            raise ValueError("the learned switch decision needs the configured examples (ExampleSet)")
        self.embedder, self.threshold, self.recent_turns = embedder, threshold, recent_turns
        self.strict = threshold if strict is None else strict
        self.margin = margin
        self.examples = examples
        self.model = model
        self.clearing = clearing
        # The stage asks before probing the knowledge base and again when deciding: read the wording once.
        self._settled: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], SwitchDecision | None] | None = None

    def settled(
        self, question: str, previous_questions: Sequence[str], previous_answers: Sequence[str] = ()
    ) -> SwitchDecision | None:
        """The decision the wording alone settles (no earlier turn, a reference back, an announced new
        subject, a shared topic word), else None: then similarity and where the question lands decide."""
        key = (question, tuple(previous_questions), tuple(previous_answers))
        if self._settled is not None and self._settled[0] == key:
            return self._settled[1]
        decision = self._settle(question, previous_questions, previous_answers)
        self._settled = (key, decision)
        return decision

    def _settle(
        self, question: str, previous_questions: Sequence[str], previous_answers: Sequence[str]
    ) -> SwitchDecision | None:
        recent = [q for q in previous_questions if q.strip()][-self.recent_turns :]
        if not recent:
            return SwitchDecision(False, "no earlier turn")
        announced = _announcement(question)
        answers = [a for a in previous_answers if a.strip()][-self.recent_turns :]
        if not announced and answers and answers[-1].rstrip().endswith(("?", "？")) and not asks(question):
            # The assistant asked, and the turn asks nothing: it is the customer's answer ("In January").
            return SwitchDecision(False, "answers the assistant's question", follows=True)
        # "Also, …" is an announcement the rewriter reads as a marker: only a marker outside it refers back.
        rest = question
        if announced:
            rest = question[: announced.start()] + " " * len(announced.group()) + question[announced.end() :]
        marker = _marker(question, rest, announced)
        if marker is not None:
            return SwitchDecision(False, f"reference marker {marker.text!r}", follows=True)
        back = _back(question, announced)
        if back is not None:
            return SwitchDecision(False, f"refers back with {back.group()!r}", follows=True)
        if contrast_followup(question) is not None:
            return SwitchDecision(False, "contrast follow-up", follows=True)
        order = new_order(question, [*previous_questions, *previous_answers])
        if order is not None:
            # Before the shared words: "订单"/"order" in both says nothing when the orders differ.
            return SwitchDecision(True, f"names another order {order!r}", new_order=order)
        if announced:
            return SwitchDecision(True, "announces a new subject", sure=True, announced=True)
        words = text_topic_words(question)
        shared = words & set().union(*(text_topic_words(t) for t in [*recent, *answers]))
        if shared:
            return SwitchDecision(False, f"shares {sorted(shared)[0]!r}", follows=True)
        return None

    def decide(self, turn: SwitchInput) -> SwitchDecision:
        """With a model, the model decides on the rules' signs (`features`); else the rules do. A switch says
        whether it may clear context (`clears`)."""
        decision = self._decide(turn)
        if not decision.switch:
            return decision
        clears, kept = self.clears()
        return replace(decision, clears=clears, kept=kept)

    def clears(self) -> tuple[bool, str]:
        """Whether this detector's switches may clear context, and why not when they may not."""
        if self.clearing is not None:
            return self.clearing, "" if self.clearing else "clearing is off"
        if self.model is None:
            return False, "the rules alone did not reach the bar out of fold: switches do not clear"
        return self.model.clears(self.embedder.name)

    def _decide(self, turn: SwitchInput) -> SwitchDecision:
        if self.model is None:
            return self.rules(turn)
        if not [q for q in turn.previous_questions if q.strip()]:
            return SwitchDecision(False, "no earlier turn")
        values = self.features(turn)
        seen = [*turn.previous_questions, *turn.previous_answers]
        order = new_order(turn.question, seen) if values["new_order"] else None
        return self.model.decide(values, order, self.embedder.name)

    def features(self, turn: SwitchInput) -> dict[str, float]:
        """The learned decision's inputs (`FEATURES`): the hand-written rules' verdict and each of their signs
        read on its own, and the question's similarities to the conversation and to the configured examples
        as quantiles of the embedder's own distributions (so they mean the same for any embedder). Where the
        question lands is not read (`landed`, `task_documents`)."""
        if self.examples is None:
            raise ValueError("the learned switch decision needs the configured examples (ExampleSet)")
        examples = self.examples
        question, previous_questions, previous_answers = turn.question, turn.previous_questions, turn.previous_answers
        vector, task_intent, recent_intents = turn.vector, turn.task_intent, turn.recent_intents
        candidate, title_words = turn.candidate, turn.title_words
        questions = [q for q in previous_questions if q.strip()]
        recent = questions[-self.recent_turns :]
        answers = [a for a in previous_answers if a.strip()][-self.recent_turns :]
        rule = self.rules(replace(turn, landed=None, task_documents=()))
        q = vector if vector is not None else self.embedder.embed_query(question)
        task = questions[-TASK_QUESTIONS:]
        vectors = np.stack([self.embedder.embed_query(p) for p in task])
        vectors = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
        sims = (vectors @ (q / (float(np.linalg.norm(q)) or 1.0))).tolist()
        lang = language(question)
        business = {*recent_intents, *([task_intent] if task_intent else [])}
        example_sims = examples.scores(q)
        announced = _announcement(question)
        rest = question
        if announced:
            rest = question[: announced.start()] + " " * len(announced.group()) + question[announced.end() :]
        marker = _marker(question, rest, announced)
        back, contrast = _back(question, announced), contrast_followup(question)
        answers_the_assistant = bool(
            not announced and answers and answers[-1].rstrip().endswith(("?", "？")) and not asks(question)
        )
        words = text_topic_words(question)
        shared = words & set().union(*(text_topic_words(t) for t in [*recent, *answers]))
        seen = normalize(" ".join([*recent, *answers]))
        # Every turn of the task, not only the recent ones: a family named at its start is still its own.
        task_words = set().union(*(text_topic_words(t) for t in [*questions, *previous_answers] if t.strip()))
        new_name = any(
            not order_numbers(p.text) and not p.text[:1].islower() and normalize(p.text) not in seen
            for p in products(question)
        )
        cjk = len(_CJK_CHAR.findall(question))
        latin = len(_LATIN_WORD.findall(question))
        # Concepts in either language, of the question and of every turn of the task: a category or a service
        # the task never named, in any wording, is likely a subject of its own ("air fryer" after "空气炸锅"
        # is not).
        said = frozenset().union(*(concepts(t) for t in [*questions, *previous_answers] if t.strip()))
        fresh = concepts(question) - said
        flag = {True: 1.0, False: 0.0}
        steps = np.sum(vectors[1:] * vectors[:-1], axis=1)
        cohesion = examples.unrelated_quantile(statistics.median(steps.tolist()), lang) if len(steps) else 0.5
        nearest = int(np.argmax(example_sims))
        near = max(sims[-self.recent_turns :])
        values = {
            "near_recent": examples.unrelated_quantile(near, lang),
            "near_previous": examples.unrelated_quantile(sims[-1], lang),
            "near_task": examples.unrelated_quantile(max(sims), lang),
            "opening": examples.neighbour_quantile(float(example_sims[nearest]), lang),
            "example_margin": float(np.clip((float(example_sims[nearest]) - near) / examples.spread(lang), -3.0, 3.0)),
            "cohesion": cohesion,
            "nearest_plain": flag[examples.labels[nearest] == NONE],
            "new_intent": flag[candidate is not None and candidate not in business],
            "task_intent": flag[bool(business) and examples.nearest_intent(example_sims) in business],
            "task_words": flag[examples.business_words(question, business)],
            "in_task": flag[bool(business)],
            "rules": flag[rule.switch],
            "answer": flag[answers_the_assistant],
            "marker": flag[marker is not None],
            "back": flag[back is not None],
            "contrast": flag[contrast is not None],
            "new_order": flag[new_order(question, [*previous_questions, *previous_answers]) is not None],
            # (An announcement the rest of the question does not take back with a reference.)
            "announce": flag[announced is not None and marker is None and back is None and contrast is None],
            "shared": flag[bool(shared)],
            "new_name": flag[new_name],
            "new_family": flag[bool((words & set(title_words)) - task_words)],
            "new_category": flag[bool(fresh & CATEGORIES)],
            "new_title_concept": flag[bool(fresh & set(turn.title_concepts))],
            "short": flag[not has_subject(question) or too_short(question)],
            "buys": flag[buys_the_product(question, [*recent, *answers]) is not None],
            "exists": flag[_EXISTS.search(question) is not None],
            "sells": flag[_SELLS.search(question) is not None],
            "own_purchase": flag[_OWN_PURCHASE.search(question) is not None],
            "shop": flag[_SHOP.search(question) is not None],
            "asks": flag[asks(question)],
            "zh": flag[lang == "zh"],
            "unread": flag[lang in examples.unread],
            "length": float(np.log1p(cjk / 2 + latin)),
        }
        return values

    def rules(self, turn: SwitchInput) -> SwitchDecision:
        """The hand-written rules' decision (see the module's docstring; `candidate` and `title_words` are
        not read)."""
        question, previous_questions, previous_answers = turn.question, turn.previous_questions, turn.previous_answers
        vector, landed, task_documents = turn.vector, turn.landed, turn.task_documents
        task_intent, recent_intents = turn.task_intent, turn.recent_intents
        early = self.settled(question, previous_questions, previous_answers)
        if early is not None:
            return early
        recent = [q for q in previous_questions if q.strip()][-self.recent_turns :]
        answers = [a for a in previous_answers if a.strip()][-self.recent_turns :]
        seen = normalize(" ".join([*recent, *answers]))
        new_names = [
            p.text
            for p in products(question)
            if not order_numbers(p.text) and not p.text[:1].islower() and normalize(p.text) not in seen
        ]
        q = vector if vector is not None else self.embedder.embed_query(question)
        sim = max(_cos(q, self.embedder.embed_query(p)) for p in recent)
        if new_names and sim < self.threshold:
            return SwitchDecision(True, f"new name {new_names[0]!r}, similarity {sim:.3f} < {self.threshold:.3f}", sim)
        if not has_subject(question) or too_short(question):
            return SwitchDecision(False, f"no subject of its own, similarity {sim:.3f}", sim, follows=True)
        buying = buys_the_product(question, [*recent, *answers])
        if buying is not None:
            return SwitchDecision(False, f"about buying {buying!r}, similarity {sim:.3f}", sim, follows=True)
        exists = _EXISTS.search(question)
        if exists is not None and _SHOP.search(question) is None and _SELLS.search(question) is None:
            return SwitchDecision(False, f"asks what the thing discussed has ({exists.group()!r})", sim, follows=True)
        sells = _SELLS.search(question)
        if sells is not None:
            return SwitchDecision(True, f"asks whether the shop sells something new ({sells.group()!r})", sim)
        own = _OWN_PURCHASE.search(question)
        far = self.examples.far_bar(question) if self.examples is not None else None
        if own is not None and far is not None and sim < far:
            # Two signs: a thing of the customer's own the conversation never named, and far from it.
            return SwitchDecision(
                True, f"brings up a purchase of their own ({own.group()!r}), similarity {sim:.3f} < {far:.3f}", sim
            )
        if sim < self.strict:
            return SwitchDecision(True, f"similarity {sim:.3f} < {self.strict:.3f}", sim)
        business = {*recent_intents, *([task_intent] if task_intent else [])}
        alone = self.examples.stands_alone(q, question, sim, business) if self.examples is not None else None
        if alone is not None:
            return SwitchDecision(True, alone, sim)
        shop = self.examples.asks_the_shop(q, question, sim, business) if self.examples is not None else None
        if shop is not None:
            return SwitchDecision(True, shop, sim)
        away = landing_margin(landed, task_documents) if landed and task_documents else None
        margin = away[1] if away is not None else (0.0 if landed and task_documents else None)
        if away is not None and self.margin is not None and away[1] >= self.margin:
            why = f"lands on document {away[0]!r}, {away[1]:.3f} over the task's documents (>= {self.margin:.3f})"
            return SwitchDecision(True, why, sim, away=margin)
        return SwitchDecision(False, f"similarity {sim:.3f}", sim, away=margin)


# People of the customer's ("my cousin", "我的外甥"): not a thing "it"/它 can stand for ("Can my cousin use
# it too?" asks about the thing discussed); "my cousin's bike" is a thing.
_PERSON_WORDS = (
    r"husband|wife|partner|spouse|son|daughter|kids?|child(?:ren)?|baby|mum|mom|mother|dad|father|parents?"
    r"|sisters?|brothers?|siblings?|family|friends?|boyfriend|girlfriend|fianc[ée]e?"
    r"|grand(?:ma|pa|mother|father|parents?|sons?|daughters?|child(?:ren)?|kids?)"
    r"|aunt|uncle|cousin|niece|nephew|colleagues?|co-?workers?|boss|flatmates?|room-?mates?|neighbou?rs?"
)
_ZH_PERSON_WORDS = (
    r"老公|老婆|丈夫|妻子|爱人|先生|太太|儿子|女儿|孩子|小孩|宝宝|妈妈|爸爸|父母|父亲|母亲|姐姐|妹妹|哥哥|弟弟"
    r"|[表堂][兄弟姐妹哥]|孙子|孙女|外孙|外甥|侄子|侄女|男朋友|女朋友|对象|家人|朋友|同学|同事|老板|室友|舍友|邻居"
    r"|爷爷|奶奶|外公|外婆|姥姥|姥爷"
)
# The customer's own thing named before a pronoun ("Our old kettle leaks, will you replace it?",
# "我的音箱没声了，它能换吗").
_OWN_THING = re.compile(
    rf"\b(?:my|our)\s+(?!(?:{_PERSON_WORDS})\b(?!'s))(?:[\w-]+\s+){{0,3}}?[a-z]{{3,}}\b"
    rf"|我的(?!(?:{_ZH_PERSON_WORDS})(?!的))\S{{2,}}",
    re.IGNORECASE,
)


def _marker(question: str, rest: str, announced: re.Match[str] | None) -> Marker | None:
    """The reference marker that points back at the conversation (`rest`: the question without its
    announcement), or None: none, or it points at something the question itself names."""
    marker = find_marker(rest)
    if marker is None:
        return None
    if _carries_antecedent(rest, marker) or (
        marker.start >= 0 and _announced_antecedent(question, announced, marker.start)
    ):
        # "My Zephyr 9 tablet flickers, could you look at it?": the pronoun points inside the question.
        return None
    return marker


def _back(question: str, announced: re.Match[str] | None) -> re.Match[str] | None:
    """The place, time or "that" reference back at the conversation, or None (also when it follows an
    announced new subject the question states)."""
    back = _BACK.search(question)
    return None if back is None or _announced_antecedent(question, announced, back.start()) else back


def _carries_antecedent(question: str, marker: Marker) -> bool:
    """Whether the question's pronoun points at something the question itself names before it."""
    if not marker.pronoun or marker.start < 0:
        return False
    return antecedent_inside(question, marker, own_names(question)) or bool(_OWN_THING.search(question[: marker.start]))


def buys_the_product(question: str, recent: Sequence[str]) -> str | None:
    """The product of the recent turns the question is about buying, or None: the question names no
    product and nothing but buying words ("能分期吗", "Any discount?", "邮费多少"), and a recent turn names a
    product or says the customer is buying the thing discussed ("要三包") — the thing it would buy is that
    one (an ellipsis, however much the question reads like an opening)."""
    if any(not order_numbers(p.text) for p in products(question)):
        return None
    words = text_topic_words(question)
    if not (words and words <= _PURCHASE_WORDS) and _BUY_ELLIPSIS.search(question) is None:
        return None
    for text in reversed(recent):
        named = [p.text for p in products(text) if not order_numbers(p.text)]
        if named:
            return named[0]
        act = _PURCHASE_ACT.search(text)
        if act is not None:
            # A thing with no name the catalogue knows ("护理液", "daily lenses"), being bought.
            return act.group()
    return None


def landing_margin(landed: Landing, task_documents: Collection[str]) -> tuple[str, float] | None:
    """The document the question lands on and how far its best chunk beats the task documents' best one
    (a task document the search did not reach counts at the lowest score it returned); None when the
    question lands on one of the task's documents."""
    if not landed:
        return None
    top, best = landed[0]
    if top in task_documents:
        return None
    task_best = max((score for doc, score in landed if doc in task_documents), default=min(s for _, s in landed))
    return top, best - task_best
