#!/usr/bin/env python3
"""The kernels of a decode step on the local GPU, through PyTorch, replayed
from CUDA graphs as serving engines run them (no launch gaps from Python):

  1. weight GEMMs at small M (M = tokens in the batch): bf16 and fp8 (e4m3,
     per-tensor scales), Llama-3-8B (TP 1) and Llama-3-70B (TP 8) shapes;
     the figure is the weight bytes streamed per second, as a fraction of
     the HBM bandwidth given (--hbm-tbs, default the H100 SXM's 3.35 TB/s);
  2. decode attention, one query per sequence against a ctx-token KV cache
     (SDPA, flash and cuDNN backends; GQA), batch 1..128, ctx 512..32768:
     KV bytes per second, same fraction.

    python3 bench/decode_kernels_torch.py [OUT.json] [--hbm-tbs 3.35]

Each figure is the CUDA-event time of one graph replay of 20 back-to-back
calls, divided by 20, median of 5 replays.
"""
import argparse
import json
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from torch_timing import graph_us

GEMMS = {  # name: (K, N)
    "8b-qkv": (4096, 6144), "8b-o": (4096, 4096), "8b-gate_up": (4096, 28672),
    "8b-down": (14336, 4096),
    "70b-tp8-qkv": (8192, 1280), "70b-tp8-o": (1024, 8192), "70b-tp8-gate_up": (8192, 7168),
    "70b-tp8-down": (3584, 8192),
}
MS = (1, 8, 32, 64, 128, 256, 512)
ATTN = [(b, t, h, kvh) for (h, kvh) in ((32, 8), (8, 1)) for b in (1, 8, 32, 128)
        for t in (512, 2048, 8192, 32768) if b * t <= 128 * 8192 * 2]
CALLS = 20


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out", nargs="?")
    ap.add_argument("--hbm-tbs", type=float, default=3.35)
    a = ap.parse_args()
    bw = a.hbm_tbs * 1e12
    one = torch.tensor(1.0, device="cuda")
    rows = {"device": torch.cuda.get_device_name(), "torch": torch.__version__,
            "hbm_Bps": bw, "gemm": [], "attention": []}
    print(f"device: {rows['device']}, torch {torch.__version__}")
    print(f"{'gemm':16} {'M':>5} {'bf16 us':>9} {'frac':>5} {'fp8 us':>9} {'frac':>5}")
    for name, (k, n) in GEMMS.items():
        w = torch.randn(n, k, device="cuda", dtype=torch.bfloat16)
        w8 = w.to(torch.float8_e4m3fn)
        for m in MS:
            x = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
            t16 = graph_us(lambda: x @ w.t(), CALLS)
            t8 = None
            if m % 16 == 0:   # cuBLASLt fp8 wants 16-aligned dims
                x8 = x.to(torch.float8_e4m3fn)
                try:
                    t8 = graph_us(lambda: torch._scaled_mm(x8, w8.t(), scale_a=one, scale_b=one,
                                                                out_dtype=torch.bfloat16), CALLS)
                except RuntimeError:
                    t8 = None
            f16 = 2 * n * k / (t16 * 1e-6) / bw
            f8 = n * k / (t8 * 1e-6) / bw if t8 else None
            rows["gemm"].append({"name": name, "m": m, "k": k, "n": n, "bf16_us": t16, "fp8_us": t8})
            print(f"{name:16} {m:5} {t16:9.2f} {f16:5.2f} "
                  + (f"{t8:9.2f} {f8:5.2f}" if t8 else f"{'-':>9} {'-':>5}"), flush=True)
        del w, w8
    print(f"{'attention':16} {'b':>4} {'ctx':>6} {'h/kvh':>6} {'flash us':>9} {'frac':>5} {'cudnn us':>9} {'frac':>5}")
    for (b, t, h, kvh) in ATTN:
        q = torch.randn(b, h, 1, 128, device="cuda", dtype=torch.bfloat16)
        kk = torch.randn(b, kvh, t, 128, device="cuda", dtype=torch.bfloat16)
        vv = torch.randn(b, kvh, t, 128, device="cuda", dtype=torch.bfloat16)
        kv_bytes = 2 * b * kvh * t * 128 * 2
        res = {}
        for nm, be in (("flash", SDPBackend.FLASH_ATTENTION), ("cudnn", SDPBackend.CUDNN_ATTENTION)):
            try:
                with sdpa_kernel(be):
                    res[nm] = graph_us(lambda: F.scaled_dot_product_attention(
                        q, kk, vv, enable_gqa=h != kvh), CALLS)
            except RuntimeError:
                res[nm] = None
        rows["attention"].append({"b": b, "ctx": t, "heads": h, "kvh": kvh, "kv_bytes": kv_bytes,
                                  "flash_us": res["flash"], "cudnn_us": res["cudnn"]})
        cells = []
        for nm in ("flash", "cudnn"):
            v = res[nm]
            cells.append(f"{v:9.2f} {kv_bytes / (v * 1e-6) / bw:5.2f}" if v else f"{'-':>9} {'-':>5}")
        print(f"{'decode-attn':16} {b:4} {t:6} {h:>3}/{kvh:<2} " + " ".join(cells), flush=True)
        del q, kk, vv
        torch.cuda.empty_cache()
    if a.out:
        with open(a.out, "w") as f:
            json.dump(rows, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
