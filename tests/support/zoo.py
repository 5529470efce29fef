"""A model zoo covering the common families of exported models: each entry is
a zero-argument factory returning (module, example inputs, dynamic shapes,
extra input tuples to run), small enough to export in about a second."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn


@dataclass
class ZooModel:
    module: nn.Module
    inputs: tuple[Any, ...]
    dynamic_shapes: Any = None
    more_inputs: list[tuple[Any, ...]] = field(default_factory=list)
    rtol: float = 1e-4
    atol: float = 1e-5


class ResNetBlock(nn.Module):
    def __init__(self, c: int = 16) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b1 = nn.BatchNorm2d(c)
        self.c2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.b2 = nn.BatchNorm2d(c)
        self.down = nn.Conv2d(c, 2 * c, 1, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        return self.down(F.relu(x + y))


class InvertedResidual(nn.Module):
    def __init__(self, c: int = 8, expand: int = 4) -> None:
        super().__init__()
        h = c * expand
        self.expand = nn.Conv2d(c, h, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(h)
        self.dw = nn.Conv2d(h, h, 3, padding=1, groups=h, bias=False)
        self.bn2 = nn.BatchNorm2d(h)
        self.project = nn.Conv2d(h, c, 1, bias=False)
        self.bn3 = nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu6(self.bn1(self.expand(x)))
        y = F.hardswish(self.bn2(self.dw(y)))
        return x + self.bn3(self.project(y))


class LSTMCellModel(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.LSTMCell(12, 20)

    def forward(self, x: torch.Tensor, h: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.cell(x, (h, c))


class GRUSeq(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.cell = nn.GRUCell(6, 10)
        self.head = nn.Linear(10, 3)

    def forward(self, xs: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        for t in range(xs.shape[0]):
            h = self.cell(xs[t], h)
        return self.head(h)


class RMSNorm(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.rand(d) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


class DecoderStep(nn.Module):
    """RMSNorm, rotary embedding, attention over a fixed window, SiLU MLP."""

    def __init__(self, d: int = 32, heads: int = 4, seq: int = 8) -> None:
        super().__init__()
        self.h, self.dh, self.seq = heads, d // heads, seq
        self.norm1, self.norm2 = RMSNorm(d), RMSNorm(d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.gate = nn.Linear(d, 2 * d, bias=False)
        self.up = nn.Linear(d, 2 * d, bias=False)
        self.down = nn.Linear(2 * d, d, bias=False)
        inv = 1.0 / (10000 ** (torch.arange(0, self.dh // 2).float() / (self.dh // 2)))
        self.register_buffer("freqs", torch.outer(torch.arange(seq).float(), inv), persistent=False)

    def rope(self, x: torch.Tensor) -> torch.Tensor:
        cos, sin = self.freqs.cos(), self.freqs.sin()
        a, b = x[..., : self.dh // 2], x[..., self.dh // 2 :]
        return torch.cat([a * cos - b * sin, a * sin + b * cos], dim=-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(self.norm1(x)).view(b, s, 3, self.h, self.dh).permute(2, 0, 3, 1, 4)
        q, k = self.rope(q), self.rope(k)
        a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.o(a.transpose(1, 2).reshape(b, s, d))
        h = self.norm2(x)
        return x + self.down(F.silu(self.gate(h)) * self.up(h))


class AudioConv(nn.Module):
    def __init__(self, c1: int = 8, c2: int = 16, stride: int = 2, classes: int = 4) -> None:
        super().__init__()
        self.c1 = nn.Conv1d(1, c1, 9, stride=stride, padding=4)
        self.c2 = nn.Conv1d(c1, c2, 5, stride=2, padding=2, dilation=1)
        self.c3 = nn.Conv1d(c2, c2, 3, padding=2, dilation=2, groups=4)
        self.fc = nn.Linear(c2, classes)

    def forward(self, wav: torch.Tensor) -> torch.Tensor:
        y = F.gelu(self.c1(wav))
        y = F.leaky_relu(self.c2(y), 0.1)
        y = torch.tanh(self.c3(y))
        return F.softmax(self.fc(y.mean(-1)), dim=-1)


class Upsampler(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.c1 = nn.Conv2d(4, 8, 3, padding=1)
        self.t1 = nn.ConvTranspose2d(8, 8, 4, stride=2, padding=1)
        self.c2 = nn.Conv2d(8, 3, 3, padding=1)

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.c1(z))
        y = F.interpolate(y, scale_factor=2, mode="nearest")
        y = F.relu(self.t1(y))
        y = F.interpolate(y, scale_factor=2, mode="bilinear", align_corners=False)
        return torch.sigmoid(self.c2(y))


class DynamicSeqEncoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.emb = nn.Embedding(40, 16)
        self.ln = nn.LayerNorm(16)
        self.fc = nn.Linear(16, 16)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.ln(self.emb(ids))
        x = x + F.gelu(self.fc(x))
        return x.mean(1)


class IntPreprocess(nn.Module):
    """Integer-heavy preprocessing: masks, clamps, integer arithmetic, gathers."""

    def forward(self, ids: torch.Tensor, lengths: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        pos = torch.arange(ids.shape[1]).unsqueeze(0)
        mask = pos < lengths.unsqueeze(1)
        clipped = torch.clamp(ids, 0, 99) * mask.to(ids.dtype)
        buckets = torch.remainder(clipped, 7) + torch.div(clipped, 10, rounding_mode="floor")
        totals = clipped.sum(1)
        order = torch.argmax(buckets, dim=1)
        return buckets, totals, order


class TransformerLayer(nn.Module):
    def __init__(self, d: int = 32, heads: int = 4, ff: int = 64) -> None:
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d, heads, ff, dropout=0.0, batch_first=True, norm_first=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layer(x)


def _seeded(fn: Callable[[], ZooModel]) -> Callable[[], ZooModel]:
    def make() -> ZooModel:
        torch.manual_seed(0)
        z = fn()
        z.module.eval().requires_grad_(False)
        for m in z.module.modules():  # non-trivial batch-norm statistics
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.5, 0.5)
                m.running_var.uniform_(0.5, 1.5)
        return z

    return make


ZOO: dict[str, Callable[[], ZooModel]] = {
    "resnet_block": _seeded(lambda: ZooModel(ResNetBlock(), (torch.randn(2, 16, 12, 12),))),
    "inverted_residual": _seeded(lambda: ZooModel(InvertedResidual(), (torch.randn(2, 8, 10, 10),))),
    "lstm_cell": _seeded(
        lambda: ZooModel(LSTMCellModel(), (torch.randn(3, 12), torch.randn(3, 20), torch.randn(3, 20)))
    ),
    "gru": _seeded(lambda: ZooModel(GRUSeq(), (torch.randn(5, 2, 6), torch.randn(2, 10)))),
    "transformer_layer": _seeded(lambda: ZooModel(TransformerLayer(), (torch.randn(2, 7, 32),))),
    "decoder_step": _seeded(lambda: ZooModel(DecoderStep(), (torch.randn(1, 8, 32),))),
    "audio_conv1d": _seeded(lambda: ZooModel(AudioConv(), (torch.randn(2, 1, 401),), rtol=1e-4, atol=1e-5)),
    "upsampler": _seeded(lambda: ZooModel(Upsampler(), (torch.randn(1, 4, 5, 6),))),
    "dynamic_seq": _seeded(
        lambda: ZooModel(
            DynamicSeqEncoder(),
            (torch.randint(0, 40, (2, 6)),),
            dynamic_shapes=({1: torch.export.Dim("seq", min=2, max=32)},),
            more_inputs=[(torch.randint(0, 40, (2, 2)),), (torch.randint(0, 40, (2, 31)),)],
        )
    ),
    "int_preprocess": _seeded(
        lambda: ZooModel(
            IntPreprocess(),
            (torch.randint(-20, 150, (4, 9)), torch.tensor([9, 3, 0, 5])),
        )
    ),
}
