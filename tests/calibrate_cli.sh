#!/bin/bash
# calibrate_cli.sh — `loom calibrate` end to end: usage errors exit 2; bad
# records exit 1 naming the file and JSON path, print nothing on stdout and
# leave no output file; a fit writes a loom-calib/1 file that `loom eval
# --calib` accepts and that is byte-identical on a second run; --evaluate
# --json prints every record with predicted and measured times.
#
# usage: bash tests/calibrate_cli.sh path/to/loom   (run from the repo root)
set -u
LOOM=${1:?usage: calibrate_cli.sh path/to/loom}
RUNS=examples/calibration/published-runs.json
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

source tests/lib/cli_expect.bash
NEVER=$tmp/never.json   # no failure may leave the -o file

expect_fail calibrate 2 -- "missing RECORDS.json"
expect_fail calibrate 2 $RUNS --frob -- "unknown option '--frob'"
expect_fail calibrate 2 $RUNS -o "$tmp/never.json" -- "runs on several GPUs" "--gpu"
expect_fail calibrate 2 $RUNS --gpu Z100 -o "$tmp/never.json" -- "unknown GPU 'Z100'"
expect_fail calibrate 2 $RUNS --evaluate -o "$tmp/never.json" -- "-o and --gpu do not apply"
expect_fail calibrate 2 $RUNS --gpu H100 --json -- "--calib and --json go with --evaluate"
expect_fail calibrate 1 "$tmp/none.json" -o "$tmp/never.json" -- "$tmp/none.json"
echo '{"records": [{"gpu": "H100", "layers": 4}]}' >"$tmp/short.json"
expect_fail calibrate 1 "$tmp/short.json" -o "$tmp/never.json" -- "$tmp/short.json" '$.records[0]' "hidden"
echo '{"records": [{"gpu": "H100", "layers": 4, "hidden": 256, "heads": 8, "seq_len": 128,
  "vocab": 1024, "global_batch": 8, "num_gpus": 8, "tp": 1, "pp": 1, "dp": 8,
  "recompute": "sometimes", "iteration_time_s": 0.01}]}' >"$tmp/rc.json"
expect_fail calibrate 1 "$tmp/rc.json" -o "$tmp/never.json" -- '$.records[0].recompute' '"sometimes"'
# a GPU loom knows but has no DGX preset to build the run's cluster from (found by fuzzing)
sed 's/"recompute": "sometimes", //; s/"gpu": "H100"/"gpu": "H800-SXM5-80GB"/' "$tmp/rc.json" >"$tmp/h800.json"
expect_fail calibrate 1 "$tmp/h800.json" -o "$tmp/never.json" -- '$.records[0].gpu' "no DGX preset" "H100-SXM5-80GB"
expect_fail calibrate 1 $RUNS --gpu V100 -o "$tmp/never.json" -- "no record was measured on V100"
expect_fail calibrate 1 $RUNS --evaluate --calib "$tmp/none.json" -- "$tmp/none.json"

# A fit: a loom-calib/1 file, deterministic, accepted by eval.
if "$LOOM" calibrate $RUNS --gpu A100-80GB -o "$tmp/a.json" 2>"$tmp/err"; then ok
else bad "fit: $(cat "$tmp/err")"; fi
grep -q "fitted A100-SXM4-80GB to 8 runs" "$tmp/err" && ok || bad "fit summary: $(cat "$tmp/err")"
"$LOOM" calibrate $RUNS --gpu A100-80GB >"$tmp/b.json" 2>/dev/null   # to stdout
cmp -s "$tmp/a.json" "$tmp/b.json" && ok || bad "fit output differs between runs"
python3 - "$tmp/a.json" <<'EOF' && ok || bad "calib file fields"
import json, sys
c = json.load(open(sys.argv[1]))
assert c["format"] == "loom-calib/1" and c["device"] == "A100-SXM4-80GB", c
for k in ["gemm_eff_max", "mem_eff", "attn_eff", "intra_link_eff", "grad_sync_overlap"]:
    assert 0 <= c[k] <= 1, (k, c[k])
EOF
"$LOOM" eval gpt3-175b --cluster dgx-a100-80g-x8 --tp 8 --pp 8 --gbs 64 --sp --vpp 3 \
    --recompute selective --unfused-attention --calib "$tmp/a.json" --json >"$tmp/e.json" 2>"$tmp/err" \
    && ok || bad "eval --calib: $(cat "$tmp/err")"

# --evaluate --json: every record, relations
"$LOOM" calibrate $RUNS --evaluate --json >"$tmp/ev.json" 2>"$tmp/err" || bad "evaluate: $(cat "$tmp/err")"
python3 - "$tmp/ev.json" <<'EOF' && ok || bad "evaluate json"
import json, statistics, sys
r = json.load(open(sys.argv[1]))
recs = r["records"]
assert len(recs) == 17
errs = [abs(x["predicted_s"] / x["measured_s"] - 1) for x in recs]
for x in recs:
    assert abs(x["error"] - (x["predicted_s"] / x["measured_s"] - 1)) < 1e-12
assert abs(statistics.median(errs) - r["median_abs_error"]) < 1e-12
assert abs(max(errs) - r["max_abs_error"]) < 1e-12
assert r["median_abs_error"] <= 0.10
EOF

echo "calibrate_cli: $passes passed, $fails failed"
[ $fails -eq 0 ]
