"""The input shape check (SPEC §3): a static input's sizes must equal the
exported ones, a dynamic input's each be at most its bound, and the message
names the input and the dim. What a .pte does not record (which dims of a
dynamic input are dynamic, and their exported minimum) the check cannot
enforce: the tests here pin down both sides."""

from __future__ import annotations

import pytest
import torch
from support.export import export_program
from torch.export import Dim

import pyexec


class Flatten(torch.nn.Module):
    """Flattens x with sizes read from its shape: the view needs every dim the
    export treats as dynamic, and has the static ones baked in."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        return x.reshape(b * t * c) * 2


def test_a_static_input_of_another_size_is_refused_naming_the_dim() -> None:
    program = pyexec.load(export_program(Flatten(), (torch.randn(2, 5, 4),)))
    method = program.load_method("forward")
    with pytest.raises(pyexec.InvalidArgumentError,
                       match=r"input 0 has shape \[2, 5, 4\], tensor has shape \[2, 5, 3\] \(dim 2 differs\)"):
        method.set_inputs([torch.randn(2, 5, 3)])
    with pytest.raises(pyexec.InvalidArgumentError, match=r"\(dim 0 differs\)"):
        method.set_inputs([torch.randn(1, 5, 4)])


def test_a_dynamic_input_above_its_bound_is_refused_naming_the_dim() -> None:
    x = torch.randn(2, 5, 4)
    program = pyexec.load(export_program(Flatten(), (x,), dynamic_shapes={"x": {1: Dim("T", max=8)}}))
    method = program.load_method("forward")
    with pytest.raises(pyexec.InvalidArgumentError,
                       match=r"input 0 has shape at most \[2, 8, 4\], tensor has shape \[2, 9, 4\] \(dim 1 above"):
        method.set_inputs([torch.randn(2, 9, 4)])
    with pytest.raises(pyexec.InvalidArgumentError, match=r"\(dim 2 above its bound\)"):
        method.set_inputs([torch.randn(2, 3, 5)])
    out = method.execute([torch.randn(2, 3, 4)])[0]
    assert out.shape == (24,)


def test_a_pte_records_neither_which_dims_are_dynamic_nor_their_minimum() -> None:
    """Batch static at 2, or dynamic up to 2 (at least 1), with the same
    dynamic dim 1: the two programs describe their input identically (each
    dim's bound, one dynamism flag for the tensor), so a batch of 1 passes
    the check in both. The static one then fails in the view whose sizes it
    baked in, with an ExecutionError naming the operator; the dynamic one runs."""
    x = torch.randn(2, 5, 4)
    t = Dim("T", max=8)
    static_batch = pyexec.load(export_program(Flatten(), (x,), dynamic_shapes={"x": {1: t}}))
    dynamic_batch = pyexec.load(
        export_program(Flatten(), (x,), dynamic_shapes={"x": {0: Dim("B", min=1, max=2), 1: t}})
    )
    assert static_batch.method_meta("forward").inputs == dynamic_batch.method_meta("forward").inputs
    small = torch.randn(1, 5, 4)
    assert dynamic_batch.load_method("forward").execute([small])[0].shape == (20,)
    method = static_batch.load_method("forward")
    method.set_inputs([small])
    with pytest.raises(pyexec.ExecutionError, match=r"et_view.default: size holds 40 elements, self has 20"):
        method.execute()
