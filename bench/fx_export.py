"""fx_export.py — how long tools/fx_export.py takes on full-size models
(built on the meta device, so no weights are allocated), and what it gives.
Prints figures; asserts nothing. Run through bench/fx_export.sh.

For each case: the time to build, trace, lower and write (torch already
imported: importing torch itself is printed once), the number of ops and
tensors, the file size, and, when a loom binary is given, the parameter
count and forward FLOPs per token that `loom inspect` reads back next to
those of the bundled HF config of the same model."""

import json
import os
import subprocess
import sys
import tempfile
import time

t0 = time.perf_counter()
import torch  # noqa: E402,F401
T_IMPORT = time.perf_counter() - t0

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, os.path.join(ROOT, "tools"))
import fx_export  # noqa: E402

LLAMA = "tests/fx/tiny_llama.py:TinyLlama"
GPT = "tests/fx/tiny_gpt.py:TinyGPT"
CASES = [
    ("llama-3-8b", LLAMA, {"vocab": 128256, "hidden": 4096, "layers": 32, "heads": 32,
                           "kv_heads": 8, "inter": 14336, "fused": True}, 1, 8192, []),
    ("llama-3-70b", LLAMA, {"vocab": 128256, "hidden": 8192, "layers": 80, "heads": 64,
                            "kv_heads": 8, "inter": 28672, "fused": True}, 1, 8192, []),
    ("llama-3.1-405b", LLAMA, {"vocab": 128256, "hidden": 16384, "layers": 126, "heads": 128,
                               "kv_heads": 8, "inter": 53248, "fused": True}, 1, 8192, []),
    ("gpt3-175b", GPT, {"vocab": 50257, "positions": 2048, "hidden": 12288, "layers": 96,
                        "heads": 96}, 1, 2048, ["--unfused-attention"]),
]


def inspect(loom, path, extra):
    out = subprocess.run([loom, "inspect", path, "--json"] + extra, capture_output=True,
                         text=True, check=True).stdout
    return json.loads(out)


def main(loom):
    os.chdir(ROOT)
    print("import torch: %.2f s (torch %s)" % (T_IMPORT, torch.__version__))
    print("%-16s %9s %6s %8s %10s %18s %18s" % ("model", "export_s", "ops", "tensors", "file_KiB",
                                              "params fx/hf", "GFLOP/token fx/hf"))
    with tempfile.TemporaryDirectory() as d:
        for name, model, kw, b, s, extra in CASES:
            out = os.path.join(d, name + ".json")
            args = [model, "--kwargs", json.dumps(kw), "--input", "input_ids=int64[%d,%d]" % (b, s),
                    "--input", "labels=int64[%d,%d]" % (b, s), "-o", out]
            t = time.perf_counter()
            rc = fx_export.main(args)
            dt = time.perf_counter() - t
            if rc:
                print("%-16s export failed (%d)" % (name, rc))
                continue
            with open(out) as f:
                doc = json.load(f)
            row = "%-16s %9.2f %6d %8d %10.0f" % (name, dt, len(doc["ops"]), len(doc["tensors"]),
                                                  os.path.getsize(out) / 1024)
            if loom:
                a = inspect(loom, out, [])
                h = inspect(loom, name, ["--seq", str(s), "--batch", str(b)] + extra)
                row += " %8.2fB/%7.2fB %8.2f/%8.2f" % (a["params"] / 1e9, h["params"] / 1e9,
                                                       a["flops_per_token_fwd"] / 1e9,
                                                       h["flops_per_token_fwd"] / 1e9)
            print(row)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else None))
