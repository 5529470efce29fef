"""Load-time folding (native/src/runtime/fold.c): a constant weight transposed by
permute_copy and read only by matrix products becomes a strided view of the
constant instead of a copy made on every call. Each case is checked against
torch eager and ExecuTorch's runtime on the same file, including the cases
that must not be folded (the transposed tensor is also read by something
else, or returned to the caller)."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from support.export import assert_close, export_program, run_with_executorch
from torch import nn

import pyexec


class Linears(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(24, 40)
        self.b = nn.Linear(40, 8, bias=False)

    def forward(self, x: torch.Tensor, seq: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.b(torch.relu(self.a(x))), self.b(self.a(seq))  # addmm; view + mm + view


class SharedTranspose(nn.Module):
    """The transposed weight also feeds a reduction: it must stay a real copy."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(16, 12))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        wt = self.w.t()
        return x @ wt + wt.sum(0)


class ReturnsTranspose(nn.Module):
    """The transposed weight is an output: the caller may write into it."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(6, 5))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        wt = self.w.t()
        return x @ wt, wt


class BatchedConstant(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(3, 7, 9))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.bmm(x, self.w.permute(0, 2, 1))


def _check(module: nn.Module, inputs: tuple[Any, ...], rtol: float = 1e-4, atol: float = 1e-5) -> pyexec.Method:
    module.eval().requires_grad_(False)
    pte = export_program(module, inputs)
    ours = pyexec.load(pte).load_method()
    expected = module(*inputs)
    expected = list(expected) if isinstance(expected, tuple) else [expected]
    reference = run_with_executorch(pte, inputs)
    for _ in range(2):  # a second call sees the same (unchanged) constants
        got = ours.execute(list(inputs))
        for i, (g, e, r) in enumerate(zip(got, expected, reference)):
            assert_close(g, e, rtol=rtol, atol=atol, what=f"output {i} vs torch")
            assert_close(g, r, rtol=rtol, atol=atol, what=f"output {i} vs ExecuTorch")
    return ours


def test_linear_layers() -> None:
    torch.manual_seed(0)
    _check(Linears(), (torch.randn(5, 24), torch.randn(2, 3, 24)))


@pytest.mark.parametrize("rows", [1, 3, 7, 50])  # the few-row paths and the packed one
def test_linear_rows(rows: int) -> None:
    torch.manual_seed(rows)
    _check(nn.Linear(33, 70), (torch.randn(rows, 33),))


def test_linear_float64() -> None:
    torch.manual_seed(0)
    _check(nn.Linear(9, 4).double(), (torch.randn(3, 9, dtype=torch.float64),), rtol=1e-10, atol=1e-12)


def test_transpose_shared_with_another_reader() -> None:
    torch.manual_seed(0)
    _check(SharedTranspose(), (torch.randn(4, 12),))


def test_transpose_returned_to_the_caller_is_writable() -> None:
    torch.manual_seed(0)
    x = torch.randn(3, 5)
    module = ReturnsTranspose()
    m = _check(module, (x,))
    _, wt = m.execute([x], clone_outputs=False)
    wt.add_(1.0)  # the method's own memory, not the program's read-only constants
    product, wt = m.execute([x], clone_outputs=False)
    assert_close(wt, module.w.t())
    assert_close(product, x @ module.w.t())


def test_batched_constant() -> None:
    torch.manual_seed(0)
    _check(BatchedConstant(), (torch.randn(3, 4, 9),))
