"""Server-sent events as the tests read them."""

from __future__ import annotations

import json
from typing import Any


def events(body: str) -> list[tuple[str, Any]]:
    """(event, data) of an SSE body: data parsed as JSON, except OpenAI's closing `[DONE]`."""
    out: list[tuple[str, Any]] = []
    for block in body.replace("\r\n", "\n").split("\n\n"):
        kind, data = "message", ""
        for line in block.split("\n"):
            if line.startswith("event:"):
                kind = line[6:].strip()
            elif line.startswith("data:"):
                data += line[5:].strip()
        if data:
            out.append((kind, data if data == "[DONE]" else json.loads(data)))
    return out
