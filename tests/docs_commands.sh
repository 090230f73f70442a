#!/bin/bash
# docs_commands.sh — the documentation's commands, run: README.md and
# docs/*.md cannot drift from the program.
#
# In each markdown file, in order, in one scratch directory per file (with
# examples/ and tools/ of the repository linked in and the built loom first
# on PATH):
#
#   ```sh            a block of commands, run with bash -e -o pipefail: every
#                    command must succeed
#   ```sh exit=N     the block must end with exit status N (no -e)
#   ```sh norun      shown, never run (needs make, a GPU, sbatch, a network)
#   ```text expect   right after a sh block: each non-empty line must appear in
#                    that block's stdout+stderr (runs of blanks compare as one
#                    blank; a line "..." is a gap and is skipped)
#   ```text, ```json, ```c, ...   not run
#
# An untagged fence is an error, so every block says what it is.
#
# usage (from the repo root):
#   bash tests/docs_commands.sh path/to/loom FILE.md...   those files
#   bash tests/docs_commands.sh path/to/loom              (ctest) the runner's own
#       check first, that tests/docs/good.md passes and tests/docs/broken.md
#       fails with each of its faults named, then README.md and docs/*.md
# exit 0 when every block of every file passes, 1 otherwise.
set -u
loom=${1:?usage: docs_commands.sh path/to/loom [FILE.md...]}
build=$(cd "$(dirname "$loom")" && pwd)
shift
root=$(pwd)
if [ $# = 0 ]; then
    self=$(mktemp)
    bash "$0" "$loom" tests/docs/good.md >"$self" 2>&1 ||
        { cat "$self"; echo "docs_commands: the good fixture failed" >&2; rm -f "$self"; exit 1; }
    if bash "$0" "$loom" tests/docs/broken.md >"$self" 2>&1; then
        cat "$self"; echo "docs_commands: the broken fixture passed" >&2; rm -f "$self"; exit 1
    fi
    for want in "broken.md:5: exit 1, the doc expects 0" \
                "broken.md:15: expected output line not found: step 99.99 s" \
                "broken.md:19: exit 0, the doc expects 3" \
                "broken.md:23: untagged code block" \
                "broken.md:29: '| head' in a run block" \
                "docs_commands: 2 passed, 5 failed"; do
        grep -qF -- "$want" "$self" ||
            { cat "$self"; echo "docs_commands: the broken fixture's report lacks: $want" >&2; rm -f "$self"; exit 1; }
    done
    rm -f "$self"
    echo "docs_commands: the runner passes a good fixture and fails a broken one"
    set -- README.md docs/*.md
fi
fails=0 passes=0
tmproot=$(mktemp -d)
trap 'rm -rf "$tmproot"' EXIT

bad() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

for md in "$@"; do
    blocks=$tmproot/blocks.$$; rm -rf "$blocks"; mkdir -p "$blocks"
    # split into blocks: N.kind (sh | sh-exit-K | norun | expect | other | untagged), N.body, N.line
    awk -v dir="$blocks" '
        /^```/ {
            if (!inb) {
                inb = 1; n++; info = substr($0, 4); gsub(/^[ \t]+|[ \t]+$/, "", info)
                kind = "other"
                if (info == "") kind = "untagged"
                else if (info == "sh") kind = "sh"
                else if (info ~ /^sh exit=[0-9]+$/) { kind = "sh-exit-" substr(info, 9) }
                else if (info == "sh norun") kind = "norun"
                else if (info == "text expect") kind = "expect"
                else if (info ~ /^sh/) kind = "badtag:" info
                print kind > (dir "/" n ".kind"); close(dir "/" n ".kind")
                print FNR > (dir "/" n ".line"); close(dir "/" n ".line")
                printf "" > (dir "/" n ".body")
            } else { inb = 0; close(dir "/" n ".body") }
            next
        }
        inb { print >> (dir "/" n ".body") }
        END { if (inb) print "unterminated" > (dir "/unterminated") }
    ' "$md"
    [ -e "$blocks/unterminated" ] && bad "$md: unterminated code fence"
    scratch=$tmproot/$(basename "$md" .md); rm -rf "$scratch"; mkdir -p "$scratch"
    ln -s "$root/examples" "$scratch/examples"
    ln -s "$root/tools" "$scratch/tools"
    n=$(ls "$blocks" | grep -c '\.kind$')
    last_out=""
    for i in $(seq 1 "$n"); do
        kind=$(cat "$blocks/$i.kind"); line=$(cat "$blocks/$i.line")
        where="$md:$line"
        case $kind in
        untagged) bad "$where: untagged code block (tag it sh, sh norun, text, text expect, json, c, ...)" ;;
        badtag:*) bad "$where: unknown tag '${kind#badtag:}' (sh, sh exit=N, sh norun)" ;;
        sh|sh-exit-*)
            # under pipefail a reader that stops early (head) makes loom die
            # of SIGPIPE (exit 141) whenever it had more to write: flaky
            if grep -qE '\|[[:space:]]*head([[:space:]]|$)' "$blocks/$i.body"; then
                bad "$where: '| head' in a run block races loom's output (exit 141 under load); use sed -n 1,Np"
            fi
            want=0; opts="set -e -o pipefail"
            case $kind in sh-exit-*) want=${kind#sh-exit-}; opts="set -o pipefail" ;; esac
            out=$tmproot/out.$i
            (cd "$scratch" && PATH="$build:$PATH" LOOM_DETERMINISTIC=1 \
                timeout 600 bash -c "$opts"$'\n'"$(cat "$blocks/$i.body")") >"$out" 2>&1
            rc=$?
            if [ "$rc" != "$want" ]; then
                bad "$where: exit $rc, the doc expects $want; output:"
                sed 's/^/    | /' "$out" | tail -20 >&2
            else
                passes=$((passes + 1))
            fi
            last_out=$out ;;
        expect)
            if [ -z "$last_out" ]; then
                bad "$where: a text expect block with no sh block before it"
            else
                norm() { tr -s ' \t' '  ' | sed -e 's/^ //' -e 's/ $//'; }
                got=$(norm <"$last_out")
                ok=1
                while IFS= read -r want_line; do
                    w=$(printf '%s\n' "$want_line" | norm)
                    [ -z "$w" ] || [ "$w" = "..." ] && continue
                    if ! printf '%s\n' "$got" | grep -qF -- "$w"; then
                        bad "$where: expected output line not found: $w"
                        ok=0
                    fi
                done <"$blocks/$i.body"
                [ $ok = 1 ] && passes=$((passes + 1))
            fi
            last_out="" ;;
        *) ;;
        esac
    done
done
echo "docs_commands: $passes passed, $fails failed"
[ "$fails" = 0 ]
