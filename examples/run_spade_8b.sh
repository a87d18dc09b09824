#!/usr/bin/env bash
# SPADE with Qwen3-8B (SIZE=4b: Qwen3-4B-Instruct-2507) on one 8-GPU node, the FSDP engine and a vLLM rollout
# (TP 2; 4B: TP 1): the paper's games 8B run (SETTING=tool_use: its tool-use run; run_spade_{games,tool_use}_{4b,8b}.sh),
# every value of the paper from examples/lib/paper.sh. The paper's 8B agent thinks (THINKING, default the paper's:
# true at 8B, false at 4B): one training sample per turn, the chat template re-rendering the history. DRY_RUN=1 prints
# the plan and its budget line. Needs Python 3.12 and the GPU install of docs/gpu.md. Every knob: an environment variable below or a
# Hydra override appended to the command line. The paper runs, ablations and differences: docs/paper.md.
set -xeuo pipefail
cd "$(dirname "$0")/.."
source examples/lib/launch.sh
source examples/lib/paper.sh

SETTING=${SETTING:-games}
SIZE=${SIZE:-8b}
# The paper's values for this run (MODEL_PATH, STEPS, REGEN_EVERY, ENVS_PER_REGEN, N, AGENT_ROWS, PLAYS_PER_ARM, KL,
# DESIGNER_TOKENS, HINT_TOKENS, REWARD_VARIANT, ACTIVE_SKILLS, CORPUS_WORDS, AUDIT, COMPACT_FILTER, TEMPERATURE,
# GEN_MEMORY), each unless already set.
spade_paper_defaults "$SETTING" "$SIZE"
# Paths
CORPUS=${CORPUS:-examples/data/sample_corpus.jsonl}
RUN_DIR=${RUN_DIR:-$PWD/runs/spade-$SIZE-$SETTING}
EXPERIMENT=${EXPERIMENT:-spade-$SIZE-$SETTING}
# Cluster
NNODES=${NNODES:-1}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
# Ablation switches (examples/ablations/): designer grounding (corpus | concepts), environment memory (exemplars and
# replay), designer training, the skills (null: the setting's six) and how many are active per regeneration.
GROUNDING=${GROUNDING:-corpus}
MEMORY=${MEMORY:-true}
DESIGNER_TRAIN=${DESIGNER_TRAIN:-true}
SKILL_NAMES=${SKILL_NAMES:-null}
# Lengths (paper: 32k context, 8k tokens per agent turn, up to 25 turns; the response must hold the designer's tokens)
MAX_PROMPT=${MAX_PROMPT:-16384}
MAX_RESPONSE=${MAX_RESPONSE:-$((DESIGNER_TOKENS > 16384 ? DESIGNER_TOKENS : 16384))}
TURN_TOKENS=${TURN_TOKENS:-8192}
MAX_TURNS=${MAX_TURNS:-25}
# Algorithm and rollout (paper: Adam lr 1e-6 constant, betas 0.9 / 0.98, wd 0.1, clip 0.2 / 0.28, entropy 0, GRPO
# without std normalisation, low-variance KL at coefficient KL)
LR=${LR:-1e-6}
if [ "$SIZE" = 4b ]; then GEN_TP=${GEN_TP:-1}; else GEN_TP=${GEN_TP:-2}; fi
# Sandbox slots per agent-loop worker (spade.sandbox.max_workers); the worker count follows from it (launch.sh).
SANDBOX_SLOTS=${SANDBOX_SLOTS:-256}
ROWS_PER_STEP=$(spade_rows_per_step "$AGENT_ROWS" "$ENVS_PER_REGEN" "$N")
AGENT_WORKERS=$(spade_agent_workers "$ROWS_PER_STEP" $((ENVS_PER_REGEN / N)) "$N" "$PLAYS_PER_ARM" "$SANDBOX_SLOTS" \
    "${AGENT_WORKERS:-}")
# vLLM admits a regeneration step's peak at once (744 episodes over 4 or 8 engines: verl's 256 holds; launch.sh)
GEN_MAX_SEQS=${GEN_MAX_SEQS:-$(spade_max_num_seqs "$ROWS_PER_STEP" $((ENVS_PER_REGEN / N)) "$N" "$PLAYS_PER_ARM" \
    $((NNODES * GPUS_PER_NODE / GEN_TP)))}
# Agent thinking (the paper's: PAPER_THINKING, true at 8B): the recipe's per-turn thinking mode, the agent's turns
# rendered with enable_thinking=true. Then the response length bounds one turn (up to TURN_TOKENS) and MAX_PROMPT the
# history the template re-renders for each turn (earlier think blocks dropped); the step's rows are turn samples.
# Everything else (designer, hint writer, audit) is templated with ENABLE_THINKING: Qwen3-8B thinks unless told not to.
THINKING=${THINKING:-$PAPER_THINKING}
THINKING_OVERRIDE=$(spade_thinking_override "$THINKING")
ENABLE_THINKING=${ENABLE_THINKING:-false}
# Checkpoints: every SAVE_FREQ steps (the paper's 16), the last KEEP_CKPTS kept; each holds HF weights for spade-eval
SAVE_FREQ=${SAVE_FREQ:-16}
KEEP_CKPTS=${KEEP_CKPTS:-2}

CONFIG_NAME=spade_trainer
spade_recipe_overrides
spade_optimizer_overrides fsdp
OVERRIDES=(
    "${SPADE_OVERRIDES[@]}"
    actor_rollout_ref.model.path="$MODEL_PATH" actor_rollout_ref.model.enable_gradient_checkpointing=true
    algorithm.adv_estimator=grpo algorithm.norm_adv_by_std_in_grpo=false algorithm.use_kl_in_reward=false
    $(spade_kl_overrides "$KL")
    "${OPTIM_OVERRIDES[@]}" actor_rollout_ref.actor.entropy_coeff=0
    actor_rollout_ref.actor.clip_ratio_low=0.2 actor_rollout_ref.actor.clip_ratio_high=0.28
    actor_rollout_ref.actor.ppo_mini_batch_size="$ROWS_PER_STEP"
    actor_rollout_ref.actor.use_dynamic_bsz=true actor_rollout_ref.actor.ppo_max_token_len_per_gpu=40960
    actor_rollout_ref.actor.fsdp_config.param_offload=true actor_rollout_ref.actor.fsdp_config.optimizer_offload=true
    # The old-log-prob pass computes entropy over the pack (verl: calculate_entropy=True): in 2,048-token chunks and
    # uncompiled, three fp32 chunks (3.5 GiB at 8B) instead of two fp32 copies of the whole 40,960-token pack (46 GiB),
    # and what verl's code allocates rather than what inductor's fusion keeps (docs/gpu.md, "Memory budget").
    actor_rollout_ref.actor.entropy_from_logits_with_chunking=true
    actor_rollout_ref.actor.fsdp_config.use_torch_compile=false
    actor_rollout_ref.ref.fsdp_config.param_offload=true
    actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.n="$N"
    actor_rollout_ref.rollout.tensor_model_parallel_size="$GEN_TP"
    actor_rollout_ref.rollout.gpu_memory_utilization="$GEN_MEMORY"
    actor_rollout_ref.rollout.max_num_seqs="$GEN_MAX_SEQS"
    actor_rollout_ref.rollout.temperature="$TEMPERATURE" actor_rollout_ref.rollout.top_p=0.95
    actor_rollout_ref.rollout.top_k=20
    actor_rollout_ref.rollout.prompt_length="$MAX_PROMPT" actor_rollout_ref.rollout.response_length="$MAX_RESPONSE"
    actor_rollout_ref.rollout.max_model_len=$((MAX_PROMPT + MAX_RESPONSE))
    actor_rollout_ref.rollout.agent.num_workers="$AGENT_WORKERS" ++spade.sandbox.max_workers="$SANDBOX_SLOTS"
    actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=true actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=40960
    trainer.nnodes="$NNODES" trainer.n_gpus_per_node="$GPUS_PER_NODE"
    trainer.total_training_steps="$STEPS" trainer.default_local_dir="$RUN_DIR/ckpt"
    trainer.save_freq="$SAVE_FREQ" trainer.max_actor_ckpt_to_keep="$KEEP_CKPTS"
    # HF weights in global_step_N/actor/huggingface (FSDP gathers them on rank 0 at each save)
    actor_rollout_ref.actor.checkpoint.save_contents='[model,optimizer,extra,hf_model]'
    trainer.logger='["console","wandb"]' trainer.project_name=spade trainer.experiment_name="$EXPERIMENT"
)
spade_launch "$@"
