#!/usr/bin/env bash
# Runs the test suite on a fresh machine: installs what is missing, starts the servers, runs pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
bash scripts/services.sh
exec .venv/bin/python -m pytest "$@"
