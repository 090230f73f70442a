#!/usr/bin/env bash
# plan.sh [BUILD_DIR] — builds bench/plan.c against the libraries in
# BUILD_DIR (default: build) and prints planning times: Llama-3-70B on 1,024
# H100, Llama-3.1-405B on 16,384 H100, and Llama-3-8B-shaped models of 32,
# 64 and 128 identical layers (configs made here by changing
# num_hidden_layers) to show the time does not grow with depth.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
libs=""
for lib in libloom_planner.a libloom_solver.a libloom_costs.a libloom_graph.a libloom_base.a; do
  [ -f "$build/$lib" ] || { echo "plan bench: $build/$lib not found; build first (cmake --build $build)" >&2; exit 1; }
  libs="$libs $build/$lib"
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -I. $(pkg-config --cflags libcjson igraph) \
  bench/plan.c $libs -lglpk $(pkg-config --libs libcjson igraph) -lm -o "$out/plan"
configs=()
for n in 32 64 128; do
  sed "s/\"num_hidden_layers\": 32/\"num_hidden_layers\": $n/" examples/models/llama-3-8b.json \
    > "$out/llama-8b-shape-$n-layers.json"
  configs+=("$out/llama-8b-shape-$n-layers.json")
done
mode=${LOOM_BENCH_LAYERS_ONLY:+--layers-only}
"$out/plan" "${mode:-all}" "${configs[@]}"
