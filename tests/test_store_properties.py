"""Property test of the session stores (hypothesis, stateful): random sequences of turns, failed turns
(question only), retries, compressions (current, stale and impossible plans), write-behind flushes, live
store losses (a whole Redis flush, or one session expiring) and restores, on MemoryStore + SQLite and on
RedisStore + PostgreSQL.

After every step: `summarized <= message_count` in the live copy, and the live copy, when present, is
exactly the conversation so far (every acknowledged message, in order) with the summary position the
model expects. After every flush the archive holds exactly the same. Bounded examples keep it fast.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import Bundle, RuleBasedStateMachine, initialize, invariant, rule, run_state_machine_as_test

from rag_core.settings import MemorySettings
from rag_service.domain import Message, SessionMeta
from rag_service.memory import CompressionPlan, SummaryMemory
from rag_service.sessions.archive import Archive, migrate
from rag_service.sessions.interface import LiveStore, SummaryUpdate, new_session_id
from rag_service.sessions.live_memory import MemoryStore
from rag_service.sessions.live_redis import RedisStore
from rag_service.sessions.writebehind import ArchivedStore
from tests.servers import REDIS_URL, fresh_database, redis_prefix

T = TypeVar("T")

# Any text a user may type, except what no database column takes (NUL) and lone surrogates.
TEXT = st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), min_size=1, max_size=12)
MEMORY = SummaryMemory(
    "hybrid", 1, MemorySettings(summary_trigger="rounds", summary_every_rounds=1, summary_min_fold_rounds=1), 4
)


@dataclass
class Conversation:
    """What the clients were told: every stored message, in order, and where the summary ends."""

    messages: list[tuple[str, str]] = field(default_factory=list)
    summarized: int = 0
    plans: list[CompressionPlan] = field(default_factory=list)


def pairs(messages: list[Message]) -> list[tuple[str, str]]:
    return [(m.role, m.content) for m in messages]


class StoreMachine(RuleBasedStateMachine):
    kind = "memory"
    archive_url = ""
    redis_prefix = ""

    sessions = Bundle("sessions")

    def __init__(self) -> None:
        super().__init__()
        self.loop = asyncio.new_event_loop()
        self.model: dict[str, Conversation] = {}
        self.live: LiveStore = (
            RedisStore(REDIS_URL, ttl_s=600, lock_timeout_s=10, on_busy="wait", prefix=self.redis_prefix)
            if self.kind == "redis"
            else MemoryStore(600, 10, "wait")
        )
        self.archive = Archive(self.archive_url)
        self.store = ArchivedStore(self.live, self.archive, flush_interval_s=3600)  # flushes are steps here

    def run(self, coro: Coroutine[Any, Any, T]) -> T:
        return self.loop.run_until_complete(coro)

    def teardown(self) -> None:
        try:
            self.run(self.store.flush())
            for sid, convo in self.model.items():
                _, messages, _ = self.run(self.store.load(sid, lambda m: 0))
                assert pairs(messages) == convo.messages
        finally:
            self.run(self.store.close())
            self.loop.close()

    # -- operations ---------------------------------------------------------------------------------

    @initialize(target=sessions)
    def first_session(self) -> str:
        return self.new_session()

    @rule(target=sessions)
    def another_session(self) -> str:
        return self.new_session()

    def new_session(self) -> str:
        meta = SessionMeta(session_id=new_session_id(8), created_at=time.time())
        self.run(self.store.create(meta))
        self.model[meta.session_id] = Conversation()
        return meta.session_id

    async def _turn(self, sid: str, messages: list[tuple[str, str]]) -> None:
        async with self.store.lock(sid):
            await self.store.load(sid, MEMORY.load_from)
            stored = [Message(role, text, len(text), time.time()) for role, text in messages]  # type: ignore[arg-type]
            await self.store.append(sid, stored)
        self.model[sid].messages += messages

    @rule(sid=sessions, question=TEXT, answer=TEXT)
    def turn(self, sid: str, question: str, answer: str) -> None:
        self.run(self._turn(sid, [("user", question), ("assistant", answer)]))

    @rule(sid=sessions, question=TEXT)
    def failed_turn(self, sid: str, question: str) -> None:
        """The upstream failed or the client left: the question is kept without an answer."""
        self.run(self._turn(sid, [("user", question)]))

    @rule(sid=sessions, answer=TEXT)
    def retry(self, sid: str, answer: str) -> None:
        """The client asks its last question again (after a failure, or to regenerate an answer)."""
        asked = [text for role, text in self.model[sid].messages if role == "user"]
        self.run(self._turn(sid, [("user", asked[-1] if asked else "重试"), ("assistant", answer)]))

    @rule(sid=sessions, summary=TEXT)
    def compress(self, sid: str, summary: str) -> None:
        meta, loaded, offset = self.run(self.store.load(sid, MEMORY.load_from))
        plan = MEMORY.compression_due(meta, loaded, offset, topic_switch=False)
        if plan is None:
            return
        self.model[sid].plans.append(plan)
        self.apply(sid, plan, summary)

    @rule(sid=sessions, summary=TEXT, data=st.data())
    def stale_compression(self, sid: str, summary: str, data: st.DataObject) -> None:
        """A compressor that planned before another one landed: applies only if nothing changed since."""
        plans = self.model[sid].plans
        if plans:
            self.apply(sid, data.draw(st.sampled_from(plans)), summary)

    @rule(sid=sessions, beyond=st.integers(1, 4))
    def impossible_compression(self, sid: str, beyond: int) -> None:
        """A plan over a longer list than the stored one (a client's own history): always refused."""
        convo = self.model[sid]
        update = SummaryUpdate(convo.summarized, "摘要", 2, len(convo.messages) + beyond, 10)
        assert not self.run(self.store.update_summary(sid, update))

    def apply(self, sid: str, plan: CompressionPlan, summary: str) -> None:
        update = SummaryUpdate(plan.start, summary, len(summary), plan.upto, sum(r.tokens for r in plan.rounds))
        applied = self.run(self.store.update_summary(sid, update))
        convo = self.model[sid]
        assert applied == (plan.start == convo.summarized and plan.upto <= len(convo.messages))
        if applied:
            convo.summarized = plan.upto

    @rule()
    def flush(self) -> None:
        self.run(self.store.flush())
        for sid, convo in self.model.items():
            found = self.run(self.archive.load(sid))
            assert found is not None
            meta, messages = found
            assert pairs(messages) == convo.messages
            assert meta.summarized == convo.summarized <= meta.message_count

    @rule()
    def live_store_lost(self) -> None:
        """Redis flushed or restarted (this test's keys), or the in-process store gone."""
        self.run(self._lose_all())

    async def _lose_all(self) -> None:
        if isinstance(self.live, RedisStore):
            keys = [k async for k in self.live.redis.scan_iter(match=self.redis_prefix + "*")]
            if keys:
                await self.live.redis.delete(*keys)
        else:
            assert isinstance(self.live, MemoryStore)
            self.live.clear()

    @rule(sid=sessions)
    def session_expired(self, sid: str) -> None:
        self.run(self.live.evict(sid))

    @rule(sid=sessions)
    def read(self, sid: str) -> None:
        """Any use restores a lost session from the archive (after its queued writes)."""
        assert pairs(self.run(self.store.messages(sid))) == self.model[sid].messages

    # -- invariants ---------------------------------------------------------------------------------

    @invariant()
    def live_copies_are_the_conversation(self) -> None:
        states = self.run(self.live.peek(list(self.model)))
        for sid, convo in self.model.items():
            state = states[sid]
            if not isinstance(state, SessionMeta):
                continue  # lost: restored on next use
            assert 0 <= state.summarized <= state.message_count == len(convo.messages)
            assert state.summarized == convo.summarized
            held = self.run(self.live.peek_messages(sid, 0, state.message_count))
            assert pairs(held) == convo.messages


BOUNDS = settings(
    max_examples=20,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


@pytest.fixture
async def backend(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[tuple[str, str, str]]:
    kind, dialect = request.param
    async with fresh_database(dialect, tmp_path) as url:
        migrate(url)
        if kind == "redis":
            async with redis_prefix() as (_, prefix):
                yield kind, url, prefix
        else:
            yield kind, url, ""


@pytest.mark.parametrize("backend", [("memory", "sqlite"), ("redis", "postgresql")], indirect=True, ids=str)
def test_stores_never_lose_or_misplace_a_message(backend: tuple[str, str, str]) -> None:
    kind, url, prefix = backend

    class Machine(StoreMachine):
        pass

    Machine.kind, Machine.archive_url, Machine.redis_prefix = kind, url, prefix
    run_state_machine_as_test(Machine, settings=BOUNDS)
