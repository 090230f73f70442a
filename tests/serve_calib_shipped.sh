#!/bin/bash
# serve_calib_shipped.sh — the shipped serving calibration is reproducible:
# `loom calibrate --serving examples/calibration/serving-runs.json` refits
# examples/calibration/serving-calib.json (the file CMakeLists.txt compiles
# in as loom_serve_calib_default) field by field within 1e-6 relative, and
# `loom eval --mode serve` with the file named explicitly prints the same
# figures as with the compiled-in default.
#
# usage: bash tests/serve_calib_shipped.sh path/to/loom   (run from the repo root)
set -u
LOOM=${1:?usage: serve_calib_shipped.sh path/to/loom}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
shipped=examples/calibration/serving-calib.json
fail=0

if ! "$LOOM" calibrate --serving examples/calibration/serving-runs.json -o "$tmp/fit.json" \
        2>"$tmp/err"; then
    echo "FAIL: loom calibrate --serving exited non-zero:"; cat "$tmp/err"; exit 1
fi
python3 - "$shipped" "$tmp/fit.json" <<'PY' || fail=1
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
bad = []
for k in sorted(set(a) | set(b)):
    x, y = a.get(k), b.get(k)
    if isinstance(x, (int, float)) and isinstance(y, (int, float)):
        if abs(x - y) > 1e-6 * max(abs(x), abs(y), 1e-12):
            bad.append(f"{k}: shipped {x!r}, refit {y!r}")
    elif x != y:
        bad.append(f"{k}: shipped {x!r}, refit {y!r}")
for line in bad:
    print("FAIL: serving-calib.json differs from the refit:", line)
sys.exit(1 if bad else 0)
PY

# the compiled-in default is the file
args=(llama-3-8b --mode serve --cluster dgx-h100-x1 --isl 512 --osl 128 --qps 4 --requests 200 --json)
"$LOOM" eval "${args[@]}" >"$tmp/default.json" 2>/dev/null || { echo "FAIL: eval (default)"; fail=1; }
"$LOOM" eval "${args[@]}" --serve-calib "$shipped" >"$tmp/file.json" 2>/dev/null ||
    { echo "FAIL: eval --serve-calib $shipped"; fail=1; }
python3 - "$tmp/default.json" "$tmp/file.json" <<'PY' || fail=1
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
keys = ["ttft_s", "tpot_s", "itl_s", "output_tokens_per_s"]
bad = [k for k in keys if a[k] != b[k]]
for k in bad:
    print(f"FAIL: {k}: default {a[k]} but with the shipped file {b[k]}")
sys.exit(1 if bad else 0)
PY
[ $fail = 0 ] && echo "serve_calib_shipped: ok"
exit $fail
