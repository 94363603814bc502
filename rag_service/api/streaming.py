"""A streamed turn as server-sent events, for the native and the OpenAI-compatible chat routes.

The turn runs up to its first generated piece before the response starts (`PrimedTurn.start`), so that
an unknown or busy session or a failing upstream is still a proper 4xx/502 rather than a stream that
breaks after a 200; the events seen by then are replayed, then the rest follows (`relay`). A failure after
the 200 is reported in-band, in each route's own format.
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import aclosing

from sse_starlette import ServerSentEvent

from rag_service.api.errors import stream_failure
from rag_service.pipeline import Delta, Done, TurnEvent, TurnEvents


class PrimedTurn:
    """A turn's events: the ones run before the response, then the rest.

    An async iterator object rather than a generator wrapping the turn's, so that a cancellation (the
    client left) or `aclose()` reaches the turn itself at once: it stores the question and leaves its
    session lock then, not when a wrapper is collected.
    """

    def __init__(self, head: list[TurnEvent], rest: TurnEvents) -> None:
        self._head = deque(head)
        self._rest = rest
        self._ended = bool(head) and isinstance(head[-1], Done)

    @classmethod
    async def start(cls, events: TurnEvents) -> PrimedTurn:
        head: list[TurnEvent] = []
        try:
            async for event in events:
                head.append(event)
                if isinstance(event, Delta | Done):
                    break
        except BaseException:
            await events.aclose()
            raise
        return cls(head, events)

    def __aiter__(self) -> PrimedTurn:
        return self

    async def __anext__(self) -> TurnEvent:
        if self._head:
            return self._head.popleft()
        if self._ended:
            raise StopAsyncIteration
        return await self._rest.__anext__()

    async def aclose(self) -> None:
        await self._rest.aclose()


async def relay(
    turn: PrimedTurn,
    encode: Callable[[TurnEvent], ServerSentEvent | None],
    failure: Callable[[int, str], ServerSentEvent],
    *,
    before: Iterable[ServerSentEvent] = (),
    after: Iterable[ServerSentEvent] = (),
) -> AsyncIterator[ServerSentEvent]:
    """The turn's events encoded (`None`: not sent), between `before` and `after`. A failure after the 200
    ends the stream with `failure(status, detail)` instead of a cut connection, and without `after`: the
    answer is not complete."""
    async with aclosing(turn):
        for event in before:
            yield event
        try:
            async for turn_event in turn:
                if (encoded := encode(turn_event)) is not None:
                    yield encoded
        except Exception as exc:
            yield failure(*stream_failure(exc))
            return
        for event in after:
            yield event
