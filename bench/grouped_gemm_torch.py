#!/usr/bin/env python3
"""How an MoE layer's expert GEMMs run on the local GPU: one grouped GEMM
(torch._grouped_mm, bf16, the kind of kernel Megatron's grouped-GEMM experts
and TE's GroupedLinear launch) against the same experts as separate GEMMs and
against one dense GEMM of the same total work, all replayed from CUDA graphs.

Shapes: local experts of Qwen3-30B-A3B (hidden 2048, expert FFN 768, 128
experts top-8) and gpt-oss-120b (hidden 2880, expert FFN 2880, 128 experts
top-4) under EP 8 (16 local experts), tokens per micro-batch 4096-16384,
tokens spread evenly over the experts (force-balanced routing).

    python3 bench/grouped_gemm_torch.py [OUT.json]
"""
import json
import sys

import torch

from torch_timing import graph_us

MODELS = {"qwen3-30b-a3b": (2048, 768, 8, 128), "gpt-oss-120b": (2880, 2880, 4, 128)}
EP = 8
CALLS = 10


def main():
    rows = []
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(f"{'model':14} {'gemm':8} {'tokens':>6} {'G':>3} {'per-exp M':>9} {'grouped us':>10} "
          f"{'loop us':>9} {'dense us':>9} {'TF/s grp':>8}")
    for name, (h, f, topk, experts) in MODELS.items():
        local = experts // EP
        for tokens in (4096, 8192, 16384):
            m = tokens * topk // experts            # tokens per expert, balanced
            for gemm, (k, n) in (("gate_up", (h, 2 * f)), ("down", (f, h))):
                x = torch.randn(m * local, k, device="cuda", dtype=torch.bfloat16)
                w = torch.randn(local, k, n, device="cuda", dtype=torch.bfloat16)
                offs = torch.arange(m, m * local + 1, m, device="cuda", dtype=torch.int32)
                t_grp = None
                # row-major weights first, then the column-major layout some
                # versions require
                wt = w.transpose(1, 2).contiguous().transpose(1, 2)
                for ww in (w, wt):
                    try:
                        t_grp = graph_us(lambda: torch._grouped_mm(x, ww, offs=offs), CALLS)
                        break
                    except (RuntimeError, AttributeError) as e:
                        print(f"grouped_mm: {str(e).splitlines()[0][:120]}")
                xs = list(x.split(m))

                def loop():
                    for i in range(local):
                        torch.mm(xs[i], w[i])
                t_loop = graph_us(loop, CALLS)
                wd = torch.randn(k, n * local, device="cuda", dtype=torch.bfloat16)
                xd = x[:m]
                t_dense = graph_us(lambda: torch.mm(xd, wd), CALLS)   # same FLOPs, one GEMM
                fl = 2.0 * m * local * k * n
                rows.append({"model": name, "gemm": gemm, "tokens": tokens, "groups": local, "m": m,
                             "k": k, "n": n, "grouped_us": t_grp, "loop_us": t_loop,
                             "dense_us": t_dense})
                print(f"{name:14} {gemm:8} {tokens:6} {local:3} {m:9} "
                      + (f"{t_grp:10.1f}" if t_grp else f"{'-':>10}")
                      + f" {t_loop:9.1f} {t_dense:9.1f} "
                      + (f"{fl / t_grp / 1e6:8.0f}" if t_grp else f"{'-':>8}"), flush=True)
                del x, w, wt, wd
                torch.cuda.empty_cache()
    if len(sys.argv) > 1:
        with open(sys.argv[1], "w") as fo:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "rows": rows}, fo, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
