#!/usr/bin/env bash
# serve_plan.sh [BUILD_DIR] — planning time of `loom plan --mode serve`
# (issue 17's targets): Llama-3-70B on 8, 16, 32 and 64 H100 with
# disaggregation searched (under 2 s each), and DeepSeek-V3 (its FP8
# checkpoint, FP8 KV) on 32 H200 (under 10 s). Goodput under TTFT and TPOT
# bounds, which searches the rate by simulation for the best deployments
# of both kinds: the most expensive objective. Prints wall and CPU seconds
# (user + system) and what was chosen; exits 1 when a target is missed.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
loom="$build/loom"
[ -x "$loom" ] || { echo "serve_plan bench: $loom not found; build first" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail=0
run() {   # target_s label args...
  local target=$1 label=$2; shift 2
  /usr/bin/time -f "%e %U %S" -o "$out/t" "$loom" plan "$@" --mode serve --disagg auto >"$out/o" 2>"$out/e" ||
    { echo "serve_plan bench: $label failed: $(cat "$out/e")" >&2; fail=1; return; }
  read -r wall user sys <"$out/t"
  local cpu chosen
  cpu=$(echo "$user + $sys" | bc -l)
  chosen=$(sed -n 's/^  chosen      //p' "$out/o")
  printf "%-44s wall %5.2f s  cpu %5.2f s  (target < %s s)  %s\n" "$label" "$wall" "$cpu" "$target" "$chosen"
  if [ "$(echo "$cpu >= $target" | bc -l)" = 1 ]; then fail=1; fi
}
W=(--isl 2048 --osl 256 --ttft 1 --tpot 0.04)
for n in 1 2 4 8; do
  run 2 "llama-3-70b, $((8 * n)) H100, goodput" llama-3-70b --cluster "dgx-h100-x$n" "${W[@]}"
done
run 2 "llama-3.1-70b, 64 H100, ISL 8192 goodput" llama-3.1-70b --cluster dgx-h100-x8 \
  --isl 8192 --osl 256 --ttft 3 --tpot 0.03
run 2 "llama-3-70b, 64 H100, gpus for 40 req/s" llama-3-70b --cluster dgx-h100-x8 \
  --isl 2000 --osl 200 --qps 40 --ttft 1 --tpot 0.05
run 10 "deepseek-v3 fp8, 32 H200, goodput" deepseek-v3 --cluster dgx-h200-x4 --kv-dtype fp8 \
  --isl 4096 --osl 1024 --ttft 2 --tpot 0.05
run 10 "deepseek-v3 fp8, 32 H200, 256 clients" deepseek-v3 --cluster dgx-h200-x4 --kv-dtype fp8 \
  --isl 1000 --osl 1000 --concurrency 256
exit $fail
