#!/usr/bin/env bash
# search_property.sh — issue 19's property, small: 20 seeded random
# configurations `loom eval` accepts (CP, vpp 1..8, uneven stages,
# selective / full / partial recompute, ZeRO 1-3, TP-comm overlap) on two
# tied-embedding cases of 8 H100 (GPT-2, Llama-3.2-1B): none may beat
# `loom plan --space megatron` by more than 0.1 % nor the full-space plan.
# The ten-case, 300-sample version is bench/search_property.sh.
#
# usage: bash tests/search_property.sh path/to/loom   (from the repo root)
set -u
LOOM=$(realpath "${1:?usage: search_property.sh path/to/loom}")
command -v python3 >/dev/null || { echo "search_property: no python3, skipped"; exit 77; }
out=$(python3 bench/search_property.py "$LOOM" 20 gpt2-h100x8,llama3.2-1b-h100x8 2>&1)
echo "$out"
# both cases ran, each with 20 accepted samples, and the property held
[ "$(echo "$out" | grep -cE '^(gpt2-h100x8|llama3.2-1b-h100x8) +8 .* 20 ')" -eq 2 ] &&
  echo "$out" | grep -q "^property holds$"
