#!/usr/bin/env bash
# The paper's games 30B run (Qwen3-30B-A3B-Instruct-2507): run_spade_30b.sh with SETTING=games, every value from
# examples/lib/paper.sh (docs/paper.md has its command, budget and what differs from the paper's code). Any knob of
# run_spade_30b.sh can still be set (environment variables or Hydra overrides); DRY_RUN=1 prints the plan and its budget.
set -euo pipefail
SETTING=games exec bash "$(dirname "$0")/run_spade_30b.sh" "$@"
