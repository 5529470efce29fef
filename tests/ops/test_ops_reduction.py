"""Reduction, scan and sort kernels (native/src/kernels/reduction/) and the
ExecuTorch prim ops (native/src/kernels/prim.c), checked against torch eager.

Each test exports one module that groups many ops, runs it with pyexec and
compares every output with torch (floats within rtol/atol, integers exactly).
"""

from __future__ import annotations

import math

import pytest
import torch
from support.export import check_module
from torch._higher_order_ops.map import map as torch_map

FLOAT_TOL = {
    torch.float32: dict(rtol=1e-4, atol=1e-5),
    torch.float64: dict(rtol=1e-6, atol=1e-8),
    torch.float16: dict(rtol=2e-3, atol=2e-3),
    torch.bfloat16: dict(rtol=1.6e-2, atol=1.6e-2),
}


def distinct(shape, dtype, scale=0.25):
    """Values with no ties (exact in every dtype), so sort / topk / arg*
    indices are unambiguous: a shuffled arange, centred, times `scale`."""
    n = math.prod(shape)
    g = torch.Generator().manual_seed(n)
    v = torch.randperm(n, generator=g).to(torch.float64)
    if dtype.is_floating_point:
        v = (v - (n - 1) / 2) * scale
    elif dtype != torch.uint8:
        v = v - n // 2
    return v.to(dtype).reshape(shape)


# ---- floating dtypes ---------------------------------------------------------


class FloatReductions(torch.nn.Module):
    def forward(self, x, y):
        return (
            x.sum(),
            x.sum(1),
            x.sum((0, 2), keepdim=True),
            x.sum(-1),
            x.sum(0),
            x.mean(),
            x.mean((1, 2)),
            x.mean(0, keepdim=True),
            x.amax(),
            x.amax(1),
            x.amin((0, 2)),
            x.amin(-1, keepdim=True),
            *torch.max(x, 1),
            *torch.min(x, -1, keepdim=True),
            *torch.max(x, 0),
            x.max(),
            x.min(),
            x.argmax(),
            x.argmin(1),
            x.argmax(-1, keepdim=True),
            x.argmin(0),
            x.argmax(keepdim=True),
            y.prod(),
            x.prod(1),
            x.var(),
            x.var(1),
            x.var((0, 2), unbiased=False, keepdim=True),
            x.var(-1, correction=2),
            x.std(0),
            x.cumsum(1),
            x.cumsum(-1),
            x.cumsum(0),
            *torch.sort(x, 1),
            *torch.sort(x, -1, descending=True),
            *torch.topk(x, 3, dim=1),
            *torch.topk(x, 2, dim=-1, largest=False),
            *torch.topk(x, 7, dim=-1),
            x.any(1),
            x.all(),
            x.any((0, 2)),
        )


class AsFloat32(torch.nn.Module):
    """Casts bfloat16 outputs to float32 (exactly) for the comparison, which
    goes through numpy (no bfloat16 there)."""

    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, *args):
        return tuple(o.float() if o.dtype == torch.bfloat16 else o for o in self.inner(*args))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.float16, torch.bfloat16])
def test_float_reductions_match_torch(dtype):
    x = distinct((3, 5, 7), dtype)
    y = distinct((2, 3), dtype)
    module = AsFloat32(FloatReductions()) if dtype == torch.bfloat16 else FloatReductions()
    check_module(module, (x, y), **FLOAT_TOL[dtype])


class DtypeArgs(torch.nn.Module):
    def forward(self, x, i, b):
        return (
            x.sum(dtype=torch.float64),
            x.sum(1, dtype=torch.float64),
            x.mean(dtype=torch.float64),
            x.mean(0, dtype=torch.float64),
            x.prod(1, dtype=torch.float64),
            x.sum(1, dtype=torch.int64),
            i.sum(dtype=torch.int32),
            i.sum(0, dtype=torch.float32),
            i.mean(1, dtype=torch.float32),
            i.cumsum(1, dtype=torch.float32),
            x.cumsum(0, dtype=torch.float64),
            b.sum(1, dtype=torch.int32),
            b.sum(0),
        )


def test_dtype_arguments_convert_before_reducing():
    x = torch.randn(6, 11) * 3
    i = torch.randint(-50, 50, (6, 11), dtype=torch.int32)
    b = torch.rand(6, 11) > 0.5
    check_module(DtypeArgs(), (x, i, b))


# ---- integer and bool dtypes ---------------------------------------------------


class IntReductions(torch.nn.Module):
    def forward(self, x, p):
        return (
            x.sum(),
            x.sum(1),
            x.sum((0, 2), keepdim=True),
            x.prod(1),
            x.prod(),
            x.amax(1),
            x.amin(),
            *torch.max(x, 1),
            *torch.min(x, 0, keepdim=True),
            x.max(),
            x.min(),
            x.argmax(1),
            x.argmin(),
            x.argmax(-1, keepdim=True),
            x.cumsum(1),
            x.cumsum(0),
            x.any(1),
            x.all(),
            x.any((0, 2)),
            x.all(-1),
            *torch.sort(p, 1),
            *torch.sort(p, 0, descending=True),
            *torch.topk(p, 2, dim=-1),
            *torch.topk(p, 3, dim=1, largest=False),
        )


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int16, torch.int8, torch.uint8])
def test_int_reductions_match_torch(dtype):
    g = torch.Generator().manual_seed(1)
    lo = 0 if dtype == torch.uint8 else -3
    x = torch.randint(lo, 4, (3, 5, 9), generator=g).to(dtype)
    x[1, 2] = 0  # a row of zeros for any / all / prod
    check_module(IntReductions(), (x, distinct((3, 5, 9), dtype)))


class BoolReductions(torch.nn.Module):
    def forward(self, b):
        return (
            b.sum(),
            b.sum(1),
            b.sum((0, 2)),
            b.any(1),
            b.all(1),
            b.any(),
            b.all((0, 2), keepdim=True),
            b.amax(1),
            b.amin((0, 1)),
            *torch.max(b, 2),
            *torch.min(b, 1),
            b.cumsum(2),
            b.prod(1),
        )


def test_bool_reductions_match_torch():
    g = torch.Generator().manual_seed(2)
    b = torch.rand(4, 3, 19, generator=g) > 0.3
    b[0] = True
    b[1, :, 3:] = False
    check_module(BoolReductions(), (b,))


# ---- edge values, empty and 0-d tensors ------------------------------------------


class EdgeValues(torch.nn.Module):
    def forward(self, x):
        return (
            x.amax(1),
            x.amin(0),
            x.amax(),
            *torch.max(x, 1),
            *torch.min(x, 0),
            x.argmax(1),
            x.argmin(0),
            x.argmax(),
            x.max(),
            x.min(),
            x.sum(1),
            x.sum(0),
            x.mean(1),
            x.cumsum(1),
            x.any(1),
            x.all(0),
            x.all(1),
            x.var(1),
        )


def test_nan_and_inf_propagate_like_torch():
    nan, inf = float("nan"), float("inf")
    x = torch.linspace(-3, 3, 4 * 19).reshape(4, 19)
    x[0, 11] = nan  # beyond the first 8 lanes
    x[0, 15] = inf
    x[1, 0] = -inf
    x[1, 9] = inf
    x[2, :] = nan
    x[3, 1] = -0.0
    x[3, 2] = 0.0
    x[3, 17] = -inf
    x[3, 13] = nan
    check_module(EdgeValues(), (x,))


class SortEdge(torch.nn.Module):
    def forward(self, x):
        return (
            *torch.sort(x, 1),
            *torch.sort(x, 1, descending=True),
            *torch.topk(x, 4, dim=1),
            *torch.topk(x, 4, dim=1, largest=False),
        )


def test_sort_places_nan_like_torch():
    nan, inf = float("nan"), float("inf")
    x = torch.tensor(
        [
            [3.0, nan, 1.0, -inf, 2.5, inf, -7.0, 0.5, 9.0, -2.0, 4.0],
            [inf, -inf, 5.0, 1.0, -1.0, 2.0, 8.0, -3.0, 7.0, 0.0, 6.0],
        ]
    )
    check_module(SortEdge(), (x,))


class EmptyReductions(torch.nn.Module):
    def forward(self, x, z):
        return (
            x.sum(0),
            x.sum(1),
            x.sum(),
            x.mean(0),
            x.prod(0),
            x.amax(1),
            x.any(0),
            x.all(0),
            x.cumsum(0),
            x.var(0),
            x.argmax(1),
            *torch.max(x, 1),
            *torch.sort(x, 0),
            z.sum((0, 1)),
            z.amin(2),
            z.any((1, 2)),
        )


def test_empty_tensors():
    check_module(EmptyReductions(), (torch.zeros(0, 5), torch.ones(4, 0, 3)))


class ZeroDim(torch.nn.Module):
    def forward(self, x, i):
        return (
            x.sum(),
            x.sum(0),
            x.mean(),
            x.amax(),
            x.amin(0),
            *torch.max(x, 0),
            x.argmax(),
            x.argmin(0),
            x.cumsum(0),
            *torch.sort(x, 0),
            *torch.topk(x, 1),
            x.var(),
            x.var(correction=0),
            x.prod(),
            x.any(),
            i.sum(),
            i.cumsum(0),
            i.all(),
            i.argmax(0, keepdim=True),
        )


def test_zero_dim_tensors():
    check_module(ZeroDim(), (torch.tensor(-1.5), torch.tensor(7)))


# ---- large inputs (the float32 fast paths) ------------------------------------------


class LargeFloat(torch.nn.Module):
    def forward(self, x, y, s):
        return (
            x.sum(),
            x.sum(0),
            x.sum(1),
            x.mean(),
            x.mean(0),
            x.var(1),
            x.var(0),
            x.amax(1),
            x.amin(0),
            s.argmax(1),
            s.argmin(0),
            x.cumsum(1),
            x.cumsum(0),
            *torch.topk(s, 5, dim=1),
            *torch.topk(s, 50, dim=1),
            *torch.sort(s, 1),
            y.sum((0, 2)),
            y.sum(1),
            y.mean((0, 2), keepdim=True),
            y.amax((0, 2)),
            y.var((0, 2)),
            *torch.max(y, 1),
        )


def test_large_float32_reductions_stay_accurate():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(64, 1003, generator=g) + 1.0
    y = torch.randn(7, 301, 5, generator=g) * 10
    s = distinct((64, 1003), torch.float32, scale=1e-3)  # no ties for sort / topk
    check_module(LargeFloat(), (x, y, s))


# ---- dynamic shapes --------------------------------------------------------------------


class DynamicReductions(torch.nn.Module):
    def forward(self, x):
        return (
            x.sum(0),
            x.mean(1),
            x.amax(0),
            x.argmax(0),
            x.cumsum(0),
            *torch.max(x, 0),
            *torch.topk(x, 2, dim=1),
            *torch.sort(x, 0),
            x.var(0),
        )


def test_dynamic_shapes_resize_outputs():
    n = torch.export.Dim("n", min=1, max=40)
    inputs = [(distinct((k, 6), torch.float32),) for k in (5, 1, 40, 17)]
    check_module(DynamicReductions(), inputs[0], dynamic_shapes=({0: n},), run_inputs=inputs)


# ---- ops outside the core ATen opset (exported with strict_ir=False) --------------------


class NonCore(torch.nn.Module):
    def forward(self, x, t):
        return (
            *torch.var_mean(x, 1),
            *torch.var_mean(x, (0, 2), correction=0, keepdim=True),
            *torch.std_mean(x),
            x.cumprod(1),
            x.cumprod(-1),
            *torch.sort(t, stable=True, dim=1),
            *torch.sort(t, stable=True, dim=0, descending=True),
        )


def test_non_core_ops_var_mean_cumprod_stable_sort():
    x = distinct((3, 5, 7), torch.float32, scale=0.01) + 1.0
    t = torch.randint(0, 3, (6, 37), generator=torch.Generator().manual_seed(4))
    check_module(NonCore(), (x, t), strict_ir=False)


# ---- prim ops: symbolic-size arithmetic ---------------------------------------------------


class PrimCore(torch.nn.Module):
    def forward(self, x):
        n = x.shape[0]
        return (
            x.reshape(n // 2, -1) + 1,  # sym_size, floordiv, et_view
            x.view(-1) * 2,
            torch.ones(n // 4 + n % 4),  # floordiv, mod, add
            torch.full((2,), (n - 9) % 4),  # Python modulo of a negative
            torch.full((2,), (n - 9) // 4),  # floor division of a negative
            torch.full((2,), n / 3),  # truediv -> float
            torch.full((2,), math.ceil(n / 3)),
            torch.full((2,), round(n / 4)),  # ties to even
            torch.full((3,), x.sum().item()),  # _local_scalar_dense
            torch.full((2,), -n),
            torch.full((2,), n * 3 - 7),
            x * (n > 4),
            x * (n == 6),
        )


class PrimExtra(torch.nn.Module):
    def forward(self, x):
        n = x.shape[0]
        return (
            torch.full((2,), torch.sym_max(n - 5, 2)),
            torch.full((2,), torch.sym_min(n, 5)),
            torch.full((2,), math.trunc(n / 2.5)),
            torch.full((2,), torch.sym_float(n)),
            torch.full((2,), torch.sym_not(n > 4)),
            torch.full((2,), n * 1.5 - 3),
            x * torch.sym_not(n > 4),
        )


@pytest.mark.parametrize("module,strict", [(PrimCore, True), (PrimExtra, False)])
def test_prim_ops_follow_python_arithmetic(module, strict):
    half = torch.export.Dim("half", min=1, max=16)
    inputs = [(torch.randn(k, 6),) for k in (8, 2, 6, 10, 32)]
    check_module(module(), inputs[0], dynamic_shapes=({0: 2 * half},), run_inputs=inputs, strict_ir=strict)


def _map_body(x, y):
    return x * 2 + y


class MapModule(torch.nn.Module):
    def forward(self, xs, y):
        return torch_map(_map_body, xs, y)


def test_map_uses_et_copy_index_and_prim_loop():
    check_module(MapModule(), (torch.randn(5, 3), torch.randn(3)))


# ---- several separate reduced dims ------------------------------------------------------


class SeparateDims(torch.nn.Module):
    def forward(self, x, i):
        return (
            x.sum((0, 2)),  # kept innermost, two reduced groups
            x.mean((1, 3), keepdim=True),  # reduced innermost, two groups
            x.amax((0, 2)),
            x.amin((0, 1, 3)),
            x.var((0, 2)),
            x.any((1, 3)),
            x.double().sum((0, 2)),
            i.sum((0, 2)),
            i.amax((1, 3)),
            i.all((0, 2)),
        )


def test_reductions_over_separate_dims():
    x = distinct((2, 3, 4, 5), torch.float32)
    i = distinct((2, 3, 4, 5), torch.int32)
    check_module(SeparateDims(), (x, i))


# ---- errors ------------------------------------------------------------------------------


class ErrorCases(torch.nn.Module):
    def forward(self, x):
        return x.amax(0), *torch.topk(x, 3, dim=0)


def test_errors_are_reported_not_crashed():
    import pyexec

    n = torch.export.Dim("n", min=3, max=8)
    pte = check_module(ErrorCases(), (torch.randn(5, 4),), dynamic_shapes=({0: n},))
    method = pyexec.load(pte).load_method("forward")
    with pytest.raises(pyexec.ExecutionError, match="zero-size"):
        method.execute([torch.randn(0, 4)])
    with pytest.raises(pyexec.ExecutionError, match="out of range"):
        method.execute([torch.randn(2, 4)])


class LongRows(torch.nn.Module):
    def forward(self, h, i):
        return (
            h.sum(),
            h.sum(1),
            h.mean(1),
            h.amax(1),
            h.argmax(1),
            h.argmin(),
            *torch.max(h, 1),
            h.var(1),
            h.sum(0),
            h.amin(0),
            *torch.min(h, 0),
            h.var(0),
            i.sum(1),
            i.sum(0),
            i.amax(),
            i.argmax(1),
            *torch.max(i, 0),
        )


def test_long_rows_of_converted_dtypes():
    # float16 / int32 rows longer than the 2048-element conversion pieces
    g = torch.Generator().manual_seed(5)
    h = (torch.randint(-8, 9, (3, 4100), generator=g) / 8).to(torch.float16)
    i = torch.randint(-1000, 1000, (3, 4100), generator=g, dtype=torch.int32)
    h[1, 3000] = 2.0  # the max of row 1 lies in the second piece
    i[2, 4099] = 5000
    check_module(LongRows(), (h, i), rtol=2e-3, atol=2e-3)
