#!/usr/bin/env bash
# The paper's games 8B run (Qwen3-8B): run_spade_8b.sh with SETTING=games SIZE=8b, every value from
# examples/lib/paper.sh (docs/paper.md has its command, budget and what differs from the paper's code). Any knob of
# run_spade_8b.sh can still be set (environment variables or Hydra overrides); DRY_RUN=1 prints the plan and its budget.
set -euo pipefail
SETTING=games SIZE=8b exec bash "$(dirname "$0")/run_spade_8b.sh" "$@"
