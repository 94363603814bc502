"""The FAQ short path's threshold, chosen on a paraphrase set.

    .venv/bin/python bench/faq_threshold.py                 # eval/faq/faq.csv + eval/faq/paraphrases.jsonl
    .venv/bin/python bench/faq_threshold.py --faq F --set F --json OUT

Ingests the FAQ file into a temporary index (the default engine) through the real ingest path (rag_core), then asks
the service's matcher (rag_service/faq.py) for the nearest FAQ entry of every question of the set:

- `paraphrase`: another wording of an FAQ question; correct when the nearest entry is that one;
- `near_miss`: close in words to an FAQ question but asking something the FAQ does not answer;
- `other_language`: answered by an entry of the other language; must not short-circuit either (the
  entry's answer is in the wrong language: that turn goes to the LLM with the entry as context).

For each threshold t (0.80 to 0.99 by 0.005) a question short-circuits when its nearest score >= t:
precision = correct short-circuits / all short-circuits, share = short-circuits / questions, LLM calls
saved = correct short-circuits. The chosen threshold is the lowest whose precision is >= --target on
both halves of the set (split by a hash of the question), so it does not rest on a few lucky items.
Writes bench/results/faq_threshold.json.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

from rag_core.documents.faq import faq_collection
from rag_core.documents.pipeline import ingest_file
from rag_core.embedding import Embedder, make_embedder
from rag_core.settings import FaqSettings, QdrantSettings, Settings
from rag_core.tokens import TokenCounter, make_counter
from rag_core.vectorstore import open_index
from rag_service.faq import FaqMatcher

ROOT = Path(__file__).resolve().parent.parent


def _half(question: str) -> str:
    return "AB"[hashlib.sha256(question.encode()).digest()[0] % 2]


def _sweep(rows: list[dict[str, Any]], thresholds: list[float]) -> list[dict[str, Any]]:
    out = []
    for t in thresholds:
        fired = [r for r in rows if r["score"] >= t]
        correct = sum(r["correct"] for r in fired)
        out.append(
            {
                "threshold": round(t, 3),
                "short_circuits": len(fired),
                "correct": correct,
                "precision": round(correct / len(fired), 4) if fired else 1.0,
                "share": round(len(fired) / len(rows), 4) if rows else 0.0,
                "paraphrase_recall": round(correct / max(1, sum(r["kind"] == "paraphrase" for r in rows)), 4),
                "near_miss_fired": sum(r["kind"] != "paraphrase" for r in fired),
            }
        )
    return out


async def _measure(
    faq: Path, items: list[dict[str, Any]], settings: Settings, embedder: Embedder, counter: TokenCounter
) -> tuple[list[dict[str, Any]], int]:
    """(one row per question: its nearest entry and whether that is the right one, FAQ entries ingested)."""
    with tempfile.TemporaryDirectory() as tmp:
        index = open_index(QdrantSettings(path=tmp, collection="kb"), embedder.dim, embedder.name)
        faq_index = index.sibling(faq_collection("kb"))
        try:
            report = await ingest_file(
                faq, index=index, embedder=embedder, counter=counter, settings=settings, source=faq.name,
                faq_index=faq_index,
            )  # fmt: skip
            matcher = FaqMatcher(faq_index, embedder, FaqSettings(threshold=0.0))
            stored = await faq_index.payloads(sorted(await faq_index.doc_point_ids(report.doc_id)))
            answers = {p["question"]: p["answer"] for p in stored.values()}
            rows = []
            for item in items:
                hit = await matcher.nearest(item["q"])
                expected = answers.get(item["expect"]) if item["expect"] else None
                correct = hit is not None and expected is not None and hit.answer == expected
                rows.append(
                    {
                        "q": item["q"],
                        "kind": item["kind"],
                        "lang": item["lang"],
                        "half": _half(item["q"]),
                        "nearest": hit.question if hit else None,
                        "score": round(hit.score, 4) if hit else 0.0,
                        "correct": correct,
                    }
                )
        finally:
            await index.close()
    return rows, report.faq_entries


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--faq", type=Path, default=ROOT / "eval" / "faq" / "faq.csv")
    parser.add_argument("--set", type=Path, default=ROOT / "eval" / "faq" / "paraphrases.jsonl")
    parser.add_argument("--target", type=float, default=0.98)
    parser.add_argument("--json", type=Path, default=ROOT / "bench" / "results" / "faq_threshold.json")
    args = parser.parse_args()

    settings = Settings()
    embedder = make_embedder(settings.embedding)
    counter = make_counter(settings.tokens)
    items = [json.loads(line) for line in args.set.read_text(encoding="utf-8").splitlines() if line.strip()]
    rows, faq_entries = asyncio.run(_measure(args.faq, items, settings, embedder, counter))

    thresholds = [round(0.80 + 0.005 * i, 3) for i in range(40)]
    sweeps = {
        name: _sweep([r for r in rows if name == "all" or r["half"] == name], thresholds) for name in ("all", "A", "B")
    }
    chosen = next(
        (t for i, t in enumerate(thresholds) if all(sweeps[h][i]["precision"] >= args.target for h in ("A", "B"))),
        None,
    )
    at = next((s for s in sweeps["all"] if s["threshold"] == chosen), None)
    result = {
        "faq_file": str(args.faq.relative_to(ROOT) if args.faq.is_relative_to(ROOT) else args.faq),
        "set": str(args.set.relative_to(ROOT) if args.set.is_relative_to(ROOT) else args.set),
        "embedder": embedder.name,
        "faq_entries": faq_entries,
        "questions": len(rows),
        "by_kind": {k: sum(r["kind"] == k for r in rows) for k in ("paraphrase", "near_miss", "other_language")},
        "target_precision": args.target,
        "chosen_threshold": chosen,
        "at_chosen": at,
        "configured_threshold": settings.faq.threshold,
        "at_configured": _sweep(rows, [settings.faq.threshold])[0],
        "sweep": sweeps,
        "rows": rows,
    }
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(result, ensure_ascii=False, indent=1), encoding="utf-8")
    print(f"{len(rows)} questions, {faq_entries} FAQ entries, embedder {embedder.name}")
    print("threshold  fired  correct  precision  share  recall  near-misses fired")
    for s in sweeps["all"]:
        print(
            f"{s['threshold']:9.3f}  {s['short_circuits']:5d}  {s['correct']:7d}  {s['precision']:9.3f}  "
            f"{s['share']:5.2f}  {s['paraphrase_recall']:6.2f}  {s['near_miss_fired']:3d}"
        )
    print(f"chosen (precision >= {args.target} on both halves): {chosen}; configured: {settings.faq.threshold}")
    print(f"at configured: {result['at_configured']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
