#!/usr/bin/env bash
# loom_profile_llama.sh — on a machine with a GPU: profile the ops of
# Llama-3-8B and Llama-3-70B layers on their Megatron TP shards (TP 1..8,
# seq 4096, micro-batch 1, bf16), run the layer check at TP 1 and 8, and
# compare the roofline with the measurements. Prints the figures the issue
# asks for: CUPTI vs CUDA events, layer vs sum of ops, roofline vs measured.
#
#   bash bench/loom_profile_llama.sh path/to/loom-profile [outdir]
#
# The db goes to outdir/<gpu>.json (default examples/profiles/), resumable.
set -eu
P=${1:?usage: loom_profile_llama.sh path/to/loom-profile [outdir]}
OUT=${2:-examples/profiles}
mkdir -p "$OUT"
CLUSTER=${CLUSTER:-dgx-h100-x1}
SEQ=${SEQ:-4096}
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1 | tr ' ' '-' | tr -cd 'A-Za-z0-9._-')
DB="$OUT/${gpu:-gpu}-llama3-seq$SEQ.json"
for m in llama-3-8b llama-3-70b; do
    echo "== $m: profiling every op, TP 1..8 -> $DB"
    "$P" --model "$m" --seq "$SEQ" --max-tp 8 -o "$DB" --resume | tail -3
done
for m in llama-3-8b llama-3-70b; do
    for tp in 1 8; do
        echo "== $m: layer check, TP $tp"
        "$P" --layer-check --model "$m" --seq "$SEQ" --tp "$tp"
    done
    echo "== $m: roofline vs measured ($CLUSTER)"
    "$P" --roofline-check "$DB" --model "$m" --seq "$SEQ" --cluster "$CLUSTER"
done
