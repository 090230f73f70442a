#!/usr/bin/env python3
"""Does the memory layout Megatron hands a fused attention kernel cost time?

Megatron-Core keeps activations as [s, b, h] and its fused QKV projection
writes q, k and v interleaved per head group ([s, b, groups, (q heads per
group + 2) * d]), which Transformer Engine passes to cuDNN as strided views
(its "sbhd" / "sbh3d" layouts). Micro-benchmarks usually time contiguous
[b, h, s, d] tensors. This times PyTorch SDPA, causal, forward + backward,
on the cuDNN and FlashAttention-2 backends with q, k, v as

  bhsd    contiguous [b, h, s, d] (the usual benchmark),
  sbhd    views of contiguous [s, b, h, d] tensors,
  sbh3d   views into one packed [s, b, h, 3, d] tensor (a fused QKV output),

at head dim 128, micro-batch 1, seq 4096 and 8192, 8 and 32 heads.

    python3 bench/attention_layout_torch.py [OUT.json]

Each figure is the CUDA-event median of 10 calls after 3 warm-up calls.
"""
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import sdpa_kernel

from torch_timing import events_ms, sweep

SHAPES = [(1, 8, 4096), (1, 32, 4096), (1, 8, 8192), (1, 32, 8192), (2, 16, 4096)]
D = 128


def make(layout, b, h, s):
    kw = dict(device="cuda", dtype=torch.bfloat16)
    if layout == "bhsd":
        return [torch.randn(b, h, s, D, **kw).requires_grad_() for _ in range(3)], None
    if layout == "sbhd":
        leaves = [torch.randn(s, b, h, D, **kw).requires_grad_() for _ in range(3)]
        return leaves, lambda: [t.permute(1, 2, 0, 3) for t in leaves]
    packed = torch.randn(s, b, h, 3, D, **kw).requires_grad_()
    return [packed], lambda: [packed[:, :, :, i].permute(1, 2, 0, 3) for i in range(3)]


def time_layout(backend, layout, b, h, s):
    leaves, views = make(layout, b, h, s)
    go = torch.randn(b, h, s, D, device="cuda", dtype=torch.bfloat16)

    def run():
        q, k, v = views() if views else leaves
        with sdpa_kernel(backend):
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        torch.autograd.grad(o, leaves, go)

    ms, _ = events_ms(run)
    return ms


def case(name, backend, b, h, s):
    t = {}
    for layout in ("bhsd", "sbhd", "sbh3d"):
        try:
            t[layout] = time_layout(backend, layout, b, h, s)
        except RuntimeError as exc:
            t[layout] = None
            print(f"  {name} {layout} b{b} h{h} s{s}: {str(exc).splitlines()[0][:90]}")
    base = t["bhsd"]
    cells = "".join(f" {t[k]:8.3f} {t[k] / base:5.2f}" if t[k] and base else f" {'-':>8} {'-':>5}"
                    for k in ("sbhd", "sbh3d"))
    print(f"{name:7} {b:2} {h:3} {s:5} {base or 0:8.3f}{cells}", flush=True)
    return {"backend": name, "b": b, "heads": h, "seq": s, **{f"{k}_ms": v for k, v in t.items()}}


def main():
    return sweep(f"{'backend':7} {'b':>2} {'h':>3} {'seq':>5} {'bhsd ms':>8} {'sbhd ms':>8} {'x':>5}"
                 f" {'sbh3d ms':>9} {'x':>5}", SHAPES, case)


if __name__ == "__main__":
    sys.exit(main())
