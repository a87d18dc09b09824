#!/usr/bin/env bash
# The paper's two-skills ablation over its games 30B run (../run_spade_games_30b.sh): only Mathematical Reasoning and
# Pattern Recognition, both active at every regeneration (spade.skills).
# Everything else is the games 30B run; any of its knobs can still be set. DRY_RUN=1 prints the plan and its budget.
set -euo pipefail
SKILL_NAMES='[mathematical_reasoning,pattern_recognition]' ACTIVE_SKILLS=2 \
    RUN_DIR=${RUN_DIR:-$PWD/runs/spade-30b-games-two-skills} \
    EXPERIMENT=${EXPERIMENT:-spade-30b-games-two-skills} \
    exec bash "$(dirname "$0")/../run_spade_games_30b.sh" "$@"
