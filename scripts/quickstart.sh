#!/usr/bin/env bash
# The main job on a fresh machine: install, ingest the sample knowledge base, answer questions.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
.venv/bin/rag-ingest examples/kb
.venv/bin/rag-chat -q "iPhone 16 Pro 256GB 多少钱？" -q "那它的保修期呢？" -q "What is your return policy?"
