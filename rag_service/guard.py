"""Output filter: the system prompt is never echoed back to the user.

A leak is any run of `window` characters of the system prompt (whitespace ignored) appearing in the
answer. Streaming holds back the last `window - 1` characters until more text arrives, so not even a
partial run reaches the client before a leak is detected.
"""

from __future__ import annotations

import re

_SPACE = re.compile(r"\s+")


class OutputGuard:
    def __init__(self, system_prompt: str, window: int, refusal: str) -> None:
        compact = _SPACE.sub("", system_prompt)
        self.window, self.refusal = window, refusal
        self._shingles = {compact[i : i + window] for i in range(max(0, len(compact) - window + 1))}

    def leaks(self, text: str) -> bool:
        compact = _SPACE.sub("", text)
        return any(compact[i : i + self.window] in self._shingles for i in range(len(compact) - self.window + 1))

    def clean(self, text: str) -> str:
        return self.refusal if self.leaks(text) else text

    def stream(self) -> StreamGuard:
        return StreamGuard(self)


class StreamGuard:
    """Feed pieces as they arrive; emit what is safe. After a leak, nothing more is emitted."""

    def __init__(self, guard: OutputGuard) -> None:
        self.guard = guard
        self.text = ""
        self.emitted = 0
        self.leaked = False

    def feed(self, piece: str) -> str:
        if self.leaked:
            return ""
        self.text += piece
        # Only the tail can complete a new shingle; check it, not the whole answer again.
        tail = self.text[-(len(piece) + 4 * self.guard.window) :]
        if self.guard.leaks(tail):
            self.leaked = True
            return ""
        safe_upto = max(self.emitted, len(self.text) - (self.guard.window - 1))
        out = self.text[self.emitted : safe_upto]
        self.emitted = safe_upto
        return out

    def finish(self) -> str:
        """The held-back rest, unless the answer leaked."""
        if self.leaked:
            return ""
        out = self.text[self.emitted :]
        self.emitted = len(self.text)
        return out

    @property
    def answer(self) -> str:
        return self.guard.refusal if self.leaked else self.text
