"""Layouts of ExecuTorch's example models (executorch/examples/models),
rebuilt by hand at reduced sizes so that the tests need no torchsr or
torchvision: EDSR (torchsr's r16f64: mean shifts, residual blocks, pixel
shuffle), MobileNet's inverted residual block (torchvision's mobilenet_v2
and mobilenet_v3) and the Emformer RNN-T joiner (torchaudio's, as
emformer_rnnt_base builds it), with random weights."""

from __future__ import annotations

import torch
from torch import nn


class MeanShift(nn.Conv2d):
    def __init__(self, sign: int) -> None:
        super().__init__(3, 3, 1)
        with torch.no_grad():
            self.weight.copy_(torch.eye(3).view(3, 3, 1, 1))
            self.bias.copy_(sign * 255 * torch.tensor([0.4488, 0.4371, 0.4040]))
        self.requires_grad_(False)


class ResBlock(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.body = nn.Sequential(nn.Conv2d(c, c, 3, padding=1), nn.ReLU(), nn.Conv2d(c, c, 3, padding=1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.body(x) + x


class EDSR(nn.Module):
    """torchsr's EDSR (r16f64 at scale 2) with `feats` features."""

    def __init__(self, blocks: int = 16, feats: int = 64) -> None:
        super().__init__()
        self.sub_mean, self.add_mean = MeanShift(-1), MeanShift(1)
        self.head = nn.Conv2d(3, feats, 3, padding=1)
        self.body = nn.Sequential(*(ResBlock(feats) for _ in range(blocks)), nn.Conv2d(feats, feats, 3, padding=1))
        self.tail = nn.Sequential(
            nn.Conv2d(feats, 4 * feats, 3, padding=1), nn.PixelShuffle(2), nn.Conv2d(feats, 3, 3, padding=1)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.head(self.sub_mean(255 * x))
        x = self.body(x) + x
        return self.add_mean(self.tail(x)) / 255


class InvertedResidual(nn.Module):
    """MobileNetV2's block: a 1x1 expansion and ReLU6, a depthwise k x k
    convolution (stride, dilation) and ReLU6, a 1x1 projection, and the
    residual add when the shapes allow it. `multiplier` > 1 makes the
    depthwise convolution give that many channels per input channel (a
    depth multiplier, as some exported graphs have)."""

    def __init__(self, cin: int, hidden: int, cout: int, k: int = 3, stride: int = 1, dilation: int = 1,
                 multiplier: int = 1) -> None:
        super().__init__()
        pad = dilation * (k - 1) // 2
        self.expand = nn.Sequential(nn.Conv2d(cin, hidden, 1), nn.ReLU6())
        self.depthwise = nn.Sequential(
            nn.Conv2d(hidden, hidden * multiplier, k, stride, pad, dilation=dilation, groups=hidden), nn.ReLU6()
        )
        self.project = nn.Conv2d(hidden * multiplier, cout, 1)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.project(self.depthwise(self.expand(x)))
        return x + y if self.residual else y


class EmformerJoiner(nn.Module):
    """torchaudio's RNN-T joiner in emformer_rnnt_base: the source (B, T, dim)
    and target (B, U, dim) encodings broadcast-added to (B, T, U, dim), a
    ReLU, and a Linear to the 4097 symbols. (The example's join also passes
    the two length tensors through unchanged; they are left out.)"""

    def __init__(self, dim: int = 1024, symbols: int = 4097) -> None:
        super().__init__()
        self.linear = nn.Linear(dim, symbols)

    def forward(self, source: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
        return self.linear(torch.relu(source.unsqueeze(2) + target.unsqueeze(1)))


def initialise(module: nn.Module) -> nn.Module:
    """Kaiming-normal weights and small random biases (the mean shifts keep
    theirs), in eval mode."""
    for m in module.modules():
        if isinstance(m, (nn.Conv2d, nn.Linear)) and m.weight.requires_grad:
            nn.init.kaiming_normal_(m.weight, mode="fan_in", nonlinearity="relu")
            if m.bias is not None:
                nn.init.uniform_(m.bias, -0.1, 0.1)
    return module.eval().requires_grad_(False)
