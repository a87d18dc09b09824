#!/usr/bin/env bash
# Fixed-environment baseline: the same trainer with the designer off. The agent plays the built-in environments,
# or a pool made by `spade-envs generate` (POOL_DIR). Same model and schedule knobs as run_spade_8b.sh.
set -xeuo pipefail
cd "$(dirname "$0")/.."

POOL_DIR=${POOL_DIR:-}
AGENT_ROWS=${AGENT_ROWS:-24}
EXTRA=(spade.fixed_env.enable=true spade.envs_per_regen=0 spade.agent_rows_per_step="$AGENT_ROWS"
       data.train_batch_size="$AGENT_ROWS" actor_rollout_ref.actor.ppo_mini_batch_size="$AGENT_ROWS")
if [ -n "$POOL_DIR" ]; then EXTRA+=(spade.fixed_env.pool_dir="$POOL_DIR"); fi
# No designer: KL 0 and a 16k response unless set (the paper's fixed-environment baselines: issue 13).
RUN_DIR=${RUN_DIR:-$PWD/runs/spade-fixed-env} ENVS_PER_REGEN=0 AGENT_ROWS="$AGENT_ROWS" KL=${KL:-0} \
    MAX_RESPONSE=${MAX_RESPONSE:-16384} \
    bash examples/run_spade_8b.sh "${EXTRA[@]}" "$@"
