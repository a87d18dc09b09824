#!/usr/bin/env bash
# The paper's no-designer-training ablation over its games 30B run (../run_spade_games_30b.sh): designs are still
# generated, validated, measured and played, but designer samples never update the model (spade.designer.train=false:
# loss mask 0, advantage 0); memory off too, as in the paper (spade.memory.enable=false).
# Everything else is the games 30B run; any of its knobs can still be set. DRY_RUN=1 prints the plan and its budget.
set -euo pipefail
DESIGNER_TRAIN=false MEMORY=false \
    RUN_DIR=${RUN_DIR:-$PWD/runs/spade-30b-games-no-designer-training} \
    EXPERIMENT=${EXPERIMENT:-spade-30b-games-no-designer-training} \
    exec bash "$(dirname "$0")/../run_spade_games_30b.sh" "$@"
