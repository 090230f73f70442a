#!/bin/bash
# serve_plan.sh — `loom plan --mode serve` end to end, with issue 17's
# must-shows checked against `loom eval --mode serve` run independently:
#   (a) Llama-3-70B on 8 H100 at 64 concurrent clients: the plan's output
#       tokens/s is within 5% of the best tp × pp × dp = 8 deployment found by
#       evaluating every one of them (brute force below); the same for 8B,
#       Mixtral, DeepSeek-V3 FP8 on 8 H200 and Llama-3.1-405B FP8 on 16 H100;
#   (b) disaggregation is chosen for ISL 8192 / OSL 256 / TPOT ≤ 30 ms and
#       not for ISL 128 / OSL 512 (both plans' figures printed);
#   (c) capacity planning, Llama-3-70B at 20 requests/s, ISL 2000, OSL 200,
#       TTFT ≤ 1 s, TPOT ≤ 50 ms: the deployment's simulated attainment is
#       ≥ 90%; the aggregated answer is re-simulated by loom eval and is the
#       fewest GPUs a brute force over shapes and replicas finds.
# Also: usage errors exit 2 and infeasible requests 3, naming the cause,
# with nothing on stdout; -o/--json are byte-identical across runs; the
# plan JSON has the documented serving members; a reduction of the asked
# concurrency is said on stderr.
#
# usage: bash tests/serve_plan.sh path/to/loom   (run from the repo root)
set -u
LOOM=${1:?usage: serve_plan.sh path/to/loom}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source tests/lib/cli_expect.bash

S=(--mode serve)
# ---- usage errors and infeasible requests ----
expect_fail plan 2 llama-3-8b --cluster dgx-h100-x1 "${S[@]}" --osl 128 -- "needs --isl and --osl"
expect_fail plan 2 llama-3-8b --cluster dgx-h100-x1 "${S[@]}" --isl 512 --osl 128 --qps 2 --concurrency 4 -- "at most one load"
expect_fail plan 2 llama-3-8b --cluster dgx-h100-x1 "${S[@]}" --isl 512 --osl 128 --objective fast -- "--objective expects goodput, throughput, latency or gpus"
expect_fail plan 2 llama-3-8b --cluster dgx-h100-x1 "${S[@]}" --isl 512 --osl 128 --disagg maybe -- "--disagg expects auto, on or off"
expect_fail plan 2 llama-3-8b --cluster dgx-h100-x1 "${S[@]}" --isl 512 --osl 128 --max-mbs 8 -- "unknown option '--max-mbs'"
expect_fail plan 1 llama-3-8b --cluster dgx-h100-x1 "${S[@]}" --isl 512 --osl 128 -- "--objective goodput counts the requests" "--ttft"
expect_fail plan 1 llama-3-8b --cluster dgx-h100-x1 "${S[@]}" --isl 512 --osl 128 --concurrency 8 --objective gpus -- "give --qps R"
expect_fail plan 1 llama-3-8b --cluster dgx-h100-x1 "${S[@]}" --isl 8000 --osl 1000 --concurrency 8 -- "--isl 8000 + --osl 1000" "8192"
expect_fail plan 3 llama-3.1-405b --cluster dgx-h100-x1 "${S[@]}" --isl 512 --osl 128 --concurrency 8 -- "no instance of llama-3.1-405b fits dgx-h100-x1"
expect_fail plan 3 llama-3-8b --cluster dgx-h100-x1 "${S[@]}" --isl 512 --osl 128 --tpot 0.001 -- "no deployment on dgx-h100-x1 meets TPOT ≤ 1 ms"
expect_fail plan 3 llama-3-70b --cluster dgx-h100-x1 "${S[@]}" --isl 2000 --osl 200 --qps 200 --ttft 1 --tpot 0.05 -- "no deployment on dgx-h100-x1 (8 GPUs) serves 200 requests/s"

py() { python3 - "$@"; }

# ---- (a) 64 concurrent clients: the plan against a brute force over loom eval ----
# brute MODEL CLUSTER GPUS [eval/plan options]: every tp × pp × dp (and, for
# MoE, ep = tp·dp) deployment of GPUS evaluated by loom eval; the plan with
# --disagg off (and with auto) must reach 95% of the best output tokens/s.
# --client users: the plan's default, given to loom eval too, whose
# default (python) reproduces vllm bench serve
A=(--isl 1024 --osl 256 --concurrency 64 --client users)
brute() {
    local m=$1 c=$2 n=$3; shift 3
    local d="$tmp/bf_$m"; mkdir -p "$d"
    for tp in 1 2 4 8; do for pp in 1 2 4 8 16; do
        local dp=$((n / tp / pp)); [ "$dp" -ge 1 ] && [ $((tp * pp * dp)) -eq "$n" ] || continue
        for ep in 1 $((tp * dp)); do
            "$LOOM" eval "$m" --cluster "$c" --mode serve "${A[@]}" --tp $tp --pp $pp --dp $dp --ep $ep "$@" \
                --json >"$d/tp$tp.pp$pp.dp$dp.ep$ep.json" 2>/dev/null || rm -f "$d/tp$tp.pp$pp.dp$dp.ep$ep.json"
            [ $((tp * dp)) -gt 1 ] || break
        done
    done; done
    for mode in off auto; do
        "$LOOM" plan "$m" --cluster "$c" "${S[@]}" "${A[@]}" "$@" --disagg $mode --json >"$d/plan_$mode.json" 2>"$tmp/err" ||
            bad "(a) $m plan --disagg $mode: $(cat "$tmp/err")"
    done
    py "$d" "$m" "$n" <<'PY' && ok || bad "(a) $m: the plan is not within 5% of the brute force"
import glob, json, os, sys
d, m, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
runs = {os.path.basename(f)[:-5]: json.load(open(f))["output_tokens_per_s"]
        for f in glob.glob(d + "/tp*.json")}
cfg, best = max(runs.items(), key=lambda kv: kv[1])
for mode in ["off", "auto"]:
    o = json.load(open("%s/plan_%s.json" % (d, mode)))["serving"]
    dep, p = o["deployment"], o["predicted"]
    print("(a) %-15s brute force best %-20s %6.0f tok/s (%d runs); plan --disagg %-4s %s %s: %6.0f tok/s (%.1f%%)"
          % (m, cfg, best, len(runs), mode, dep["kind"],
             [(x["role"], x["instances"], x["tp"], x["pp"], x["ep"], x["attention_dp"]) for x in dep["pools"]],
             p["output_tokens_per_s"], 100 * p["output_tokens_per_s"] / best))
    assert p["source"] == "simulator" and dep["gpus"] <= n
    assert p["output_tokens_per_s"] >= 0.95 * best
PY
}
brute llama-3-70b dgx-h100-x1 8
brute llama-3-8b dgx-h100-x1 8
brute mixtral-8x7b dgx-h100-x1 8
brute deepseek-v3 dgx-h200-x1 8 --weights fp8
brute llama-3.1-405b dgx-h100-x2 16 --weights fp8
# the aggregated plan's figures are loom eval's for the same deployment
# (with the engine settings the plan chose: its prefill chunk and sequence cap)
read -r tp pp dp mbt mns < <(py "$tmp/bf_llama-3-70b/plan_off.json" <<'PY'
import json, sys
x = json.load(open(sys.argv[1]))["serving"]["deployment"]["pools"][0]
print(x["tp"], x["pp"], x["instances"], x["engine"]["max_batched_tokens"], x["engine"]["max_num_seqs"])
PY
)
"$LOOM" eval llama-3-70b --cluster dgx-h100-x1 --mode serve "${A[@]}" --tp "$tp" --pp "$pp" --dp "$dp" \
    --max-batched-tokens "$mbt" --max-num-seqs "$mns" --json >"$tmp/e.json" 2>/dev/null
py "$tmp/bf_llama-3-70b/plan_off.json" "$tmp/e.json" <<'PY' && ok || bad "(a) plan and loom eval differ for the same deployment"
import json, sys
p = json.load(open(sys.argv[1]))["serving"]["predicted"]
e = json.load(open(sys.argv[2]))
assert abs(p["output_tokens_per_s"] - e["output_tokens_per_s"]) <= 1e-6 * e["output_tokens_per_s"], (p, e)
assert abs(p["ttft_s"]["p99"] - e["ttft_p99_s"]) <= 1e-6 * e["ttft_p99_s"]
PY

# ---- (b) disaggregation where the physics favours it, and not elsewhere ----
for slo in "--tpot 0.03" "--tpot 0.03 --ttft 3"; do
    for w in "8192 256 disaggregated" "128 512 aggregated"; do
        set -- $w
        # shellcheck disable=SC2086
        "$LOOM" plan llama-3.1-70b --cluster dgx-h100-x2 "${S[@]}" --isl $1 --osl $2 $slo --json >"$tmp/b.json" 2>"$tmp/err"
        if [ $? -ne 0 ]; then bad "(b) ISL $1 OSL $2 $slo: $(cat "$tmp/err")"; continue; fi
        py "$tmp/b.json" "$3" "$1/$2 $slo" <<'PY' && ok || bad "(b) ISL/OSL $1/$2 $slo: want $3"
import json, sys
o = json.load(open(sys.argv[1]))["serving"]
want, what = sys.argv[2], sys.argv[3]
d, p = o["deployment"], o["predicted"]
alt = [c for c in o["compared"] if c["deployment"]["kind"] != d["kind"]]
a = alt[0]["predicted"] if alt else None
print("(b) %-22s -> %-13s %5.2f req/s/GPU, TTFT p99 %5.0f ms, TPOT p99 %4.1f ms, %4.1f%% in SLO;"
      " best %s: %s" % (what, d["kind"], p["requests_per_s"] / d["gpus"], p["ttft_s"]["p99"] * 1e3,
                        p["tpot_s"]["p99"] * 1e3, 100 * p["slo_attainment"],
                        alt[0]["deployment"]["kind"] if alt else "-",
                        "%.2f req/s/GPU" % (a["requests_per_s"] / alt[0]["deployment"]["gpus"]) if a else "-"))
assert d["kind"] == want, d["kind"]
assert p["slo_attainment"] >= 0.9
if want == "disaggregated":
    assert [x["role"] for x in d["pools"]] == ["prefill", "decode"]
    assert d["kv_transfer"]["bytes_per_request"] == 8192 * 327680
PY
    done
done

# ---- (c) capacity planning: 20 requests/s within TTFT ≤ 1 s, TPOT ≤ 50 ms ----
C=(--cluster dgx-h100-x4 --isl 2000 --osl 200 --qps 20 --ttft 1 --tpot 0.05 --client parallel)
"$LOOM" plan llama-3-70b "${S[@]}" "${C[@]}" --json >"$tmp/c.json" 2>"$tmp/err" || bad "(c) plan: $(cat "$tmp/err")"
py "$tmp/c.json" <<'PY' && ok || bad "(c) capacity plan misses 90%"
import json, sys
o = json.load(open(sys.argv[1]))["serving"]
d, p = o["deployment"], o["predicted"]
print("(c) %s on %d GPUs: %.1f%% of requests within the SLOs at %g requests/s (TTFT p90 %.0f ms, TPOT p90 %.1f ms)"
      % (d["kind"], d["gpus"], 100 * p["slo_attainment"], p["requests_per_s"], p["ttft_s"]["p90"] * 1e3,
         p["tpot_s"]["p90"] * 1e3))
assert o["workload"]["rate"] == 20 and p["requests_per_s"] == 20
assert p["slo_attainment"] >= 0.9 and d["gpus"] <= 32
PY
"$LOOM" plan llama-3-70b "${S[@]}" "${C[@]}" --disagg off --json >"$tmp/c_off.json" 2>"$tmp/err" || bad "(c) plan --disagg off: $(cat "$tmp/err")"
read -r tp pp dp gpus att mbt mns < <(py "$tmp/c_off.json" <<'PY'
import json, sys
o = json.load(open(sys.argv[1]))["serving"]
x = o["deployment"]["pools"][0]
print(x["tp"], x["pp"], x["instances"], o["deployment"]["gpus"], o["predicted"]["slo_attainment"],
      x["engine"]["max_batched_tokens"], x["engine"]["max_num_seqs"])
PY
)
"$LOOM" eval llama-3-70b --mode serve "${C[@]}" --tp "$tp" --pp "$pp" --dp "$dp" \
    --max-batched-tokens "$mbt" --max-num-seqs "$mns" --json >"$tmp/e.json" 2>/dev/null
py "$tmp/e.json" "$att" <<'PY' && ok || bad "(c) loom eval of the aggregated answer misses 90%"
import json, sys
e = json.load(open(sys.argv[1]))
print("(c) loom eval --tp %d --pp %d --dp %d: %.1f%% within the SLOs" % (e["config"]["tp"], e["config"]["pp"], e["config"]["replicas"], 100 * e["slo_attainment"]))
assert e["slo_attainment"] >= 0.9 and abs(e["slo_attainment"] - float(sys.argv[2])) < 1e-9
PY
# brute force: the fewest GPUs of any tp × pp shape with replicas that loom eval finds within the SLOs
fewest=999
for tp in 2 4 8; do for pp in 1 2 4; do
    g=$((tp * pp))
    for r in $(seq 1 $((32 / g))); do
        [ $((r * g)) -lt $fewest ] || break
        "$LOOM" eval llama-3-70b --mode serve "${C[@]}" --tp $tp --pp $pp --dp $r --json >"$tmp/e.json" 2>/dev/null || continue
        if py "$tmp/e.json" <<'PY'
import json, sys; sys.exit(0 if json.load(open(sys.argv[1]))["slo_attainment"] >= 0.9 else 1)
PY
        then fewest=$((r * g)); break; fi
    done
done; done
echo "(c) brute force over loom eval: fewest aggregated GPUs $fewest; plan --disagg off: $gpus"
if [ "$gpus" -le "$fewest" ]; then ok; else bad "(c) the aggregated capacity plan uses $gpus GPUs, the brute force $fewest"; fi

# ---- JSON members, determinism, -o ----
J=(llama-3-8b --cluster dgx-h100-x1 "${S[@]}" --isl 512 --osl 128 --ttft 0.5 --tpot 0.02)
"$LOOM" plan "${J[@]}" --json >"$tmp/j1.json" 2>/dev/null
"$LOOM" plan "${J[@]}" --no-timings -o "$tmp/j2.json" >"$tmp/j2.txt" 2>/dev/null
LOOM_DETERMINISTIC=1 "$LOOM" plan "${J[@]}" --json >"$tmp/j3.json" 2>/dev/null
if cmp -s "$tmp/j2.json" "$tmp/j3.json"; then ok; else bad "serve plan JSON not deterministic"; fi
grep -q "plan        $tmp/j2.json" "$tmp/j2.txt" && ok || bad "-o not named in the text"
py "$tmp/j1.json" <<'PY' && ok || bad "serve plan JSON members"
import json, sys
o = json.load(open(sys.argv[1]))
assert o["format"] == "loom-plan/1" and o["inputs"]["mode"] == "serve"
s = o["serving"]
assert s["format"] == "loom-serving/1"
for k in ["engine", "weights", "kv_dtype", "workload", "slo", "disaggregation", "deployment",
          "predicted", "compared", "pareto"]:
    assert k in s, k
p = s["predicted"]
for k in ["ttft_s", "tpot_s", "e2e_s"]:
    assert p[k]["p50"] <= p[k]["p99"], k
for k in ["output_tokens_per_s_per_gpu", "output_tokens_per_s_per_user", "slo_attainment"]:
    assert p[k] > 0, k
pool = s["deployment"]["pools"][0]
assert pool["kv_capacity_tokens"] > 0 and pool["max_concurrency"] > 0
m = pool["memory_bytes"]
assert m["weights"] + m["kv_cache"] + m["activations"] + m["cuda_graphs"] + m["communication"] + m["cuda_context"] == m["total"]
for kind in ["aggregated", "disaggregated"]:
    f = s["pareto"][kind]
    assert f, kind
    for a, b in zip(f, f[1:]):   # falling tokens/s per user, rising per GPU
        assert b["tokens_per_s_per_user"] < a["tokens_per_s_per_user"]
        assert b["tokens_per_s_per_gpu"] > a["tokens_per_s_per_gpu"]
assert o["search"]["algorithm"] == "serve"
PY

# ---- the asked concurrency beyond what an instance runs at once: said on stderr ----
"$LOOM" plan llama-3-70b --cluster dgx-h100-x1 "${S[@]}" --isl 4096 --osl 1024 --concurrency 2000 --disagg off >"$tmp/out" 2>"$tmp/err"
grep -q "2000 clients over .* but an instance runs at most .* the other clients wait" "$tmp/err" && ok || bad "no stderr note on the reduced concurrency: $(cat "$tmp/err")"
# --mode infer still plans, and says what it is
"$LOOM" plan llama-3-8b --cluster dgx-h100-x1 --mode infer --gbs 8 --seq 1024 >/dev/null 2>"$tmp/err" && ok || bad "--mode infer"
grep -q "mode serve plans a serving deployment" "$tmp/err" && ok || bad "--mode infer note"

echo "serve_plan: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
