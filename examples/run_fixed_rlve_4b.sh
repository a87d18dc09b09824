#!/usr/bin/env bash
# The paper's RLVE baseline at 4B (Qwen3-4B-Instruct-2507): run_fixed_rlve_8b.sh with SIZE=4b (docs/baselines.md).
set -euo pipefail
SIZE=4b RUN_DIR=${RUN_DIR:-$PWD/runs/spade-rlve-4b} EXPERIMENT=${EXPERIMENT:-spade-rlve-4b} \
    exec bash "$(dirname "$0")/run_fixed_rlve_8b.sh" "$@"
