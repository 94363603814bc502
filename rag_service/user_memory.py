"""Long-term user memory: durable facts about a user (preferences, constraints, products owned),
extracted every N turns and when a session ends, injected into the system prompt of the user's sessions.

Facts live in the archive's user-memory table. The per-turn path reads them from a small in-process
cache, so only a user's first turn (or one after a change) costs a database query.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from typing import Protocol

from rag_service.domain import Message
from rag_service.llm import ChatClient
from rag_service.settings import UserMemorySettings
from rag_service.tokens import TokenCounter

EXTRACT_PROMPT = (
    "From the user's messages below, list durable facts about the user that would help in future "
    "customer-service conversations: preferences, constraints (budget, location, deadlines), products they "
    "own or ordered. One short third-person fact per line, in the conversation's language. Nothing about "
    "the shop's policies, nothing temporary. If there is none, reply NONE."
)

_FIRST_PERSON = re.compile(
    r"(我(?:有|用|买了|买过|喜欢|想要|需要|更喜欢|偏好|不喜欢|住在|在用|的预算|预算|家里|公司)|"
    r"\bI (?:have|own|use|bought|prefer|like|need|want|live)\b|\bmy (?:budget|phone|laptop|address)\b)",
    re.IGNORECASE,
)
_SENTENCE = re.compile(r"[^。！？!?.\n]+[。！？!?.]?")


class FactStore(Protocol):
    async def add_memory(self, user_id: str, fact: str, source_session: str | None = None) -> object: ...

    async def list_memories(self, user_id: str, limit: int | None = None) -> Sequence[object]: ...


class FactExtractor(Protocol):
    async def extract(self, messages: Sequence[Message]) -> list[str]: ...


class RuleFactExtractor:
    """No-LLM default: the user's own first-person statements, verbatim."""

    async def extract(self, messages: Sequence[Message]) -> list[str]:
        facts: list[str] = []
        for m in messages:
            if m.role != "user":
                continue
            for sentence in _SENTENCE.findall(m.content):
                s = sentence.strip()
                if _FIRST_PERSON.search(s) and not s.endswith(("？", "?")) and len(s) >= 4:
                    facts.append(f"用户说：{s}")
        return facts


class LLMFactExtractor:
    def __init__(self, client: ChatClient) -> None:
        self.client = client

    async def extract(self, messages: Sequence[Message]) -> list[str]:
        said = "\n".join(f"- {m.content}" for m in messages if m.role == "user")
        if not said:
            return []
        reply = await self.client.complete(
            [{"role": "system", "content": EXTRACT_PROMPT}, {"role": "user", "content": said}]
        )
        lines = [line.strip(" -*\t") for line in reply.splitlines()]
        return [line for line in lines if line and line.upper() != "NONE"]


class UserMemory:
    def __init__(
        self, store: FactStore, extractor: FactExtractor, counter: TokenCounter, settings: UserMemorySettings
    ) -> None:
        self.store, self.extractor, self.counter, self.settings = store, extractor, counter, settings
        self._cache: dict[str, tuple[float, str, int]] = {}

    @staticmethod
    def key(tenant: str, user: str) -> str:
        return f"{tenant}:{user}" if tenant else user

    async def profile(self, user_key: str) -> tuple[str, int]:
        """The facts section for the system prompt and its token count ("" and 0 without facts)."""
        if not self.settings.enabled or not user_key:
            return "", 0
        hit = self._cache.get(user_key)
        if hit and time.monotonic() - hit[0] < self.settings.cache_s:
            return hit[1], hit[2]
        facts = await self.store.list_memories(user_key, self.settings.max_facts)
        text = ""
        if facts:
            text = self.settings.prompt_header + "\n" + "\n".join(f"- {getattr(f, 'fact', f)}" for f in facts)
        tokens = self.counter.count(text) if text else 0
        self._cache[user_key] = (time.monotonic(), text, tokens)
        return text, tokens

    def due(self, user_turns: int) -> bool:
        return self.settings.enabled and user_turns > 0 and user_turns % self.settings.every_turns == 0

    async def learn(self, user_key: str, session_id: str, messages: Sequence[Message]) -> int:
        facts = await self.extractor.extract(messages)
        for fact in facts[: self.settings.max_facts]:
            await self.store.add_memory(user_key, fact, session_id)
        if facts:
            self._cache.pop(user_key, None)
        return len(facts)

    def forget(self, user_key: str) -> None:
        self._cache.pop(user_key, None)
