# cli_expect.bash — helpers shared by the CLI test scripts (sourced; not a
# test itself: ctest runs only tests/*.sh).
#
#   LOOM=path/to/loom; tmp=$(mktemp -d); source tests/lib/cli_expect.bash
#   expect_fail eval 2 gpt2 --tp x -- "--tp expects an integer"
#
# expect_fail CMD CODE ARGS... -- NEEDLE...: `loom CMD ARGS` exits CODE,
# prints nothing on stdout, leaves no file at $NEVER (when set), and its
# stderr holds every NEEDLE. ok / bad count passes and failures.
passes=0
fails=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

expect_fail() {
    local cmd=$1 code=$2; shift 2
    local args=()
    while [ "$1" != "--" ]; do args+=("$1"); shift; done
    shift
    "$LOOM" "$cmd" "${args[@]}" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    if [ $rc -ne "$code" ]; then
        bad "$cmd ${args[*]}: exit $rc, want $code ($(head -c 300 "$tmp/err"))"
        return
    fi
    if [ -s "$tmp/out" ]; then bad "$cmd ${args[*]}: wrote to stdout on failure"; return; fi
    if [ -n "${NEVER:-}" ] && [ -e "$NEVER" ]; then bad "$cmd ${args[*]}: left $NEVER"; return; fi
    local err
    err=$(<"$tmp/err")
    for needle in "$@"; do
        if [[ "$err" == *"$needle"* ]]; then ok
        else bad "$cmd ${args[*]}: stderr lacks '$needle': $err"; fi
    done
}
