#!/usr/bin/env bash
# serve_sim_speed.sh [BUILD_DIR] — builds bench/serve_sim_speed.c against the
# libraries in BUILD_DIR (default: build) and prints its figures; exits 1
# when the simulator takes a second or more for 10,000 requests.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
for lib in libloom_costs.a libloom_graph.a libloom_base.a; do
  [ -f "$build/$lib" ] || { echo "serve_sim_speed: $build/$lib not found; build first" >&2; exit 1; }
done
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -I. $(pkg-config --cflags libcjson igraph) \
  bench/serve_sim_speed.c "$build/libloom_costs.a" "$build/libloom_graph.a" "$build/libloom_base.a" \
  $(pkg-config --libs libcjson igraph) -lm -o "$out/serve_sim_speed"
"$out/serve_sim_speed" "$@"
