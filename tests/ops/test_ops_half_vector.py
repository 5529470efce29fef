"""float16 and bfloat16 programs (no delegate) on the vectorised 16-bit
paths: long contiguous rows (vector conversions with tails), linear layers
whose weights are packed into 16-bit panels at their first call, softmax and
layer norm rows widened to float32, and an attention block at a size where
those paths carry the time.

What is compared, and why:

* Element-wise ops: ExecuTorch's portable kernels compute each element in
  float32 and round it once, deterministically; pyexec's vector conversions
  give the same bits as its element-by-element ones, so the results must be
  bit-equal to ExecuTorch's (NaN payloads and signs aside).
* Linear layers: pyexec sums in float32 and rounds once per output, whether
  the weight is read through its strides (PYEXEC_LINEAR_PACK=0) or from its
  16-bit panels: the two must give the same bits, at one row (a decode
  step), a few rows and more rows than the panels' in-register path takes.
  Against ExecuTorch (whose addmm adds each product to a 16-bit
  accumulator) and torch in float64: the textbook bounds of
  test_ops_half.py.
* Softmax and layer norm: statistics in float32 (as torch computes them),
  rounded once: within one 16-bit step of torch in float64; softmax also
  within one step of ExecuTorch (float32 too), layer norm at most as far
  from float64 as ExecuTorch's (whose statistics over a 1003-element row
  drift by whole units).
"""

from __future__ import annotations

import os
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from support.models import EncoderBlock
from test_ops_half import (
    EPS32,
    HALVES,
    U,
    assert_same,
    assert_within,
    both_run,
    export,
    model_errors,
    rand,
    run_eager64,
    ulp,
    within_ulps,
)

import pyexec


class Elementwise(torch.nn.Module):
    def forward(self, a, b, c):  # type: ignore[no-untyped-def]
        return (
            a + b,
            a - c,  # a row broadcast over the rows
            a * b,
            a / b,
            torch.maximum(a, b),
            torch.relu(a),
            torch.sqrt(a.abs()),
            torch.where(a > b, a, c),
            a * 0.5 + 1.25,
        )


@pytest.mark.parametrize("dtype", HALVES)
def test_elementwise_ops_on_long_rows_match_executorch_bit_for_bit(dtype: torch.dtype) -> None:
    args = (rand((37, 1003), dtype, 1), rand((37, 1003), dtype, 2, 0.25, 4.0), rand((1003,), dtype, 3))
    ours, theirs = both_run(export(Elementwise(), args), args)
    for k, (o, t) in enumerate(zip(ours, theirs)):
        assert_same(o, t, f"output {k}")


class Linears(torch.nn.Module):
    def __init__(self, dtype: torch.dtype) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc1, self.fc2 = torch.nn.Linear(300, 200), torch.nn.Linear(200, 96, bias=False)
        self.to(dtype)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.fc1(x)
        return h, self.fc2(h)


def _run(pte: bytes, x: torch.Tensor) -> list[Any]:
    return list(pyexec.load(pte).load_method("forward").execute([x.clone()]))


@pytest.mark.parametrize("rows", [1, 8, 300])
@pytest.mark.parametrize("dtype", HALVES)
def test_linear_layers_packed_or_not_give_the_same_bits(
    dtype: torch.dtype, rows: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    module = Linears(dtype).eval()
    x = rand((rows, 300), dtype, 4)
    pte = export(module, (x,))
    packed = _run(pte, x)
    packed_again = _run(pte, x)  # a second program: packed by its first call too
    monkeypatch.setenv("PYEXEC_LINEAR_PACK", "0")
    assert os.environ["PYEXEC_LINEAR_PACK"] == "0"
    strided = _run(pte, x)
    for k in range(2):
        assert_same(packed[k], strided[k], f"output {k}: packed vs read through strides")
        assert_same(packed[k], packed_again[k], f"output {k}: twice")
    # against ExecuTorch and torch in float64 on the same values (fc2 takes
    # pyexec's own h, so that only its product is measured)
    from executorch.runtime import Runtime

    theirs = list(Runtime.get().load_program(pte).load_method("forward").execute([x.clone()]))
    w1, b1, w2 = (p.double() for p in (module.fc1.weight, module.fc1.bias, module.fc2.weight))
    refs = [(x.double() @ w1.T + b1, x.double().abs() @ w1.T.abs() + b1.abs(), 300)]
    h = packed[0].double()
    refs.append((h @ w2.T, h.abs() @ w2.T.abs(), 200))
    for k, (exact, mag, K) in enumerate(refs):
        ours_err = K * EPS32 * mag + ulp(exact, dtype)
        assert_within(packed[k], exact.to(dtype), ours_err, f"output {k} vs torch in float64")
        if k == 0:  # ExecuTorch's addmm: a 16-bit accumulator (K products, bias: 3 more roundings)
            et_err = (K + 3) * U[dtype] * mag + ulp(theirs[0], dtype)
            assert_within(packed[0], theirs[0], ours_err + et_err, "fc1 vs ExecuTorch")


class Rows(torch.nn.Module):
    def forward(self, x, w, b):  # type: ignore[no-untyped-def]
        n = x.shape[-1]
        return torch.softmax(x, -1), torch.softmax(x, 1), F.layer_norm(x, (n,), w, b), F.layer_norm(x, (n,))


@pytest.mark.parametrize("dtype", HALVES)
def test_softmax_and_layer_norm_rows_within_one_step_of_executorch_and_torch(dtype: torch.dtype) -> None:
    args = (rand((3, 20, 1003), dtype, 5, -6, 6), rand((1003,), dtype, 6, 0.5, 1.5), rand((1003,), dtype, 7, -0.5, 0.5))
    module = Rows()
    pte = export(module, args)
    ours, theirs = both_run(pte, args)
    eager64 = run_eager64(module, args, dtype)
    for k in range(4):
        within_ulps(ours[k], eager64[k], dtype, 1, f"output {k} vs torch in float64")
    for k in range(2):  # softmax: ExecuTorch computes it in float32 too
        within_ulps(ours[k], theirs[k], dtype, 1, f"softmax {k} vs ExecuTorch")
    for k in range(2, 4):  # layer norm: ExecuTorch's statistics drift over 1003 terms; pyexec's do not
        ours_err = float((ours[k].double() - eager64[k].double()).abs().max())
        their_err = float((theirs[k].double() - eager64[k].double()).abs().max())
        assert ours_err <= their_err, (k, ours_err, their_err)


@pytest.mark.parametrize("dtype", HALVES)
def test_attention_block_is_as_accurate_as_executorch_and_torch(dtype: torch.dtype) -> None:
    torch.manual_seed(0)
    m = EncoderBlock(128, 4, 256).eval().to(dtype)
    x = torch.randn(1, 40, 128).to(dtype)
    ours, theirs, torch_err, mag = model_errors(m, x, dtype)
    step = mag * 2.0 * U[dtype]  # one 16-bit step at the output's magnitude
    assert ours <= 2 * torch_err + step, (ours, torch_err)
    assert ours <= theirs + step, (ours, theirs)
