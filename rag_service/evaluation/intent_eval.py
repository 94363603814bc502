"""Intent accuracy, slot F1 and topic-switch precision/recall on labelled sets (eval/intents/).

Utterances (`utterances.jsonl`): {"id", "text", "intent": name | null, "slots": {name: value}}. A
predicted slot counts when its value equals the gold one; a free-text slot when the two share at least
half of their characters (token F1 >= 0.5), since any clause naming the fault is a right reading.

Topic switches (`switches.jsonl`): conversations {"id", "turns": [{"q", "a", "switch"?}, ...]}; every
turn after the first is labelled. Three detectors are scored on the same turns:
- `gate`: the rewriter's topic-switch flag (rag_service.rewrite.Gate), what the service had before;
- `detector`: the intent package's SwitchDetector alone;
- `tracker`: what clears context in the service: the offline intent stage run through the
  conversation (its state carried turn to turn), a turn counting as a switch when it started a new task
  that stops sending the earlier rounds.
With a knowledge base (`kb`), each turn is also rewritten and retrieved as the service does, so the
detector can compare where a question lands with the documents the task was answered from.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import statistics
import tempfile
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from rag_core.embedding import Embedder
from rag_core.settings import IntentSettings, QdrantSettings, RetrievalSettings, RewriteSettings, Settings
from rag_core.tokens import TokenCounter
from rag_core.vectorstore import VectorIndex, open_index
from rag_service.domain import MemoryView, Message, Round
from rag_service.evaluation.metrics import token_f1
from rag_service.evaluation.retrieval_eval import split_half
from rag_service.intents.config import IntentCatalog
from rag_service.intents.slots import ProductCatalog, SlotExtractor
from rag_service.intents.stage import IntentStage, index_probe
from rag_service.intents.switch import DEFAULT_MARGIN_QUANTILE, SwitchDetector, SwitchInput, SwitchModel
from rag_service.intents.task import TaskState
from rag_service.retrieval import Retriever
from rag_service.rewrite import Gate, RuleRewriter


@dataclass(frozen=True)
class Utterance:
    id: str
    text: str
    intent: str | None
    slots: dict[str, str]


@dataclass(frozen=True)
class SwitchTurn:
    question: str
    answer: str
    switch: bool | None


@dataclass(frozen=True)
class SwitchConversation:
    id: str
    turns: tuple[SwitchTurn, ...]


def load_utterances(path: Path) -> list[Utterance]:
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        d = json.loads(line)
        try:
            out.append(Utterance(str(d["id"]), str(d["text"]), d.get("intent"), dict(d.get("slots") or {})))
        except KeyError as exc:
            raise ValueError(f"{path}:{n}: missing {exc}") from exc
    return out


def load_switches(path: Path) -> list[SwitchConversation]:
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if not line.strip():
            continue
        d = json.loads(line)
        turns = tuple(SwitchTurn(t["q"], t.get("a", ""), t.get("switch")) for t in d["turns"])
        if any(t.switch is None for t in turns[1:]):
            raise ValueError(f"{path}:{n}: every turn after the first needs a `switch` label")
        out.append(SwitchConversation(str(d["id"]), turns))
    return out


def kb_titles(kb: Path | None) -> list[str]:
    """The titles ingest would give the files of `kb` (product names for the product slot)."""
    if kb is None:
        return []
    from rag_core.documents.loaders import load_document
    from rag_core.settings import IngestSettings

    settings = IngestSettings()
    titles = []
    for path in sorted(kb.iterdir()):
        if path.suffix.lower() in settings.extensions:
            titles.append(load_document(path, settings).title)
    return titles


@dataclass
class IntentReport:
    n: int
    accuracy: float
    per_intent: dict[str, dict[str, float]]
    slot_precision: float
    slot_recall: float
    slot_f1: float
    confusion: dict[str, dict[str, int]]
    errors: list[dict[str, Any]] = field(default_factory=list)
    threshold: float = 0.0
    recognition_ms_p50: float = 0.0


def _slot_match(catalog: IntentCatalog, intent: str | None, name: str, predicted: str, gold: str) -> bool:
    spec = catalog.get(intent)
    slot = spec.slot(name) if spec is not None else None
    if slot is not None and slot.type == "text":
        return token_f1(predicted, gold) >= 0.5
    return predicted.strip().lower() == gold.strip().lower()


def evaluate_intents(
    items: Sequence[Utterance], catalog: IntentCatalog, embedder: Embedder, titles: Sequence[str], today: dt.date
) -> IntentReport:
    """Each utterance as the first turn of a session: intent by the offline recognizer, slots by the
    typed extractors of the gold intent (so slot scores do not double-count intent errors)."""
    from rag_service.intents.recognize import IntentRecognizer

    recognizer = IntentRecognizer(catalog, embedder)
    extractor = SlotExtractor(ProductCatalog(titles), today=today)
    right = 0
    tp = fp = fn = 0
    confusion: dict[str, Counter[str]] = {}
    per: dict[str, list[bool]] = {}
    errors: list[dict[str, Any]] = []
    timings: list[float] = []
    for it in items:
        vector = embedder.embed_query(it.text)  # the turn computes it anyway (retrieval reuses it)
        t0 = time.perf_counter()
        predicted = recognizer.score_vector(vector).intent
        spec = catalog.get(it.intent)
        slots = extractor.extract(spec, it.text) if spec is not None else {}
        timings.append(time.perf_counter() - t0)
        gold_name, pred_name = it.intent or "none", predicted or "none"
        confusion.setdefault(gold_name, Counter())[pred_name] += 1
        per.setdefault(gold_name, []).append(predicted == it.intent)
        right += predicted == it.intent
        for name, value in slots.items():
            gold = it.slots.get(name)
            if gold is not None and _slot_match(catalog, it.intent, name, value, gold):
                tp += 1
            else:
                fp += 1
        fn += sum(
            1
            for name, gold in it.slots.items()
            if name not in slots or not _slot_match(catalog, it.intent, name, slots[name], gold)
        )
        if predicted != it.intent or slots != it.slots:
            errors.append(
                {
                    "id": it.id,
                    "text": it.text,
                    "intent": it.intent,
                    "predicted": predicted,
                    "slots": it.slots,
                    "extracted": slots,
                }
            )
    p = tp / (tp + fp) if tp + fp else 1.0
    r = tp / (tp + fn) if tp + fn else 1.0
    return IntentReport(
        n=len(items),
        accuracy=right / (len(items) or 1),
        per_intent={k: {"n": len(v), "accuracy": sum(v) / len(v)} for k, v in sorted(per.items())},
        slot_precision=p,
        slot_recall=r,
        slot_f1=2 * p * r / (p + r) if p + r else 0.0,
        confusion={k: dict(v) for k, v in confusion.items()},
        errors=errors,
        threshold=recognizer.threshold,
        recognition_ms_p50=statistics.median(timings) * 1000 if timings else 0.0,
    )


@dataclass
class SwitchScores:
    tp: int = 0
    fp: int = 0
    fn: int = 0
    tn: int = 0

    def add(self, predicted: bool, gold: bool) -> None:
        if predicted and gold:
            self.tp += 1
        elif predicted:
            self.fp += 1
        elif gold:
            self.fn += 1
        else:
            self.tn += 1

    def as_dict(self) -> dict[str, float]:
        p = self.tp / (self.tp + self.fp) if self.tp + self.fp else 1.0
        r = self.tp / (self.tp + self.fn) if self.tp + self.fn else 1.0
        return {
            "precision": p,
            "recall": r,
            "tp": self.tp,
            "fp": self.fp,
            "fn": self.fn,
            "tn": self.tn,
            "switches": self.tp + self.fn,
            "turns": self.tp + self.fp + self.fn + self.tn,
        }


def _round(q: str, a: str, i: int) -> Round:
    return Round(Message("user", q, 0, float(2 * i)), Message("assistant", a, 0, float(2 * i + 1)))


def evaluate_switches(
    conversations: Sequence[SwitchConversation],
    catalog: IntentCatalog,
    embedder: Embedder,
    counter: TokenCounter,
    *,
    quantile: float,
    strict_quantile: float,
    margin_quantile: float = DEFAULT_MARGIN_QUANTILE,
    standalone_quantile: float | None = None,
    half: str | None = None,
    topic_similarity: float = RewriteSettings().topic_similarity,
    titles: Sequence[str] = (),
    kb: Path | None = None,
    switch_model: SwitchModel | None = None,
) -> dict[str, Any]:
    """`switch_model`: the learned switch decision (None: the rules decide). With `kb` (the detector reading where a question lands, `intents.switch_landing`), its files are
    ingested into a temporary index and every turn is run as the service runs it: the intent stage, then
    the rule rewriter over the current task's rounds and retrieval, whose documents the stage keeps for
    the next turn."""
    return asyncio.run(
        _evaluate_switches(
            conversations,
            catalog,
            embedder,
            counter,
            quantile=quantile,
            strict_quantile=strict_quantile,
            margin_quantile=margin_quantile,
            standalone_quantile=standalone_quantile,
            half=half,
            topic_similarity=topic_similarity,
            titles=titles,
            kb=kb,
            switch_model=switch_model,
        )
    )


async def _kb_index(kb: Path, embedder: Embedder, counter: TokenCounter, folder: Path) -> VectorIndex:
    from rag_core.documents.pipeline import ingest_file, iter_files

    settings = Settings(qdrant=QdrantSettings(path=str(folder / "qdrant")))
    index = open_index(settings.qdrant, embedder.dim, embedder.name)
    for path in iter_files([kb], settings.ingest.extensions):
        await ingest_file(path, index=index, embedder=embedder, counter=counter, settings=settings, source=path.name)
    return index


async def _evaluate_switches(
    conversations: Sequence[SwitchConversation],
    catalog: IntentCatalog,
    embedder: Embedder,
    counter: TokenCounter,
    *,
    quantile: float,
    strict_quantile: float,
    margin_quantile: float,
    standalone_quantile: float | None,
    half: str | None,
    topic_similarity: float,
    titles: Sequence[str],
    kb: Path | None,
    switch_model: SwitchModel | None,
) -> dict[str, Any]:
    if half is not None:
        keep = split_half([c.id for c in conversations], half)
        conversations = [c for c in conversations if c.id in keep]
    rewrite_settings = RewriteSettings(topic_similarity=topic_similarity)
    gate = Gate(rewrite_settings, embedder)

    async def kb_titles_of(tenant: str) -> Sequence[str]:
        return titles

    with tempfile.TemporaryDirectory(prefix="rag-eval-switches-") as tmp:
        index = await _kb_index(kb, embedder, counter, Path(tmp)) if kb is not None else None
        try:
            stage = IntentStage(
                IntentSettings(),
                catalog,
                embedder,
                counter,
                kb_titles_of,
                switch_quantile=quantile,
                strict_quantile=strict_quantile,
                probe=index_probe(index) if index is not None else None,
                margin_quantile=margin_quantile,
                standalone_quantile=standalone_quantile,
                switch_model=switch_model,
                # The tracker is scored on what it would clear; whether its switches do is reported beside.
                switch_clears=True,
            )
            retriever = Retriever(index, embedder, RetrievalSettings()) if index is not None else None
            rewriter = RuleRewriter(rewrite_settings, embedder)
            result = await _run_switches(conversations, stage, gate, retriever, rewriter)
        finally:
            if index is not None:
                await index.close()
    detector = stage.switch
    # What the service does with this embedder and decision (the detector's own rule, gate as shipped).
    detector.clearing = None
    clears, kept = detector.clears()
    return {
        "half": half,
        "conversations": len(conversations),
        "quantile": quantile,
        "strict_quantile": strict_quantile,
        "margin_quantile": margin_quantile,
        "standalone_quantile": standalone_quantile,
        "switch_threshold": detector.threshold,
        "strict_threshold": detector.strict,
        "landing_margin": detector.margin,
        "intent_threshold": stage.recognizer.threshold,
        "switch_model": switch_model is not None,
        "clears": clears,
        "not_cleared_because": kept,
        **result,
    }


async def _run_switches(
    conversations: Sequence[SwitchConversation],
    stage: IntentStage,
    gate: Gate,
    retriever: Retriever | None,
    rewriter: RuleRewriter,
) -> dict[str, Any]:
    detector: SwitchDetector = stage.switch
    scores = {"gate": SwitchScores(), "detector": SwitchScores(), "tracker": SwitchScores()}
    mistakes: list[dict[str, Any]] = []
    for conv in conversations:
        state = TaskState()
        rounds: list[Round] = []
        for i, turn in enumerate(conv.turns):
            gold = bool(turn.switch)
            # Rounds of the current task only, as the service sends them.
            current = tuple(rounds[state.start_message // 2 :])
            if i > 0:
                g = gate.decide(turn.question, MemoryView("", 0, tuple(rounds))).kind == "switch"
                scores["gate"].add(g, gold)
                # The detector alone: every earlier round, where the task's documents say the task is.
                landed = await stage.landing(turn.question, state, rounds, "")
                d = detector.decide(
                    SwitchInput(
                        turn.question,
                        [r.user.content for r in rounds],
                        [r.assistant.content for r in rounds],
                        landed=landed,
                        task_documents={doc for docs in state.documents for doc in docs},
                        task_intent=state.intent,
                        recent_intents=stage.recent_intents(rounds) if detector.examples is not None else (),
                        candidate=stage.recognizer.score(turn.question).intent,
                        title_words=(await stage.extractor("")).catalog.words,
                        title_concepts=(await stage.extractor("")).catalog.concepts,
                    )
                )
                scores["detector"].add(d.switch, gold)
            result = await stage.run(turn.question, state, current, 2 * i, "")
            if i > 0:
                cleared = result.step.new_task
                scores["tracker"].add(cleared, gold)
                if cleared != gold:
                    mistakes.append(
                        {
                            "conversation": conv.id,
                            "turn": i,
                            "question": turn.question,
                            "gold": gold,
                            "cleared": cleared,
                            "reason": result.step.reason,
                            "detector": d.reason,
                            "switch": result.recognition.switch.reason if result.recognition.switch else "",
                            "intent": result.state.intent,
                        }
                    )
            if retriever is not None and result.reply is None:
                sent = tuple(rounds[result.start_message // 2 :])
                query = (await rewriter.rewrite(turn.question, MemoryView("", 0, sent))).query
                chunks = await retriever.search(query)
                result.answered_from([*result.context, *chunks])
            state = stage.finish(result, answered=True)
            rounds.append(_round(turn.question, turn.answer, i))
    return {"scores": {k: v.as_dict() for k, v in scores.items()}, "mistakes": mistakes}


def intents_table(report: IntentReport) -> str:
    lines = [
        f"utterances {report.n}, intent accuracy {report.accuracy:.3f} (threshold {report.threshold:.3f}), "
        f"slot P {report.slot_precision:.3f} R {report.slot_recall:.3f} F1 {report.slot_f1:.3f}, "
        f"recognition p50 {report.recognition_ms_p50:.3f} ms (after the embedding)",
        "| intent | n | accuracy |",
        "|---|---|---|",
    ]
    for name, r in report.per_intent.items():
        lines.append(f"| {name} | {r['n']:.0f} | {r['accuracy']:.3f} |")
    return "\n".join(lines)


def switches_table(result: dict[str, Any]) -> str:
    lines = [
        f"half {result['half'] or 'all'}: {result['conversations']} conversations; switch threshold "
        f"{result['switch_threshold']:.4f} / strict {result['strict_threshold']:.4f} (quantiles {result['quantile']} / "
        f"{result['strict_quantile']}), landing margin {_fmt(result.get('landing_margin'))} (median less quantile "
        f"{result.get('margin_quantile')}; none: no knowledge base), intent threshold {result['intent_threshold']:.4f}; "
        f"decision: {'learned model' if result.get('switch_model') else 'rules'}",
        (
            "switches clear context with this embedder and decision (the tracker row is what they clear)"
            if result.get("clears")
            else f"switches do NOT clear context: {result.get('not_cleared_because')} (the tracker row is what they "
            "would clear: they are detected and reported, the rounds stay in the prompt)"
        ),
        "| detector | turns | switches | precision | recall | tp | fp | fn |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for name, s in result["scores"].items():
        lines.append(
            f"| {name} | {s['turns']} | {s['switches']} | {s['precision']:.3f} | {s['recall']:.3f} | {s['tp']} | {s['fp']} | {s['fn']} |"
        )
    return "\n".join(lines)


def _fmt(value: float | None) -> str:
    return "none" if value is None else f"{value:.4f}"
