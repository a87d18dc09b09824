#!/usr/bin/env bash
# The paper's RLVE baseline at 8B (SIZE=4b: 4B; docs/baselines.md): the same trainer with the designer off; every
# agent row plays one of RLVE's verifiable environments (rlve-gym; RLVE_ENVS=official16 | all) at a difficulty drawn
# from RLVE's sliding window. The paper's settings: 16 envs per step x 16 plays of one problem (one GRPO group), global batch 256, agent
# temperature 1.0, KL 0, 400 steps, 8,192 tokens per turn, up to 25 turns. Model and engine: run_spade_8b.sh.
set -xeuo pipefail
cd "$(dirname "$0")/.."

RLVE_ENVS=${RLVE_ENVS:-official16}
# RLVE generates for up to generate_timeout_s (10 s): the sandbox must let it (docs/baselines.md: generate < soft < call)
EXTRA=(spade.fixed_env.enable=true spade.fixed_env.rlve.enable=true spade.fixed_env.rlve.envs="$RLVE_ENVS"
       spade.sandbox.soft_timeout_s=12 spade.sandbox.call_timeout_s=15)
SIZE=${SIZE:-8b}
RUN_DIR=${RUN_DIR:-$PWD/runs/spade-rlve-$SIZE} EXPERIMENT=${EXPERIMENT:-spade-rlve-$SIZE} SIZE=$SIZE ENVS_PER_REGEN=0 \
    AGENT_ROWS=${AGENT_ROWS:-16} N=${N:-16} KL=${KL:-0} TEMPERATURE=${TEMPERATURE:-1.0} STEPS=${STEPS:-400} \
    MAX_RESPONSE=${MAX_RESPONSE:-16384} \
    bash examples/run_spade_8b.sh "${EXTRA[@]}" "$@"
