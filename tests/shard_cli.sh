#!/bin/bash
# shard_cli.sh — `loom shard` end to end.
#
#  - usage errors exit 2 naming the problem; unknown models, clusters too
#    small for the mesh and bad cluster files exit 1 naming them;
#  - Llama-3-8B on 1x8 (batch 1, seq 4096) prints Megatron tensor
#    parallelism: q/k/v and gate/up split on heads / kv heads / f, o_proj and
#    down_proj on their contraction;
#  - --json has the documented fields, parses, and is identical from run to
#    run except for the measured solve time;
#  - --debug writes the LP file; an impossible --memory-budget exits 3 and
#    reports "infeasible"; --inference and --megatron run.
#
# usage: bash tests/shard_cli.sh path/to/loom   (run from the repo root)
set -u
LOOM=${1:?usage: shard_cli.sh path/to/loom}
case $LOOM in /*) ;; *) LOOM=$(pwd)/$LOOM ;; esac
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. "$(dirname "$0")/lib/cli.sh"

# ---- usage and bad input -------------------------------------------------------------------
run 0 shard --help
has "$tmp/out" "--mesh AxB" "--memory-budget"
run 2 shard
has "$tmp/err" "missing MODEL"
run 2 shard llama-3-8b
has "$tmp/err" "missing --mesh AxB"
run 2 shard llama-3-8b --mesh 8
has "$tmp/err" "--mesh expects AxB" "got '8'"
run 2 shard llama-3-8b --mesh 0x8
has "$tmp/err" "got '0x8'"
run 2 shard llama-3-8b --mesh 1x8 --frobnicate
has "$tmp/err" "unknown option '--frobnicate'"
run 2 shard llama-3-8b --mesh 1x8 --batch 0
has "$tmp/err" "--batch"
run 1 shard no-such-model --mesh 1x8
has "$tmp/err" "no-such-model" "no bundled model"
run 1 shard llama-3-8b --mesh 4x8 --cluster dgx-h100-x1
has "$tmp/err" "needs 32 GPUs" "has 8"
printf '{"format": "loom-cluster/1", "nodes": 1}\n' >"$tmp/bad-cluster.json"
run 1 shard llama-3-8b --mesh 1x8 --cluster "$tmp/bad-cluster.json"
has "$tmp/err" "bad-cluster.json"
run 2 shard llama-3-8b --mesh 1x8 --layer 99
has "$tmp/err" "--layer 99"

# ---- Megatron tensor parallelism on one node -------------------------------------------------
run 0 shard llama-3-8b --mesh 1x8 --seq 4096 --batch 1
has "$tmp/out" "optimal" "15 ops ->" \
    "model.layers.0.self_attn.q_proj" "[h heads@1 dh]" "[h kvh@1 dh]" "[heads@1 dh h]" \
    "[h f@1]" "[f@1 h]"
cp "$tmp/out" "$tmp/text"

# ---- the shared defaults: seq 4096 as loom plan (GPT-2: its 1024 positions),
# batch 1, said in the text and listed in the JSON; a loom graph assumes nothing
run 0 shard llama-3-8b --mesh 1x8
has "$tmp/out" "assumed: seq 4096, batch 1" "batch 1 x seq 4096"
run 0 shard gpt2 --mesh 2x4 --json
if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if (d["seq"], d["batch"], d["assumed"]) == (1024, 1, ["seq", "batch"]) else 1)' "$tmp/out"; then ok; else bad "shard gpt2 --json defaults: $(head -c 300 "$tmp/out")"; fi
run 0 shard tiny-gpt.graph --mesh 1x2 --json
if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if d["assumed"] == [] and d["seq"] == 8 else 1)' "$tmp/out"; then ok; else bad "shard of a loom graph assumed something"; fi

# ---- JSON ------------------------------------------------------------------------------------
run 0 shard llama-3-8b --mesh 1x8 --seq 4096 --batch 1 --json
cp "$tmp/out" "$tmp/j1"
if python3 - "$tmp/j1" <<'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
for k in ("status", "objective_s", "solve_time_s", "ilp", "ops", "comm_bytes_per_layer_fwd"):
    assert k in d, k
for k in ("variables", "constraints", "ops_before_merge", "ops_after_merge"):
    assert isinstance(d["ilp"][k], (int, float)) and d["ilp"][k] > 0, k
assert d["status"] == "optimal"
assert d["ilp"]["ops_before_merge"] == 15 and d["ilp"]["ops_after_merge"] < 15
ops = {o["name"]: o for o in d["ops"]}
down = ops["model.layers.0.mlp.down_proj"]
assert down["specs"]["weights"] == ["f@1 h"], down
assert ops["model.layers.0.self_attn.q_proj"]["specs"]["weights"] == ["h heads@1 dh"]
for o in d["ops"]:
    assert set(o["specs"]) == {"inputs", "outputs", "weights"}
    assert o["strategy"]
# two all-reduces' worth of traffic per layer forward: RS + AG pairs or ARs of b·s·h bf16
assert d["comm_bytes_per_layer_fwd"] >= 2 * 4096 * 4096 * 2
assert d["objective_s"] > 0
EOF
then ok; else bad "shard --json: unexpected content"; fi
run 0 shard llama-3-8b --mesh 1x8 --seq 4096 --batch 1 --json
grep -v solve_time_s "$tmp/j1" >"$tmp/j1s"
grep -v solve_time_s "$tmp/out" >"$tmp/j2s"
if cmp -s "$tmp/j1s" "$tmp/j2s"; then ok; else bad "shard --json differs between runs"; fi

# ---- --debug, budgets, modes -------------------------------------------------------------------
model=$(pwd)/examples/models/llama-3-8b.json
(cd "$tmp" && "$LOOM" shard "$model" --mesh 2x4 --seq 1024 --debug >/dev/null 2>"$tmp/err")
if [ -f "$tmp/loom-shard.L1.lp" ]; then ok; else bad "--debug wrote no loom-shard.L1.lp"; fi
[ -f "$tmp/loom-shard.L1.lp" ] && has "$tmp/loom-shard.L1.lp" "Minimize" "Subject To"
has "$tmp/err" "loom-shard.L1.lp"
ls -A "$tmp" | grep -qE '\.tmp\.|loom-tmp' && bad "--debug left a temporary file" || ok

run 3 shard llama-3-8b --mesh 1x8 --seq 1024 --memory-budget 0.001
has "$tmp/out" "infeasible"
has "$tmp/err" "does not fit"
run 3 shard llama-3-8b --mesh 1x8 --seq 1024 --memory-budget 0.001 --json
if python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["status"]=="infeasible" and d["objective_s"] is None and "ops" not in d' "$tmp/out"
then ok; else bad "infeasible --json: $(head -c 300 "$tmp/out")"; fi
run 0 shard llama-3-8b --mesh 1x8 --seq 1024 --memory-budget 40
has "$tmp/out" "optimal"

run 0 shard llama-3-8b --mesh 1x8 --seq 1024 --inference
has "$tmp/out" "inference (forward)" "gradient sync    0.000 ms"
run 0 shard llama-3-8b --mesh 2x4 --seq 1024 --batch 4 --micro-batches 8 --megatron
has "$tmp/out" "Megatron space" "optimal"
run 0 shard llama-3-8b --mesh 1x8 --seq 1024 --unfused-attention
has "$tmp/out" "self_attn.scores" "self_attn.softmax" "20 ops ->"
run 0 shard mixtral-8x7b --mesh 1x8 --seq 1024
has "$tmp/out" "block_sparse_moe.experts.w1" "[e@1 h f]"
run 0 shard gpt2 --mesh 2x2 --seq 1024 --batch 8 --cluster dgx-a100-80g-x4
has "$tmp/out" "dgx-a100-80g-x4" "optimal"

finish shard_cli
