"""The systems compared and how one of them is run: a runner subprocess (bench/runners/*_runner.py) in
the system's own virtual environment, against one upstream, timed and accounted for CPU.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.analysis import PromptCounter, analyze, run_metrics
from bench.harness import (
    BENCH,
    PROJECT_PY,
    RESULTS,
    ROOT,
    VENVS,
    Upstream,
    busy_cpu_s,
    code_state,
    log,
    own_cpu_s,
    runner_env,
)

CONTEXT_WINDOW = 8192
OURS = "ragservice"


@dataclass(frozen=True)
class SystemSpec:
    key: str
    label: str
    venv: str | None  # None: the project's .venv
    runner: str
    args: tuple[str, ...] = ()
    config: str = ""

    def python(self) -> Path:
        return PROJECT_PY if self.venv is None else VENVS / self.venv / "bin" / "python"


SYSTEMS: list[SystemSpec] = [
    SystemSpec(
        OURS,
        "rag-service (this)",
        None,
        "ragservice_runner.py",
        config="`build_services` + `pipeline.answer` in-process with the repository's default settings "
        "(`configs/default.yaml`): the memory strategy keeps recent rounds verbatim within the history budget and "
        "folds older ones into a running summary in the background, the LLM rewrites only follow-ups that depend "
        "on the conversation, retrieval fills the chunk budget (at most 6 chunks); in-process session store in "
        "front of a SQLite archive.",
    ),
    SystemSpec(
        "llamaindex-memory",
        "LlamaIndex + Memory (default)",
        "llamaindex",
        "llamaindex_runner.py",
        ("--variant", "memory"),
        config="`CondensePlusContextChatEngine.from_defaults` with its default memory "
        "(`Memory.from_defaults(token_limit=context_window - 256)`: SQLAlchemy chat store on in-memory aiosqlite), "
        "`OpenAILike(context_window=8192, max_tokens=512)`, `similarity_top_k=6` dense retrieval; `achat()`.",
    ),
    SystemSpec(
        "llamaindex-buffer",
        "LlamaIndex + ChatMemoryBuffer",
        "llamaindex",
        "llamaindex_runner.py",
        ("--variant", "buffer"),
        config="as above with `ChatMemoryBuffer.from_defaults(token_limit=3900)` (the value of LlamaIndex's "
        "chat-engine examples).",
    ),
    SystemSpec(
        "langchain",
        "LangChain (classic chains)",
        "langchain",
        "langchain_runner.py",
        config="`create_history_aware_retriever` + `create_stuff_documents_chain` + `create_retrieval_chain` "
        "(langchain-classic), `RunnableWithMessageHistory` with `trim_messages(max_tokens=2000, "
        "strategy='last', token_counter=ChatOpenAI)`, `ChatOpenAI(max_tokens=512)`, `k=6` dense retrieval "
        "(`QdrantVectorStore`, `vector_name='dense'`, `content_payload_key='text'`); `ainvoke()`.",
    ),
]


@dataclass
class RunRecord:
    system: str
    delay: float
    rep: int
    load1: float
    foreign_cores: float  # CPU used by other processes during the run, in cores (0 = quiet machine)
    niced_cores: float  # CPU used by other processes running with lowered priority (nice)
    metrics: dict[str, Any]
    packages: dict[str, str]
    python: str
    config: dict[str, Any]
    per_turn: list[dict[str, Any]] = field(default_factory=list)
    code: str = ""  # git HEAD (+ "-dirty") when the run started: the code this service ran


def run_one(
    spec: SystemSpec,
    upstream: Upstream,
    all_upstreams: Sequence[Upstream],
    rep: int,
    conv_file: Path,
    rounds: int,
    qdrant: Path,
    tiktoken_dir: Path,
    counter: PromptCounter,
    order_numbers: dict[str, str],
    keep_requests: bool,
) -> RunRecord:
    tag = f"{spec.key}-d{int(upstream.delay * 1000)}-r{rep}"
    out = RESULTS / "runs" / f"{tag}.json"
    logfile = RESULTS / "logs" / f"{tag}.log"
    out.parent.mkdir(parents=True, exist_ok=True)
    logfile.parent.mkdir(parents=True, exist_ok=True)
    upstream.drain()  # forget anything left over
    load1 = os.getloadavg()[0]
    cmd = [
        str(spec.python()),
        str(BENCH / "runners" / spec.runner),
        str(qdrant),
        upstream.base_url,
        str(conv_file),
        str(out),
        "--rounds",
        str(rounds),
        *spec.args,
    ]
    pids = [u.proc.pid for u in all_upstreams]
    code = code_state()
    (busy0, nice0), own0, t0 = busy_cpu_s(), own_cpu_s(pids), time.monotonic()
    with logfile.open("w") as lf:
        proc = subprocess.run(
            cmd, cwd=ROOT, env=runner_env(tiktoken_dir), stdout=lf, stderr=subprocess.STDOUT, timeout=1800
        )
    elapsed = time.monotonic() - t0
    busy1, nice1 = busy_cpu_s()
    foreign = max(0.0, (busy1 - busy0) - (own_cpu_s(pids) - own0)) / max(elapsed, 1e-9)
    niced = (nice1 - nice0) / max(elapsed, 1e-9)
    if proc.returncode != 0:
        raise SystemExit(f"{tag} failed (exit {proc.returncode}); see {logfile}")
    records = upstream.drain()
    run = json.loads(out.read_text(encoding="utf-8"))
    summary = analyze(run, records, counter, order_numbers)
    if keep_requests:
        (RESULTS / "runs" / f"{tag}.requests.json").write_text(json.dumps(records, ensure_ascii=False))
    metrics = run_metrics(summary)
    log(
        f"{tag}: {time.monotonic() - t0:.0f}s  overhead p50 {metrics['overhead_p50']:.1f} ms  "
        f"latency p50 {metrics['latency_p50']:.0f} ms  calls/turn {metrics['calls_per_turn']:.2f}  "
        f"rss {metrics['rss_mb']:.0f} MB  load {load1:.2f}  other processes {foreign:.2f} cores (+{niced:.2f} niced)"
    )
    per_turn = [
        {"conv": c["id"], **{k: v for k, v in t.items() if k != "calls_by_kind"}}
        for c in summary["conversations"]
        for t in c["turns"]
    ]
    return RunRecord(
        spec.key,
        upstream.delay,
        rep,
        load1,
        foreign,
        niced,
        metrics,
        run["packages"],
        run["python"],
        run.get("config", {}),
        per_turn,
        code,
    )
