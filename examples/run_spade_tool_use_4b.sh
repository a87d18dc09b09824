#!/usr/bin/env bash
# The paper's tool-use 4B run (Qwen3-4B-Instruct-2507): run_spade_8b.sh with SETTING=tool_use SIZE=4b, every value from
# examples/lib/paper.sh (docs/paper.md has its command, budget and what differs from the paper's code). Any knob of
# run_spade_8b.sh can still be set (environment variables or Hydra overrides); DRY_RUN=1 prints the plan and its budget.
set -euo pipefail
SETTING=tool_use SIZE=4b exec bash "$(dirname "$0")/run_spade_8b.sh" "$@"
