#!/bin/bash
# export_injection.sh — nothing taken from a plan escapes its place in an
# exported file (docs/robustness.md, "Threat model").
#
# The plan's model name and the plan's file name are the strings loom copies
# from its input into every export. Here both hold newlines, carriage
# returns, quotes, $(...), backticks, YAML's document marker ---, a NEL and
# U+2028 (YAML line breaks), and each is exported to every target it suits.
# Each result is read by the format's own parser and must mean exactly what
# the export of the plain plan means:
#   megatron    bash -n, then a run with a stand-in torchrun on PATH: the same
#               argv as the plain plan's script, and no injected command ran
#   vllm        yaml.safe_load: the same mapping (skipped, saying so, without
#               PyYAML: apt-get install python3-yaml)
#   torchtitan  tomllib: the same tables
#   deepspeed   json: the same object
#
# usage: bash tests/export_injection.sh path/to/loom   (run from the repo root)
set -u
LOOM=${1:?usage: export_injection.sh path/to/loom}
G=tests/golden/export
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. tests/lib/cli.sh
LOOM=$(cd "$(dirname "$LOOM")" && pwd)/$(basename "$LOOM")

have_yaml=1
python3 -c 'import yaml' 2>/dev/null || {
    have_yaml=0
    echo "export_injection: PyYAML missing (apt-get install python3-yaml): vLLM YAML not parsed"
}

mkdir -p "$tmp/bin"
cat >"$tmp/bin/torchrun" <<'EOF'
#!/bin/bash
printf '%s\n' "$@" >"$TORCHRUN_LOG"
EOF
chmod +x "$tmp/bin/torchrun"

# Hostile model names: each would, unescaped, end the comment it sits in.
names=(
    $'x\ntouch PWNED'
    $'x\r\ntouch PWNED'
    $'x\n$(touch PWNED)'
    $'x\n`touch PWNED`'
    $'x\'; touch PWNED; \''
    $'x"\ntensor-parallel-size: 999\n---\nfoo: bar'
    $'x\n[parallelism]\ntensor_parallel_degree = 999'
    $'x\n"train_batch_size": 1,'
    $'x\xc2\x85tensor-parallel-size: 999'
    $'x\xe2\x80\xa8tensor-parallel-size: 999'
    $'x\\\n#!/bin/sh'
    $'x\x01\x7f\tend'
)

# plan_with NAME SRC DST: SRC with its model name replaced by NAME
plan_with() {
    python3 - "$1" "$2" "$3" <<'EOF'
import json, sys
name, src, dst = sys.argv[1], sys.argv[2], sys.argv[3]
d = json.load(open(src))
d["inputs"]["model"] = name
open(dst, "w").write(json.dumps(d, indent=1))
EOF
}

# parse TARGET FILE: the parsed meaning of FILE, printed canonically
parse() {
    case $1 in
    megatron)
        bash -n "$2" || return 1
        rm -f "$tmp/args"
        (cd "$tmp/run" && TORCHRUN_LOG="$tmp/args" PATH="$tmp/bin:$PATH" bash "$2" --lr 1) || return 1
        cat "$tmp/args" ;;
    vllm) python3 -c 'import sys, yaml; print(sorted(yaml.safe_load(open(sys.argv[1], "rb")).items()))' "$2" ;;
    torchtitan) python3 -c 'import sys, tomllib; print(tomllib.load(open(sys.argv[1], "rb")))' "$2" ;;
    deepspeed) python3 -c 'import sys, json; print(sorted(json.load(open(sys.argv[1], "rb")).items()))' "$2" ;;
    esac
}

mkdir -p "$tmp/run"
for spec in llama-3-70b-tp8:megatron llama-3-70b-tp8:torchtitan llama-3-70b-tp8:deepspeed \
            llama-3-70b-serve:vllm; do
    plan=${spec%%:*} t=${spec##*:}
    [ $t = vllm ] && [ $have_yaml = 0 ] && continue
    run 0 export "$G/$plan.plan.json" --to $t -o "$tmp/plain.$t" || continue
    want=$(parse $t "$tmp/plain.$t") || { bad "$plan --to $t: the plain export does not parse"; continue; }
    i=0
    for name in "${names[@]}"; do
        i=$((i + 1))
        # the hostile string is both the model name and the plan's file name
        # (without '/', which a file name cannot hold)
        dir="$tmp/p$i"
        mkdir -p "$dir"
        file="$dir/${name//\//_}.plan.json"
        plan_with "$name" "$G/$plan.plan.json" "$file"
        out="$tmp/out.$t"
        run 0 export "$file" --to $t -o "$out" || continue
        got=$(parse $t "$out") || { bad "$plan --to $t, name #$i: the export does not parse: $(head -c 300 "$out")"; continue; }
        [ "$got" = "$want" ] && ok || bad "$plan --to $t, name #$i: the export means something else: $(head -c 600 "$out")"
        [ -e "$tmp/run/PWNED" ] && bad "$plan --to $t, name #$i: an injected command ran" || ok
        # printable ASCII only (no raw control byte, no YAML line break)
        LC_ALL=C grep -q '[^ -~]' "$out" && bad "$plan --to $t, name #$i: a byte outside printable ASCII" || ok
        # the model name is there, escaped, on the header line
        [ $t = deepspeed ] || { grep -q '^# model: x' "$out" && ok || bad "$plan --to $t, name #$i: the model is not named"; }
    done
done

finish export_injection
