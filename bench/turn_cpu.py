"""CPU time per chat turn of a checkout, comparable between commits on a machine other jobs share.

`bench/profile_turn.py` measures wall time, which on a shared 2-core machine moves by 10x between runs of
the same code (other jobs take the CPU between our instructions). CPU time spent by this process
(`time.process_time`: every thread, so the embedding threads count; the upstream is a subprocess and
does not) moves far less, and the minimum over repeated passes removes most of what is left (cache
misses and frequency changes only ever add). So: the same scripted turns (bench/conversations.json, a
new session per conversation, the query-embedding cache emptied per session, the zero-delay upstream),
each pass through all of them in order, `--passes` passes, and per turn the minimum over passes; the
report is the median and mean of those minimums.

The checkout under test is `--tree` (default: this one): its `bench/runners/ragservice_runner.build` builds
the services, so an old commit runs with its own code and defaults, over an index its own `rag-ingest`
wrote (local mode, made once per tree in `--qdrant`). Run old and new alternately and compare:

    git worktree add --detach /tmp/old 8ae1090
    for i in 1 2; do
      .venv/bin/python bench/turn_cpu.py --tree /tmp/old --json bench/results/turn_cpu_old_$i.json
      .venv/bin/python bench/turn_cpu.py --json bench/results/turn_cpu_new_$i.json
    done
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent


def _ingest(tree: Path, qdrant: Path, tiktoken_dir: Path, engine: str) -> None:
    """The tree's own ingest of examples/kb into `qdrant` (embedded, `engine`), once."""
    if (qdrant / ".ingested").exists():
        return
    env = os.environ | {
        "PYTHONPATH": str(tree),
        "TIKTOKEN_CACHE_DIR": str(tiktoken_dir),
        "RAG_QDRANT__PATH": str(qdrant),
        "RAG_QDRANT__COLLECTION": "kb",
        "RAG_QDRANT__ENGINE": engine,
    }
    code = "import sys; from ingest.cli import main; sys.exit(main())"
    subprocess.run(
        [sys.executable, "-c", code, "examples/kb"], cwd=tree, env=env, check=True, stdout=subprocess.DEVNULL
    )
    (qdrant / ".ingested").touch()


def _system_prompt(tree: Path) -> str:
    """The tree's default system prompt (its settings module moved between commits; the old name first,
    because this venv's editable install finds the new package even from an old tree)."""
    code = (
        "try:\n from rag_service.settings import DEFAULT_SYSTEM_PROMPT\n"
        "except ImportError:\n from rag_core.settings import DEFAULT_SYSTEM_PROMPT\n"
        "print(DEFAULT_SYSTEM_PROMPT, end='')"
    )
    env = os.environ | {"PYTHONPATH": str(tree)}
    return subprocess.run(
        [sys.executable, "-c", code], cwd=tree, env=env, check=True, capture_output=True, text=True
    ).stdout


async def _passes(
    tree: Path, qdrant: Path, upstream: str, conv_file: Path, turns: int, passes: int, profile: Path | None
) -> tuple[list[list[float]], dict[str, list[float]]]:
    # The tree's modules, not this checkout's: its runner, its rag_service, its rag_core (dropped if this
    # process already imported them from elsewhere, e.g. the tiktoken preparation).
    for name in [m for m in sys.modules if m.split(".")[0] in {"rag_core", "rag_service", "ingest", "_common"}]:
        del sys.modules[name]
    for p in (str(tree / "bench" / "runners"), str(tree)):
        sys.path.insert(0, p)
    from _common import Args, load_script
    from ragservice_runner import build

    import rag_service
    from rag_service.domain import SessionMeta

    print(f"measuring {tree}: rag_service from {Path(rag_service.__file__).parent}", file=sys.stderr)

    # Settings files are looked up from the working directory, which must be the tree's own.
    os.chdir(tree)
    script = load_script(conv_file, None)
    bench = await build(Args(qdrant, upstream, conv_file, Path("-"), None, "default"), script)
    pipeline = bench.services.pipeline
    questions = [(i, q) for i, conv in enumerate(script.conversations) for q in conv["turns"]][:turns]

    warm = await bench.new_session("warmup")
    for q in script.warmup:
        await warm(q)
    await pipeline.drain()

    out: list[list[float]] = []
    # stage -> turn -> wall ms of each pass (the receipt's timings): the minimum per turn is the stage's
    # cost with the least interference, comparable between commits like the CPU time.
    stages: dict[str, dict[int, list[float]]] = {}
    profiler = cProfile.Profile() if profile is not None else None
    if profiler is not None:
        profiler.enable()
    for _ in range(passes):
        cpu: list[float] = []
        sessions: dict[int, str] = {}
        for n, q in questions:
            if n not in sessions:
                await pipeline.drain()
                sessions[n] = f"cpu-{n}-{uuid.uuid4().hex}"
                clear = getattr(bench.services.embedder, "clear", None)
                if clear is not None:
                    clear()
                await bench.services.store.create(SessionMeta(session_id=sessions[n], created_at=time.time()))
            t0 = time.process_time()
            result = await pipeline.answer(sessions[n], q)
            cpu.append((time.process_time() - t0) * 1000)
            for stage, ms in result.receipt.get("timings_ms", {}).items():
                stages.setdefault(stage, {}).setdefault(len(cpu) - 1, []).append(float(ms))
        await pipeline.drain()
        out.append(cpu)
    if profiler is not None and profile is not None:
        profiler.disable()
        profiler.dump_stats(profile)
    await bench.close()
    return out, {stage: [min(v) for v in turns.values()] for stage, turns in stages.items()}


def main(argv: list[str] | None = None) -> int:
    sys.path.insert(0, str(BENCH))
    sys.path.insert(0, str(ROOT))
    from bench import harness

    p = argparse.ArgumentParser(description="CPU ms per chat turn of a checkout (min over passes).")
    p.add_argument("--tree", type=Path, default=ROOT, help="checkout to measure (default: this one)")
    p.add_argument("--turns", type=int, default=60)
    p.add_argument("--passes", type=int, default=5)
    p.add_argument("--qdrant", type=Path, default=None, help="index folder (default: bench/results/qdrant-cpu-<tree>)")
    p.add_argument("--json", type=Path, default=None)
    p.add_argument("--profile", type=Path, default=None, help="cProfile stats of the passes (event-loop thread)")
    # Qdrant's local mode is what every commit (and the frameworks' runners) can read, so comparisons use it;
    # "edge" is the shipped default, which trees from before it existed cannot run.
    p.add_argument("--engine", choices=["local", "edge"], default="local", help="embedded vector store engine")
    args = p.parse_args(argv)
    tree = args.tree.resolve()
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=tree, capture_output=True, text=True
    ).stdout.strip()
    suffix = "" if args.engine == "local" else f"-{args.engine}"
    qdrant = (args.qdrant or harness.RESULTS / f"qdrant-cpu-{tree.name}-{commit}{suffix}").resolve()
    os.environ["RAG_BENCH_QDRANT_ENGINE"] = args.engine

    tiktoken_dir = harness.RESULTS / "tiktoken"
    harness.RESULTS.mkdir(parents=True, exist_ok=True)
    harness.prepare_tiktoken(tiktoken_dir)
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(tiktoken_dir))
    _ingest(tree, qdrant, tiktoken_dir, args.engine)
    conv_file = harness.RESULTS / f"conversations.cpu-{tree.name}-{commit}.json"
    data = json.loads((BENCH / "conversations.json").read_text(encoding="utf-8"))
    data["system_prompt"] = _system_prompt(tree)
    conv_file.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")

    upstream = harness.Upstream(0.0, conv_file)
    try:
        passes, stage_min = asyncio.run(
            _passes(tree, qdrant, upstream.base_url, conv_file, args.turns, args.passes, args.profile)
        )
    finally:
        upstream.stop()
    per_turn = [min(values) for values in zip(*passes, strict=True)]
    report: dict[str, Any] = {
        "tree": str(tree),
        "commit": commit,
        "turns": len(per_turn),
        "passes": len(passes),
        "cpu_ms_median": round(statistics.median(per_turn), 3),
        "cpu_ms_mean": round(statistics.fmean(per_turn), 3),
        "cpu_ms_per_turn_min": [round(v, 3) for v in per_turn],
        "loadavg": os.getloadavg(),
        "stage_wall_ms_median_of_min": {k: round(statistics.median(v), 3) for k, v in stage_min.items()},
    }
    print(
        f"{commit} ({tree}): {len(per_turn)} turns, min over {len(passes)} passes: "
        f"CPU median {report['cpu_ms_median']:.2f} ms, mean {report['cpu_ms_mean']:.2f} ms (load {os.getloadavg()[0]:.1f})"
    )
    print("  stages (receipt wall ms, min over passes, median over turns):", report["stage_wall_ms_median_of_min"])
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
