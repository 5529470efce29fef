"""Elementwise kernels (native/src/kernels/elementwise/): every op exported
with ExecuTorch, run with pyexec and compared with torch eager, over several
dtypes, broadcast shapes, 0-d and empty tensors and edge values.

Ops are grouped into one module per (group, dtype, shape) so that each export
covers many kernels. Ops that ExecuTorch's to_edge would decompose
(silu, glu, hardswish, floor_divide, rsub, fill, ...) are kept with
`preserve_ops` so their own kernels run."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from support.export import assert_close, check_module, eager_reference, export_program, run_with_executorch

import pyexec

A = torch.ops.aten
NAN, INF = float("nan"), float("inf")

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
SIGNED = [torch.int64, torch.int32, torch.int16, torch.int8]
INTS = SIGNED + [torch.uint8]


def tol(dtype: torch.dtype) -> dict[str, float]:
    if dtype in (torch.float16, torch.bfloat16):
        return {"rtol": 2e-2, "atol": 2e-2}
    return {"rtol": 1e-4, "atol": 1e-5}


def check(
    module: torch.nn.Module,
    inputs: tuple[Any, ...],
    *,
    preserve: Sequence[Any] = (),
    run_inputs: Sequence[tuple[Any, ...]] | None = None,
    pointwise_at: Sequence[int] = (),
    executorch_differs: Sequence[int] | None = None,
    **kw: Any,
) -> bytes:
    """check_module, or, when some ops must not be decomposed, the same
    comparison on a program exported with `preserve_ops`. Returns the
    program. `pointwise_at`: flat positions holding edge values, whose
    reference is ATen's scalar loop (see export.eager_reference) and which
    with `executorch_differs` given, are also checked against ExecuTorch's
    runtime, except the outputs it lists (where ExecuTorch's kernels and torch
    eager disagree and pyexec follows eager)."""
    if not preserve and not any(x.dtype == torch.bfloat16 for x in inputs):
        pte = check_module(module, inputs, strict_ir=False, run_inputs=run_inputs, pointwise_at=pointwise_at, **kw)
        if executorch_differs is not None:
            check_edges_with_executorch(pte, module, inputs, pointwise_at, executorch_differs, **kw)
        return pte
    pte = export_program(module, inputs, strict_ir=False, preserve=preserve)
    method = pyexec.load(pte).load_method("forward")
    for args in run_inputs or [inputs]:
        expected = eager_reference(module, args, pointwise_at)
        got = method.execute([x.clone() for x in args])
        assert len(got) == len(expected)
        for k, (g, e) in enumerate(zip(got, expected)):
            if e.dtype == torch.bfloat16:  # numpy has no bfloat16
                assert g.dtype == e.dtype, f"output {k}: dtype {g.dtype} != expected {e.dtype}"
                g, e = g.float(), e.float()
            assert_close(g, e, what=f"output {k}", **kw)
    # ExecuTorch 1.5.1 has no portable kernels for some preserved ops (silu,
    # hardswish, hardsigmoid): its reference runs the default decomposition.
    if executorch_differs is not None:
        check_edges_with_executorch(
            export_program(module, inputs, strict_ir=False), module, inputs, pointwise_at, executorch_differs, **kw
        )
    return pte


def check_edges_with_executorch(
    pte: bytes,
    module: torch.nn.Module,
    inputs: tuple[Any, ...],
    pointwise_at: Sequence[int],
    executorch_differs: Sequence[int],
    **kw: Any,
) -> None:
    """A second reference for the edge positions that does not come from
    torch: ExecuTorch's portable kernels run on the same program. Compared
    for every output of the inputs' shape, at `pointwise_at` only."""
    shape = inputs[0].shape
    expected = eager_reference(module, inputs, pointwise_at)
    theirs = run_with_executorch(pte, list(inputs))
    for k, (t, e) in enumerate(zip(theirs, expected)):
        if e.shape != shape or k in executorch_differs:
            continue
        at = torch.tensor(list(pointwise_at))
        assert_close(t.reshape(-1)[at].float(), e.reshape(-1)[at].float(), what=f"ExecuTorch, output {k}", **kw)


def rand(shape: Sequence[int], dtype: torch.dtype, seed: int, lo: float = -4, hi: float = 4) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.rand(shape, generator=g) > 0.5
    if dtype.is_floating_point:
        return (torch.rand(shape, generator=g, dtype=torch.float64) * (hi - lo) + lo).to(dtype)
    return torch.randint(int(lo), int(hi) + 1, shape, generator=g).to(dtype)


def nonzero(t: torch.Tensor) -> torch.Tensor:
    """t with zeros replaced (integer divisors)."""
    return torch.where(t == 0, torch.ones_like(t), t)


# (shape of x, shape of y): same shape (odd size), broadcasting both ways,
# a 0-d operand, and an empty result.
SHAPES = {
    "same": ((13,), (13,)),
    "bcast": ((3, 1, 5), (4, 1)),
    "zerodim": ((2, 7), ()),
    "empty": ((0, 3), (3,)),
}


def cases(
    full: Sequence[torch.dtype], some: Sequence[torch.dtype], all_cases: Sequence[str], few: Sequence[str]
) -> list[Any]:
    """(dtype, case) pairs: every case for the `full` dtypes, `few` cases for
    the others (exports are slow; this keeps the file's runtime down)."""
    out = [pytest.param(d, c, id=f"{str(d)[6:]}-{c}") for d in full for c in all_cases]
    return out + [pytest.param(d, c, id=f"{str(d)[6:]}-{c}") for d in some for c in few]


# ---- binary arithmetic ------------------------------------------------------


class FloatBinary(torch.nn.Module):
    def __init__(self, rounding: bool = True) -> None:
        super().__init__()
        self.rounding = rounding

    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        # torch eager rounds float16 / bfloat16 quotients to the storage type
        # before trunc / floor on some paths and not on others (it is not
        # consistent between same-shape and broadcast operands), so rounded
        # division is only compared for float32 / float64.
        rounded = (
            (
                torch.div(x, y, rounding_mode="trunc"),
                torch.div(x, y, rounding_mode="floor"),
                torch.floor_divide(x, y),
            )
            if self.rounding
            else ()
        )
        return rounded + (
            x + y,
            torch.add(x, y, alpha=2),
            x - y,
            torch.sub(x, y, alpha=0.5),
            x * y,
            x / y,
            torch.remainder(x, y),
            torch.fmod(x, y),
            torch.atan2(x, y),
            torch.pow(x.abs() + 0.5, y),
            torch.maximum(x, y),
            torch.minimum(x, y),
        )


@pytest.mark.parametrize("dtype,case", cases([torch.float32], FLOATS[1:], list(SHAPES), ["same", "bcast"]))
def test_float_binary(dtype: torch.dtype, case: str) -> None:
    xs, ys = SHAPES[case]
    x, y = rand(xs, dtype, 1), rand(ys, dtype, 2)
    if case == "same":
        # edge values, including zero divisors (inf / nan results)
        x[:6] = torch.tensor([NAN, INF, -INF, 0.0, -0.0, 3.0], dtype=dtype)
        y[:6] = torch.tensor([1.0, 2.0, -3.0, 0.0, 0.0, 0.0], dtype=dtype)
    module = FloatBinary(rounding=dtype in (torch.float32, torch.float64))
    edges = range(6) if case == "same" else ()
    check(module, (x, y), preserve=[A.floor_divide.default], pointwise_at=edges, **tol(dtype))


def test_float32_binary_large_broadcast_rows() -> None:
    # rows of several hundred elements with a broadcast operand, and a float16
    # operand that goes through the block conversion path
    x, y = rand((3, 1100), torch.float32, 3), rand((1100,), torch.float32, 4)
    check(FloatBinary(), (x, y), preserve=[A.floor_divide.default])
    h = rand((2, 1030), torch.float16, 5)
    check(FloatBinary(rounding=False), (h, rand((2, 1), torch.float16, 6)), **tol(torch.float16))


class IntBinary(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor, d: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            x + y,
            torch.add(x, y, alpha=3),
            x - y,
            x * y,
            x / d,
            torch.div(x, d, rounding_mode="trunc"),
            torch.div(x, d, rounding_mode="floor"),
            torch.floor_divide(x, d),
            torch.remainder(x, d),
            torch.fmod(x, d),
            torch.maximum(x, y),
            torch.minimum(x, y),
            torch.pow(x, y.abs() % 4),
            x & y,
            x | y,
            x ^ y,
            ~x,
        )


@pytest.mark.parametrize("dtype,case", cases(INTS[:2], INTS[2:], ["same", "bcast", "zerodim"], ["same"]))
def test_int_binary(dtype: torch.dtype, case: str) -> None:
    xs, ys = SHAPES[case]
    lo = 0 if dtype == torch.uint8 else -100
    x, y = rand(xs, dtype, 7, lo, 100), rand(ys, dtype, 8, lo, 100)
    d = nonzero(rand(ys, dtype, 9, lo, 10))
    if case == "same" and dtype != torch.uint8:
        info = torch.iinfo(dtype)
        # wrap-around and division by -1 (not of the minimum: torch eager traps on it)
        x[:3] = torch.tensor([info.min, info.max, -7], dtype=dtype)
        d[:3] = torch.tensor([2, -1, -1], dtype=dtype)
    check(IntBinary(), (x, y, d), preserve=[A.floor_divide.default])


class Shifts(torch.nn.Module):
    def forward(self, x: torch.Tensor, s: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            torch.bitwise_left_shift(x, s),
            torch.bitwise_right_shift(x, s),
            A.bitwise_left_shift.Tensor_Scalar(x, 3),
            A.bitwise_right_shift.Tensor_Scalar(x, 2),
        )


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.uint8])
def test_shifts(dtype: torch.dtype) -> None:
    bits = torch.iinfo(dtype).bits
    lo = 0 if dtype == torch.uint8 else -120
    x = rand((3, 11), dtype, 10, lo, 120)
    # shift amounts include the width and beyond (0 or the sign fill)
    s = torch.tensor([0, 1, 3, bits - 1, bits, bits + 5, 2, 7, 1, 0, 4], dtype=dtype)
    check(Shifts(), (x, s))


def test_integer_division_by_zero_raises() -> None:
    class Div(torch.nn.Module):
        def forward(self, x: torch.Tensor, *d: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return (
                torch.div(x, d[0], rounding_mode="trunc"),
                torch.div(x, d[1], rounding_mode="floor"),
                torch.remainder(x, d[2]),
                torch.fmod(x, d[3]),
                torch.floor_divide(x, d[4]),
            )

    x = torch.tensor([1, -2, 3], dtype=torch.int64)
    ones = [torch.tensor([1, -1, 2], dtype=torch.int64) for _ in range(5)]
    pte = check(Div(), (x, *ones), preserve=[A.floor_divide.default])
    method = pyexec.load(pte).load_method("forward")
    for k in range(5):  # a zero divisor for each op in turn
        d = [t.clone() for t in ones]
        d[k][1] = 0
        with pytest.raises(pyexec.ExecutionError, match="ZeroDivisionError"):
            method.execute([x, *d])


# ---- tensor-scalar overloads ------------------------------------------------


class FloatScalar(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            A.add.Scalar(x, 2),
            A.add.Scalar(x, 1.5, 3),
            A.sub.Scalar(x, 2.5),
            A.sub.Scalar(x, 2, 2),
            A.rsub.Scalar(x, 2),
            A.rsub.Scalar(x, 1.5, 0.5),
            A.mul.Scalar(x, 3),
            A.mul.Scalar(x, -0.25),
            A.div.Scalar(x, 2),
            A.div.Scalar_mode(x, 1.5, rounding_mode="trunc"),
            A.div.Scalar_mode(x, -1.5, rounding_mode="floor"),
            A.div.Scalar_mode(x, 2, rounding_mode=None),
            A.remainder.Scalar(x, 1.5),
            A.remainder.Scalar(x, -2),
            A.fmod.Scalar(x, 1.5),
            A.eq.Scalar(x, 1.0),
            A.ne.Scalar(x, 1.0),
            A.lt.Scalar(x, 0.5),
            A.le.Scalar(x, 0),
            A.gt.Scalar(x, -0.5),
            A.ge.Scalar(x, 2),
        )


class Pows(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = tuple(A.pow.Tensor_Scalar(x, e) for e in (2, 3, 0.5, -0.5, -1, -2, 1.7, 0, 1))
        return out + (A.pow.Scalar(2, x), A.pow.Scalar(0.5, x), A.pow.Tensor_Tensor(x, x))


@pytest.mark.parametrize("dtype", FLOATS)
def test_float_scalar_ops(dtype: torch.dtype) -> None:
    x = rand((3, 7), dtype, 11)
    x[0, :6] = torch.tensor([NAN, INF, -INF, 0.0, 1.0, -1.0], dtype=dtype)
    check(FloatScalar(), (x,), preserve=[A.rsub.Scalar], pointwise_at=range(6), **tol(dtype))
    check(Pows(), (x,), pointwise_at=range(6), **tol(dtype))


class IntScalar(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            A.add.Scalar(x, 3),
            A.add.Scalar(x, 2.5),  # promotes to float
            A.sub.Scalar(x, 2, 3),
            A.rsub.Scalar(x, 5),
            A.mul.Scalar(x, 7),
            A.mul.Scalar(x, 0.5),
            A.div.Scalar(x, 4),
            A.div.Scalar_mode(x, 3, rounding_mode="trunc"),
            A.div.Scalar_mode(x, -3, rounding_mode="floor"),
            A.remainder.Scalar(x, 3),
            A.remainder.Scalar(x, -3),
            A.fmod.Scalar(x, 3),
            A.fmod.Scalar(x, 2.5),
            A.eq.Scalar(x, 2),
            A.ne.Scalar(x, 2),
            A.lt.Scalar(x, 1.5),
            A.le.Scalar(x, 1),
            A.gt.Scalar(x, 0),
            A.ge.Scalar(x, 3),
            A.bitwise_and.Scalar(x, 6),
            A.bitwise_or.Scalar(x, 9),
            A.bitwise_xor.Scalar(x, 5),
            A.pow.Tensor_Scalar(x, 2),
            A.pow.Tensor_Scalar(x, 3),
            A.pow.Tensor_Scalar(x, 5),
            A.pow.Tensor_Scalar(x, 0.5),
            A.pow.Scalar(2, x.abs() % 5),
            A.pow.Scalar(1.5, x),
        )


@pytest.mark.parametrize("dtype", INTS)
def test_int_scalar_ops(dtype: torch.dtype) -> None:
    lo = 0 if dtype == torch.uint8 else -9
    check(IntScalar(), (rand((2, 9), dtype, 12, lo, 9),), preserve=[A.rsub.Scalar])


def test_int_pow_negative_exponents() -> None:
    class M(torch.nn.Module):
        def forward(self, x: torch.Tensor, e: torch.Tensor) -> torch.Tensor:
            return torch.pow(x, e)

    x = torch.tensor([1, -1, -1, 2, 0, 3, -2], dtype=torch.int64)
    e = torch.tensor([-1, -3, -2, -1, 2, 0, 5], dtype=torch.int64)
    check(M(), (x, e))


# ---- comparisons and logical ops ----------------------------------------------


class Compare(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            x == y,
            x != y,
            x < y,
            x <= y,
            x > y,
            x >= y,
            torch.logical_and(x, y),
            torch.logical_or(x, y),
            torch.logical_xor(x, y),
            torch.logical_not(x),
            torch.maximum(x, y),
            torch.minimum(x, y),
        )


@pytest.mark.parametrize(
    "dtype,case",
    cases(
        [torch.float32],
        [torch.float16, torch.int64, torch.int32, torch.uint8, torch.bool],
        ["same", "bcast", "empty"],
        ["same"],
    ),
)
def test_compare_and_logical(dtype: torch.dtype, case: str) -> None:
    xs, ys = SHAPES[case]
    x, y = rand(xs, dtype, 13, 0, 3), rand(ys, dtype, 14, 0, 3)
    if case == "same" and dtype.is_floating_point:
        x[:3] = torch.tensor([NAN, 1.0, 0.0], dtype=dtype)
        y[:3] = torch.tensor([NAN, NAN, -0.0], dtype=dtype)
    check(Compare(), (x, y))


class Bitwise(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            x & y,
            x | y,
            x ^ y,
            ~x,
            A.bitwise_and.Scalar(x, True),
            A.bitwise_or.Scalar(x, False),
            A.bitwise_xor.Scalar(x, True),
            A.eq.Scalar(x, True),
            x + y,
            x * y,
        )


def test_bool_bitwise_and_arith() -> None:
    check(Bitwise(), (rand((3, 5), torch.bool, 15), rand((5,), torch.bool, 16)))


def test_mixed_dtype_operands() -> None:
    # the exporter casts mismatched operands, except 0-d tensors, which
    # reach the kernels with their own dtype (lower promotion priority)
    class M(torch.nn.Module):
        def forward(
            self, x: torch.Tensor, i: torch.Tensor, s: torch.Tensor, f: torch.Tensor
        ) -> tuple[torch.Tensor, ...]:
            return (x + s, i + s, i * f, x > s, i == s, torch.where(i > 0, x, s), x - i, i / s, x * f)

    x = rand((4, 6), torch.float32, 17)
    i = rand((4, 6), torch.int32, 18)
    s = torch.tensor(3, dtype=torch.int64)
    f = torch.tensor(2.5, dtype=torch.float64)
    check(M(), (x, i, s, f))


# ---- unary math and activations -----------------------------------------------


class UnaryMath(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        u = x.clamp(-0.9, 0.9)  # inside the domains of asin / acos / atanh
        return (
            torch.exp(x),
            torch.log(x),
            torch.sqrt(x),
            torch.rsqrt(x),
            torch.tanh(x),
            torch.sigmoid(x),
            torch.sin(x),
            torch.cos(x),
            torch.tan(x),
            torch.asin(u),
            torch.acos(u),
            torch.atan(x),
            torch.sinh(x),
            torch.cosh(x),
            torch.asinh(x),
            torch.acosh(x.abs() + 1),
            torch.atanh(u),
            torch.erf(x),
            torch.expm1(x),
            torch.log1p(x),
            torch.log2(x),
            torch.log10(x),
            torch.reciprocal(x),
            torch.neg(x),
            torch.abs(x),
            torch.floor(x),
            torch.ceil(x),
            torch.round(x),
            torch.trunc(x),
            torch.sign(x),
            torch.isnan(x),
            torch.isinf(x),
        )


class Activations(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            F.relu(x),
            F.gelu(x),
            F.gelu(x, approximate="tanh"),
            F.silu(x),
            F.hardswish(x),
            F.hardsigmoid(x),
            F.leaky_relu(x, 0.2),
            F.elu(x),
            A.elu(x, 0.5, 2.0, 1.5),
            F.hardtanh(x, -2.0, 1.5),
            torch.logit(x),
            torch.logit(x, 0.1),
        )


class Glu(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return F.glu(x, -1), F.glu(x, 0)


ACT_OPS = [
    A.silu.default,
    A.hardswish.default,
    A.hardsigmoid.default,
    A.elu.default,
    A.logit.default,
    A.glu.default,
    A.leaky_relu.default,
    A.gelu.default,
    A.hardtanh.default,
]

EDGE = [NAN, INF, -INF, 0.0, -0.0, 0.5, -0.5, 1.5, -2.5, 2.5, 1.0, -1.0]


@pytest.mark.parametrize("dtype", FLOATS)
def test_unary_float(dtype: torch.dtype) -> None:
    x = rand((4, 10), dtype, 19)
    x.view(-1)[: len(EDGE)] = torch.tensor(EDGE, dtype=dtype)
    edges = range(len(EDGE))
    # ExecuTorch 1.5.1's portable sign gives sign(nan) = nan; torch eager
    # defines sign as (0 < x) - (x < 0), so 0, and pyexec follows eager.
    sign = 29
    assert torch.equal(UnaryMath()(x)[sign], torch.sign(x)), "UnaryMath's outputs moved: update `sign`"
    check(UnaryMath(), (x,), pointwise_at=edges, executorch_differs=[sign], **tol(dtype))
    check(Activations(), (x,), preserve=ACT_OPS, pointwise_at=edges, executorch_differs=[], **tol(dtype))
    check(Glu(), (x,), preserve=[A.glu.default], **tol(dtype))


@pytest.mark.parametrize("shape", [(), (0, 4), (2, 5, 6)])
def test_unary_float32_shapes(shape: tuple[int, ...]) -> None:
    x = rand(shape, torch.float32, 20)
    if len(shape) < 3:
        check(UnaryMath(), (x,))
    else:
        check(Activations(), (x,), preserve=ACT_OPS)
        check(Glu(), (x,), preserve=[A.glu.default])  # glu needs even dimensions


class IntUnary(torch.nn.Module):
    def __init__(self, lo: int) -> None:
        super().__init__()
        self.lo = lo

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            torch.neg(x),
            torch.abs(x),
            torch.sign(x),
            torch.floor(x),
            torch.ceil(x),
            torch.round(x),
            torch.trunc(x),
            torch.isnan(x),
            torch.isinf(x),
            F.relu(x),
            ~x,
            torch.logical_not(x),
            F.hardtanh(x, self.lo, 4),
            # floating functions promote integers to float32
            torch.exp(x),
            torch.sqrt(x),
            torch.sigmoid(x),
            torch.reciprocal(x),
            torch.sin(x),
            torch.log1p(x),
        )


@pytest.mark.parametrize("dtype", INTS)
def test_unary_int(dtype: torch.dtype) -> None:
    lo = 0 if dtype == torch.uint8 else -6
    check(IntUnary(-3 if lo else 1), (rand((3, 7), dtype, 21, lo, 6),))


# ---- where, masked_fill, clamp, fill ------------------------------------------------


class Select(torch.nn.Module):
    def forward(self, c: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            torch.where(c, x, y),
            torch.where(c, x, 0),
            torch.where(c, 1, y),
            x.masked_fill(c, 5),
            y.masked_fill(c, -2),
            torch.clamp(x, min=1),
            torch.clamp(x, max=2),
            torch.clamp(x, 0, 2),
            torch.clamp(x, 2, 0),  # min > max gives max
            torch.clamp(x, x, y),
            torch.clamp(x, min=y),
            torch.clamp(x, max=y),
        )


@pytest.mark.parametrize(
    "dtype,case",
    cases(
        [torch.float32],
        [torch.float64, torch.float16, torch.int64, torch.int32, torch.int8, torch.uint8],
        list(SHAPES),
        ["bcast"],
    ),
)
def test_where_masked_fill_clamp(dtype: torch.dtype, case: str) -> None:
    xs, ys = SHAPES[case]
    c = rand(xs, torch.bool, 22)
    x, y = rand(xs, dtype, 23, 0, 4), rand(ys, dtype, 24, 0, 4)
    if case == "same" and dtype.is_floating_point:
        x[:2] = torch.tensor([NAN, INF], dtype=dtype)
    check(Select(), (c, x, y), preserve=[A.masked_fill.Scalar], **tol(dtype))


def test_where_bool_values_and_broadcast_condition() -> None:
    class M(torch.nn.Module):
        def forward(self, c: torch.Tensor, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return torch.where(c, x, y), torch.where(c, y, x)

    check(M(), (rand((5, 1), torch.bool, 25), rand((1, 9), torch.bool, 26), rand((9,), torch.bool, 27)))
    check(M(), (rand((1, 1, 11), torch.bool, 28), rand((3, 1, 11), torch.float32, 29), rand((2, 1), torch.float32, 30)))


class ClampScalarPromote(torch.nn.Module):
    def forward(self, i: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return torch.clamp(i, min=0.5), torch.clamp(i, -1.5, 2), torch.clamp(i, max=3)


def test_clamp_promotes_int_with_float_bounds() -> None:
    check(ClampScalarPromote(), (rand((2, 5), torch.int32, 31, -4, 4),))


class Fill(torch.nn.Module):
    def forward(self, x: torch.Tensor, v: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return (
            A.fill.Scalar(x, 3),
            A.fill.Scalar(x, -1.5),
            A.fill.Tensor(x, v),
            A.scalar_tensor(2.5) + x,
            A.scalar_tensor(7, dtype=torch.int64) * x.to(torch.int64),
        )


@pytest.mark.parametrize(
    "dtype,shape",
    [(torch.float32, (3, 5)), (torch.float32, ()), (torch.float32, (0,))]
    + [(d, (3, 5)) for d in (torch.float16, torch.int64, torch.int32, torch.bool)],
)
def test_fill_and_scalar_tensor(dtype: torch.dtype, shape: tuple[int, ...]) -> None:
    x = rand(shape, dtype, 32)
    v = torch.tensor(2, dtype=dtype)
    check(Fill(), (x, v), preserve=[A.fill.Scalar, A.fill.Tensor], **tol(dtype))


# ---- layouts and dynamic shapes ----------------------------------------------------


def test_channels_last_operands() -> None:
    # channels-last intermediates mixed with contiguous ones (program inputs
    # and outputs stay contiguous)
    class M(torch.nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
            xc = x.contiguous(memory_format=torch.channels_last)
            outs = (xc + y, xc * 2, torch.relu(xc), torch.where(xc > 0, xc, y), torch.exp(xc), y - xc[:, :1])
            return tuple(o.contiguous() for o in outs)

    check(M(), (rand((2, 3, 4, 5), torch.float32, 33), rand((2, 3, 4, 5), torch.float32, 34)))


def test_dynamic_shapes_resize_the_output() -> None:
    class M(torch.nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, ...]:
            return x + y, torch.where(x > y, x, y), torch.sigmoid(x) * y, x > 0

    n = torch.export.Dim("n", max=64)
    x, y = rand((9, 6), torch.float32, 35), rand((6,), torch.float32, 36)
    runs = [(rand((k, 6), torch.float32, 37 + k), rand((6,), torch.float32, 50 + k)) for k in (1, 17, 64, 9)]
    check(M(), (x, y), dynamic_shapes=({0: n}, None), run_inputs=runs)
