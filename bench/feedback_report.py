"""The feedback report on a scripted, rated conversation set.

    .venv/bin/python bench/feedback_report.py                          # eval/answers/kb.check.jsonl
    .venv/bin/python bench/feedback_report.py --conversations F --set llm.base_url=... --json OUT

Ingests `examples/kb` into a temporary index, runs every conversation of the set through the HTTP API
in-process (one session per conversation; extractive answers unless an LLM is configured), and rates
every answer the way a customer would, by a script: thumbs up when the answer holds every string of one
of the turn's `expect_any` alternatives and none of its `reject_any`, else thumbs down (the rating
`reason` is "wrong" then). The report is then read back from the archive with `rag-admin report`'s
function, so the numbers are the operator's: ratings by mode and turn kind, the memory hit rate (rated
follow-ups rated up) and the worst-rated questions. Writes bench/results/feedback_report.json.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
from pathlib import Path
from typing import Any

import httpx

from rag_core.documents.pipeline import ingest_file, iter_files
from rag_core.settings import Settings
from rag_service.api import create_app
from rag_service.feedback import report
from rag_service.wiring import build_services

ROOT = Path(__file__).resolve().parent.parent


def _set(pairs: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, _, value = pair.partition("=")
        node = out
        *path, leaf = key.split(".")
        for part in path:
            node = node.setdefault(part, {})
        node[leaf] = value
    return out


def _rate(answer: str, turn: dict[str, Any]) -> str:
    ok = any(all(s in answer for s in alt) for alt in turn.get("expect_any", []))
    return "up" if ok and not any(s in answer for s in turn.get("reject_any", [])) else "down"


async def run(conversations: list[dict[str, Any]], overrides: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        settings = Settings(
            **{"qdrant": {"path": f"{tmp}/qdrant"}, "database": {"url": f"sqlite+aiosqlite:///{tmp}/archive.db"}}
            | overrides
        )
        services = build_services(settings)
        for path in iter_files([ROOT / "examples" / "kb"], settings.ingest.extensions):
            await ingest_file(
                path, index=services.index, embedder=services.embedder, counter=services.counter, settings=settings,
                source=f"examples/kb/{path.name}", faq_index=services.faq_index,
            )  # fmt: skip
        app = create_app(services=services)
        scripted: dict[str, int] = {}
        async with app.router.lifespan_context(app):
            http = httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://bench", timeout=120)
            for conv in conversations:
                sid = (await http.post("/v1/sessions")).json()["session_id"]
                for turn in conv["turns"]:
                    resp = await http.post(f"/v1/sessions/{sid}/chat", json={"question": turn["q"]})
                    resp.raise_for_status()
                    body = resp.json()
                    rating = _rate(body["answer"], turn)
                    key = f"{turn['kind']}:{rating}"
                    scripted[key] = scripted.get(key, 0) + 1
                    await services.pipeline.drain()
                    fb = {"rating": rating, "reason": "" if rating == "up" else "wrong"}
                    r = await http.post(f"/v1/sessions/{sid}/messages/{body['message_id']}/feedback", json=fb)
                    r.raise_for_status()
            assert services.feedback is not None
            rows = await services.feedback.rows("", 0.0)
            await http.aclose()
        return {"scripted_ratings_by_set_kind": scripted, **report(rows, worst=10)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--conversations", type=Path, default=ROOT / "eval" / "answers" / "kb.check.jsonl")
    parser.add_argument("--set", action="append", default=[], help="a setting, e.g. llm.base_url=URL")
    parser.add_argument("--json", type=Path, default=ROOT / "bench" / "results" / "feedback_report.json")
    args = parser.parse_args()
    lines = args.conversations.read_text(encoding="utf-8").splitlines()
    conversations = [json.loads(line) for line in lines if line.strip()]
    out = asyncio.run(run(conversations, _set(args.set)))
    out["conversations"] = str(args.conversations)
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(out, ensure_ascii=False, indent=1), encoding="utf-8")
    print(json.dumps({k: v for k, v in out.items() if k != "worst"}, ensure_ascii=False, indent=1))
    for q in out["worst"][:5]:
        print(f"worst: {q['question']!r} down={q['down']} rewritten={q['turns'][0]['rewritten_query']!r}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
