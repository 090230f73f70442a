"""Models loom cannot represent, for tests/fx_export.sh: every unsupported
call must be reported by name, source line and module path, and nothing
written."""

import torch
import torch.nn as nn


class FFTMixer(nn.Module):
    """FNet-style token mixing: a Fourier transform has no loom op."""

    def __init__(self, hidden):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.proj = nn.Linear(hidden, hidden)

    def forward(self, x):
        y = torch.fft.fft(self.norm(x), dim=-1).real    # unsupported: torch.fft.fft
        return x + self.proj(y)


class Block(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.mixer = FFTMixer(hidden)
        self.fc = nn.Linear(hidden, 4 * hidden)
        self.act = nn.ReLU()                            # unsupported: no relu in loom
        self.out = nn.Linear(4 * hidden, hidden)

    def forward(self, x):
        x = self.mixer(x)
        return x + self.out(self.act(self.fc(x)))


class FNet(nn.Module):
    def __init__(self, hidden=32, layers=2):
        super().__init__()
        self.blocks = nn.ModuleList(Block(hidden) for _ in range(layers))

    def forward(self, x):
        for b in self.blocks:
            x = b(x)
        return x


class DataDependent(nn.Module):
    """Control flow on tensor values cannot be traced symbolically."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        y = self.fc(x)
        if y.sum() > 0:
            return y
        return -y
