#!/usr/bin/env bash
# GPU smoke test, for the first day a GPU is lent: two SPADE steps of the real recipe on ONE GPU with a tiny random
# model built in code (nothing is downloaded), served by vLLM, a checkpoint with HF weights at step 2, a timeout, and
# one closing line: "GPU SMOKE PASS: ..." (exit 0) or "GPU SMOKE FAIL: ..." (exit 1).
#
# IT HAS NOT RUN ON A GPU YET: this project has had no GPU so far. Only its overrides are checked, on CPU, against
# verl 0.9.1's config (tests/recipe/test_gpu_readiness.py); docs/gpu.md lists what has and has not run.
#
#   bash examples/gpu_smoke.sh                 # MODE=fsdp: tiny Qwen3, FSDP engine, vLLM rollout
#   MODE=megatron bash examples/gpu_smoke.sh   # tiny Qwen3-MoE, Megatron engine (Megatron-Bridge), vLLM rollout
#
# Needs the GPU install of docs/gpu.md (MODE=megatron: the Megatron one too). It pins the same readiness settings as
# the big launchers (max_model_len, enable_thinking, agent-loop workers, checkpoint pruning and HF weights; for
# Megatron also recompute and fused kernels), and the paper's optimizer and TIS as each engine receives them
# (examples/lib/paper.sh; Megatron: Adam on the CPU, the 30B memory plan), so a pass exercises them.
# Hydra overrides may follow the command.
set -uo pipefail
cd "$(dirname "$0")/.."
source examples/lib/launch.sh
source examples/lib/paper.sh
export WANDB_MODE=${WANDB_MODE:-disabled} HYDRA_FULL_ERROR=1 TOKENIZERS_PARALLELISM=false RAY_DEDUP_LOGS=0
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"

MODE=${MODE:-fsdp}
RUN_DIR=${RUN_DIR:-$PWD/runs/gpu-smoke-$MODE}
TIMEOUT_S=${TIMEOUT_S:-1800}
PYTHON=${PYTHON:-python3}
CORPUS=${CORPUS:-$PWD/examples/data/sample_corpus.jsonl}
STEPS=2
ROWS=2
ENVS=2
N=2
PLAYS_PER_ARM=2
MAX_PROMPT=${MAX_PROMPT:-3584} # + MAX_RESPONSE = 4096 positions; a games designer prompt is ~2.7k tokens before its
# document and exemplars, which are shortened to fit (recipe/spade/prompt_fit.py), never left-truncated
MAX_RESPONSE=${MAX_RESPONSE:-512}
SANDBOX_SLOTS=${SANDBOX_SLOTS:-256}
LR=${LR:-1e-6}
ROWS_PER_STEP=$(spade_rows_per_step "$ROWS" "$ENVS" "$N") || exit 1
AGENT_WORKERS=$(spade_agent_workers "$ROWS_PER_STEP" $((ENVS / N)) "$N" "$PLAYS_PER_ARM" "$SANDBOX_SLOTS") || exit 1

case "$MODE" in
fsdp)
    CONFIG_NAME=spade_trainer KIND=dense HF_SUBDIR=actor/huggingface
    ENGINE=(actor_rollout_ref.model.enable_gradient_checkpointing=true
        actor_rollout_ref.actor.entropy_from_logits_with_chunking=true
        actor_rollout_ref.actor.fsdp_config.use_torch_compile=false)
    ;;
megatron)
    CONFIG_NAME=spade_megatron_trainer KIND=moe HF_SUBDIR=actor/model/huggingface
    ENGINE=(
        actor_rollout_ref.model.use_fused_kernels=true
        actor_rollout_ref.actor.megatron.override_transformer_config.recompute_granularity=full
        actor_rollout_ref.actor.megatron.override_transformer_config.recompute_method=uniform
        actor_rollout_ref.actor.megatron.override_transformer_config.recompute_num_layers=1
        ++actor_rollout_ref.actor.megatron.override_transformer_config.moe_grouped_gemm=true
        ++actor_rollout_ref.actor.megatron.override_transformer_config.moe_permute_fusion=true
        actor_rollout_ref.actor.megatron.tensor_model_parallel_size=1
        actor_rollout_ref.actor.megatron.expert_model_parallel_size=1
        actor_rollout_ref.actor.megatron.sequence_parallel=false
        actor_rollout_ref.actor.megatron.use_dist_checkpointing=false
        actor_rollout_ref.actor.megatron.optimizer_offload=true
        ++actor_rollout_ref.actor.optim.override_optimizer_config.optimizer_cpu_offload=true
        ++actor_rollout_ref.actor.optim.override_optimizer_config.optimizer_offload_fraction=1
        ++actor_rollout_ref.actor.optim.override_optimizer_config.overlap_cpu_optimizer_d2h_h2d=true
        ++actor_rollout_ref.actor.optim.override_optimizer_config.use_precision_aware_optimizer=true
    )
    ;;
*)
    echo "GPU SMOKE FAIL: MODE must be fsdp or megatron, got '$MODE'"
    exit 1
    ;;
esac
MODEL_DIR=${MODEL_DIR:-$RUN_DIR/model-$KIND}
spade_optimizer_overrides "$MODE"

OVERRIDES=(
    spade.setting=games spade.corpus="$CORPUS" spade.run_dir="$RUN_DIR/spade"
    spade.regen_every=2 spade.envs_per_regen="$ENVS" spade.agent_rows_per_step="$ROWS"
    spade.plays_per_arm="$PLAYS_PER_ARM" spade.max_turns=3 spade.turn_tokens=64
    spade.designer.max_tokens=256 spade.designer.show_example=false spade.hint.max_tokens=32
    data.train_batch_size="$ROWS_PER_STEP" data.max_prompt_length="$MAX_PROMPT"
    data.max_response_length="$MAX_RESPONSE" data.filter_overlong_prompts=false
    ++data.apply_chat_template_kwargs.enable_thinking=false
    actor_rollout_ref.model.path="$MODEL_DIR"
    "${ENGINE[@]}"
    algorithm.adv_estimator=grpo actor_rollout_ref.actor.use_kl_loss=false "${OPTIM_OVERRIDES[@]}"
    actor_rollout_ref.actor.ppo_mini_batch_size="$ROWS_PER_STEP"
    actor_rollout_ref.actor.use_dynamic_bsz=true actor_rollout_ref.actor.ppo_max_token_len_per_gpu=8192
    actor_rollout_ref.rollout.name=vllm actor_rollout_ref.rollout.n="$N"
    actor_rollout_ref.rollout.tensor_model_parallel_size=1 actor_rollout_ref.rollout.gpu_memory_utilization=0.3
    actor_rollout_ref.rollout.enforce_eager=true
    actor_rollout_ref.rollout.prompt_length="$MAX_PROMPT" actor_rollout_ref.rollout.response_length="$MAX_RESPONSE"
    actor_rollout_ref.rollout.max_model_len=$((MAX_PROMPT + MAX_RESPONSE))
    actor_rollout_ref.rollout.agent.num_workers="$AGENT_WORKERS" ++spade.sandbox.max_workers="$SANDBOX_SLOTS"
    actor_rollout_ref.rollout.log_prob_use_dynamic_bsz=true actor_rollout_ref.rollout.log_prob_max_token_len_per_gpu=8192
    trainer.nnodes=1 trainer.n_gpus_per_node=1 trainer.total_training_steps="$STEPS"
    trainer.default_local_dir="$RUN_DIR/ckpt" trainer.save_freq="$STEPS" trainer.max_actor_ckpt_to_keep=1
    actor_rollout_ref.actor.checkpoint.save_contents='[model,optimizer,extra,hf_model]'
    trainer.logger=console trainer.project_name=spade trainer.experiment_name=gpu-smoke-"$MODE"
)
if [ "${DRY_RUN:-0}" = "1" ]; then
    spade_launch "$@"
    exit 0
fi

fail() {
    echo "GPU SMOKE FAIL: mode=$MODE: $1 (log: $LOG)"
    exit 1
}
mkdir -p "$RUN_DIR"
LOG=$RUN_DIR/smoke.log
rm -rf "$RUN_DIR/ckpt" "$RUN_DIR/spade" "$RUN_DIR/.timed_out"
"$PYTHON" examples/lib/smoke_models.py "$KIND" "$MODEL_DIR" >"$LOG" 2>&1 || fail "could not build the tiny $KIND model"
nvidia-smi >>"$LOG" 2>&1 || fail "nvidia-smi failed: no GPU visible"

# The run in its own session, so that a timeout ends it and every process it started (Ray, vLLM), and nothing else.
began=$SECONDS
setsid "$PYTHON" -m recipe.spade.main_spade --config-name "$CONFIG_NAME" "${OVERRIDES[@]}" "$@" >>"$LOG" 2>&1 &
run=$!
(
    sleep "$TIMEOUT_S"
    touch "$RUN_DIR/.timed_out"
    kill -TERM -- -"$run" 2>/dev/null
    sleep 30
    kill -KILL -- -"$run" 2>/dev/null
) &
watchdog=$!
wait "$run"
rc=$?
kill "$watchdog" 2>/dev/null
kill -KILL -- -"$run" 2>/dev/null # leftovers of the run's session (Ray workers), if any
took=$((SECONDS - began))

tail -n 40 "$LOG"
[ -e "$RUN_DIR/.timed_out" ] && fail "timed out after ${TIMEOUT_S}s"
[ "$rc" -eq 0 ] || fail "the run exited with status $rc"
grep -q "step:$STEPS - " "$LOG" || fail "no metrics line for step $STEPS in verl's console log"
HF_DIR=$RUN_DIR/ckpt/global_step_$STEPS/$HF_SUBDIR
"$PYTHON" -c "import sys; from transformers import AutoModelForCausalLM; AutoModelForCausalLM.from_pretrained(sys.argv[1])" \
    "$HF_DIR" >>"$LOG" 2>&1 || fail "no loadable HF weights at $HF_DIR"
[ -s "$RUN_DIR/spade/report.md" ] || fail "no SPADE report at $RUN_DIR/spade/report.md"
echo "GPU SMOKE PASS: mode=$MODE, $STEPS SPADE steps in ${took}s, HF weights at $HF_DIR"
