"""The portable (NCHW) float32 convolution's faster paths, each on a real
exported program compared with torch eager and with ExecuTorch's runtime on
the same file, at one and two threads:

- convolutions with a constant filter (not depthwise, not 1x1 stride 1)
  through the NHWC indirect GEMM, the filter packed once at load
  (runtime/fuse.c, kernels/conv_nhwc.c), with and without a folded batch
  norm and clamp; a strided 1x1 one gathers only the pixels it reads;
- depthwise 3x3 / 5x5 (multiplier 1) on planes up to 64x64 through the NHWC
  depthwise engine the XNNPACK backend runs (kernels/dwconv.c), the input
  and output transposed around it;
- depthwise at stride 2 on wide planes: sixteen outputs at a time from
  every other input column (AVX-512), the columns at the edges one by one;
- depthwise on other shapes (multiplier 2, 7x7, column dilation) through
  the per-plane loops.

On machines without AVX-512 every case runs the NCHW paths (im2col GEMM,
per-plane loops), and the comparisons hold the same."""

from __future__ import annotations

import pytest
import torch
from support.export import assert_close, export_program, run_with_executorch
from torch import nn

import pyexec

TOL = {"rtol": 1e-4, "atol": 1e-4}


def conv_block(conv: nn.Conv2d, act: nn.Module | None, seed: int) -> nn.Module:
    """conv -> batch norm (running statistics far from the defaults) ->
    activation, the pattern the exporter emits for torchvision blocks."""
    g = torch.Generator().manual_seed(seed)
    c = conv.out_channels
    bn = nn.BatchNorm2d(c)
    with torch.no_grad():
        for p in conv.parameters():
            p.copy_(torch.randn(p.shape, generator=g) * (2.0 / (p[0].numel() if p.dim() > 1 else 1)) ** 0.5)
        bn.running_mean.copy_(torch.randn(c, generator=g) * 0.3)
        bn.running_var.copy_(torch.rand(c, generator=g) + 0.5)
        bn.weight.copy_(torch.randn(c, generator=g))
        bn.bias.copy_(torch.randn(c, generator=g) * 0.1)
    layers: list[nn.Module] = [conv, bn] + ([act] if act is not None else [])
    return nn.Sequential(*layers).eval()


def check(module: nn.Module, x: torch.Tensor, threads: int) -> None:
    pte = export_program(module, (x,))
    before = pyexec.get_num_threads()
    pyexec.set_num_threads(threads)
    try:
        got = pyexec.load(pte).load_method("forward").execute([x.clone()])[0]
    finally:
        pyexec.set_num_threads(before)
    with torch.no_grad():
        want = module(x.clone())
    assert_close(got, want, **TOL, what="vs eager")
    assert_close(got, run_with_executorch(pte, [x])[0], **TOL, what="vs ExecuTorch")


def rand(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(
    "conv, act, shape",
    [
        # small planes through NHWC: 3x3, batch 2, ReLU6 clamp
        (dict(in_channels=40, out_channels=40, kernel_size=3, padding=1, groups=40), nn.ReLU6(), (2, 40, 14, 13)),
        # 5x5 stride 2 without bias, 7x7 output plane
        (
            dict(in_channels=24, out_channels=24, kernel_size=5, stride=2, padding=2, groups=24, bias=False),
            nn.Hardtanh(-0.5, 0.5),
            (1, 24, 13, 14),
        ),
        # 3x3 with row dilation (column dilation stays 1)
        (
            dict(in_channels=17, out_channels=17, kernel_size=3, padding=2, dilation=(2, 1), groups=17),
            None,
            (1, 17, 9, 11),
        ),
        # wide planes at stride 2: the AVX-512 every-other-column kernel and its edges
        (dict(in_channels=6, out_channels=6, kernel_size=3, stride=2, padding=1, groups=6), nn.ReLU(), (1, 6, 101, 98)),
        (
            dict(in_channels=5, out_channels=5, kernel_size=5, stride=2, padding=2, groups=5, bias=False),
            nn.ReLU6(),
            (2, 5, 97, 130),
        ),
        (dict(in_channels=4, out_channels=4, kernel_size=3, stride=2, groups=4), None, (1, 4, 70, 131)),
        # the per-plane loops: a multiplier of 2, a 7x7 filter, column dilation
        (dict(in_channels=8, out_channels=16, kernel_size=3, padding=1, groups=8), nn.ReLU(), (1, 8, 12, 12)),
        (dict(in_channels=8, out_channels=8, kernel_size=7, padding=3, groups=8), None, (1, 8, 15, 16)),
        (dict(in_channels=8, out_channels=8, kernel_size=3, padding=2, dilation=2, groups=8), None, (1, 8, 12, 17)),
    ],
    ids=[
        "3x3-nhwc-batch2",
        "5x5-stride2-nhwc",
        "3x3-row-dilated-nhwc",
        "3x3-stride2-wide",
        "5x5-stride2-wide-batch2",
        "3x3-stride2-wide-unpadded",
        "multiplier2",
        "7x7",
        "column-dilated",
    ],
)
def test_depthwise(conv: dict, act: nn.Module | None, shape: tuple[int, ...], threads: int) -> None:
    check(conv_block(nn.Conv2d(**conv), act, seed=3), rand(*shape), threads)


def test_depthwise_nan_and_inf_propagate_as_in_eager() -> None:
    """A NaN or an infinity in the input reaches the outputs whose taps
    cover it, through the fused clamp too (a NaN stays NaN)."""
    x = rand(1, 16, 20, 100, seed=5)
    x[0, 3, 4, 10] = float("nan")
    x[0, 7, 10, 51] = float("inf")
    x[0, 9, 0, 0] = float("-inf")
    for conv in (dict(kernel_size=3, padding=1), dict(kernel_size=3, stride=2, padding=1)):
        module = conv_block(nn.Conv2d(16, 16, groups=16, **conv), nn.ReLU6(), seed=6)
        pte = export_program(module, (x,))
        got = pyexec.load(pte).load_method("forward").execute([x.clone()])[0]
        with torch.no_grad():
            want = module(x.clone())
        assert torch.equal(torch.isnan(got), torch.isnan(want))
        ok = ~torch.isnan(want)
        assert_close(got[ok], want[ok], **TOL, what="vs eager")


class LoneConv(nn.Module):
    """A convolution followed by nothing fusable (its output also feeds an
    addition): packed at load on its own."""

    def __init__(self, conv: dict) -> None:
        super().__init__()
        self.conv = nn.Conv2d(**conv)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return y + y.mean()


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(
    "conv, act, shape",
    [
        (dict(in_channels=32, out_channels=48, kernel_size=3, padding=1), nn.ReLU(), (2, 32, 15, 13)),
        (dict(in_channels=64, out_channels=40, kernel_size=3, stride=2, padding=1, bias=False), None, (1, 64, 17, 16)),
        (
            dict(in_channels=32, out_channels=64, kernel_size=(3, 5), padding=(2, 1), dilation=(2, 1), groups=4),
            nn.Hardtanh(-1.0, 2.0),
            (1, 32, 12, 19),
        ),
        # the stem: three channels, each kernel row one run of 21 floats
        (
            dict(in_channels=3, out_channels=24, kernel_size=7, stride=2, padding=3, bias=False),
            nn.ReLU(),
            (1, 3, 45, 38),
        ),
        # atrous (DeepLab's ASPP): most taps in the padding for whole tiles, skipped
        (
            dict(in_channels=48, out_channels=32, kernel_size=3, padding=12, dilation=12, bias=False),
            nn.ReLU(),
            (1, 48, 14, 14),
        ),
        (dict(in_channels=40, out_channels=24, kernel_size=3, padding=24, dilation=24), None, (1, 40, 10, 9)),
        # a 1x1 stride-2 projection (packed; 1x1 stride 1 is not): only the
        # pixels it reads are gathered, plane by plane
        (dict(in_channels=16, out_channels=32, kernel_size=1, stride=2), None, (2, 16, 9, 11)),
        (dict(in_channels=64, out_channels=128, kernel_size=1, stride=2, bias=False), None, (2, 64, 28, 27)),
        (dict(in_channels=24, out_channels=40, kernel_size=1, stride=(3, 2), groups=2), nn.ReLU(), (1, 24, 17, 10)),
    ],
    ids=[
        "3x3-batch2",
        "3x3-stride2-no-bias",
        "groups-of-8-dilated",
        "7x7-stem",
        "atrous-12",
        "atrous-24-centre-only",
        "1x1-stride2",
        "1x1-stride2-resnet-shortcut",
        "1x1-stride3x2-groups",
    ],
)
def test_packed_filter(conv: dict, act: nn.Module | None, shape: tuple[int, ...], threads: int) -> None:
    check(conv_block(nn.Conv2d(**conv), act, seed=4), rand(*shape, seed=1), threads)


@pytest.mark.parametrize("threads", [1, 2])
def test_packed_filter_without_batch_norm(threads: int) -> None:
    module = LoneConv(dict(in_channels=24, out_channels=33, kernel_size=3, padding=1)).eval()
    check(module, rand(1, 24, 11, 14, seed=2), threads)


def test_packed_filter_runs_each_input_size_of_a_dynamic_program() -> None:
    """The filter is packed once; each run's spatial size is its own."""
    module = conv_block(nn.Conv2d(16, 24, 3, padding=1), nn.ReLU6(), seed=7)
    x = rand(1, 16, 20, 20, seed=3)
    h = torch.export.Dim("h", min=4, max=40)
    pte = export_program(module, (x,), dynamic_shapes=({2: h},))
    method = pyexec.load(pte).load_method("forward")
    for size in (20, 7, 33, 4):
        xs = rand(1, 16, size, 20, seed=size)
        got = method.execute([xs.clone()])[0]
        with torch.no_grad():
            want = module(xs)
        assert_close(got, want, **TOL, what=f"height {size} vs eager")
