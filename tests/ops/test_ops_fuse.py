"""Load-time fusion (native/src/runtime/fuse.c): a float32 convolution
followed by an inference batch norm and a ReLU / hardtanh runs as one
instruction, the batch norm folded into a copy of the weights and the
activation applied as a clamp in the convolution's epilogue.

Real programs exported here are run with pyexec and compared with torch
eager and with ExecuTorch's runtime on the same file; the profile's
operator names show which instructions were fused, and the programs that
must not be fused (an intermediate that is also an output or read twice, a
training-mode batch norm, a weight passed as an input) keep their
instructions and still give the right results."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from support.export import assert_close, export_program, run_with_executorch
from torch import nn

import pyexec

BN_OP = "aten::_native_batch_norm_legit_no_training.out"
CONV = "aten::convolution.out"
TOL = {"rtol": 1e-4, "atol": 1e-4}


def randomize_bn(bn: nn.BatchNorm2d, seed: int) -> nn.BatchNorm2d:
    """Running statistics and affine parameters far from the defaults, so
    that folding them into the weights changes every output channel."""
    g = torch.Generator().manual_seed(seed)
    c = bn.num_features
    with torch.no_grad():
        assert bn.running_mean is not None and bn.running_var is not None
        bn.running_mean.copy_(torch.randn(c, generator=g) * 0.5)
        bn.running_var.copy_(torch.rand(c, generator=g) * 2 + 0.1)
        if bn.affine:
            bn.weight.copy_(torch.randn(c, generator=g))
            bn.bias.copy_(torch.randn(c, generator=g))
    return bn


def block(conv: nn.Conv2d, bn: nn.BatchNorm2d | None, act: nn.Module | None, seed: int) -> nn.Sequential:
    layers: list[nn.Module] = [conv]
    if bn is not None:
        layers.append(randomize_bn(bn, seed))
    if act is not None:
        layers.append(act)
    return nn.Sequential(*layers)


class Fusable(nn.Module):
    """Every fusable pattern once: a sequential trunk (each block's input
    dead after its convolution, so the planner may give a block's output the
    bytes of its input) and side branches off the input, each returned."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.trunk = nn.Sequential(
            # 3x3, no conv bias, BN + ReLU: the implicit-GEMM path
            block(nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU(), 1),
            # depthwise, stride 1, BN + ReLU6 (hardtanh 0..6): the direct loops, vector rows
            block(nn.Conv2d(16, 16, 3, padding=1, groups=16), nn.BatchNorm2d(16), nn.ReLU6(), 2),
            # depthwise, stride 2, BN without affine, hardtanh with other bounds
            block(
                nn.Conv2d(16, 16, 3, stride=2, padding=1, groups=16),
                nn.BatchNorm2d(16, affine=False),
                nn.Hardtanh(-0.5, 0.75),
                3,
            ),
            # grouped (8 output channels per group), BN eps 1e-3 + ReLU
            block(nn.Conv2d(16, 32, 3, padding=1, groups=4), nn.BatchNorm2d(32, eps=1e-3), nn.ReLU(), 4),
            # 1x1 (the input itself is the GEMM's operand), BN without an activation
            block(nn.Conv2d(32, 24, 1), nn.BatchNorm2d(24, eps=0.1), None, 5),
            # 1x1 with fewer output channels than a GEMM row tile, BN + ReLU
            block(nn.Conv2d(24, 4, 1, bias=False), nn.BatchNorm2d(4), nn.ReLU(), 6),
        )
        # few output channels, many input channels: explicit im2col, BN + hardtanh
        self.narrow = block(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.Hardtanh(-1.0, 1.0), 7)
        # strided, dilated, conv bias + ReLU without a batch norm
        self.plain_relu = block(nn.Conv2d(3, 8, 3, stride=2, dilation=2, padding=2), None, nn.ReLU(), 8)
        # no bias, ReLU6 without a batch norm
        self.plain_relu6 = block(nn.Conv2d(3, 8, 5, bias=False), None, nn.ReLU6(), 9)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return self.trunk(x), self.narrow(x), self.plain_relu(x), self.plain_relu6(x)


FUSABLE_NAMES = Counter(
    {
        f"{CONV} (+batch_norm+relu)": 3,
        f"{CONV} (+batch_norm+hardtanh)": 3,
        f"{CONV} (+batch_norm)": 1,
        f"{CONV} (+relu)": 1,
        f"{CONV} (+hardtanh)": 1,
    }
)


class NotFusable(nn.Module):
    """Patterns fusion must leave alone (or fuse only in part)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.c1, self.b1 = nn.Conv2d(3, 8, 3), randomize_bn(nn.BatchNorm2d(8), 11)
        self.c2, self.b2 = nn.Conv2d(3, 8, 3), randomize_bn(nn.BatchNorm2d(8), 12)
        self.c3 = nn.Conv2d(3, 8, 3)
        self.w3, self.s3 = nn.Parameter(torch.randn(8)), nn.Parameter(torch.randn(8))
        self.b4 = randomize_bn(nn.BatchNorm2d(8), 14)

    def forward(self, x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, ...]:
        # the convolution's output is also an output: nothing fuses
        y1 = self.c1(x)
        r1 = F.relu(self.b1(y1))
        # the batch norm's output is read twice: conv + batch norm fuse, the ReLU stays
        z2 = self.b2(self.c2(x))
        r2 = F.relu(z2) + z2
        # a training-mode batch norm (batch statistics): nothing fuses
        r3 = F.relu(F.batch_norm(self.c3(x), None, None, self.w3, self.s3, training=True, eps=1e-4))
        # the weight is an input, not a constant: nothing fuses
        r4 = F.relu(self.b4(F.conv2d(x, w)))
        return r1, y1, r2, r3, r4


NOT_FUSABLE_NAMES = Counter(
    {
        CONV: 3,
        f"{CONV} (+batch_norm)": 1,
        BN_OP: 2,
        "aten::_native_batch_norm_legit.no_stats_out": 1,
        "aten::relu.out": 4,
        "aten::add.out": 1,
    }
)


def profiled_run(pte: bytes, inputs: list[torch.Tensor]) -> tuple[list[Any], list[str]]:
    """pyexec's outputs and the names of the instructions the run executed."""
    method = pyexec.load(pte).load_method("forward")
    with method.profile() as p:
        out = method.execute(inputs)
    return list(out), [e.name for e in p.events]


def check_outputs(module: nn.Module, pte: bytes, inputs: list[torch.Tensor], got: list[Any]) -> None:
    with torch.no_grad():
        expected = module(*[x.clone() for x in inputs])
    if isinstance(expected, torch.Tensor):
        expected = (expected,)
    theirs = run_with_executorch(pte, inputs)
    assert len(got) == len(expected) == len(theirs)
    for k, (g, e, t) in enumerate(zip(got, expected, theirs)):
        assert_close(g, e, what=f"output {k} vs torch eager", **TOL)
        assert_close(g, t, what=f"output {k} vs ExecuTorch", **TOL)


@pytest.fixture(scope="module")
def fusable() -> tuple[nn.Module, bytes]:
    module = Fusable().eval()
    return module, export_program(module, (torch.randn(2, 3, 20, 18),))


@pytest.fixture(scope="module")
def not_fusable() -> tuple[nn.Module, bytes]:
    module = NotFusable().eval()
    return module, export_program(module, (torch.randn(2, 3, 12, 12), torch.randn(8, 3, 3, 3)))


# ---- fused ------------------------------------------------------------------------


def test_every_pattern_runs_fused_and_matches_eager_and_executorch(fusable: tuple[nn.Module, bytes]) -> None:
    module, pte = fusable
    inputs = [torch.randn(2, 3, 20, 18)]
    got, names = profiled_run(pte, inputs)
    check_outputs(module, pte, inputs, got)
    assert Counter(n for n in names if n.startswith(CONV)) == FUSABLE_NAMES
    # the batch norms and activations ran inside the convolutions
    assert not {BN_OP, "aten::relu.out", "aten::hardtanh.out"} & set(names)


def test_fused_outputs_keep_nan_and_clamp_infinities(fusable: tuple[nn.Module, bytes]) -> None:
    module, pte = fusable
    x = torch.randn(2, 3, 20, 18)
    x[0, 0, 5, 5] = float("nan")
    x[1, 1, 2, 3] = float("inf")
    x[1, 2, 9, 9] = -float("inf")
    got, _ = profiled_run(pte, [x])
    with torch.no_grad():
        expected = module(x.clone())
    for k, (g, e) in enumerate(zip(got, expected)):
        assert torch.equal(torch.isnan(g), torch.isnan(e)), f"output {k}: NaN positions differ"
        assert_close(g, e, what=f"output {k} vs torch eager", **TOL)


def test_a_dynamic_batch_runs_fused_at_every_size() -> None:
    torch.manual_seed(3)
    module = block(nn.Conv2d(4, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU6(), 21).eval()
    batch = torch.export.Dim("batch", min=1, max=4)
    pte = export_program(module, (torch.randn(2, 4, 10, 10),), dynamic_shapes=({0: batch},))
    for n in (1, 3, 4):
        inputs = [torch.randn(n, 4, 10, 10)]
        got, names = profiled_run(pte, inputs)
        check_outputs(module, pte, inputs, got)
        assert names == [f"{CONV} (+batch_norm+hardtanh)"]


def test_turning_fusion_off_runs_the_program_as_exported(
    fusable: tuple[nn.Module, bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    module, pte = fusable
    inputs = [torch.randn(2, 3, 20, 18)]
    fused, _ = profiled_run(pte, inputs)
    monkeypatch.setenv("PYEXEC_FUSE", "0")
    plain, names = profiled_run(pte, inputs)
    counts = Counter(names)
    assert counts[CONV] == sum(FUSABLE_NAMES.values())
    assert counts[BN_OP] == 7 and counts["aten::relu.out"] == 4 and counts["aten::hardtanh.out"] == 4
    for k, (a, b) in enumerate(zip(fused, plain)):
        assert_close(a, b, what=f"output {k} fused vs unfused", **TOL)


def test_the_etdump_of_a_fused_program_names_the_fused_instructions(
    fusable: tuple[nn.Module, bytes], tmp_path: Path
) -> None:
    from executorch.devtools import Inspector

    _, pte = fusable
    method = pyexec.load(pte).load_method("forward")
    with method.profile() as p:
        method.execute([torch.randn(2, 3, 20, 18)])
    path = tmp_path / "fused.etdp"
    p.write_etdump(path)
    frame = Inspector(etdump_path=str(path)).to_dataframe()
    names = Counter(str(n) for n in frame.event_name)
    expected = {f"native_call_{name.split('::', 1)[1]}": count for name, count in FUSABLE_NAMES.items()}
    assert {n: names[n] for n in expected} == expected


# ---- not fused ----------------------------------------------------------------------


def test_patterns_fusion_must_not_touch_keep_their_instructions_and_results(
    not_fusable: tuple[nn.Module, bytes],
) -> None:
    module, pte = not_fusable
    inputs = [torch.randn(2, 3, 12, 12), torch.randn(8, 3, 3, 3)]
    got, names = profiled_run(pte, inputs)
    check_outputs(module, pte, inputs, got)
    assert Counter(names) == NOT_FUSABLE_NAMES
