#!/usr/bin/env bash
# SPADE with Qwen3-30B-A3B-Instruct-2507 on one 8-GPU node: the paper's games 30B run (SETTING=tool_use: its tool-use
# 30B run; run_spade_{games,tool_use}_30b.sh), every value of the paper from examples/lib/paper.sh. Megatron
# (TP4 + SP, EP8, Adam on the CPU) with a vLLM rollout of two replicas of TP4 (expert parallel 4 = TP x DP, as verl
# 0.9.1 requires): verl routes every turn of an episode (one request id) to the replica that holds its history.
# Games: 400 steps, 24 designs every 4 steps, a batch of 192 samples (a regeneration step: 24 designer + 168 agent),
# 8 + 8 paired measurement plays per design (the paper's 16 hinted plays). DRY_RUN=1 prints the plan and
# its budget line. Needs Python 3.12 and the GPU + Megatron install of docs/gpu.md. Every knob: an environment variable
# or a Hydra override. Memory, recompute and sizing choices are explained (with the verl 0.9.1 code they rest on) in
# docs/gpu.md (`python -m recipe.spade.gpu_memory examples/run_spade_30b.sh` computes its memory table); the paper
# runs, ablations and what differs from the paper's code in docs/paper.md.
set -xeuo pipefail
cd "$(dirname "$0")/.."
source examples/lib/launch.sh
source examples/lib/paper.sh

SETTING=${SETTING:-games}
# The paper's values for this run (MODEL_PATH, STEPS, REGEN_EVERY, ENVS_PER_REGEN, N, AGENT_ROWS, PLAYS_PER_ARM, KL,
# DESIGNER_TOKENS, HINT_TOKENS, REWARD_VARIANT, ACTIVE_SKILLS, CORPUS_WORDS, AUDIT, COMPACT_FILTER, TEMPERATURE,
# GEN_MEMORY), each unless already set.
spade_paper_defaults "$SETTING" 30b
# Paths
CORPUS=${CORPUS:-examples/data/sample_corpus.jsonl}
RUN_DIR=${RUN_DIR:-$PWD/runs/spade-30b-$SETTING}
EXPERIMENT=${EXPERIMENT:-spade-30b-$SETTING}
# Ray / cluster
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
# Algorithm (paper: Adam lr 1e-6 constant, betas 0.9 / 0.98, wd 0.1, clip 0.2 / 0.28, entropy 0, GRPO without std
# normalisation, low-variance KL at coefficient KL)
LR=${LR:-1e-6}
# Parallelism: Megatron actor and vLLM rollout
TP=${TP:-4}
EP=${EP:-8}
# Rollout: world / (GEN_TP x GEN_DP) vLLM replicas. verl's load balancer keeps a request id on one replica (sticky), but
# inside a replica of GEN_DP > 1 vLLM picks a DP engine per request, so an episode's turns would re-prefill their
# history on the other engine; GEN_DP=1 keeps each replica one engine (docs/gpu.md, "Rollout layout").
GEN_TP=${GEN_TP:-4}
GEN_DP=${GEN_DP:-1}
# Sandbox slots per agent-loop worker (spade.sandbox.max_workers); the worker count follows from it (launch.sh).
SANDBOX_SLOTS=${SANDBOX_SLOTS:-256}
ROWS_PER_STEP=$(spade_rows_per_step "$AGENT_ROWS" "$ENVS_PER_REGEN" "$N")
AGENT_WORKERS=$(spade_agent_workers "$ROWS_PER_STEP" $((ENVS_PER_REGEN / N)) "$N" "$PLAYS_PER_ARM" "$SANDBOX_SLOTS" \
    "${AGENT_WORKERS:-}")
# vLLM admits a regeneration step's peak at once (744 episodes over two engines: 372 each; launch.sh)
GEN_MAX_SEQS=${GEN_MAX_SEQS:-$(spade_max_num_seqs "$ROWS_PER_STEP" $((ENVS_PER_REGEN / N)) "$N" "$PLAYS_PER_ARM" \
    $((NNODES * GPUS_PER_NODE / GEN_TP)))}
# Agent thinking: off, as in the paper's 30B runs (Instruct-2507 has no thinking mode); THINKING=true turns on the
# recipe's per-turn thinking mode (for a thinking MODEL_PATH). Other prompts: ENABLE_THINKING, off.
THINKING=${THINKING:-$PAPER_THINKING}
THINKING_OVERRIDE=$(spade_thinking_override "$THINKING")
ENABLE_THINKING=${ENABLE_THINKING:-false}
# Checkpoints: every SAVE_FREQ steps (the paper's 16), the last KEEP_CKPTS kept; each holds HF weights for spade-eval
SAVE_FREQ=${SAVE_FREQ:-16}
KEEP_CKPTS=${KEEP_CKPTS:-2}

CONFIG_NAME=spade_megatron_trainer
spade_recipe_overrides
spade_optimizer_overrides megatron
OVERRIDES=(
    "${SPADE_OVERRIDES[@]}"
    actor_rollout_ref.model.path="$MODEL_PATH"
    # Megatron ignores model.enable_gradient_checkpointing: recompute is Megatron's own (full, every layer), and the
    # fused kernels compute log-probs without materialising the logits of a 40,960-token pack.
    actor_rollout_ref.model.use_fused_kernels=true
    actor_rollout_ref.actor.megatron.override_transformer_config.recompute_granularity=full
    actor_rollout_ref.actor.megatron.override_transformer_config.recompute_method=uniform
    actor_rollout_ref.actor.megatron.override_transformer_config.recompute_num_layers=1
    ++actor_rollout_ref.actor.megatron.override_transformer_config.moe_grouped_gemm=true
    ++actor_rollout_ref.actor.megatron.override_transformer_config.moe_permute_fusion=true
    algorithm.adv_estimator=grpo algorithm.norm_adv_by_std_in_grpo=false algorithm.use_kl_in_reward=false
    $(spade_kl_overrides "$KL")
    "${OPTIM_OVERRIDES[@]}" actor_rollout_ref.actor.entropy_coeff=0
    actor_rollout_ref.actor.clip_ratio_low=0.2 actor_rollout_ref.actor.clip_ratio_high=0.28
    actor_rollout_ref.actor.ppo_mini_batch_size="$ROWS_PER_STEP"
    actor_rollout_ref.actor.use_dynamic_bsz=true actor_rollout_ref.actor.ppo_max_token_len_per_gpu=40960
    actor_rollout_ref.actor.megatron.tensor_model_parallel_size="$TP"
    actor_rollout_ref.actor.megatron.expert_model_parallel_size="$EP"
    actor_rollout_ref.actor.megatron.expert_tensor_parallel_size=1
    actor_rollout_ref.actor.megatron.sequence_parallel=true
    actor_rollout_ref.actor.megatron.param_offload=true actor_rollout_ref.actor.megatron.optimizer_offload=true
    # Adam lives and steps on the CPU (verl's own Qwen3-30B-A3B Megatron examples): megatron.optimizer_offload alone
    # brings the fp32 master copy and both moments back to the GPU for every update (~46 GB per GPU with EP8).
    ++actor_rollout_ref.actor.optim.override_optimizer_config.optimizer_cpu_offload=true
    ++actor_rollout_ref.actor.optim.override_optimizer_config.optimizer_offload_fraction=1
    ++actor_rollout_ref.actor.optim.override_optimizer_config.overlap_cpu_optimizer_d2h_h2d=true
    ++actor_rollout_ref.actor.optim.override_optimizer_config.use_precision_aware_optimizer=true
    actor_rollout_ref.ref.megatron.tensor_model_parallel_size="$TP"
    actor_rollout_ref.ref.megatron.expert_model_parallel_size="$EP"
    actor_rollout_ref.ref.megatron.param_offload=true
    actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.n="$N"
    actor_rollout_ref.rollout.tensor_model_parallel_size="$GEN_TP"
    actor_rollout_ref.rollout.data_parallel_size="$GEN_DP"
    actor_rollout_ref.rollout.expert_parallel_size=$((GEN_TP * GEN_DP))
    actor_rollout_ref.rollout.gpu_memory_utilization="$GEN_MEMORY"
    actor_rollout_ref.rollout.max_num_seqs="$GEN_MAX_SEQS"
    actor_rollout_ref.rollout.temperature="$TEMPERATURE" actor_rollout_ref.rollout.top_p=0.95
    actor_rollout_ref.rollout.top_k=20
    actor_rollout_ref.rollout.prompt_length="$MAX_PROMPT" actor_rollout_ref.rollout.response_length="$MAX_RESPONSE"
    actor_rollout_ref.rollout.max_model_len=$((MAX_PROMPT + MAX_RESPONSE))
    actor_rollout_ref.rollout.agent.num_workers="$AGENT_WORKERS" ++spade.sandbox.max_workers="$SANDBOX_SLOTS"
    actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=true
    actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=40960
    trainer.nnodes="$NNODES" trainer.n_gpus_per_node="$GPUS_PER_NODE"
    trainer.total_training_steps="$STEPS" trainer.default_local_dir="$RUN_DIR/ckpt"
    trainer.save_freq="$SAVE_FREQ" trainer.max_actor_ckpt_to_keep="$KEEP_CKPTS"
    # HF weights in global_step_N/actor/model/huggingface (Megatron-Bridge; no separate dist-checkpoint copy)
    actor_rollout_ref.actor.megatron.use_dist_checkpointing=false
    actor_rollout_ref.actor.checkpoint.save_contents='[model,optimizer,extra,hf_model]'
    trainer.logger='["console","wandb"]' trainer.project_name=spade trainer.experiment_name="$EXPERIMENT"
)
spade_launch "$@"
