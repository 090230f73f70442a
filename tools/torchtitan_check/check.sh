#!/bin/bash
# check.sh [PLAN.json...] — loads `loom export --to torchtitan` job configs
# the way torchtitan does and runs its own config checks on them (check.py:
# ConfigManager's loading, the config classes' __post_init__ checks,
# ParallelDims, the model config's update_from_config, Trainer's token
# rules, the pipeline's module names), without GPUs or torch.
#
# Checked (default: every training plan of tests/golden/export/):
#   - NAME.torchtitan.py, the golden export of each plan that has one;
#   - what `loom export PLAN --to torchtitan --nearest` writes for every plan
#     (needs loom: $LOOM, default build/loom), when it writes anything;
#   - with no arguments also tests/golden/export/torchtitan/NAME-wW.py, the
#     pipeline / EP / 405B goldens of tests/test_export.c, world W.
# Each against its plan where there is one: tokens per step, norm epsilon,
# RoPE base, no float8 layers in a bf16 plan.
#
# Development tool, not part of the test suite (CI has no torchtitan and no
# network). Needs a torchtitan tree at $TORCHTITAN (default /tmp/tt):
#     git --git-dir=<mirror of pytorch/torchtitan> archive HEAD:torchtitan | tar -x -C /tmp/tt/torchtitan
# and a python3 ($PYTHON, default python3), 3.11+. torch, tyro, spmd_types
# and the other third-party imports are stubbed (../runtime_stubs.py);
# torchtitan's own code is not. Prints PASS/FAIL per file; exit 1 if any fails.
# fields.py (same tree) regenerates tests/data/torchtitan_config_fields.txt,
# from which the test suite builds its stand-in torchtitan.
here=$(cd "$(dirname "$0")" && pwd)
T=${TORCHTITAN:-/tmp/tt}
[ -f "$T/torchtitan/config/configs.py" ] || { echo "check.sh: no torchtitan tree at $T (set TORCHTITAN)" >&2; exit 2; }
tree=$T
# shellcheck source=../runtime_check.sh
. "$here/../runtime_check.sh"
for plan in "$@"; do
    plan=$(readlink -f "$plan")
    name=$(basename "$plan" .plan.json)
    read -r world mode < <(python3 -c 'import json, sys
p = json.load(open(sys.argv[1]))
print(p["hardware"]["nodes"] * p["hardware"]["gpus_per_node"], p["inputs"].get("mode", "train"))' "$plan")
    [ "$mode" = train ] || continue
    golden=${plan%.plan.json}.torchtitan.py
    [ -f "$golden" ] && check "$golden" "$world" "$plan" "$name.torchtitan.py (golden)"
    if [ -x "$LOOM" ]; then
        if "$LOOM" export "$plan" --to torchtitan --nearest -o "$tmp/$name.py" 2>"$tmp/err"; then
            check "$tmp/$name.py" "$world" "$plan" "$name --nearest"
        else
            echo "SKIP $name --nearest: loom wrote nothing: $(grep -v '^  ' "$tmp/err" | tail -1)"
        fi
    fi
done
if [ -n "$sections" ]; then
    for f in "$root"/tests/golden/export/torchtitan/*.py; do
        n=$(basename "$f" .py)
        check "$f" "${n##*-w}" "" "torchtitan/$n.py (golden)"
    done
fi
[ $fails = 0 ]
