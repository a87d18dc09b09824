# The paper's settings for each of its six runs (arXiv 2608.19197; ../shared/notes/spade-reference.md §9-§10), as
# defaults of the launchers' knobs: `spade_paper_defaults SETTING SIZE` sets every knob below that the environment
# does not already set, so any knob can still be changed for one run (KL=0 bash examples/run_spade_games_8b.sh).
# tests/recipe/test_paper_protocol.py pins the composed result of every paper launcher to the paper's numbers.
#
# How the paper's numbers map onto the recipe's knobs:
# - ENVS_PER_REGEN designs per regeneration, N plays per env per step (rollout.n), SAMPLES_PER_STEP the global batch;
#   a regeneration step trains ENVS_PER_REGEN designer samples (ENVS_PER_REGEN / N designer rows, each of whose N
#   sessions makes its own design) and AGENT_ROWS = (SAMPLES_PER_STEP - ENVS_PER_REGEN) / N agent rows of N plays.
# - HINT_PLAYS, the paper's hinted plays per env: the recipe measures each design at design time on paired seeds,
#   PLAYS_PER_ARM = HINT_PLAYS / 2 plays without and as many with the hint, so a design costs HINT_PLAYS plays.
# - PAPER_THINKING is the paper's agent thinking (8B): the launchers' THINKING defaults to it and sets the recipe's
#   thinking mode (spade.agent.thinking: the agent's turns rendered with enable_thinking=true, one sample per turn,
#   the history re-rendered by the chat template, which drops earlier think blocks). The designer, hint and audit
#   prompts keep data.apply_chat_template_kwargs.enable_thinking=false: they do not think (in the paper neither).
# Usage: spade_paper_defaults games|tool_use 4b|8b|30b
spade_paper_defaults() {
    local setting=$1 size=$2 row
    # setting/size     steps des n  batch regen hint hint_tok designer reward KL    think active audit words temp mem  model
    # (steps; designs per regeneration; plays per env per step; global batch in samples; regeneration interval;
    # hinted plays per env; hint tokens; designer max tokens; designer reward; KL; agent thinking; skills active
    # per regeneration; tool-use audit + compact filter; corpus words; agent temperature; rollout memory; model)
    case "$setting/$size" in
    games/4b)     row="400   24  8  192   4     16   4096     16384    blend  0     false 3      false 6000  0.6  0.7  Qwen/Qwen3-4B-Instruct-2507" ;;
    games/8b)     row="400   24  8  192   4     16   4096     20480    blend  0.005 true  3      false 6000  0.6  0.7  Qwen/Qwen3-8B" ;;
    games/30b)    row="400   24  8  192   4     16   4096     16384    blend  0     false 3      false 6000  0.6  0.7  Qwen/Qwen3-30B-A3B-Instruct-2507" ;;
    tool_use/4b)  row="500   16  16 256   32    4    512      16384    regret 0.005 false null   true  4000  0.7  0.7  Qwen/Qwen3-4B-Instruct-2507" ;;
    tool_use/8b)  row="400   24  8  192   8     16   2048     20480    blend  0.005 true  null   true  4000  0.6  0.7  Qwen/Qwen3-8B" ;;
    tool_use/30b) row="400   24  8  192   8     16   2048     16384    blend  0.005 false null   true  4000  0.6  0.85 Qwen/Qwen3-30B-A3B-Instruct-2507" ;;
    *)
        echo "error: the paper has no run for SETTING=$setting at size $size (games | tool_use x 4b | 8b | 30b)" >&2
        return 1
        ;;
    esac
    local steps designs n batch regen hint_plays hint_tokens designer_tokens reward kl thinking active audit words \
        temperature memory model
    read -r steps designs n batch regen hint_plays hint_tokens designer_tokens reward kl thinking active audit words \
        temperature memory model <<<"$row"
    : "${MODEL_PATH:=$model}"
    # Schedule and budget
    : "${STEPS:=$steps}" "${REGEN_EVERY:=$regen}" "${ENVS_PER_REGEN:=$designs}" "${N:=$n}"
    : "${AGENT_ROWS:=$(((batch - designs) / n))}" "${PLAYS_PER_ARM:=$((hint_plays / 2))}"
    # Designer, hint and reward
    : "${DESIGNER_TOKENS:=$designer_tokens}" "${HINT_TOKENS:=$hint_tokens}" "${REWARD_VARIANT:=$reward}"
    : "${ACTIVE_SKILLS:=$active}" "${CORPUS_WORDS:=$words}" "${AUDIT:=$audit}" "${COMPACT_FILTER:=$audit}"
    # Agent and algorithm
    : "${KL:=$kl}" "${PAPER_THINKING:=$thinking}" "${TEMPERATURE:=$temperature}" "${GEN_MEMORY:=$memory}"
    export MODEL_PATH STEPS REGEN_EVERY ENVS_PER_REGEN N AGENT_ROWS PLAYS_PER_ARM DESIGNER_TOKENS HINT_TOKENS \
        REWARD_VARIANT ACTIVE_SKILLS CORPUS_WORDS AUDIT COMPACT_FILTER KL PAPER_THINKING TEMPERATURE GEN_MEMORY
}

# The KL overrides: the paper's low-variance KL loss at coefficient KL, or none (no reference model) at KL=0.
# Usage: spade_kl_overrides KL; prints one override per line.
spade_kl_overrides() {
    if [ "$1" = "0" ]; then
        echo "actor_rollout_ref.actor.use_kl_loss=false"
    else
        printf '%s\n' "actor_rollout_ref.actor.use_kl_loss=true" "actor_rollout_ref.actor.kl_loss_coef=$1" \
            "actor_rollout_ref.actor.kl_loss_type=low_var_kl"
    fi
}

# The agent-thinking override: the recipe's per-turn thinking mode (never the template's global enable_thinking: a
# thinking agent on one growing sequence would train on reasoning the model is never served, and overflow the response
# within a few turns). Usage: spade_thinking_override true|false; prints the override.
spade_thinking_override() {
    if [ "$1" != "true" ] && [ "$1" != "false" ]; then
        echo "error: THINKING=$1: use true or false (the paper's value here is PAPER_THINKING=${PAPER_THINKING:-false})" >&2
        return 1
    fi
    echo "spade.agent.thinking=$1"
}

# The spade.*, reward.* and data.* overrides of the paper launchers (run_spade_8b.sh, run_spade_30b.sh), from their
# knobs (the variables above plus RUN_DIR, CORPUS, SETTING, ROWS_PER_STEP, lengths, THINKING_OVERRIDE and
# ENABLE_THINKING). Usage: spade_recipe_overrides; then "${SPADE_OVERRIDES[@]}" in the launcher's OVERRIDES.
spade_recipe_overrides() {
    SPADE_OVERRIDES=(
    spade.setting="$SETTING" spade.corpus="$CORPUS" spade.corpus_words="$CORPUS_WORDS" spade.run_dir="$RUN_DIR/spade"
    spade.regen_every="$REGEN_EVERY" spade.envs_per_regen="$ENVS_PER_REGEN" spade.agent_rows_per_step="$AGENT_ROWS"
    spade.plays_per_arm="$PLAYS_PER_ARM" spade.max_turns="$MAX_TURNS" spade.turn_tokens="$TURN_TOKENS"
    spade.skills.names="$SKILL_NAMES" spade.skills.active_per_regen="$ACTIVE_SKILLS"
    spade.designer.grounding="$GROUNDING" spade.designer.train="$DESIGNER_TRAIN"
    spade.designer.max_tokens="$DESIGNER_TOKENS" spade.hint.max_tokens="$HINT_TOKENS"
    spade.memory.enable="$MEMORY" spade.memory.capacity=200
    spade.audit.enable="$AUDIT" spade.agent.compact_filter="$COMPACT_FILTER"
    reward.reward_kwargs.designer.variant="$REWARD_VARIANT" reward.reward_kwargs.designer.lp_slow_ema=0.85
    spade.learning_potential.fast_ema=0.98
    data.train_batch_size="$ROWS_PER_STEP"
    data.max_prompt_length="$MAX_PROMPT" data.max_response_length="$MAX_RESPONSE" data.filter_overlong_prompts=false
    "$THINKING_OVERRIDE" ++data.apply_chat_template_kwargs.enable_thinking="$ENABLE_THINKING"
    )
}

# The paper's optimizer and importance sampling (§9: Adam, lr LR constant, betas 0.9 / 0.98, weight decay 0.1; TIS
# with Slime's defaults: token-level weights old / rollout probability truncated at 2.0), as ENGINE receives them.
# verl's FSDP optimizer builder passes optim.betas to torch's AdamW; its Megatron builder (init_megatron_optim_config)
# never reads optim.betas for Adam, so there they go through the hook it provides, optim.override_optimizer_config
# (Megatron's adam_beta1 / adam_beta2, otherwise its defaults 0.9 / 0.999). clip_grad 1.0 is Slime's and verl's value.
# TIS: verl's decoupled rollout correction (bypass_mode=false), from the rollout engine's log-probs.
# tests/recipe/test_engine_receives.py calls verl's own builders on each launcher's composed config.
# Usage: spade_optimizer_overrides fsdp|megatron; then "${OPTIM_OVERRIDES[@]}" in the launcher's OVERRIDES.
spade_optimizer_overrides() {
    OPTIM_OVERRIDES=(
    actor_rollout_ref.actor.optim.lr="$LR" actor_rollout_ref.actor.optim.weight_decay=0.1
  actor_rollout_ref.actor.optim.betas='[0.9,0.98]' actor_rollout_ref.actor.optim.clip_grad=1.0
    algorithm.rollout_correction.rollout_is=token algorithm.rollout_correction.rollout_is_threshold=2.0
    algorithm.rollout_correction.bypass_mode=false actor_rollout_ref.rollout.calculate_log_probs=true
    )
    case "$1" in
    fsdp) OPTIM_OVERRIDES+=(actor_rollout_ref.actor.optim.lr_scheduler_type=constant) ;;
    megatron)
        OPTIM_OVERRIDES+=(
        actor_rollout_ref.actor.optim.lr_decay_style=constant
        ++actor_rollout_ref.actor.optim.override_optimizer_config.adam_beta1=0.9
        ++actor_rollout_ref.actor.optim.override_optimizer_config.adam_beta2=0.98
        )
        ;;
    *)
        echo "error: spade_optimizer_overrides: engine must be fsdp or megatron, got '$1'" >&2
        return 1
        ;;
    esac
}
