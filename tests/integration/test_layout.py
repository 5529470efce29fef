"""Inputs and outputs whose dim_order is not row-major (channels-last, the
[1, 0] output of nonzero): the caller sees logical shapes, the program gets
memory in its dim_order."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from support.export import assert_close, export_program

import pyexec


class ConvNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x)) * 2


@pytest.fixture(scope="module")
def channels_last() -> tuple[torch.nn.Module, bytes]:
    torch.manual_seed(0)
    model = ConvNet().eval()
    x = torch.randn(2, 3, 5, 6).to(memory_format=torch.channels_last)
    return model, export_program(model, (x,))


def test_program_declares_channels_last_slots(channels_last: tuple[torch.nn.Module, bytes]) -> None:
    _, pte = channels_last
    meta = pyexec.load(pte).method_meta("forward")
    assert meta.inputs[0] is not None and meta.inputs[0].dim_order == (0, 2, 3, 1)
    assert meta.outputs[0] is not None and meta.outputs[0].dim_order == (0, 2, 3, 1)


@pytest.mark.parametrize("layout", ["channels_last", "contiguous", "numpy"])
def test_channels_last_input_in_any_layout(channels_last: tuple[torch.nn.Module, bytes], layout: str) -> None:
    model, pte = channels_last
    x = torch.randn(2, 3, 5, 6)
    arg: object = x
    if layout == "channels_last":
        arg = x.to(memory_format=torch.channels_last)
    elif layout == "numpy":
        arg = x.numpy()
    (got,) = pyexec.load(pte).load_method("forward").execute([arg])
    assert tuple(got.shape) == (2, 4, 5, 6)
    with torch.no_grad():
        assert_close(got, model(x))


def test_uncloned_channels_last_output_is_a_strided_view(channels_last: tuple[torch.nn.Module, bytes]) -> None:
    model, pte = channels_last
    x = torch.randn(2, 3, 5, 6)
    (got,) = pyexec.load(pte).load_method("forward").execute([x], clone_outputs=False)
    assert got.is_contiguous(memory_format=torch.channels_last)
    with torch.no_grad():
        assert_close(got, model(x))


class NonZero(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nonzero(x)


def test_nonzero_output_with_transposed_dim_order() -> None:
    x = torch.tensor([[0.0, 1.0, 0.0], [2.0, 0.0, 3.0]])
    pte = export_program(NonZero(), (x,))
    (got,) = pyexec.load(pte).load_method("forward").execute([x])
    np.testing.assert_array_equal(np.asarray(got), torch.nonzero(x).numpy())



class ConvRelu(torch.nn.Module):
    """ConvNet without the multiplication (ExecuTorch's portable mul refuses a
    channels-last tensor times a scalar: 'input tensors have different dim
    orders')."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x))


def test_cloned_output_keeps_its_dim_order_as_executorch_returns_it() -> None:
    """A copy of a channels-last output is channels-last, as ExecuTorch's
    runtime returns it; so is a copy of nonzero's [1, 0] output."""
    from support.export import run_with_executorch

    torch.manual_seed(0)
    model = ConvRelu().eval()
    x = torch.randn(2, 3, 5, 6).to(memory_format=torch.channels_last)  # ExecuTorch takes the slot's layout only
    pte = export_program(model, (x,))
    (got,) = pyexec.load(pte).load_method("forward").execute([x])
    (ref,) = run_with_executorch(pte, [x])
    assert got.is_contiguous(memory_format=torch.channels_last) and got.stride() == ref.stride()
    assert_close(got, ref)
    with torch.no_grad():
        assert_close(got, model(x))
    (arr,) = pyexec.load(pte).load_method("forward", output_type="numpy").execute([x.contiguous().numpy()])
    assert arr.strides == tuple(4 * s for s in ref.stride())
    nz = torch.tensor([[0.0, 1.0, 0.0], [2.0, 0.0, 3.0]])
    pte = export_program(NonZero(), (nz,))
    (got,) = pyexec.load(pte).load_method("forward").execute([nz])
    (ref,) = run_with_executorch(pte, [nz])
    assert got.stride() == ref.stride(), f"nonzero: strides {got.stride()}, ExecuTorch's {ref.stride()}"
