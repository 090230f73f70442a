#!/usr/bin/env bash
# costs_speed.sh [BUILD_DIR] [MODEL] — builds bench/costs_speed.c against the
# libraries in BUILD_DIR (default: build) and prints its figures.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
model=${2:-examples/models/llama-3-70b.json}
for lib in libloom_costs.a libloom_graph.a libloom_base.a; do
  [ -f "$build/$lib" ] || { echo "costs_speed: $build/$lib not found; build first (cmake --build $build)" >&2; exit 1; }
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -I. $(pkg-config --cflags libcjson igraph) \
  bench/costs_speed.c "$build/libloom_costs.a" "$build/libloom_graph.a" "$build/libloom_base.a" \
  $(pkg-config --libs libcjson igraph) -lm -o "$out/costs_speed"
"$out/costs_speed" "$model"
