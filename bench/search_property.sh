#!/usr/bin/env bash
# search_property.sh [BUILD_DIR] [SAMPLES] [CASES] — issue 19's property
# test as a benchmark: random configurations `loom eval` accepts against
# `loom plan --space megatron` and the full-space plan, on ten cases from 8
# to 16,384 GPUs (bench/search_property.py says what is sampled). Seeded:
# the same samples on every run. The full run (300 samples x 10 cases) takes
# tens of minutes on 2 cores; CASES (comma-separated names) picks a subset.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[ -x "$build/loom" ] || { echo "search_property: $build/loom not found; build first" >&2; exit 1; }
exec python3 bench/search_property.py "$build/loom" "${2:-300}" ${3:+"$3"}
