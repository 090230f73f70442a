"""A small Llama in plain PyTorch, laid out like Hugging Face's
LlamaForCausalLM (model.embed_tokens, model.layers.N.self_attn.q_proj, ...,
an untied lm_head), with grouped-query attention (repeat_kv), RMSNorm,
rotary embeddings (rotate_half) and a SwiGLU MLP, so that its loom export
can be checked against `loom inspect` on tests/fx/tiny_llama.config.json.

Attention is the eager softmax(q kᵀ / sqrt(dh) + causal mask) v, or
F.scaled_dot_product_attention when fused=True and torch has it.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class LlamaRMSNorm(nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, x):
        dtype = x.dtype
        x = x.float()
        x = x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)
        return self.weight * x.to(dtype)


class Rotary(nn.Module):
    def __init__(self, head_dim, theta=10000.0):
        super().__init__()
        inv = 1.0 / (theta ** (torch.arange(0, head_dim, 2).float() / head_dim))
        self.register_buffer("inv_freq", inv, persistent=False)

    def forward(self, seq):
        t = torch.arange(seq, device=self.inv_freq.device).float()
        freqs = torch.outer(t, self.inv_freq)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos(), emb.sin()


def rotate_half(x):
    x1 = x[..., : x.shape[-1] // 2]
    x2 = x[..., x.shape[-1] // 2:]
    return torch.cat((-x2, x1), dim=-1)


def apply_rotary_pos_emb(q, k, cos, sin):
    cos, sin = cos[None, None], sin[None, None]
    return (q * cos) + (rotate_half(q) * sin), (k * cos) + (rotate_half(k) * sin)


def repeat_kv(x, n_rep):
    b, kvh, s, dh = x.shape
    if n_rep == 1:
        return x
    x = x[:, :, None, :, :].expand(b, kvh, n_rep, s, dh)
    return x.reshape(b, kvh * n_rep, s, dh)


class Attention(nn.Module):
    def __init__(self, hidden, heads, kv_heads, fused):
        super().__init__()
        self.heads, self.kv_heads, self.dh, self.fused = heads, kv_heads, hidden // heads, fused
        self.q_proj = nn.Linear(hidden, heads * self.dh, bias=False)
        self.k_proj = nn.Linear(hidden, kv_heads * self.dh, bias=False)
        self.v_proj = nn.Linear(hidden, kv_heads * self.dh, bias=False)
        self.o_proj = nn.Linear(heads * self.dh, hidden, bias=False)

    def forward(self, x, cos, sin, mask):
        b, s, _ = x.shape
        q = self.q_proj(x).view(b, s, self.heads, self.dh).transpose(1, 2)
        k = self.k_proj(x).view(b, s, self.kv_heads, self.dh).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.kv_heads, self.dh).transpose(1, 2)
        q, k = apply_rotary_pos_emb(q, k, cos, sin)
        k = repeat_kv(k, self.heads // self.kv_heads)
        v = repeat_kv(v, self.heads // self.kv_heads)
        if self.fused and hasattr(F, "scaled_dot_product_attention"):
            o = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            w = torch.matmul(q, k.transpose(2, 3)) / math.sqrt(self.dh)
            w = w + mask
            w = F.softmax(w, dim=-1, dtype=torch.float32).to(q.dtype)
            o = torch.matmul(w, v)
        o = o.transpose(1, 2).reshape(b, s, -1)
        return self.o_proj(o)


class MLP(nn.Module):
    def __init__(self, hidden, inter):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, inter, bias=False)
        self.up_proj = nn.Linear(hidden, inter, bias=False)
        self.down_proj = nn.Linear(inter, hidden, bias=False)
        self.act_fn = nn.SiLU()

    def forward(self, x):
        return self.down_proj(self.act_fn(self.gate_proj(x)) * self.up_proj(x))


class DecoderLayer(nn.Module):
    def __init__(self, hidden, heads, kv_heads, inter, fused):
        super().__init__()
        self.input_layernorm = LlamaRMSNorm(hidden)
        self.self_attn = Attention(hidden, heads, kv_heads, fused)
        self.post_attention_layernorm = LlamaRMSNorm(hidden)
        self.mlp = MLP(hidden, inter)

    def forward(self, x, cos, sin, mask):
        x = x + self.self_attn(self.input_layernorm(x), cos, sin, mask)
        return x + self.mlp(self.post_attention_layernorm(x))


class LlamaModel(nn.Module):
    def __init__(self, vocab, hidden, layers, heads, kv_heads, inter, fused):
        super().__init__()
        self.embed_tokens = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(DecoderLayer(hidden, heads, kv_heads, inter, fused)
                                    for _ in range(layers))
        self.norm = LlamaRMSNorm(hidden)
        self.rotary_emb = Rotary(hidden // heads)

    def forward(self, input_ids):
        s = input_ids.shape[1]
        x = self.embed_tokens(input_ids)
        cos, sin = self.rotary_emb(s)
        mask = torch.full((s, s), float("-inf"), device=x.device).triu(1)
        for layer in self.layers:
            x = layer(x, cos, sin, mask)
        return self.norm(x)


class TinyLlama(nn.Module):
    def __init__(self, vocab=1000, hidden=64, layers=2, heads=8, kv_heads=2, inter=176,
                 fused=False):
        super().__init__()
        self.model = LlamaModel(vocab, hidden, layers, heads, kv_heads, inter, fused)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, input_ids, labels=None):
        logits = self.lm_head(self.model(input_ids))
        if labels is None:
            return logits
        return F.cross_entropy(logits.view(-1, logits.size(-1)), labels.view(-1))
