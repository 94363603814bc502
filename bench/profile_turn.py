"""Profile this service's chat turn in-process with pyinstrument, to find and remove waste.

Runs ~100 turns of the scripted conversations (bench/conversations.json, new session per conversation)
through `build_services` + `pipeline.answer` against the zero-delay recording upstream (bench/upstream.py,
a subprocess, so its threads stay out of the profile), with the same Qdrant folder and settings as the
ragservice runner of bench/compare.py. The query-embedding cache is emptied at each new session, so turns
beyond the first pass through the conversations cost what a first visit costs (as in compare.py, where
every run is a fresh process).

    .venv/bin/python bench/profile_turn.py                 # -> bench/results/profile_turn.{txt,html}
    .venv/bin/python bench/profile_turn.py --turns 200 --interval 0.0002
    .venv/bin/python bench/profile_turn.py --no-profile    # the same turns timed without the sampler

The sampler costs time at every sample in proportion to the depth of the Python stack it walks, so the
profiled wall times favour shallow code; `--no-profile` gives what a turn costs. Compare two commits with both
(interleaved runs; an old commit without the flag: its profile_turn.py with `pyinstrument.Profiler` stubbed).

Needs pyinstrument in the project venv (`.venv/bin/pip install pyinstrument`).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any

BENCH = Path(__file__).resolve().parent
ROOT = BENCH.parent
for p in (str(BENCH / "runners"), str(BENCH), str(ROOT)):
    if p not in sys.path:
        sys.path.insert(0, p)

from _common import Args, load_script  # noqa: E402
from ragservice_runner import RagServiceBench, build  # noqa: E402

from bench import harness  # noqa: E402
from bench.analysis import percentile  # noqa: E402
from rag_service.domain import SessionMeta  # noqa: E402


def _questions(conversations: list[dict[str, Any]], turns: int) -> list[tuple[int, str, str]]:
    """(session number, conversation id, question), cycling through the conversations."""
    out: list[tuple[int, str, str]] = []
    session = 0
    while len(out) < turns:
        for conv in conversations:
            for q in conv["turns"]:
                if len(out) >= turns:
                    return out
                out.append((session, conv["id"], q))
            session += 1
    return out


async def profile(args: argparse.Namespace, upstream: str, conv_file: Path) -> tuple[Any, dict[str, Any]]:
    script = load_script(conv_file, None)
    bench: RagServiceBench = await build(Args(args.qdrant, upstream, conv_file, Path("-"), None, "default"), script)
    pipeline = bench.services.pipeline
    sessions: dict[int, str] = {}

    async def session_for(n: int, conv_id: str) -> str:
        if n not in sessions:
            await pipeline.drain()
            sessions[n] = f"profile-{conv_id}-{uuid.uuid4().hex}"
            clear = getattr(bench.services.embedder, "clear", None)
            if clear is not None:
                clear()
            await bench.services.store.create(SessionMeta(session_id=sessions[n], created_at=time.time()))
        return sessions[n]

    # Warm-up outside the profile: lazy imports, jieba, first HTTP connection.
    warm = await bench.new_session("warmup")
    for q in script.warmup:
        await warm(q)
    await pipeline.drain()

    walls: list[float] = []
    stages: dict[str, list[float]] = defaultdict(list)
    profiler = None
    if not args.no_profile:
        from pyinstrument import Profiler

        profiler = Profiler(interval=args.interval, async_mode="enabled")
        profiler.start()
    for n, conv_id, q in _questions(script.conversations, args.turns):
        sid = await session_for(n, conv_id)
        t0 = time.perf_counter()
        result = await pipeline.answer(sid, q)
        walls.append((time.perf_counter() - t0) * 1000)
        for stage, ms in result.receipt.get("timings_ms", {}).items():
            stages[stage].append(ms)
    await pipeline.drain()
    if profiler is not None:
        profiler.stop()
    await bench.close()
    stats = {"walls": walls, "stages": stages}
    return profiler, stats


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description="Profile this service's chat turn with pyinstrument.")
    p.add_argument("--turns", type=int, default=100)
    p.add_argument("--interval", type=float, default=0.0005, help="sampling interval in seconds")
    p.add_argument("--qdrant", type=Path, default=harness.RESULTS / "qdrant")
    p.add_argument("--out", type=Path, default=harness.RESULTS / "profile_turn.txt")
    p.add_argument("--top", type=int, default=40, help="lines of the flat profile to print")
    p.add_argument(
        "--no-profile",
        action="store_true",
        help="time the turns only: the sampler walks the whole Python stack at every sample, which makes code with "
        "deeper stacks look slower than it runs",
    )
    args = p.parse_args(argv)
    args.qdrant = args.qdrant.resolve()

    if not args.no_profile:
        try:
            import pyinstrument  # noqa: F401
        except ImportError:
            raise SystemExit("pyinstrument is missing: .venv/bin/pip install pyinstrument") from None
    tiktoken_dir = harness.RESULTS / "tiktoken"
    harness.RESULTS.mkdir(parents=True, exist_ok=True)
    harness.prepare_tiktoken(tiktoken_dir)
    harness.ingest(args.qdrant, tiktoken_dir, force=False)
    conv_file = harness.RESULTS / "conversations.run.json"
    harness.write_conversations(harness.BENCH / "conversations.json", conv_file)
    os.environ.setdefault("TIKTOKEN_CACHE_DIR", str(tiktoken_dir))

    upstream = harness.Upstream(0.0, conv_file)
    try:
        profiler, stats = asyncio.run(profile(args, upstream.base_url, conv_file))
    finally:
        upstream.stop()

    walls: list[float] = stats["walls"]
    header = [
        f"# {len(walls)} turns of bench/conversations.json, zero-delay upstream, "
        "query-embedding cache emptied per session, "
        + ("not profiled" if args.no_profile else f"sampling every {args.interval * 1000:g} ms"),
        f"# turn wall time (includes the upstream's ~0.3-1 ms per call): p50 {statistics.median(walls):.1f} ms, "
        f"p95 {percentile(walls, 0.95):.1f} ms, mean {statistics.fmean(walls):.1f} ms",
        "# pipeline stages (receipt timings_ms), median / p95 / mean ms:",
    ]
    for stage, values in stats["stages"].items():
        header.append(
            f"#   {stage:9s} {statistics.median(values):7.2f} / {percentile(values, 0.95):7.2f} / "
            f"{statistics.fmean(values):7.2f}"
        )
    args.out.parent.mkdir(parents=True, exist_ok=True)
    if profiler is None:
        args.out.write_text("\n".join(header) + "\n", encoding="utf-8")
        print("\n".join(header))
        return 0
    flat = profiler.output_text(unicode=True, color=False, flat=True, flat_time="self")
    tree = profiler.output_text(unicode=True, color=False, show_all=False)
    report = "\n".join(header) + "\n\n## flat (self time)\n" + flat + "\n\n## call tree\n" + tree
    args.out.write_text(report, encoding="utf-8")
    html = args.out.with_suffix(".html")
    html.write_text(profiler.output_html(), encoding="utf-8")
    print("\n".join(header))
    print("\n## flat profile, top by self time")
    print("\n".join(flat.splitlines()[: args.top + 8]))
    print(f"\nfull report: {args.out} (tree + flat), {html}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
