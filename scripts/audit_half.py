"""Audit: every portable kernel in pyexec's registry, in float16 and bfloat16.

For each kernel of `pyexec.kernels()` this exports one small real program
that uses it (torch.export, then executorch's to_edge / to_executorch, no
delegate), once with float16 and once with bfloat16 data, runs the file on
ExecuTorch's runtime and on pyexec, and prints one line per (kernel, dtype):

    ok        both run; every output bit-equal (NaNs equal)
    DIFF      both run; outputs differ (count, max ulps, max |diff|)
    REFUSED   ExecuTorch runs it, pyexec fails (its message)
    et-only-fails  pyexec runs it, ExecuTorch fails (nothing to match)
    both-fail both fail
    no-et     ExecuTorch's runtime has no kernel of that name (compared with
              torch eager only)
    skip      not a floating-point op (the reason is printed)

Usage (from the worktree root, with the shared venv active):

    PYEXEC_LIBRARY=$PWD/native/build/libpyexec.so PYTHONPATH=$PWD:$PWD/tests \\
        python scripts/audit_half.py [substring ...]

Programs go through the tests' export cache ($PYEXEC_TEST_EXPORT_CACHE).
"""

from __future__ import annotations

import hashlib
import inspect
import sys
import traceback
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from support.export import export_program  # noqa: E402

import pyexec  # noqa: E402

A = torch.ops.aten
HALVES = (torch.float16, torch.bfloat16)


class Op(torch.nn.Module):
    """One kernel's program: forward(*inputs) = fn(*inputs). `name` keys the
    export cache (every lambda here has the same qualified name)."""

    def __init__(self, name: str, fn: Callable[..., Any], state: dict[str, torch.Tensor] | None = None) -> None:
        super().__init__()
        # the cache key sees `name` (with the lambda's source line) but not
        # `_fn`, so that editing another case keeps this one's export
        try:
            src = inspect.getsource(fn)
        except (OSError, TypeError):
            src = repr(fn)
        code = getattr(fn, "__code__", None)
        if code is not None:  # the bytecode too: a lambda's source may span lines
            src += code.co_code.hex() + repr(code.co_consts) + repr(code.co_names)
        self.name = name + "|" + hashlib.sha256(src.encode()).hexdigest()[:16]
        self._fn = fn
        for k, v in (state or {}).items():
            self.register_buffer(k, v)

    def forward(self, *args: Any) -> Any:
        return self._fn(self, *args)


def r(shape: Sequence[int], dt: torch.dtype, seed: int = 0, lo: float = -2.0, hi: float = 2.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed + 17 * len(shape))
    return (torch.rand(tuple(shape), generator=g, dtype=torch.float64) * (hi - lo) + lo).to(dt)


def ints(shape: Sequence[int], hi: int, seed: int = 0, lo: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(lo, hi, tuple(shape), generator=g)


def mask(shape: Sequence[int], seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.rand(tuple(shape), generator=g) > 0.5


Inputs = Callable[[torch.dtype], tuple[Any, ...]]


class Case:
    def __init__(
        self,
        kernel: str,
        fn: Callable[..., Any],
        inputs: Inputs,
        *,
        preserve: Sequence[Any] = (),
        skip_dim_order: bool = False,
        state: Callable[[torch.dtype], dict[str, torch.Tensor]] | None = None,
        random: bool = False,
        tag: str = "",
        dynamic: Any = None,
    ) -> None:
        self.kernel, self.fn, self.inputs = kernel, fn, inputs
        self.preserve, self.skip_dim_order, self.state = list(preserve), skip_dim_order, state
        self.random, self.tag, self.dynamic = random, tag, dynamic


def allbits(dt: torch.dtype, seed: int = 0) -> torch.Tensor:
    """Every 16-bit pattern once (NaNs, infinities, subnormals, zeros):
    [256, 256], shuffled by `seed` (0: in order)."""
    bits = torch.arange(-32768, 32768, dtype=torch.int32).to(torch.int16)
    if seed:
        bits = bits[torch.randperm(65536, generator=torch.Generator().manual_seed(seed))]
    return bits.view(dt).reshape(256, 256).clone()


def every1() -> Inputs:
    return lambda dt: (allbits(dt),)


def every2() -> Inputs:
    return lambda dt: (allbits(dt), allbits(dt, 7))


def x1(shape: Sequence[int] = (3, 7), lo: float = -2.0, hi: float = 2.0) -> Inputs:
    return lambda dt: (r(shape, dt, 1, lo, hi),)


def x2(s1: Sequence[int] = (3, 7), s2: Sequence[int] = (3, 7), lo: float = -2.0, hi: float = 2.0) -> Inputs:
    return lambda dt: (r(s1, dt, 1, lo, hi), r(s2, dt, 2, lo, hi))


CASES: list[Case] = []


def case(kernel: str, fn: Callable[..., Any], inputs: Inputs, **kw: Any) -> None:
    CASES.append(Case(kernel, fn, inputs, **kw))


# ---- unary elementwise ----------------------------------------------------
UNARY: dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], float, float]] = {
    "abs": (torch.abs, -3, 3),
    "acos": (torch.acos, -1, 1),
    "acosh": (torch.acosh, 1, 4),
    "asin": (torch.asin, -1, 1),
    "asinh": (torch.asinh, -3, 3),
    "atan": (torch.atan, -3, 3),
    "atanh": (torch.atanh, -0.99, 0.99),
    "ceil": (torch.ceil, -3, 3),
    "cos": (torch.cos, -3, 3),
    "cosh": (torch.cosh, -3, 3),
    "erf": (torch.erf, -3, 3),
    "exp": (torch.exp, -3, 3),
    "expm1": (torch.expm1, -3, 3),
    "floor": (torch.floor, -3, 3),
    "log": (torch.log, 0.01, 5),
    "log10": (torch.log10, 0.01, 5),
    "log1p": (torch.log1p, -0.9, 5),
    "log2": (torch.log2, 0.01, 5),
    "neg": (torch.neg, -3, 3),
    "reciprocal": (torch.reciprocal, 0.1, 3),
    "round": (torch.round, -4, 4),
    "rsqrt": (torch.rsqrt, 0.01, 5),
    "sigmoid": (torch.sigmoid, -6, 6),
    "sign": (torch.sign, -3, 3),
    "sin": (torch.sin, -3, 3),
    "sinh": (torch.sinh, -3, 3),
    "sqrt": (torch.sqrt, 0, 5),
    "tan": (torch.tan, -1.4, 1.4),
    "tanh": (torch.tanh, -3, 3),
    "trunc": (torch.trunc, -3, 3),
    "isinf": (torch.isinf, -3, 3),
    "isnan": (torch.isnan, -3, 3),
    "logical_not": (torch.logical_not, -1, 1),
}
for _n, (_f, _lo, _hi) in UNARY.items():
    case(f"aten::{_n}.out", lambda m, x, f=_f: f(x), every1())

case("aten::relu.out", lambda m, x: F.relu(x), every1())
case("aten::gelu.out", lambda m, x: (F.gelu(x), F.gelu(x, approximate="tanh")), every1())
case("aten::elu.out", lambda m, x: F.elu(x, 0.7), every1(), preserve=[A.elu.default])
case("aten::leaky_relu.out", lambda m, x: F.leaky_relu(x, 0.1), every1())
case("aten::hardtanh.out", lambda m, x: F.hardtanh(x, -0.5, 1.2), every1())
case("aten::hardsigmoid.out", lambda m, x: F.hardsigmoid(x), every1(), preserve=[A.hardsigmoid.default])
case("aten::hardswish.out", lambda m, x: F.hardswish(x), every1(), preserve=[A.hardswish.default])
case("aten::silu.out", lambda m, x: F.silu(x), every1(), preserve=[A.silu.default])
case("aten::glu.out", lambda m, x: F.glu(x, -1), every1(), preserve=[A.glu.default])
case("aten::logit.out", lambda m, x: (torch.logit(x, 0.05), torch.logit(x)), every1(), preserve=[A.logit.default])
case("aten::clamp.out", lambda m, x: torch.clamp(x, -0.5, 0.75), every1())
case(
    "aten::clamp.Tensor_out",
    lambda m, x, lo, hi: torch.clamp(x, lo, hi),
    lambda dt: (r((3, 7), dt, 1), r((3, 1), dt, 2, -1, 0), r((1, 7), dt, 3, 0, 1)),
)

# ---- binary elementwise ---------------------------------------------------
case("aten::add.out", lambda m, x, y: (x + y, torch.add(x, y, alpha=1.5)), x2((3, 7), (1, 7)))
case("aten::add.out", lambda m, x, y: (x + y, torch.add(x, y, alpha=0.7)), every2(), tag="all")
case("aten::sub.out", lambda m, x, y: (x - y, torch.sub(x, y, alpha=0.7)), every2(), tag="all")
case("aten::mul.out", lambda m, x, y: x * y, every2(), tag="all")
case("aten::add.Scalar_out", lambda m, x: A.add.Scalar(x, 1.3, 0.7), every1())
case("aten::sub.out", lambda m, x, y: (x - y, torch.sub(x, y, alpha=0.5)), x2((3, 7), (3, 1)))
case("aten::sub.Scalar_out", lambda m, x: A.sub.Scalar(x, 1.3, 2), every1())
case("aten::rsub.Scalar_out", lambda m, x: A.rsub.Scalar(x, 1.3, 0.7), every1(), preserve=[A.rsub.Scalar])
case("aten::mul.out", lambda m, x, y: x * y, x2((3, 7), (7,)))
case("aten::mul.Scalar_out", lambda m, x: A.mul.Scalar(x, 1.7), every1())
case("aten::div.out", lambda m, x, y: x / y, every2())
case(
    "aten::div.out_mode",
    lambda m, x, y: (torch.div(x, y, rounding_mode="floor"), torch.div(x, y, rounding_mode="trunc")),
    every2(),
)
case("aten::div.Scalar_out", lambda m, x: A.div.Scalar(x, 0.7), every1())
case(
    "aten::div.Scalar_mode_out",
    lambda m, x: (A.div.Scalar_mode(x, 0.7, rounding_mode="floor"), A.div.Scalar_mode(x, 0.7, rounding_mode="trunc")),
    every1(),
)
case("aten::floor_divide.out", lambda m, x, y: torch.floor_divide(x, y), every2(), preserve=[A.floor_divide.default])
case("aten::fmod.Tensor_out", lambda m, x, y: torch.fmod(x, y), every2())
case("aten::fmod.Scalar_out", lambda m, x: torch.fmod(x, 0.7), every1())
case("aten::remainder.Tensor_out", lambda m, x, y: torch.remainder(x, y), every2())
case("aten::remainder.Scalar_out", lambda m, x: torch.remainder(x, 0.7), every1())
case("aten::pow.Tensor_Tensor_out", lambda m, x, y: torch.pow(x, y), every2())
case(
    "aten::pow.Tensor_Scalar_out",
    lambda m, x: (torch.pow(x, 2.5), torch.pow(x, 2), torch.pow(x, 0.5), torch.pow(x, -1)),
    every1(),
)
case("aten::pow.Scalar_out", lambda m, x: torch.pow(1.7, x), every1())
case("aten::atan2.out", lambda m, x, y: torch.atan2(x, y), every2())
case("aten::maximum.out", lambda m, x, y: torch.maximum(x, y), every2())
case("aten::minimum.out", lambda m, x, y: torch.minimum(x, y), every2())
for _n in ("eq", "ne", "lt", "le", "gt", "ge"):
    case(
        f"aten::{_n}.Tensor_out",
        lambda m, x, y, n=_n: getattr(torch, n)(x, y),
        lambda dt: (r((3, 7), dt, 1).round(), r((3, 7), dt, 2).round()),
    )
    case(
        f"aten::{_n}.Scalar_out",
        lambda m, x, n=_n: getattr(torch, n)(x, 0.5),
        lambda dt: ((r((3, 7), dt, 1) * 2).round() / 2,),
    )
for _n in ("logical_and", "logical_or", "logical_xor"):
    case(
        f"aten::{_n}.out",
        lambda m, x, y, n=_n: getattr(torch, n)(x, y),
        lambda dt: (r((3, 7), dt, 1).round(), r((3, 7), dt, 2).round()),
    )
case(
    "aten::where.self_out",
    lambda m, c, x, y: torch.where(c, x, y),
    lambda dt: (mask((3, 7)), r((3, 7), dt, 1), r((1, 7), dt, 2)),
)
case(
    "aten::masked_fill.Scalar_out",
    lambda m, x, c: x.masked_fill(c, -1.5),
    lambda dt: (r((3, 7), dt, 1), mask((3, 7))),
    preserve=[A.masked_fill.Scalar],
)

# ---- reductions -----------------------------------------------------------
case(
    "aten::sum.IntList_out",
    lambda m, x: (x.sum(1), x.sum((0, 2), keepdim=True), x.sum(1, dtype=torch.float32)),
    x1((3, 40, 5)),
)
case("aten::sum.out", lambda m, x: A.sum.default(x), x1((3, 40)), preserve=[A.sum.default])
case("aten::mean.out", lambda m, x: (x.mean(1), x.mean((0, 2), keepdim=True)), x1((3, 40, 5)))
case(
    "aten::mean.dtype_out",
    lambda m, x: (A.mean.default(x), A.mean.default(x, dtype=torch.float32)),
    x1((3, 40, 5)),
    preserve=[A.mean.default],
)
case("aten::prod.out", lambda m, x: torch.prod(x), x1((2, 5), 0.5, 1.5))
case("aten::prod.int_out", lambda m, x: torch.prod(x, 1), x1((3, 9), 0.5, 1.5))
case("aten::amax.out", lambda m, x: torch.amax(x, 1), x1((3, 9, 2)))
case("aten::amin.out", lambda m, x: torch.amin(x, (0, 2)), x1((3, 9, 2)))
case("aten::max.dim_max", lambda m, x: tuple(torch.max(x, 1)), x1((3, 9)))
case("aten::min.dim_min", lambda m, x: tuple(torch.min(x, 1)), x1((3, 9)))
case("aten::max.unary_out", lambda m, x: torch.max(x), x1((3, 9)))
case("aten::min.unary_out", lambda m, x: torch.min(x), x1((3, 9)))
case("aten::argmax.out", lambda m, x: torch.argmax(x, 1), x1((3, 9)))
case("aten::argmin.out", lambda m, x: torch.argmin(x, 1), x1((3, 9)))
case("aten::any.out", lambda m, x: torch.any(x, 1), lambda dt: (r((3, 9), dt, 1).round(),))
case("aten::any.dims_out", lambda m, x: torch.any(x, (0, 1)), lambda dt: (r((3, 9, 2), dt, 1).round(),))
case("aten::any.all_out", lambda m, x: torch.any(x), lambda dt: (r((3, 9), dt, 1).round(),))
case("aten::all.out", lambda m, x: torch.all(x, 1), lambda dt: (r((3, 9), dt, 1).round(),), preserve=[A.all.dim])
case(
    "aten::all.dims_out",
    lambda m, x: torch.all(x, (0, 1)),
    lambda dt: (r((3, 9, 2), dt, 1).round(),),
    preserve=[A.all.dims],
)
case("aten::all.all_out", lambda m, x: torch.all(x), lambda dt: (r((3, 9), dt, 1).round(),), preserve=[A.all.default])
case(
    "aten::var.correction_out",
    lambda m, x: (torch.var(x, 1), torch.var(x, (0, 2), correction=0, keepdim=True)),
    x1((3, 40, 5)),
)
case("aten::var.out", lambda m, x: A.var.dim(x, [1], True, False), x1((3, 40)), preserve=[A.var.dim])
case("aten::var_mean.correction_out", lambda m, x: torch.var_mean(x, 1), x1((3, 40)), preserve=[A.var_mean.correction])
case("aten::std.correction_out", lambda m, x: torch.std(x, 1), x1((3, 40)), preserve=[A.std.correction])
case("aten::std.out", lambda m, x: A.std.dim(x, [1], True, False), x1((3, 40)), preserve=[A.std.dim])
case("aten::std_mean.correction_out", lambda m, x: torch.std_mean(x, 1), x1((3, 40)), preserve=[A.std_mean.correction])
case("aten::cumsum.out", lambda m, x: (torch.cumsum(x, 1), torch.cumsum(x, 0, dtype=torch.float32)), x1((3, 40)))
case("aten::cumprod.out", lambda m, x: torch.cumprod(x, 1), x1((3, 12), 0.5, 1.5))
case("aten::sort.values", lambda m, x: tuple(torch.sort(x, 1)), x1((3, 12)))
case("aten::sort.values_stable", lambda m, x: tuple(torch.sort(x, dim=1, stable=True, descending=True)), x1((3, 12)))
case("aten::topk.values", lambda m, x: tuple(torch.topk(x, 4, 1)), x1((3, 12)))

# ---- matrix products, convolution -----------------------------------------
case("aten::mm.out", lambda m, a, b: a @ b, x2((5, 37), (37, 6)))
case("aten::bmm.out", lambda m, a, b: torch.bmm(a, b), x2((2, 5, 37), (2, 37, 6)))
case(
    "aten::addmm.out",
    lambda m, c, a, b: (torch.addmm(c, a, b), torch.addmm(c, a, b, beta=0.5, alpha=2)),
    lambda dt: (r((6,), dt, 0), r((5, 37), dt, 1), r((37, 6), dt, 2)),
)
case(
    "aten::linear.out",
    lambda m, x, w, b: F.linear(x, w, b),
    lambda dt: (r((2, 5, 37), dt, 1), r((6, 37), dt, 2), r((6,), dt, 3)),
    preserve=[A.linear.default],
)
case(
    "aten::convolution.out",
    lambda m, x, w, b: (F.conv2d(x, w, b, padding=1), F.conv2d(x, w, None, stride=2)),
    lambda dt: (r((1, 3, 9, 8), dt, 1), r((4, 3, 3, 3), dt, 2), r((4,), dt, 3)),
    tag="2d",
)
case(
    "aten::convolution.out",
    lambda m, x, w: F.conv2d(x, w, None, groups=4, padding=1),
    lambda dt: (r((2, 4, 7, 6), dt, 1), r((4, 1, 3, 3), dt, 2)),
    tag="depthwise",
)
case(
    "aten::convolution.out",
    lambda m, x, w, b: F.conv1d(x, w, b, padding=2, dilation=2),
    lambda dt: (r((2, 3, 20), dt, 1), r((5, 3, 3), dt, 2), r((5,), dt, 3)),
    tag="1d",
)
case(
    "aten::convolution.out",
    lambda m, x, w, b: F.conv_transpose2d(x, w, b, stride=2),
    lambda dt: (r((1, 3, 5, 4), dt, 1), r((3, 2, 3, 3), dt, 2), r((2,), dt, 3)),
    tag="transposed",
)
case(
    "aten::convolution.out",
    lambda m, x, w, b: F.conv3d(x, w, b),
    lambda dt: (r((1, 2, 4, 5, 5), dt, 1), r((3, 2, 2, 3, 3), dt, 2), r((3,), dt, 3)),
    tag="3d",
)
case(
    "aten::_cdist_forward.out",
    lambda m, a, b: tuple(torch.cdist(a, b, p=p) for p in (2.0, 0.0, 1.0, float("inf"), 3.5, 0.7)),
    lambda dt: (r((2, 5, 8), dt, 1).round(decimals=1), r((2, 4, 8), dt, 2).round(decimals=1)),
)
case(
    "aten::_pdist_forward.out",
    lambda m, a: tuple(F.pdist(a, p=p) for p in (2.0, 0.0, 1.0, float("inf"), 3.5, 0.7)),
    lambda dt: (r((5, 8), dt, 1).round(decimals=1),),
)

# ---- pooling, sampling ----------------------------------------------------
case(
    "aten::avg_pool2d.out",
    lambda m, x: (F.avg_pool2d(x, 3, 2, 1), F.avg_pool2d(x, 2, count_include_pad=False, ceil_mode=True)),
    x1((1, 3, 9, 8)),
)
case("aten::avg_pool3d.out", lambda m, x: F.avg_pool3d(x, 2), x1((1, 2, 4, 6, 6)), preserve=[A.avg_pool3d.default])
case(
    "aten::max_pool2d_with_indices.out",
    lambda m, x: (F.max_pool2d(x, 3, 2, 1), F.max_pool2d(x, 2, return_indices=True)),
    x1((1, 3, 9, 8)),
)
case(
    "aten::max_pool3d_with_indices.out",
    lambda m, x: F.max_pool3d(x, 2, return_indices=True),
    x1((1, 2, 4, 6, 6)),
    preserve=[A.max_pool3d_with_indices.default],
)
case("aten::_adaptive_avg_pool2d.out", lambda m, x: F.adaptive_avg_pool2d(x, (3, 2)), x1((1, 3, 9, 8)))
case(
    "aten::_adaptive_avg_pool3d.out",
    lambda m, x: F.adaptive_avg_pool3d(x, (2, 3, 2)),
    x1((1, 2, 4, 6, 6)),
    preserve=[A._adaptive_avg_pool3d.default],
)
case(
    "aten::upsample_bilinear2d.vec_out",
    lambda m, x: (
        F.interpolate(x, scale_factor=2, mode="bilinear"),
        F.interpolate(x, size=(5, 7), mode="bilinear", align_corners=True),
    ),
    x1((1, 2, 4, 5)),
)
case("aten::upsample_nearest2d.vec_out", lambda m, x: F.interpolate(x, size=(7, 9), mode="nearest"), x1((1, 2, 4, 5)))
case(
    "aten::_upsample_bilinear2d_aa.out",
    lambda m, x: (
        F.interpolate(x, size=(3, 4), mode="bilinear", antialias=True),
        F.interpolate(x, size=(11, 5), mode="bilinear", antialias=True, align_corners=True),
        F.interpolate(x, scale_factor=(0.4, 1.7), mode="bilinear", antialias=True),
    ),
    x1((1, 2, 8, 9)),
)
case(
    "aten::grid_sampler_2d.out",
    lambda m, x, g: (
        F.grid_sample(x, g, align_corners=False),
        F.grid_sample(x, g, mode="nearest", padding_mode="border", align_corners=True),
    ),
    lambda dt: (r((1, 2, 5, 6), dt, 1), r((1, 3, 4, 2), dt, 2, -1.1, 1.1)),
)
case(
    "aten::grid_sampler_2d.out",
    lambda m, x, g: (
        F.grid_sample(x, g, mode="bicubic", align_corners=False),
        F.grid_sample(x, g, mode="bilinear", padding_mode="reflection", align_corners=True),
        F.grid_sample(x, g, mode="bicubic", padding_mode="border", align_corners=True),
    ),
    lambda dt: (r((1, 2, 5, 6), dt, 1), r((1, 3, 4, 2), dt, 2, -1.3, 1.3)),
    tag="bicubic-reflect",
)
case(
    "aten::pixel_shuffle.out", lambda m, x: F.pixel_shuffle(x, 2), x1((1, 8, 3, 2)), preserve=[A.pixel_shuffle.default]
)
case(
    "aten::pixel_unshuffle.out",
    lambda m, x: F.pixel_unshuffle(x, 2),
    x1((1, 2, 4, 6)),
    preserve=[A.pixel_unshuffle.default],
)

# ---- normalisation, softmax -----------------------------------------------
case(
    "aten::native_layer_norm.out",
    lambda m, x, w, b: (F.layer_norm(x, (40,), w, b), F.layer_norm(x, (40,))),
    lambda dt: (r((3, 40), dt, 1), r((40,), dt, 2), r((40,), dt, 3)),
)
case(
    "aten::native_group_norm.out",
    lambda m, x, w, b: F.group_norm(x, 2, w, b),
    lambda dt: (r((2, 4, 5, 3), dt, 1), r((4,), dt, 2), r((4,), dt, 3)),
)
case(
    "aten::_native_batch_norm_legit_no_training.out",
    lambda m, x, w, b, rm, rv: F.batch_norm(x, rm, rv, w, b, False),
    lambda dt: (r((2, 4, 5, 3), dt, 1), r((4,), dt, 2), r((4,), dt, 3), r((4,), dt, 4), r((4,), dt, 5, 0.5, 2)),
)
case(
    "aten::_native_batch_norm_legit.no_stats_out",
    lambda m, x, w, b: F.batch_norm(x, None, None, w, b, True),
    lambda dt: (r((2, 4, 5, 3), dt, 1), r((4,), dt, 2), r((4,), dt, 3)),
)
case("aten::_softmax.out", lambda m, x: (torch.softmax(x, -1), torch.softmax(x, 0)), x1((3, 40), -4, 4))
case("aten::_log_softmax.out", lambda m, x: (torch.log_softmax(x, -1), torch.log_softmax(x, 0)), x1((3, 40), -4, 4))

# ---- random ---------------------------------------------------------------
case("aten::rand.out", lambda m, x: torch.rand(3, 5, dtype=x.dtype) + x, x1((3, 5)), random=True)
case("aten::randn.out", lambda m, x: torch.randn(3, 5, dtype=x.dtype) + x, x1((3, 5)), random=True)
case("aten::native_dropout.out", lambda m, x: A.native_dropout(x, 0.5, True), x1((3, 50)), random=True)

# ---- shape ----------------------------------------------------------------
case("aten::alias_copy.out", lambda m, x: A.alias_copy(x), x1(), preserve=[A.alias_copy.default])
case(
    "aten::as_strided_copy.out",
    lambda m, x: A.as_strided_copy(x, (3, 2), (2, 3), 1),
    x1((4, 5)),
    preserve=[A.as_strided_copy.default],
)
case("aten::cat.out", lambda m, x, y: torch.cat([x, y, x], 1), x2((3, 4), (3, 2)))
case("aten::stack.out", lambda m, x, y: torch.stack([x, y], 1), x2(), preserve=[A.stack.default])
case("aten::clone.out", lambda m, x: A.clone(x), x1(), skip_dim_order=True)
case("dim_order_ops::_clone_dim_order.out", lambda m, x: x.clone(memory_format=torch.channels_last), x1((1, 3, 2, 4)))
case("aten::constant_pad_nd.out", lambda m, x: F.pad(x, (1, 2, 0, 1), value=0.5), x1())
case("aten::copy.out", lambda m, x, y: A.copy(x, y), x2((3, 7), (7,)), preserve=[A.copy.default])
case("aten::copy_", lambda m, x: m.buf.copy_(x) * 1, x1(), state=lambda dt: {"buf": torch.zeros(3, 7, dtype=dt)})
case("aten::detach_copy.out", lambda m, x: A.detach_copy(x), x1(), preserve=[A.detach_copy.default])
case("aten::diagonal_copy.out", lambda m, x: torch.diagonal(x, 1), x1((5, 6)))
case("aten::expand_copy.out", lambda m, x: x.expand(3, 4, 7), x1((4, 1)))
case("aten::flip.out", lambda m, x: torch.flip(x, (0, 1)), x1())
case("aten::narrow_copy.out", lambda m, x: A.narrow_copy(x, 1, 2, 3), x1(), preserve=[A.narrow_copy.default])
case("aten::permute_copy.out", lambda m, x: x.permute(2, 0, 1) + 0, x1((2, 3, 4)))
case(
    "aten::reflection_pad1d.out",
    lambda m, x: F.pad(x, (2, 1), mode="reflect"),
    x1((2, 3, 6)),
    preserve=[A.reflection_pad1d.default],
)
case(
    "aten::reflection_pad2d.out",
    lambda m, x: F.pad(x, (2, 1, 1, 2), mode="reflect"),
    x1((1, 2, 5, 6)),
    preserve=[A.reflection_pad2d.default],
)
case(
    "aten::reflection_pad3d.out",
    lambda m, x: F.pad(x, (1, 1, 1, 0, 0, 1), mode="reflect"),
    x1((1, 2, 3, 4, 5)),
    preserve=[A.reflection_pad3d.default],
)
case(
    "aten::replication_pad1d.out",
    lambda m, x: F.pad(x, (2, 1), mode="replicate"),
    x1((2, 3, 6)),
    preserve=[A.replication_pad1d.default],
)
case(
    "aten::replication_pad2d.out",
    lambda m, x: F.pad(x, (2, 1, 1, 2), mode="replicate"),
    x1((1, 2, 5, 6)),
    preserve=[A.replication_pad2d.default],
)
case(
    "aten::replication_pad3d.out",
    lambda m, x: F.pad(x, (1, 1, 1, 0, 0, 1), mode="replicate"),
    x1((1, 2, 3, 4, 5)),
    preserve=[A.replication_pad3d.default],
)
case("aten::repeat.out", lambda m, x: x.repeat(2, 1, 3), x1((3, 4)))
case("aten::roll.out", lambda m, x: torch.roll(x, (1, -2), (0, 1)), x1(), preserve=[A.roll.default])
case("aten::select_copy.int_out", lambda m, x: x[:, 2] + 0, x1())
case(
    "aten::select_scatter.out",
    lambda m, x, y: torch.select_scatter(x, y, 1, 2),
    x2((3, 7), (3,)),
    preserve=[A.select_scatter.default],
)
case("aten::slice_copy.Tensor_out", lambda m, x: x[:, 1:6:2] + 0, x1())
case(
    "aten::slice_scatter.out",
    lambda m, x, y: torch.slice_scatter(x, y, 1, 1, 7, 2),
    x2((3, 7), (3, 3)),
    preserve=[A.slice_scatter.default],
)
case("aten::split_copy.Tensor_out", lambda m, x: A.split_copy.Tensor(x, 3, 1), x1(), preserve=[A.split_copy.Tensor])
case("aten::split_with_sizes_copy.out", lambda m, x: torch.split(x, [2, 5], 1), x1())
case("aten::squeeze_copy.dim_out", lambda m, x: A.squeeze_copy.dim(x, 1), x1((3, 1, 7)), preserve=[A.squeeze_copy.dim])
case("aten::squeeze_copy.dims_out", lambda m, x: x.squeeze((1, 3)) + 0, x1((3, 1, 7, 1)))
case(
    "aten::squeeze_copy.out",
    lambda m, x: A.squeeze_copy.default(x),
    x1((3, 1, 7, 1)),
    preserve=[A.squeeze_copy.default],
)
case("aten::t_copy.out", lambda m, x: A.t_copy(x), x1(), preserve=[A.t_copy.default])
case("aten::transpose_copy.int_out", lambda m, x: A.transpose_copy.int(x, 0, 1), x1(), preserve=[A.transpose_copy.int])
case("aten::tril.out", lambda m, x: torch.tril(x, 1), x1((5, 6)), preserve=[A.tril.default])
case("aten::triu.out", lambda m, x: torch.triu(x, -1), x1((5, 6)), preserve=[A.triu.default])
case("aten::unbind_copy.int_out", lambda m, x: A.unbind_copy.int(x, 1), x1((3, 4)), preserve=[A.unbind_copy.int])
case("aten::unfold_copy.out", lambda m, x: x.unfold(1, 3, 2) + 0, x1())
case("aten::unsqueeze_copy.out", lambda m, x: x.unsqueeze(1) + 0, x1())
case(
    "aten::view_copy.out",
    lambda m, x: x.reshape(-1, 2) * 1,
    x1((4, 6)),
    dynamic=(({0: torch.export.Dim("n", min=2, max=8)},),),
    tag="dynamic",
)
case(
    "aten::_to_copy.out",
    lambda m, x: (x.float(), x.to(torch.float16), x.to(torch.bfloat16), x.to(torch.int32), x.double()),
    x1((3, 7), -300, 300),
    skip_dim_order=True,
)
case(
    "dim_order_ops::_to_dim_order_copy.out",
    lambda m, x: (
        x.float(),
        x.to(torch.float16),
        x.to(torch.bfloat16),
        x.to(torch.int32),
        x.double(),
        x.float().to(x.dtype) * 1,
    ),
    x1((3, 7), -300, 300),
)
case(
    "dim_order_ops::_to_dim_order_copy.out",
    lambda m, x: (x.to(torch.float16), x.to(torch.bfloat16)),
    lambda dt: (r((3, 7), torch.float32, 1, -70000, 70000) * torch.tensor([1e-8, 1e-5, 1.0, 3.0, 100.0, 1e3, 1.0]),),
    tag="from-f32",
)

# ---- factories ------------------------------------------------------------
case("aten::empty.out", lambda m, x: torch.empty(3, 4, dtype=x.dtype).fill_(1.5) + x, x1((3, 4)), skip_dim_order=True)
case("dim_order_ops::_empty_dim_order.out", lambda m, x: torch.empty(3, 4, dtype=x.dtype).fill_(1.5) + x, x1((3, 4)))
case("aten::full.out", lambda m, x: torch.full((3, 4), 1.3, dtype=x.dtype) + x, x1((3, 4)))
case("aten::full_like.out", lambda m, x: torch.full_like(x, 0.1), x1((3, 4)), preserve=[A.full_like.default])
case("aten::ones.out", lambda m, x: torch.ones(3, 4, dtype=x.dtype) + x, x1((3, 4)), preserve=[A.ones.default])
case("aten::zeros.out", lambda m, x: torch.zeros(3, 4, dtype=x.dtype) + x, x1((3, 4)), preserve=[A.zeros.default])
case("aten::arange.start_out", lambda m, x: torch.arange(0.5, 3.1, 0.3, dtype=x.dtype) + x, x1((9,)))
case(
    "aten::scalar_tensor.out",
    lambda m, x: A.scalar_tensor(0.3, dtype=x.dtype) + x,
    x1((3,)),
    preserve=[A.scalar_tensor.default],
)
case("aten::fill.Scalar_out", lambda m, x: A.fill.Scalar(x, 0.3), x1(), preserve=[A.fill.Scalar])
case(
    "aten::fill.Tensor_out",
    lambda m, x, v: A.fill.Tensor(x, v),
    lambda dt: (r((3, 4), dt, 1), r((), dt, 2)),
    preserve=[A.fill.Tensor],
)

# ---- indexing -------------------------------------------------------------
case("aten::embedding.out", lambda m, w, i: F.embedding(i, w), lambda dt: (r((10, 6), dt, 1), ints((2, 5), 10, 3)))
case("aten::gather.out", lambda m, x, i: torch.gather(x, 1, i), lambda dt: (r((3, 7), dt, 1), ints((3, 4), 7, 2)))
case(
    "aten::index.Tensor_out",
    lambda m, x, i, j: (x[i], x[:, j], x[i[:2], j[:2]]),
    lambda dt: (r((5, 6), dt, 1), ints((3,), 5, 2), ints((4,), 6, 3)),
)
case(
    "aten::index_select.out",
    lambda m, x, i: torch.index_select(x, 1, i),
    lambda dt: (r((3, 7), dt, 1), ints((4,), 7, 2)),
)
case(
    "aten::index_put.out",
    lambda m, x, i, v: torch.index_put(x, (i,), v, accumulate=False),
    lambda dt: (r((5, 3), dt, 1), torch.tensor([0, 3]), r((2, 3), dt, 2)),
)
case(
    "aten::index_put.out",
    lambda m, x, i, v: torch.index_put(x, (i,), v, accumulate=True),
    lambda dt: (r((5, 3), dt, 1), torch.tensor([0, 3, 0]), r((3, 3), dt, 2)),
    tag="accumulate",
)
case(
    "aten::index_copy.out",
    lambda m, x, i, v: torch.index_copy(x, 0, i, v),
    lambda dt: (r((5, 3), dt, 1), torch.tensor([4, 1]), r((2, 3), dt, 2)),
    preserve=[A.index_copy.default],
)
case(
    "aten::masked_scatter.out",
    lambda m, x, c, s: x.masked_scatter(c, s),
    lambda dt: (r((3, 7), dt, 1), mask((3, 7)), r((21,), dt, 2)),
)
case("aten::masked_select.out", lambda m, x, c: torch.masked_select(x, c), lambda dt: (r((3, 7), dt, 1), mask((3, 7))))
case("aten::nonzero.out", lambda m, x: torch.nonzero(x), lambda dt: (r((3, 7), dt, 1).round(),))
case(
    "aten::scatter.src_out",
    lambda m, x, i, s: torch.scatter(x, 1, i, s),
    lambda dt: (r((3, 7), dt, 1), torch.tensor([[0, 2], [1, 6], [3, 4]]), r((3, 2), dt, 2)),
)
case(
    "aten::scatter.value_out",
    lambda m, x, i: torch.scatter(x, 1, i, 0.7),
    lambda dt: (r((3, 7), dt, 1), torch.tensor([[0, 2], [1, 6], [3, 4]])),
)
case(
    "aten::scatter_add.out",
    lambda m, x, i, s: torch.scatter_add(x, 1, i, s),
    lambda dt: (r((3, 7), dt, 1), ints((3, 9), 7, 5), r((3, 9), dt, 2)),
)


# ---- llama:: --------------------------------------------------------------
def _sdpa(m: Op, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> Any:
    torch.ops.llama.update_cache(k, m.kc, 0)
    torch.ops.llama.update_cache(v, m.vc, 0)
    return torch.ops.llama.custom_sdpa(q, m.kc, m.vc, 0, None, 0.0, True), m.kc.clone()


def _kv(dt: torch.dtype) -> dict[str, torch.Tensor]:
    return {"kc": torch.zeros(1, 8, 2, 16, dtype=dt), "vc": torch.zeros(1, 8, 2, 16, dtype=dt)}


LLAMA = [
    Case(
        "llama::custom_sdpa.out",
        _sdpa,
        lambda dt: (r((1, 5, 4, 16), dt, 1), r((1, 5, 2, 16), dt, 2), r((1, 5, 2, 16), dt, 3)),
        state=_kv,
    ),
    Case(
        "llama::update_cache.out",
        _sdpa,
        lambda dt: (r((1, 5, 4, 16), dt, 1), r((1, 5, 2, 16), dt, 2), r((1, 5, 2, 16), dt, 3)),
        state=_kv,
    ),
    Case(
        "llama::sdpa_with_kv_cache.out",
        lambda m, q, k, v: torch.ops.llama.sdpa_with_kv_cache(q, k, v, m.kc, m.vc, 0, 5, None, 0.0, True),
        lambda dt: (r((1, 5, 4, 16), dt, 1), r((1, 5, 2, 16), dt, 2), r((1, 5, 2, 16), dt, 3)),
        state=_kv,
    ),
    Case(
        "llama::update_cache_with_indices.out",
        lambda m, k, i: (torch.ops.llama.update_cache_with_indices(k, m.kc, 0, i), m.kc.clone())[1],
        lambda dt: (r((1, 2, 2, 16), dt, 1), torch.tensor([[3, 6]])),
        state=_kv,
    ),
    Case("llama::fast_hadamard_transform.out", lambda m, x: torch.ops.llama.fast_hadamard_transform(x), x1((3, 64))),
    Case(
        "llama::fast_hadamard_transform.out",
        lambda m, x: torch.ops.llama.fast_hadamard_transform(x),
        x1((2, 28 * 8)),
        tag="28N",
    ),
    Case(
        "llama::fast_hadamard_transform.out",
        lambda m, x: torch.ops.llama.fast_hadamard_transform(x),
        x1((2, 128)),
        tag="odd-log2",
    ),
]
CASES.extend(LLAMA)


# ---- quantized_decomposed:: with float16 / bfloat16 on the float side ---------
def _qd() -> Any:
    import executorch.exir.passes._quant_patterns_and_replacements  # noqa: F401
    import executorch.kernels.quantized  # noqa: F401
    from torch.ao.quantization.fx import _decomposed  # noqa: F401

    lib = "quantized_decomposed::"
    try:  # shape functions ExecuTorch's AOT library leaves out
        torch.library.register_fake(lib + "mixed_linear")(
            lambda x, w, s, z=None, dtype=None: x.new_empty((x.shape[0], w.shape[0]), dtype=dtype or x.dtype)
        )
        torch.library.register_fake(lib + "mixed_mm")(lambda x, w, s, z=None: x.new_empty((x.shape[0], w.shape[1])))
    except RuntimeError:
        pass
    return torch.ops.quantized_decomposed


QD = _qd()
I8 = torch.int8


def _qstate(dt: torch.dtype) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(9)
    return {
        "w8": torch.randint(-128, 128, (10, 12), generator=g, dtype=I8),
        "w4": torch.randint(0, 256, (10, 6), generator=g, dtype=torch.uint8),
        "w2": torch.randint(0, 256, (10, 3), generator=g, dtype=torch.uint8),
        "s": (torch.rand(10, 3, generator=g) + 0.1).to(dt),
        "z": torch.randn(10, 3, generator=g).to(dt),
        "cs": torch.rand(7, generator=g) / 20 + 0.01,
        "cz": torch.randint(-5, 5, (7,), generator=g),
        "wl": torch.randint(-128, 128, (6, 32), generator=g, dtype=I8),
        "sl": (torch.rand(6, 2, generator=g) / 50).to(dt),
        "wm": torch.randint(-128, 128, (32, 6), generator=g, dtype=I8),
        "sm": (torch.rand(32, generator=g) / 50).to(dt),
    }


QUANT = [
    Case(
        "quantized_decomposed::quantize_per_tensor.out",
        lambda m, x: QD.quantize_per_tensor(x, 0.05, 3, -128, 127, I8),
        x1((3, 7), -8, 8),
        state=_qstate,
    ),
    Case(
        "quantized_decomposed::dequantize_per_tensor.out",
        lambda m, x: QD.dequantize_per_tensor(
            QD.quantize_per_tensor(x, 0.05, 3, -128, 127, I8), 0.05, 3, -128, 127, I8, out_dtype=x.dtype
        ),
        x1((3, 7), -8, 8),
    ),
    Case(
        "quantized_decomposed::quantize_per_tensor.Tensor_out",
        lambda m, x: QD.quantize_per_tensor.tensor(
            x, torch.tensor([0.05], dtype=torch.float64), torch.tensor([2]), -128, 127, I8
        ),
        x1((3, 7), -8, 8),
    ),
    Case(
        "quantized_decomposed::dequantize_per_tensor.Tensor_out",
        lambda m, x: QD.dequantize_per_tensor.tensor(
            QD.quantize_per_tensor(x, 0.05, 3, -128, 127, I8),
            torch.tensor([0.05], dtype=torch.float64),
            torch.tensor([3]),
            -128,
            127,
            I8,
            out_dtype=x.dtype,
        ),
        x1((3, 7), -8, 8),
    ),
    Case(
        "quantized_decomposed::quantize_per_channel.out",
        lambda m, x: QD.quantize_per_channel(x, m.cs, m.cz, 1, -128, 127, I8),
        x1((3, 7), -1, 1),
        state=_qstate,
    ),
    Case(
        "quantized_decomposed::dequantize_per_channel.out",
        lambda m, x: QD.dequantize_per_channel(
            QD.quantize_per_channel(x, m.cs, m.cz, 1, -128, 127, I8), m.cs, m.cz, 1, -128, 127, I8, out_dtype=x.dtype
        ),
        x1((3, 7), -1, 1),
        state=_qstate,
    ),
    Case(
        "quantized_decomposed::choose_qparams.Tensor_out",
        lambda m, x: QD.choose_qparams.tensor(x, -128, 127, 1e-5, I8),
        x1((5, 6), -3, 2),
    ),
    Case(
        "quantized_decomposed::choose_qparams_per_token_asymmetric.out",
        lambda m, x: QD.choose_qparams_per_token_asymmetric(x, I8),
        x1((4, 6), -3, 2),
    ),
    Case(
        "quantized_decomposed::quantize_per_token.out",
        lambda m, x: QD.quantize_per_token(x, torch.full((4, 1), 0.03), torch.full((4, 1), 2), -128, 127, I8),
        x1((4, 6), -3, 2),
    ),
    Case(
        "quantized_decomposed::dequantize_per_token.out",
        lambda m, x: QD.dequantize_per_token(
            QD.quantize_per_token(x.float(), torch.full((4, 1), 0.03), torch.full((4, 1), 2), -128, 127, I8),
            torch.full((4, 1), 0.03),
            torch.full((4, 1), 2),
            -128,
            127,
            I8,
            x.dtype,
        ),
        x1((4, 6), -3, 2),
    ),
    Case(
        "quantized_decomposed::embedding_byte.out",
        lambda m, i: QD.embedding_byte(m.w8, m.s, m.z, -128, 127, i),
        lambda dt: (torch.tensor([[9, 0, 4], [4, 1, 2]]),),
        state=_qstate,
    ),
    Case(
        "quantized_decomposed::embedding_byte.dtype_out",
        lambda m, i: QD.embedding_byte.dtype(m.w8, m.s, m.z, -128, 127, i, dtype=m.s.dtype),
        lambda dt: (torch.tensor([[9, 0, 4], [4, 1, 2]]),),
        state=_qstate,
    ),
    Case(
        "quantized_decomposed::embedding_4bit.out",
        lambda m, i: QD.embedding_4bit(m.w4, m.s, m.z, -8, 7, i),
        lambda dt: (torch.tensor([[9, 0, 4], [4, 1, 2]]),),
        state=_qstate,
    ),
    Case(
        "quantized_decomposed::embedding_4bit.dtype_out",
        lambda m, i: QD.embedding_4bit.dtype(m.w4, m.s, None, -8, 7, i, dtype=m.s.dtype),
        lambda dt: (torch.tensor([[9, 0, 4], [4, 1, 2]]),),
        state=_qstate,
    ),
    Case(
        "quantized_decomposed::embedding_2bit.out",
        lambda m, i: QD.embedding_2bit(m.w2, m.s, m.z, -2, 1, i),
        lambda dt: (torch.tensor([[9, 0, 4], [4, 1, 2]]),),
        state=_qstate,
    ),
    Case(
        "quantized_decomposed::embedding_2bit.dtype_out",
        lambda m, i: QD.embedding_2bit.dtype(m.w2, m.s, None, -2, 1, i, dtype=m.s.dtype),
        lambda dt: (torch.tensor([[9, 0, 4], [4, 1, 2]]),),
        state=_qstate,
    ),
    Case(
        "quantized_decomposed::mixed_linear.out",
        lambda m, x: QD.mixed_linear(x, m.wl, m.sl, None),
        x1((5, 32)),
        state=_qstate,
    ),
    Case(
        "quantized_decomposed::mixed_mm.out", lambda m, x: QD.mixed_mm(x, m.wm, m.sm, None), x1((5, 32)), state=_qstate
    ),
]
CASES.extend(QUANT)

# kernels that take no floating-point tensor, with the reason
SKIPPED = {
    "aten::bitwise_and.Scalar_out": "bitwise: integers and bool only",
    "aten::bitwise_and.Tensor_out": "bitwise: integers and bool only",
    "aten::bitwise_or.Scalar_out": "bitwise: integers and bool only",
    "aten::bitwise_or.Tensor_out": "bitwise: integers and bool only",
    "aten::bitwise_xor.Scalar_out": "bitwise: integers and bool only",
    "aten::bitwise_xor.Tensor_out": "bitwise: integers and bool only",
    "aten::bitwise_not.out": "bitwise: integers and bool only",
    "aten::bitwise_left_shift.Tensor_out": "shift: integers only",
    "aten::bitwise_left_shift.Tensor_Scalar_out": "shift: integers only",
    "aten::bitwise_right_shift.Tensor_out": "shift: integers only",
    "aten::bitwise_right_shift.Tensor_Scalar_out": "shift: integers only",
    "aten::repeat_interleave.Tensor_out": "takes and gives an integer repeats tensor (float repeat_interleave "
    "exports as index_select)",
    "aten::sym_size.int": "returns an int (symbolic size), no tensor data",
    "aten::sym_numel": "returns an int (symbolic size), no tensor data",
    "aten::_local_scalar_dense": "reads a scalar out of a tensor for symbolic shapes (int); a float item() does "
    "not export to a runnable program",
    "executorch_prim::et_copy_index.tensor": "emitted only for lists of tensors built in a loop; copies bytes",
    "executorch_prim::et_view.default": "a view (memory alias), dtype-agnostic",
    "aten::lift_fresh_copy.out": "to_edge turns lift_fresh_copy into a clone (_clone_dim_order), audited there",
    "aten::arange.out": "to_edge emits arange.start_out for every arange, audited there",
    "aten::index_put_": "to_edge functionalises it into index_put.out + copy_, audited there",
    "aten::_native_batch_norm_legit.out": "training-mode batch norm with running stats does not export "
    "(ExecuTorch has no out variant of _native_batch_norm_legit_functional)",
    "aten::view_copy.out": "the emitter replaces every static view_copy by a memory view (et_view); the "
    "dynamic-shape case is audited as view_copy [dynamic]",
    "quantized_decomposed::add.out": "quantized add: integer tensors in and out (its scales are doubles)",
}


def ops_in(pte: bytes) -> set[str]:
    from executorch.exir._serialize._program import deserialize_pte_binary

    p = deserialize_pte_binary(pte)
    p = getattr(p, "program", p)
    return {f"{op.name}.{op.overload}" if op.overload else op.name for op in p.execution_plan[0].operators}


def flat(x: Any) -> list[Any]:
    out: list[Any] = []
    if isinstance(x, (list, tuple)):
        for v in x:
            out.extend(flat(v))
    else:
        out.append(x)
    return out


def restride(t: Any) -> Any:
    """ExecuTorch's Python binding returns a dynamic-shape output resized
    below its bound with the bound's strides (nonzero's [n, 2] comes back
    with strides (1, n)): the data is row-major, so view it as such."""
    if isinstance(t, torch.Tensor) and t.dim() > 1 and not t.is_contiguous():
        return torch.as_strided(t, t.shape, torch.empty(t.shape).stride())
    return t


def ulps(a: torch.Tensor, b: torch.Tensor) -> int:
    """Largest distance in units of the last place between float16 /
    bfloat16 tensors (NaN == NaN)."""
    ia, ib = a.view(torch.int16).to(torch.int32), b.view(torch.int16).to(torch.int32)
    # map the sign-magnitude bits to a monotonic integer line
    ia = torch.where(ia < 0, -(ia & 0x7FFF), ia)
    ib = torch.where(ib < 0, -(ib & 0x7FFF), ib)
    both_nan = torch.isnan(a.float()) & torch.isnan(b.float())
    d = (ia - ib).abs()
    d[both_nan] = 0
    return int(d.max()) if d.numel() else 0


def compare(ours: list[Any], theirs: list[Any], random: bool, et: bool = False) -> str:
    if len(theirs) == 1 and isinstance(theirs[0], str):
        return theirs[0]
    if len(ours) != len(theirs):
        return f"DIFF {len(ours)} outputs vs {len(theirs)}"
    notes = []
    for k, (a, b) in enumerate(zip(ours, theirs)):
        if et and isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.is_contiguous() and a.dim() == 2:
            b = restride(b)
        if not isinstance(b, torch.Tensor):
            if a != b:
                notes.append(f"out{k}: {a!r} vs {b!r}")
            continue
        if a.dtype != b.dtype or a.shape != b.shape:
            notes.append(f"out{k}: {a.dtype}{list(a.shape)} vs {b.dtype}{list(b.shape)}")
            continue
        if random:
            continue
        if a.dtype.is_floating_point:
            an, bn = a.float(), b.float()
            same = (an == bn) | (torch.isnan(an) & torch.isnan(bn))
            # signed zeros count as a difference (a NaN's sign does not)
            same &= (torch.signbit(an) == torch.signbit(bn)) | torch.isnan(an)
        else:
            same = a == b
        bad = int((~same).sum())
        if bad:
            extra = ""
            if a.dtype in HALVES:
                extra = f" max {ulps(a, b)} ulp"
            if a.dtype.is_floating_point:
                d = (a.double() - b.double()).abs()
                d = d[~torch.isnan(d)]
                extra += f" max|d| {float(d.max()) if d.numel() else float('nan'):.3g}"
            notes.append(f"out{k}({a.dtype}): {bad}/{a.numel()} differ{extra}")
    return ("DIFF " + "; ".join(notes)) if notes else "ok"


def _et_worker_init() -> None:
    warnings.simplefilter("ignore")
    import executorch.kernels.quantized  # noqa: F401
    from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401


def _et_run(pte: bytes, inputs: tuple[Any, ...]) -> tuple[str, Any]:
    from executorch.runtime import Runtime

    try:
        out = flat(Runtime.get().load_program(pte).load_method("forward").execute([x.clone() for x in inputs]))
        return "ok", out
    except Exception as e:  # noqa: BLE001
        return "err", f"{type(e).__name__}: {str(e).splitlines()[0][:120]}"


_POOL: list[Any] = []


def run_et_isolated(pte: bytes, inputs: tuple[Any, ...]) -> tuple[list[Any], str | None]:
    """Runs the program on ExecuTorch's runtime in a worker process: some of
    its kernels abort the process on a dtype they do not handle."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor
    from concurrent.futures.process import BrokenProcessPool

    if not _POOL:
        ctx = multiprocessing.get_context("spawn")
        _POOL.append(ProcessPoolExecutor(1, mp_context=ctx, initializer=_et_worker_init))
    try:
        kind, val = _POOL[0].submit(_et_run, pte, inputs).result()
    except BrokenProcessPool:
        _POOL.pop().shutdown(wait=False)
        return [], "ExecuTorch's runtime aborted"
    return (val, None) if kind == "ok" else ([], val)


def run_case(c: Case, dt: torch.dtype, et_ops: set[str]) -> tuple[str, str]:
    state = c.state(dt) if c.state else None
    module = Op(f"{c.kernel}|{c.tag}", c.fn, state)
    inputs = c.inputs(dt)
    try:
        pte = export_program(
            module,
            inputs,
            strict_ir=False,
            preserve=c.preserve,
            skip_dim_order=c.skip_dim_order,
            dynamic_shapes=c.dynamic,
        )
    except Exception as e:  # noqa: BLE001
        return "export-fails", f"{type(e).__name__}: {str(e).splitlines()[0][:150]}"
    present = ops_in(pte)
    if c.kernel not in present:
        return "not-emitted", "program has " + ", ".join(sorted(present))
    try:
        with torch.no_grad():
            eager = flat(module(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]))
    except (NotImplementedError, RuntimeError) as e:  # torch has no CPU kernel for the dtype
        eager = [f"eager: {str(e).splitlines()[0][:60]}"]
    try:
        ours = flat(pyexec.load(pte).load_method("forward").execute([x.clone() for x in inputs]))
        ours_err = None
    except Exception as e:  # noqa: BLE001
        ours, ours_err = [], f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"
    missing = [op for op in present if op not in et_ops]
    if missing:
        if ours_err:
            return "REFUSED(no-et)", ours_err
        return "no-et", "vs eager: " + compare(ours, eager, c.random).replace("DIFF ", "")
    theirs, et_err = run_et_isolated(pte, inputs)
    if ours_err and et_err:
        return "both-fail", f"pyexec: {ours_err} | ET: {et_err}"
    if ours_err:
        return "REFUSED", ours_err
    if et_err:
        return "et-only-fails", et_err
    res = compare(ours, theirs, c.random, et=True)
    if res == "ok":
        return "ok", ""
    return "DIFF", res[5:] + " | vs eager: " + compare(ours, eager, c.random)


def main(argv: list[str]) -> int:
    warnings.simplefilter("ignore")
    from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401
    from executorch.extension.pybindings import portable_lib

    et_ops = set(portable_lib._get_operator_names())
    covered = {c.kernel for c in CASES}
    names = pyexec.kernels()
    lines = []
    for name in names:
        if name.startswith("executorch_prim::") and name not in SKIPPED:
            lines.append((name, "-", "skip", "scalar operator on ints/floats of the program, no tensor"))
            continue
        if name in SKIPPED:
            lines.append((name, "-", "skip", SKIPPED[name]))
            continue
        if name not in covered:
            lines.append((name, "-", "NO-CASE", ""))
    for c in CASES:
        label = c.kernel + (f" [{c.tag}]" if c.tag else "")
        if argv and not any(a in label for a in argv):
            continue
        for dt in HALVES:
            try:
                status, detail = run_case(c, dt, et_ops)
            except Exception as e:  # noqa: BLE001
                status, detail = "harness-error", f"{type(e).__name__}: {e}"
                traceback.print_exc()
            lines.append((label, str(dt).replace("torch.", ""), status, detail))
            print(f"{label:48s} {str(dt)[6:]:9s} {status:14s} {detail}", flush=True)
    print()
    print("== summary ==")
    for label, dt, status, detail in lines:
        if status not in ("ok",) and not (argv and dt == "-"):
            print(f"{label:48s} {dt:9s} {status:14s} {detail}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
