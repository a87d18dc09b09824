#!/usr/bin/env bash
# SPADE self-play on CPU with a tiny random Qwen3: a few steps of the real verl 0.9.1 V1 trainer, for a laptop or CI.
# Every knob is an environment variable below or a Hydra override appended to the command line.
set -xeuo pipefail

# Machine facts verl reads from the environment (the CPU platform plugin is loaded through its entry point).
# OMP_NUM_THREADS: torch threads of each trainer process (default 1; `make learn` sets it to use every core, since
# generation, log-probs and the update run one after the other); HF_ROLLOUT_THREADS: the CPU rollout server's.
export VERL_PLATFORM=cpu TOKENIZERS_PARALLELISM=false OMP_NUM_THREADS=${OMP_NUM_THREADS:-1} HYDRA_FULL_ERROR=1
export RAY_DEDUP_LOGS=0
export WANDB_MODE=disabled RAY_AUTH_MODE=disabled

# Paths
RUN_DIR=${RUN_DIR:-$PWD/runs/spade-tiny-cpu}
CORPUS=${CORPUS:-$(dirname "$0")/data/sample_corpus.jsonl}
SETTING=${SETTING:-games}
# Schedule
STEPS=${STEPS:-3}
REGEN_EVERY=${REGEN_EVERY:-2}
# Designs per regeneration (N per designer row) and agent rows of a regeneration step.
ENVS_PER_REGEN=${ENVS_PER_REGEN:-4}
AGENT_ROWS=${AGENT_ROWS:-2}
N=${N:-2}
PYTHON=${PYTHON:-python3}
# Chat template: thinking explicitly off, as in every launcher (the tiny template honours it like Qwen3-8B's).
ENABLE_THINKING=${ENABLE_THINKING:-false}

# spade.max_turns keeps its default (25): validation requires a design's solution to win within the training turn
# cap, and the built-ins need up to ~20 turns; the 64-token response budget ends the tiny agent's episodes early.
CONFIG_NAME=spade_trainer
OVERRIDES=(
    backend=cpu
    spade.setting="$SETTING" spade.corpus="$CORPUS" spade.run_dir="$RUN_DIR/spade"
    spade.regen_every="$REGEN_EVERY" spade.envs_per_regen="$ENVS_PER_REGEN" spade.agent_rows_per_step="$AGENT_ROWS"
    spade.skills.active_per_regen=1
    spade.plays_per_arm=2 spade.turn_tokens=16 spade.designer.max_tokens=64
    spade.designer.show_example=false spade.hint.max_tokens=16 spade.sandbox.pool_size=1
    data.train_files=schedule data.val_files=schedule
    # a tool-use designer prompt is ~3.4k tokens before its document and memory exemplars: 4032 + 64 fill the tiny
    # model's 4096 positions; the document, then the exemplars are shortened to fit (recipe/spade/prompt_fit.py)
    data.train_batch_size=$((AGENT_ROWS + ENVS_PER_REGEN / N)) data.max_prompt_length=4032 data.max_response_length=64
    data.filter_overlong_prompts=false ++data.apply_chat_template_kwargs.enable_thinking="$ENABLE_THINKING"
    actor_rollout_ref.rollout.n="$N" actor_rollout_ref.rollout.prompt_length=4032
    actor_rollout_ref.rollout.response_length=64
    actor_rollout_ref.actor.ppo_mini_batch_size=2
    trainer.total_training_steps="$STEPS" trainer.default_local_dir="$RUN_DIR/ckpt"
    trainer.save_freq=-1 trainer.logger=console
)
source "$(dirname "$0")/lib/launch.sh"
spade_launch "$@"
