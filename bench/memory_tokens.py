"""Prompt tokens per turn under each memory strategy, and the per-turn overhead of a long conversation.

Runs the chat pipeline in-process on the sample knowledge base (ingested into a temporary Qdrant folder),
with the project's fake OpenAI-compatible server (tests/fake_llm.py) as generator and summarizer:

1. tokens: a scripted, mixed Chinese/English customer-service conversation of --turns turns under every
   strategy (full, window, truncate, summary, hybrid); each turn's receipt goes to
   results/memory_tokens.csv, and results/memory_tokens.png plots prompt tokens per turn.
2. overhead: --overhead-turns turns under the default strategy (hybrid), --reps times; the median time a
   turn spends outside the LLM around turn 5 (turns 3-7) and around the last turn (the last 5 turns), and
   their ratio (must stay under 1.2: memory must not make long conversations slower), to
   results/memory_overhead.json.

    python bench/memory_tokens.py            # from the repository root, in the venv (needs matplotlib)
"""

from __future__ import annotations

import argparse
import asyncio
import csv
import hashlib
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("RAG_CONFIG", str(ROOT / "configs" / "default.yaml"))

from rag_core.documents.pipeline import ingest_file, iter_files  # noqa: E402
from rag_core.embedding import Embedder, make_embedder  # noqa: E402
from rag_core.settings import Settings  # noqa: E402
from rag_core.tokens import TokenCounter, make_counter  # noqa: E402
from rag_core.vectorstore import VectorIndex, open_index  # noqa: E402
from rag_service.domain import SessionMeta  # noqa: E402
from rag_service.testing.fake_llm import FakeLLM, message_text  # noqa: E402
from rag_service.wiring import Services, build_services  # noqa: E402
from tests.kb_questions import FOLLOWUPS, QUESTIONS  # noqa: E402

STRATEGIES = ["full", "window", "truncate", "summary", "hybrid"]
KB = ROOT / "examples" / "kb"
ORDER_QUESTION = "你好，我的订单号是 XC20250301000123，金额 8999 元，2025年3月1日下的单，请问什么时候发货？"
# Asked at turns 3-7 and again in the last five turns, so both overhead windows do the same retrieval work.
PROBES = [
    "iPhone 16 Pro 256GB 多少钱？",
    "How much does it cost to ship an order to Singapore?",
    "退货的钱多久能退回到我的银行卡？",
    "What's the starting price of the ThinkPad X1 Carbon Gen 12?",
    "积分怎么抵现？多少积分换一块钱？",
]
CSV_FIELDS = ["turn", "strategy", "total_prompt_tokens", "history_tokens", "summary_tokens", "context_tokens"]

ZH_SENTENCES = [
    "根据知识库资料，这款产品在官方渠道购买可享受一年整机保修，主要部件保修两年。",
    "如果您在签收后七天内申请退货，需要保证商品完好、配件齐全，激活过的手机要先检测。",
    "目前支持花呗和信用卡分期，三期和六期免手续费，二十四期的费率以页面显示为准。",
    "会员积分可以在结算时抵现，每一百积分抵扣一元，单笔最多抵扣订单金额的百分之十。",
    "订单满九十九元包邮，北京、上海等城市上午十一点前下单一般当天送达。",
    "以旧换新时我们会先对旧机进行检测，最终回收价以检测结果为准，另有换购补贴。",
    "如需开具增值税专用发票，请提供公司名称、纳税人识别号、地址电话和开户行信息。",
    "如果还有其他问题，可以拨打客服热线或者到附近的门店咨询，我们很乐意为您服务。",
]
EN_SENTENCES = [
    "According to our knowledge base, products bought through official channels carry a one-year warranty.",
    "International orders usually arrive within seven to twelve business days, depending on customs.",
    "Import duties are paid by the recipient, as our international shipments are sent DDU.",
    "The student discount applies to laptops and tablets once your student status has been verified.",
    "You can return an item within seven days of delivery if it is complete and in its original condition.",
    "If anything else comes up, our customer service team is available every day from 9:00 to 21:00.",
]


# -- the scripted conversation and the fake LLM ------------------------------------------------------


def script(turns: int) -> list[str]:
    """Turn 1 gives an order number; then follow-up chains and single questions about the KB, mixed
    Chinese and English; PROBES at turns 3-7 and in the last five turns."""
    pool = [q for chain, _, _ in FOLLOWUPS for q in chain] + [q for q, _, _ in QUESTIONS]
    questions = [ORDER_QUESTION]
    i = 0
    while len(questions) < turns:
        n = len(questions) + 1
        if 3 <= n <= 7:
            questions.append(PROBES[n - 3])
        elif n > turns - 5 and turns >= 10:
            questions.append(PROBES[n - (turns - 4)])
        else:
            questions.append(pool[i % len(pool)])
            i += 1
    return questions[:turns]


def _digest(text: str) -> bytes:
    return hashlib.sha256(text.encode()).digest()


def answer_for(question: str) -> str:
    """A deterministic answer of 150-300 characters, in the question's language."""
    d = _digest(question)
    target = 150 + int.from_bytes(d[:2], "big") % 151
    english = sum(c.isascii() for c in question) > 0.8 * len(question)
    pool = EN_SENTENCES if english else ZH_SENTENCES
    text, k = "", d[2]
    while len(text) < target:
        text += pool[k % len(pool)] + (" " if english else "")
        k += 1
    return text[:target].rstrip()


def summary_for(request: dict[str, Any]) -> str:
    """A plausible running summary: the user's questions, newest kept, about 300 characters."""
    text = message_text(request["messages"][-1].get("content"))
    existing, _, new = text.partition("\n\nNew rounds:\n")
    asked = [line[len("- ") :] for line in existing.splitlines() if line.startswith("- ")]
    asked += [line[len("User: ") :][:40] for line in new.splitlines() if line.startswith("User: ")]
    lines: list[str] = []
    for q in reversed(asked):
        if sum(len(x) for x in lines) + len(q) > 300:
            break
        lines.insert(0, q)
    return "用户此前咨询过以下问题：\n" + "\n".join(f"- {q}" for q in lines)


def respond(request: dict[str, Any]) -> str:
    messages = request.get("messages") or []
    if messages and "running summary" in message_text(messages[0].get("content")):
        return summary_for(request)
    final = message_text(messages[-1].get("content")) if messages else ""
    return answer_for(final.rsplit("用户的问题：", 1)[-1])


# -- services ---------------------------------------------------------------------------------------


class Bench:
    def __init__(self, work: Path, fake: FakeLLM) -> None:
        self.work, self.fake = work, fake
        self._apps = 0
        self.base = self.settings()
        self.counter: TokenCounter = make_counter(self.base.tokens)
        self.embedder: Embedder = make_embedder(self.base.embedding)
        self.index: VectorIndex = open_index(self.base.qdrant, self.embedder.dim, self.embedder.name)

    def settings(self, rewrite: str = "none", **memory: Any) -> Settings:
        self._apps += 1
        overrides: dict[str, Any] = {
            "qdrant": {"path": str(self.work / "qdrant")},
            "tokens": {"cache_dir": str(self.work / "tiktoken")},
            "database": {"url": f"sqlite+aiosqlite:///{self.work}/archive-{self._apps}.db"},
            "llm": {"base_url": self.fake.base_url, "max_retries": 0},
            "rewrite": {"mode": rewrite},
            "memory": memory,
        }
        return Settings(**overrides)

    async def ingest(self) -> int:
        chunks = 0
        for path in iter_files([KB], self.base.ingest.extensions):
            report = await ingest_file(
                path,
                index=self.index,
                embedder=self.embedder,
                counter=self.counter,
                settings=self.base,
                source=f"examples/kb/{path.name}",
            )
            chunks += report.chunks
        return chunks

    def services(self, rewrite: str, **memory: Any) -> Services:
        settings = self.settings(rewrite, **memory)
        return build_services(settings, counter=self.counter, embedder=self.embedder, index=self.index)


async def close(services: Services) -> None:
    """Services.close without closing the shared index."""
    await services.pipeline.drain()
    for client in services.clients:
        await client.close()
    await services.store.close()


async def new_session(services: Services) -> str:
    sid = f"bench-{time.monotonic_ns()}"
    await services.store.create(SessionMeta(session_id=sid, created_at=time.time()))
    return sid


async def ask(services: Services, sid: str, question: str, fake: FakeLLM) -> tuple[dict[str, Any], float]:
    """(receipt, wall seconds) of one turn; its compression is drained outside the timed part."""
    t0 = time.perf_counter()
    result = await services.pipeline.answer(sid, question)
    wall = time.perf_counter() - t0
    await services.pipeline.drain()
    # The fake server records every request; left to pile up, that harness-only heap growth would make
    # the garbage collector (and so the late turns) slower.
    fake.clear()
    return result.receipt, wall


async def converse(services: Services, questions: list[str], fake: FakeLLM) -> list[tuple[dict[str, Any], float]]:
    sid = await new_session(services)
    return [await ask(services, sid, q, fake) for q in questions]


def outside_llm_ms(receipt: dict[str, Any]) -> float:
    """Memory, rewrite, budget + retrieval, prompt assembly and store: every timed stage but generation."""
    return float(sum(v for k, v in receipt["timings_ms"].items() if k != "generate"))


# -- the two measurements ---------------------------------------------------------------------------


async def token_curves(bench: Bench, turns: int, rewrite: str) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    questions = script(turns)
    for strategy in STRATEGIES:
        services = bench.services(rewrite, strategy=strategy)
        try:
            for turn, (r, _) in enumerate(await converse(services, questions, bench.fake), start=1):
                rows.append({"turn": turn, "strategy": strategy, **{k: r[k] for k in CSV_FIELDS[2:]}})
        finally:
            await close(services)
        print(f"  {strategy}: {turns} turns", file=sys.stderr)
    return rows


async def overhead(bench: Bench, turns: int, reps: int, rewrite: str) -> dict[str, Any]:
    """Paired, interleaved timing: per repetition, one session is brought (untimed) to turn 2 and another
    to turn `turns - 5`; then their next five turns alternate, so the early and late samples share the
    machine's load of the same moment (other processes on a shared machine otherwise bias one window)."""
    questions = script(turns)
    early = range(3, 8)
    late = range(turns - 4, turns + 1)
    samples: dict[str, list[float]] = {"early": [], "late": [], "early_wall": [], "late_wall": []}
    stages: dict[str, dict[str, list[float]]] = {"early": {}, "late": {}}
    fake = bench.fake
    services = bench.services(rewrite, strategy="hybrid")

    def record(window: str, turn: tuple[dict[str, Any], float]) -> None:
        receipt, wall = turn
        samples[window].append(outside_llm_ms(receipt))
        samples[f"{window}_wall"].append(wall * 1000)
        for k, v in receipt["timings_ms"].items():
            stages[window].setdefault(k, []).append(v)

    try:
        await converse(services, script(12), fake)  # warm-up: caches, jieba, tiktoken, the archive
        for rep in range(reps):
            early_sid, late_sid = await new_session(services), await new_session(services)
            for q in questions[: late.start - 1]:
                await ask(services, late_sid, q, fake)
            for q in questions[: early.start - 1]:
                await ask(services, early_sid, q, fake)
            for i, (e, t) in enumerate(zip(early, late, strict=True)):
                order = [("early", early_sid, e), ("late", late_sid, t)]
                for window, sid, turn in order if i % 2 == 0 else order[::-1]:
                    result = await ask(services, sid, questions[turn - 1], fake)
                    record(window, result)
            last = result[0]
            print(f"  hybrid overhead, rewrite {rewrite}: repetition {rep + 1}/{reps}", file=sys.stderr)
    finally:
        await close(services)
    med = {k: statistics.median(v) for k, v in samples.items()}
    return {
        "strategy": "hybrid",
        "rewrite_mode": rewrite,
        "turns": turns,
        "repetitions": reps,
        "early_turns": [early.start, early.stop - 1],
        "late_turns": [late.start, late.stop - 1],
        "samples_per_window": len(samples["early"]),
        "median_ms_early": round(med["early"], 3),
        "median_ms_late": round(med["late"], 3),
        "ratio": round(med["late"] / med["early"], 3),
        "wall_median_ms_early": round(med["early_wall"], 3),
        "wall_median_ms_late": round(med["late_wall"], 3),
        "wall_ratio": round(med["late_wall"] / med["early_wall"], 3),
        "stage_median_ms": {
            w: {k: round(statistics.median(v), 3) for k, v in sorted(s.items())} for w, s in stages.items()
        },
        "last_turn_receipt": {k: v for k, v in last.items() if k != "timings_ms"},
        "method": (
            "ratio: medians of the receipt's timings_ms summed over every stage but 'generate' (memory load, "
            "rewrite, budget + retrieval, prompt assembly, store), i.e. the turn's time outside the LLM; "
            "wall_*: the whole pipeline.answer() call against a zero-delay fake LLM, which adds the local "
            "HTTP round trip. Compression runs in the background and is drained outside the timed part."
        ),
        "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
    }


# -- output -----------------------------------------------------------------------------------------


def write_csv(rows: list[dict[str, Any]], path: Path) -> None:
    with path.open("w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=CSV_FIELDS)
        writer.writeheader()
        writer.writerows(rows)


def plot(rows: list[dict[str, Any]], path: Path, context_window: int, total_budget: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(9, 5), dpi=120)
    for strategy in STRATEGIES:
        points = [(r["turn"], r["total_prompt_tokens"]) for r in rows if r["strategy"] == strategy]
        ax.plot([p[0] for p in points], [p[1] for p in points], label=strategy, linewidth=1.6)
    ax.axhline(total_budget, color="grey", linestyle="--", linewidth=1, label=f"total_budget ({total_budget})")
    ax.axhline(context_window, color="black", linestyle=":", linewidth=1, label=f"context_window ({context_window})")
    ax.set_xlabel("turn")
    ax.set_ylabel("prompt tokens sent (total_prompt_tokens)")
    ax.set_title("Prompt tokens per turn by memory strategy (sample KB, fake LLM)")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def at_turns(rows: list[dict[str, Any]], wanted: list[int]) -> list[str]:
    lines = [
        "| strategy | " + " | ".join(f"turn {t}: prompt / history / summary / context" for t in wanted) + " |",
        "|---" * (len(wanted) + 1) + "|",
    ]
    for strategy in STRATEGIES:
        by_turn = {r["turn"]: r for r in rows if r["strategy"] == strategy}
        cells = []
        for t in wanted:
            r = by_turn.get(t)
            cells.append(
                f"{r['total_prompt_tokens']} / {r['history_tokens']} / {r['summary_tokens']} / {r['context_tokens']}"
                if r
                else "-"
            )
        lines.append(f"| {strategy} | " + " | ".join(cells) + " |")
    return lines


def overhead_table(result: dict[str, Any]) -> list[str]:
    e, late = result["early_turns"], result["late_turns"]
    return [
        "| turns | median ms, stages but generate | median ms, wall (zero-delay fake LLM) |",
        "|---|---|---|",
        f"| {e[0]}-{e[1]} | {result['median_ms_early']} | {result['wall_median_ms_early']} |",
        f"| {late[0]}-{late[1]} | {result['median_ms_late']} | {result['wall_median_ms_late']} |",
        f"| ratio | **{result['ratio']}** | {result['wall_ratio']} |",
    ]


def stage_growth(result: dict[str, Any]) -> str:
    early, late = result["stage_median_ms"]["early"], result["stage_median_ms"]["late"]
    return ", ".join(f"{k} {early[k]} -> {late[k]}" for k in early if k != "generate")


async def main_async(args: argparse.Namespace) -> int:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    if args.reps < 1 or args.overhead_turns < 12 or args.turns < 1:
        raise SystemExit("need --reps >= 1, --overhead-turns >= 12 and --turns >= 1")
    with tempfile.TemporaryDirectory(prefix="rag-bench-") as tmp, FakeLLM(respond) as fake:
        work = Path(args.work) if args.work else Path(tmp)
        work.mkdir(parents=True, exist_ok=True)
        bench = Bench(work, fake)
        try:
            t0 = time.perf_counter()
            chunks = await bench.ingest()
            print(f"ingested examples/kb: {chunks} chunks in {time.perf_counter() - t0:.1f}s", file=sys.stderr)
            rows = await token_curves(bench, args.turns, args.rewrite)
            result = await overhead(bench, args.overhead_turns, args.reps, args.rewrite)
            if args.compare_rewrite and args.compare_rewrite != args.rewrite:
                result["compare"] = await overhead(bench, args.overhead_turns, args.reps, args.compare_rewrite)
        finally:
            await bench.index.close()
    write_csv(rows, out / "memory_tokens.csv")
    b = bench.base.budget
    plot(rows, out / "memory_tokens.png", b.context_window, b.total_budget)
    (out / "memory_overhead.json").write_text(json.dumps(result, indent=2, ensure_ascii=False) + "\n")

    marks = [t for t in (10, 50, 100) if t <= args.turns]
    ok = result["ratio"] < 1.2
    print("\n## Memory strategies: prompt tokens per turn\n")
    print(
        f"{args.turns}-turn scripted conversation (rewrite.mode {args.rewrite}); context_window "
        f"{b.context_window}, total_budget {b.total_budget}, generation_reserve {b.generation_reserve}. "
        "Cells: total prompt / history / summary / context tokens.\n"
    )
    print("\n".join(at_turns(rows, marks)))
    print(f"\nCSV: {out / 'memory_tokens.csv'}, plot: {out / 'memory_tokens.png'}\n")
    print(
        f"## Per-turn overhead outside the LLM (hybrid, rewrite.mode {args.rewrite}, "
        f"{result['repetitions']} x {result['turns']} turns)\n"
    )
    print("\n".join(overhead_table(result)))
    print(f"\nlimit 1.2: {'OK' if ok else 'FAILED'}. Stage medians (ms): {stage_growth(result)}")
    compare = result.get("compare")
    if compare:
        print(f"\n### The same with rewrite.mode {compare['rewrite_mode']} (for comparison, not gated)\n")
        print("\n".join(overhead_table(compare)))
        print(f"\nStage medians (ms): {stage_growth(compare)}")
    print(f"\nJSON: {out / 'memory_overhead.json'}")
    return 0 if ok else 1


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--turns", type=int, default=100, help="turns of the token-curve conversation")
    parser.add_argument("--overhead-turns", type=int, default=200, help="turns of the overhead conversation")
    parser.add_argument("--reps", type=int, default=5, help="repetitions of the overhead measurement")
    parser.add_argument(
        "--rewrite",
        choices=["none", "rule"],
        default="none",
        help="rewrite.mode for the token curves and the gated overhead ratio (default none: memory's stages only)",
    )
    parser.add_argument(
        "--compare-rewrite",
        choices=["", "none", "rule"],
        default="rule",
        help="also measure the overhead with this rewrite.mode, reported but not gated ('' to skip)",
    )
    parser.add_argument("--out", default=str(ROOT / "bench" / "results"))
    parser.add_argument(
        "--work", help="keep the Qdrant folder, archives and tiktoken cache here (a re-run skips re-embedding)"
    )
    args = parser.parse_args(argv)
    return asyncio.run(main_async(args))


if __name__ == "__main__":
    raise SystemExit(main())
