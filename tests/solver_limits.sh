#!/usr/bin/env bash
# solver_limits.sh — a `loom plan` search that is stopped keeps its best plan,
# and an ILP that hits its time limit states its gap
# (issue 9, "Solver limits").
#
# The case, DeepSeek-V3 on 32 DGX H100 nodes, searches for a few seconds.
# It is planned once to the end (the reference: its step time T_full and
# wall time W), then:
#
#   1. Ctrl-C (SIGINT) early, before any plan exists: exit 1, "stopped before
#      it found a plan", and no plan file or temporary left;
#   2. Ctrl-C part way (at 40 %, 60 %, 80 %, 95 % of W until one lands after
#      the first plan): exit 0, "interrupted: the plan below is the best found
#      so far" on stderr, a plan file whose search.status is "stopped" and
#      whose step time is no better than T_full (a search stopped early
#      cannot beat the complete one);
#   3. --time-limit: the same promise without a signal;
#   4. two Ctrl-C (or SIGTERM): the second ends the process at once, still
#      leaving no partial file;
#   SIGTERM and SIGHUP part way behave as Ctrl-C (2.);
#   5. the ILP of one large layer (Mixtral-8x7B on a 4x8 mesh, ~2600
#      variables) under a 1 ms limit: `loom shard` returns its best
#      assignment as "feasible" with the gap stated, and the gap is honest —
#      objective x (1 - gap), the proven bound, is no more than the optimum
#      found without a limit, and the objective no less.
# Timing only picks when the signal is sent; every assertion is about what
# the program wrote.
#
# usage: bash tests/solver_limits.sh path/to/loom   (from the repo root)
set -u
LOOM=$(realpath "${1:?usage: solver_limits.sh path/to/loom}")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
source tests/lib/cli.sh
CASE=(deepseek-v3 --cluster dgx-h100-x32 --gbs 1024 --seq 4096 --no-timings)

# field FILE KEY: a number or string from the plan JSON ("search.status").
field() {
    python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
for k in sys.argv[2].split("."): d=d[k]
print(d)' "$1" "$2"
}
mul() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.3f", a * b }'; }
no_leftovers() {   # only the files named in $@ may exist in $tmp/run
    local extra
    extra=$(cd "$tmp/run" && ls -A | grep -vxF "$(printf '%s\n' "$@")")
    if [ -n "$extra" ]; then bad "files left behind: $extra"; else ok; fi
}
# interrupt_after SECONDS [SIGNALS [SIG]]: runs the case in the background,
# sends SIG (default INT) after SECONDS (twice when SIGNALS is 2); sets $rc.
interrupt_after() {
    rm -rf "$tmp/run" && mkdir -p "$tmp/run"
    (cd "$tmp/run" && exec "$LOOM" plan "${CASE[@]}" -o plan.json >out 2>err) &
    local pid=$!
    sleep "$1"
    kill -"${3:-INT}" "$pid" 2>/dev/null
    if [ "${2:-1}" = 2 ]; then sleep 0.05; kill -"${3:-INT}" "$pid" 2>/dev/null; fi
    wait "$pid"
    rc=$?
}

# The reference: the whole search.
mkdir -p "$tmp/full"
start=$(date +%s.%N)
(cd "$tmp/full" && "$LOOM" plan "${CASE[@]}" -o plan.json >out 2>err)
rc=$?
wall=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.3f", b - a }')
if [ $rc -ne 0 ]; then
    bad "full search: exit $rc: $(head -c 300 "$tmp/full/err")"
    finish solver_limits
    exit
fi
t_full=$(field "$tmp/full/plan.json" predicted.step_time_s)
status=$(field "$tmp/full/plan.json" search.status)
if [ "$status" = complete ]; then ok; else bad "full search: search.status $status, want complete"; fi
echo "full search: ${wall} s, step time ${t_full} s"

# 1. Before any plan: nothing to report, nothing written.
interrupt_after 0.05
# On a loaded machine the signal can land before loom has even installed its
# handler; the default action (exit 130) then also leaves nothing behind.
if [ $rc -eq 1 ]; then
    ok
    has "$tmp/run/err" "the search was stopped before it found a plan"
elif [ $rc -eq 130 ] && [ ! -s "$tmp/run/err" ]; then
    echo "early Ctrl-C landed before loom started its search (exit 130)"
    ok
else
    bad "early Ctrl-C: exit $rc, want 1: $(head -c 300 "$tmp/run/err")"
fi
[ -e "$tmp/run/plan.json" ] && bad "early Ctrl-C: a plan file was written"
no_leftovers out err

# 2. Part way: the best plan so far.
landed=0
for frac in 0.4 0.6 0.8 0.95; do
    interrupt_after "$(mul "$wall" "$frac")"
    grep -q "interrupted: the plan below is the best found so far" "$tmp/run/err" || continue
    landed=1
    if [ $rc -eq 0 ]; then ok; else bad "Ctrl-C at ${frac}: exit $rc: $(head -c 300 "$tmp/run/err")"; fi
    status=$(field "$tmp/run/plan.json" search.status)
    t_stop=$(field "$tmp/run/plan.json" predicted.step_time_s)
    if [ "$status" = stopped ]; then ok; else bad "Ctrl-C at ${frac}: search.status $status"; fi
    if python3 -c "import sys; sys.exit(0 if float('$t_stop') >= float('$t_full') * (1 - 1e-12) else 1)"; then
        ok
    else
        bad "Ctrl-C at ${frac}: stopped plan ($t_stop s) beats the complete search ($t_full s)"
    fi
    has "$tmp/run/out" "plan.json"
    no_leftovers plan.json out err
    echo "Ctrl-C at ${frac} of the search: best so far ${t_stop} s (complete: ${t_full} s)"
    # SIGTERM (kill, a job scheduler's stop) and SIGHUP (the terminal went
    # away) are Ctrl-C: the best plan so far, nothing partial
    for sig in TERM HUP; do
        interrupt_after "$(mul "$wall" "$frac")" 1 $sig
        if [ $rc -eq 0 ] && grep -q "interrupted: the plan below" "$tmp/run/err"; then
            status=$(field "$tmp/run/plan.json" search.status)
            [ "$status" = stopped ] && ok || bad "SIG$sig: search.status $status"
            no_leftovers plan.json out err
        elif [ $rc -eq 0 ]; then
            echo "note: SIG$sig landed after the search ended"
        else
            bad "SIG$sig at ${frac}: exit $rc, want 0 with the best plan: $(head -c 300 "$tmp/run/err")"
        fi
    done
    break
done
[ $landed -eq 1 ] || echo "note: every Ctrl-C landed before the first plan or after the end (wall ${wall} s)"

# 3. The time limit: the same promise, no signal.
rm -rf "$tmp/run" && mkdir -p "$tmp/run"
limit=$(mul "$wall" 0.5)
(cd "$tmp/run" && "$LOOM" plan "${CASE[@]}" --time-limit "$limit" -o plan.json >out 2>err)
rc=$?
if [ $rc -eq 0 ]; then
    status=$(field "$tmp/run/plan.json" search.status)
    t_lim=$(field "$tmp/run/plan.json" predicted.step_time_s)
    case "$status" in time-limit|complete) ok ;; *) bad "--time-limit: search.status $status" ;; esac
    if python3 -c "import sys; sys.exit(0 if float('$t_lim') >= float('$t_full') * (1 - 1e-12) else 1)"; then ok
    else bad "--time-limit: $t_lim s beats the complete search ($t_full s)"; fi
    echo "--time-limit $limit: status $status, step time $t_lim s"
elif [ $rc -eq 1 ]; then
    has "$tmp/run/err" "before it found a plan"
    [ -e "$tmp/run/plan.json" ] && bad "--time-limit without a plan wrote a file"
else
    bad "--time-limit $limit: exit $rc: $(head -c 300 "$tmp/run/err")"
fi

# 4. Two Ctrl-C: killed at once (128 + SIGINT), no partial file (SIGTERM below).
interrupt_after "$(mul "$wall" 0.3)" 2
if [ $rc -eq 130 ] || [ $rc -eq 0 ] || [ $rc -eq 1 ]; then ok; else bad "double Ctrl-C: exit $rc"; fi
if [ $rc -eq 130 ] && [ -e "$tmp/run/plan.json" ]; then
    # the second signal came after the plan was renamed into place (loom
    # then no longer handles SIGINT): the file must be whole, not partial
    status=$(field "$tmp/run/plan.json" search.status 2>/dev/null)
    if [ "$status" = stopped ]; then ok; else bad "double Ctrl-C: a partial plan file was left"; fi
    no_leftovers plan.json out err
elif [ $rc -eq 130 ]; then
    no_leftovers out err
fi

# Two SIGTERM: the same, exit 128 + 15.
interrupt_after "$(mul "$wall" 0.3)" 2 TERM
if [ $rc -eq 143 ] || [ $rc -eq 0 ] || [ $rc -eq 1 ]; then ok; else bad "double SIGTERM: exit $rc"; fi
if [ $rc -eq 143 ] && [ -e "$tmp/run/plan.json" ]; then
    status=$(field "$tmp/run/plan.json" search.status 2>/dev/null)
    if [ "$status" = stopped ]; then ok; else bad "double SIGTERM: a partial plan file was left"; fi
    no_leftovers plan.json out err
elif [ $rc -eq 143 ]; then
    no_leftovers out err
fi

# 5. The ILP time limit on a large layer: best assignment, gap stated.
SHARD=(shard mixtral-8x7b --mesh 4x8 --cluster dgx-h100-x4)
"$LOOM" "${SHARD[@]}" --json >"$tmp/opt.json" 2>"$tmp/opt.err" || bad "shard without a limit failed"
"$LOOM" "${SHARD[@]}" --json --time-limit 0.001 >"$tmp/lim.json" 2>"$tmp/lim.err" ||
    bad "shard --time-limit 0.001 failed: $(head -c 300 "$tmp/lim.err")"
verdict=$(python3 - "$tmp/opt.json" "$tmp/lim.json" <<'PY'
import json, sys
opt, lim = (json.load(open(f)) for f in sys.argv[1:3])
if opt["status"] != "optimal":
    print("bad: the unlimited solve is %s" % opt["status"]); sys.exit()
o, l, gap = opt["objective_s"], lim["objective_s"], lim.get("gap", 0)
if lim["status"] == "optimal":
    print("ok optimal within 1 ms (nothing to state)" if abs(l - o) <= 1e-9 * o
          else "bad: 'optimal' %.9g differs from %.9g" % (l, o))
elif lim["status"] != "feasible":
    print("bad: status %s" % lim["status"])
elif not (gap > 0 and l >= o * (1 - 1e-9) and l * (1 - gap) <= o * (1 + 1e-9)):
    print("bad: objective %.9g, gap %.4g, optimum %.9g: the gap does not bracket the optimum"
          % (l, gap, o))
else:
    print("ok feasible: objective %.6g s (optimum %.6g s), gap %.2f%%" % (l, o, 100 * gap))
PY
)
case "$verdict" in ok*) ok; echo "ILP time limit: ${verdict#ok }" ;; *) bad "ILP time limit: $verdict" ;; esac
"$LOOM" "${SHARD[@]}" --time-limit 0.001 >"$tmp/lim.txt" 2>&1 || bad "shard (text) failed"
case "$verdict" in "ok feasible"*) has "$tmp/lim.txt" "ILP      feasible" "time limit reached: gap" ;; esac
finish solver_limits
