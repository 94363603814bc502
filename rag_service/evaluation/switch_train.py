"""Training the learned topic-switch decision (`rag_service.intents.switch.SwitchModel`).

Rows: every later turn of labelled development conversations (`eval/intents/switches*.jsonl` format), its
features (`SwitchDetector.features`) computed with each embedder named, in the state the conversation is
in when the tracker moves on the gold labels (the state a perfect detector leaves: the current task's
rounds, its intents). Features are embedder-neutral (quantiles of the embedder's own distributions, signs
of the wording), so one model serves every embedder; the rows of all embedders are pooled.

Model: logistic regression (scikit-learn) on standardised features. Features that, when set, never
come with a switch on the development data (and are set on enough turns to say so) become hard vetoes:
those turns are decided "not a switch" before the model and are left out of its fit; likewise a sign that
always comes with one (an announced new subject) decides a sure switch. The decision
threshold is chosen on out-of-fold probabilities (cross-validation grouped by conversation, so turns of one
conversation, under any embedder, are never both fitted and scored) as the lowest that keeps precision at
`precision` or above — a false clear costs more than a miss.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from rag_core.embedding import Embedder
from rag_core.settings import IntentSettings, RewriteSettings
from rag_core.tokens import TokenCounter
from rag_service.domain import Round
from rag_service.evaluation.intent_eval import SwitchConversation, SwitchScores, load_switches
from rag_service.evaluation.retrieval_eval import split_half
from rag_service.intents.config import IntentCatalog
from rag_service.intents.stage import IntentStage
from rag_service.intents.switch import (
    CLEAR_PRECISION,
    CLEAR_RECALL,
    DEFAULT_STANDALONE_QUANTILE,
    FEATURES,
    SwitchDecision,
    SwitchDetector,
    SwitchInput,
    SwitchModel,
    new_order,
)
from rag_service.intents.task import TaskState
from rag_service.rewrite import Gate, RuleRewriter

# A flag is a hard veto when it is set on at least this many development turns and none is a switch.
VETO_MIN_TURNS = 20
# Candidate vetoes: the signs that the question refers back to the conversation.
VETO_CANDIDATES = ("answer", "marker", "back", "contrast")
# Candidate forcing signs (a sure switch when set on at least VETO_MIN_TURNS development turns, every one a
# switch): the customer saying the subject changes.
FORCE_CANDIDATES = ("announce",)
DEFAULT_PRECISION = 0.95
DEFAULT_FOLDS = 5
DEFAULT_REPEATS = 5
DEFAULT_C = 1.0


@dataclass(frozen=True)
class DevSet:
    """A labelled development set: its file, the half of it to use (None: all), its knowledge base."""

    path: Path
    half: str | None = None
    kb: Path | None = None

    @property
    def name(self) -> str:
        return self.path.stem + (f"-{self.half}" if self.half else "")


# The development sets the shipped model is trained on (none of the held-out sets: half B of switches.jsonl,
# switches_check.jsonl), each with the knowledge base whose titles name its products. The optical shop's set,
# held out for one round, is development data since (written by someone who never saw the detector, over a
# fourth business). dev8-dev10: a second set over each of those three shops, for more and more varied shapes
# (switches early and late, two in one conversation, conversations without one, side questions of a task).
DEV_SETS: tuple[DevSet, ...] = (
    DevSet(Path("eval/intents/switches.jsonl"), "A", Path("examples/kb")),
    *(
        DevSet(Path(f"eval/intents/switches_{name}.jsonl"), None, Path("examples/kb"))
        for name in ("dev", "dev2", "dev3", "dev4", "dev5")
    ),
    DevSet(Path("eval/intents/switches_dev6.jsonl"), None, Path("eval/answers/homeshop/kb")),
    DevSet(Path("eval/intents/switches_dev7.jsonl"), None, Path("eval/answers/outdoorshop/kb")),
    DevSet(Path("eval/intents/switches_opticalshop.jsonl"), None, Path("eval/answers/opticalshop/kb")),
    DevSet(Path("eval/intents/switches_dev8.jsonl"), None, Path("eval/answers/homeshop/kb")),
    DevSet(Path("eval/intents/switches_dev9.jsonl"), None, Path("eval/answers/outdoorshop/kb")),
    DevSet(Path("eval/intents/switches_dev10.jsonl"), None, Path("eval/answers/opticalshop/kb")),
)


@dataclass(frozen=True)
class Row:
    dataset: str
    conversation: str
    turn: int
    question: str
    gold: bool
    embedder: str
    values: dict[str, float]

    @property
    def group(self) -> str:
        """The conversation, whatever the embedder: the unit cross-validation keeps whole."""
        return f"{self.dataset}/{self.conversation}"


class _GoldDetector(SwitchDetector):
    """The detector that decides by the gold label set before each turn (the tracker moves on as it would
    with a perfect detector) and keeps the turn's features."""

    gold: bool = False
    values: dict[str, float] | None = None

    def decide(self, turn: SwitchInput) -> SwitchDecision:
        if not [q for q in turn.previous_questions if q.strip()]:
            self.values = None
            return SwitchDecision(False, "no earlier turn")
        self.values = self.features(turn)
        order = new_order(turn.question, [*turn.previous_questions, *turn.previous_answers]) if self.gold else None
        # A perfect detector is sure of its switches, as sure as an announced one: the tracker starts a new task
        # on each (bar the task's own slot asked for, or a correction).
        return SwitchDecision(self.gold, "gold", new_order=order, sure=self.gold, announced=self.gold)


def _round(q: str, a: str, i: int) -> Round:
    from rag_service.domain import Message

    return Round(Message("user", q, 0, float(2 * i)), Message("assistant", a, 0, float(2 * i + 1)))


async def collect_rows(
    dataset: DevSet,
    catalog: IntentCatalog,
    embedder: Embedder,
    counter: TokenCounter,
    titles: Sequence[str],
) -> list[Row]:
    """The features of every later turn of the set (gold-forced states; see the module's docstring)."""
    conversations = _conversations(dataset)

    async def kb_titles_of(tenant: str) -> Sequence[str]:
        return titles

    # The rules as shipped (the standalone rule on): their verdict is one of the features.
    stage = IntentStage(
        IntentSettings(), catalog, embedder, counter, kb_titles_of, standalone_quantile=DEFAULT_STANDALONE_QUANTILE
    )
    base = stage.switch
    oracle = _GoldDetector(base.embedder, base.threshold, base.strict, base.recent_turns, None, base.examples)
    stage.switch = oracle
    rows: list[Row] = []
    for conv in conversations:
        state = TaskState()
        rounds: list[Round] = []
        for i, turn in enumerate(conv.turns):
            oracle.gold = bool(turn.switch) and i > 0
            current = tuple(rounds[state.start_message // 2 :])
            result = await stage.run(turn.question, state, current, 2 * i, "")
            if i > 0 and oracle.values is not None:
                rows.append(
                    Row(dataset.name, conv.id, i, turn.question, bool(turn.switch), embedder.name, dict(oracle.values))
                )
            state = stage.finish(result, answered=True)
            rounds.append(_round(turn.question, turn.answer, i))
    return rows


def matrix(rows: Sequence[Row], features: Sequence[str] = FEATURES) -> npt.NDArray[np.float64]:
    return np.array([[r.values[f] for f in features] for r in rows], dtype=np.float64)


def choose_vetoes(rows: Sequence[Row], candidates: Sequence[str] = VETO_CANDIDATES) -> tuple[str, ...]:
    """The reference signs that never come with a switch on enough development turns."""
    out = []
    for name in candidates:
        flagged = [r for r in rows if r.values[name]]
        if len(flagged) >= VETO_MIN_TURNS and not any(r.gold for r in flagged):
            out.append(name)
    return tuple(out)


def _fit(x: npt.NDArray[np.float64], y: npt.NDArray[np.bool_], c: float) -> tuple[Any, Any]:
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    scaler = StandardScaler().fit(x)
    model = LogisticRegression(C=c, class_weight="balanced", max_iter=2000).fit(scaler.transform(x), y)
    return scaler, model


def choose_forces(rows: Sequence[Row], candidates: Sequence[str] = FORCE_CANDIDATES) -> tuple[str, ...]:
    """The signs that always come with a switch on enough development turns."""
    out = []
    for name in candidates:
        flagged = [r for r in rows if r.values[name]]
        if len(flagged) >= VETO_MIN_TURNS and all(r.gold for r in flagged):
            out.append(name)
    return tuple(out)


def _decided(rows: Sequence[Row], vetoes: Sequence[str], forces: Sequence[str]) -> tuple[Any, Any]:
    """Which rows a veto decides (not a switch) and which a forcing sign decides (a switch): both are left out
    of the fit (a veto wins, as in `SwitchModel.decide`)."""
    vetoed = np.array([any(r.values[v] for v in vetoes) for r in rows], dtype=bool)
    forced = np.array([any(r.values[f] for f in forces) for r in rows], dtype=bool) & ~vetoed
    return vetoed, forced


def _as_model(
    scaler: Any,
    model: Any,
    features: Sequence[str],
    threshold: float,
    vetoes: Sequence[str],
    forces: Sequence[str] = (),
    thresholds: Mapping[str, float] | None = None,
) -> SwitchModel:
    scale = np.where(scaler.scale_ > 0, scaler.scale_, 1.0)
    return SwitchModel(
        tuple(features),
        np.asarray(scaler.mean_, dtype=np.float64),
        np.asarray(scale, dtype=np.float64),
        np.asarray(model.coef_[0], dtype=np.float64),
        float(model.intercept_[0]),
        threshold,
        tuple(vetoes),
        tuple(forces),
        dict(thresholds or {}),
    )


def threshold_for_precision(
    probabilities: npt.NDArray[np.float64], gold: npt.NDArray[np.bool_], precision: float
) -> float:
    """The threshold (a probability of the rows) whose predictions (p >= threshold) find the most switches at
    precision >= `precision`; 1.0 when none reaches it."""
    best, found = 1.0, 0
    for t in np.unique(probabilities[probabilities > 0]):
        predicted = probabilities >= t
        tp = int(np.sum(predicted & gold))
        if tp > found and tp / int(np.sum(predicted)) >= precision:
            best, found = float(t), tp
    return best


@dataclass
class Training:
    model: SwitchModel
    # Out-of-fold probability of each row (0 for vetoed rows) and the rows.
    oof: npt.NDArray[np.float64]
    rows: list[Row]
    folds: dict[str, int]
    c: float
    precision_target: float


def _out_of_fold(
    rows: Sequence[Row],
    x: npt.NDArray[np.float64],
    y: npt.NDArray[np.bool_],
    live: npt.NDArray[np.bool_],
    folds: int,
    c: float,
    seed: int,
) -> tuple[npt.NDArray[np.float64], dict[str, int]]:
    """Each live row's probability from the model fitted without its fold (conversations dealt to folds by
    `seed`), and the fold of each conversation."""
    groups = sorted({r.group for r in rows})
    rng = np.random.default_rng(seed)
    shuffled = list(rng.permutation(len(groups)))
    fold_of = {groups[g]: k % folds for k, g in enumerate(shuffled)}
    row_fold = np.array([fold_of[r.group] for r in rows])
    oof = np.zeros(len(rows))
    for k in range(folds):
        fit = live & (row_fold != k)
        score = live & (row_fold == k)
        scaler, model = _fit(x[fit], y[fit], c)
        oof[score] = model.predict_proba(scaler.transform(x[score]))[:, 1]
    return oof, fold_of


def train(
    rows: Sequence[Row],
    features: Sequence[str] = FEATURES,
    precision: float = DEFAULT_PRECISION,
    folds: int = DEFAULT_FOLDS,
    c: float = DEFAULT_C,
    seed: int = 0,
    per_embedder: bool = True,
    repeats: int = DEFAULT_REPEATS,
) -> Training:
    """Fit the model on all rows, with the threshold chosen on grouped out-of-fold probabilities: on all
    rows, and (`per_embedder`) on each embedder's rows alone, for that embedder. The cross-validation is
    repeated `repeats` times (seeds `seed`, `seed` + 1, …) and the threshold chosen on all its calls: which
    conversations share a fold moves one deal's threshold by a few hundredths, as much as a per-embedder
    threshold differs. The reported out-of-fold probabilities (`Training.oof`, `folds`) are the first deal's."""
    rows = list(rows)
    vetoes, forces = choose_vetoes(rows), choose_forces(rows)
    vetoed, forced = _decided(rows, vetoes, forces)
    live = ~vetoed & ~forced
    x, y = matrix(rows, features), np.array([r.gold for r in rows])
    deals = [_out_of_fold(rows, x, y, live, folds, c, seed + r) for r in range(max(1, repeats))]
    oof, fold_of = deals[0]
    oof = oof.copy()
    oof[forced] = 1.0
    # The model's own calls keep the precision asked (the forced ones, all switches, would flatter it).
    every = np.concatenate([p[live] for p, _ in deals])
    gold = np.tile(y[live], len(deals))
    threshold = threshold_for_precision(every, gold, precision)
    thresholds = {}
    if per_embedder:
        names = np.array([r.embedder for r in rows])
        for name in sorted(set(names.tolist())):
            own = live & (names == name)
            calls = np.concatenate([p[own] for p, _ in deals])
            thresholds[name] = threshold_for_precision(calls, np.tile(y[own], len(deals)), precision)
    scaler, model = _fit(x[live], y[live], c)
    return Training(
        _as_model(scaler, model, features, threshold, vetoes, forces, thresholds), oof, rows, fold_of, c, precision
    )


def fold_models(training: Training, features: Sequence[str] = FEATURES) -> dict[int, SwitchModel]:
    """The model of each fold (fitted without the fold's conversations, the final threshold): for scoring
    the tracker out of fold."""
    rows = training.rows
    vetoes, forces = training.model.vetoes, training.model.forces
    vetoed, forced = _decided(rows, vetoes, forces)
    live = ~vetoed & ~forced
    x, y = matrix(rows, features), np.array([r.gold for r in rows])
    row_fold = np.array([training.folds[r.group] for r in rows])
    out = {}
    for k in sorted(set(training.folds.values())):
        fit = live & (row_fold != k)
        scaler, model = _fit(x[fit], y[fit], training.c)
        out[k] = _as_model(scaler, model, features, training.model.threshold, vetoes, forces, training.model.thresholds)
    return out


def scores(predicted: npt.NDArray[np.bool_], gold: npt.NDArray[np.bool_]) -> dict[str, float]:
    tp = int(np.sum(predicted & gold))
    fp = int(np.sum(predicted & ~gold))
    fn = int(np.sum(~predicted & gold))
    return {
        "precision": tp / (tp + fp) if tp + fp else 1.0,
        "recall": tp / (tp + fn) if tp + fn else 1.0,
        "tp": tp,
        "fp": fp,
        "fn": fn,
        "switches": tp + fn,
        "turns": len(gold),
    }


def _conversations(dataset: DevSet) -> list[SwitchConversation]:
    conversations = load_switches(dataset.path)
    if dataset.half is not None:
        keep = split_half([c.id for c in conversations], dataset.half)
        conversations = [c for c in conversations if c.id in keep]
    return conversations


async def tracker_scores(
    dataset: DevSet,
    catalog: IntentCatalog,
    embedder: Embedder,
    counter: TokenCounter,
    titles: Sequence[str],
    models: Mapping[int, SwitchModel] | None = None,
    folds: Mapping[str, int] | None = None,
) -> SwitchScores:
    """What clears context on the set (the tracker, its state carried turn to turn, as `rag-eval switches`
    scores it): with the rules (`models` None), or out of fold, each conversation with the model fitted
    without its fold (`folds`: conversation group -> fold)."""
    from rag_service.evaluation.intent_eval import _run_switches

    conversations = _conversations(dataset)

    async def kb_titles_of(tenant: str) -> Sequence[str]:
        return titles

    rewrite = RewriteSettings()
    gate, rewriter = Gate(rewrite, embedder), RuleRewriter(rewrite, embedder)
    total = SwitchScores()
    parts = (
        [(None, conversations)]
        if models is None
        else [
            (model, [c for c in conversations if (folds or {}).get(f"{dataset.name}/{c.id}") == k])
            for k, model in models.items()
        ]
    )
    for model, part in parts:
        stage = IntentStage(
            IntentSettings(),
            catalog,
            embedder,
            counter,
            kb_titles_of,
            standalone_quantile=DEFAULT_STANDALONE_QUANTILE,
            switch_model=model,
            # What the tracker would clear, earned or not (the training measures whether it is).
            switch_clears=True,
        )
        tracker = (await _run_switches(part, stage, gate, None, rewriter))["scores"]["tracker"]
        total.tp, total.fp = total.tp + tracker["tp"], total.fp + tracker["fp"]
        total.fn, total.tn = total.fn + tracker["fn"], total.tn + tracker["tn"]
    return total


def earned(tracker: Mapping[str, float]) -> bool:
    """Whether an embedder's out-of-fold tracker scores reach issue 14's bar, so its switches may clear."""
    return tracker["precision"] >= CLEAR_PRECISION and tracker["recall"] >= CLEAR_RECALL


def _as_dict(s: SwitchScores) -> dict[str, float]:
    return s.as_dict()


def run_training(
    embedders: Sequence[Embedder],
    catalog: IntentCatalog,
    counter: TokenCounter,
    *,
    datasets: Sequence[DevSet] = DEV_SETS,
    precision: float = DEFAULT_PRECISION,
    folds: int = DEFAULT_FOLDS,
    seed: int = 0,
    c: float = DEFAULT_C,
    per_embedder: bool = True,
    repeats: int = DEFAULT_REPEATS,
) -> dict[str, Any]:
    """Collect the rows with every embedder, fit the model, and score what clears context on each set out
    of fold (each conversation decided by the model fitted without it) beside the rules."""
    from rag_service.evaluation.intent_eval import kb_titles

    titles = {d.name: kb_titles(d.kb) for d in datasets}

    async def collect() -> list[Row]:
        rows: list[Row] = []
        for emb in embedders:
            for d in datasets:
                rows.extend(await collect_rows(d, catalog, emb, counter, titles[d.name]))
        return rows

    rows = asyncio.run(collect())
    training = train(rows, FEATURES, precision, folds, c, seed, per_embedder, repeats)
    models = fold_models(training)

    async def trackers() -> dict[str, dict[str, dict[str, dict[str, float]]]]:
        out: dict[str, dict[str, dict[str, dict[str, float]]]] = {}
        for emb in embedders:
            per: dict[str, dict[str, dict[str, float]]] = {}
            for d in datasets:
                rules = await tracker_scores(d, catalog, emb, counter, titles[d.name])
                learned = await tracker_scores(d, catalog, emb, counter, titles[d.name], models, training.folds)
                per[d.name] = {"rules": _as_dict(rules), "learned": _as_dict(learned)}
            out[emb.name] = per
        return out

    per_set = asyncio.run(trackers())
    gold = np.array([r.gold for r in rows])
    names = np.array([r.embedder for r in rows])
    predicted = training.oof >= np.array([training.model.threshold_for(str(n)) for n in names])
    summary: dict[str, dict[str, dict[str, float]]] = {}
    for emb in embedders:
        mask = names == emb.name
        total = {kind: SwitchScores() for kind in ("rules", "learned")}
        for scored in per_set[emb.name].values():
            for kind, s in scored.items():
                t = total[kind]
                t.tp, t.fp, t.fn, t.tn = (
                    t.tp + int(s["tp"]),
                    t.fp + int(s["fp"]),
                    t.fn + int(s["fn"]),
                    t.tn + int(s["tn"]),
                )
        summary[emb.name] = {
            "detector_out_of_fold": scores(predicted[mask], gold[mask]),
            "tracker_rules": _as_dict(total["rules"]),
            "tracker_out_of_fold": _as_dict(total["learned"]),
        }
    clearing = {name: earned(s["tracker_out_of_fold"]) for name, s in summary.items()}
    model = replace(training.model, clearing=clearing).to_dict()
    model["trained"] = {
        "command": "rag-eval train-switches",
        "sets": [d.name for d in datasets],
        "embedders": [e.name for e in embedders],
        "rows": len(rows),
        "switches": int(gold.sum()),
        "precision_target": precision,
        "folds": folds,
        "repeats": repeats,
        "seed": seed,
        "c": c,
        "per_embedder_thresholds": per_embedder,
        "out_of_fold": summary,
    }
    return {
        "model": model,
        "sets": per_set,
        "rows": [{**r.__dict__, "out_of_fold": float(p)} for r, p in zip(rows, training.oof, strict=True)],
    }


def training_table(report: dict[str, Any]) -> str:
    model = report["model"]
    trained = model["trained"]
    lines = [
        f"rows {trained['rows']} ({trained['switches']} switches) from {', '.join(trained['sets'])}; "
        f"threshold {model['threshold']:.3f} (out-of-fold precision >= {trained['precision_target']}"
        + "".join(f"; {name} {t:.3f}" for name, t in model.get("thresholds", {}).items())
        + "), "
        + "".join(f"{name} {'clears' if ok else 'does not clear'}; " for name, ok in model.get("clearing", {}).items())
        + f"vetoes {', '.join(model['vetoes']) or 'none'}, forcing {', '.join(model.get('forces', [])) or 'none'}",
        "",
        "| embedder | set | rules: precision / recall (tp / fp) | learned, out of fold |",
        "|---|---|---|---|",
    ]

    def cell(s: dict[str, float]) -> str:
        return f"{s['precision']:.3f} / {s['recall']:.3f} ({s['tp']:.0f} / {s['fp']:.0f})"

    for emb, per in report["sets"].items():
        for name, scored in per.items():
            lines.append(f"| {emb} | {name} | {cell(scored['rules'])} | {cell(scored['learned'])} |")
        total = trained["out_of_fold"][emb]
        lines.append(f"| {emb} | **all** | {cell(total['tracker_rules'])} | {cell(total['tracker_out_of_fold'])} |")
        lines.append(f"| {emb} | (detector alone, out of fold) | | {cell(total['detector_out_of_fold'])} |")
    lines += ["", "| feature | weight (standardised) |", "|---|---|"]
    for f in sorted(model["features"], key=lambda f: -abs(f["weight"])):
        lines.append(f"| {f['name']} | {f['weight']:+.3f} |")
    return "\n".join(lines)


def model_json(model: Mapping[str, Any]) -> str:
    """The model file: indented, one line per feature (a reviewer reads the weights side by side)."""
    head = {k: v for k, v in model.items() if k != "features"}
    lines = [json.dumps(f, ensure_ascii=False) for f in model["features"]]
    body = json.dumps(head, indent=1, ensure_ascii=False)[:-2]
    return body + ',\n "features": [\n  ' + ",\n  ".join(lines) + "\n ]\n}\n"
