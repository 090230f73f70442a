#!/bin/bash
# check.sh [PLAN.json...] — runs DeepSpeed's own config parsing (check.py:
# DeepSpeedConfig with its pydantic section models, the batch rule, the
# sanity checks, AutoEP's topology validation) on `loom export --to
# deepspeed` files, without GPUs or torch.
#
# Checked (default: every training plan of tests/golden/export/):
#   - NAME.deepspeed.json, the golden export of each plan that has one;
#   - what `loom export PLAN --to deepspeed --nearest` writes for every plan
#     (needs loom: $LOOM, default build/loom), when it writes anything;
#   - with no arguments also tests/golden/export/deepspeed/NAME-wW-ppP.json,
#     the other sections' goldens (tests/test_export.c), world W, P stages.
# The world size is the plan's GPUs; the pipeline size is the plan's for a
# golden, and for a --nearest export the num_stages of loom's PipelineModule
# note (no note: no pipeline).
#
# Development tool, not part of the test suite (CI has no DeepSpeed and no
# network). Needs a DeepSpeed tree at $DEEPSPEED (default /tmp/ds):
#     git --git-dir=<mirror of deepspeedai/DeepSpeed> archive HEAD:deepspeed | tar -x -C /tmp/ds/deepspeed
# and a python3 ($PYTHON, default python3) with pydantic >= 2 (DeepSpeed's
# requirement; Debian 12's python3-pydantic is 1.10). torch and DeepSpeed's
# other third-party imports are stubbed (../runtime_stubs.py); nothing of
# DeepSpeed's validation is. Prints PASS/FAIL per file; exit 1 if any fails.
# keys.py (same tree) regenerates tests/data/deepspeed_config_keys.txt, the
# key list the test suite checks the exports against without DeepSpeed.
here=$(cd "$(dirname "$0")" && pwd)
D=${DEEPSPEED:-/tmp/ds}
[ -f "$D/deepspeed/runtime/config.py" ] || { echo "check.sh: no DeepSpeed tree at $D (set DEEPSPEED)" >&2; exit 2; }
tree=$D
# shellcheck source=../runtime_check.sh
. "$here/../runtime_check.sh"
for plan in "$@"; do
    plan=$(readlink -f "$plan")
    name=$(basename "$plan" .plan.json)
    read -r world pp mode < <(python3 -c 'import json, sys
p = json.load(open(sys.argv[1]))
print(p["hardware"]["nodes"] * p["hardware"]["gpus_per_node"], p["schedule"]["pipeline_stages"], p["inputs"].get("mode", "train"))' "$plan")
    [ "$mode" = train ] || continue
    golden=${plan%.plan.json}.deepspeed.json
    [ -f "$golden" ] && check "$golden" "$world" "$pp" "$name.deepspeed.json (golden)"
    if [ -x "$LOOM" ]; then
        if "$LOOM" export "$plan" --to deepspeed --nearest -o "$tmp/$name.json" 2>"$tmp/err"; then
            npp=$(grep -o 'num_stages=[0-9]*' "$tmp/err" | head -1 | cut -d= -f2)
            check "$tmp/$name.json" "$world" "${npp:-1}" "$name --nearest"
        else
            echo "SKIP $name --nearest: loom wrote nothing: $(grep -v '^  ' "$tmp/err" | tail -1)"
        fi
    fi
done
if [ -n "$sections" ]; then
    for f in "$root"/tests/golden/export/deepspeed/*.json; do
        n=$(basename "$f" .json)
        w=${n##*-w}; w=${w%-pp*}; p=${n##*-pp}
        check "$f" "$w" "$p" "deepspeed/$n.json (golden)"
    done
fi
[ $fails = 0 ]
