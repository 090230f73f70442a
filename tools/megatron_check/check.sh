#!/bin/bash
# check.sh [SCRIPT.sh...] — runs Megatron-LM's own parse_args, validate_args
# and TransformerConfig construction on `loom export --to megatron` scripts
# (default: every tests/golden/export/*.megatron.sh), without GPUs or torch.
#
# Development tool, not part of the test suite (CI has no Megatron-LM and no
# network). Needs a Megatron-LM tree at $MEGATRON (default /tmp/megatron):
#     git --git-dir=<mirror of NVIDIA/Megatron-LM> archive d98e8a64 | tar -x -C /tmp/megatron
# and /usr/bin/python3 (3.11+) with python3-packaging, python3-pydantic and
# python3-yaml. torch, triton and numpy are stubbed (../runtime_stubs.py); validate.py
# fakes the two GPU queries validate_args makes (device arch, default Hopper).
# Prints one line per script: VALID ... / TransformerConfig OK ... with the
# model facts Megatron ends up with, or Megatron's error. Exit 1 if any fails.
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
M=${MEGATRON:-/tmp/megatron}
[ -d "$M/megatron/training" ] || { echo "check.sh: no Megatron-LM tree at $M (set MEGATRON)" >&2; exit 2; }
[ $# = 0 ] && set -- "$root"/tests/golden/export/*.megatron.sh
fails=0
for s in "$@"; do
    s=$(readlink -f "$s")
    nn=$(grep -o -- '--nnodes [0-9]*' "$s" | awk '{print $2}')
    np=$(grep -o -- '--nproc-per-node [0-9]*' "$s" | awk '{print $2}')
    # the Megatron arguments: the script's own words after pretrain_gpt.py, as bash reads them
    args=$(sed -n '/pretrain_gpt.py/,$p' "$s" | grep -v pretrain_gpt.py | grep -v '"\$@"' | sed 's/ \\$//' | tr '\n' ' ')
    env=""
    grep -q "^export CUDA_DEVICE_MAX_CONNECTIONS=1" "$s" && env="CUDA_DEVICE_MAX_CONNECTIONS=1"
    out=$(cd "$M" && eval env -u CUDA_DEVICE_MAX_CONNECTIONS $env TCFG=1 MAMBA_DETERMINISTIC=0 \
        STUB=torch,triton,numpy WORLD_SIZE=$((nn * np)) RANK=0 LOCAL_RANK=0 \
        /usr/bin/python3 "$here/validate.py" $args --tokenizer-type NullTokenizer --mock-data \
        --no-rope-fusion 2>&1 | grep -v "Warning\|warnings.warn\|WARNING")
    if printf '%s\n' "$out" | grep -q "^TransformerConfig OK"; then
        echo "PASS $(basename "$s"): $(printf '%s\n' "$out" | grep -E '^(VALID|TransformerConfig|facts)' | tr '\n' ' ')"
    else
        echo "FAIL $(basename "$s"): $(printf '%s\n' "$out" | tail -3 | tr '\n' ' ')"
        fails=$((fails + 1))
    fi
done
[ $fails = 0 ]
