"""Products with a constant weight packed once (runtime/fuse.c,
kernels/linalg.h's px_linear_packed): nn.Linear's addmm (bias) and mm (no
bias) over a fixed row count of 8 or more read the weight from the GEMM's
panels instead of packing it on every call; fewer rows, or a dynamic row
count, keep the general kernel. Real exported programs, compared with torch eager and ExecuTorch's
runtime on the same file at one and two threads; products that must keep
the general kernel (beta or alpha other than 1, a weight passed as an input)
still give the right results."""

from __future__ import annotations

import pytest
import torch
from support.export import assert_close, export_program, run_with_executorch
from torch import nn

import pyexec

TOL = {"rtol": 1e-4, "atol": 1e-4}


def rand(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


class MLP(nn.Module):
    """Linear with a bias (addmm), GELU, linear without one (mm), and an
    odd-width output (a partial last panel)."""

    def __init__(self, d: int, h: int, o: int) -> None:
        super().__init__()
        self.fc1 = nn.Linear(d, h)
        self.fc2 = nn.Linear(h, d, bias=False)
        self.fc3 = nn.Linear(d, o)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(self.fc2(torch.nn.functional.gelu(self.fc1(x))))


def run(pte: bytes, args: list[torch.Tensor], threads: int) -> torch.Tensor:
    before = pyexec.get_num_threads()
    pyexec.set_num_threads(threads)
    try:
        return pyexec.load(pte).load_method("forward").execute([a.clone() for a in args])[0]
    finally:
        pyexec.set_num_threads(before)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("rows", [1, 5, 16, 37])
def test_linear_layers(rows: int, threads: int) -> None:
    torch.manual_seed(0)
    module = MLP(96, 200, 33).eval()
    x = rand(rows, 96, seed=rows)
    pte = export_program(module, (x,))
    got = run(pte, [x], threads)
    with torch.no_grad():
        assert_close(got, module(x), **TOL, what="vs eager")
    assert_close(got, run_with_executorch(pte, [x])[0], **TOL, what="vs ExecuTorch")


def test_linear_over_a_dynamic_batch() -> None:
    """A dynamic row count keeps the general kernel (the weight read where it
    is mapped); every call's row count is its own."""
    torch.manual_seed(1)
    module = MLP(64, 128, 40).eval()
    x = rand(8, 64)
    pte = export_program(module, (x,), dynamic_shapes=({0: torch.export.Dim("rows", min=1, max=64)},))
    method = pyexec.load(pte).load_method("forward")
    for rows in (8, 1, 63, 17):
        xs = rand(rows, 64, seed=rows)
        with torch.no_grad():
            assert_close(method.execute([xs])[0], module(xs), **TOL, what=f"{rows} rows vs eager")


class Unpackable(nn.Module):
    """addmm with beta / alpha other than 1, and a weight passed as an input:
    the general kernel runs them."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(rand(24, 12, seed=3))
        self.b = nn.Parameter(rand(12, seed=4))

    def forward(self, x: torch.Tensor, w_in: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.addmm(self.b, x, self.w, beta=0.5, alpha=2.0), x @ w_in


def test_products_that_keep_the_general_kernel() -> None:
    module = Unpackable().eval()
    args = (rand(7, 24, seed=5), rand(24, 9, seed=6))
    pte = export_program(module, args)
    got = pyexec.load(pte).load_method("forward").execute([a.clone() for a in args])
    with torch.no_grad():
        want = module(*args)
    for k, (g, w) in enumerate(zip(got, want)):
        assert_close(g, w, **TOL, what=f"output {k} vs eager")
