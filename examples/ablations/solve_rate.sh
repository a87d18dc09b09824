#!/usr/bin/env bash
# The paper's solve-rate ablation over its games 30B run (../run_spade_games_30b.sh): the designer reward is the plateau
# term alone (reward.reward_kwargs.designer.variant=solve_rate: plateau weight 1, regret weight 0).
# Everything else is the games 30B run; any of its knobs can still be set. DRY_RUN=1 prints the plan and its budget.
set -euo pipefail
REWARD_VARIANT=solve_rate \
    RUN_DIR=${RUN_DIR:-$PWD/runs/spade-30b-games-solve-rate} \
    EXPERIMENT=${EXPERIMENT:-spade-30b-games-solve-rate} \
    exec bash "$(dirname "$0")/../run_spade_games_30b.sh" "$@"
