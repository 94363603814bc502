"""API keys per tenant and a per-key rate limit.

Settings hold only SHA-256 digests of the keys (`auth.tenants: {tenant: ["sha256:<hex>", ...]}`); make
one with `python -m rag_service.auth KEY`. With no keys configured (the embedded default) the API is
open, as one anonymous tenant, and meant to listen on localhost only.
"""

from __future__ import annotations

import hashlib
import hmac
import sys
import time
from dataclasses import dataclass

from rag_service.settings import AuthSettings


class Unauthorized(PermissionError):
    pass


class RateLimited(RuntimeError):
    def __init__(self, retry_after_s: float) -> None:
        super().__init__(f"rate limit exceeded; retry in {retry_after_s:.1f} s")
        self.retry_after_s = retry_after_s


@dataclass(frozen=True, slots=True)
class Principal:
    tenant: str
    key_id: str  # a digest prefix: identifies the key in limits and logs without revealing it


ANONYMOUS = Principal("", "anonymous")


def hash_key(key: str) -> str:
    return "sha256:" + hashlib.sha256(key.encode()).hexdigest()


class ApiKeys:
    def __init__(self, settings: AuthSettings) -> None:
        self._by_digest = {d.lower(): tenant for tenant, digests in settings.tenants.items() for d in digests}

    @property
    def open(self) -> bool:
        return not self._by_digest

    def authenticate(self, authorization: str | None) -> Principal:
        if self.open:
            return ANONYMOUS
        scheme, _, token = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise Unauthorized("missing API key: send Authorization: Bearer <key>")
        digest = hash_key(token.strip())
        for known, tenant in self._by_digest.items():
            if hmac.compare_digest(known, digest):
                return Principal(tenant, digest[7:19])
        raise Unauthorized("invalid API key")


class RateLimiter:
    """Token bucket per key: `rate_per_s` sustained, `burst` at once. Per process."""

    def __init__(self, rate_per_s: float, burst: int) -> None:
        self.rate, self.burst = rate_per_s, burst
        self._buckets: dict[str, tuple[float, float]] = {}

    def check(self, key: str) -> None:
        if self.rate <= 0:
            return
        now = time.monotonic()
        tokens, last = self._buckets.get(key, (float(self.burst), now))
        tokens = min(float(self.burst), tokens + (now - last) * self.rate)
        if tokens < 1:
            self._buckets[key] = (tokens, now)
            raise RateLimited((1 - tokens) / self.rate)
        self._buckets[key] = (tokens - 1, now)


if __name__ == "__main__":
    print(hash_key(sys.argv[1]))
