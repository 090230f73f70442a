#!/usr/bin/env bash
# fx_export.sh [LOOM] — times tools/fx_export.py on full-size Llama-3 and
# GPT-3 shaped PyTorch models (tests/fx/) and, given a loom binary, prints
# the parameters and FLOPs/token it reads back next to the bundled HF
# configs'. Needs Debian's python3-torch (/usr/bin/python3).
set -euo pipefail
cd "$(dirname "$0")/.."
/usr/bin/python3 -c 'import torch' 2>/dev/null || { echo "fx_export: /usr/bin/python3 cannot import torch (apt-get install python3-torch)" >&2; exit 1; }
exec /usr/bin/python3 bench/fx_export.py "$@"
