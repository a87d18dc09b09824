# Shared tail of the SPADE launchers: print the resolved plan and its budget line, then run main_spade (or only
# print, with DRY_RUN=1). Expects: CONFIG_NAME, an OVERRIDES array; extra Hydra overrides come from the script's
# arguments.
SPADE_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
spade_launch() {
    local python=${PYTHON:-python3}
    local all=("${OVERRIDES[@]}" "$@")
    echo "== SPADE plan: config ${CONFIG_NAME}, ${#all[@]} overrides =="
    printf '  %s\n' "${all[@]}"
    spade_doctor "${all[@]}" || return 1
    # What a step trains, from the config the run composes (recipe/spade/budget.py; no GPU needed).
    PYTHONPATH="$SPADE_ROOT${PYTHONPATH:+:$PYTHONPATH}" "$python" -m recipe.spade.budget \
        --config-name "${CONFIG_NAME}" "${all[@]}"
    if [ "${DRY_RUN:-0}" = "1" ]; then
        echo "== overrides (DRY_RUN) =="
        printf '%s\n' "${all[@]}"
        return 0
    fi
    # verl's wandb logger dies after the model load on a host without a wandb login: use the console instead
    if printf '%s\n' "${all[@]}" | grep -q '^trainer\.logger=.*wandb' &&
        ! why=$(PYTHONPATH="$SPADE_ROOT${PYTHONPATH:+:$PYTHONPATH}" "$python" -m spade_envs.cli.run_checks wandb); then
        echo "warning: wandb cannot start here ($why); logging to the console only (wandb login, or" \
            "WANDB_MODE=offline, keeps wandb)" >&2
        all+=('trainer.logger=["console"]')
    fi
    "$python" -m recipe.spade.main_spade --config-name "${CONFIG_NAME}" "${all[@]}"
}

# Preflight before anything starts: `spade-envs doctor` on this launch (Python, torch/CUDA, verl pin, vLLM and
# megatron-core when needed, sandbox levels, seccomp, memory, corpus, model). A failed check stops the launch.
# Skipped with SKIP_DOCTOR=1 and under DRY_RUN=1 (which only prints). Usage: spade_doctor OVERRIDE...
spade_doctor() {
    if [ "${SKIP_DOCTOR:-0}" = "1" ] || [ "${DRY_RUN:-0}" = "1" ]; then return 0; fi
    local root
    root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
    PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" "${PYTHON:-python3}" -m spade_envs.cli.doctor --launcher "$0" \
        --config-name "${CONFIG_NAME}" -- "$@"
}

# Rows of a step: AGENT_ROWS agent rows plus ENVS / N designer rows (each of a designer row's N sessions makes its own
# design), i.e. data.train_batch_size. Fails unless ENVS is a multiple of N.
# Usage: spade_rows_per_step AGENT_ROWS ENVS N; prints the row count.
spade_rows_per_step() {
    local agent=$1 envs=$2 n=$3
    if [ $((envs % n)) -ne 0 ]; then
        echo "error: ENVS_PER_REGEN=$envs designs is not a multiple of N=$n (rollout.n): a designer row holds N" \
            "designs, one per session" >&2
        return 1
    fi
    echo $((agent + envs / n))
}

# Agent-loop workers for a step of ROWS rows, so that no worker can hold more sandboxed episodes at once than its
# sandbox allows (SLOTS = spade.sandbox.max_workers, one sandbox pool per agent-loop worker process).
# verl 0.9.1's AgentLoopManagerTQ.generate_sequences hands each worker a contiguous chunk of ceil(rows / workers)
# rows and every row runs N samples at once; a designer sample plays 3 x PLAYS_PER_ARM measurement episodes at once
# (no hint, hint, placebo: spade.hint.placebo, on by default; sized for it even when a run turns it off), an agent
# sample one. Sized for the worst chunk (as many of the DESIGNER_ROWS designer rows as it can hold), so the
# row order does not matter; never below verl's default of 8 workers (throughput: each worker is one Python process).
# Usage: spade_agent_workers ROWS DESIGNER_ROWS N PLAYS_PER_ARM SLOTS [REQUESTED]; prints the worker count.
# With REQUESTED (AGENT_WORKERS set by hand) it checks that number instead and fails when it is too small.
spade_agent_workers() {
    local rows=$1 designers=$2 n=$3 plays=$4 slots=$5 requested=${6:-}
    local per_designer=$((n * 3 * plays)) rows_per_worker
    if [ "$designers" -gt 0 ] && [ "$per_designer" -gt "$slots" ]; then
        echo "error: one designer row runs N x 3 x PLAYS_PER_ARM = $per_designer sandboxed episodes at once, more" \
            "than the $slots slots of an agent-loop worker's sandbox; raise SANDBOX_SLOTS or lower N / PLAYS_PER_ARM" >&2
        return 1
    fi
    if [ $((designers * per_designer)) -ge "$slots" ]; then
        rows_per_worker=$((slots / per_designer)) # a chunk of designer rows only
    else
        rows_per_worker=$((designers + (slots - designers * per_designer) / n)) # all designer rows, then agent rows
    fi
    if [ "$rows_per_worker" -lt 1 ]; then
        echo "error: one row runs N = $n sandboxed episodes at once, more than the $slots slots of an agent-loop" \
            "worker's sandbox; raise SANDBOX_SLOTS or lower N" >&2
        return 1
    fi
    local least=$(((rows + rows_per_worker - 1) / rows_per_worker))
    if [ -n "$requested" ]; then
        if [ "$requested" -lt "$least" ]; then
            echo "error: AGENT_WORKERS=$requested is too few: $rows rows ($designers of them designer rows of" \
                "$per_designer sandboxed episodes each) need at least $least workers of $slots sandbox slots" \
                "(SANDBOX_SLOTS)" >&2
            return 1
        fi
        echo "$requested"
        return 0
    fi
    if [ "$least" -lt 8 ]; then least=8; fi
    echo "$least"
}

# vLLM's max_num_seqs: the requests of a step's peak, all at once. Every episode of a regeneration step is in flight
# (a designer row's N samples x 3 x PLAYS_PER_ARM measurement plays, sized for three arms as the workers above; an
# agent row's N samples), one request each, and verl's load balancer sends each new one to the engine with the
# fewest in flight, so an engine gets PEAK / ENGINES of them (ENGINES = GPUs / GEN_TP: each DP rank of a replica is an
# engine of its own). Never below verl's default of 256 (trainer/config/rollout/rollout.yaml).
# Usage: spade_max_num_seqs ROWS DESIGNER_ROWS N PLAYS_PER_ARM ENGINES; prints the count.
spade_max_num_seqs() {
    local rows=$1 designers=$2 n=$3 plays=$4 engines=$5
    local peak=$((designers * n * 3 * plays + (rows - designers) * n))
    local per_engine=$(((peak + engines - 1) / engines))
    echo $((per_engine > 256 ? per_engine : 256))
}

# What a Ray job needs in every process on every node, besides the launcher's knobs: the credentials and where the
# libraries keep their caches. A job does not inherit the submitting shell, and verl's trainer (wandb included) runs
# in Ray actors, so these go in the job's runtime_env env_vars, not on the entrypoint (which only the driver sees).
SPADE_JOB_ENV_VARS=(WANDB_API_KEY WANDB_MODE WANDB_ENTITY WANDB_BASE_URL HF_TOKEN HF_HOME HF_ENDPOINT HF_HUB_OFFLINE)

# Prints the runtime_env JSON ({"env_vars": {...}}) of those of SPADE_JOB_ENV_VARS (or of the named variables) that
# are set. Python reads the values from the environment, so none is expanded on a command line or in `set -x`.
# Usage: spade_job_runtime_env [NAME...]
spade_job_runtime_env() {
    local names=("$@")
    if [ ${#names[@]} -eq 0 ]; then names=("${SPADE_JOB_ENV_VARS[@]}"); fi
    "${PYTHON:-python3}" -c 'import json, os, sys
print(json.dumps({"env_vars": {k: os.environ[k] for k in sys.argv[1:] if k in os.environ}}))' "${names[@]}"
}

# Fails with a clear message unless every named variable holds an absolute path.
# Usage: spade_require_absolute "why" NAME...
spade_require_absolute() {
    local why=$1 name
    shift
    for name in "$@"; do
        case "${!name:-}" in
        /*) ;;
        "")
            echo "error: $name must be set to an absolute path ($why)" >&2
            return 1
            ;;
        *)
            echo "error: $name=${!name} is not an absolute path ($why)" >&2
            return 1
            ;;
        esac
    done
}
