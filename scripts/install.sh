#!/usr/bin/env bash
# Creates .venv and installs the project with its test tools. Idempotent.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3.11}
command -v "$PY" >/dev/null || PY=python3
"$PY" -c 'import sys; assert sys.version_info[:2] in ((3, 11), (3, 12)), sys.version' \
  || { echo "Python 3.11 or 3.12 is required" >&2; exit 1; }
[ -x .venv/bin/python ] || "$PY" -m venv .venv
# torch==2.13.0 (pinned in pyproject) comes from the CPU wheel on this disk, never a CUDA build.
FIND_LINKS=()
[ -d /opt/wheels ] && FIND_LINKS=(--find-links /opt/wheels)
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q "${FIND_LINKS[@]}" -e '.[dev]'
