#!/usr/bin/env bash
# The paper's no-memory ablation over its games 30B run (../run_spade_games_30b.sh): no environment memory: no exemplars
# in the designer prompt and no replay (spade.memory.enable=false).
# Everything else is the games 30B run; any of its knobs can still be set. DRY_RUN=1 prints the plan and its budget.
set -euo pipefail
MEMORY=false \
    RUN_DIR=${RUN_DIR:-$PWD/runs/spade-30b-games-no-memory} \
    EXPERIMENT=${EXPERIMENT:-spade-30b-games-no-memory} \
    exec bash "$(dirname "$0")/../run_spade_games_30b.sh" "$@"
