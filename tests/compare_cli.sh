#!/bin/bash
# compare_cli.sh — `loom compare` and `loom compare-merge` end to end:
#   - identical input and seed give byte-identical md, csv and json (--no-timings);
#   - shards merged (compare-merge, and compare --merge) equal the unsharded run,
#     byte for byte, in every format; incomplete, overlapping or mismatched
#     shards are refused;
#   - the JSON report holds one result per algorithm and case, the best plan of
#     a case has gap 0, and grid's plan is never worse than those of the
#     algorithms searching subsets of its space (checked with python3);
#   - bad suites exit 1 naming the file and the JSON path, usage errors exit 2,
#     and no output file is written on failure.
#
# usage: bash tests/compare_cli.sh path/to/loom   (run from the repo root)
set -u
LOOM=${1:?usage: compare_cli.sh path/to/loom}
fails=0
passes=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# expect CODE NEEDLE... -- ARGS...: runs `loom ARGS`, wants exit CODE, every
# NEEDLE in stderr, nothing on stdout when CODE != 0, and no $tmp/never file.
expect() {
    local code=$1; shift
    local needles=()
    while [ "$1" != "--" ]; do needles+=("$1"); shift; done
    shift
    "$LOOM" "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    if [ $rc -ne "$code" ]; then bad "loom $*: exit $rc, want $code ($(head -c 300 "$tmp/err"))"; return; fi
    if [ "$code" -ne 0 ] && [ -s "$tmp/out" ]; then bad "loom $*: wrote to stdout on failure"; fi
    if [ -e "$tmp/never" ]; then bad "loom $*: wrote an output file on failure"; rm -f "$tmp/never"; fi
    local err
    err=$(<"$tmp/err")
    for n in "${needles[@]}"; do
        if [[ "$err" == *"$n"* ]]; then ok; else bad "loom $*: stderr lacks '$n': $err"; fi
    done
    [ ${#needles[@]} -eq 0 ] && ok
}

same() {   # same FILE1 FILE2 WHAT
    if cmp -s "$1" "$2"; then ok; else bad "$3: $1 and $2 differ"; diff "$1" "$2" | head -5 >&2; fi
}

S=tests/compare/small.json
FAST=alpa-megatron,grid,genetic,random,rules,pp-only

# ---- determinism: two runs, every format ------------------------------------------------
for fmt in json md csv; do
    expect 0 -- compare --suite $S --algos $FAST --no-timings --format $fmt -o "$tmp/a.$fmt"
    LOOM_DETERMINISTIC=1 "$LOOM" compare --suite $S --algos $FAST --format $fmt -o "$tmp/b.$fmt" 2>/dev/null
    same "$tmp/a.$fmt" "$tmp/b.$fmt" "rerun ($fmt)"
done

# ---- under load: the budget counts work, not time, so two CPU hogs beside the
# run change nothing (issue 19: byte-identical with and without them)
hogs=()
for i in 1 2; do ( while :; do :; done ) & hogs+=($!); done
"$LOOM" compare --suite $S --algos alpa,$FAST --no-timings --format md -o "$tmp/busy.md" 2>/dev/null
kill "${hogs[@]}" 2>/dev/null; wait "${hogs[@]}" 2>/dev/null
"$LOOM" compare --suite $S --algos alpa,$FAST --no-timings --format md -o "$tmp/quiet.md" 2>/dev/null
same "$tmp/busy.md" "$tmp/quiet.md" "compare beside two CPU hogs"

# ---- shards and merge -----------------------------------------------------------------------
for k in 0 1; do
    expect 0 -- compare --suite $S --algos $FAST --no-timings --shard $k/2 --format json -o "$tmp/s$k.json"
done
for fmt in json md csv; do
    expect 0 -- compare-merge "$tmp/s1.json" "$tmp/s0.json" --format $fmt -o "$tmp/m.$fmt"
    same "$tmp/a.$fmt" "$tmp/m.$fmt" "merge ($fmt)"
done
expect 0 -- compare --merge "$tmp/s0.json" "$tmp/s1.json" --format md -o "$tmp/m2.md"
same "$tmp/a.md" "$tmp/m2.md" "compare --merge"
# one shard of three holds case 0 only (cases 0, 1, 2: 0 mod 3 = 0)
expect 0 -- compare --suite $S --algos grid --no-timings --shard 0/3 --format json -o "$tmp/t0.json"
python3 - "$tmp/t0.json" <<'EOF' && ok || bad "shard 0/3 should hold case 0 only"
import json, sys
r = json.load(open(sys.argv[1]))
assert [c["index"] for c in r["cases"]] == [0] and r["shard"] == "0/3", r["shard"]
EOF
expect 1 "missing case indices: 1" -- compare-merge "$tmp/s0.json" --format md -o "$tmp/never"
expect 1 "appears in more than one report" -- compare-merge "$tmp/s0.json" "$tmp/s0.json" "$tmp/s1.json" -o "$tmp/never"
expect 0 -- compare --suite $S --algos $FAST --no-timings --seed 2 --shard 1/2 --format json -o "$tmp/seed2.json"
expect 1 "are not shards of one run" -- compare-merge "$tmp/s0.json" "$tmp/seed2.json" -o "$tmp/never"
expect 1 "$S" "\$.format" "loom-compare/1" -- compare-merge $S -o "$tmp/never"
printf '{"format": "loom-compare/1", "suite": "x"' >"$tmp/cut.json"
expect 1 "$tmp/cut.json:1:" "malformed JSON" -- compare-merge "$tmp/cut.json" -o "$tmp/never"

# ---- what the report says -------------------------------------------------------------------
expect 0 -- compare --suite $S --no-timings --format json -o "$tmp/all.json" --svg "$tmp/all.svg"
python3 - "$tmp/all.json" <<'EOF' && ok || bad "report contents"
import json, math, sys
r = json.load(open(sys.argv[1]))
algos = r["algorithms"]
assert algos[:3] == ["alpa", "alpa-megatron", "grid"] and len(algos) == 8, algos
assert r["suite"] == "small" and r["suite_cases"] == 3 and len(r["cases"]) == 3
subset = ["genetic", "random", "rules", "pp-only"]   # searched inside grid's space
for c in r["cases"]:
    res = {x["algorithm"]: x for x in c["results"]}
    assert list(res) == algos
    fit = [x for x in c["results"] if x["status"] == "ok"]
    for x in c["results"]:
        assert x["status"] in ("ok", "no-fit", "over-bound", "none"), x["status"]
        assert x["search_time_s"] == 0                  # --no-timings
        assert (x["gap"] is None) == (x["status"] != "ok")
    if fit:
        best = min(x["score"] for x in fit)
        assert any(x["gap"] == 0 for x in fit)
        for x in fit:
            assert abs(x["gap"] - (x["score"] / best - 1)) < 1e-12
    g = res["grid"]
    for a in subset:
        if res[a]["status"] == "ok":
            assert g["status"] == "ok" and g["score"] <= res[a]["score"], (c["name"], a)
    assert g["evals"] == g["space"] > 0                 # exhaustive
# the MoE case does not fit on 8 GPUs: nobody may claim it does
moe = {x["algorithm"]: x for x in r["cases"][1]["results"]}
assert all(x["status"] in ("no-fit", "none") for x in moe.values())
assert all(x["memory_per_gpu_bytes"] > 80e9 for x in moe.values() if x["status"] == "no-fit")
EOF
if head -c 5 "$tmp/all.svg" | grep -q '<svg' && grep -q '</svg>' "$tmp/all.svg"; then ok; else bad "svg"; fi
expect 0 -- compare-merge "$tmp/all.json" --format csv -o "$tmp/all.csv"
if [ "$(wc -l <"$tmp/all.csv")" -eq 25 ]; then ok; else bad "csv: want 1 + 3 x 8 lines, got $(wc -l <"$tmp/all.csv")"; fi

# ---- bad suites: exit 1, file and JSON path named, nothing written ---------------------------
B=tests/compare
expect 1 "$B/bad_malformed.json:2:45:" "malformed JSON" -- compare --suite $B/bad_malformed.json -o "$tmp/never"
expect 1 "$B/bad_format.json" '$.format' 'expected "loom-suite/1"' -- compare --suite $B/bad_format.json -o "$tmp/never"
expect 1 "$B/bad_unknown_key.json" '$.cases[0]' 'unknown field "batch"' -- compare --suite $B/bad_unknown_key.json -o "$tmp/never"
expect 1 "$B/bad_duplicate_name.json" '$.cases[1].name' 'also the name of $.cases[0]' -- compare --suite $B/bad_duplicate_name.json -o "$tmp/never"
expect 1 "$B/bad_missing_model.json" '$.cases[0].model' "no-such-model" -- compare --suite $B/bad_missing_model.json -o "$tmp/never"
expect 1 "$B/bad_cluster.json" '$.cases[0].cluster' "my-cluster.json" -- compare --suite $B/bad_cluster.json -o "$tmp/never"
expect 1 "$B/bad_objective.json" '$.cases[0].objective' "latency or throughput" -- compare --suite $B/bad_objective.json -o "$tmp/never"
expect 1 "$B/bad_gbs.json" '$.cases[0].gbs' "found 0" -- compare --suite $B/bad_gbs.json -o "$tmp/never"
expect 1 "$B/bad_empty.json" '$.cases' "at least one case" -- compare --suite $B/bad_empty.json -o "$tmp/never"
expect 1 "no-such-suite.json" -- compare --suite no-such-suite.json -o "$tmp/never"

# ---- usage errors: exit 2 ---------------------------------------------------------------------
expect 2 "missing --suite" -- compare
expect 2 "unknown algorithm 'annealing'" "grid" -- compare --suite $S --algos grid,annealing
expect 2 "'grid' is listed twice" -- compare --suite $S --algos grid,grid
expect 2 "--shard expects K/N" -- compare --suite $S --shard 2/2
expect 2 "--format expects md, csv or json" -- compare --suite $S --format html
expect 2 "--evals" -- compare --suite $S --evals 0
expect 2 "nothing to merge" -- compare-merge
expect 2 "unknown option '--seed'" -- compare-merge "$tmp/s0.json" --seed 3
expect 0 -- compare --help
if grep -q -- "--shard K/N" "$tmp/out"; then ok; else bad "compare --help lacks --shard"; fi

echo "compare_cli: $passes passed, $fails failed"
[ $fails -eq 0 ]
