#!/bin/bash
# serve_cli.sh — `loom eval --mode serve` end to end: usage errors exit 2,
# bad deployments exit 1 (3 when they do not fit) naming the place, and
# print nothing on stdout; --json has the documented top-level fields and
# the text table nothing training-only; launch lines of vLLM and SGLang give
# the same answer as the equivalent flags; the output is byte-identical on a
# second run.
#
# usage: bash tests/serve_cli.sh path/to/loom   (run from the repo root)
set -u
LOOM=${1:?usage: serve_cli.sh path/to/loom}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

source tests/lib/cli_expect.bash
NEVER=$tmp/never.json

S=(--mode serve --cluster dgx-h100-x1)
W=(--isl 512 --osl 128 --requests 300)
# usage errors
expect_fail eval 2 llama-3-8b "${S[@]}" --isl 512 --osl 128 -- "exactly one load"
expect_fail eval 2 llama-3-8b "${S[@]}" "${W[@]}" --qps 2 --offline -- "exactly one load"
expect_fail eval 2 llama-3-8b "${S[@]}" --qps 2 -- "needs --isl and --osl"
expect_fail eval 2 llama-3-8b "${S[@]}" "${W[@]}" --qps -1 -- "--qps must be in"
expect_fail eval 2 llama-3-8b "${S[@]}" "${W[@]}" --qps 1 --engine tgi -- "--engine expects vllm, sglang or trtllm"
expect_fail eval 2 llama-3-8b "${S[@]}" "${W[@]}" --qps 1 --max-num-seq 8 -- "unknown option '--max-num-seq'"
# bad deployments and workloads
expect_fail eval 1 llama-3-8b "${S[@]}" "${W[@]}" --qps 0 -- "--qps: expected a request rate > 0"
expect_fail eval 1 llama-3-8b "${S[@]}" "${W[@]}" --concurrency 0 -- "--concurrency"
expect_fail eval 1 llama-3-8b "${S[@]}" --isl 8000 --osl 1000 --qps 1 -- "--isl 8000 + --osl 1000" "8192"
expect_fail eval 1 llama-3-8b "${S[@]}" "${W[@]}" --qps 1 --tp 3 -- "--tp 3 does not divide the 32 attention heads"
expect_fail eval 1 llama-3-8b "${S[@]}" "${W[@]}" --qps 1 --tp 16 -- "16 GPUs, but cluster dgx-h100-x1 has 8"
expect_fail eval 1 llama-3-8b "${S[@]}" "${W[@]}" --qps 1 --ep 2 -- "--ep 2: llama-3-8b has no experts"
expect_fail eval 3 llama-3-70b "${S[@]}" "${W[@]}" --qps 1 -- "does not fit"
expect_fail eval 2 llama-3-8b "${S[@]}" "${W[@]}" --qps 1 --engine vllm --frontend nim -- "--frontend nim runs TensorRT-LLM, not vllm"
expect_fail eval 2 llama-3-8b "${S[@]}" "${W[@]}" --qps 1 --engine sglang --trt-engine -- "--trt-engine runs TensorRT-LLM, not sglang"
expect_fail eval 2 llama-3-8b "${S[@]}" "${W[@]}" --qps 1 --frontend triton -- "--frontend expects"
expect_fail plan 2 llama-3-8b "${S[@]}" --isl 512 --osl 128 --concurrency 8 --engine sglang --frontend nim -- "loom plan: --frontend nim runs TensorRT-LLM, not sglang"
expect_fail eval 1 --cluster dgx-h100-x1 --from-vllm "vllm serve meta-llama/Meta-Llama-3-8B --tp-size 2" "${W[@]}" --qps 1 -- "--from-vllm:1: unknown vLLM option '--tp-size'"
expect_fail eval 1 --cluster dgx-h100-x1 --from-sglang "python -m sglang.launch_server --model-path x/unknown-model" "${W[@]}" --qps 1 -- "x/unknown-model" "not a bundled model"

# --json fields
"$LOOM" eval llama-3-70b "${S[@]}" --tp 8 "${W[@]}" --qps 4 --json >"$tmp/a.json" 2>"$tmp/err"
if [ $? -eq 0 ]; then ok; else bad "70B tp8 serve: $(cat "$tmp/err")"; fi
python3 - "$tmp/a.json" <<'PY' && ok || bad "json fields"
import json, sys
o = json.load(open(sys.argv[1]))
for k in ["ttft_s", "ttft_p99_s", "tpot_s", "itl_s", "itl_p99_s", "e2e_s", "output_tokens_per_s",
          "requests_per_s", "kv_capacity_tokens", "max_concurrency", "memory_bytes"]:
    assert k in o, k
assert o["ttft_p99_s"] >= o["metrics"]["ttft_s"]["p50"] > 0
assert abs(o["e2e_s"] - (o["ttft_s"] + 127 * o["tpot_s"])) < 0.05 * o["e2e_s"]
m = o["memory_bytes"]
assert m["weights"] + m["kv_cache"] + m["activations"] + m["cuda_graphs"] + m["communication"] + m["cuda_context"] == m["total"]
assert m["total"] <= m["capacity"]
assert abs(o["requests_per_s"] - 4) < 0.6
PY
"$LOOM" eval llama-3-70b "${S[@]}" --tp 8 "${W[@]}" --qps 4 --json >"$tmp/b.json" 2>/dev/null
if cmp -s "$tmp/a.json" "$tmp/b.json"; then ok; else bad "serve --json not deterministic"; fi

# the text table: no training-only figures
"$LOOM" eval llama-3-70b "${S[@]}" --tp 8 "${W[@]}" --qps 4 >"$tmp/t.txt" 2>&1
for w in "time to first token" "KV capacity" "max concurrency" "KV cache"; do
    if grep -q "$w" "$tmp/t.txt"; then ok; else bad "text lacks '$w'"; fi
done
for w in "MFU" "gradient" "optimizer" "grad"; do
    if grep -qi "$w" "$tmp/t.txt"; then bad "text shows training-only '$w'"; else ok; fi
done

# launch lines equal the flags
"$LOOM" eval llama-3-70b "${S[@]}" --tp 8 --weights fp8 --kv-dtype fp8 --max-num-seqs 128 "${W[@]}" --concurrency 32 --json >"$tmp/f.json" 2>/dev/null
"$LOOM" eval --cluster dgx-h100-x1 "${W[@]}" --concurrency 32 --json --from-vllm \
    "vllm serve meta-llama/Meta-Llama-3-70B-Instruct --tensor-parallel-size 8 --quantization fp8 --kv-cache-dtype fp8_e4m3 --max-num-seqs 128 --port 8000 --disable-log-requests" >"$tmp/l.json" 2>"$tmp/err"
if cmp -s "$tmp/f.json" "$tmp/l.json"; then ok; else bad "--from-vllm differs from the flags: $(cat "$tmp/err")"; fi
# vLLM V0 multi-step: the launch line (SGLang's own vLLM 0.6 benchmark line,
# with argparse's '--tensor' abbreviation and underscores) equals the flags;
# V0's policy comes with it: 256 sequences, whole prompts, budget
# max(max_model_len 4096, 2048)
"$LOOM" eval llama-3.1-70b "${S[@]}" --tp 4 --num-scheduler-steps 10 --max-batched-tokens 4096 "${W[@]}" --qps 4 --json >"$tmp/f.json" 2>/dev/null
"$LOOM" eval --cluster dgx-h100-x1 "${W[@]}" --qps 4 --json --from-vllm \
    "python -m vllm.entrypoints.openai.api_server --model meta-llama/Llama-3.1-70B-Instruct --disable-log-requests --num-scheduler-steps 10 --max_model_len 4096 --tensor 4" >"$tmp/l.json" 2>"$tmp/err"
if cmp -s "$tmp/f.json" "$tmp/l.json"; then ok; else bad "--from-vllm multi-step differs from the flags: $(cat "$tmp/err")"; fi
python3 - "$tmp/l.json" <<'PY' && ok || bad "multi-step config: $(cat "$tmp/err")"
import json, sys
c = json.load(open(sys.argv[1]))["config"]
assert c["scheduler_steps"] == 10 and c["max_num_seqs"] == 256 and c["max_batched_tokens"] == 4096 and c["tp"] == 4, c
PY
expect_fail eval 2 llama-3-8b "${S[@]}" "${W[@]}" --qps 1 --engine sglang --num-scheduler-steps 4 -- "--num-scheduler-steps is vLLM's"
# TensorRT-LLM runs a prompt whole unless context chunking is on: a prompt
# beyond the token budget is an error naming both ways out, not a starved
# engine; --chunked-context is TensorRT-LLM's alone
expect_fail eval 1 llama-3-8b "${S[@]}" --isl 3000 --osl 64 --requests 50 --qps 1 --engine trtllm --max-batched-tokens 2048 -- "a prompt of 3000 tokens exceeds the trtllm engine's token budget of 2048" "--chunked-context"
expect_fail eval 1 llama-3-8b "${S[@]}" --isl 3000 --osl 64 --qps 1 --engine trtllm --max-batched-tokens 2048 --steady -- "a prompt of 3000 tokens exceeds"
expect_fail eval 2 llama-3-8b "${S[@]}" "${W[@]}" --qps 1 --engine vllm --chunked-context -- "--chunked-context is TensorRT-LLM's"
"$LOOM" eval llama-3-8b "${S[@]}" --isl 3000 --osl 64 --requests 50 --qps 1 --engine trtllm --max-batched-tokens 2048 --chunked-context --json >"$tmp/c.json" 2>"$tmp/err" &&
    python3 -c 'import json,sys; assert json.load(open(sys.argv[1]))["config"]["chunked_prefill"] is True' "$tmp/c.json" && ok || bad "trtllm --chunked-context: $(cat "$tmp/err")"
# vLLM V1 runs host and GPU in turn unless --async-scheduling overlaps them
for flag in "" "--async-scheduling"; do
    "$LOOM" eval --cluster dgx-h100-x1 "${W[@]}" --qps 2 --json --from-vllm \
        "vllm serve meta-llama/Meta-Llama-3-8B-Instruct $flag" >"$tmp/o.json" 2>"$tmp/err"
    python3 - "$tmp/o.json" "$flag" <<'PY' && ok || bad "vLLM overlap_host with '$flag': $(cat "$tmp/err")"
import json, sys
c = json.load(open(sys.argv[1]))["config"]
assert c["overlap_host"] == (sys.argv[2] != ""), c
PY
done
# nvfp4 needs FP4 tensor cores: eval and plan refuse it on an H100, writing nothing
expect_fail eval 1 llama-3-8b "${S[@]}" "${W[@]}" --qps 1 --weights nvfp4 -- "FP4 tensor cores, which H100-SXM5-80GB does not"
expect_fail plan 1 llama-3-8b "${S[@]}" --isl 512 --osl 128 --qps 1 --ttft 1 --tpot 0.05 --weights nvfp4 -o "$NEVER" -- "FP4 tensor cores, which H100-SXM5-80GB does not"
# SGLang's overlap scheduler is on unless the launch line turns it off
for flag in "" "--disable-overlap-schedule"; do
    "$LOOM" eval --cluster dgx-h100-x1 "${W[@]}" --qps 2 --json --from-sglang \
        "python3 -m sglang.launch_server --model-path meta-llama/Meta-Llama-3-8B-Instruct $flag" >"$tmp/o.json" 2>"$tmp/err"
    python3 - "$tmp/o.json" "$flag" <<'PY' && ok || bad "overlap_host with '$flag': $(cat "$tmp/err")"
import json, sys
c = json.load(open(sys.argv[1]))["config"]
assert c["overlap_host"] == (sys.argv[2] == ""), c
PY
done
printf '#!/bin/bash\nTP=8\npython3 -m sglang.launch_server \\\n  --model-path deepseek-ai/DeepSeek-V3 --tp $TP --dp 8 \\\n  --enable-dp-attention --trust-remote-code --mem-fraction-static 0.85\n' >"$tmp/launch.sh"
"$LOOM" eval --cluster dgx-h200-x1 "${W[@]}" --concurrency 64 --json --from-sglang "@$tmp/launch.sh" >"$tmp/s.json" 2>"$tmp/err"
python3 - "$tmp/s.json" <<'PY' && ok || bad "--from-sglang dp attention: $(cat "$tmp/err")"
import json, sys
o = json.load(open(sys.argv[1]))
c = o["config"]
assert c["engine"] == "sglang" and c["tp"] == 1 and c["attention_dp"] == 8 and c["mem_fraction"] == 0.85, c
assert o["gpus"] == 8
PY

# the front end: a harness without a server removes the per-request hop and
# the streaming queue; NIM implies TensorRT-LLM on a built engine, which
# pays no eager launch cost
for fe in server none nim; do
    "$LOOM" eval llama-3-8b "${S[@]}" "${W[@]}" --concurrency 1 --frontend $fe --json >"$tmp/fe_$fe.json" 2>/dev/null
done
python3 - "$tmp" <<'PY' && ok || bad "--frontend: a harness with no server must not be slower, NIM must be TensorRT-LLM on a built engine"
import json, sys
d = sys.argv[1]
srv, none, nim = (json.load(open("%s/fe_%s.json" % (d, f))) for f in ("server", "none", "nim"))
assert none["ttft_s"] < srv["ttft_s"] and none["config"]["frontend"] == "none", (none["ttft_s"], srv["ttft_s"])
assert nim["config"]["engine"] == "trtllm" and nim["config"]["trt_engine"] and nim["config"]["frontend"] == "nim"
assert srv["config"]["frontend"] == "server" and not srv["config"]["trt_engine"]
PY

# the client: a Python benchmark client's serial parse caps the tokens/s of
# a flood of streams at 1 / client_chunk_s (the shipped calibration's);
# a parallel client leaves the engine and the server's stream
expect_fail eval 2 llama-3-8b "${S[@]}" "${W[@]}" --qps 1 --client locust -- "--client expects python, parallel or users"
for cl in python parallel; do
    "$LOOM" eval llama-3-8b "${S[@]}" --isl 200 --osl 200 --offline --requests 1000 --client $cl --json >"$tmp/cl_$cl.json" 2>/dev/null
done
python3 - "$tmp" examples/calibration/serving-calib.json <<'PY' && ok || bad "--client: a Python client must cap a flood at 1 / client_chunk_s, a parallel one must not"
import json, sys
d = sys.argv[1]
cal = json.load(open(sys.argv[2]))
py, par = (json.load(open("%s/cl_%s.json" % (d, c))) for c in ("python", "parallel"))
cap = 1 / cal["client_chunk_s"]
assert py["config"]["client"] == "python" and par["config"]["client"] == "parallel"
# (within 10%: while the server admits the 1,000 requests, request_overhead_s
# each, the client is not yet the bottleneck)
assert cap * 0.90 <= py["output_tokens_per_s"] <= cap * 1.001, (py["output_tokens_per_s"], cap)
assert par["output_tokens_per_s"] > cap * 1.2, (par["output_tokens_per_s"], cap)
PY

# loom plan takes the same front end and says it; the plan file records it
"$LOOM" plan llama-3-8b "${S[@]}" --frontend nim --isl 512 --osl 128 --concurrency 16 -o "$tmp/nim.plan.json" >"$tmp/nim.txt" 2>/dev/null
if grep -q "serving with trtllm (a built TensorRT engine) behind NIM's server" "$tmp/nim.txt" &&
   python3 -c 'import json,sys; s=json.load(open(sys.argv[1]))["serving"]; sys.exit(not (s["frontend"] == "nim" and s["trt_engine"] and s["engine"] == "trtllm"))' "$tmp/nim.plan.json"
then ok; else bad "plan --frontend nim: $(head -2 "$tmp/nim.txt")"; fi

# the KV dtype when none is given: NIM's fp8 profiles cache KV in fp8, the
# rest (and an explicit --kv-dtype) bf16
kv_of() { "$LOOM" eval llama-3-8b "${S[@]}" --isl 512 --osl 64 --concurrency 4 "$@" --json 2>/dev/null |
          python3 -c 'import json,sys; print(json.load(sys.stdin)["config"]["kv_dtype"])'; }
if [ "$(kv_of --frontend nim --weights fp8)" = fp8 ] &&
   [ "$(kv_of --frontend nim --weights fp8 --kv-dtype bf16)" = bf16 ] &&
   [ "$(kv_of --frontend nim)" = bf16 ] && [ "$(kv_of --engine vllm --weights fp8)" = bf16 ]
then ok; else bad "default --kv-dtype under --frontend nim"; fi
"$LOOM" plan llama-3-8b "${S[@]}" --frontend nim --weights fp8 --isl 512 --osl 128 --concurrency 16 -o "$tmp/nim8.plan.json" >/dev/null 2>&1
if python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["serving"]["kv_dtype"] != "fp8")' "$tmp/nim8.plan.json"
then ok; else bad "plan --frontend nim --weights fp8: KV not fp8"; fi

echo "serve_cli: $passes passed, $fails failed"
[ $fails -eq 0 ]
