#!/bin/bash
# inspect_cli.sh — `loom inspect` end to end: every file under
# tests/bad_input/{model,graph}_* fails with exit 1 and a message naming the
# file and the problem; usage errors exit 2; good models give the --json
# fields (checked with python3 against independent expectations) and
# byte-identical output on a second run.
#
# usage: bash tests/inspect_cli.sh path/to/loom   (run from the repo root)
set -u
LOOM=${1:?usage: inspect_cli.sh path/to/loom}
fails=0
passes=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# expect_fail CODE FILE-OR-ARGS... -- NEEDLE...: runs `loom inspect ARGS`,
# wants exit CODE and every NEEDLE in stderr.
expect_fail() {
    local code=$1; shift
    local args=()
    while [ "$1" != "--" ]; do args+=("$1"); shift; done
    shift
    "$LOOM" inspect "${args[@]}" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    if [ $rc -ne "$code" ]; then
        bad "inspect ${args[*]}: exit $rc, want $code ($(head -c 300 "$tmp/err"))"
        return
    fi
    if [ -s "$tmp/out" ]; then bad "inspect ${args[*]}: wrote to stdout on failure"; return; fi
    local err
    err=$(<"$tmp/err")
    for needle in "$@"; do
        if [[ "$err" == *"$needle"* ]]; then ok
        else bad "inspect ${args[*]}: stderr lacks '$needle': $err"; fi
    done
}

B=tests/bad_input
expect_fail 1 $B/model_malformed.json -- "$B/model_malformed.json:4:3:" "malformed JSON"
expect_fail 1 $B/model_missing_field.json -- "$B/model_missing_field.json" 'missing required field "num_hidden_layers"'
expect_fail 1 $B/model_heads_not_dividing.json -- "$B/model_heads_not_dividing.json" "num_attention_heads = 48 does not divide hidden_size = 4096"
expect_fail 1 $B/model_kv_heads_not_dividing.json -- "$B/model_kv_heads_not_dividing.json" "num_key_value_heads = 5 does not divide num_attention_heads = 32"
expect_fail 1 $B/model_unknown_arch.json -- "$B/model_unknown_arch.json" 'unsupported architecture "BertForMaskedLM"' "LlamaForCausalLM" "DeepseekV3ForCausalLM"
expect_fail 1 $B/model_nonpositive_size.json -- "$B/model_nonpositive_size.json" '$.n_layer' "found 0"
expect_fail 1 $B/model_overflow_size.json -- "$B/model_overflow_size.json" '$.vocab_size' "found 1e+20"
# each size within its bound, their product not: 1000 layers x (q, k, v, o of
# one 2^20-wide head = 4 x 2^40, MLP 3 x 2^20 x 2^22 = 12 x 2^40) + 2 x 2^24 x 2^20
# = 1.7627e16 parameters, past 2^50; named by the sizes, before any tensor overflows
expect_fail 1 $B/model_overflow_product.json -- "$B/model_overflow_product.json" '$: the config describes about 1.76e+16 parameters' "hidden 1048576" "ffn 4194304" "1000 layers"
expect_fail 1 $B/model_not_a_model.json -- "$B/model_not_a_model.json" "not a model file"
expect_fail 1 $B/graph_cycle.json -- "$B/graph_cycle.json" "cycle" "blk.add -> blk.gelu -> blk.silu -> blk.add"
expect_fail 1 $B/graph_unknown_kind.json -- "$B/graph_unknown_kind.json" '$.ops[0].kind' 'unknown op kind "conv2d"'
expect_fail 1 $B/graph_missing_field.json -- "$B/graph_missing_field.json" '$.tensors[0]' 'missing required field "shape"'
expect_fail 1 $B/graph_unknown_field.json -- "$B/graph_unknown_field.json" '$.ops[0]' 'unknown field "inplace"'
expect_fail 1 $B/graph_dangling_tensor.json -- "$B/graph_dangling_tensor.json" "unused" "dangling"
expect_fail 1 $B/graph_undeclared_tensor.json -- "$B/graph_undeclared_tensor.json" '$.ops[0].outputs[0]' 'tensor "z" is not declared'
expect_fail 1 $B/graph_einsum_mismatch.json -- "$B/graph_einsum_mismatch.json" '$.ops[0]' "einsum letter 'h' is 64 in one operand and 32"
expect_fail 1 $B/graph_nonpositive_size.json -- "$B/graph_nonpositive_size.json" '$.tensors[0].shape[1]' "found 0"
expect_fail 1 no-such-model -- "no-such-model" "no bundled model"
expect_fail 1 gpt2 --seq 4096 -- "gpt2.json" "exceeds the learned position table (n_positions = 1024)"
# every bad-input file of ours is covered above (files with a .expect
# sidecar are run by tests/bad_input.sh instead)
for f in $B/model_*.json $B/graph_*.json; do
    [ -e "$f.expect" ] && continue
    grep -qF "\$B/$(basename "$f") --" "$0" || bad "$f is not exercised by $0"
done

expect_fail 2 -- "missing MODEL"
expect_fail 2 gpt2 --frobnicate -- "unknown option '--frobnicate'"
expect_fail 2 gpt2 --seq abc -- "--seq expects an integer"
expect_fail 2 gpt2 --seq 0 -- "--seq must be in"
expect_fail 2 gpt2 --batch -- "--batch needs a value"
expect_fail 2 gpt2 --dtype int64 -- "--dtype expects bf16, fp16, fp32 or fp8"
expect_fail 2 gpt2 llama-3-8b -- "one MODEL expected"

# --help lists the supported architectures
if "$LOOM" inspect --help | grep -q "MixtralForCausalLM"; then ok; else bad "inspect --help"; fi

# Good models: --json fields against independent expectations.
json() { "$LOOM" inspect "$@" --json; }
check() {   # check NAME PYTHON-EXPR-ON-d ... (reads JSON on stdin)
    local what=$1; shift
    if python3 -c '
import json, sys
d = json.load(sys.stdin)
for e in sys.argv[1:]:
    if not eval(e):
        print("  failed:", e, file=sys.stderr); sys.exit(1)
' "$@"; then ok; else bad "$what"; fi
}

json llama-3-8b >"$tmp/l8.json" || bad "inspect llama-3-8b --json failed"
check llama-3-8b <"$tmp/l8.json" \
    'abs(d["params"] - 8.03e9) < 0.005 * 8.03e9' \
    'd["params_embedding"] == 128256 * 4096' \
    'd["layers"] == 32 and d["seq"] == 4096 and d["batch"] == 1' \
    'd["assumed"] == ["seq", "batch"]' \
    'd["signatures"] == 3 and len(d["per_layer"]) == 34' \
    'abs(d["flops_per_token_train"] - 3 * d["flops_per_token_fwd"]) < 0.03 * d["flops_per_token_train"]' \
    'abs(d["flops_per_token_fwd"] - 2 * (d["params"] - d["params_embedding"]) - 4 * 4096 * 4096 * 32) < 0.001 * d["flops_per_token_fwd"]' \
    'd["activation_bytes_per_layer"] == 4096 * (12 * 4096 + 4 * 4096 // 4 + 6 * 14336)' \
    'd["first_layer_ops"][0]["name"] == "model.layers.0.input_layernorm"' \
    'sum(o["params"] for o in d["first_layer_ops"]) == d["per_layer"][1]["params"]'

json gpt3-175b --unfused-attention >"$tmp/g3.json" || bad "inspect gpt3-175b failed"
check gpt3-unfused <"$tmp/g3.json" \
    'abs(d["params"] - 174.6e9) < 0.005 * 174.6e9' \
    'abs(d["activation_bytes_per_layer"] - 2048 * 12288 * (34 + 5 * 96 * 2048 / 12288)) < 0.02 * d["activation_bytes_per_layer"]' \
    'd["flash_attention"] is False'
json gpt3-175b --seq 1024 --batch 2 >"$tmp/g3f.json" || bad "inspect gpt3-175b --batch 2 failed"
check gpt3-flash <"$tmp/g3f.json" \
    'abs(d["activation_bytes_per_layer"] - 34 * 1024 * 2 * 12288) < 0.02 * d["activation_bytes_per_layer"]' \
    'd["assumed"] == []' \
    'd["batch"] == 2 and d["seq"] == 1024'

json deepseek-v3 >"$tmp/ds.json" || bad "inspect deepseek-v3 failed"
check deepseek-v3 <"$tmp/ds.json" \
    'abs(d["params"] - 671e9) < 0.005 * 671e9' \
    'd["signatures"] == 4' \
    'd["per_layer"][1]["signature"] == d["per_layer"][3]["signature"] != d["per_layer"][4]["signature"]'

json gpt2 --dtype fp32 >"$tmp/g2.json" || bad "inspect gpt2 failed"
check gpt2 <"$tmp/g2.json" \
    'd["seq"] == 1024 and d["dtype"] == "fp32" and d["assumed"] == ["seq", "batch"]' \
    'abs(d["params"] - 124.44e6) < 0.005 * 124.44e6'

json tiny-gpt.graph.json >"$tmp/tiny.json" || bad "inspect tiny-gpt failed"
check tiny-gpt <"$tmp/tiny.json" \
    'd["params"] == 6816 and d["flops_fwd"] == 255232 and d["flops_bwd"] == 514560' \
    'd["assumed"] == []' \
    'd["flops_per_token_fwd"] == 255232 / 16' \
    'd["activation_bytes_per_layer"] == 8192 and d["layers"] == 2'

# A loom graph keeps its own shapes and says so when asked for others.
"$LOOM" inspect tiny-gpt.graph --seq 64 --json >"$tmp/tiny64.json" 2>"$tmp/err" || bad "inspect tiny-gpt --seq 64 failed"
if grep -qF "fixes its own shapes (seq 8, batch 2, bf16)" "$tmp/err"; then ok; else bad "no note for --seq on a loom graph: $(cat "$tmp/err")"; fi
check tiny-gpt-seq <"$tmp/tiny64.json" 'd["seq"] == 8 and d["flops_fwd"] == 255232'

# Deterministic output, and a path works as well as a bundled name.
json examples/models/llama-3-8b.json >"$tmp/l8b.json"
if python3 -c 'import json,sys; a=json.load(open(sys.argv[1])); b=json.load(open(sys.argv[2])); a.pop("file"); b.pop("file"); sys.exit(a != b)' "$tmp/l8.json" "$tmp/l8b.json"; then ok; else bad "path vs bundled name differ"; fi
json llama-3-8b >"$tmp/l8c.json"
if cmp -s "$tmp/l8.json" "$tmp/l8c.json"; then ok; else bad "--json output is not deterministic"; fi

# The text report has its sections.
"$LOOM" inspect mixtral-8x7b >"$tmp/text" 2>&1 || bad "inspect mixtral-8x7b failed"
text=$(<"$tmp/text")
for needle in "assumed: seq 4096, batch 1 (loom's defaults" "parameters    46.70 B total" "FLOPs/token" "activations" "1-32 (x32)" \
              "model.layers.0.block_sparse_moe.experts.w1" "ech,ehf->ecf"; do
    if [[ "$text" == *"$needle"* ]]; then ok; else bad "text report lacks '$needle'"; fi
done

echo "inspect_cli: $passes passed, $fails failed"
[ $fails -eq 0 ]
