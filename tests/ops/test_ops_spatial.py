"""Spatial kernels and their neighbours (native/src/kernels/: shape/pad.c,
shape/pixel_shuffle.c, grid_sampler.c, upsample_aa.c, index/scatter.c,
linear.c, pdist.c, random.c, norm.c): real
ExecuTorch programs run by pyexec and compared with torch eager.

Covered: reflection / replication padding (1d, 2d, 3d), pixel_shuffle /
pixel_unshuffle, grid_sampler_2d, _upsample_bilinear2d_aa, masked_scatter,
linear, _pdist_forward, native_dropout, rand / randn and training-mode
_native_batch_norm_legit with running statistics; and the convolution
kernels the XNNPACK backend shares (depthwise row kernel, GEMM edge tiles),
on lowered programs against ExecuTorch's runtime and eager.

Ops the default pipeline decomposes are kept with `preserve_ops`; each test
checks that the program really calls the kernel under test. Several dtypes
share one exported module (one group of inputs per dtype) to keep the number
of exports small.
"""

from __future__ import annotations

import math
import warnings

import pytest
import torch
import torch.nn.functional as F
from support.export import assert_close, export_program

aten = torch.ops.aten

FLOATS = [torch.float32, torch.float64, torch.float16, torch.bfloat16]
INTS = [torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8]
ALL = FLOATS + INTS + [torch.bool]


def make(shape, dtype, seed=0, special=False):
    """Random values; `special` puts nan / inf / -inf / -0.0 / 0 into floats."""
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point:
        x = (torch.randn(shape, generator=g) * 3).to(dtype)
        if special and x.numel() >= 5:
            x.view(-1)[:5] = torch.tensor([math.nan, math.inf, -math.inf, -0.0, 0.0], dtype=dtype)
        return x
    if dtype == torch.uint8:
        return torch.randint(0, 256, shape, generator=g).to(dtype)
    return torch.randint(-100, 100, shape, generator=g).to(dtype)


def export(module, inputs, preserve=()):
    """.pte bytes of `module` exported with executorch (ops in `preserve` kept)."""
    return export_program(module, inputs, strict_ir=False, preserve=preserve)


def op_names(pte):
    from executorch.exir._serialize._program import deserialize_pte_binary

    prog = deserialize_pte_binary(pte)
    prog = getattr(prog, "program", prog)
    plan = prog.execution_plan[0]
    return {f"{op.name}.{op.overload}" if op.overload else op.name for op in plan.operators}


def load(pte):
    import pyexec

    return pyexec.load(pte).load_method("forward")


def clones(args):
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in args]


def compare(got, expected, *, rtol, atol, tols=None):
    expected = torch.utils._pytree.tree_leaves(expected)
    assert len(got) == len(expected), f"{len(got)} outputs, torch gives {len(expected)}"
    for k, (g, e) in enumerate(zip(got, expected)):
        r, a = (tols or {}).get(e.dtype, (rtol, atol))
        what = f"output {k} ({e.dtype}, shape {tuple(e.shape)})"
        if e.dtype == torch.bfloat16:  # numpy has no bfloat16
            assert g.dtype == torch.bfloat16, what
            g, e = g.float(), e.float()
        assert_close(g, e, rtol=r, atol=a, what=what)


def check(module, inputs, *, expect, preserve=(), run_inputs=None, rtol=1e-4, atol=1e-5, tols=None):
    """Exports, checks the program calls every op in `expect`, runs it with
    pyexec on each input tuple and compares with torch eager."""
    pte = export(module, inputs, preserve)
    names = op_names(pte)
    missing = set(expect) - names
    assert not missing, f"program lacks {missing}: {sorted(names)}"
    method = load(pte)
    for args in run_inputs or [inputs]:
        with torch.no_grad():
            expected = module(*clones(args))
        compare(method.execute(clones(args)), expected, rtol=rtol, atol=atol, tols=tols)
    return pte


class PerDtype(torch.nn.Module):
    """Runs `inner` on consecutive groups of `k` inputs: one group per dtype."""

    def __init__(self, inner, k):
        super().__init__()
        self.inner, self.k = inner, k

    def forward(self, *args):
        out = []
        for g in range(0, len(args), self.k):
            out.extend(torch.utils._pytree.tree_leaves(self.inner(*args[g : g + self.k])))
        return tuple(out)


class Fn(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, *args):
        return self.fn(*args)


# ---- reflection / replication padding ---------------------------------------------

PAD_OPS = [
    aten.reflection_pad1d.default,
    aten.reflection_pad2d.default,
    aten.reflection_pad3d.default,
    aten.replication_pad1d.default,
    aten.replication_pad2d.default,
    aten.replication_pad3d.default,
]
PAD_NAMES = {f"aten::{op.__name__.split('.')[0]}.out" for op in PAD_OPS}


def pads(x3, x2, x4, x5):
    return (
        aten.reflection_pad1d(x3, [2, 4]),  # pad up to size - 1
        aten.reflection_pad1d(x2, [-1, 3]),  # no batch dim, negative pad crops
        aten.reflection_pad2d(x4, [1, 2, 4, 0]),
        aten.reflection_pad2d(x4[0], [0, 5, -2, 1]),
        aten.reflection_pad3d(x5, [1, 1, 2, 0, 2, 1]),
        aten.replication_pad1d(x3, [7, -2]),  # pads larger than the input
        aten.replication_pad1d(x2, [0, 0]),
        aten.replication_pad2d(x4, [3, 9, 1, -1]),
        aten.replication_pad3d(x5, [2, 2, 1, 1, 0, 3]),
        aten.replication_pad3d(x5[0], [-1, 0, 0, 2, 1, -1]),
    )


@pytest.mark.parametrize("dtypes", [FLOATS, INTS], ids=["floats", "ints"])
def test_padding(dtypes):
    inputs = []
    for n, dt in enumerate(dtypes):
        inputs += [
            make((2, 3, 5), dt, 4 * n, special=True),
            make((3, 7), dt, 4 * n + 1),
            make((2, 3, 5, 6), dt, 4 * n + 2, special=True),
            make((1, 2, 3, 4, 5), dt, 4 * n + 3),
        ]
    check(PerDtype(Fn(pads), 4), tuple(inputs), preserve=PAD_OPS, expect=PAD_NAMES)


def test_padding_empty_batch():
    x3, x4, x5 = torch.randn(0, 3, 5), torch.randn(0, 2, 3, 4), torch.randn(0, 1, 2, 3, 4)
    check(
        Fn(
            lambda a, b, c: (
                aten.reflection_pad1d(a, [1, 2]),
                aten.replication_pad2d(b, [1, 0, 2, 3]),
                aten.reflection_pad3d(c, [1, 1, 1, 1, 1, 1]),
            )
        ),
        (x3, x4, x5),
        preserve=PAD_OPS,
        expect={"aten::reflection_pad1d.out", "aten::replication_pad2d.out", "aten::reflection_pad3d.out"},
    )


# ---- pixel shuffle -----------------------------------------------------------------

SHUFFLE_OPS = [aten.pixel_shuffle.default, aten.pixel_unshuffle.default]


def shuffles(a, b, c):
    return (
        F.pixel_shuffle(a, 2),  # (2, 12, 3, 5) -> (2, 3, 6, 10)
        F.pixel_shuffle(a, 1),
        F.pixel_unshuffle(b, 3),  # (2, 1, 6, 9) -> (2, 9, 2, 3)
        F.pixel_unshuffle(a, 1),
        F.pixel_shuffle(c, 3),  # 5-D: (1, 2, 9, 2, 3) -> (1, 2, 1, 6, 9)
        F.pixel_unshuffle(c[0, 0], 1),  # 3-D
        F.pixel_shuffle(c[0], 3),  # 4-D, 2 batches
    )


@pytest.mark.parametrize("dtypes", [ALL[:5], ALL[5:]], ids=["floats_int8", "ints_bool"])
def test_pixel_shuffle(dtypes):
    inputs = []
    for n, dt in enumerate(dtypes):
        shapes = [(2, 12, 3, 5), (2, 1, 6, 9), (1, 2, 9, 2, 3)]
        inputs += [make(shape, dt, 3 * n + k) for k, shape in enumerate(shapes)]
    check(
        PerDtype(Fn(shuffles), 3),
        tuple(inputs),
        preserve=SHUFFLE_OPS,
        expect={"aten::pixel_shuffle.out", "aten::pixel_unshuffle.out"},
    )


def test_pixel_shuffle_empty():
    # (eager pixel_unshuffle returns an empty input unchanged, against its own
    # meta function's shape, so only pixel_shuffle is compared here)
    a, b = torch.randn(0, 8, 2, 3), torch.randn(3, 0, 4, 6)
    check(
        Fn(lambda a, b: (F.pixel_shuffle(a, 2), F.pixel_shuffle(b, 2))),
        (a, b),
        preserve=SHUFFLE_OPS,
        expect={"aten::pixel_shuffle.out"},
    )


# ---- grid_sampler_2d ---------------------------------------------------------------

GRID_MODES = [
    (m, p, ac)
    for m in ("bilinear", "nearest", "bicubic")
    for p in ("zeros", "border", "reflection")
    for ac in (False, True)
]


def grid_all(x, g):
    return tuple(F.grid_sample(x, g, mode=m, padding_mode=p, align_corners=ac) for m, p, ac in GRID_MODES)


def make_grid(shape, seed, dtype=torch.float32):
    g = torch.Generator().manual_seed(seed)
    grid = torch.rand(shape, generator=g) * 2.8 - 1.4  # some locations outside [-1, 1]
    flat = grid.view(-1)
    flat[:9] = torch.tensor([-1.0, 1.0, 0.0, 0.5, -0.5, 3.7, -5.25, 1.0 / 3, 12.0])  # exact & far
    return grid.to(dtype)


def grid_all_ref(x, g):
    """grid_all's reference for float16 / bfloat16: bilinear sampling in
    float32 on the same values, rounded to the dtype (ExecuTorch's kernel,
    which pyexec follows, computes it in float; torch's CPU kernel in the
    16-bit type, where weights like (x0 + 1 - x) lose their low bits);
    nearest and bicubic from torch as they are."""
    out = grid_all(x, g)
    xf, gf = x.float(), g.float()
    return tuple(
        F.grid_sample(xf, gf, mode=m, padding_mode=p, align_corners=ac).to(x.dtype) if m == "bilinear" else o
        for (m, p, ac), o in zip(GRID_MODES, out)
    )


@pytest.mark.parametrize("dtype", FLOATS)
def test_grid_sampler_2d(dtype):
    x = make((2, 3, 5, 6), dtype, 1) / 3
    g = make_grid((2, 4, 7, 2), 2, dtype)
    tol = {torch.float16: (1e-2, 2e-2), torch.bfloat16: (3e-2, 6e-2)}.get(dtype, (1e-4, 1e-5))
    runs = [(x, g), (make((2, 3, 5, 6), dtype, 3) / 3, make_grid((2, 4, 7, 2), 4, dtype))]
    if dtype not in (torch.float16, torch.bfloat16):
        check(Fn(grid_all), (x, g), expect={"aten::grid_sampler_2d.out"}, rtol=tol[0], atol=tol[1], run_inputs=runs)
        return
    pte = export(Fn(grid_all), (x, g), ())
    assert "aten::grid_sampler_2d.out" in op_names(pte)
    method = load(pte)
    for args in runs:
        with torch.no_grad():
            expected = grid_all_ref(*clones(args))
        compare(method.execute(clones(args)), expected, rtol=tol[0], atol=tol[1])


def test_grid_sampler_2d_degenerate():
    # 1x1 and 1xW inputs (reflection over an empty span), non-finite grids,
    # an empty batch / channel / grid
    x1 = torch.randn(1, 2, 1, 4)
    g1 = make_grid((1, 3, 5, 2), 5)
    g1.view(-1)[9:13] = torch.tensor([math.nan, math.inf, -math.inf, math.nan])
    check(Fn(grid_all), (x1, g1), expect={"aten::grid_sampler_2d.out"})
    check(Fn(grid_all), (torch.randn(1, 1, 1, 1), make_grid((1, 2, 3, 2), 6)), expect={"aten::grid_sampler_2d.out"})
    check(
        Fn(
            lambda a, ga, b, gb: (
                F.grid_sample(a, ga, align_corners=False),
                F.grid_sample(b, gb, mode="bicubic", align_corners=True),
            )
        ),
        (torch.randn(0, 2, 3, 3), torch.rand(0, 2, 2, 2), torch.randn(2, 0, 3, 3), torch.rand(2, 2, 0, 2)),
        expect={"aten::grid_sampler_2d.out"},
    )


# ---- _upsample_bilinear2d_aa -------------------------------------------------------


def aa_all(x, big):
    return (
        F.interpolate(x, size=(3, 4), mode="bilinear", antialias=True),  # down
        F.interpolate(x, size=(8, 9), mode="bilinear", antialias=True),  # up
        F.interpolate(x, size=(5, 2), mode="bilinear", antialias=True),  # width only
        F.interpolate(x, size=(1, 6), mode="bilinear", antialias=True),  # height only, to 1
        F.interpolate(x, size=(3, 4), mode="bilinear", antialias=True, align_corners=True),
        # (eager uint8 with at most 4 channels fails an internal assert for a 1x1 output)
        F.interpolate(
            x, size=(1, 1) if x.dtype != torch.uint8 else (1, 2), mode="bilinear", antialias=True, align_corners=True
        ),
        F.interpolate(x, scale_factor=(0.45, 0.7), mode="bilinear", antialias=True),  # scales passed
        F.interpolate(big, size=(3, 5), mode="bilinear", antialias=True),  # many taps
        F.interpolate(big, size=(7, 3), mode="bilinear", antialias=True, align_corners=True),
        x,  # identity size
    )


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.uint8])
def test_upsample_bilinear2d_aa(dtype):
    x = make((2, 3, 5, 6), dtype, 1)
    big = make((1, 5, 23, 17), dtype, 2)  # uint8 with more than 4 channels: torch's generic path
    big3 = make((1, 3, 23, 17), dtype, 3)  # uint8 with 3 channels: torch's AVX path
    check(PerDtype(Fn(aa_all), 2), (x, big, x[:1], big3), expect={"aten::_upsample_bilinear2d_aa.out"})


def test_upsample_bilinear2d_aa_special_and_empty():
    x = make((1, 2, 6, 7), torch.float32, 4, special=True)
    check(
        Fn(
            lambda a, e: (
                F.interpolate(a, size=(4, 3), mode="bilinear", antialias=True),
                F.interpolate(e, size=(2, 3), mode="bilinear", antialias=True),
            )
        ),
        (x, torch.randn(0, 3, 4, 5)),
        expect={"aten::_upsample_bilinear2d_aa.out"},
    )


# ---- masked_scatter ----------------------------------------------------------------


def scatters(x, y, src):
    mask = x > x.flatten()[3] if x.dtype != torch.bool else x
    return (
        x.masked_scatter(mask, src),
        x.masked_scatter(mask[1], src),  # mask broadcast over self
        y.masked_scatter(mask, src),  # self broadcast over the mask
        x.masked_scatter(torch.zeros_like(mask), src),  # nothing taken
    )


@pytest.mark.parametrize("dtypes", [ALL[:5], ALL[5:]], ids=["floats_int8", "ints_bool"])
def test_masked_scatter(dtypes):
    inputs = []
    for n, dt in enumerate(dtypes):
        inputs += [make((3, 11), dt, 3 * n, special=True), make((11,), dt, 3 * n + 1), make((5, 7), dt, 3 * n + 2)]
    check(PerDtype(Fn(scatters), 3), tuple(inputs), expect={"aten::masked_scatter.out"})


def test_masked_scatter_0d_empty_and_short_source():
    import pyexec

    check(
        Fn(lambda s, m, src, e, em: (s.masked_scatter(m, src), e.masked_scatter(em, src))),
        (torch.tensor(1.5), torch.tensor(True), torch.randn(3), torch.randn(0, 4), torch.ones(0, 4, dtype=torch.bool)),
        expect={"aten::masked_scatter.out"},
    )
    x, m, src = torch.randn(4, 5), torch.ones(4, 5, dtype=torch.bool), torch.randn(19)
    method = load(export(Fn(lambda a, b, c: a.masked_scatter(b, c)), (x, torch.zeros(4, 5, dtype=torch.bool), src)))
    with pytest.raises(pyexec.ExecutionError, match="fewer than"):
        method.execute([x, m, src])


# ---- linear ------------------------------------------------------------------------


def linears(x3, x2, x1, w, b, b1):
    return (
        F.linear(x3, w, b),  # (2, 3, 7) @ (5, 7).T + (5,)
        F.linear(x2, w),  # no bias
        F.linear(x1, w, b),  # 1-D input
        F.linear(x2, w, b1),  # bias broadcast from (1,)
    )


@pytest.mark.parametrize(
    "dtypes", [FLOATS, [torch.int32, torch.int64, torch.int16, torch.uint8]], ids=["floats", "ints"]
)
def test_linear(dtypes):
    def mk(shape, dt, seed):
        if dt.is_floating_point:
            return make(shape, dt, seed, special=seed % 6 == 0)
        return torch.randint(-9, 10, shape, generator=torch.Generator().manual_seed(seed)).to(dt)

    inputs = []
    for n, dt in enumerate(dtypes):
        shapes = [(2, 3, 7), (4, 7), (7,), (5, 7), (5,), (1,)]
        inputs += [mk(shape, dt, 6 * n + k) for k, shape in enumerate(shapes)]
    check(
        PerDtype(Fn(linears), 6),
        tuple(inputs),
        preserve=[aten.linear.default],
        expect={"aten::linear.out"},
        tols={torch.float16: (1e-2, 1e-2), torch.bfloat16: (2e-2, 5e-2)},
    )


def test_linear_float32_large_and_degenerate():
    x, w, b = torch.randn(37, 70), torch.randn(33, 70), torch.randn(33)
    bm = torch.randn(37, 33)  # a bias per output element
    check(
        Fn(
            lambda x, w, b, bm, e, we: (
                F.linear(x, w, b),
                F.linear(x, w),
                F.linear(x, w, bm),
                F.linear(e, w, b),
                F.linear(x[:, :0], we, b),
            )
        ),
        (x, w, b, bm, torch.randn(0, 70), torch.randn(33, 0)),
        preserve=[aten.linear.default],
        expect={"aten::linear.out"},
        rtol=1e-4,
        atol=1e-4,
    )


# ---- _pdist_forward ----------------------------------------------------------------


def pdists(x):
    return tuple(F.pdist(x, p) for p in (2.0, 1.0, 0.0, math.inf, 3.5, 0.5))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
def test_pdist(dtype):
    x = make((7, 9), dtype, 1)
    x[3] = x[1]  # a zero distance
    x[5, 2] = 0.25 + x[6, 2]
    y = x.clone()
    y[2, 4] = math.nan
    check(Fn(pdists), (x,), expect={"aten::_pdist_forward.out"}, run_inputs=[(x,), (y,)])


def test_pdist_degenerate():
    check(
        Fn(lambda a, b, c: (F.pdist(a), F.pdist(b, 1.0), F.pdist(c, 3.0))),
        (torch.randn(1, 4), torch.randn(0, 3), torch.randn(4, 0)),
        expect={"aten::_pdist_forward.out"},
    )


# ---- native_dropout ----------------------------------------------------------------

DROPOUT = [aten.native_dropout.default]


def test_native_dropout_eval_all_dtypes():
    def inner(x):
        return aten.native_dropout(x, 0.4, False)

    inputs = tuple(make((3, 5), dt, n, special=True) for n, dt in enumerate(ALL))
    check(PerDtype(Fn(inner), 1), inputs + (torch.tensor(2.5),), preserve=DROPOUT, expect={"aten::native_dropout.out"})


def test_native_dropout_train():
    x = torch.randn(50, 80) + 3
    p = 0.3
    pte = export(
        Fn(
            lambda a: (
                aten.native_dropout(a, p, True),
                aten.native_dropout(a, 0.0, True),
                aten.native_dropout(a, 1.0, True),
            )
        ),
        (x,),
        DROPOUT,
    )
    assert "aten::native_dropout.out" in op_names(pte)
    method = load(pte)
    masks = []
    for _ in range(2):
        out, mask, out0, mask0, out1, mask1 = method.execute([x.clone()])
        assert mask.dtype == torch.bool and mask.shape == x.shape
        frac = mask.float().mean().item()
        assert abs(frac - (1 - p)) < 0.03, frac  # 4000 draws: sd about 0.007
        torch.testing.assert_close(out, x * mask / (1 - p), rtol=1e-6, atol=1e-6)
        assert mask0.all() and torch.equal(out0, x)
        assert not mask1.any() and torch.equal(out1, torch.zeros_like(x))
        masks.append(mask)
    assert not torch.equal(masks[0], masks[1]), "two runs drew the same mask"


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16])
def test_native_dropout_train_other_floats(dtype):
    x = (torch.randn(40, 30) + 2).to(dtype)
    method = load(export(Fn(lambda a: aten.native_dropout(a, 0.5, True)), (x,), DROPOUT))
    out, mask = method.execute([x.clone()])
    assert out.dtype == dtype and mask.dtype == torch.bool
    assert abs(mask.float().mean().item() - 0.5) < 0.05
    expected = (x.double() * mask.double() * 2.0).to(dtype)
    assert_close(out.float(), expected.float(), rtol=1e-2, atol=1e-3, what=str(dtype))


# ---- rand / randn ------------------------------------------------------------------


def test_rand_randn():
    def gen(x):
        return (
            x + torch.rand(60, 70),
            torch.randn(61, 70),
            torch.rand(3001, dtype=torch.float64),
            torch.randn(2999, dtype=torch.float64),
            torch.rand(2000, dtype=torch.float16),
            torch.randn(2000, dtype=torch.bfloat16),
            torch.rand(0, 3),
        )

    x = torch.zeros(60, 70)
    pte = export(Fn(gen), (x,))
    assert {"aten::rand.out", "aten::randn.out"} <= op_names(pte)
    method = load(pte)
    runs = [method.execute([x.clone()]) for _ in range(2)]
    for outs in runs:
        u32, n32, u64, n64, u16, nb16, empty = outs
        assert [t.dtype for t in outs] == [
            torch.float32,
            torch.float32,
            torch.float64,
            torch.float64,
            torch.float16,
            torch.bfloat16,
            torch.float32,
        ]
        assert [tuple(t.shape) for t in outs] == [(60, 70), (61, 70), (3001,), (2999,), (2000,), (2000,), (0, 3)]
        for u in (u32, u64, u16):
            u = u.double()
            assert u.min() >= 0 and u.max() < 1
            assert abs(u.mean() - 0.5) < 0.02 and abs(u.var() - 1 / 12) < 0.01
        for n in (n32, n64, nb16):
            n = n.double()
            assert torch.isfinite(n).all()
            assert abs(n.mean()) < 0.06 and abs(n.std() - 1) < 0.05
            assert abs(((n - n.mean()) ** 3).mean()) < 0.2  # symmetric
    assert not torch.equal(runs[0][0], runs[1][0]), "two runs drew the same numbers"


# ---- _native_batch_norm_legit (training, running statistics) -----------------------


def export_bn_legit(module, inputs):
    """torch.export turns the in-place _native_batch_norm_legit into its
    functional form, which has no out variant; put the in-place op back (its
    running-stat results are the running-stat inputs themselves)."""
    from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge
    from executorch.exir.dialects._ops import ops as exir_ops

    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        ep = torch.export.export(module, tuple(clones(inputs)), strict=False)
        edge = to_edge(ep, compile_config=EdgeCompileConfig(_check_ir_validity=False))
        gm = edge.exported_program().graph_module
        graph = gm.graph
        for node in [n for n in graph.nodes if "_native_batch_norm_legit_functional" in str(n.target)]:
            with graph.inserting_before(node):
                new = graph.call_function(exir_ops.edge.aten._native_batch_norm_legit.default, node.args, node.kwargs)
            new.meta = dict(node.meta)
            new.meta["val"] = node.meta["val"][:3]
            for user in list(node.users):
                k = user.args[1]
                if k < 3:
                    user.replace_input_with(node, new)
                else:
                    user.replace_all_uses_with(node.args[k])  # 3 -> running_mean, 4 -> running_var
                    graph.erase_node(user)
            graph.erase_node(node)
        graph.lint()
        gm.recompile()
        return bytes(edge.to_executorch(ExecutorchBackendConfig()).buffer)


class BatchNormLegit(torch.nn.Module):
    def __init__(self, training, momentum=0.1, eps=1e-5, affine=True):
        super().__init__()
        self.training_, self.momentum, self.eps, self.affine = training, momentum, eps, affine

    def forward(self, x, w, b, rm, rv):
        y = aten._native_batch_norm_legit(
            x, w if self.affine else None, b if self.affine else None, rm, rv, self.training_, self.momentum, self.eps
        )
        return y[0], y[1], y[2], rm * 1, rv * 1  # the running stats after the update


@pytest.mark.parametrize(
    "dtype,training",
    [(dt, True) for dt in FLOATS] + [(torch.float32, False)],
    ids=[f"train-{str(dt)[6:]}" for dt in FLOATS] + ["eval-float32"],
)
def test_batch_norm_legit_running_stats(dtype, training):
    x = make((3, 4, 5, 7), dtype, 1)
    # float16 / bfloat16 input: float32 parameters and statistics (torch's mixed mode)
    stat = torch.float32 if dtype in (torch.float16, torch.bfloat16) else dtype
    w, b = make((4,), stat, 2), make((4,), stat, 3)
    rm, rv = make((4,), stat, 4), make((4,), stat, 5).abs() + 0.5
    module = BatchNormLegit(training, momentum=0.3, affine=dtype != torch.float64)
    pte = export_bn_legit(module, (x, w, b, rm, rv))
    assert "aten::_native_batch_norm_legit.out" in op_names(pte)
    method = load(pte)
    tol = {torch.float16: (1e-2, 1e-2), torch.bfloat16: (2e-2, 5e-2)}.get(dtype, (1e-4, 1e-5))
    for args in [(x, w, b, rm, rv), (make((3, 4, 5, 7), dtype, 6), w, b, rv, rm)]:
        rm_e, rv_e = args[3].clone(), args[4].clone()
        with torch.no_grad():
            expected = module(args[0], args[1], args[2], rm_e, rv_e)
        got = method.execute(clones(args))
        # the program also returns the mutated running_mean / running_var inputs first
        assert len(got) == 7, len(got)
        # (for float16 the exported program's save_mean / save_invstd are float16 where
        # eager returns float32: compare in the program's dtype)
        expected = (expected[0], expected[1].to(got[3].dtype), expected[2].to(got[4].dtype)) + expected[3:]
        compare(got[2:], expected, rtol=tol[0], atol=tol[1])
        compare(got[:2], (rm_e, rv_e), rtol=1e-4, atol=1e-5)


# ---- convolution kernels shared with the XNNPACK backend (NHWC) ---------------------
#
# The XNNPACK backend's DepthwiseConv2d runs 3x3 and 5x5 filters of multiplier 1
# through a row kernel that holds the filter of 16 channels in registers and
# reads a zero row for padding rows (AVX-512 machines), border columns through
# the per-pixel kernel; Conv2d and FullyConnected run the GEMM engine's
# micro-kernel with A read in place. These cases cross each edge: channel
# counts around the 16-lane block, rows narrower than the kernel (no interior
# column), dilation, stride 2, a clamp. Compared with ExecuTorch's runtime
# (the real XNNPACK) and torch eager, within the delegate tests' single-layer
# tolerance (rtol 1e-4 / atol 1e-5: sums in another order, with fused
# multiply-adds).


@pytest.mark.parametrize(
    "channels, kernel, stride, padding, dilation, width",
    [
        (16, 3, 1, 1, 1, 13),
        (17, 3, 2, 1, 1, 12),
        (33, 3, 1, 2, 2, 15),
        (8, 5, 1, 2, 1, 9),
        (40, 5, 2, 2, 1, 4),  # narrower than the kernel's span: border columns only
        (24, 3, 1, 0, 1, 3),
    ],
    ids=["3x3-c16", "3x3-c17-s2", "3x3-c33-dil2", "5x5-c8", "5x5-narrow", "3x3-nopad-w3"],
)
def test_xnnpack_depthwise_rows(channels, kernel, stride, padding, dilation, width):
    from support.export import run_with_executorch
    from support.xnnpack import export_xnnpack, node_types

    import pyexec

    torch.manual_seed(3)
    module = torch.nn.Sequential(
        torch.nn.Conv2d(channels, channels, kernel, stride, padding, dilation, groups=channels),
        torch.nn.Hardtanh(-0.5, 0.75),
    ).eval()
    x = make((2, channels, 7, width), torch.float32, seed=4)
    x[0, 0, 1, 1] = math.nan
    pte = export_xnnpack(module, (x,))
    assert 13 in node_types(pte), "the partitioner no longer emits DepthwiseConv2d"
    got = pyexec.load(pte).load_method("forward").execute([x.clone()])
    assert_close(got[0], run_with_executorch(pte, [x])[0], rtol=1e-4, atol=1e-5, what="vs ExecuTorch")
    with torch.no_grad():
        assert_close(got[0], module(x.clone()), rtol=1e-4, atol=1e-5, what="vs eager")


@pytest.mark.parametrize(
    "cin, cout, kernel, stride, rows",
    [(24, 144, 1, 1, 57), (96, 24, 1, 1, 9), (32, 70, 3, 1, 11), (16, 33, 3, 2, 13)],
    ids=["1x1-expand", "1x1-project", "3x3-n70", "3x3-s2-n33"],
)
def test_xnnpack_conv_gemm_edges(cin, cout, kernel, stride, rows):
    """Output channels not a multiple of the 32-wide panel and pixel counts
    not a multiple of the 8-row tile."""
    from support.export import run_with_executorch
    from support.xnnpack import export_xnnpack

    import pyexec

    torch.manual_seed(5)
    module = torch.nn.Sequential(torch.nn.Conv2d(cin, cout, kernel, stride, kernel // 2), torch.nn.ReLU6()).eval()
    x = make((1, cin, rows, 7), torch.float32, seed=6) * 0.3
    pte = export_xnnpack(module, (x,))
    got = pyexec.load(pte).load_method("forward").execute([x.clone()])
    assert_close(got[0], run_with_executorch(pte, [x])[0], rtol=1e-4, atol=1e-5, what="vs ExecuTorch")
    with torch.no_grad():
        assert_close(got[0], module(x.clone()), rtol=1e-4, atol=1e-5, what="vs eager")


def test_depthwise_wide_rows():
    """Portable depthwise convolution over rows wide enough for its 16-lane
    vector path (AVX-512 machines; 8 lanes elsewhere), with padding columns,
    dilation and a non-finite input, against eager."""
    x = make((2, 24, 9, 70), torch.float32, seed=7)
    x[0, 0, 2, 30] = math.nan
    x[1, 5, 4, 0] = math.inf
    w3, w5 = make((24, 1, 3, 3), torch.float32, seed=8), make((48, 1, 5, 5), torch.float32, seed=9)
    b = make((24,), torch.float32, seed=10)
    module = Fn(
        lambda x, w3, w5, b: (
            F.conv2d(x, w3, b, padding=1, groups=24),
            F.conv2d(x, w5, None, padding=(2, 4), dilation=(1, 2), groups=24),
        )
    )
    check(module, (x, w3, w5, b), expect={"aten::convolution.out"}, rtol=1e-4, atol=1e-5)
