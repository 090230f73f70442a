#!/usr/bin/env bash
# etp_gap.sh [BUILD_DIR] [CASES] — the gain expert TP below the TP would
# give over `loom plan --space megatron` on seven MoE cases (16 to 1,024
# H100; bench/etp_gap.py says what is evaluated). About 25 s on 2 cores.
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
[ -x "$build/loom" ] || { echo "etp_gap: $build/loom not found; build first" >&2; exit 1; }
exec python3 bench/etp_gap.py "$build/loom" ${2:+"$2"}
