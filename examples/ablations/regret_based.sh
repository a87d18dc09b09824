#!/usr/bin/env bash
# The paper's regret-based ablation over its games 30B run (../run_spade_games_30b.sh): the designer reward is the
# regret term alone, max(0, hinted - no-hint win rate) (variant=regret; the paper's tool-use 4B reward).
# Everything else is the games 30B run; any of its knobs can still be set. DRY_RUN=1 prints the plan and its budget.
set -euo pipefail
REWARD_VARIANT=regret \
    RUN_DIR=${RUN_DIR:-$PWD/runs/spade-30b-games-regret-based} \
    EXPERIMENT=${EXPERIMENT:-spade-30b-games-regret-based} \
    exec bash "$(dirname "$0")/../run_spade_games_30b.sh" "$@"
