#!/usr/bin/env bash
# serve_accuracy.sh [BUILD_DIR] [RECORDS] — the serving accuracy benchmark:
# predicted (request-level simulator, shipped serving calibration) vs
# published metrics of every record of RECORDS (default
# examples/calibration/serving-runs.json), with the median and max |error|
# per metric in-sample and leave-one-source-out (each source predicted by a
# fit of the others). Writes bench/serve_accuracy.md (the table the README
# shows) and prints it.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
records=${2:-examples/calibration/serving-runs.json}
[ -x "$build/loom" ] || { echo "serve_accuracy: $build/loom not found; build first" >&2; exit 1; }
[ -f "$records" ] || { echo "serve_accuracy: $records not found" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
"$build/loom" calibrate --serving "$records" --evaluate --loso --json >"$out/acc.json"
python3 - "$out/acc.json" "$records" >bench/serve_accuracy.md <<'PY'
import json, sys
o = json.load(open(sys.argv[1]))
recs = o["records"]
srcs = sorted({r["source"].split(",")[0] for r in recs})
engines = sorted({r["engine"] for r in recs})
pubs = "; ".join(srcs)
print(f"# Serving accuracy: {len(recs)} published runs, {len(srcs)} publishers ({pubs}), engines {', '.join(engines)}\n")
print(f"Predictor: {o['predictor']}; records: `{sys.argv[2]}`; regenerate with `bench/serve_accuracy.sh`.\n")
print("| metric | n | median \\|err\\| | max \\|err\\| | LOSO median | LOSO max |")
print("| --- | ---: | ---: | ---: | ---: | ---: |")
names = {"ttft_mean_s": "TTFT", "ttft_p99_s": "TTFT p99", "tpot_mean_s": "TPOT", "itl_mean_s": "ITL",
         "itl_p99_s": "ITL p99", "e2e_mean_s": "E2E", "output_tokens_per_s": "output tok/s",
         "requests_per_s": "requests/s", "ttft_p50_s": "TTFT p50", "tpot_p50_s": "TPOT p50",
         "itl_p50_s": "ITL p50", "e2e_p50_s": "E2E p50"}
for k, v in o["summary"].items():
    if not v["n"]:
        continue
    print(f"| {names.get(k, k)} | {v['n']} | {100*v['median_abs_err']:.1f}% | {100*v['max_abs_err']:.1f}% "
          f"| {100*v.get('loso_median_abs_err', 0):.1f}% | {100*v.get('loso_max_abs_err', 0):.1f}% |")
# the online runs (Poisson rate or closed-loop clients): the regime an
# operator plans for, and the one queueing shapes TTFT in
src = json.load(open(sys.argv[2]))
src = src["records"] if isinstance(src, dict) else src
online = [r for r in recs if src[r["index"]]["load"]["kind"] in ("qps", "concurrency")]
print(f"\nOnline runs only (Poisson rate or N clients; {len(online)} records):\n")
print("| metric | n | median \\|err\\| | LOSO median |")
print("| --- | ---: | ---: | ---: |")
for k in ["ttft_mean_s", "ttft_p50_s", "tpot_mean_s", "tpot_p50_s", "itl_mean_s", "output_tokens_per_s"]:
    ins = [abs(r[k]["predicted"] / r[k]["published"] - 1) for r in online if k in r and "predicted" in r[k]]
    lo = [abs(r[k]["predicted_loso"] / r[k]["published"] - 1) for r in online if k in r and "predicted_loso" in r[k]]
    if ins:
        import statistics
        print(f"| {names[k]} | {len(ins)} | {100*statistics.median(ins):.1f}% | "
              + (f"{100*statistics.median(lo):.1f}% |" if lo else "– |"))
print("\n## Per publisher (median \\|err\\| in-sample / leave-one-source-out)\n")
import statistics
keys = ["ttft_mean_s", "tpot_mean_s", "itl_mean_s", "output_tokens_per_s"]
print("| publisher | n | " + " | ".join(names[k] for k in keys) + " |")
print("| --- | ---: | " + " | ".join("---:" for _ in keys) + " |")
for src in srcs:
    rows = [r for r in recs if r["source"].split(",")[0] == src]
    cells = []
    for k in keys:
        ins = [abs(r[k]["predicted"] / r[k]["published"] - 1) for r in rows if k in r and "predicted" in r[k]]
        lo = [abs(r[k]["predicted_loso"] / r[k]["published"] - 1) for r in rows if k in r and "predicted_loso" in r[k]]
        cells.append(f"{100*statistics.median(ins):.0f}% / {100*statistics.median(lo):.0f}%" if ins and lo else "–")
    print(f"| {src[:60]} | {len(rows)} | " + " | ".join(cells) + " |")
print("\n## Per record (predicted / published − 1; LOSO in brackets)\n")
cols = ["ttft_mean_s", "tpot_mean_s", "itl_mean_s", "output_tokens_per_s"]
print("| source | id | engine | gpu × n | " + " | ".join(names[c] for c in cols) + " |")
print("| --- | --- | --- | --- | " + " | ".join("---:" for _ in cols) + " |")
for r in recs:
    cells = []
    for c in cols:
        m = r.get(c)
        if not m or "predicted" not in m:
            cells.append("–")
            continue
        e = 100 * (m["predicted"] / m["published"] - 1)
        l = m.get("predicted_loso")
        cells.append(f"{e:+.0f}%" + (f" ({100*(l/m['published']-1):+.0f}%)" if l else ""))
    print(f"| {r['source']} | {r['source_id']} | {r['engine']} | {r['gpu']} × {r['num_gpus']} | " + " | ".join(cells) + " |")
PY
cat bench/serve_accuracy.md
