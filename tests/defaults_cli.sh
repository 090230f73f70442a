#!/usr/bin/env bash
# defaults_cli.sh — one set of defaults for loom plan and loom eval, printed
# where they were assumed, and warnings on stderr for what is legal but
# probably a mistake (issue #23):
#   - plan and eval on the same model and cluster with no options assume
#     seq 4096 and gbs 256 (eval also ZeRO-1; plan searches it), and say so
#     ("assumed: …");
#   - a NIC's Gb/s written as GB/s (400), a batch too small for the
#     cluster, a sequence beyond the model's positions (with rope_scaling;
#     without it the model reader refuses): a warning each,
#     the command still succeeds;
#   - loom export given a model says it is a model, not a plan;
#   - link bandwidths: a warning naming the file and field when unusual, an
#     error past the GPU's HBM bandwidth;
#   - model and cluster names are case-insensitive, and a typo gets the
#     nearest names ("did you mean dgx-h100-x2?") and the list (issue #21).
# usage: bash tests/defaults_cli.sh path/to/loom   (from the repo root)
set -u
LOOM=$(realpath "${1:?usage: defaults_cli.sh path/to/loom}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0 passes=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }
run() {
    local want=$1; shift
    "$LOOM" "$@" >"$tmp/out" 2>"$tmp/err"
    local got=$?
    if [ "$got" -eq "$want" ]; then ok; else bad "loom $* exited $got, expected $want: $(head -c 400 "$tmp/err")"; fi
}
has() { if grep -qF -- "$2" "$1"; then ok; else bad "$1 lacks '$2': $(head -c 400 "$1")"; fi; }
lacks() { if grep -qF -- "$2" "$1"; then bad "$1 has '$2'"; else ok; fi; }

run 0 plan llama-3-8b --cluster dgx-h100-x2
has "$tmp/out" "assumed: seq 4096, gbs 256 (loom's defaults"
has "$tmp/out" "gbs 256 x seq 4096"
has "$tmp/out" ", ZeRO-"   # searched, so not assumed
lacks "$tmp/err" "warning"
run 0 eval llama-3-8b --cluster dgx-h100-x2
has "$tmp/out" "assumed: seq 4096, gbs 256, ZeRO-1"
has "$tmp/out" "gbs 256"
has "$tmp/out" "seq 4096"
has "$tmp/out" "vpp 1, ZeRO-1"
run 0 eval llama-3-8b --cluster dgx-h100-x2 --json
python3 -c 'import json,sys; c=json.load(open(sys.argv[1]))["config"]; sys.exit(0 if (c["seq"],c["gbs"],c["zero"])==(4096,256,1) else 1)' "$tmp/out" && ok || bad "eval --json defaults: $(head -c 300 "$tmp/out")"
# ... and in the JSON: the plan's inputs.assumed, eval's and inspect's "assumed"
jq_py() { python3 -c "import json,sys; d=json.load(open(sys.argv[1])); sys.exit(0 if ($1) else 1)" "$tmp/out"; }
run 0 plan llama-3-8b --cluster dgx-h100-x2 --json
# the plan searches the ZeRO stage, so it does not assume one
jq_py 'd["inputs"]["assumed"] == ["seq", "gbs"] and d["inputs"]["seq"] == 4096 and d["inputs"]["gbs"] == 256' && ok || bad "plan --json assumed: $(head -c 300 "$tmp/out")"
run 0 eval llama-3-8b --cluster dgx-h100-x2 --json
jq_py 'd["assumed"] == ["seq", "gbs", "zero"]' && ok || bad "eval --json assumed"
run 0 inspect llama-3-8b --json
jq_py 'd["assumed"] == ["seq", "batch"] and d["seq"] == 4096' && ok || bad "inspect --json assumed"
run 0 inspect llama-3-8b
has "$tmp/out" "assumed: seq 4096, batch 1"
# given values are not "assumed"
run 0 plan llama-3-8b --cluster dgx-h100-x2 --seq 2048 --gbs 64 --zero 2
lacks "$tmp/out" "assumed:"
has "$tmp/out" "ZeRO-2"
run 0 plan llama-3-8b --cluster dgx-h100-x2 --seq 2048 --gbs 64 --zero 2 --json
jq_py '"assumed" not in d["inputs"]' && ok || bad "plan --json with every input given lists assumed ones"
run 0 plan llama-3-8b --cluster dgx-h100-x2 --gbs 64 --json
jq_py 'd["inputs"]["assumed"] == ["seq"]' && ok || bad "plan --json --gbs 64: assumed"
run 0 eval llama-3-8b --cluster dgx-h100-x2 --seq 2048 --gbs 64 --zero 0 --json
jq_py 'd["assumed"] == []' && ok || bad "eval --json with every input given"
run 2 plan llama-3-8b --cluster dgx-h100-x2 --search-zero
has "$tmp/err" "--search-zero"

# a NIC of 400 "GB/s" (400 Gb/s meant)
cat >"$tmp/fast-nic.json" <<'J'
{ "format": "loom-cluster/1", "name": "fast-nic", "nodes": 2, "gpus_per_node": 8,
  "gpu": "H100-SXM5-80GB",
  "intra_node": { "bandwidth_GBps": 450, "latency_us": 3 },
  "inter_node": { "bandwidth_GBps": 400, "latency_us": 8 } }
J
run 0 plan llama-3-8b --cluster "$tmp/fast-nic.json"
has "$tmp/err" "warning: $tmp/fast-nic.json: \$.inter_node.bandwidth_GBps: 400 GB/s per GPU"
has "$tmp/err" "400 Gb/s is 50 GB/s"
run 0 eval llama-3-8b --cluster "$tmp/fast-nic.json"
has "$tmp/err" "warning: $tmp/fast-nic.json: \$.inter_node.bandwidth_GBps: 400 GB/s per GPU"
# an intra-node link below PCIe 3 (2 GB/s), named by its field; a NIC of
# 1 Mb/s-class 0.001 GB/s (legal: a slow-link experiment) warns too
cat >"$tmp/slow.json" <<'J'
{ "format": "loom-cluster/1", "nodes": 2, "gpus_per_node": 8, "gpu": "H100",
  "intra_node": { "bandwidth_GBps": 2 }, "inter_node": { "bandwidth_GBps": 0.001 } }
J
run 0 eval llama-3-8b --cluster "$tmp/slow.json" --tp 8
has "$tmp/err" "warning: $tmp/slow.json: \$.intra_node.bandwidth_GBps: 2 GB/s per GPU is outside what NVLink, xGMI or PCIe give"
has "$tmp/err" "warning: $tmp/slow.json: \$.inter_node.bandwidth_GBps: 0.001 GB/s per GPU is outside what a NIC gives (1-100 GB/s)"
lacks "$tmp/err" "Gb/s written as GB/s"
# beyond the GPU's HBM bandwidth: impossible, an error naming file and field
sed 's/"bandwidth_GBps": 400/"bandwidth_GBps": 4000/' "$tmp/fast-nic.json" >"$tmp/nic-4000.json"
run 1 plan llama-3-8b --cluster "$tmp/nic-4000.json"
has "$tmp/err" "$tmp/nic-4000.json: \$.inter_node.bandwidth_GBps: expected at most 3350"
# presets are within range: no warning
run 0 eval llama-3-8b --cluster dgx-h100-x2 --tp 8
lacks "$tmp/err" "warning"
# a batch too small for 128 GPUs
run 0 plan llama-3-8b --cluster dgx-h100-x16 --gbs 7
has "$tmp/err" "warning: a batch of 7 sequences cannot feed 128 GPUs"
# beyond the model's positions (Llama-3-8B: 8192): refused without rope_scaling
# (the model reader), planned with a warning when the config scales RoPE
run 1 plan llama-3-8b --cluster dgx-h100-x2 --seq 16384 --gbs 16
has "$tmp/err" "no rope_scaling"
python3 -c 'import json,sys; m=json.load(open("examples/models/llama-3-8b.json")); m["rope_scaling"]={"rope_type":"linear","factor":4.0}; json.dump(m,open(sys.argv[1],"w"))' "$tmp/scaled.json"
run 0 plan "$tmp/scaled.json" --cluster dgx-h100-x2 --seq 16384 --gbs 16
has "$tmp/err" "warning: sequence 16384 is beyond the model's 8192 positions"

# Names (issue #21): models and clusters case-insensitive; a typo gets the
# nearest names and the list
run 0 inspect LLAMA-3-8B
has "$tmp/out" "llama: 32 layers"
run 1 plan lama-3-70b --cluster dgx-h100-x1          # one edit from llama-3-70b, two from llama-2-70b
has "$tmp/err" "did you mean llama-3-70b?"
has "$tmp/err" "known: "
run 0 plan llama-3-8b --cluster DGX-H100-X2 --gbs 32
has "$tmp/out" "on dgx-h100-x2 (16 x H100"
run 0 plan llama-3-8b --cluster DGX-H100-x16.JSON --gbs 128   # the bundled file
has "$tmp/out" "on dgx-h100-x16 (128 x H100"
# one edit each: a missing 0, a missing x, a missing "x" after the rack kind
for typo in "dgx-h10-x2 dgx-h100-x2" "dgx-h100-16 dgx-h100-x16" "mi300-x4 mi300x-x4" \
            "gb200-nvl72 gb200-nvl72-x1" "pcie-h100-x3 pcie-h100-x2"; do
    set -- $typo
    run 1 plan llama-3-8b --cluster "$1"
    has "$tmp/err" "loom plan: cluster '$1': not a preset, a file or a bundled cluster; did you mean $2?"
done
# far from every name by edits, but contained in one: h800 is in dgx-h800
run 1 eval llama-3-8b --cluster h800-x256
has "$tmp/err" "did you mean dgx-h800-x256?"
has "$tmp/err" "presets: dgx-a100-80g-xN, dgx-a100-40g-xN, dgx-h100-xN"
has "$tmp/err" "gb200-nvl72-xN; bundled files: dgx-a100-80g-x4, dgx-h100-x16, pcie-h100-x2"
run 1 shard gpt2 --mesh 2x4 --cluster zzz
has "$tmp/err" "loom shard: cluster 'zzz': not a preset, a file or a bundled cluster; presets:"
lacks "$tmp/err" "did you mean"
# a preset with a bad node count keeps its own message
run 1 plan llama-3-8b --cluster dgx-h100-x0
has "$tmp/err" "expected dgx-h100-xN with N a node count in [1, 65536]"

# export of a model
run 1 export examples/models/llama-3-8b.json --to megatron
has "$tmp/err" "is a model, not a plan"
has "$tmp/err" "loom plan examples/models/llama-3-8b.json"

echo "defaults_cli: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
