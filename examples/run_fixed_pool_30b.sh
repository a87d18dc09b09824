#!/usr/bin/env bash
# The paper's curated-pool baseline at 30B (docs/baselines.md): actor-only GRPO on a frozen pool of games in the
# reference's format, imported first with `spade-envs import-pool GAMES_DIR --out POOL_DIR`. The paper's budget:
# 400 steps, 24 envs per step, 192 agent samples (8 plays per env), KL 0. Model and engine: run_spade_30b.sh.
set -xeuo pipefail
cd "$(dirname "$0")/.."

POOL_DIR=${POOL_DIR:-$PWD/runs/reference-pool}
EXTRA=(spade.fixed_env.enable=true spade.fixed_env.pool_dir="$POOL_DIR")
RUN_DIR=${RUN_DIR:-$PWD/runs/spade-pool-30b} EXPERIMENT=${EXPERIMENT:-spade-pool-30b} ENVS_PER_REGEN=0 \
    AGENT_ROWS=${AGENT_ROWS:-24} N=${N:-8} KL=${KL:-0} STEPS=${STEPS:-400} MAX_RESPONSE=${MAX_RESPONSE:-16384} \
    bash examples/run_spade_30b.sh "${EXTRA[@]}" "$@"
