#!/usr/bin/env bash
# Runs the test suite on a fresh machine: installs what is missing, starts the servers, runs pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
bash scripts/services.sh
# Debian's Chromium for the web page test (Playwright drives it; no browser download).
if ! command -v chromium >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null
fi
exec .venv/bin/python -m pytest "$@"
