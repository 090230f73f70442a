#!/usr/bin/env bash
# plan_svg.sh — the pictures `loom plan --svg` draws agree with the plan and
# its table (issue #23), and render: the interleaved 70B plan, a serving
# (--mode infer) plan, the 405B plan on 2,048 nodes, the Mistral 32k-sequence
# plan and the bundled example are planned, each picture (and loom compare's
# chart) is rendered to PNG
# with rsvg-convert (Debian: librsvg2-bin) and tests/lib/check_picture.py
# checks the numbers printed in it: title and schedule total = the predicted
# step within 0.5%, the schedule named for what runs, a colour per rank, the
# parallelism (cp64 x tp4 …) the same in JSON, table and legend.
# The 405B and Mistral plans must show context parallelism where their ops
# split the sequence outside the tensor-parallel axis.
#
# Serving plans (--mode serve --svg, issue 17): four pictures of the Pareto
# fronts and the chosen deployment render, and tests/lib/check_serve_picture.py
# finds in each the plan JSON's numbers (the chosen req/s, per GPU and share
# within the SLOs in the title; every front point by tooltip and, through the
# axis ticks, by position) and the text's shapes in the key; a model path
# with & and < is escaped; a bad --svg or -o path fails, naming it, and
# leaves neither file.
#
# Skips (77) without rsvg-convert or python3.
# usage: bash tests/plan_svg.sh path/to/loom   (from the repo root)
set -u
LOOM=$(realpath "${1:?usage: plan_svg.sh path/to/loom}")
command -v rsvg-convert >/dev/null || { echo "rsvg-convert not found (apt-get install librsvg2-bin): skipped"; exit 77; }
command -v python3 >/dev/null || { echo "python3 not found: skipped"; exit 77; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0 passes=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

# picture NAME ARGS... : plans, renders, checks
picture() {
    local name=$1; shift
    if ! "$LOOM" plan "$@" -o "$tmp/$name.json" --svg "$tmp/$name.svg" >"$tmp/$name.txt" 2>"$tmp/$name.err"; then
        bad "loom plan $*: $(head -c 400 "$tmp/$name.err")"; return 1
    fi
    if rsvg-convert -o "$tmp/$name.png" "$tmp/$name.svg" 2>"$tmp/$name.rsvg" &&
       [ "$(head -c 4 "$tmp/$name.png" | od -An -c | tr -d ' ')" = "211PNG" ]; then ok
    else bad "$name.svg does not render: $(head -c 300 "$tmp/$name.rsvg")"; fi
    if python3 tests/lib/check_picture.py "$tmp/$name.json" "$tmp/$name.txt" "$tmp/$name.svg"; then ok
    else bad "$name: the picture disagrees with the plan"; fi
}

picture interleaved-70b llama-3-70b --cluster dgx-h100-x16 --gbs 512 --seq 4096 --zero 1
grep -q "interleaved" "$tmp/interleaved-70b.json" && ok || bad "the 70B plan is no longer interleaved"
picture serve-70b llama-3-70b --cluster dgx-h100-x1 --mode infer --gbs 64
picture 405b llama-3.1-405b --cluster dgx-h100-x2048 --gbs 2048 --seq 8192
picture mistral-32k mistral-7b --cluster dgx-h100-x2 --gbs 16 --seq 32768 --zero 1
picture example

# loom compare's chart, the suite's other picture: it renders
if "$LOOM" compare --suite tests/compare/small.json --no-timings --format json -o "$tmp/cmp.json" \
        --svg "$tmp/cmp.svg" >/dev/null 2>"$tmp/cmp.err" &&
   rsvg-convert -o "$tmp/cmp.png" "$tmp/cmp.svg" 2>>"$tmp/cmp.err" && [ -s "$tmp/cmp.png" ]; then ok
else bad "loom compare --svg does not render: $(head -c 300 "$tmp/cmp.err")"; fi

# context parallelism where the sequence is split: JSON, table and legend
for name in 405b mistral-32k; do
    cp=$(python3 -c 'import json,sys; print(max(s["context_parallel"] for s in json.load(open(sys.argv[1]))["stages"]))' "$tmp/$name.json")
    seqsplit=$(python3 - "$tmp/$name.json" <<'PY'
import json, re, sys
p = json.load(open(sys.argv[1]))
n = 0
for st in p["stages"]:
    tp = {a for a, r in enumerate(st["mesh_axes"]) if r == "tp"}
    for op in st.get("ops", []):
        for o in (op["specs"]["input"] + "," + op["specs"]["output"]).split(","):
            s = re.search(r"\bs@([01]+)", o); b = re.search(r"\bb@([01]+)", o)
            axes = {int(c) for c in s.group(1)} if s else set()
            axes -= {int(c) for c in b.group(1)} if b else set()
            if any(st["mesh"][a] > 1 and a not in tp for a in axes): n += 1
print(n)
PY
)
    if [ "$seqsplit" -gt 0 ]; then
        if [ "$cp" -gt 1 ] && grep -q " cp$cp " "$tmp/$name.txt" && grep -q "cp$cp x" "$tmp/$name.svg"; then ok
        else bad "$name: $seqsplit operands split the sequence outside TP, but CP is $cp / not shown"; fi
    else
        if [ "$cp" -eq 1 ]; then ok; else bad "$name: CP $cp without a sequence split"; fi
    fi
done
grep -Eq "cp[0-9]+ x tp[0-9]+" "$tmp/405b.txt" && ok || bad "405b table lacks a cp x tp mesh: $(sed -n 8,10p "$tmp/405b.txt")"

# ---- serving plans (--mode serve --svg, issue 17): the Pareto fronts and the
# chosen deployment. Each renders to PNG, and tests/lib/check_serve_picture.py
# checks the numbers in the picture against the plan JSON and the text.
serve_picture() {
    local name=$1; shift
    if ! "$LOOM" plan "$@" --mode serve -o "$tmp/$name.json" --svg "$tmp/$name.svg" \
            >"$tmp/$name.txt" 2>"$tmp/$name.err"; then
        bad "loom plan $* --mode serve: $(head -c 400 "$tmp/$name.err")"; return 1
    fi
    if rsvg-convert -o "$tmp/$name.png" "$tmp/$name.svg" 2>"$tmp/$name.rsvg" &&
       [ "$(head -c 4 "$tmp/$name.png" | od -An -c | tr -d ' ')" = "211PNG" ]; then ok
    else bad "$name.svg does not render: $(head -c 300 "$tmp/$name.rsvg")"; fi
    if python3 tests/lib/check_serve_picture.py "$tmp/$name.json" "$tmp/$name.txt" "$tmp/$name.svg"; then ok
    else bad "$name: the serving picture disagrees with the plan"; fi
}
# goodput under both SLOs, both kinds: long prompts under a tight TPOT pick
# a disaggregated deployment
serve_picture serve-long llama-3.1-70b --cluster dgx-h100-x2 --isl 8192 --osl 256 --ttft 3 --tpot 0.03
python3 -c 'import json,sys; sys.exit(json.load(open(sys.argv[1]))["serving"]["deployment"]["kind"] != "disaggregated")' \
    "$tmp/serve-long.json" && grep -q 'TPOT ≤ 30 ms' "$tmp/serve-long.svg" && ok ||
    bad "serve-long: no longer disaggregated, or the TPOT bound is not drawn"
# throughput of 64 clients, aggregated only, no SLO: one front, no attainment
serve_picture serve-70b-agg llama-3-70b --cluster dgx-h100-x1 --isl 1024 --osl 256 --concurrency 64 --disagg off
grep -q 'disaggregated front: none' "$tmp/serve-70b-agg.svg" && ! grep -q 'class="att"' "$tmp/serve-70b-agg.svg" && ok ||
    bad "serve-70b-agg: a disaggregated front or an SLO share drawn without them"
# an MoE on four nodes: attention-DP shapes, pools across the NIC, long key rows
serve_picture serve-dsv3 deepseek-v3 --cluster dgx-h200-x4 --weights fp8 --isl 2048 --osl 512 --ttft 2 --tpot 0.05
# a model path with XML's special characters: escaped, so the picture still renders
mkdir -p "$tmp/a&b<c>"
cp examples/models/llama-3-8b.json "$tmp/a&b<c>/m.json"
serve_picture serve-escaped "$tmp/a&b<c>/m.json" --cluster dgx-h100-x1 --isl 512 --osl 128 --concurrency 8
grep -q 'a&amp;b&lt;c&gt;' "$tmp/serve-escaped.svg" && ok || bad "serve-escaped: the model path is not escaped"
# a bad --svg path: an error naming it, and neither the picture nor the plan
for svgpath in "$tmp/no-such-dir/x.svg" "$tmp"; do
    rm -f "$tmp/bad.json"
    if "$LOOM" plan llama-3-8b --cluster dgx-h100-x1 --mode serve --isl 512 --osl 128 --concurrency 8 \
            -o "$tmp/bad.json" --svg "$svgpath" >"$tmp/bad.out" 2>"$tmp/bad.err"; then
        bad "--svg $svgpath: exit 0"
    elif ! grep -qF "$svgpath" "$tmp/bad.err" || [ -s "$tmp/bad.out" ] || [ -e "$tmp/bad.json" ] ||
         [ -e "$tmp/no-such-dir" ] || ls -A "$tmp" | grep -q 'loom-tmp'; then
        bad "--svg $svgpath: $(head -c 300 "$tmp/bad.err"); stdout $(wc -c <"$tmp/bad.out") bytes; files: $(ls -A "$tmp" | tr '\n' ' ')"
    else ok; fi
done
# and a bad -o beside a good --svg: the picture is not left either
rm -f "$tmp/good.svg"
"$LOOM" plan llama-3-8b --cluster dgx-h100-x1 --mode serve --isl 512 --osl 128 --concurrency 8 \
    -o "$tmp/no-such-dir/p.json" --svg "$tmp/good.svg" >/dev/null 2>"$tmp/bad.err"
rc=$?
if [ $rc -eq 0 ]; then bad "-o into a missing directory: exit 0"
elif [ -e "$tmp/good.svg" ]; then bad "a failed -o left the --svg picture"
else ok; fi

echo "plan_svg: $passes passed, $fails failed"
[ "$fails" -eq 0 ]
