#!/usr/bin/env bash
# SPADE on several nodes: submit the 30B Megatron launcher as a Ray job to a running cluster
# (`ray start --head` on the first node, `ray start --address=<head>:6379` on the others).
# RAY_ADDRESS points at the head's dashboard; NNODES and GPUS_PER_NODE describe the cluster.
set -xeuo pipefail
cd "$(dirname "$0")/.."

RAY_ADDRESS=${RAY_ADDRESS:-http://127.0.0.1:8265}
NNODES=${NNODES:-2}
GPUS_PER_NODE=${GPUS_PER_NODE:-8}
if [ "${DRY_RUN:-0}" = "1" ]; then
    NNODES="$NNODES" GPUS_PER_NODE="$GPUS_PER_NODE" bash examples/run_spade_30b.sh "$@"
    exit 0
fi
ray job submit --address="$RAY_ADDRESS" --working-dir . \
    -- env NNODES="$NNODES" GPUS_PER_NODE="$GPUS_PER_NODE" bash examples/run_spade_30b.sh "$@"
