#!/usr/bin/env bash
# Installs everything (scripts/install.sh) and runs the main job: `strux bench` at its
# defaults, every family on the best available device, verified and timed against the
# plain numpy (or PyTorch) recipe in the same run. Results: table on stdout, JSON in bench-results.json.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install.sh
.venv/bin/strux info
.venv/bin/strux bench --json bench-results.json "$@"
