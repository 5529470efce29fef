"""ExecuTorch's example models in static int8, as its XNNPACK example
compiler makes them (XNNPACKQuantizer per channel, calibrated on the example
input, XnnpackPartitioner), in their layouts rebuilt by hand at reduced sizes
(support/et_examples.py). Every node of these graphs is integer arithmetic
that pyexec takes from XNNPACK bit for bit, so the outputs must equal
ExecuTorch's exactly: one output quantization step anywhere means a node
rounds differently.

- Global average pooling (MobileNetV3's squeeze-excitation pools, whose
  result gates every channel after them): the qs8 mean's zero point term is
  folded in float, as XNNPACK folds it, and so decides exact ties as there;
  many channels are pooled, since the ties are rare.
- EDSR: its last residual add sums the body's output with the head's, whose
  scale is under 2^-10 of the sum's; XNNPACK runs such an add with a small
  multiplier, and so must pyexec rather than refuse the program."""

from __future__ import annotations

import numpy as np
import torch
from delegates.test_xnnpack_quant import _near_eager, _run_both
from support.et_examples import EDSR, initialise
from support.quant import export_quantized
from support.xnnpack import node_types, union_names

PER_CHANNEL = {"scheme": "pt2e", "per_channel": True}


def _assert_equal(ours: np.ndarray, ref: np.ndarray) -> None:
    differ = ours != ref
    assert not differ.any(), (
        f"{int(differ.sum())} of {differ.size} outputs differ from ExecuTorch's, "
        f"by up to {float(np.abs(ours - ref).max())}"
    )


class ConvMean(torch.nn.Module):
    def __init__(self, channels: int) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(8, channels, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.adaptive_avg_pool2d(self.conv(x) + 1.0, 1)


def test_quantized_global_average_pool_rounds_as_xnnpack() -> None:
    """14 x 14 windows (1 / 196 is inexact, unlike a power of two's) whose
    input and output share their quantization, so that the means land on
    exact ties, which the order of XNNPACK's float arithmetic decides."""
    torch.manual_seed(2)
    x = torch.randn(4, 8, 14, 14)
    m = ConvMean(1024).eval()
    x2 = torch.randn_like(x)
    pte = export_quantized(m, (x,), PER_CHANNEL, lower=True)
    assert "GlobalAvgPooling2d" in {union_names()[t] for t in node_types(pte)}
    ours, ref = _run_both(pte, (x2,))
    _assert_equal(ours, ref)


def test_edsr_int8_with_a_tiny_add_ratio_runs_and_equals_executorch() -> None:
    torch.manual_seed(3)
    x = torch.rand(1, 3, 16, 16)
    m = initialise(EDSR(blocks=16, feats=16))  # the body's random residuals grow far past the head's output
    pte = export_quantized(m, (x,), PER_CHANNEL, lower=True)
    torch.manual_seed(4)
    x2 = torch.rand_like(x)
    ours, ref = _run_both(pte, (x2,))
    _assert_equal(ours, ref)
    _near_eager(ours, m, (x2,), 0.5)
