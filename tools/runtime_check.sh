# runtime_check.sh — sourced by tools/deepspeed_check/check.sh and
# tools/torchtitan_check/check.sh: the setup and the per-file verdict they
# share. The caller sets `here` (its own folder, holding check.py) and
# `tree` (the runtime's source tree check.py runs in) first.
root=$(cd "$here/../.." && pwd)
PY=${PYTHON:-python3}
LOOM=${LOOM:-$root/build/loom}
sections=
[ $# = 0 ] && { set -- "$root"/tests/golden/export/*.plan.json; sections=1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
# check FILE ARG2 ARG3 LABEL: check.py's PASS/FAIL line for FILE, relabelled
check() {
    local out
    out=$(cd "$tree" && "$PY" "$here/check.py" "$1" "$2" "$3" 2>/dev/null | grep -E '^(PASS|FAIL) ')
    [ -n "$out" ] || out="FAIL $(basename "$1"): check.py printed no verdict"
    echo "${out/ $(basename "$1"):/ $4:}"
    case $out in PASS*) ;; *) fails=$((fails + 1)) ;; esac
}
