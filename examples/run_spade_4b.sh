#!/usr/bin/env bash
# SPADE with Qwen3-4B-Instruct-2507: the paper's games 4B run (SETTING=tool_use: its tool-use 4B run), the FSDP
# launcher run_spade_8b.sh at SIZE=4b (rollout TP 1). Same as run_spade_games_4b.sh; every knob of run_spade_8b.sh
# applies (environment variables or Hydra overrides).
set -euo pipefail
SIZE=4b exec bash "$(dirname "$0")/run_spade_8b.sh" "$@"
