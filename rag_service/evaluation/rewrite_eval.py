"""Rewrite quality against human rewrites: exact match, ROUGE-L F1 and token F1 (characters for Chinese)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass

from rag_service.evaluation.data import RewriteItem
from rag_service.evaluation.metrics import exact_match, rouge_l, token_f1
from rag_service.evaluation.retrieval_eval import view_of
from rag_service.rewrite import Rewriter


@dataclass
class RewriteReport:
    results: dict[str, dict[str, float]]
    actions: dict[str, Counter[str]]
    predictions: dict[str, list[str]]


def pair_history(history: Sequence[str]) -> list[tuple[str, str]]:
    """A flat history (speaker turns alternating, the asker first) as (question, answer) rounds."""
    return [(history[i], history[i + 1] if i + 1 < len(history) else "") for i in range(0, len(history), 2)]


def score(predictions: Sequence[str], items: Sequence[RewriteItem]) -> dict[str, float]:
    n = len(items) or 1
    return {
        "exact_match": sum(exact_match(p, it.gold) for p, it in zip(predictions, items, strict=True)) / n,
        "rouge_l": sum(rouge_l(p, it.gold) for p, it in zip(predictions, items, strict=True)) / n,
        "f1": sum(token_f1(p, it.gold) for p, it in zip(predictions, items, strict=True)) / n,
    }


async def _predict(items: Sequence[RewriteItem], rewriter: Rewriter, actions: Counter[str]) -> list[str]:
    out: list[str] = []
    for it in items:
        result = await rewriter.rewrite(it.question, view_of(pair_history(it.history)))
        actions[result.action + (" (topic switch)" if result.topic_switch else "")] += 1
        out.append(result.query)
    return out


def evaluate_rewrites(
    items: Sequence[RewriteItem], modes: Sequence[str], rewriters: dict[str, Rewriter]
) -> RewriteReport:
    results: dict[str, dict[str, float]] = {}
    actions: dict[str, Counter[str]] = {}
    predictions: dict[str, list[str]] = {}
    for mode in modes:
        actions[mode] = Counter()
        if mode == "none":
            preds = [it.question for it in items]
        else:
            preds = asyncio.run(_predict(items, rewriters[mode], actions[mode]))
        predictions[mode] = preds
        results[mode] = score(preds, items)
    return RewriteReport(results, actions, predictions)


def markdown_table(results: dict[str, dict[str, float]]) -> str:
    lines = ["| mode | exact_match | rouge_l | f1 |", "|---|---|---|---|"]
    for mode, r in results.items():
        lines.append(f"| {mode} | {r['exact_match']:.4f} | {r['rouge_l']:.4f} | {r['f1']:.4f} |")
    return "\n".join(lines)
