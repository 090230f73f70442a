#!/usr/bin/env python3
"""How much does a collective running beside it slow a compute kernel down?

In a training step, NCCL's kernels run concurrently with the layers' GEMMs
and attention (overlapped gradient reduce-scatter, FSDP all-gathers, TP
comm overlap, context-parallel ring p2p, MoE all-to-all). An NCCL kernel
is C thread blocks (one per channel, 512-640 threads each) that stream
buffers through HBM while they send and receive: it takes C SMs away from
the compute kernel and some of the HBM bandwidth. One GPU cannot run a real
collective, so this stands in for it: a Triton kernel of C programs
(16 warps, 512 threads each) that loops `dst = a + b` over 128 MiB buffers,
the HBM traffic of a ring step (two reads, one write), launched on a side
stream before the timed kernels and running until they are done.

For each workload (bf16 GEMMs, SDPA causal attention forward and
forward + backward with the cuDNN and FlashAttention-2 backends, a
memory-bound element-wise kernel) it prints the time alone and the
slowdown beside C = 4, 8, 16, 24 and 32 streaming blocks (NCCL's
channel counts on NVLink; DeepEP's dispatch takes ~20-24 SMs), and the side
kernel's own HBM rate alone and while the workload runs.

    python3 bench/overlap_contention_torch.py [OUT.json]

Times are CUDA-event medians of 10 calls after 3 warm-up calls. Attention
is multi-head (32 heads of 128): grouped KV heads change the bytes, not the
work.
"""
import sys

import torch
import torch.nn.functional as F
import triton
import triton.language as tl
from torch.nn.attention import SDPBackend, sdpa_kernel

from torch_timing import events_ms, save_rows

BLOCK = 4096          # elements per program per step (bf16: 8 KiB)
SIDE_ELEMS = 1 << 26  # bf16 elements per side buffer: 128 MiB, well beyond the L2
CTAS = (4, 8, 16, 24, 32)


# iters and n stay runtime values: Triton would compile a separate kernel for
# an argument equal to 1 (and time the compilation).
@triton.jit(do_not_specialize=["n", "iters"])
def _ring_step(a, b, dst, n, iters, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    step = tl.num_programs(0) * BLOCK
    offs = tl.arange(0, BLOCK)
    for _ in range(iters):
        for start in range(pid * BLOCK, n, step):
            x = tl.load(a + start + offs) + tl.load(b + start + offs)
            tl.store(dst + start + offs, x)


class Side:
    """The stand-in collective: C programs of 512 threads streaming a+b->dst."""

    def __init__(self):
        self.n = SIDE_ELEMS
        self.a = torch.randn(self.n, device="cuda", dtype=torch.bfloat16)
        self.b = torch.randn(self.n, device="cuda", dtype=torch.bfloat16)
        self.dst = torch.empty_like(self.a)
        self.stream = torch.cuda.Stream()
        self.bytes_per_iter = 3 * self.n * 2

    def launch(self, ctas, iters):
        with torch.cuda.stream(self.stream):
            _ring_step[(ctas,)](self.a, self.b, self.dst, self.n, iters, BLOCK=BLOCK,
                                num_warps=16)

    def rate_alone(self, ctas, iters=10):
        """HBM bytes per second (read + written) of the kernel alone."""
        self.launch(ctas, 1)
        torch.cuda.synchronize()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(self.stream):
            s.record()
        self.launch(ctas, iters)
        with torch.cuda.stream(self.stream):
            e.record()
        torch.cuda.synchronize()
        return iters * self.bytes_per_iter / (s.elapsed_time(e) * 1e-3)


def beside(side, ctas, fn, alone_ms, rate):
    """fn's median time while `ctas` streaming programs run, and the side
    kernel's rate over the same stretch."""
    window_s = (3 + 10) * alone_ms * 1e-3 * 3 + 0.05      # generous: slowdowns stay under 3x
    iters = max(1, int(window_s * rate / side.bytes_per_iter) + 1)
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    main_end = torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    with torch.cuda.stream(side.stream):
        s.record()
    side.launch(ctas, iters)
    with torch.cuda.stream(side.stream):
        e.record()
    # Do not start the timed calls until the side kernel holds its SMs.
    torch.cuda._sleep(200000)
    med, spread = events_ms(fn, device_sync=False)
    torch.cuda.current_stream().record_event(main_end)
    torch.cuda.synchronize()
    covered = main_end.elapsed_time(e) > 0          # side still running at the end
    side_rate = iters * side.bytes_per_iter / (s.elapsed_time(e) * 1e-3)
    return med, spread, covered, side_rate


def workloads():
    bf = torch.bfloat16
    out = []

    def gemm(name, m, k, n):
        x = torch.randn(m, k, device="cuda", dtype=bf)
        w = torch.randn(k, n, device="cuda", dtype=bf)
        out.append((name, 2 * m * k * n, lambda: x @ w))

    gemm("gemm 8192x4096x14336 (8B MLP)", 8192, 4096, 14336)
    gemm("gemm 8192x8192x3584 (70B TP8)", 8192, 8192, 3584)
    gemm("gemm 8192^3", 8192, 8192, 8192)
    gemm("gemm 2048x4096x4096 (small)", 2048, 4096, 4096)

    def attn(name, backend, b, s, h, bwd):
        q, k, v = (torch.randn(b, h, s, 128, device="cuda", dtype=bf, requires_grad=bwd)
                   for _ in range(3))
        go = torch.randn(b, h, s, 128, device="cuda", dtype=bf)
        # The work a causal kernel does: half of the 4*s*s*d per head, x3.5 with backward.
        flops = 2 * b * h * s * s * 128 * (3.5 if bwd else 1.0)

        def run():
            with sdpa_kernel(backend):
                o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
                if bwd:
                    torch.autograd.grad(o, (q, k, v), go)
        try:
            run()
        except RuntimeError as exc:
            print(f"skip {name}: {exc}".splitlines()[0])
            return
        out.append((name, flops, run))

    for be, nm in ((SDPBackend.CUDNN_ATTENTION, "cudnn"), (SDPBackend.FLASH_ATTENTION, "flash")):
        attn(f"attn {nm} fwd s8192 h32", be, 1, 8192, 32, False)
        attn(f"attn {nm} fwd+bwd s8192 h32", be, 1, 8192, 32, True)
        attn(f"attn {nm} fwd+bwd s2048 b4 h32", be, 4, 2048, 32, True)

    x = torch.randn(1 << 28, device="cuda", dtype=bf)
    out.append(("silu 2^28 bf16 (HBM-bound)", 0, lambda: F.silu(x)))
    return out


def main():
    path = sys.argv[1] if len(sys.argv) > 1 else None
    props = torch.cuda.get_device_properties(0)
    print(f"device: {props.name}, {props.multi_processor_count} SMs, torch {torch.__version__}, "
          f"triton {triton.__version__}")
    side = Side()
    rates = {c: side.rate_alone(c) for c in CTAS}
    print("side kernel alone (a+b->dst, HBM bytes/s): "
          + ", ".join(f"C={c}: {r / 1e12:.2f} TB/s" for c, r in rates.items()), flush=True)
    rows = []
    hdr = f"{'workload':34} {'alone ms':>9} {'TFLOP/s':>8}" + "".join(f" {'C=' + str(c):>13}" for c in CTAS)
    print(hdr)
    for name, flops, fn in workloads():
        # 10 warm-up calls: with 3, the one-wave GEMM once timed 0.435 ms
        # alone against 0.088 in two other runs (cause not established)
        alone, spread = events_ms(fn, warm=10, reps=10)
        row = {"workload": name, "flops": flops, "alone_ms": alone, "alone_spread": spread,
               "beside": []}
        cells = []
        for c in CTAS:
            med, sp, covered, srate = beside(side, c, fn, alone, rates[c])
            row["beside"].append({"ctas": c, "ms": med, "spread": sp, "covered": covered,
                                  "side_Bps": srate, "side_alone_Bps": rates[c]})
            cells.append(f" {med / alone:6.3f}x/{srate / 1e12:4.2f}" + ("" if covered else "!"))
        tf = flops / (alone * 1e-3) / 1e12 if flops else 0.0
        print(f"{name:34} {alone:9.3f} {tf:8.1f}" + "".join(cells), flush=True)
        rows.append(row)
    print("cells: slowdown beside C streaming blocks / the side kernel's TB/s meanwhile "
          "('!': the side kernel ended before the timed calls)")
    save_rows(path, rows, sms=props.multi_processor_count, side_alone_Bps=rates)
    return 0


if __name__ == "__main__":
    sys.exit(main())
