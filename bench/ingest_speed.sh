#!/usr/bin/env bash
# ingest_speed.sh [BUILD_DIR] [MODEL...] — builds bench/ingest_speed.c against
# libloom_graph.a in BUILD_DIR (default: build) and prints, per bundled model,
# the graph size and the median time to load it and to round-trip it through
# loom-graph/1 JSON.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
shift || true
[ -f "$build/libloom_graph.a" ] || { echo "ingest_speed: $build/libloom_graph.a not found; build first (cmake --build $build)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
cc -std=c11 -O2 -D_POSIX_C_SOURCE=200809L -I. $(pkg-config --cflags libcjson igraph) \
  bench/ingest_speed.c "$build/libloom_graph.a" "$build/libloom_base.a" $(pkg-config --libs libcjson igraph) -lm \
  -o "$out/ingest_speed"
"$out/ingest_speed" "$@"
