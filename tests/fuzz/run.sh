#!/usr/bin/env bash
# tests/fuzz/run.sh [SECONDS] — build the libFuzzer targets, replay every
# seed/regression corpus, then fuzz each target for SECONDS (default 60;
# 0 = replay only).
#
#   tests/fuzz/fuzz_<reader>.c      one target per reader (see each file)
#   tests/fuzz/corpus/<reader>/     seeds (real files) and regression inputs
#
# Environment:
#   LOOM_FUZZ_BUILD    build directory (default build-fuzz)
#   LOOM_FUZZ_JOBS     targets fuzzed at the same time (default 2)
#   LOOM_FUZZ_TARGETS  space-separated subset ("cluster plan"), default all
#
# New inputs the fuzzer finds stay in BUILD/fuzz-work/<reader>/ (not the
# repo). A crash, hang (> LOOM_FUZZ_TIMEOUT s, default 25) or leak is copied
# into tests/fuzz/corpus/<reader>/regress-<sha1> so that, once fixed, it is
# replayed on every run; the script then exits 1. The summary gives the
# executions per target.
set -uo pipefail
cd "$(dirname "$0")/../.."

SECONDS_PER_TARGET=${1:-60}
BUILD=${LOOM_FUZZ_BUILD:-build-fuzz}
JOBS=${LOOM_FUZZ_JOBS:-2}
TIMEOUT=${LOOM_FUZZ_TIMEOUT:-25}
CORPUS=tests/fuzz/corpus

if ! command -v clang >/dev/null; then
  echo "fuzz: clang not found (Debian: apt-get install clang libclang-rt-14-dev)" >&2
  exit 77
fi

echo "== fuzz: build ($BUILD)"
cmake -S . -B "$BUILD" -DCMAKE_C_COMPILER=clang -DLOOM_FUZZ=ON -DLOOM_GPU=OFF \
      -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null || exit 1
targets=()
for src in tests/fuzz/fuzz_*.c; do
  t=$(basename "$src" .c); t=${t#fuzz_}
  if [ -n "${LOOM_FUZZ_TARGETS:-}" ] && [[ " $LOOM_FUZZ_TARGETS " != *" $t "* ]]; then continue; fi
  targets+=("$t")
done
cmake --build "$BUILD" -j "$JOBS" --target "${targets[@]/#/fuzz_}" >"$BUILD/fuzz-build.log" 2>&1 || {
  tail -30 "$BUILD/fuzz-build.log"; exit 1; }

# Inputs are written to a file per process: keep them (and fsync) in memory.
if [ -z "${TMPDIR:-}" ] && [ -d /dev/shm ] && [ -w /dev/shm ]; then export TMPDIR=/dev/shm; fi
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
WORK=$BUILD/fuzz-work
ART=$BUILD/fuzz-crashes
mkdir -p "$WORK" "$ART"
# Slow inputs (a 100000-layer model is valid and takes seconds under the
# sanitizers) are reported only when they come near the hang limit.
common=(-timeout="$TIMEOUT" -report_slow_units="$TIMEOUT" -rss_limit_mb=2048 -print_final_stats=1)

# Copies the artifacts of target $1 into its corpus as regression inputs.
keep_artifacts() {
  local t=$1 f sha n=0
  for f in "$ART/$t-"*; do
    [ -e "$f" ] || continue
    case "$f" in *slow-unit-*) echo "fuzz: $t: slow input (not a failure): $f" >&2; continue ;; esac
    sha=$(sha1sum "$f" | cut -c1-16)
    cp "$f" "$CORPUS/$t/regress-$sha"
    echo "fuzz: $t: $(basename "$f") -> $CORPUS/$t/regress-$sha" >&2
    rm -f "$f"
    n=$((n + 1))
  done
  return $n
}

echo "== fuzz: replay corpora"
fail=0
for t in "${targets[@]}"; do
  mkdir -p "$CORPUS/$t"
  if ! "$BUILD/tests/fuzz/fuzz_$t" "${common[@]}" -runs=0 -artifact_prefix="$ART/$t-" \
       "$CORPUS/$t" >"$WORK/$t.replay.log" 2>&1; then
    echo "fuzz: $t: replay FAILED (log: $WORK/$t.replay.log)" >&2
    grep -m3 -E "ERROR|runtime error|invariant broken" "$WORK/$t.replay.log" >&2
    fail=1
  else
    printf '  %-12s %4d inputs ok\n' "$t" "$(ls "$CORPUS/$t" | wc -l)"
  fi
done
[ "$fail" = 0 ] || exit 1
[ "$SECONDS_PER_TARGET" -gt 0 ] || exit 0

echo "== fuzz: $SECONDS_PER_TARGET s per target, $JOBS at a time"
fuzz_one() {
  local t=$1
  mkdir -p "$WORK/$t"
  "$BUILD/tests/fuzz/fuzz_$t" "${common[@]}" -max_total_time="$SECONDS_PER_TARGET" \
      -artifact_prefix="$ART/$t-" "$WORK/$t" "$CORPUS/$t" >"$WORK/$t.log" 2>&1
}
running=0
for t in "${targets[@]}"; do
  fuzz_one "$t" &
  running=$((running + 1))
  if [ "$running" -ge "$JOBS" ]; then wait -n; running=$((running - 1)); fi
done
wait

printf '%-12s %8s %12s %10s %8s  %s\n' target seconds executions exec/s corpus result
for t in "${targets[@]}"; do
  log=$WORK/$t.log
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
  rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
  result=ok
  if grep -qE "ERROR: libFuzzer|ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error|invariant broken" "$log"; then
    result="CRASH (log: $log)"
    fail=1
  fi
  keep_artifacts "$t" || { result="CRASH (kept in $CORPUS/$t)"; fail=1; }
  printf '%-12s %8s %12s %10s %8s  %s\n' "$t" "$SECONDS_PER_TARGET" "${execs:-?}" "${rate:-?}" \
         "$(ls "$WORK/$t" | wc -l)" "$result"
done
exit $fail
