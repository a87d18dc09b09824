#!/usr/bin/env bash
# The paper's learning-potential ablation over its games 30B run (../run_spade_games_30b.sh): the designer reward is |w
# - mu_slow(skill)|, the distance of the design's no-hint win rate from the slow per-skill EMA
# (variant=learning_potential; EMAs 0.98 / 0.85 per skill, kept in the env pool and its checkpoints; fast - slow is
# logged only).
# Everything else is the games 30B run; any of its knobs can still be set. DRY_RUN=1 prints the plan and its budget.
set -euo pipefail
REWARD_VARIANT=learning_potential \
    RUN_DIR=${RUN_DIR:-$PWD/runs/spade-30b-games-learning-potential} \
    EXPERIMENT=${EXPERIMENT:-spade-30b-games-learning-potential} \
    exec bash "$(dirname "$0")/../run_spade_games_30b.sh" "$@"
