"""Intent actions: an HTTP endpoint called with the filled slots; its JSON reply becomes context."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import aiohttp

from rag_service.intents.config import ActionSpec


@dataclass(frozen=True, slots=True)
class ActionResult:
    ok: bool
    # The reply as lines for the prompt ("key: value"), when ok.
    text: str = ""
    error: str = ""
    status: int | None = None


def render(reply: Any, indent: str = "") -> str:
    """A JSON reply as readable "key: value" lines (a model and the extractive answerer both read those
    better than raw JSON)."""
    if isinstance(reply, dict):
        lines = []
        for k, v in reply.items():
            if isinstance(v, dict | list):
                lines.append(f"{indent}{k}:")
                lines.append(render(v, indent + "  "))
            else:
                lines.append(f"{indent}{k}: {v}")
        return "\n".join(lines)
    if isinstance(reply, list):
        return "\n".join(render(v, indent + "- ") if isinstance(v, dict | list) else f"{indent}- {v}" for v in reply)
    return f"{indent}{reply}"


async def call_action(spec: ActionSpec, intent: str, slots: dict[str, str]) -> ActionResult:
    """POST {"intent", "slots"} (or GET with the slots as query parameters); never raises."""
    if not spec.url:
        return ActionResult(False, error="no action URL configured")
    timeout = aiohttp.ClientTimeout(total=spec.timeout_s)
    try:
        async with aiohttp.ClientSession(timeout=timeout) as http:
            if spec.method == "GET":
                request = http.get(spec.url, params=slots)
            else:
                request = http.post(spec.url, json={"intent": intent, "slots": slots})
            async with request as resp:
                body = await resp.text()
                if resp.status >= 400:
                    return ActionResult(False, error=f"HTTP {resp.status}", status=resp.status)
                try:
                    reply = json.loads(body)
                except json.JSONDecodeError:
                    return ActionResult(False, error="the reply is not JSON", status=resp.status)
                return ActionResult(True, text=render(reply), status=resp.status)
    except TimeoutError:
        return ActionResult(False, error=f"timed out after {spec.timeout_s:g}s")
    except aiohttp.ClientError as exc:
        return ActionResult(False, error=f"connection error: {type(exc).__name__}")
