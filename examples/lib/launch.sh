# Shared tail of the SPADE launchers: print the resolved plan, then run main_spade (or only print, with DRY_RUN=1).
# Expects: CONFIG_NAME, an OVERRIDES array; extra Hydra overrides come from the script's arguments.
spade_launch() {
    local python=${PYTHON:-python3}
    local all=("${OVERRIDES[@]}" "$@")
    echo "== SPADE plan: config ${CONFIG_NAME}, ${#all[@]} overrides =="
    printf '  %s\n' "${all[@]}"
    if [ "${DRY_RUN:-0}" = "1" ]; then
        echo "== overrides (DRY_RUN) =="
        printf '%s\n' "${all[@]}"
        return 0
    fi
    "$python" -m recipe.spade.main_spade --config-name "${CONFIG_NAME}" "${all[@]}"
}
