#!/usr/bin/env bash
# SPADE, games setting, Qwen3-4B-Instruct-2507 on one 8-GPU node: the 8B launcher (FSDP engine, vLLM rollout) with
# the 4B model and rollout TP 1. Every knob of run_spade_8b.sh applies (environment variables or Hydra overrides).
set -xeuo pipefail
cd "$(dirname "$0")/.."

MODEL_PATH=${MODEL_PATH:-Qwen/Qwen3-4B-Instruct-2507} GEN_TP=${GEN_TP:-1} RUN_DIR=${RUN_DIR:-$PWD/runs/spade-4b} \
    EXPERIMENT=${EXPERIMENT:-spade-4b-${SETTING:-games}} bash examples/run_spade_8b.sh "$@"
