#!/usr/bin/env bash
# SPADE on several nodes: submit the 30B Megatron launcher as a Ray job to a running cluster
# (`ray start --head` on the first node, `ray start --address=<head>:6379` on the others).
# RAY_ADDRESS points at the head's dashboard; NNODES and GPUS_PER_NODE describe the cluster.
# RUN_DIR (checkpoints, memory, metrics) and CORPUS are required, as absolute paths on storage that every node
# mounts at the same place: the job runs in Ray's temporary per-node copy of this directory (--working-dir), so a
# relative or node-local path would split the checkpoints across nodes and lose them on resume.
# Every knob of run_spade_30b.sh set here (MODEL_PATH, STEPS, ..., PYTHON) is passed on to the job; Hydra overrides
# too. Credentials (WANDB_API_KEY, HF_TOKEN) and the libraries' settings (HF_HOME, WANDB_MODE, ...: SPADE_JOB_ENV_VARS
# in examples/lib/launch.sh) go in the job's runtime_env, read from a file descriptor: every process of the job gets
# them on every node, and their values are on no command line (Ray's dashboard masks runtime_env env_vars).
set -xeuo pipefail
cd "$(dirname "$0")/.."
source examples/lib/launch.sh

RAY_ADDRESS=${RAY_ADDRESS:-http://127.0.0.1:8265}
NNODES=${NNODES:-2}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
spade_require_absolute "on storage that every node mounts at the same place" RUN_DIR CORPUS

# The job's driver environment: the cluster shape and every variable the 30B launcher, the paper's table and the
# shared launch tail read (each is read as ${NAME:-default} or ${NAME:=default}: PYTHON, SKIP_DOCTOR, ...) that is set
# here. These are knobs, not secrets: they stay visible on the job's entrypoint.
JOB_ENV=(NNODES="$NNODES" GPUS_PER_NODE="$GPUS_PER_NODE")
for knob in $(grep -oh '${[A-Z][A-Z0-9_]*:[-=]' examples/run_spade_30b.sh examples/lib/paper.sh examples/lib/launch.sh |
    tr -d '${:=-' | sort -u); do
    case "$knob" in NNODES | GPUS_PER_NODE | CONFIG_NAME | OVERRIDES | DRY_RUN | PYTHONPATH) continue ;; esac
    if [ -n "${!knob+set}" ]; then JOB_ENV+=("$knob=${!knob}"); fi
done
# The runtime_env's variables by name only (what Ray's dashboard shows of them)
RUNTIME_ENV_NAMES=$(for name in "${SPADE_JOB_ENV_VARS[@]}"; do
    if [ -n "${!name+set}" ]; then echo "$name=<redacted>"; fi
done | sort | paste -sd ' ')
SUBMIT=(ray job submit --address="$RAY_ADDRESS" --working-dir . --runtime-env /dev/fd/3 --
    env "${JOB_ENV[@]}" bash examples/run_spade_30b.sh "$@")
if [ "${DRY_RUN:-0}" = "1" ]; then
    echo "== submit (DRY_RUN) =="
    printf '%q ' "${SUBMIT[@]}"
    echo "# runtime_env env_vars: ${RUNTIME_ENV_NAMES:-(none)}"
    env "${JOB_ENV[@]}" bash examples/run_spade_30b.sh "$@"
    exit 0
fi
"${SUBMIT[@]}" 3< <(spade_job_runtime_env)
