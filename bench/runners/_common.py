"""What every runner of bench/compare.py shares (standard library and `openai` only: each runner runs in its
own virtual environment).

A runner builds its system once, makes a few bare `openai` calls (calibration), runs a throwaway warm-up
conversation, then the scripted conversations turn by turn, one fresh session each, timing every turn on
`time.monotonic()` (the clock the recording upstream stamps its requests with), and writes one JSON file.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import platform
import resource
import sys
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path
from typing import Any, Protocol

# rag_core.settings.DEFAULT_SYSTEM_PROMPT; bench/compare.py writes the real one into the conversation file.
FALLBACK_SYSTEM_PROMPT = "你是星辰数码的在线客服助手。只根据资料和对话历史回答用户的问题。"

TOP_K = 6  # this service's retrieval.max_chunks
MAX_TOKENS = 512  # this service's llm.max_tokens and budget.generation_reserve
CONTEXT_WINDOW = 8192  # this service's budget.context_window
MODEL = "gpt-4o-mini"  # this service's default llm.model
TEMPERATURE = 0.3  # this service's default llm.temperature
CALIBRATION_CALLS = 20
_IMPORTED_AT = time.monotonic()  # the runners import this module before their framework


@dataclass(frozen=True)
class Args:
    qdrant: Path
    upstream: str
    conversations: Path
    out: Path
    rounds: int | None
    variant: str


@dataclass(frozen=True)
class Script:
    system_prompt: str
    warmup: list[str]
    conversations: list[dict[str, Any]]


class Bench(Protocol):
    """One system under test, built once per process."""

    config: dict[str, Any]  # the settings that matter for the comparison, for the report

    async def new_session(self, conv_id: str) -> Callable[[str], Awaitable[str]]:
        """A fresh conversation; the returned function answers one user turn."""
        ...

    async def end_session(self) -> None:
        """After a conversation's last turn (e.g. wait for background work)."""
        ...

    async def close(self) -> None: ...


def parse_args(variants: Sequence[str] = ("default",)) -> Args:
    p = argparse.ArgumentParser()
    p.add_argument("qdrant", type=Path, help="Qdrant local folder holding collection 'kb'")
    p.add_argument("upstream", help="OpenAI-compatible base URL, e.g. http://127.0.0.1:8001/v1")
    p.add_argument("conversations", type=Path, help="conversation script (JSON)")
    p.add_argument("out", type=Path, help="where to write the results (JSON)")
    p.add_argument("--rounds", type=int, default=None, help="only the first N rounds of each conversation")
    p.add_argument("--variant", choices=list(variants), default=variants[0])
    a = p.parse_args()
    return Args(a.qdrant, a.upstream, a.conversations, a.out, a.rounds, a.variant)


def load_script(path: Path, rounds: int | None) -> Script:
    data = json.loads(path.read_text(encoding="utf-8"))
    convs = []
    for conv in data["conversations"]:
        turns = conv["turns"][:rounds] if rounds else conv["turns"]
        convs.append({"id": conv["id"], "lang": conv.get("lang", ""), "turns": [t["q"] for t in turns]})
    return Script(data.get("system_prompt", FALLBACK_SYSTEM_PROMPT), [t["q"] for t in data.get("warmup", [])], convs)


def versions(names: Sequence[str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for name in names:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


async def calibrate(upstream: str, n: int = CALIBRATION_CALLS) -> dict[str, Any]:
    """Bare AsyncOpenAI calls: what one upstream round trip costs outside any framework."""
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=upstream, api_key="x", max_retries=0)
    walls: list[float] = []
    start = time.monotonic()
    try:
        for _ in range(n):
            t0 = time.monotonic()
            await client.chat.completions.create(
                model=MODEL, messages=[{"role": "user", "content": "ping"}], max_tokens=MAX_TOKENS
            )
            walls.append((time.monotonic() - t0) * 1000)
    finally:
        await client.close()
    return {"start": start, "end": time.monotonic(), "wall_ms": walls}


async def _run(system: str, args: Args, build: Callable[[Args, Script], Awaitable[Bench]], packages: list[str]) -> None:
    script = load_script(args.conversations, args.rounds)
    t_build = time.monotonic()
    import_s = t_build - _IMPORTED_AT
    bench = await build(args, script)
    startup_s = time.monotonic() - t_build
    calibration = await calibrate(args.upstream)

    w_start = time.monotonic()
    ask = await bench.new_session("warmup")
    for q in script.warmup:
        await ask(q)
    await bench.end_session()
    warmup = {"start": w_start, "end": time.monotonic()}

    conversations = []
    for conv in script.conversations:
        ask = await bench.new_session(conv["id"])
        turns = []
        for i, q in enumerate(conv["turns"], start=1):
            t0 = time.monotonic()
            answer = await ask(q)
            t1 = time.monotonic()
            turns.append({"round": i, "start": t0, "end": t1, "answer_chars": len(answer)})
        await bench.end_session()
        conversations.append({"id": conv["id"], "lang": conv["lang"], "turns": turns, "end": time.monotonic()})
    await bench.close()

    result = {
        "system": system,
        "variant": args.variant,
        "upstream": args.upstream,
        "python": platform.python_version(),
        "executable": sys.executable,
        "packages": versions(packages),
        "config": bench.config,
        "import_s": import_s,
        "startup_s": startup_s,
        "calibration": calibration,
        "warmup": warmup,
        "conversations": conversations,
        # Linux reports kilobytes.
        "ru_maxrss_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, ensure_ascii=False, indent=1), encoding="utf-8")


def main(
    system: str,
    build: Callable[[Args, Script], Awaitable[Bench]],
    packages: list[str],
    variants: Sequence[str] = ("default",),
) -> None:
    args = parse_args(variants)
    asyncio.run(_run(system, args, build, packages))
