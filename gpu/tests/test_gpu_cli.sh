#!/usr/bin/env bash
# test_gpu_cli.sh — loom-profile's command line: usage errors (exit 2),
# --emit-requests and --roofline-check without a GPU, bad input named by file
# and JSON path with no db written (exit 1), and the no-device message (exit 1).
# With a GPU it profiles two small requests and resumes. Run from the repo
# root: bash gpu/tests/test_gpu_cli.sh path/to/loom-profile
set -u
P=${1:?usage: test_gpu_cli.sh path/to/loom-profile}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
expect_rc() { # expected command...
    local want=$1; shift
    "$@" >"$tmp/out" 2>"$tmp/err"; local rc=$?
    [ "$rc" -eq "$want" ] || fail "'$*' exited $rc, expected $want: $(cat "$tmp/err")"
}

# (Each start costs about a second: the loader maps libcublasLt. Keep the
# number of runs small.)
expect_rc 2 "$P" --bogus
grep -q "unknown option '--bogus'" "$tmp/err" || fail "unknown option not named"

# Requests from a model, no GPU needed (that the bytes are deterministic is
# test_profile_db's business).
expect_rc 0 "$P" --model llama-3-8b --seq 4096 --max-tp 8 --emit-requests "$tmp/req.json"
grep -q "54 profile requests" "$tmp/out" || fail "expected 54 requests: $(cat "$tmp/out")"
grep -q "loom-profile-requests/1" "$tmp/req.json" || fail "requests file lacks its format"

# Bad requests: the message names the file and the JSON path; nothing written.
printf '{"format": "loom-profile-requests/1", "requests": [{"op": "einsum", "sig": "ab,bc->ac", "dtype": "bf16", "shape": {"a": 0}}]}' >"$tmp/bad.json"
expect_rc 1 "$P" --requests "$tmp/bad.json" -o "$tmp/db.json"
grep -q "bad.json: \$.requests\[0\].shape.a: expected an integer in \[1," "$tmp/err" || fail "bad request not located: $(cat "$tmp/err")"
[ ! -e "$tmp/db.json" ] || fail "a db was written for bad input"

# Roofline vs a (hand-made) db: one measured rmsnorm key -> one norm row.
printf '{"format": "loom-profile/1", "device": "NVIDIA H100 80GB HBM3", "entries": [{"op": "norm", "sig": "rmsnorm", "dtype": "bf16", "shape": {"n": 4096, "d": 4096}, "fwd_ns": 40000, "bwd_ns": 90000}]}' >"$tmp/hand.json"
expect_rc 0 "$P" --roofline-check "$tmp/hand.json" --model llama-3-8b --seq 4096 --cluster dgx-h100-x1
grep -Eq "^  norm +1 " "$tmp/out" || fail "roofline check: $(cat "$tmp/out")"

cat >"$tmp/small.json" <<'JSON'
{"format": "loom-profile-requests/1", "requests": [
 {"op": "norm", "sig": "rmsnorm", "dtype": "bf16", "shape": {"n": 256, "d": 1024}},
 {"op": "einsum", "sig": "bsh,hf->bsf", "dtype": "bf16", "shape": {"b": 1, "s": 128, "h": 256, "f": 512}}]}
JSON
"$P" --requests "$tmp/small.json" -o "$tmp/db.json" --repeats 3 --warmup 1 >"$tmp/out" 2>"$tmp/err"
rc=$?
if grep -q "no CUDA device" "$tmp/err"; then
    # No GPU: the runtime's reason, exit 1, no db.
    [ "$rc" -eq 1 ] || fail "no-device run exited $rc"
    grep -q "^loom-profile: no CUDA device: ." "$tmp/err" || fail "no-device message: $(cat "$tmp/err")"
    [ ! -e "$tmp/db.json" ] || fail "a db was written without a device"
else
    [ "$rc" -eq 0 ] || fail "profile run exited $rc: $(cat "$tmp/err")"
    grep -Eq '"format":[[:space:]]*"loom-profile/1"' "$tmp/db.json" || fail "db lacks its format"
    grep -q "2 measured, 0 kept from before, 0 skipped; 2 entries" "$tmp/out" || fail "summary: $(cat "$tmp/out")"
    "$P" --requests "$tmp/small.json" -o "$tmp/db.json" --resume --repeats 3 >"$tmp/out" 2>&1 ||
        fail "resume failed: $(cat "$tmp/out")"
    grep -q "0 measured, 2 kept from before" "$tmp/out" || fail "resume re-measured: $(cat "$tmp/out")"
fi
[ "$fails" -eq 0 ] && echo "all loom-profile CLI checks passed"
exit $((fails > 0))
