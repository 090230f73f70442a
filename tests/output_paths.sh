#!/bin/bash
# output_paths.sh — what loom refuses to write to, before it does any work
# (base/fileio.h, planner/cli/cli.h loom_cli_check_outputs; docs/robustness.md).
#
#  - an output that is not a regular file: a FIFO (loom must not block on
#    it), a character device, a symlink to /dev/stdout, a symlink to a
#    regular file, a directory: exit 2 naming the path, left as it was;
#  - an output that is also an input (the plan, the model, a hard link to
#    it, another spelling of its path): exit 2, the input byte for byte;
#  - two outputs on one file (-o and --svg): exit 2, nothing written;
#  - -o - still writes standard output;
#  - a temporary left by a killed write is a hidden ".NAME.*.loom-tmp" file,
#    never NAME, and a later run writes NAME whole beside it.
#
# usage: bash tests/output_paths.sh path/to/loom   (run from the repo root)
set -u
LOOM=$(realpath "${1:?usage: output_paths.sh path/to/loom}")
G=tests/golden/export
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
. tests/lib/cli.sh

cp $G/llama-3-70b-tp8.plan.json "$tmp/p.json"
sum=$(cksum <"$tmp/p.json")
E=(export "$tmp/p.json" --to megatron)

# ---- not a regular file -----------------------------------------------------------------------
mkfifo "$tmp/fifo"
timeout 10 "$LOOM" "${E[@]}" -o "$tmp/fifo" >"$tmp/out" 2>"$tmp/err"
rc=$?
[ $rc -eq 2 ] && ok || bad "-o FIFO: exit $rc, want 2"
has "$tmp/err" "$tmp/fifo: cannot write: a FIFO, not a regular file"
[ -p "$tmp/fifo" ] && ok || bad "-o FIFO: the FIFO was replaced"
run 2 "${E[@]}" -o /dev/null
has "$tmp/err" "/dev/null: cannot write: a character device"
[ -c /dev/null ] && ok || bad "/dev/null is no longer a device"
ln -s /dev/stdout "$tmp/stdout-link"
run 2 "${E[@]}" -o "$tmp/stdout-link"
has "$tmp/err" "a symlink (to"
[ -L "$tmp/stdout-link" ] && ok || bad "-o symlink to /dev/stdout: the link was replaced"
run 2 "${E[@]}" -o /dev/stdout
has "$tmp/err" "/dev/stdout: cannot write: a symlink"
echo kept >"$tmp/target"
ln -s "$tmp/target" "$tmp/link"
run 2 "${E[@]}" -o "$tmp/link"
has "$tmp/err" "a symlink (to a regular file)"
[ -L "$tmp/link" ] && [ "$(cat "$tmp/target")" = kept ] && ok || bad "-o symlink: link or target changed"
mkdir "$tmp/dir"
run 2 "${E[@]}" -o "$tmp/dir"
has "$tmp/err" "a directory, not a regular file"
run 2 plan tiny-gpt.graph.json --cluster dgx-h100-x1 --svg /dev/null
has "$tmp/err" "--svg /dev/null: cannot write"

# ---- an output that is an input --------------------------------------------------------------
run 2 "${E[@]}" -o "$tmp/p.json"
has "$tmp/err" "-o $tmp/p.json is also the input PLAN"
ln "$tmp/p.json" "$tmp/hard.json"
run 2 "${E[@]}" -o "$tmp/hard.json"
mkdir -p "$tmp/sub"
run 2 "${E[@]}" -o "$tmp/sub/../p.json"
(cd "$tmp" && "$LOOM" export p.json --to megatron -o ./p.json >out 2>err)
[ $? -eq 2 ] && ok || bad "-o ./p.json for p.json was accepted"
[ "$(cksum <"$tmp/p.json")" = "$sum" ] && ok || bad "the input plan changed"
cp examples/models/tiny-gpt.graph.json "$tmp/model.json"
msum=$(cksum <"$tmp/model.json")
run 2 plan "$tmp/model.json" --cluster dgx-h100-x1 -o "$tmp/model.json"
has "$tmp/err" "is also the input MODEL"
[ "$(cksum <"$tmp/model.json")" = "$msum" ] && ok || bad "loom plan overwrote its model"

# ---- two outputs on one file -----------------------------------------------------------------
run 2 plan tiny-gpt.graph.json --cluster dgx-h100-x1 -o "$tmp/a.json" --svg "$tmp/./a.json"
has "$tmp/err" "are one file"
[ -e "$tmp/a.json" ] && bad "a file was written despite the clash" || ok
run 2 plan tiny-gpt.graph.json --cluster dgx-h100-x1 -o "$tmp/a.json" --emit-profile-requests "$tmp/a.json"

# ---- standard output still works -----------------------------------------------------------------
run 0 "${E[@]}" -o -
has "$tmp/out" "torchrun"

# ---- temporaries ------------------------------------------------------------------------------
# A leftover from a killed run (as SIGKILL leaves it) is hidden and never
# has the output's name; the next run writes the output whole beside it.
mkdir "$tmp/k"
printf 'partial' >"$tmp/k/.train.sh.AbCdEfGhIjKl.loom-tmp"
run 0 "${E[@]}" -o "$tmp/k/train.sh"
cmp -s "$tmp/k/train.sh" $G/llama-3-70b-tp8.megatron.sh 2>/dev/null ||
    "$LOOM" "${E[@]}" 2>/dev/null | cmp -s - "$tmp/k/train.sh" && ok || bad "the output is not whole"
[ "$(ls -A "$tmp/k" | sort | tr '\n' ' ')" = ".train.sh.AbCdEfGhIjKl.loom-tmp train.sh " ] && ok ||
    bad "unexpected files: $(ls -A "$tmp/k")"
# SIGKILL during many writes: whatever is left is whole output or a hidden temporary
mkdir "$tmp/kill"
for i in $(seq 1 20); do
    "$LOOM" "${E[@]}" -o "$tmp/kill/train.sh" 2>/dev/null &
    pid=$!
    sleep 0.0$((i % 10))
    kill -KILL $pid 2>/dev/null
    wait $pid 2>/dev/null
done
for f in $(ls -A "$tmp/kill"); do
    case $f in
    train.sh) "$LOOM" "${E[@]}" 2>/dev/null | cmp -s - "$tmp/kill/train.sh" && ok || bad "killed runs left a partial train.sh" ;;
    .train.sh.*.loom-tmp) ok ;;
    *) bad "killed runs left $f" ;;
    esac
done

finish output_paths
