#!/usr/bin/env python3
"""FP8 (e4m3, per-tensor scales, bf16 out) vs bf16 GEMM throughput on the local
GPU through PyTorch (cuBLASLt underneath), with both operands already in the
layout the tensor cores want: what Transformer Engine's fp8 GEMM costs once
its cast-transpose kernel has run. loom-profile's own fp8 einsums include a
permute of one operand (its einsum planner's TN layout), so they overstate
the GEMM alone.

    python3 bench/gemm_fp8_torch.py [OUT.json]
"""
import json
import sys

import torch

from torch_timing import events_ms

SHAPES = [(m, k, n) for m in (4096, 16384) for (k, n) in
          ((8192, 28672), (28672, 8192), (8192, 8192), (8192, 1024), (8192, 128256),
           (4096, 14336), (14336, 4096), (4096, 4096), (4096, 1024))]


def main():
    rows = []
    one = torch.tensor(1.0, device="cuda")
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(f"{'M':>6} {'K':>6} {'N':>7} {'bf16 us':>9} {'fp8 us':>9} {'bf16 TF/s':>9} {'fp8 TF/s':>9} {'ratio':>6}")
    for m, k, n in SHAPES:
        a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        a8, w8 = a.to(torch.float8_e4m3fn), w.to(torch.float8_e4m3fn)
        t16 = events_ms(lambda: a @ w.t())[0]
        t8 = events_ms(lambda: torch._scaled_mm(a8, w8.t(), scale_a=one, scale_b=one,
                                                out_dtype=torch.bfloat16))[0]
        fl = 2.0 * m * k * n
        rows.append({"m": m, "k": k, "n": n, "bf16_us": t16 * 1e3, "fp8_us": t8 * 1e3})
        print(f"{m:6} {k:6} {n:7} {t16 * 1e3:9.1f} {t8 * 1e3:9.1f} {fl / t16 / 1e9:9.0f} "
              f"{fl / t8 / 1e9:9.0f} {t16 / t8:6.2f}", flush=True)
        del a, w, a8, w8
        torch.cuda.empty_cache()
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
