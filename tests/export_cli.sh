#!/bin/bash
# export_cli.sh — `loom export` and `loom eval --from-megatron` end to end.
#
#  - usage errors exit 2; a bad plan exits 1 naming the file; a plan the
#    target cannot run exits 1, lists the obstacles and leaves no file (not
#    even a temporary one) at -o;
#  - the plans of tests/golden/export/ export byte for byte to the golden
#    files, on stdout and with -o;
#  - the Megatron-LM scripts are valid bash, and run with a stand-in torchrun
#    on PATH they pass exactly the golden arguments plus the caller's;
#  - TOML, YAML and JSON outputs parse (python3);
#  - eval --from-megatron on an exported script predicts the same as eval
#    with the same configuration given as options (round trip), and refuses
#    unknown or contradictory flags with the file and line;
#  - --nearest re-plans a plan the target cannot run and reports the cost.
#
# usage: bash tests/export_cli.sh path/to/loom   (run from the repo root)
set -u
LOOM=${1:?usage: export_cli.sh path/to/loom}
G=tests/golden/export
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. tests/lib/cli.sh

# ---- usage ------------------------------------------------------------------------------
run 2 export
has "$tmp/err" "missing PLAN"
run 2 export $G/llama-3-70b-pp4.plan.json
has "$tmp/err" "missing --to"
run 2 export $G/llama-3-70b-pp4.plan.json --to slurm
has "$tmp/err" "--to expects megatron, vllm, deepspeed or torchtitan, got 'slurm'"
run 2 export $G/llama-3-70b-pp4.plan.json --to megatron --frobnicate
has "$tmp/err" "unknown option '--frobnicate'"
run 0 export --help
has "$tmp/out" "--nearest"

# ---- bad plans: exit 1, the file named, nothing written ------------------------------------
printf '{ "format": "loom-plan/1", "inputs": { ]' >"$tmp/broken.plan.json"
run 1 export "$tmp/broken.plan.json" --to megatron -o "$tmp/x.sh"
has "$tmp/err" "$tmp/broken.plan.json:1:"
[ -e "$tmp/x.sh" ] && bad "a file was written for a broken plan" || ok
run 1 export "$tmp/missing.plan.json" --to megatron
has "$tmp/err" "$tmp/missing.plan.json"
# a plan whose memory exceeds the GPU: the reader's validation refuses it
sed 's/"gpu_memory_bytes":\t85899345920/"gpu_memory_bytes":\t1073741824/' $G/llama-3-70b-tp8.plan.json >"$tmp/small.plan.json"
run 1 export "$tmp/small.plan.json" --to megatron -o "$tmp/x.sh"
has "$tmp/err" "$tmp/small.plan.json" "exceeds"
[ -e "$tmp/x.sh" ] && bad "a file was written for an invalid plan" || ok

# ---- goldens ------------------------------------------------------------------------------------
ext() { case $1 in megatron) echo sh ;; vllm) echo yaml ;; deepspeed) echo json ;; torchtitan) echo toml ;; esac; }
for golden in $G/*.plan.json; do
    name=$(basename "$golden" .plan.json)
    for t in megatron vllm deepspeed torchtitan; do
        want=$G/$name.$t.$(ext $t)
        if [ -f "$want" ]; then
            run 0 export "$golden" --to $t || continue
            cmp -s "$tmp/out" "$want" && ok || bad "export $name --to $t: stdout differs from $want"
            out=$tmp/$name.$t.$(ext $t)
            run 0 export "$golden" --to $t -o "$out" || continue
            cmp -s "$out" "$want" && ok || bad "export $name --to $t -o: file differs from $want"
            [ -s "$tmp/out" ] && bad "export -o also wrote to stdout" || ok
        else
            # no golden: the target cannot run this plan; obstacles, exit 1, no file
            run 1 export "$golden" --to $t -o "$tmp/refused" || continue
            has "$tmp/err" "$t cannot run this plan as planned:" "  - "
            [ -e "$tmp/refused" ] && bad "export $name --to $t: wrote a file despite obstacles" || ok
            ls -A "$tmp" | grep -q "refused.*\(tmp\)" && bad "temporary file left behind" || ok
        fi
    done
done
run 1 export $G/llama-3-70b-pp4.plan.json --to deepspeed
has "$tmp/err" "TP 8 with PP 4" "sequence parallelism" "selective recompute" "uneven pipeline stages" \
    "nothing written; --nearest"
run 1 export $G/llama-3-70b-pp4.plan.json --to vllm
has "$tmp/err" "the plan is a training plan"
run 0 export $G/llama-3-70b-serve.plan.json --to vllm
has "$tmp/err" "note: uneven stages: export VLLM_PP_LAYER_PARTITION=41,39"
# -o into a directory that does not exist: exit 1, nothing anywhere
run 1 export $G/llama-3-70b-tp8.plan.json --to megatron -o "$tmp/no/such/dir/train.sh"
has "$tmp/err" "$tmp/no/such/dir/train.sh"

# ---- the files are what their runtimes parse ---------------------------------------------------
for f in $G/*.torchtitan.toml; do
    python3 -c 'import sys, tomllib; d = tomllib.load(open(sys.argv[1], "rb")); assert d["parallelism"]["tensor_parallel_degree"] >= 1' "$f" \
        && ok || bad "$f is not valid TOML"
done
for f in $G/*.deepspeed.json; do
    python3 -c 'import sys, json; d = json.load(open(sys.argv[1])); assert d["train_batch_size"] == d["train_micro_batch_size_per_gpu"] * d["gradient_accumulation_steps"] * (d["train_batch_size"] // (d["train_micro_batch_size_per_gpu"] * d["gradient_accumulation_steps"]))' "$f" \
        && ok || bad "$f is not valid JSON"
done
if python3 -c 'import yaml' 2>/dev/null; then
    for f in $G/*.vllm.yaml; do
        python3 -c 'import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); assert d["tensor-parallel-size"] * d["pipeline-parallel-size"] * d["data-parallel-size"] >= 1' "$f" \
            && ok || bad "$f is not valid YAML"
    done
fi

# The Megatron scripts are valid bash and, run with a stand-in torchrun, pass
# exactly their arguments (from the golden) plus the caller's.
mkdir -p "$tmp/bin"
cat >"$tmp/bin/torchrun" <<'EOF'
#!/bin/bash
printf '%s\n' "$@" >"$TORCHRUN_LOG"
EOF
chmod +x "$tmp/bin/torchrun"
for f in $G/*.megatron.sh; do
    bash -n "$f" && ok || bad "$f: bash syntax error"
    TORCHRUN_LOG="$tmp/args" PATH="$tmp/bin:$PATH" bash "$f" --data-path /data/x "--lr" 3e-4 || bad "$f did not run"
    # every "--name value" line of the script body is one or two argv entries, in order
    want=$(sed -n '/pretrain_gpt.py/,$p' "$f" | sed -e 's/^ *//' -e 's/ *\\$//' -e '/"\$@"/d' | tr -d "'" | tr ' ' '\n')
    got=$(sed -n '/pretrain_gpt.py/,$p' "$tmp/args" | sed '/^--data-path$/,$d')
    [ "$want" = "$got" ] && ok || bad "$f: torchrun got other arguments than the script lists"
    tail -4 "$tmp/args" | tr '\n' ' ' | grep -qF -- "--data-path /data/x --lr 3e-4" && ok || bad "$f: extra arguments not passed through"
done

# ---- eval --from-megatron ---------------------------------------------------------------------
# json FILE KEY: a top-level number of a loom eval --json output
json() { python3 -c 'import json, sys; print(repr(json.load(open(sys.argv[1]))[sys.argv[2]]))' "$1" "$2"; }

# The exported script read back gives what the same configuration given as
# options gives: same step time, same memory, to the last digit.
S=$G/llama-3-70b-tp8.megatron.sh
run 0 eval --cluster dgx-h100-x8 --from-megatron "@$S" --json && cp "$tmp/out" "$tmp/imported.json"
run 0 eval llama-3-70b --cluster dgx-h100-x8 --tp 8 --pp 1 --mbs 1 --gbs 64 --seq 8192 \
    --recompute full --zero 2 --json && cp "$tmp/out" "$tmp/flags.json"
for k in step_time_s memory_per_gpu_bytes model_tflops_per_gpu microbatches; do
    a=$(json "$tmp/imported.json" $k); b=$(json "$tmp/flags.json" $k)
    [ "$a" = "$b" ] && ok || bad "eval --from-megatron $S: $k $a, with options $b"
done
# the model built from the shape arguments is the bundled config's (MoE too)
S=$G/mixtral-8x7b-ep8.megatron.sh
run 0 eval --cluster dgx-h100-x4 --from-megatron "$S" --json && cp "$tmp/out" "$tmp/built.json"
run 0 eval mixtral-8x7b --cluster dgx-h100-x4 --from-megatron "$S" --json && cp "$tmp/out" "$tmp/loaded.json"
for k in step_time_s memory_per_gpu_bytes; do
    a=$(json "$tmp/built.json" $k); b=$(json "$tmp/loaded.json" $k)
    [ "$a" = "$b" ] && ok || bad "eval --from-megatron $S: $k $a built from the flags, $b from the model"
done
# a launch line on the command line, bare arguments and the world from the cluster
run 0 eval gpt2 --cluster dgx-h100-x1 --from-megatron "--micro-batch-size 4 --global-batch-size 64 \
    --num-layers 12 --hidden-size 768 --num-attention-heads 12 --seq-length 1024" --json
has "$tmp/out" '"dp":	8' '"gbs":	64'
# round trip through a plan: loom plan -> export -> eval --from-megatron predicts the plan's step
run 0 plan llama-3-8b --cluster dgx-h100-x1 --gbs 64 --seq 4096 --space megatron --memory-headroom 0 -o "$tmp/rt.plan.json"
run 0 export "$tmp/rt.plan.json" --to megatron -o "$tmp/rt.sh"
run 0 eval --cluster dgx-h100-x1 --from-megatron "@$tmp/rt.sh" --json
python3 - "$tmp/rt.plan.json" "$tmp/out" <<'PY' && ok || bad "round trip: eval --from-megatron differs from the plan's prediction"
import json, sys
plan = json.load(open(sys.argv[1]))["predicted"]
ev = json.load(open(sys.argv[2]))
assert abs(ev["step_time_s"] - plan["step_time_s"]) <= 1e-9 * plan["step_time_s"], (ev["step_time_s"], plan["step_time_s"])
assert ev["memory_per_gpu_bytes"] == plan["memory_per_gpu_bytes"], (ev["memory_per_gpu_bytes"], plan["memory_per_gpu_bytes"])
PY
# and with DeepSeek-V3: MLA ranks and the sigmoid router in the script, an
# uneven --pipeline-model-parallel-layout that eval reads back, memory exact
run 0 plan deepseek-v3 --cluster dgx-h100-x32 --gbs 256 --seq 4096 --space megatron -o "$tmp/ds.plan.json"
run 0 export "$tmp/ds.plan.json" --to megatron -o "$tmp/ds.sh"
has "$tmp/ds.sh" "--q-lora-rank 1536" "--kv-lora-rank 512" "--qk-head-dim 128" \
    "--qk-pos-emb-head-dim 64" "--v-head-dim 128" "--moe-router-score-function sigmoid"
run 0 eval --cluster dgx-h100-x32 --from-megatron "@$tmp/ds.sh" --json
python3 - "$tmp/ds.plan.json" "$tmp/out" <<'PY' && ok || bad "DeepSeek round trip: eval --from-megatron differs from the plan's prediction"
import json, sys
plan = json.load(open(sys.argv[1]))["predicted"]
ev = json.load(open(sys.argv[2]))
# planner and evaluator: 0.7% apart on this MoE plan (tests/test_consistency.c: dense 0.16%)
assert abs(ev["step_time_s"] / plan["step_time_s"] - 1) < 0.01, (ev["step_time_s"], plan["step_time_s"])
assert ev["memory_per_gpu_bytes"] == plan["memory_per_gpu_bytes"], (ev["memory_per_gpu_bytes"], plan["memory_per_gpu_bytes"])
PY
# errors name the file and line, the flag, and a hint
printf '#!/bin/bash\nTP=8\ntorchrun --nproc-per-node 8 pretrain_gpt.py \\\n  --tensor-model-parallel-size $TP \\\n  --pipline-model-parallel-size 2\n' >"$tmp/typo.sh"
run 1 eval --cluster dgx-h100-x1 --from-megatron "$tmp/typo.sh"
has "$tmp/err" "$tmp/typo.sh:5: unknown Megatron-LM argument --pipline-model-parallel-size (did you mean --pipeline-model-parallel-size?)"
run 1 eval llama-3-8b --cluster dgx-h100-x1 --from-megatron "--micro-batch-size 1 --num-layers 32 \
    --hidden-size 4096 --num-attention-heads 32 --seq-length 4096 --sequence-parallel"
has "$tmp/err" "--sequence-parallel needs tensor parallelism, but --tensor-model-parallel-size is 1"
run 1 eval llama-3-70b --cluster dgx-h100-x1 --from-megatron "@$tmp/rt.sh"
has "$tmp/err" "--num-layers 32 but the model has 80"
run 1 eval --cluster dgx-h100-x2 --from-megatron "@$tmp/rt.sh"
has "$tmp/err" "the launch line starts 8 GPUs but the cluster has 16"
run 1 eval --cluster dgx-h100-x1 --from-megatron "--micro-batch-size 1 --num-layers 2 --hidden-size 64 \
    --num-attention-heads 4 --seq-length 128"
has "$tmp/err" "does not describe the whole model"

# ---- --nearest -------------------------------------------------------------------------------------
# torchtitan cannot shard only the optimizer: planned again (and adjusted if
# need be), written, and the cost reported next to the plan's 12.5 s
run 0 export $G/llama-3-70b-pp4.plan.json --to torchtitan --nearest -o "$tmp/near.toml"
has "$tmp/err" "torchtitan cannot run this plan as planned:" "ZeRO-1" \
    "nearest plan torchtitan can run (planned again with --space megatron" \
    "predicted step time: 12.5 s planned,"
python3 -c 'import sys, tomllib; tomllib.load(open(sys.argv[1], "rb"))' "$tmp/near.toml" && ok || bad "--nearest wrote no valid TOML"
has "$tmp/near.toml" "data_parallel_shard_degree" "# loom predicts"
# DeepSpeed: whatever the nearest Megatron-style plan is, either it is made
# runnable (a valid config written) or the obstacle is named and nothing is
"$LOOM" export $G/llama-3-70b-pp4.plan.json --to deepspeed --nearest -o "$tmp/near.json" >"$tmp/out" 2>"$tmp/err"
rc=$?
case $rc in
    0) has "$tmp/err" "nearest plan deepspeed can run"
       python3 -c 'import sys, json; json.load(open(sys.argv[1]))' "$tmp/near.json" && ok || bad "--nearest wrote no valid JSON" ;;
    1) has "$tmp/err" "--nearest: even the nearest Megatron-style plan cannot run on deepspeed:"
       [ -e "$tmp/near.json" ] && bad "--nearest wrote a file it could not make runnable" || ok ;;
    *) bad "export --to deepspeed --nearest: exit $rc" ;;
esac
# a mode cannot be changed
run 1 export $G/llama-3-70b-pp4.plan.json --to vllm --nearest
has "$tmp/err" "--nearest keeps the plan's mode"

finish export_cli
