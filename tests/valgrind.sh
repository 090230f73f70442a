#!/usr/bin/env bash
# valgrind.sh — `loom plan`'s example runs clean under valgrind memcheck: no
# invalid reads or writes, no uses of uninitialised values, no leaks
# (definite, indirect or possible; memory still reachable at exit from
# library globals is not a leak). Error paths leak easily, so one bad input
# per reader is run too (the first sidecar case of each prefix in
# tests/bad_input/, see bad_input.sh), plus `loom inspect`, a plan with
# --svg/--json/requests output and two serving plans (--mode serve).
#
# Skips (77) without valgrind, and for a binary built with AddressSanitizer
# (the sanitizer build checks leaks with LeakSanitizer instead).
#
# usage: bash tests/valgrind.sh path/to/loom   (from the repo root)
set -u
LOOM=$(realpath "${1:?usage: valgrind.sh path/to/loom}")
command -v valgrind >/dev/null || { echo "valgrind not installed: skipped"; exit 77; }
if grep -q "__asan_init" "$LOOM" 2>/dev/null; then
    echo "$LOOM is built with AddressSanitizer: skipped (LeakSanitizer checks it)"
    exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source tests/lib/cli.sh
VG=(valgrind -q --error-exitcode=99 --leak-check=full
    --show-leak-kinds=definite,indirect,possible
    --errors-for-leak-kinds=definite,indirect,possible)

# memcheck WANT ARGS...: loom ARGS under memcheck must exit WANT with no
# memcheck error (which would make it exit 99).
memcheck() {
    local want=$1; shift
    (cd "$tmp" && "${VG[@]}" "$LOOM" "$@" >"$tmp/out" 2>"$tmp/err")
    local rc=$?
    if [ $rc -eq 99 ]; then
        bad "memcheck errors in loom $*:"
        grep '^==' "$tmp/err" | head -40 >&2
    elif [ $rc -ne "$want" ]; then
        bad "loom $* under valgrind: exit $rc, want $want: $(head -c 300 "$tmp/err")"
    else
        ok
    fi
}

start=$(date +%s)
memcheck 0 plan -o "$tmp/plan.json"                     # the README example (make run)
memcheck 0 plan gpt2 --cluster dgx-h100-x1 --gbs 16 --seq 1024 --svg "$tmp/p.svg" --json \
    --emit-profile-requests "$tmp/req.json"
memcheck 0 inspect mixtral-8x7b --json
# an NVLink domain of 24 GPUs: both layouts (its 16-GPU tile), the cost
# model's view borrowing the profile db, the plans quoted on the nvlink lines
echo '{ "format": "loom-cluster/1", "name": "h100-24", "nodes": 2, "gpus_per_node": 24,
  "gpu": "H100", "inter_node": { "bandwidth_GBps": 50 } }' >"$tmp/h24.json"
memcheck 0 plan llama-3-8b --cluster "$tmp/h24.json" --gbs 64 -o "$tmp/h24.plan.json" \
    --profile "$PWD/examples/profiles/h100-llama3-seq4096.json"
# the serving planner: both kinds simulated, -o; and a plan nothing meets
memcheck 0 plan llama-3-8b --cluster dgx-h100-x1 --mode serve --isl 512 --osl 128 --ttft 0.5 \
    --tpot 0.02 -o "$tmp/serve.plan.json"
memcheck 3 plan llama-3-8b --cluster dgx-h100-x1 --mode serve --isl 512 --osl 128 --tpot 0.001

# One bad input per reader (file prefix), from the bad-input corpus.
declare -A seen
for e in tests/bad_input/*.expect; do
    name=$(basename "$e" .expect)
    prefix=${name%%_*}
    [ -n "${seen[$prefix]:-}" ] && continue
    run=$(sed -n 's/^run: *//p' "$e")
    code=$(sed -n 's/^exit: *//p' "$e")
    cmd=${run%% *}
    "$LOOM" --help 2>&1 | grep -q "^  $cmd " || continue
    seen[$prefix]=1
    run=${run//FILE/$PWD/tests/bad_input/$name}
    run=${run//OUT/$tmp/out.result}
    read -r -a args <<<"$run"
    memcheck "${code:-1}" "${args[@]}"
done
echo "valgrind: $(($(date +%s) - start)) s, readers with a bad input checked: ${!seen[*]}"
finish valgrind
