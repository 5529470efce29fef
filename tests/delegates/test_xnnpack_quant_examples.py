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
- MobileNet's inverted residual blocks: int8 depthwise convolutions over
  channel counts that are and are not multiples of the kernels' 16- and
  8-channel steps, odd and even tap counts, strides, dilation and a depth
  multiplier, each followed by a ReLU6 clamp (which runs inside its
  producer where that is exact), at one thread and at three.
- The Emformer RNN-T joiner in dynamic int8: a broadcast add to (T, U)
  pairs, ReLU, and a qd8 FullyConnected over all T * U rows.
- EDSR: its last residual add sums the body's output with the head's, whose
  scale is under 2^-10 of the sum's; XNNPACK runs such an add with a small
  multiplier, and so must pyexec rather than refuse the program."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from delegates.test_xnnpack_quant import _near_eager, _run_both
from support.et_examples import EDSR, EmformerJoiner, InvertedResidual, initialise
from support.export import run_with_executorch
from support.quant import export_quantized
from support.xnnpack import node_types, union_names

import pyexec

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


# (cin, hidden, cout, k, stride, dilation, multiplier, input size)
BLOCKS = {
    "c16_k3": (16, 16, 16, 3, 1, 1, 1, 12),
    "c27_k3_tails": (8, 27, 8, 3, 1, 1, 1, 11),  # 16 + 8 + 3 channels
    "c40_k5_stride2": (12, 40, 16, 5, 2, 1, 1, 15),  # 25 taps; 16 + 16 + 8 channels
    "c24_k2_dilation2": (8, 24, 8, 2, 1, 2, 1, 10),  # an even tap count
    "c72_k3_stride2": (16, 72, 24, 3, 2, 1, 1, 14),  # mobilenet_v3's widths
    "c12_multiplier2": (8, 12, 8, 3, 1, 1, 2, 9),
}


@pytest.mark.parametrize("name", sorted(BLOCKS))
def test_inverted_residual_int8_equals_executorch_at_any_thread_count(name: str) -> None:
    cin, hidden, cout, k, stride, dilation, mult, size = BLOCKS[name]
    torch.manual_seed(5)
    m = initialise(InvertedResidual(cin, hidden, cout, k, stride, dilation, mult))
    x = torch.randn(2, cin, size, size)
    pte = export_quantized(m, (x,), PER_CHANNEL, lower=True)
    names = [union_names()[t] for t in node_types(pte)]
    assert "DepthwiseConv2d" in names and "Clamp" in names, names
    torch.manual_seed(6)
    x2 = torch.randn_like(x)
    (ref,) = run_with_executorch(pte, (x2,))
    before = pyexec.get_num_threads()
    try:
        for threads in (1, 3):
            pyexec.set_num_threads(threads)
            (ours,) = pyexec.load(pte).load_method("forward").execute([x2.clone()])
            _assert_equal(np.asarray(ours), ref.numpy())
    finally:
        pyexec.set_num_threads(before)
    _near_eager(np.asarray(ours), m, (x2,), 0.2)


def test_emformer_joiner_dynamic_int8_matches_executorch() -> None:
    torch.manual_seed(9)
    m = initialise(EmformerJoiner(dim=64, symbols=97))
    x = (torch.rand(1, 12, 64), torch.rand(1, 10, 64))
    pte = export_quantized(m, x, {"scheme": "pt2e", "per_channel": True, "dynamic": True}, lower=True)
    assert "FullyConnected" in {union_names()[t] for t in node_types(pte)}
    torch.manual_seed(10)
    x2 = (torch.rand_like(x[0]), torch.rand_like(x[1]))
    ours, ref = _run_both(pte, x2)
    assert ours.shape == (1, 12, 10, 97)
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-5 * float(np.abs(ref).max()))
    _near_eager(ours, m, x2, 0.1)


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
