#!/bin/bash
# fx_export.sh LOOM — tools/fx_export.py end to end (issue 10).
#
# A small GPT and a small Llama written in plain PyTorch (tests/fx/) are
# traced with torch.fx and exported to loom-graph/1; `loom inspect --json` on
# each export must give the same parameters, FLOPs (total, per token, per
# layer) and activation bytes as `loom inspect --json` on the equivalent HF
# config.json (tests/fx/*.config.json), which the C builder turns into a
# graph independently. Eager attention is compared with --unfused-attention,
# F.scaled_dot_product_attention and --fuse-attention with the default
# (fused). Also: hand-computed FLOPs of a model off the GPT/Llama path,
# byte-identical output, unsupported calls reported by name and source line
# with nothing written, untraceable control flow, usage errors, the
# exporter's unit tests, `loom shard` (intra-op ILP) and `loom eval`
# (Megatron-style step) giving the same answers on an export as on its
# config, and `loom plan` on an export once it exists.
#
# Needs Debian's python3-torch (/usr/bin/python3; pyenv pythons do not see
# Debian packages). Exits 77 (skipped) only when /usr/bin/python3 cannot
# import torch.
set -u
LOOM=${1:?usage: fx_export.sh path/to/loom}
PY=${LOOM_FX_PYTHON:-/usr/bin/python3}   # override only to test the skip
if ! "$PY" -c 'import torch' 2>/dev/null; then
    echo "SKIP: $PY cannot import torch; install Debian's python3-torch (apt-get install python3-torch)"
    exit 77
fi
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
FAILS=0
fail() { echo "FAIL: $*"; FAILS=$((FAILS + 1)); }
ok() { echo "ok: $*"; }

GPT=tests/fx/tiny_gpt.py:TinyGPT
LLAMA=tests/fx/tiny_llama.py:TinyLlama
IDS2="--input input_ids=int64[2,128] --input labels=int64[2,128]"
IDS1="--input input_ids=int64[1,64] --input labels=int64[1,64]"
# All exports run in one Python process (importing torch takes seconds).
cat > "$T/jobs" <<JOBS
gpt-eager $GPT $IDS2 -o $T/gpt-eager.json
gpt-sdpa $GPT --kwargs '{"fused": true}' $IDS2 -o $T/gpt-sdpa.json
gpt-fused $GPT --fuse-attention $IDS1 -o $T/gpt-fused.json
llama-eager $LLAMA $IDS2 -o $T/llama-eager.json
llama-sdpa $LLAMA --kwargs '{"fused": true}' $IDS1 -o $T/llama-sdpa.json
llama-fused $LLAMA --fuse-attention $IDS2 -o $T/llama-fused.json
again $LLAMA $IDS2 -o $T/again.json
mlp tests/fx/misc_models.py:SquareMLP --kwargs '{"hidden": 48, "inner": 80, "layers": 3}' --input x=fp32[b=1,s=24,h=48] -o $T/mlp.json
fnet tests/fx/unsupported.py:FNet --input x=bf16[2,16,32] -o $T/fnet.json
datadep tests/fx/unsupported.py:DataDependent --input x=fp32[4,16] -o $T/datadep.json
badsize $GPT --input input_ids=int64[2,0] -o $T/badsize.json
noinput $GPT --input input_ids=int64[2,8] -o $T/noinput.json
unit
JOBS
"$PY" tests/fx/run_exports.py "$T/jobs" "$T" || { echo "FAIL: run_exports.py"; exit 1; }
rc() { cat "$T/$1.rc"; }

# compare NAME CONFIG BATCH SEQ "INSPECT ARGS": the export vs the HF config
compare() {
    local name=$1 cfg=$2 b=$3 s=$4 inargs=$5
    if [ "$(rc "$name")" != 0 ]; then
        fail "$name: export failed:"
        cat "$T/$name.err"
        return
    fi
    "$LOOM" inspect "$T/$name.json" --json > "$T/$name.a" || { fail "$name: loom inspect on the export"; return; }
    # shellcheck disable=SC2086
    "$LOOM" inspect "$cfg" --seq "$s" --batch "$b" $inargs --json > "$T/$name.b" ||
        { fail "$name: loom inspect on $cfg"; return; }
    if "$PY" tests/fx/check_export.py same "$T/$name.a" "$T/$name.b" > "$T/$name.diff"; then
        ok "$name: params, FLOPs and activation bytes equal the HF config's (batch $b, seq $s)"
    else
        fail "$name: the export differs from $cfg:"
        cat "$T/$name.diff"
    fi
}

compare gpt-eager tests/fx/tiny_gpt.config.json 2 128 "--unfused-attention"
compare gpt-sdpa tests/fx/tiny_gpt.config.json 2 128 ""
compare gpt-fused tests/fx/tiny_gpt.config.json 1 64 ""
compare llama-eager tests/fx/tiny_llama.config.json 2 128 "--unfused-attention"
compare llama-sdpa tests/fx/tiny_llama.config.json 1 64 ""
compare llama-fused tests/fx/tiny_llama.config.json 2 128 ""

# Named dims follow the house conventions (graph/hf_build.h).
if grep -q '"name": "model.layers.0.self_attn.q_proj.weight", "dims": \["h", "heads", "dh"\]' "$T/llama-eager.json" &&
   grep -q '"name": "model.layers.0.self_attn.k_proj.weight", "dims": \["h", "kvh", "dh"\]' "$T/llama-eager.json" &&
   grep -q '"name": "transformer.h.0.attn.c_attn.weight", "dims": \["h", "qkv", "heads", "dh"\]' "$T/gpt-eager.json" &&
   grep -q '"einsum": "bsh,hf->bsf"' "$T/gpt-eager.json" &&
   grep -q '"einsum": "bskgd,btkd->bkgst"' "$T/llama-eager.json"; then
    ok "dims are named b, s, t, h, heads, kvh, grp, dh, f, qkv as the HF builder names them"
else
    fail "dim names differ from the house conventions"
fi

# Hand-computed FLOPs, params and saved bytes off the GPT/Llama path.
if [ "$(rc mlp)" = 0 ] && "$LOOM" inspect "$T/mlp.json" --json > "$T/mlp.a" &&
        "$PY" tests/fx/check_export.py square_mlp "$T/mlp.a" 48 80 3 1 24; then
    ok "SquareMLP: per-block params, FLOPs and saved bytes equal the hand computation"
else
    fail "SquareMLP export or its hand-computed figures"
    cat "$T/mlp.err"
fi

# Determinism: the same model gives byte-identical files.
cmp -s "$T/again.json" "$T/llama-eager.json" && ok "byte-identical output for the same model" ||
    fail "two exports of the same model differ"

# refused JOB CODE WHAT PATTERN...: the job exited CODE, wrote nothing and
# said each PATTERN on stderr
refused() {
    local job=$1 code=$2 what=$3 p good=1
    shift 3
    { [ "$(rc "$job")" = "$code" ] && [ ! -e "$T/$job.json" ]; } || good=0
    for p in "$@"; do grep -q -- "$p" "$T/$job.err" || good=0; done
    if [ "$good" = 1 ]; then
        ok "$what"
    else
        fail "$what (exit $(rc "$job")):"
        cat "$T/$job.err"
    fi
}

# Unsupported calls: each reported by name, source line and module.
FFT_LINE=$(grep -n 'torch.fft.fft(' tests/fx/unsupported.py | cut -d: -f1)
RELU_LINE=$(grep -n 'return x + self.out(self.act' tests/fx/unsupported.py | cut -d: -f1)
IF_LINE=$(grep -n 'if y.sum() > 0' tests/fx/unsupported.py | cut -d: -f1)
refused fnet 1 "unsupported calls listed by name and location, exit 1, nothing written" \
    "torch.fft.fft at .*tests/fx/unsupported.py:$FFT_LINE (forward), module blocks.0.mixer" \
    "nn.ReLU at .*tests/fx/unsupported.py:$RELU_LINE (forward), module blocks.0.act" \
    "2 calls that loom cannot represent"
refused datadep 1 "data-dependent control flow: exit 1 with the source line" \
    "cannot trace.*unsupported.py:$IF_LINE"
# Usage errors exit 2 and name the problem.
refused badsize 2 "bad --input: exit 2" "size '0' is not a positive integer"
refused noinput 2 "missing forward() input: exit 2" "argument 'labels' has no default"

# The exporter's own unit tests.
if [ "$(rc unit)" = 0 ]; then
    ok "$(tail -1 "$T/unit.err")"
else
    fail "unit tests:"
    cat "$T/unit.err"
fi

# check WHAT DETAILS COMMAND...: ok WHAT when COMMAND succeeds, else fail
# and show the DETAILS file
check() {
    local what=$1 details=$2
    shift 2
    if "$@"; then
        ok "$what"
    else
        fail "$what:"
        cat "$details" 2> /dev/null
    fi
}

# The intra-op ILP shards an export as it shards the config (2x4 mesh).
shard_same() {   # NAME CONFIG BATCH SEQ
    "$LOOM" shard "$T/$1.json" --mesh 2x4 --json > "$T/$1.sa" &&
        "$LOOM" shard "$2" --seq "$4" --batch "$3" --mesh 2x4 --json > "$T/$1.sb" &&
        "$PY" tests/fx/check_export.py shard "$T/$1.sa" "$T/$1.sb" > "$T/$1.sdiff"
}
if "$LOOM" shard --help > /dev/null 2>&1; then
    check "llama-sdpa: loom shard finds the same optimum as for the HF config" "$T/llama-sdpa.sdiff" \
        shard_same llama-sdpa tests/fx/tiny_llama.config.json 1 64
    check "gpt-sdpa: loom shard finds the same optimum as for the HF config" "$T/gpt-sdpa.sdiff" \
        shard_same gpt-sdpa tests/fx/tiny_gpt.config.json 2 128
fi

# loom eval predicts the same Megatron-style step for an export as for its
# config (everything but the model's name). Llama only: GPT's position
# embedding differs in bytes moved (PyTorch gathers s rows and broadcasts
# them over the batch; the HF builder gathers b·s), so roofline times differ
# by ~0.01% while FLOPs, params and activations agree. An exported graph
# carries its batch, so the micro-batch is that batch.
eval_same() {   # NAME CONFIG BATCH SEQ [--unfused-attention]
    local ev=(--cluster dgx-h100-x1 --tp 2 --pp 2 --mbs "$3" --gbs 8 --seq "$4" ${5:+"$5"} --json)
    "$LOOM" eval "$T/$1.json" "${ev[@]}" > "$T/$1.ea" && "$LOOM" eval "$2" "${ev[@]}" > "$T/$1.eb" &&
        diff <(grep -v '"model":' "$T/$1.ea") <(grep -v '"model":' "$T/$1.eb") > "$T/$1.ediff"
}
if "$LOOM" eval --help > /dev/null 2>&1; then
    check "llama-sdpa: loom eval (tp 2, pp 2, dp 2) predicts the same step as for the HF config" \
        "$T/llama-sdpa.ediff" eval_same llama-sdpa tests/fx/tiny_llama.config.json 1 64
    check "llama-eager: loom eval (tp 2, pp 2, dp 2) predicts the same step as for the HF config" \
        "$T/llama-eager.ediff" eval_same llama-eager tests/fx/tiny_llama.config.json 2 128 --unfused-attention
fi

# loom plan on an export, once the planner exists: a plan file is written.
plan_ok() {   # NAME
    "$LOOM" plan "$T/$1.json" --cluster dgx-h100-x1 --gbs 8 --seq 128 -o "$T/$1.plan.json" \
        > "$T/$1.plan.out" 2>&1 && grep -q '"format":[[:space:]]*"loom-plan/1"' "$T/$1.plan.json"
}
if "$LOOM" plan --help > /dev/null 2>&1; then
    for m in llama-eager gpt-sdpa; do
        check "$m: loom plan --cluster dgx-h100-x1 --gbs 8 --seq 128 writes a plan" "$T/$m.plan.out" plan_ok "$m"
    done
else
    echo "note: \`loom plan\` is not built yet; the planning check is skipped"
fi

if [ "$FAILS" -ne 0 ]; then
    echo "fx_export.sh: $FAILS failure(s)"
    exit 1
fi
echo "fx_export.sh: all passed"
