"""Mutable buffers (module state mutated in forward): persistence across
calls, initial values from mutable_data_segments, independence between
Methods; compared with torch eager and ExecuTorch's runtime."""

from __future__ import annotations

import pytest
import torch
from support.export import assert_close, export_program, run_with_executorch

import pyexec


class Counter(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("state", torch.arange(6, dtype=torch.float32).reshape(2, 3) + 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.state.mul_(0.5).add_(x)
        return self.state * 2


@pytest.fixture(scope="module")
def with_initial_state() -> bytes:
    from executorch.exir.passes.init_mutable_pass import InitializedMutableBufferPass

    return export_program(Counter(), (torch.ones(2, 3),), passes=[InitializedMutableBufferPass(["state"])])


def test_state_starts_from_the_programs_initial_values_and_persists(with_initial_state: bytes) -> None:
    method = pyexec.load(with_initial_state).load_method("forward")
    eager = Counter()
    for step in range(4):
        x = torch.full((2, 3), float(step))
        (got,) = method.execute([x])
        assert_close(got, eager(x), what=f"step {step}")


def test_methods_have_independent_state(with_initial_state: bytes) -> None:
    program = pyexec.load(with_initial_state)
    a, b = program.load_method("forward"), program.load_method("forward")
    x = torch.ones(2, 3)
    first = a.execute([x])[0]
    a.execute([x])
    assert_close(b.execute([x])[0], first)  # b has not seen a's two calls


def test_matches_executorch_on_the_same_file(with_initial_state: bytes) -> None:
    x = torch.randn(2, 3)
    (reference,) = run_with_executorch(with_initial_state, [x])
    (got,) = pyexec.load(with_initial_state).load_method("forward").execute([x])
    assert_close(got, reference)


def test_uninitialized_buffer_starts_at_zero_like_executorch() -> None:
    """Without InitializedMutableBufferPass the exporter stores no initial
    value; ExecuTorch's runtime then starts the buffer at zero, and so do we."""
    pte = export_program(Counter(), (torch.ones(2, 3),))
    x = torch.randn(2, 3)
    (reference,) = run_with_executorch(pte, [x])
    (got,) = pyexec.load(pte).load_method("forward").execute([x])
    assert_close(got, reference)
    assert_close(got, 2 * x)  # 0 * 0.5 + x, doubled
