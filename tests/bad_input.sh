#!/usr/bin/env bash
# bad_input.sh — the bad-input corpus end to end: every tests/bad_input/NAME
# with a sidecar NAME.expect is fed to the `loom` command the sidecar names,
# and must be refused cleanly:
#
#   - the exit code is the expected one (default 1: bad input; 3: no plan
#     fits), never a crash (signal), never a hang (30 s);
#   - stderr names the file (its path as given) and the place (every
#     `place:` line: JSON path, line:col, argument, op) and says what is
#     wrong (every `expect:` line);
#   - nothing is written: the output path (OUT) does not exist, no
#     temporary file is left beside it, the working directory stays empty,
#     and stdout is empty when the exit code is 1.
#
# Sidecar format (one directive per line, '#' comments):
#   run: inspect FILE            arguments after `loom`; FILE = the bad file,
#                                OUT = an output path in an empty directory
#   exit: 3                      expected exit code (default 1)
#   place: $.inter_node.bandwidth_GBps
#   expect: expected a number > 0
#   names-file: no               the message need not name the file (a
#                                well-formed file describing an unsolvable
#                                problem: the place is the quantity at fault)
#
# Files without a sidecar must be checked by tests/inspect_cli.sh (which
# covers the ingest engineer's model_* / graph_* files); anything else is an
# untested bad input and fails here.
#
# usage: bash tests/bad_input.sh path/to/loom   (from the repo root)
set -u
LOOM=$(realpath "${1:?usage: bad_input.sh path/to/loom}")
DIR=tests/bad_input
ROOT=$(pwd)
skips=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source tests/lib/cli.sh
commands=$("$LOOM" --help 2>&1 | awk '/^commands:/ {on = 1; next} on && NF {print $1}')

for expect in "$DIR"/*.expect; do
    name=$(basename "$expect" .expect)
    file=$DIR/$name
    [ -e "$file" ] || { bad "$expect: no file $file"; continue; }
    run="" code=1 places=() needles=() names_file=yes
    while IFS= read -r line || [ -n "$line" ]; do
        case "$line" in
            run:*) run=${line#run:} ;;
            exit:*) code=$(echo "${line#exit:}" | tr -d ' ') ;;
            names-file:*) names_file=$(echo "${line#names-file:}" | tr -d ' ') ;;
            place:*) places+=("$(echo "${line#place:}" | sed 's/^ *//')") ;;
            expect:*) needles+=("$(echo "${line#expect:}" | sed 's/^ *//')") ;;
            ''|'#'*) ;;
            *) bad "$expect: unknown directive: $line" ;;
        esac
    done <"$expect"
    if [ -z "$run" ] || [ ${#places[@]} -eq 0 ] || [ ${#needles[@]} -eq 0 ]; then
        bad "$expect: needs run:, at least one place: and one expect:"
        continue
    fi
    read -r -a words <<<"$run"
    if ! grep -qx -- "${words[0]}" <<<"$commands"; then
        echo "skip: $name (this loom has no '${words[0]}' command yet)"
        skips=$((skips + 1))
        continue
    fi
    case_dir=$tmp/$name
    mkdir -p "$case_dir/cwd" "$case_dir/out"
    args=()
    for w in "${words[@]}"; do
        w=${w//FILE/$ROOT/$file}
        w=${w//OUT/$case_dir/out/result}
        args+=("$w")
    done
    # Run from an empty directory so any stray file shows up.
    (cd "$case_dir/cwd" && timeout 30 "$LOOM" "${args[@]}" >"$case_dir/stdout" 2>"$case_dir/stderr")
    rc=$?
    err=$(<"$case_dir/stderr")
    what="$name (loom ${words[*]})"
    if [ $rc -eq 124 ]; then bad "$what: hung (killed after 30 s)"; continue; fi
    if [ $rc -ge 125 ]; then bad "$what: crashed (exit $rc): $err"; continue; fi
    if [ $rc -ne "$code" ]; then bad "$what: exit $rc, want $code: $err"; continue; fi
    good=1
    [ "$names_file" = no ] && must=() || must=("$ROOT/$file")
    for needle in "${must[@]}" "${places[@]}" "${needles[@]}"; do
        if [[ "$err" != *"$needle"* ]]; then
            bad "$what: stderr lacks '$needle': $err"
            good=0
        fi
    done
    if [ -n "$(ls -A "$case_dir/out")" ]; then
        bad "$what: left files in the output directory: $(ls -A "$case_dir/out")"
        good=0
    fi
    if [ -n "$(ls -A "$case_dir/cwd")" ]; then
        bad "$what: left files in the working directory: $(ls -A "$case_dir/cwd")"
        good=0
    fi
    if [ "$code" -eq 1 ] && [ -s "$case_dir/stdout" ]; then
        bad "$what: printed to stdout although it failed: $(head -c 200 "$case_dir/stdout")"
        good=0
    fi
    [ $good -eq 1 ] && ok
done

# Every bad file is tested somewhere.
for f in "$DIR"/*; do
    case "$f" in *.expect) continue ;; esac
    [ -e "$f.expect" ] && continue
    grep -q -- "$(basename "$f")" tests/inspect_cli.sh 2>/dev/null && continue
    bad "$f has no $(basename "$f").expect and no check in tests/inspect_cli.sh"
done

[ $skips -eq 0 ] || echo "bad_input: $skips case(s) skipped"
finish bad_input
