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
#   torchtitan  ast: the same Python code (the name only in comments)
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

# One python3 per step (its start-up is slow): write the plans, then parse
# every export of one format at once.
mkdir -p "$tmp/run"
printf '%s\0' "${names[@]}" >"$tmp/names"

# plans SRC: $tmp/<SRC>/<i>/<name>.plan.json, SRC with its model name replaced
# by the i-th name; the file name is the name too ('/' written '_')
plans() {
    python3 - "$G/$1.plan.json" "$tmp/$1" "$tmp/names" <<'EOF'
import json, os, sys
src, out, names = sys.argv[1], sys.argv[2], open(sys.argv[3], "rb").read().split(b"\0")[:-1]
for i, name in enumerate(names, 1):
    d = json.load(open(src))
    d["inputs"]["model"] = name.decode("utf-8", "surrogateescape")
    dn = os.path.join(out.encode(), str(i).encode())
    os.makedirs(dn, exist_ok=True)
    with open(os.path.join(dn, name.replace(b"/", b"_") + b".plan.json"), "w") as f:
        f.write(json.dumps(d, indent=1))
EOF
}

# parse_all TARGET FILE...: one line per FILE, its parsed meaning (or ERROR)
parse_all() {
    local t=$1; shift
    python3 - "$t" "$@" <<'EOF'
import ast, sys, json
t = sys.argv[1]
for f in sys.argv[2:]:
    try:
        if t == "vllm":
            import yaml
            print(sorted(yaml.safe_load(open(f, "rb")).items()))
        elif t == "torchtitan":
            # Python: the names go only into comments, so the code is the same
            print(ast.dump(ast.parse(open(f, "rb").read())))
        else:
            print(sorted(json.load(open(f, "rb")).items()))
    except Exception as e:
        print("ERROR", type(e).__name__, str(e).replace("\n", " "))
EOF
}

# megatron_argv FILE: the argv the script passes to torchrun
megatron_argv() {
    bash -n "$1" || return 1
    rm -f "$tmp/args"
    (cd "$tmp/run" && TORCHRUN_LOG="$tmp/args" PATH="$tmp/bin:$PATH" bash "$1" --lr 1) || return 1
    cat "$tmp/args"
}

for spec in llama-3-70b-tp8:megatron llama-3-70b-tp8:torchtitan llama-3-70b-tp8:deepspeed \
            llama-3-70b-serve:vllm; do
    plan=${spec%%:*} t=${spec##*:}
    [ $t = vllm ] && [ $have_yaml = 0 ] && continue
    [ -d "$tmp/$plan" ] || plans $plan
    run 0 export "$G/$plan.plan.json" --to $t -o "$tmp/plain.$t" || continue
    outs=("$tmp/plain.$t")
    [ $t = megatron ] && want=$(megatron_argv "$tmp/plain.$t")
    for i in $(seq 1 ${#names[@]}); do
        file=$(ls "$tmp/$plan/$i/"*.plan.json)
        [ -f "$file" ] || { bad "plan #$i not written"; continue; }
        out="$tmp/$plan/$i/out.$t"
        run 0 export "$file" --to $t -o "$out" || continue
        outs+=("$out")
        # printable ASCII only (no raw control byte, no YAML line break)
        LC_ALL=C grep -q '[^ -~]' "$out" && bad "$plan --to $t, name #$i: a byte outside printable ASCII" || ok
        # the model is named, escaped, on the header line
        [ $t = deepspeed ] || { grep -q '^# model: x' "$out" && ok || bad "$plan --to $t, name #$i: the model is not named"; }
        if [ $t = megatron ]; then
            got=$(megatron_argv "$out") || { bad "$plan --to $t, name #$i: the script does not run: $(head -c 300 "$out")"; continue; }
            [ "$got" = "$want" ] && ok || bad "$plan --to $t, name #$i: torchrun got other arguments"
            [ -e "$tmp/run/PWNED" ] && bad "$plan --to $t, name #$i: an injected command ran" || ok
        fi
    done
    [ $t = megatron ] && continue
    parse_all $t "${outs[@]}" >"$tmp/parsed.$t"
    want=$(head -1 "$tmp/parsed.$t")
    case $want in ERROR*) bad "$plan --to $t: the plain export does not parse: $want"; continue ;; esac
    n=0
    while IFS= read -r got; do
        n=$((n + 1))
        [ "$got" = "$want" ] && ok || bad "$plan --to $t, name #$n: parses to something else: $got"
    done < <(tail -n +2 "$tmp/parsed.$t")
    [ $n = ${#names[@]} ] && ok || bad "$plan --to $t: $n of ${#names[@]} exports parsed"
done

finish export_injection
