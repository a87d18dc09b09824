# Shared tail of the SPADE launchers: print the resolved plan, then run main_spade (or only print, with DRY_RUN=1).
# Expects: CONFIG_NAME, an OVERRIDES array; extra Hydra overrides come from the script's arguments.
spade_launch() {
    local python=${PYTHON:-python3}
    local all=("${OVERRIDES[@]}" "$@")
    echo "== SPADE plan: config ${CONFIG_NAME}, ${#all[@]} overrides =="
    printf '  %s\n' "${all[@]}"
    spade_doctor "${all[@]}" || return 1
    if [ "${DRY_RUN:-0}" = "1" ]; then
        echo "== overrides (DRY_RUN) =="
        printf '%s\n' "${all[@]}"
        return 0
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
    PYTHONPATH="$root${PYTHONPATH:+:$PYTHONPATH}" "${PYTHON:-python3}" -m spade_envs.doctor --launcher "$0" \
        --config-name "${CONFIG_NAME}" -- "$@"
}

# Agent-loop workers for a step of ROWS rows, so that no worker can hold more sandboxed episodes at once than its
# sandbox allows (SLOTS = spade.sandbox.max_workers, one sandbox pool per agent-loop worker process).
# verl 0.9.1's AgentLoopManagerTQ.generate_sequences hands each worker a contiguous chunk of ceil(rows / workers)
# rows and every row runs N samples at once; a designer sample plays 2 x PLAYS_PER_ARM measurement episodes at once,
# an agent sample one. Sized for the worst case (a chunk of designer rows only), so the row order does not matter;
# never below verl's default of 8 workers (throughput: each worker is one Python process).
# Usage: spade_agent_workers ROWS DESIGNER_ROWS N PLAYS_PER_ARM SLOTS [REQUESTED]; prints the worker count.
# With REQUESTED (AGENT_WORKERS set by hand) it checks that number instead and fails when it is too small.
spade_agent_workers() {
    local rows=$1 designers=$2 n=$3 plays=$4 slots=$5 requested=${6:-}
    local per_row=$n
    if [ "$designers" -gt 0 ]; then per_row=$((n * 2 * plays)); fi
    local rows_per_worker=$((slots / per_row))
    if [ "$rows_per_worker" -lt 1 ]; then
        echo "error: one designer row runs N x 2 x PLAYS_PER_ARM = $per_row sandboxed episodes at once, more than" \
            "the $slots slots of an agent-loop worker's sandbox; raise SANDBOX_SLOTS or lower N / PLAYS_PER_ARM" >&2
        return 1
    fi
    local needed=$(((rows + rows_per_worker - 1) / rows_per_worker))
    if [ "$needed" -lt 8 ]; then needed=8; fi
    if [ -n "$requested" ]; then
        if [ "$requested" -lt $(((rows + rows_per_worker - 1) / rows_per_worker)) ]; then
            echo "error: AGENT_WORKERS=$requested is too few: $rows rows of up to $per_row sandboxed episodes each" \
                "need at least $(((rows + rows_per_worker - 1) / rows_per_worker)) workers of $slots sandbox slots" \
                "(SANDBOX_SLOTS)" >&2
            return 1
        fi
        echo "$requested"
        return 0
    fi
    echo "$needed"
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
