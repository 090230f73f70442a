#!/usr/bin/env bash
# train_step_check.sh [path/to/loom] — loom's predicted step for the training
# steps bench/train_step_torch.py measured on one H100
# (examples/profiles/h100-train-step-llama-1b.json with FlashAttention-2,
# ...-cudnn.json with cuDNN's fused attention): a Llama-3.2-1B-shaped
# model (bench/data/llama-1b-untied.json), one GPU, eager PyTorch with
# SDPA, seq 4096-16384. Prints measured (FA2 and cuDNN runs), predicted with
# --attention-kernel fa2 and fused, and the errors of each against its run.
set -euo pipefail
cd "$(dirname "$0")/.."
loom=${1:-build/loom}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cat >"$tmp/one.json" <<'JSON'
{"format": "loom-cluster/1", "name": "h100-x1", "nodes": 1, "gpus_per_node": 1,
 "gpu": "H100-SXM5-80GB", "intra_node": {"bandwidth_GBps": 450, "latency_us": 3},
 "inter_node": {"bandwidth_GBps": 50, "latency_us": 8}}
JSON
printf '| seq | micro-batches | FA2 run s | loom fa2 s | error | cuDNN run s | loom fused s | error |\n| ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |\n'
python3 - "$loom" "$tmp/one.json" <<'PY'
import json, subprocess, sys
loom, cluster = sys.argv[1], sys.argv[2]
m = json.load(open("examples/profiles/h100-train-step-llama-1b.json"))
cu = {r["seq"]: r for r in json.load(open("examples/profiles/h100-train-step-llama-1b-cudnn.json"))["rows"]}
for r in m["rows"]:
    pred = {}
    for k in ("fa2", "fused"):
        out = subprocess.run([loom, "eval", "bench/data/llama-1b-untied.json", "--cluster", cluster,
                              "--tp", "1", "--pp", "1", "--dp", "1", "--mbs", "1",
                              "--gbs", str(r["micro_batches"]), "--seq", str(r["seq"]), "--zero", "0",
                              "--attention-kernel", k, "--json"], check=True, capture_output=True,
                             text=True).stdout
        pred[k] = json.loads(out)["step_time_s"]
    s, c = r["step_s"], cu[r["seq"]]["step_s"]
    print(f"| {r['seq']} | {r['micro_batches']} | {s:.3f} | {pred['fa2']:.3f} | {pred['fa2'] / s - 1:+.1%} "
          f"| {c:.3f} | {pred['fused']:.3f} | {pred['fused'] / c - 1:+.1%} |")
PY
