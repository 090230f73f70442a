# cli.sh — helpers for the shell-driven CLI tests (tests/*.sh source it).
# Not a test itself: ctest runs only tests/*.sh, not this subfolder.
#
#   ok / bad MSG          count a pass / report and count a failure
#   run CODE ARGS...      runs "$LOOM" ARGS, wants exit CODE; output in
#                         $tmp/out and $tmp/err
#   has FILE NEEDLE...    every NEEDLE occurs in FILE (fixed strings)
#   finish NAME           prints the tally; exit status 0 only without failures
# The caller sets LOOM (an absolute path) and tmp (a scratch directory).
fails=0
passes=0

ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*" >&2; fails=$((fails + 1)); }

run() {
    local code=$1; shift
    "$LOOM" "$@" >"$tmp/out" 2>"$tmp/err"
    local rc=$?
    if [ $rc -ne "$code" ]; then
        bad "loom $*: exit $rc, want $code: $(head -c 400 "$tmp/err")"
        return 1
    fi
    ok
}

has() {
    local f=$1; shift
    for needle in "$@"; do
        if grep -qF -- "$needle" "$f"; then ok; else bad "$f lacks '$needle': $(head -c 600 "$f")"; fi
    done
}

finish() {
    echo "$1: $passes passed, $fails failed"
    [ $fails -eq 0 ]
}
