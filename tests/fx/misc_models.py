"""Small models that exercise the exporter off the GPT/Llama path, each with
forward FLOPs that tests/fx/check_export.py computes by hand:

* SquareMLP: float input fed directly (no embedding), square [h, h] weights
  (one atom on both sides of a weight), F.linear on a parameter, a
  torch.einsum projection, blocks in an nn.Sequential called "blocks".
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class Block(nn.Module):
    def __init__(self, hidden, inner):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.up = nn.Parameter(torch.empty(hidden, inner))
        self.down = nn.Linear(inner, hidden, bias=False)
        self.mix = nn.Linear(hidden, hidden)        # square: [h, h]

    def forward(self, x):
        y = torch.einsum("bsh,hf->bsf", self.norm(x), self.up)
        x = x + self.down(F.gelu(y))
        return x + F.linear(x, self.mix.weight, self.mix.bias)


class SquareMLP(nn.Module):
    def __init__(self, hidden=48, inner=80, layers=3):
        super().__init__()
        self.blocks = nn.Sequential(*[Block(hidden, inner) for _ in range(layers)])
        self.head = nn.Linear(hidden, 10)

    def forward(self, x):
        return self.head(self.blocks(x)).float().softmax(-1)
