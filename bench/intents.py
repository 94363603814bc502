"""Intents: prompt tokens with per-intent modules against all modules in every prompt, intent accuracy and
slot F1 of the offline recognizer, and the per-turn overhead of recognition.

Runs the scripted e-commerce conversations (eval/intents/switches.jsonl, one session each) through the
real pipeline (`build_services` + `pipeline.answer`, the e-commerce intents, the sample knowledge base
ingested into a temporary Qdrant folder, extractive answers, nothing over the network). For every turn:

- the prompt as sent (receipt `total_prompt_tokens`, the active intent's module at most), and the same
  prompt with every intent's module in the system message instead (the system message recounted with the
  same counter: what a single all-rules system prompt costs);
- the intent stage's own time with the question's embedding already cached (retrieval embeds the same
  question, so that is the cost the stage adds to a turn), and with an empty cache (embedding included).

    .venv/bin/python bench/intents.py                       # -> bench/results/intents.json
    .venv/bin/python bench/intents.py --limit 10
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from rag_core.documents.pipeline import ingest_file, iter_files  # noqa: E402
from rag_core.embedding import CachedQueryEmbedder, make_embedder  # noqa: E402
from rag_core.settings import Settings  # noqa: E402
from rag_core.tokens import make_counter  # noqa: E402
from rag_core.vectorstore import open_index  # noqa: E402
from rag_service.domain import SessionMeta  # noqa: E402
from rag_service.evaluation.intent_eval import evaluate_intents, kb_titles, load_switches, load_utterances  # noqa: E402
from rag_service.intents.task import TaskState  # noqa: E402
from rag_service.wiring import build_services  # noqa: E402

KB = ROOT / "examples" / "kb"


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else 0.0


async def run(args: argparse.Namespace) -> dict[str, Any]:
    tmp = Path(tempfile.mkdtemp(prefix="bench-intents-"))
    settings = Settings(
        qdrant={"path": str(tmp / "qdrant")},
        database={"url": f"sqlite+aiosqlite:///{tmp}/archive.db"},
        intents={"files": [str(ROOT / "configs" / "intents" / "ecommerce.yaml")], "recognizer": "offline"},
        rewrite={"mode": "rule"},
    )
    counter = make_counter(settings.tokens)
    embedder = make_embedder(settings.embedding)
    index = open_index(settings.qdrant, embedder.dim, embedder.name)
    for path in iter_files([KB], settings.ingest.extensions):
        await ingest_file(path, index=index, embedder=embedder, counter=counter, settings=settings, source=path.name)
    services = build_services(settings, counter=counter, embedder=embedder, index=index)
    await services.start()
    pipeline, stage = services.pipeline, services.pipeline.s.intents
    assert stage is not None
    base = settings.prompt.system_prompt
    overhead = settings.tokens.per_message_overhead
    all_system = counter.count(base + stage.all_modules()) + overhead
    conversations = load_switches(Path(args.conversations))[: args.limit]
    per_turn: list[dict[str, Any]] = []
    warm_ms: list[float] = []
    cold_ms: list[float] = []
    for conv in conversations:
        sid = f"bench-{conv.id}"
        await services.store.create(SessionMeta(sid, time.time()))
        for turn in conv.turns:
            result = await pipeline.answer(sid, turn.question)
            r = result.receipt
            modules = r.get("prompt_modules", [])
            active = base + "".join("\n\n" + i.prompt.strip() for i in stage.catalog.intents if i.name in modules)
            system_sent = counter.count(active) + overhead
            total_all = r["total_prompt_tokens"] - system_sent + all_system
            per_turn.append(
                {
                    "conversation": conv.id,
                    "question": turn.question,
                    "intent": r.get("intent"),
                    "turn": r["task"]["turn"],
                    "prompt_tokens": r["total_prompt_tokens"],
                    "prompt_tokens_all_modules": total_all,
                    "module_tokens": r.get("prompt_module_tokens", 0),
                }
            )
        # Recognition overhead on this conversation's questions, against the state the session ended in.
        meta, loaded, _ = await services.store.load(sid, lambda m: 0)
        state = TaskState.from_json(meta.task)
        view = pipeline.s.memory.select(meta, loaded, 0)
        for turn in conv.turns:
            if isinstance(embedder, CachedQueryEmbedder):
                embedder.clear()
            t0 = time.perf_counter()
            await stage.run(turn.question, state, view.rounds, meta.message_count, "")
            cold_ms.append((time.perf_counter() - t0) * 1000)
            t0 = time.perf_counter()  # the question's embedding is cached now, as retrieval leaves it
            await stage.run(turn.question, state, view.rounds, meta.message_count, "")
            warm_ms.append((time.perf_counter() - t0) * 1000)
    await services.close()
    sent = sum(t["prompt_tokens"] for t in per_turn)
    everything = sum(t["prompt_tokens_all_modules"] for t in per_turn)
    task_turns = [t for t in per_turn if t["intent"]]
    report = evaluate_intents(
        load_utterances(Path(args.utterances)),
        stage.catalog,
        embedder,
        kb_titles(KB),
        dt.date.fromisoformat(args.today),
    )
    return {
        "conversations": len(conversations),
        "turns": len(per_turn),
        "turns_with_a_task": len(task_turns),
        "prompt_tokens": {
            "per_intent_modules_mean": sent / len(per_turn),
            "all_modules_mean": everything / len(per_turn),
            "saving": 1 - sent / everything,
            "saving_on_task_turns": 1
            - sum(t["prompt_tokens"] for t in task_turns)
            / max(1, sum(t["prompt_tokens_all_modules"] for t in task_turns)),
            "all_modules_tokens": all_system - counter.count(base) - overhead,
        },
        "intent_accuracy": report.accuracy,
        "intent_threshold": report.threshold,
        "slot_precision": report.slot_precision,
        "slot_recall": report.slot_recall,
        "slot_f1": report.slot_f1,
        "recognition_ms": {
            "p50_embedding_cached": statistics.median(warm_ms),
            "p90_embedding_cached": pct(warm_ms, 0.9),
            "p50_with_embedding": statistics.median(cold_ms),
            "p90_with_embedding": pct(cold_ms, 0.9),
            "n": len(warm_ms),
        },
        "per_turn": per_turn,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", default=str(ROOT / "eval" / "intents" / "switches.jsonl"))
    parser.add_argument("--utterances", default=str(ROOT / "eval" / "intents" / "utterances.jsonl"))
    parser.add_argument("--today", default="2025-03-20")
    parser.add_argument("--limit", type=int, default=None)
    parser.add_argument("--out", default=str(ROOT / "bench" / "results" / "intents.json"))
    args = parser.parse_args()
    result = asyncio.run(run(args))
    Path(args.out).write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    summary = {k: v for k, v in result.items() if k != "per_turn"}
    print(json.dumps(summary, indent=2, ensure_ascii=False))


if __name__ == "__main__":
    main()
