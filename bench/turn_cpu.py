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

CPU time still moves by a few ms with the machine's load (caches, frequency, other jobs' interrupts), which
is the size of the differences that matter. `--instructions` adds a count that does not move at all: the
same passes run once more under valgrind's callgrind (the machine has no hardware counters for
`perf stat`), and each turn's instructions are read from a callgrind dump. The turn's span is marked with
two system calls nothing else in the process makes: `os.getpgid(0)` before (callgrind zeroes its counters
there, `--zero-before=getpgid`) and `os.getsid(0)` after (it writes a dump, `--dump-before=getsid`), so the
count covers exactly the span the CPU time covers, every thread included. The setup runs uninstrumented
until the child switches callgrind on (`callgrind_control`). Python runs about 50x slower under
callgrind, so use few passes (the first pass is a live conversation's cost, the second the memoised
steady state) and, while iterating, fewer `--turns`; both trees must run the same turns.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
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
    tree: Path,
    qdrant: Path,
    upstream: str,
    conv_file: Path,
    turns: int,
    passes: int,
    profile: Path | None,
    mark: bool = False,
    drain: bool = False,
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
    if mark:
        # The imports, the model and the warm-up ran uninstrumented (`--instr-atstart=no`, several times
        # faster under valgrind); the turns are counted from here on.
        subprocess.run(["callgrind_control", "--instr=on", str(os.getpid())], check=True, stdout=subprocess.DEVNULL)

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
            if mark:
                os.getpgid(0)  # callgrind: --zero-before=getpgid
            t0 = time.process_time()
            result = await pipeline.answer(sessions[n], q)
            cpu.append((time.process_time() - t0) * 1000)
            if mark:
                os.getsid(0)  # callgrind: --dump-before=getsid
            if drain:
                # The turn's background tasks (receipt, archive write, compression) finish here, outside
                # the next turn's span: with and without, the count shows whether they land in it.
                await pipeline.drain()
            for stage, ms in result.receipt.get("timings_ms", {}).items():
                stages.setdefault(stage, {}).setdefault(len(cpu) - 1, []).append(float(ms))
        await pipeline.drain()
        out.append(cpu)
    if profiler is not None and profile is not None:
        profiler.disable()
        profiler.dump_stats(profile)
    await bench.close()
    return out, {stage: [min(v) for v in turns.values()] for stage, turns in stages.items()}


def _callgrind_passes(
    tree: Path,
    qdrant: Path,
    upstream: str,
    conv_file: Path,
    turns: int,
    passes: int,
    engine: str,
    keep: Path | None,
    drain: bool = False,
) -> list[list[int]]:
    """Instructions of each turn (per pass): the passes again, in a child process under callgrind."""
    valgrind = shutil.which("valgrind")
    if valgrind is None:
        raise SystemExit("--instructions needs valgrind (Debian: apt-get install valgrind)")
    with tempfile.TemporaryDirectory(prefix="turn-cpu-callgrind-") as tmp:
        out = Path(tmp) / "callgrind.out"
        if keep is not None:
            keep.mkdir(parents=True, exist_ok=True)
            for old in keep.glob("callgrind.out*"):
                old.unlink()
            out = keep / "callgrind.out"
        command = [
            valgrind,
            "--tool=callgrind",
            "--instr-atstart=no",
            f"--callgrind-out-file={out}",
            "--zero-before=getpgid",
            "--dump-before=getsid",
            "--dump-instr=no",
            "--dump-line=no",
            # The venv's interpreter (a binary, not a launcher script: valgrind would measure the script's shell).
            sys.executable,
            str(Path(__file__).resolve()),
            "--callgrind-child",
            f"--tree={tree}",
            f"--qdrant={qdrant}",
            f"--turns={turns}",
            f"--passes={passes}",
            *(["--drain"] if drain else []),
            f"--engine={engine}",
            f"--upstream={upstream}",
            f"--conversations={conv_file}",
        ]
        # A fixed hash seed: set iteration order, and so the instructions, the same in every run.
        env = os.environ | {"PYTHONHASHSEED": "0"}
        log = Path(tmp) / "valgrind.log"
        with log.open("w") as err:
            done = subprocess.run(command, env=env, stdout=subprocess.DEVNULL, stderr=err)
        if done.returncode != 0:
            sys.stderr.write(log.read_text()[-4000:])
            raise SystemExit(f"the callgrind run failed ({done.returncode})")
        # One dump per turn, numbered in the order written (the unnumbered file is the exit's remainder).
        dumps = sorted(out.parent.glob("callgrind.out.*"), key=lambda f: int(f.suffix[1:]))
        counts = [_summary(f) for f in dumps]
    if len(counts) % passes or not counts:
        raise SystemExit(f"callgrind wrote {len(counts)} turn dumps, not a multiple of {passes} passes")
    per_pass = len(counts) // passes
    return [counts[i * per_pass : (i + 1) * per_pass] for i in range(passes)]


def _summary(dump: Path) -> int:
    """A callgrind dump's instruction count (its `summary:` line: the only event collected is Ir)."""
    with dump.open(encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("summary:"):
                return int(line.split()[1])
    raise SystemExit(f"{dump}: no summary line")


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
    p.add_argument(
        "--instructions",
        type=int,
        default=0,
        metavar="PASSES",
        help="also count each turn's instructions under callgrind, over this many passes (2: first and steady)",
    )
    p.add_argument(
        "--callgrind-dumps",
        type=Path,
        default=None,
        help="keep the per-turn callgrind dumps here (callgrind_annotate DIR/callgrind.out.N: turn N's profile)",
    )
    # The child process --instructions runs under valgrind: the passes alone, marked for callgrind.
    p.add_argument(
        "--drain",
        action="store_true",
        help="wait for each turn's background tasks outside the measured spans (do they land in the next turn?)",
    )
    p.add_argument("--callgrind-child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--upstream", default=None, help=argparse.SUPPRESS)
    p.add_argument("--conversations", type=Path, default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    tree = args.tree.resolve()
    if args.callgrind_child:
        os.environ["RAG_BENCH_QDRANT_ENGINE"] = args.engine
        asyncio.run(
            _passes(
                tree,
                args.qdrant,
                args.upstream,
                args.conversations,
                args.turns,
                args.passes,
                None,
                mark=True,
                drain=args.drain,
            )
        )
        return 0
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
            _passes(tree, qdrant, upstream.base_url, conv_file, args.turns, args.passes, args.profile, drain=args.drain)
        )
        instructions = (
            _callgrind_passes(
                tree,
                qdrant,
                upstream.base_url,
                conv_file,
                args.turns,
                args.instructions,
                args.engine,
                args.callgrind_dumps,
                args.drain,
            )
            if args.instructions
            else None
        )
    finally:
        upstream.stop()
    per_turn = [min(values) for values in zip(*passes, strict=True)]
    report: dict[str, Any] = {
        "tree": str(tree),
        "commit": commit,
        "engine": args.engine,
        "turns": len(per_turn),
        "passes": len(passes),
        "drained": args.drain,
        "cpu_ms_median": round(statistics.median(per_turn), 3),
        "cpu_ms_mean": round(statistics.fmean(per_turn), 3),
        "cpu_ms_per_turn_min": [round(v, 3) for v in per_turn],
        "loadavg": os.getloadavg(),
        "stage_wall_ms_median_of_min": {k: round(statistics.median(v), 3) for k, v in stage_min.items()},
    }
    print(
        f"{commit} ({tree}, {args.engine}): {len(per_turn)} turns, min over {len(passes)} passes: "
        f"CPU median {report['cpu_ms_median']:.2f} ms, mean {report['cpu_ms_mean']:.2f} ms (load {os.getloadavg()[0]:.1f})"
    )
    print("  stages (receipt wall ms, min over passes, median over turns):", report["stage_wall_ms_median_of_min"])
    if instructions is not None:
        first, steady = instructions[0], [min(values) for values in zip(*instructions, strict=True)]
        report["instructions_per_turn_by_pass"] = instructions
        for name, counts in (("first_pass", first), ("min", steady)):
            report[f"minstr_{name}_median"] = round(statistics.median(counts) / 1e6, 3)
            report[f"minstr_{name}_mean"] = round(statistics.fmean(counts) / 1e6, 3)
        print(
            f"  instructions per turn (millions; callgrind, {len(instructions)} passes): first pass median "
            f"{report['minstr_first_pass_median']:.2f}, mean {report['minstr_first_pass_mean']:.2f}; "
            f"min over passes median {report['minstr_min_median']:.2f}, mean {report['minstr_min_mean']:.2f}"
        )
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1), encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
