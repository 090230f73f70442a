"""A small GPT-2 in plain PyTorch, laid out like Hugging Face's
GPT2LMHeadModel (same module paths: transformer.wte, transformer.h.N.attn.
c_attn, ...), so that its loom export can be checked against `loom inspect`
on the equivalent config.json (tests/fx/tiny_gpt.config.json).

nn.Linear stands in for HF's Conv1D (same parameters, transposed storage).
Attention is the eager softmax(q kᵀ / sqrt(dh) + causal mask) v, or
F.scaled_dot_product_attention when fused=True and torch has it.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class Attention(nn.Module):
    def __init__(self, hidden, heads, positions, pdrop, fused):
        super().__init__()
        self.heads, self.hidden, self.fused, self.pdrop = heads, hidden, fused, pdrop
        self.c_attn = nn.Linear(hidden, 3 * hidden)
        self.c_proj = nn.Linear(hidden, hidden)
        self.attn_dropout = nn.Dropout(pdrop)
        self.resid_dropout = nn.Dropout(pdrop)
        mask = torch.tril(torch.ones(positions, positions)).view(1, 1, positions, positions)
        self.register_buffer("bias", mask, persistent=False)

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(self.hidden, dim=2)
        dh = C // self.heads
        q = q.view(B, T, self.heads, dh).transpose(1, 2)
        k = k.view(B, T, self.heads, dh).transpose(1, 2)
        v = v.view(B, T, self.heads, dh).transpose(1, 2)
        if self.fused and hasattr(F, "scaled_dot_product_attention"):
            y = F.scaled_dot_product_attention(q, k, v, dropout_p=self.pdrop, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(dh))
            att = att.masked_fill(self.bias[:, :, :T, :T] == 0, float("-inf"))
            att = F.softmax(att, dim=-1)
            att = self.attn_dropout(att)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self, hidden, inner, pdrop):
        super().__init__()
        self.c_fc = nn.Linear(hidden, inner)
        self.act = nn.GELU(approximate="tanh")
        self.c_proj = nn.Linear(inner, hidden)
        self.dropout = nn.Dropout(pdrop)

    def forward(self, x):
        return self.dropout(self.c_proj(self.act(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self, hidden, heads, inner, positions, pdrop, fused):
        super().__init__()
        self.ln_1 = nn.LayerNorm(hidden)
        self.attn = Attention(hidden, heads, positions, pdrop, fused)
        self.ln_2 = nn.LayerNorm(hidden)
        self.mlp = MLP(hidden, inner, pdrop)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class Transformer(nn.Module):
    def __init__(self, vocab, positions, hidden, layers, heads, inner, pdrop, fused):
        super().__init__()
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(positions, hidden)
        self.drop = nn.Dropout(pdrop)
        self.h = nn.ModuleList(Block(hidden, heads, inner, positions, pdrop, fused)
                               for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden)


class TinyGPT(nn.Module):
    def __init__(self, vocab=1000, positions=256, hidden=64, layers=2, heads=4, inner=None,
                 pdrop=0.1, fused=False):
        super().__init__()
        self.transformer = Transformer(vocab, positions, hidden, layers, heads,
                                       inner or 4 * hidden, pdrop, fused)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        self.lm_head.weight = self.transformer.wte.weight      # tied, as in GPT-2

    def forward(self, input_ids, labels):
        t = self.transformer
        pos = torch.arange(input_ids.size(1), device=input_ids.device)
        x = t.drop(t.wte(input_ids) + t.wpe(pos))
        for block in t.h:
            x = block(x)
        logits = self.lm_head(t.ln_f(x))
        return F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1))
