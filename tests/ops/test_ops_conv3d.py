"""3-D convolution and pooling (native/src/kernels/conv.c, pool.c): 5-D inputs
through aten::convolution.out (plain, strided, padded, dilated, grouped,
depthwise, 1x1x1, transposed), max_pool3d_with_indices.out, avg_pool3d.out,
_adaptive_avg_pool3d.out (and mean.out, which the exporter uses for an output
size of 1), each exported with ExecuTorch and compared with torch eager, and a
small video network in the shape of torchvision's r3d_18 (stem, basic blocks
with a strided downsampling block, global pooling, classifier).

ExecuTorch 1.5.1's portable kernels have no 3-D convolution or 3-D pooling,
so there is no ExecuTorch result to compare with: torch eager is the
reference. Weights are inputs where one module serves several dtypes."""

from __future__ import annotations

from typing import Any

import pytest
import torch
import torch.nn.functional as F
from support.export import assert_close, export_program
from torch import nn

import pyexec

NAN, INF = float("nan"), float("inf")


def rand(shape: tuple[int, ...], dtype: torch.dtype, seed: int, scale: float = 1.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return (torch.randn(shape, generator=g, dtype=torch.float64) * scale).to(dtype)


def ops_in(pte: bytes) -> set[str]:
    from executorch.exir._serialize._program import deserialize_pte_binary

    prog = deserialize_pte_binary(pte)
    prog = getattr(prog, "program", prog)
    return {f"{op.name}.{op.overload}" for op in prog.execution_plan[0].operators}


def check(module: nn.Module, inputs: tuple[Any, ...], *, rtol: float, atol: float) -> bytes:
    """Exports `module`, runs it with pyexec and compares every output with
    torch eager; returns the program."""
    pte = export_program(module, tuple(x.clone() for x in inputs))
    got = pyexec.load(pte).load_method("forward").execute([x.clone() for x in inputs])
    with torch.no_grad():
        out = module(*[x.clone() for x in inputs])
    expected = list(out) if isinstance(out, (tuple, list)) else [out]
    assert len(got) == len(expected)
    for k, (g, e) in enumerate(zip(got, expected)):
        assert_close(g, e, rtol=rtol, atol=atol, what=f"output {k} of {len(expected)}")
    return pte


# ---- convolution ----------------------------------------------------------------


class Convs3d(nn.Module):
    """Every 3-D convolution the kernel has a path for."""

    def forward(self, x, w, b, wg, wd, w1, wa, wt, bt, wtg):
        return (
            F.conv3d(x, w, b[:5], padding=1),  # 3x3x3, im2col + GEMM
            F.conv3d(x, w, None, stride=2, dilation=(1, 2, 1)),
            F.conv3d(x, wg, b, stride=(1, 2, 2), padding=(0, 1, 2), groups=2),
            F.conv3d(x, wd, None, padding=(1, 0, 1), groups=4),  # depthwise, 2 per channel
            F.conv3d(x, w1, b[:5]),  # 1x1x1: the input is the GEMM operand
            F.conv3d(x, w1, None, stride=(2, 1, 2)),
            F.conv3d(x, wa, b[:5], padding=(1, 0, 0)),  # (2+1)-D factorised: temporal 3x1x1
            F.conv_transpose3d(x, wt, bt, stride=2, padding=1, output_padding=(1, 0, 1)),
            F.conv_transpose3d(x, wtg, None, stride=(1, 2, 1), dilation=(2, 1, 1), groups=2),
        )


def conv_inputs(dtype: torch.dtype, n: int = 2) -> tuple[torch.Tensor, ...]:
    return (
        rand((n, 4, 5, 7, 6), dtype, 1),
        rand((5, 4, 3, 3, 3), dtype, 2, 0.3),
        rand((6,), dtype, 3),
        rand((6, 2, 2, 3, 3), dtype, 4, 0.3),
        rand((8, 1, 3, 2, 3), dtype, 5),
        rand((5, 4, 1, 1, 1), dtype, 6),
        rand((5, 4, 3, 1, 1), dtype, 7),
        rand((4, 3, 3, 3, 2), dtype, 8, 0.3),
        rand((3,), dtype, 9),
        rand((4, 2, 2, 3, 3), dtype, 10, 0.3),
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_conv3d(dtype: torch.dtype) -> None:
    inputs = conv_inputs(dtype)
    pte = check(Convs3d(), inputs, rtol=1e-4, atol=1e-5)
    assert "aten::convolution.out" in ops_in(pte)


def test_conv3d_float32_wide_and_special() -> None:
    """Enough channels and positions for several GEMM panels and blocks, and
    a NaN / inf in the input that must reach exactly the outputs whose
    window covers it."""
    f = torch.float32
    x = rand((1, 16, 6, 12, 10), f, 11)
    x[0, 3, 2, 5, 4] = NAN
    x[0, 7, 4, 1, 1] = INF
    w = rand((40, 16, 3, 3, 3), f, 12, 0.1)
    b = rand((40,), f, 13)

    class Wide(nn.Module):
        def forward(self, x, w, b):
            return F.conv3d(x, w, b, padding=1), F.conv3d(x, w, None, stride=(1, 2, 2))

    check(Wide(), (x, w, b), rtol=1e-4, atol=1e-4)


def test_conv3d_empty_batch() -> None:
    check(Convs3d(), conv_inputs(torch.float32, n=0), rtol=1e-4, atol=1e-5)


# ---- pooling --------------------------------------------------------------------


class Pools3d(nn.Module):
    def forward(self, x):
        a, ai = F.max_pool3d(x, 2, return_indices=True)
        b, bi = F.max_pool3d(
            x, (3, 2, 3), (2, 1, 2), (1, 0, 1), dilation=(1, 2, 1), ceil_mode=True, return_indices=True
        )
        return (
            a,
            ai,
            b,
            bi,
            F.avg_pool3d(x, 2),
            F.avg_pool3d(x, 3, 2, 1, ceil_mode=True),
            F.avg_pool3d(x, (3, 3, 2), (1, 2, 2), (1, 1, 0), count_include_pad=False),
            F.avg_pool3d(x, 2, 1, 1, divisor_override=3),
            F.adaptive_avg_pool3d(x, (2, 3, 4)),  # windows of unequal size
            F.adaptive_avg_pool3d(x, (5, 1, 7)),
            F.adaptive_avg_pool3d(x, 1),  # exported as mean over the last three dims
        )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_pool3d(dtype: torch.dtype) -> None:
    x = rand((2, 3, 5, 7, 9), dtype, 20)
    x[0, 0, 1, 1, :4] = torch.tensor([NAN, 1.0, INF, -INF], dtype=dtype)
    x[1, 2, 2:4, 2:5, 3:6] = -INF
    pte = check(Pools3d(), (x,), rtol=1e-6 if dtype == torch.float64 else 1e-5, atol=1e-6)
    assert {
        "aten::max_pool3d_with_indices.out",
        "aten::avg_pool3d.out",
        "aten::_adaptive_avg_pool3d.out",
    } <= ops_in(pte)


def test_pool3d_unbatched() -> None:
    """A 4-D input is one unbatched image (C, D, H, W)."""

    class Unbatched(nn.Module):
        def forward(self, x):
            a, ai = F.max_pool3d(x, 2, 1, 1, return_indices=True)
            return a, ai, F.avg_pool3d(x, 2, 2), F.adaptive_avg_pool3d(x, (2, 2, 3))

    check(Unbatched(), (rand((3, 4, 5, 6), torch.float32, 21),), rtol=1e-5, atol=1e-6)


def test_pool3d_bad_padding_is_an_error() -> None:
    """Padding beyond half the kernel: torch refuses it at trace time, so the
    program is built by hand from a valid one with the argument changed."""
    import executorch.exir._serialize._program as ser

    class One(nn.Module):
        def forward(self, x):
            return F.avg_pool3d(x, 3, 1, 1)

    pte = export_program(One(), (rand((1, 1, 4, 4, 4), torch.float32, 22),))
    pte_file = ser.deserialize_pte_binary(pte)
    plan = pte_file.program.execution_plan[0]
    (chain,) = plan.chains
    (ins,) = [i for i in chain.instructions if hasattr(i.instr_args, "op_index")]
    for item in plan.values[ins.instr_args.args[3]].val.items:  # the padding list's Int values
        plan.values[item].val.int_val = 2
    bad = bytes(ser.serialize_pte_binary(pte_file))
    method = pyexec.load(bad).load_method("forward")
    with pytest.raises(pyexec.ExecutionError, match="padding 2 must be non-negative and at most half"):
        method.execute([rand((1, 1, 4, 4, 4), torch.float32, 22)])


# ---- a video network -----------------------------------------------------------


class Block3d(nn.Module):
    """torchvision's video BasicBlock: two 3x3x3 convolutions with batch norm,
    a 1x1x1 strided projection on the skip path when the shape changes."""

    def __init__(self, cin: int, cout: int, stride: int = 1) -> None:
        super().__init__()
        self.conv1 = nn.Sequential(
            nn.Conv3d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm3d(cout), nn.ReLU(inplace=True)
        )
        self.conv2 = nn.Sequential(nn.Conv3d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm3d(cout))
        self.down = (
            nn.Sequential(nn.Conv3d(cin, cout, 1, stride, bias=False), nn.BatchNorm3d(cout))
            if stride != 1 or cin != cout
            else None
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        skip = x if self.down is None else self.down(x)
        return F.relu(self.conv2(self.conv1(x)) + skip)


class R3dSmall(nn.Module):
    """r3d_18's layout at a tenth of its width: the (3, 7, 7) stem with
    stride (1, 2, 2), a basic block per stage, a strided stage, max and
    global average pooling, the classifier."""

    def __init__(self, width: int = 8, classes: int = 10) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv3d(3, width, (3, 7, 7), (1, 2, 2), (1, 3, 3), bias=False),
            nn.BatchNorm3d(width),
            nn.ReLU(inplace=True),
        )
        self.pool = nn.MaxPool3d((1, 3, 3), (1, 2, 2), (0, 1, 1))
        self.layer1 = Block3d(width, width)
        self.layer2 = Block3d(width, 2 * width, stride=2)
        self.avg = nn.AdaptiveAvgPool3d(1)
        self.fc = nn.Linear(2 * width, classes)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer2(self.layer1(self.pool(self.stem(x))))
        return self.fc(self.avg(x).flatten(1))


def test_r3d_like_network() -> None:
    torch.manual_seed(0)
    net = R3dSmall().eval()
    with torch.no_grad():  # healthy statistics so the outputs are not vacuous
        for m in net.modules():
            if isinstance(m, nn.BatchNorm3d):
                m.running_mean.uniform_(-0.2, 0.2)
                m.running_var.uniform_(0.5, 1.5)
                m.weight.uniform_(0.5, 1.5)
    x = rand((1, 3, 4, 32, 32), torch.float32, 30)
    pte = check(net, (x,), rtol=1e-4, atol=1e-4)
    ops = ops_in(pte)
    assert "aten::convolution.out" in ops and "aten::max_pool3d_with_indices.out" in ops
    with torch.no_grad():
        ref = net(x)
    assert ref.std() > 1e-3  # the comparison above compared something
