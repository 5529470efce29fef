"""Neural-network kernels (native/src/kernels/: linalg, linear, conv, pool,
upsample, norm, softmax, index/ for embedding, cdist): matrix products,
convolution, pooling, upsampling, normalisation, softmax, embedding
and cdist, each exported with ExecuTorch, run with pyexec and compared with
torch eager over several dtypes, odd sizes, empty tensors and edge values.

Several ops share one exported module wherever possible (exports dominate the
run time). Weights are passed as inputs so one module serves every dtype."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from support.export import assert_close, export_program

import pyexec

NAN, INF = float("nan"), float("inf")
FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]


def tol(dtype: torch.dtype) -> dict[str, float]:
    if dtype in (torch.float16, torch.bfloat16):
        return {"rtol": 2e-2, "atol": 2e-2}
    return {"rtol": 1e-4, "atol": 1e-5}


def rand(shape: Sequence[int], dtype: torch.dtype, seed: int, scale: float = 1.0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g, dtype=torch.float64) * scale).to(dtype)
    lo = 0 if dtype == torch.uint8 else -5
    return torch.randint(lo, 6, shape, generator=g).to(dtype)


def compare(got: Any, expected: Any, what: str, **kw: float) -> None:
    if isinstance(expected, torch.Tensor) and expected.dtype == torch.bfloat16:  # numpy has none
        assert got.dtype == expected.dtype, f"{what}: dtype {got.dtype} != {expected.dtype}"
        got, expected = got.float(), expected.float()
    assert_close(got, expected, what=what, **kw)


def check(
    module: torch.nn.Module,
    inputs: tuple[Any, ...],
    *,
    run_inputs: Sequence[tuple[Any, ...]] | None = None,
    **kw: float,
) -> bytes:
    """Exports `module`, runs it with pyexec on `inputs` (and each of
    `run_inputs`), and compares every output with torch eager."""
    pte = export_program(module, tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in inputs))
    method = pyexec.load(pte).load_method("forward")
    for args in run_inputs or [inputs]:
        with torch.no_grad():
            expected = module(*[x.clone() for x in args])
        if not isinstance(expected, (tuple, list)):
            expected = (expected,)
        got = method.execute([x.clone() for x in args])
        assert len(got) == len(expected), f"{len(got)} outputs, torch gives {len(expected)}"
        for k, (g, e) in enumerate(zip(got, expected)):
            compare(g, e, f"output {k}", **kw)
    return pte


def ops_in(pte: bytes) -> set[str]:
    from executorch.exir._serialize._program import deserialize_pte_binary

    p = deserialize_pte_binary(pte)
    p = getattr(p, "program", p)
    return {f"{op.name}.{op.overload}" for op in p.execution_plan[0].operators}


# ---- matrix products ----------------------------------------------------------


class Products(torch.nn.Module):
    """mm, bmm, addmm with every bias broadcast and alpha / beta, a linear
    layer (exported as permute + addmm) and a batched matmul."""

    def forward(self, a, b, c3, d3, bn, b1n, bm1, bmn, w, lb):
        return (
            a @ b,
            torch.bmm(c3, d3),
            torch.addmm(bn, a, b),
            torch.addmm(b1n, a, b, beta=2, alpha=3),
            torch.addmm(bm1, a, b, beta=0, alpha=2),
            torch.addmm(bmn, a, b, beta=-1, alpha=1),
            F.linear(a, w, lb),
            torch.matmul(c3, b[: c3.shape[-1]]),
        )


class FloatProducts(Products):
    def forward(self, a, b, c3, d3, bn, b1n, bm1, bmn, w, lb):
        return super().forward(a, b, c3, d3, bn, b1n, bm1, bmn, w, lb) + (
            torch.addmm(bn, a, b, beta=0.5, alpha=-1.5),
        )


def product_inputs(dtype: torch.dtype, M: int, K: int, N: int, s: float = 1.0) -> tuple[torch.Tensor, ...]:
    # s scales the factors: float32 sums of a few hundred products stay ~1
    return (
        rand((M, K), dtype, 1, s),
        rand((K, N), dtype, 2, s),
        rand((3, M, K), dtype, 3, s),
        rand((3, K, N), dtype, 4, s),
        rand((N,), dtype, 5),
        rand((1, N), dtype, 6),
        rand((M, 1), dtype, 7),
        rand((M, N), dtype, 8),
        rand((N, K), dtype, 9),
        rand((N,), dtype, 10),
    )


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.int32, torch.int8, torch.uint8])
def test_products_dtypes(dtype: torch.dtype) -> None:
    # odd sizes: M below and above the micro-kernel height, N not a multiple of 8
    module = FloatProducts() if dtype.is_floating_point else Products()
    a, b, *rest = product_inputs(dtype, 7, 13, 19)
    if dtype.is_floating_point:
        a[0, 0], a[1, 2], b[3, 4], b[5, 0] = NAN, INF, -INF, 0.0
        rest[4][3, 0] = NAN  # bm1: ignored where beta == 0
    pte = check(module, (a, b, *rest), **tol(dtype))
    assert {"aten::mm.out", "aten::bmm.out", "aten::addmm.out"} <= ops_in(pte)


class FewProducts(torch.nn.Module):
    def forward(self, a, b, c3, d3, bn):
        return a @ b, torch.bmm(c3, d3), torch.addmm(bn, a, b, beta=0.5, alpha=2.0)


@pytest.mark.parametrize("mkn", [(1, 5, 3), (5, 300, 70), (37, 257, 45), (8, 3, 4100), (2, 0, 6)])
def test_products_float32_shapes(mkn: tuple[int, int, int]) -> None:
    # single rows (no packing), depth > one K block, > one N block, empty depth
    M, K, N = mkn
    check(FewProducts(), product_inputs(torch.float32, M, K, N, 0.3)[:5])


# ---- convolution --------------------------------------------------------------


class Convs(torch.nn.Module):
    """2-D and 1-D convolutions: padding, stride, dilation, groups, depthwise,
    1x1, asymmetric kernels, with and without bias; transposed variants."""

    def __init__(self, transposed: bool = True) -> None:
        super().__init__()
        self.transposed = transposed

    def forward(self, x, w3, b5, wg, wd, w1, wa, x1, w1d, wd1, wt, bt, wt1):
        out = (
            F.conv2d(x, w3, b5, padding=1),
            F.conv2d(x, w3, None, stride=2, dilation=2),
            F.conv2d(x, wg, None, stride=(1, 2), padding=(2, 1), groups=2),
            F.conv2d(x, wd, b5.repeat(2)[:8], stride=2, padding=1, groups=4),
            F.conv2d(x, wd, None, padding=(1, 2), dilation=(1, 2), groups=4),
            F.conv2d(x, w1, b5),
            F.conv2d(x, w1, None, stride=2),
            F.conv2d(x, wa, b5, padding=(1, 0)),
            F.conv1d(x1, w1d, b5, stride=2, padding=1),
            F.conv1d(x1, wd1, None, padding=2, dilation=2, groups=4),
        )
        if self.transposed:
            out += (
                F.conv_transpose2d(x, wt, bt, stride=2, padding=1, output_padding=1, groups=2),
                F.conv_transpose2d(x, wt, None, stride=(1, 2), dilation=2, groups=2),
                F.conv_transpose1d(x1, wt1, bt, stride=3, padding=1, output_padding=2),
            )
        return out


def conv_inputs(dtype: torch.dtype, n: int = 2, h: int = 9, w: int = 11) -> tuple[torch.Tensor, ...]:
    return (
        rand((n, 4, h, w), dtype, 1),
        rand((5, 4, 3, 3), dtype, 2),
        rand((5,), dtype, 3),
        rand((6, 2, 3, 2), dtype, 4),
        rand((8, 1, 3, 3), dtype, 5),
        rand((5, 4, 1, 1), dtype, 6),
        rand((5, 4, 2, 3), dtype, 7),
        rand((n, 4, 13), dtype, 8),
        rand((5, 4, 3), dtype, 9),
        rand((4, 1, 5), dtype, 10),
        rand((4, 3, 3, 3), dtype, 11),
        rand((6,), dtype, 12),
        rand((4, 6, 4), dtype, 13),
    )


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
def test_convolution_dtypes(dtype: torch.dtype) -> None:
    # bfloat16: torch rounds differently inside the sum; allow ~1 ulp of |out| ~ 8
    kw = {"rtol": 2e-2, "atol": 8e-2} if dtype == torch.bfloat16 else tol(dtype)
    inputs = conv_inputs(dtype)
    if dtype.is_floating_point:
        inputs[0][0, 0, 0, :4] = torch.tensor([NAN, INF, -INF, 0.0])
    pte = check(Convs(), inputs, **kw)
    assert "aten::convolution.out" in ops_in(pte)


class BigConvs(torch.nn.Module):
    """Enough output channels for the packed GEMM (implicit im2col) path and
    rows wide enough for the vectorised depthwise path."""

    def forward(self, x, w, b, wg, wd, wd2, wt, x1, w1, wd1):
        return (
            F.conv2d(x, w, b, padding=1),
            F.conv2d(x, w, None, stride=2),
            F.conv2d(x, wg, None, stride=(2, 1), padding=(1, 2), dilation=(2, 1), groups=2),
            F.conv2d(x, wd, b[:24], padding=1, groups=24),
            F.conv2d(x, wd2, None, padding=(2, 3), dilation=(1, 2), groups=24),
            F.conv_transpose2d(x, wt, None, stride=2),
            F.conv1d(x1, w1, b[:16], padding=2),
            F.conv1d(x1, wd1, None, padding=3, groups=24),
        )


def test_convolution_float32_larger_and_empty() -> None:
    f = torch.float32
    check(BigConvs(), (
        rand((2, 24, 21, 19), f, 1),
        rand((40, 24, 3, 3), f, 2, 0.2),
        rand((40,), f, 3),
        rand((16, 12, 3, 3), f, 4, 0.2),
        rand((24, 1, 3, 3), f, 5),
        rand((48, 1, 3, 3), f, 6),
        rand((24, 10, 3, 3), f, 7, 0.2),
        rand((2, 24, 50), f, 8),
        rand((16, 24, 5), f, 9, 0.2),
        rand((24, 1, 7), f, 10),
    ))
    # empty batch
    check(Convs(transposed=False), conv_inputs(f, n=0))


# ---- pooling ------------------------------------------------------------------


class MaxPools(torch.nn.Module):
    def forward(self, x, y):
        a, ai = F.max_pool2d(x, 3, 2, 1, ceil_mode=True, return_indices=True)
        b, bi = F.max_pool2d(x, (2, 3), (1, 2), (1, 0), dilation=(2, 1), return_indices=True)
        c, ci = F.max_pool1d(y, 3, 2, 1, ceil_mode=True, return_indices=True)
        return a, ai, b, bi, F.max_pool2d(x, 2), c, ci


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64, torch.int32, torch.int8, torch.uint8])
def test_max_pool(dtype: torch.dtype) -> None:
    x, y = rand((2, 3, 9, 10), dtype, 1), rand((2, 3, 11), dtype, 2)
    if dtype.is_floating_point:
        x[0, 0, 0, :5] = torch.tensor([NAN, 1.0, INF, -INF, NAN])
        x[0, 1, :3, :3] = -INF
        x[1, 2, 4, 4] = NAN
    elif dtype != torch.uint8:
        x[0, 0] = torch.iinfo(dtype).min  # a plane of the lowest value: first index wins
    pte = check(MaxPools(), (x, y), **tol(dtype))
    assert "aten::max_pool2d_with_indices.out" in ops_in(pte)


class AvgPools(torch.nn.Module):
    def forward(self, x, y):
        return (
            F.avg_pool2d(x, 3, 2, 1, ceil_mode=True),
            F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
            F.avg_pool2d(x, (2, 3), (2, 1), (1, 1), divisor_override=4),
            F.avg_pool2d(x, 2),
            F.avg_pool1d(y, 4, 3, 2, count_include_pad=False),
        )


@pytest.mark.parametrize("dtype", FLOATS + [torch.int64])
def test_avg_pool(dtype: torch.dtype) -> None:
    x, y = rand((2, 3, 9, 10), dtype, 1, 3.0), rand((2, 3, 11), dtype, 2, 3.0)
    if dtype.is_floating_point:
        x[0, 0, 0, :3] = torch.tensor([NAN, INF, -INF])
    else:
        x = x * 7 - 20  # negative sums: integer division truncates
    pte = check(AvgPools(), (x, y), **tol(dtype))
    assert "aten::avg_pool2d.out" in ops_in(pte)


class AdaptivePools(torch.nn.Module):
    def forward(self, x, y):
        return (
            F.adaptive_avg_pool2d(x, (4, 3)),
            F.adaptive_avg_pool2d(x, (2, 7)),
            F.adaptive_avg_pool2d(x, (12, 13)),  # larger than the input
            F.adaptive_avg_pool1d(y, 5),
            F.adaptive_avg_pool2d(x[0], (3, 4)),  # 3-D input
        )


@pytest.mark.parametrize("dtype", FLOATS)
def test_adaptive_avg_pool(dtype: torch.dtype) -> None:
    x, y = rand((2, 3, 9, 10), dtype, 1), rand((2, 3, 11), dtype, 2)
    x[1, 1, 2, 2] = INF
    pte = check(AdaptivePools(), (x, y), **tol(dtype))
    assert "aten::_adaptive_avg_pool2d.out" in ops_in(pte)


# ---- upsampling ---------------------------------------------------------------


class Upsample(torch.nn.Module):
    def __init__(self, bilinear: bool | str = True) -> None:
        super().__init__()
        self.bilinear = bilinear  # True: all cases, "some": a few, False: nearest only

    def forward(self, x):
        out = (
            F.interpolate(x, scale_factor=2, mode="nearest"),
            F.interpolate(x, size=(5, 7), mode="nearest"),
            F.interpolate(x, scale_factor=(1.5, 0.75), mode="nearest"),
            F.interpolate(x, size=(3, 3), mode="nearest"),
        )
        if self.bilinear == "some":
            out = out[:2] + (
                F.interpolate(x, size=(7, 13), mode="bilinear", align_corners=True),
                F.interpolate(x, scale_factor=1.5, mode="bilinear", align_corners=False),
            )
        elif self.bilinear:
            out += (
                F.interpolate(x, size=(7, 13), mode="bilinear", align_corners=True),
                F.interpolate(x, size=(7, 13), mode="bilinear", align_corners=False),
                F.interpolate(x, scale_factor=1.5, mode="bilinear", align_corners=False),
                F.interpolate(x, scale_factor=(0.7, 2.0), mode="bilinear", align_corners=False),
                F.interpolate(x, size=(1, 1), mode="bilinear", align_corners=True),
                F.interpolate(x, size=(3, 4), mode="bilinear", align_corners=False),
            )
        return out


@pytest.mark.parametrize("dtype", FLOATS)
def test_upsample(dtype: torch.dtype) -> None:
    x = rand((2, 3, 5, 6), dtype, 1)
    x[0, 0, 0, 0] = NAN
    pte = check(Upsample(True if dtype == torch.float32 else "some"), (x,), **tol(dtype))
    assert {"aten::upsample_nearest2d.vec_out", "aten::upsample_bilinear2d.vec_out"} <= ops_in(pte)


def test_upsample_nearest_uint8() -> None:
    check(Upsample(bilinear=False), (rand((1, 2, 5, 6), torch.uint8, 3),))


# ---- normalisation ------------------------------------------------------------


class Norms(torch.nn.Module):
    def forward(self, x, w, b, x4, wc, bc, rm, rv):
        return (
            F.layer_norm(x, (x.shape[-1],), w, b, eps=1e-5),
            F.layer_norm(x, tuple(x.shape[-2:]), eps=1e-3),
            *torch.ops.aten.native_layer_norm(x, [x.shape[-1]], w, None, 1e-5),
            F.batch_norm(x4, rm, rv, wc, bc, training=False, eps=1e-5),
            F.batch_norm(x4[:, :, 0], rm, rv, None, None, training=False),
            F.batch_norm(x4, None, None, wc, bc, training=True, eps=1e-4),
            F.group_norm(x4, 3, None, None),
            F.group_norm(x4[:, :4], 2, wc[:4], bc[:4], eps=1e-3),
        )


def norm_inputs(dtype: torch.dtype, rows: int = 3) -> tuple[torch.Tensor, ...]:
    return (
        rand((2, rows, 37), dtype, 1, 2.0) + 0.5,
        rand((37,), dtype, 2),
        rand((37,), dtype, 3),
        rand((2, 6, 5, 7), dtype, 4, 2.0),
        rand((6,), dtype, 5),
        rand((6,), dtype, 6),
        rand((6,), dtype, 7),
        rand((6,), dtype, 8).abs() + 0.5,
    )


@pytest.mark.parametrize("dtype", FLOATS)
def test_norms(dtype: torch.dtype) -> None:
    inputs = norm_inputs(dtype)
    inputs[0][0, 0, 3] = NAN  # a NaN row
    inputs[0][1, 1, :] = 4.0  # a constant row: variance 0
    inputs[3][0, 1, 2, 3] = INF
    pte = check(Norms(), inputs, **tol(dtype))
    assert {
        "aten::native_layer_norm.out",
        "aten::_native_batch_norm_legit_no_training.out",
        "aten::_native_batch_norm_legit.no_stats_out",
        "aten::native_group_norm.out",
    } <= ops_in(pte)


def test_layer_norm_empty() -> None:
    class LayerNormOnly(torch.nn.Module):
        def forward(self, x, w, b):
            return F.layer_norm(x, (x.shape[-1],), w, b)

    check(LayerNormOnly(), norm_inputs(torch.float32, rows=0)[:3])


class Softmaxes(torch.nn.Module):
    def forward(self, x, z):
        return (
            F.softmax(x, -1),
            F.log_softmax(x, -1),
            F.softmax(x, 0),
            F.log_softmax(x, 1),
            F.softmax(z, 0),
            F.log_softmax(z, -1),
        )


@pytest.mark.parametrize("dtype", FLOATS)
def test_softmax(dtype: torch.dtype) -> None:
    x = rand((3, 5, 37), dtype, 1, 3.0)
    x[0, 0, :4] = torch.tensor([INF, 1.0, -INF, 2.0])
    x[0, 1, :] = -INF  # a row of -inf: NaN
    x[0, 2, 5] = NAN
    x[1, 3, :9] = torch.tensor([80.0, -80.0, 60.0, 1.0, 0.0, -100.0, 70.0, 79.0, 80.0])
    z = torch.tensor(1.5, dtype=dtype)
    pte = check(Softmaxes(), (x, z), **tol(dtype))
    assert {"aten::_softmax.out", "aten::_log_softmax.out"} <= ops_in(pte)


def test_softmax_float32_long_rows_and_empty() -> None:
    x = rand((2, 1031), torch.float32, 2, 10.0)
    check(Softmaxes(), (x, torch.tensor(0.0)))
    check(Softmaxes(), (torch.zeros(3, 0, 4), torch.tensor(0.0)))


# ---- embedding ----------------------------------------------------------------


class Embedding(torch.nn.Module):
    def forward(self, w, i, j):
        return F.embedding(i, w), F.embedding(j, w, padding_idx=1), F.embedding(i[0, 0], w)


@pytest.mark.parametrize(
    "dtype,idx",
    [(torch.float32, torch.int64), (torch.float16, torch.int32), (torch.int64, torch.int64), (torch.bool, torch.int32)],
)
def test_embedding(dtype: torch.dtype, idx: torch.dtype) -> None:
    w = rand((10, 7), torch.float32, 1).to(dtype)
    i = torch.tensor([[0, 9, 3], [3, 3, 1]], dtype=idx)
    j = torch.tensor([1, 0, 9, 2, 4], dtype=idx)
    pte = check(Embedding(), (w, i, j), run_inputs=[(w, i, j), (w, i.flip(1), j.flip(0))])
    assert "aten::embedding.out" in ops_in(pte)


def test_embedding_out_of_range_index_raises() -> None:
    w = rand((10, 7), torch.float32, 1)
    i = torch.tensor([[0, 9, 3], [3, 3, 1]])
    j = torch.tensor([1, 0, 9, 2, 4])
    pte = export_program(Embedding(), (w, i, j))
    method = pyexec.load(pte).load_method("forward")
    for bad in (10, -1):
        with pytest.raises(pyexec.ExecutionError, match="out of range"):
            method.execute([w, i, torch.tensor([1, 0, bad, 2, 4])])


# ---- cdist --------------------------------------------------------------------


class Cdist(torch.nn.Module):
    def forward(self, a, b, c):
        return (
            torch.cdist(a, b),
            torch.cdist(a, b, p=1.0),
            torch.cdist(a, b, p=0.0),
            torch.cdist(a, b, p=float("inf")),
            torch.cdist(a, b, p=3.0),
            torch.cdist(a[0], c),
        )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_cdist(dtype: torch.dtype) -> None:
    a, b, c = rand((2, 5, 9), dtype, 1), rand((2, 7, 9), dtype, 2), rand((3, 9), dtype, 3)
    b[0, 1] = a[0, 2]  # a zero distance
    pte = check(Cdist(), (a, b, c), **tol(dtype))
    assert "aten::_cdist_forward.out" in ops_in(pte)


# ---- a small model through all groups -----------------------------------------


def test_small_convnet_dynamic_batch() -> None:
    class Net(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.c1 = torch.nn.Conv2d(3, 12, 3, padding=1)
            self.bn = torch.nn.BatchNorm2d(12)
            self.dw = torch.nn.Conv2d(12, 12, 3, stride=2, padding=1, groups=12)
            self.c2 = torch.nn.Conv2d(12, 20, 1)
            self.fc = torch.nn.Linear(20, 10)

        def forward(self, x):
            x = F.relu(self.bn(self.c1(x)))
            x = F.max_pool2d(F.relu(self.c2(self.dw(x))), 2, ceil_mode=True)
            x = F.adaptive_avg_pool2d(x, (1, 2)).flatten(1)[:, :20]
            return F.log_softmax(self.fc(x), -1)

    torch.manual_seed(0)
    net = Net().eval()
    with torch.no_grad():
        net.bn.running_mean.uniform_(-0.5, 0.5)
        net.bn.running_var.uniform_(0.5, 1.5)
    batch = torch.export.Dim("batch", min=1, max=8)
    x = torch.randn(3, 3, 15, 17)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        pte = export_program(net, (x,), dynamic_shapes=({0: batch},))
    method = pyexec.load(pte).load_method("forward")
    for n in (3, 1, 8):
        xi = torch.randn(n, 3, 15, 17)
        with torch.no_grad():
            expected = net(xi)
        compare(method.execute([xi])[0], expected, f"batch {n}")


class OneChannelConvs(torch.nn.Module):
    """One input channel per group feeding 8 or more outputs: the packed GEMM
    path, not the depthwise loops (a first layer over audio or grey images,
    a depthwise convolution with a channel multiplier of 8)."""

    def forward(self, wav, w1, b1, img, w2, x, wm):
        return (
            F.conv1d(wav, w1, b1, stride=4, padding=4),
            F.conv2d(img, w2, None, stride=2, padding=1),
            F.conv2d(x, wm, None, padding=(1, 2), dilation=(1, 2), groups=3),
        )


def test_convolution_one_input_channel_many_outputs() -> None:
    f = torch.float32
    check(OneChannelConvs(), (
        rand((2, 1, 203), f, 1),
        rand((16, 1, 9), f, 2),
        rand((16,), f, 3),
        rand((1, 1, 17, 23), f, 4),
        rand((12, 1, 3, 3), f, 5),
        rand((1, 3, 9, 10), f, 6),
        rand((24, 1, 3, 3), f, 7),
    ))
