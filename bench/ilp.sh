#!/usr/bin/env bash
# ilp.sh [BUILD_DIR] [MODEL...] — builds bench/ilp.c against the libraries in
# BUILD_DIR (default: build) and prints the intra-op ILP's size and solve
# times per model and logical mesh.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
for lib in libloom_solver.a libloom_costs.a libloom_graph.a libloom_base.a; do
  [ -f "$build/$lib" ] || { echo "ilp bench: $build/$lib not found; build first (cmake --build $build)" >&2; exit 1; }
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -I. $(pkg-config --cflags libcjson igraph) \
  bench/ilp.c "$build/libloom_solver.a" "$build/libloom_costs.a" "$build/libloom_graph.a" "$build/libloom_base.a" \
  -lglpk $(pkg-config --libs libcjson igraph) -lm -o "$out/ilp"
"$out/ilp" "$@"
