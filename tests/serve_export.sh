#!/bin/bash
# serve_export.sh — `loom export` of serving plans (loom plan --mode serve):
# vLLM YAML and SGLang launch scripts for aggregated pools and for each pool
# of a disaggregated plan. Every emitted vLLM key is one of vLLM's option
# names and every SGLang flag one of ServerArgs' (the lists below were read
# off vllm/engine/arg_utils.py at 99d7eb5d and python/sglang/srt/server_args.py
# at 001067ff, independently of the renderers); the degrees are the plan's;
# the YAML parses; the SGLang script passes bash -n and, run against a
# stand-in python3, hands launch_server exactly the flags it lists; usage
# errors exit 2 with nothing written.
#
# usage: bash tests/serve_export.sh path/to/loom   (run from the repo root)
set -u
LOOM=${1:?usage: serve_export.sh path/to/loom}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source tests/lib/cli_expect.bash

# the option names the exporters may use, from the engines' sources
VLLM_KEYS="tensor-parallel-size pipeline-parallel-size data-parallel-size enable-expert-parallel
distributed-executor-backend max-model-len max-num-seqs max-num-batched-tokens block-size
gpu-memory-utilization kv-cache-dtype quantization kv-transfer-config"
SGLANG_FLAGS="--model-path --port --tp-size --pp-size --dp-size --enable-dp-attention --ep-size
--context-length --mem-fraction-static --max-running-requests --chunked-prefill-size --page-size
--kv-cache-dtype --quantization --disaggregation-mode --disaggregation-transfer-backend --nnodes
--node-rank --dist-init-addr"

S=(--mode serve)
"$LOOM" plan llama-3.1-70b --cluster dgx-h100-x2 "${S[@]}" --isl 8192 --osl 256 --ttft 3 --tpot 0.03 -o "$tmp/pd.json" >/dev/null 2>&1 || bad "plan pd"
"$LOOM" plan llama-3-70b --cluster dgx-h100-x1 "${S[@]}" --isl 1024 --osl 256 --concurrency 64 --disagg off -o "$tmp/agg.json" >/dev/null 2>&1 || bad "plan agg"
"$LOOM" plan deepseek-v3 --cluster dgx-h200-x1 "${S[@]}" --isl 1000 --osl 1000 --concurrency 64 --disagg off --engine sglang --kv-dtype fp8 -o "$tmp/moe.json" >/dev/null 2>&1 || bad "plan moe"

# stand-in python3: prints the arguments launch_server would get, one a line
mkdir -p "$tmp/bin"
printf '#!/bin/bash\nfor a in "$@"; do printf "%%s\\n" "$a"; done\n' >"$tmp/bin/python3"
chmod +x "$tmp/bin/python3"

# check PLAN POOL: both engines, every key/flag known, degrees from the plan
check() {
    local plan=$1 pool=$2 popt=()
    [ "$pool" = both ] || popt=(--pool "$pool")
    "$LOOM" export "$plan" --to vllm "${popt[@]}" -o "$tmp/v.yaml" 2>"$tmp/err" || { bad "vllm $plan $pool: $(cat "$tmp/err")"; return; }
    "$LOOM" export "$plan" --to sglang "${popt[@]}" -o "$tmp/s.sh" 2>"$tmp/err" || { bad "sglang $plan $pool: $(cat "$tmp/err")"; return; }
    bash -n "$tmp/s.sh" && ok || bad "sglang script syntax ($plan $pool)"
    PATH="$tmp/bin:$PATH" MODEL=org/model PORT=31000 NODE_RANK=0 DIST_INIT_ADDR=h:5000 bash "$tmp/s.sh" >"$tmp/argv" 2>&1 ||
        bad "sglang script run ($plan $pool): $(cat "$tmp/argv")"
    python3 - "$plan" "$pool" "$tmp/v.yaml" "$tmp/argv" "$VLLM_KEYS" "$SGLANG_FLAGS" <<'PY' && ok || bad "export $plan $pool"
import json, sys, yaml
plan, pool, vy, argv, vkeys, sflags = sys.argv[1:]
o = json.load(open(plan))["serving"]
p = [x for x in o["deployment"]["pools"] if x["role"] == pool][0]
moe = json.load(open(plan))["model"]["experts"] > 0
pd = pool != "both"
v = yaml.safe_load(open(vy))
assert set(v) <= set(vkeys.split()), set(v) - set(vkeys.split())
assert v["tensor-parallel-size"] == p["tp"] and v["pipeline-parallel-size"] == p["pp"]
assert v["data-parallel-size"] == (p["attention_dp"] if moe or pd else p["instances"])
assert v.get("enable-expert-parallel", False) == (p["ep"] > 1)
assert v["max-model-len"] == o["workload"]["max_tokens"]
if pd:
    kv = json.loads(v["kv-transfer-config"])
    assert kv == {"kv_connector": "NixlConnector", "kv_role": "kv_both"}, kv
else:
    assert "kv-transfer-config" not in v
if o["engine"] == "vllm":
    assert v["max-num-seqs"] == p["engine"]["max_num_seqs"] and v["gpu-memory-utilization"] == p["engine"]["mem_fraction"]
else:
    assert "max-num-seqs" not in v and "gpu-memory-utilization" not in v
assert (v.get("kv-cache-dtype") == "fp8") == (o["kv_dtype"] == "fp8")
a = open(argv).read().split("\n")[:-1]
flags = [x for x in a if x.startswith("--")]
assert set(flags) <= set(sflags.split()), set(flags) - set(sflags.split())
val = lambda f: a[a.index(f) + 1]
assert val("--model-path") == "org/model" and val("--port") == "31000"
assert int(val("--tp-size")) == p["tp"] * p["attention_dp"] and int(val("--pp-size")) == p["pp"]
dpa = p["attention_dp"] > 1
assert ("--enable-dp-attention" in a) == dpa
want_dp = p["attention_dp"] if dpa else (1 if pd else p["instances"])
assert int(val("--dp-size")) == want_dp if want_dp > 1 else "--dp-size" not in a
assert (int(val("--ep-size")) == p["ep"]) if p["ep"] > 1 else "--ep-size" not in a
assert int(val("--context-length")) == o["workload"]["max_tokens"]
assert (val("--disaggregation-mode") == pool) if pd else "--disaggregation-mode" not in a
if o["engine"] == "sglang":
    assert float(val("--mem-fraction-static")) == round(p["engine"]["mem_fraction"], 2)
    assert int(val("--max-running-requests")) == p["engine"]["max_num_seqs"]
print("export %-9s %-7s vllm %s | sglang %s" % (plan.split("/")[-1], pool,
      " ".join("%s=%s" % (k, v[k]) for k in ["tensor-parallel-size", "pipeline-parallel-size", "data-parallel-size"]),
      " ".join(x for x in a if x.startswith("--") and x not in ("--model-path", "--port"))))
PY
}
check "$tmp/pd.json" prefill
check "$tmp/pd.json" decode
check "$tmp/agg.json" both
check "$tmp/moe.json" both

# the script needs MODEL
env -u MODEL PATH="$tmp/bin:$PATH" bash "$tmp/s.sh" >/dev/null 2>"$tmp/err" && bad "script ran without MODEL" ||
    { grep -q "set MODEL" "$tmp/err" && ok || bad "no MODEL message: $(cat "$tmp/err")"; }

# usage errors: exit 2, nothing written
NEVER="$tmp/never.out"
expect_fail export 2 "$tmp/pd.json" --to vllm -o "$NEVER" -- "disaggregated: export each pool, --pool prefill and --pool decode"
expect_fail export 2 "$tmp/pd.json" --to sglang --pool both -o "$NEVER" -- "--pool both: expected prefill or decode"
expect_fail export 2 "$tmp/agg.json" --to vllm --pool prefill -o "$NEVER" -- "the plan is aggregated"
expect_fail export 2 "$tmp/agg.json" --to megatron -o "$NEVER" -- "a serving plan (loom plan --mode serve): export it --to vllm or --to sglang"
expect_fail export 2 "$tmp/agg.json" --to vllm --nearest -o "$NEVER" -- "--nearest replans placement plans"
"$LOOM" plan gpt2 --cluster dgx-h100-x1 --mode infer --gbs 8 --seq 1024 -o "$tmp/infer.json" >/dev/null 2>&1
expect_fail export 2 "$tmp/infer.json" --to sglang -o "$NEVER" -- "--to sglang exports serving deployments"
expect_fail export 2 "$tmp/infer.json" --to vllm --pool decode -o "$NEVER" -- "--pool is for disaggregated serving plans"
# NVFP4 (Blackwell): the export adds no flag (the engines read the
# checkpoint's method) and says which checkpoint to serve
"$LOOM" plan llama-3.1-70b --cluster dgx-b200-x1 "${S[@]}" --weights nvfp4 --kv-dtype fp8 --isl 1024 --osl 1024 --ttft 2 --tpot 0.05 -o "$tmp/fp4.json" >/dev/null 2>&1 || bad "plan nvfp4"
for to in vllm sglang; do
    "$LOOM" export "$tmp/fp4.json" --to $to -o "$tmp/fp4.$to" 2>"$tmp/err" || bad "export nvfp4 --to $to"
    if grep -q "serve an NVFP4 checkpoint" "$tmp/err" && ! grep -q "quantization" "$tmp/fp4.$to"; then ok
    else bad "nvfp4 --to $to: $(cat "$tmp/err")"; fi
done
# a damaged serving plan names the place
python3 - "$tmp/agg.json" "$tmp/bad.json" <<'PY'
import json, sys
o = json.load(open(sys.argv[1]))
o["serving"]["deployment"]["pools"][0]["gpus_per_instance"] = 3
json.dump(o, open(sys.argv[2], "w"))
PY
expect_fail export 1 "$tmp/bad.json" --to vllm -o "$NEVER" -- "\$.serving.deployment.pools[0]: gpus_per_instance 3 is not tp"

echo "serve_export: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
