#!/usr/bin/env python3
"""Times production attention kernels (PyTorch's SDPA: FlashAttention-2 and
cuDNN fused attention) on the local GPU and writes them as a loom-profile/1
db, one per backend.

loom-profile's own attention kernel (gpu/kernels_attention.cu) is a
correctness reference: on an H100 it runs 15-25x slower than FlashAttention,
so it is no ground truth for a plan. This script gives the db the kernels a
training or serving run really launches, under the same keys loom's cost
model looks up (op "attention", sig "causal", shape b s t heads kvh dqk dv).

    python3 bench/profile_attention_torch.py OUTDIR [--quick]

Writes OUTDIR/attention-flash2.json and OUTDIR/attention-cudnn.json. Times are
CUDA-event medians over the repeats (L2 warm), forward and backward (dq, dk,
dv) separately. A shape a backend refuses is skipped and said so.
"""
import argparse
import json
import os
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from torch_timing import events_ms

# (b, s, t, heads, kvh, d): Llama-3-8B and -70B layer shards at TP 1..8 and
# seq 4096 (the keys loom-profile enumerates), long-context prefill on the
# TP-8 shards, and decode steps (one query against a t-token cache).
LLAMA_4K = [(1, 4096, 4096, 32 // tp, max(8 // tp, 1), 128) for tp in (1, 2, 4, 8)] + \
           [(1, 4096, 4096, 64 // tp, max(8 // tp, 1), 128) for tp in (1, 2, 4, 8)]
LONG = [(1, s, s, 8, 1, 128) for s in (8192, 16384, 32768, 65536, 131072)] + \
       [(1, s, s, 64, 8, 128) for s in (8192, 16384, 32768)] + \
       [(1, s, s, 32, 8, 128) for s in (8192, 16384, 32768)]
DECODE = [(b, 1, t, 8, 1, 128) for b in (1, 8, 32, 128) for t in (1024, 4096, 16384)]

BACKENDS = {"flash2": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}


def measure(backend, b, s, t, heads, kvh, d, warm, reps):
    dev, dt = "cuda", torch.bfloat16
    q = torch.randn(b, heads, s, d, device=dev, dtype=dt, requires_grad=True)
    k = torch.randn(b, kvh, t, d, device=dev, dtype=dt, requires_grad=True)
    v = torch.randn(b, kvh, t, d, device=dev, dtype=dt, requires_grad=True)
    # A single query is the cache's last position: no mask. Torch's causal
    # mask is top-left aligned, so it is only right for s == t.
    causal = s == t
    gqa = heads != kvh
    with sdpa_kernel(BACKENDS[backend]):
        def fwd():
            return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
        o = fwd()
        g = torch.randn_like(o)

        def bwd():
            return torch.autograd.grad(o, (q, k, v), g, retain_graph=True)
        f_ms, f_spread = events_ms(fwd, warm, reps)
        b_ms, b_spread = events_ms(bwd, warm, reps) if s > 1 else (0.0, 0.0)
    return f_ms, b_ms, max(f_spread, b_spread)


def driver_release():
    try:
        with open("/proc/driver/nvidia/version") as f:
            for tok in f.readline().split():
                if tok[:1].isdigit() and "." in tok:
                    return tok
    except OSError:
        pass
    return ""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("outdir")
    ap.add_argument("--quick", action="store_true", help="the seq-4096 keys only")
    ap.add_argument("--repeats", type=int, default=10)
    args = ap.parse_args()
    os.makedirs(args.outdir, exist_ok=True)
    shapes = LLAMA_4K + ([] if args.quick else LONG + DECODE)
    name = torch.cuda.get_device_name()
    print(f"device: {name}, torch {torch.__version__}, CUDA {torch.version.cuda}", flush=True)
    for backend in BACKENDS:
        entries = []
        for (b, s, t, heads, kvh, d) in shapes:
            try:
                f_ms, b_ms, spread = measure(backend, b, s, t, heads, kvh, d, 3, args.repeats)
            except RuntimeError as e:  # a backend refusing a shape, or out of memory
                print(f"{backend} b{b} s{s} t{t} h{heads}/{kvh}: skipped ({str(e).splitlines()[0][:100]})",
                      flush=True)
                torch.cuda.empty_cache()
                continue
            # Attention FLOPs as loom counts them: 2·b·heads·s·t·(dqk+dv),
            # halved under a causal mask (s == t).
            flops = 2 * b * heads * s * t * (d + d) * (0.5 if s == t else 1.0)
            print(f"{backend} b{b} s{s} t{t} h{heads}/{kvh}: fwd {f_ms * 1e3:9.1f} us "
                  f"({flops / f_ms / 1e9:5.0f} TFLOP/s)  bwd {b_ms * 1e3:9.1f} us", flush=True)
            entries.append({
                "op": "attention", "sig": "causal", "dtype": "bf16",
                "shape": {"b": b, "s": s, "t": t, "heads": heads, "kvh": kvh, "dqk": d, "dv": d},
                "fwd_ns": round(f_ms * 1e6), "bwd_ns": round(b_ms * 1e6),
                "spread": round(spread, 4), "repeats": args.repeats,
                "kernels": [f"torch.nn.functional.scaled_dot_product_attention ({backend})"]})
            torch.cuda.empty_cache()
        db = {"format": "loom-profile/1", "device": name, "cuda": torch.version.cuda or "",
              "driver": driver_release(),
              "clock_note": f"clocks not locked; L2 warm; CUDA events; torch {torch.__version__}",
              "entries": entries}
        path = os.path.join(args.outdir, f"attention-{backend}.json")
        with open(path, "w") as f:
            json.dump(db, f, indent=1)
        print(f"{path}: {len(entries)} entries", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
