#!/usr/bin/env python3
"""A measured training step on the local GPU to hold loom's prediction
against: a Llama-3.2-1B-shaped decoder (16 layers, hidden 2048, FFN 8192,
32 query / 8 KV heads, vocabulary 128256, untied head) written in plain
PyTorch as torchtitan writes it (RMSNorm, RoPE, SDPA with the
FlashAttention-2 backend and GQA, SwiGLU), bf16 weights and AdamW (fused),
one GPU, gradient accumulation over micro-batches of 1 sequence.

    python3 bench/train_step_torch.py [OUT.json] [--backend flash|cudnn]

Prints and writes the median step time of 5 steps after 2 warm-up steps,
per configuration (sequence, micro-batches per step). The matching loom
command is printed beside each (examples/models/llama-3.2-1b.json,
a one-H100 cluster written by bench/train_step_check.sh).
"""
import json
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.attention import SDPBackend, sdpa_kernel

L, H, FFN, NH, NKV, V = 16, 2048, 8192, 32, 8, 128256
HD = H // NH
CONFIGS = ((4096, 8), (8192, 4), (16384, 2))


def rope(x, cos, sin):
    x1, x2 = x[..., : HD // 2], x[..., HD // 2:]
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.n1, self.n2 = nn.RMSNorm(H, eps=1e-5), nn.RMSNorm(H, eps=1e-5)
        self.q = nn.Linear(H, NH * HD, bias=False)
        self.k = nn.Linear(H, NKV * HD, bias=False)
        self.v = nn.Linear(H, NKV * HD, bias=False)
        self.o = nn.Linear(NH * HD, H, bias=False)
        self.w1 = nn.Linear(H, FFN, bias=False)
        self.w3 = nn.Linear(H, FFN, bias=False)
        self.w2 = nn.Linear(FFN, H, bias=False)

    def forward(self, x, cos, sin):
        b, s, _ = x.shape
        y = self.n1(x)
        q = self.q(y).view(b, s, NH, HD).transpose(1, 2)
        k = self.k(y).view(b, s, NKV, HD).transpose(1, 2)
        v = self.v(y).view(b, s, NKV, HD).transpose(1, 2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, H))
        y = self.n2(x)
        return x + self.w2(F.silu(self.w1(y)) * self.w3(y))


class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(V, H)
        self.blocks = nn.ModuleList(Block() for _ in range(L))
        self.norm = nn.RMSNorm(H, eps=1e-5)
        self.head = nn.Linear(H, V, bias=False)

    def forward(self, tok, cos, sin):
        x = self.emb(tok)
        for blk in self.blocks:
            x = blk(x, cos, sin)
        return self.head(self.norm(x))


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    backend = SDPBackend.CUDNN_ATTENTION if "--backend=cudnn" in sys.argv or (
        "--backend" in sys.argv and sys.argv[sys.argv.index("--backend") + 1] == "cudnn") \
        else SDPBackend.FLASH_ATTENTION
    args = [a for a in args if a not in ("cudnn", "flash")]
    torch.manual_seed(0)
    model = Model().cuda().to(torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    nparams = sum(p.numel() for p in model.parameters())
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, {nparams / 1e9:.3f} B parameters")
    rows = []
    for seq, micro in CONFIGS:
        pos = torch.arange(seq, device="cuda", dtype=torch.float32)
        inv = 1.0 / (500000.0 ** (torch.arange(0, HD, 2, device="cuda", dtype=torch.float32) / HD))
        ang = torch.outer(pos, inv)
        cos, sin = ang.cos().to(torch.bfloat16), ang.sin().to(torch.bfloat16)
        tok = torch.randint(0, V, (1, seq + 1), device="cuda")

        def step():
            for _ in range(micro):
                with sdpa_kernel(backend):
                    logits = model(tok[:, :-1], cos, sin)
                    loss = F.cross_entropy(logits.view(-1, V).float(), tok[:, 1:].reshape(-1))
                loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)

        for _ in range(2):
            step()
        torch.cuda.synchronize()
        ts = []
        for _ in range(5):
            t0 = time.perf_counter()
            step()
            torch.cuda.synchronize()
            ts.append(time.perf_counter() - t0)
        st = statistics.median(ts)
        mem = torch.cuda.max_memory_allocated() / 2**30
        rows.append({"seq": seq, "micro_batches": micro, "step_s": st, "steps_s": ts, "peak_gib": mem})
        print(f"seq {seq:6} x {micro} micro-batches: step {st:.4f} s (min {min(ts):.4f}), "
              f"{seq * micro / st:.0f} tokens/s, peak {mem:.1f} GiB;  loom eval llama-3.2-1b "
              f"--seq {seq} --mbs 1 --gbs {micro}", flush=True)
        torch.cuda.reset_peak_memory_stats()
    if args:
        with open(args[0], "w") as f:
            json.dump({"device": torch.cuda.get_device_name(), "torch": torch.__version__,
                       "attention": "cudnn" if backend == SDPBackend.CUDNN_ATTENTION else "flash2",
                       "params": nparams, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
