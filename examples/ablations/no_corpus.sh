#!/usr/bin/env bash
# The paper's no-corpus ablation over its games 30B run (../run_spade_games_30b.sh): the designer gets no corpus
# document: three sampled concept ideas, do's and don'ts and a worked example the new game must differ from
# (spade.designer.grounding=concepts; no corpus is read).
# Everything else is the games 30B run; any of its knobs can still be set. DRY_RUN=1 prints the plan and its budget.
set -euo pipefail
GROUNDING=concepts CORPUS=null \
    RUN_DIR=${RUN_DIR:-$PWD/runs/spade-30b-games-no-corpus} \
    EXPERIMENT=${EXPERIMENT:-spade-30b-games-no-corpus} \
    exec bash "$(dirname "$0")/../run_spade_games_30b.sh" "$@"
