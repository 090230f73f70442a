#!/usr/bin/env python3
"""What attention dropout costs a fused attention kernel.

Megatron-LM's defaults train with --attention-dropout 0.1 (and
--hidden-dropout 0.1); Llama-style recipes set both to 0. Inside a fused
(FlashAttention / cuDNN) kernel the dropout is a Philox random mask drawn
per score tile, in the forward and again in the backward. This times
PyTorch SDPA's causal attention, forward + backward, with dropout_p 0 and
0.1, on the cuDNN and FlashAttention-2 backends, at the per-GPU shapes of
tensor-parallel training (heads per GPU 4-32, head dim 128, seq 2048-8192).

    python3 bench/attention_dropout_torch.py [OUT.json]

Each figure is the CUDA-event median of 10 calls after 3 warm-up calls.
"""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel

from torch_timing import events_ms, sweep

SHAPES = [  # (batch, heads, seq)
    (1, 4, 4096), (1, 8, 4096), (1, 16, 4096), (1, 32, 4096),
    (4, 8, 2048), (2, 16, 2048), (1, 8, 8192), (1, 32, 8192),
]


def fwd_bwd(backend, b, h, s, p):
    q, k, v = (torch.randn(b, h, s, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
               for _ in range(3))
    go = torch.randn(b, h, s, 128, device="cuda", dtype=torch.bfloat16)

    def fwd():
        with sdpa_kernel(backend):
            return F.scaled_dot_product_attention(q, k, v, is_causal=True, dropout_p=p)

    def both():
        torch.autograd.grad(fwd(), (q, k, v), go)

    with torch.no_grad():
        tf, _ = events_ms(fwd)
    tb, _ = events_ms(both)
    return tf, tb


def case(name, backend, b, h, s):
    try:
        f0, fb0 = fwd_bwd(backend, b, h, s, 0.0)
        f1, fb1 = fwd_bwd(backend, b, h, s, 0.1)
    except RuntimeError as exc:
        print(f"{name:7} {b:2} {h:3} {s:5}  skipped: {str(exc).splitlines()[0][:80]}")
        return None
    print(f"{name:7} {b:2} {h:3} {s:5} {f0:8.3f} {f1:8.3f} {f1 / f0:5.2f}"
          f" {fb0:8.3f} {fb1:8.3f} {fb1 / fb0:5.2f}", flush=True)
    return {"backend": name, "b": b, "heads": h, "seq": s, "fwd_ms_p0": f0,
            "fwd_ms_p01": f1, "fwd_bwd_ms_p0": fb0, "fwd_bwd_ms_p01": fb1}


def main():
    return sweep(f"{'backend':7} {'b':>2} {'h':>3} {'seq':>5} {'fwd p0':>8} {'fwd p.1':>8} {'x':>5}"
                 f" {'f+b p0':>8} {'f+b p.1':>8} {'x':>5}  (ms)", SHAPES, case)


if __name__ == "__main__":
    sys.exit(main())
