"""Shape and indexing kernels (native/src/kernels/shape/ and index/): real
ExecuTorch programs run by pyexec and compared with torch eager.

Ops that the default export pipeline decomposes (stack, unbind, split, roll,
tril, zeros, ...) are kept with `preserve_ops` so that their own kernels run.
Several ops share one exported module to keep the number of exports small.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from support.export import assert_close, export_program

aten = torch.ops.aten

ALL_DTYPES = [
    torch.float32,
    torch.float64,
    torch.float16,
    torch.bfloat16,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint8,
    torch.bool,
]


def make(shape, dtype, seed=0):
    g = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=g) * 3).to(dtype)
    if dtype == torch.uint8:
        return torch.randint(0, 256, shape, generator=g).to(dtype)
    return torch.randint(-100, 100, shape, generator=g).to(dtype)


def export_custom(module, inputs, *, preserve=(), skip_dim_order=False, reinplace=False, dynamic_shapes=None):
    """export.export_program with preserve_ops / _skip_dim_order."""
    return export_program(
        module,
        inputs,
        strict_ir=False,
        preserve=preserve,
        skip_dim_order=skip_dim_order,
        reinplace=reinplace,
        dynamic_shapes=dynamic_shapes,
    )


def op_names(pte: bytes) -> set[str]:
    from executorch.exir._serialize._program import deserialize_pte_binary

    prog = deserialize_pte_binary(pte)
    prog = getattr(prog, "program", prog)
    plan = prog.execution_plan[0]
    names = set()
    for ins in plan.chains[0].instructions:
        a = ins.instr_args
        if hasattr(a, "op_index"):
            op = plan.operators[a.op_index]
            names.add(f"{op.name}.{op.overload}" if op.overload else op.name)
    return names


def compare(got, expected, *, rtol, atol):
    expected = torch.utils._pytree.tree_leaves(expected)
    assert len(got) == len(expected), f"{len(got)} outputs, torch gives {len(expected)}"
    for k, (g, e) in enumerate(zip(got, expected)):
        what = f"output {k} ({getattr(e, 'dtype', type(e).__name__)})"
        r, a = rtol, atol
        if isinstance(e, torch.Tensor) and e.dtype in (torch.float16, torch.bfloat16):
            r, a = max(rtol, 1e-2), max(atol, 1e-3)  # sums may round differently
        if isinstance(e, torch.Tensor) and e.dtype == torch.bfloat16:  # numpy has no bfloat16
            assert isinstance(g, torch.Tensor) and g.dtype == torch.bfloat16, f"{what}: {g!r}"
            g, e = g.float(), e.float()
        assert_close(g, e, rtol=r, atol=a, what=what)


class PerDtype(torch.nn.Module):
    """Runs `inner` on several groups of `k` inputs (one group per dtype) so
    that one export covers many dtypes."""

    def __init__(self, inner, k):
        super().__init__()
        self.inner, self.k = inner, k

    def forward(self, *args):
        out = []
        for g in range(0, len(args), self.k):
            out.extend(torch.utils._pytree.tree_leaves(self.inner(*args[g : g + self.k])))
        return tuple(out)


def run_compare(pte, module, runs, *, rtol=1e-4, atol=1e-5):
    """Runs `pte` with pyexec on each input tuple and compares with eager."""
    import pyexec

    method = pyexec.load(pte).load_method("forward")
    for args in runs:
        with torch.no_grad():
            expected = module(*[x.clone() if isinstance(x, torch.Tensor) else x for x in args])
        got = method.execute([x.clone() if isinstance(x, torch.Tensor) else x for x in args])
        compare(got, expected, rtol=rtol, atol=atol)
    return method


def check_custom(module, inputs, *, expect_ops=(), run_inputs=None, rtol=1e-4, atol=1e-5, **kw):
    pte = export_custom(module, inputs, **kw)
    missing = set(expect_ops) - op_names(pte)
    assert not missing, f"program lacks {missing}: {sorted(op_names(pte))}"
    run_compare(pte, module, run_inputs or [inputs], rtol=rtol, atol=atol)
    return pte


def expect_failure(pte, inputs, match):
    import pyexec

    method = pyexec.load(pte).load_method("forward")
    with pytest.raises(pyexec.Error, match=match):
        method.execute([x.clone() for x in inputs])


# ---- view-like copies, all dtypes --------------------------------------------------


class Views(torch.nn.Module):
    def forward(self, x):
        return (
            x.view(5, 21),  # view_copy
            x.reshape(-1, 7),
            x.permute(2, 0, 1),  # permute_copy
            x.transpose(0, 2),  # transpose_copy (preserved)
            x[0].t(),  # t_copy (preserved)
            x[:, :1].expand(2, 3, 4, 7),  # expand_copy
            x.unsqueeze(-1),  # unsqueeze_copy
            x[:, :1].squeeze(1),  # squeeze_copy.dim (preserved)
            x[:1, :1].squeeze(),  # squeeze_copy.out (preserved)
            x[:1].squeeze([0, 2]),  # squeeze_copy.dims
            torch.cat([x, x[:, :2]], dim=1),  # cat
            torch.cat([x[:, :, 1:], x], dim=-1),
            torch.stack([x[0], x[1], x[2]], dim=1),  # stack (preserved)
            x[:, 1:4:2],  # slice with step
            x[..., -3:],  # negative start
            x[:, -100:100],  # clamped
            x[:, 4:2],  # empty slice
            x[-1],  # select, negative index
            x[:, 2],
            torch.split(x, 3, dim=2),  # split_copy (preserved)
            torch.split(x, [1, 4], dim=1),  # split_with_sizes_copy
            torch.unbind(x, 1),  # unbind_copy (preserved)
            torch.narrow_copy(x, 2, 1, 5),
            torch.diagonal(x, 1, 1, 2),
            torch.diagonal(x, -1, 2, 0),
            x.as_strided((2, 3, 4), (9, 1, 2), 3),
            x.unfold(2, 3, 2),
            torch.flip(x, [0, 2]),
            torch.flip(x, [-2]),
            x.repeat(2, 1, 1, 2),
            F.pad(x, (1, 2, -1, 0)),
            x.detach(),  # detach_copy (preserved)
            x.clone(),
        )


VIEW_PRESERVE = [
    aten.transpose.int,
    aten.t.default,
    aten.squeeze.dim,
    aten.squeeze.default,
    aten.stack.default,
    aten.split.Tensor,
    aten.unbind.int,
    aten.detach.default,
]


@pytest.mark.parametrize("dtypes", [ALL_DTYPES[:5], ALL_DTYPES[5:]], ids=["floats_int8", "ints_bool"])
def test_views_all_dtypes(dtypes):
    inputs = tuple(make((3, 5, 7), dt, n) for n, dt in enumerate(dtypes))
    check_custom(
        PerDtype(Views(), 1),
        inputs,
        preserve=VIEW_PRESERVE,
        expect_ops={
            "aten::view_copy.out",
            "aten::permute_copy.out",
            "aten::transpose_copy.int_out",
            "aten::t_copy.out",
            "aten::expand_copy.out",
            "aten::unsqueeze_copy.out",
            "aten::squeeze_copy.dim_out",
            "aten::squeeze_copy.dims_out",
            "aten::squeeze_copy.out",
            "aten::cat.out",
            "aten::stack.out",
            "aten::slice_copy.Tensor_out",
            "aten::select_copy.int_out",
            "aten::split_copy.Tensor_out",
            "aten::split_with_sizes_copy.out",
            "aten::unbind_copy.int_out",
            "aten::narrow_copy.out",
            "aten::diagonal_copy.out",
            "aten::as_strided_copy.out",
            "aten::unfold_copy.out",
            "aten::flip.out",
            "aten::repeat.out",
            "aten::constant_pad_nd.out",
            "aten::detach_copy.out",
            "dim_order_ops::_clone_dim_order.out",
        },
    )


class BigViews(torch.nn.Module):
    """Sizes large enough for the blocked-transpose and contiguous-run paths."""

    def forward(self, x, y):
        return (
            x.transpose(0, 1),
            x.permute(1, 0)[3:],
            y.permute(0, 2, 1, 3),
            y.permute(3, 1, 2, 0),
            torch.cat([x, x], dim=1),
            x.view(-1),
            y.transpose(-1, -2),
        )


def test_views_large():
    dtypes = [torch.float32, torch.float64, torch.bfloat16, torch.uint8]
    inputs = sum(((make((67, 45), dt, n), make((2, 33, 19, 40), dt, n + 9)) for n, dt in enumerate(dtypes)), ())
    check_custom(PerDtype(BigViews(), 2), inputs, expect_ops={"aten::permute_copy.out", "aten::cat.out"})


class ZeroDimAndEmpty(torch.nn.Module):
    def forward(self, s, e, v):
        return (
            s.unsqueeze(0),
            s.expand(3, 2),
            s.view(1, 1),
            s.clone(),
            s.reshape(-1),
            torch.stack([s, s * 2]),
            v[2],  # select -> 0-d
            v[-5],
            e.permute(1, 0),
            torch.cat([e, e], 0),
            torch.cat([e, e], 1),
            torch.cat([v, v.new_zeros(0)]),  # legacy empty 1-D tensor is skipped
            e.view(4, 0),
            e[:, 1:3],
            torch.flip(e, [0]),
            e.repeat(2, 2),
            F.pad(e, (1, 1), value=2.0),
            e.unsqueeze(1),
            v.repeat(0),
            torch.split(v, [0, 5]),
        )


def test_zero_dim_and_empty():
    check_custom(
        ZeroDimAndEmpty(),
        (torch.tensor(1.5), torch.zeros(0, 4), torch.arange(5.0)),
        preserve=[aten.stack.default],
        expect_ops={"aten::stack.out", "aten::expand_copy.out", "aten::constant_pad_nd.out"},
    )


class ChannelsLast(torch.nn.Module):
    def forward(self, x):
        y = x.contiguous(memory_format=torch.channels_last)  # _to_dim_order_copy, layout change
        z = x.to(torch.float64).contiguous(memory_format=torch.channels_last)
        return (
            y.permute(0, 2, 3, 1).contiguous(),  # permute of a strided input
            y[:, 1].contiguous(),
            torch.cat([y, y], 1).contiguous(),
            torch.flip(y, [2]).contiguous(),
            y.contiguous(),  # _clone_dim_order back to contiguous
            z.contiguous(),
            y[:, :, 1:3].contiguous(),
        )


def test_dim_order_changes():
    check_custom(
        ChannelsLast(),
        (make((2, 3, 5, 7), torch.float32),),
        expect_ops={"dim_order_ops::_to_dim_order_copy.out", "dim_order_ops::_clone_dim_order.out"},
    )


# ---- dtype copies and factories -------------------------------------------------------


class Casts(torch.nn.Module):
    def forward(self, f, i, b):
        return (
            f.to(torch.float64),
            f.to(torch.float16),
            f.to(torch.bfloat16),
            f.to(torch.bool),
            f.double().to(torch.float32),
            i.to(torch.float32),
            i.to(torch.int8),
            i.to(torch.int32),
            i.to(torch.uint8),
            i.to(torch.bool),
            b.to(torch.float32),
            b.to(torch.int64),
            i.float().to(torch.float16),
            f.clone(),
            f.detach(),  # alias_copy
            f[:, 2:4].to(torch.int64),
            torch.empty(2, 3).fill_(4.0),
        )


@pytest.mark.parametrize("skip_dim_order", [False, True], ids=["dim_order", "to_copy"])
def test_casts(skip_dim_order):
    f = torch.tensor([[0.0, -0.0, 1.5, -2.75, float("inf")], [float("-inf"), float("nan"), 65504.0, 1e-8, -7.0]])
    i = torch.tensor([[0, -1, 127, 128, -129], [255, 256, 70000, -70000, 5]])
    b = torch.tensor([[True, False, True, True, False], [False, False, True, False, True]])
    expect = (
        {"aten::_to_copy.out", "aten::clone.out", "aten::empty.out", "aten::alias_copy.out"}
        if skip_dim_order
        else {"dim_order_ops::_to_dim_order_copy.out", "dim_order_ops::_empty_dim_order.out", "aten::alias_copy.out"}
    )
    check_custom(Casts(), (f, i, b), skip_dim_order=skip_dim_order, expect_ops=expect)


class Factories(torch.nn.Module):
    def forward(self, x, n):
        return (
            torch.full((2, 3), 2.5),
            torch.full((3,), 7, dtype=torch.int64),
            torch.full((2, 2), True),
            torch.full((5,), float("nan")),
            torch.full((3,), float("-inf"), dtype=torch.float16),
            torch.full((), -3, dtype=torch.int8),
            torch.full_like(x, 7),
            torch.full_like(x, -1.25, dtype=torch.bfloat16),
            torch.zeros_like(x, dtype=torch.int32),
            torch.ones_like(x),
            torch.zeros(3, 5),
            torch.ones(2, 9, dtype=torch.int16),
            torch.ones(4, dtype=torch.bool),
            torch.zeros(0, 3),
            torch.arange(7),
            torch.arange(2, 17, 3),
            torch.arange(10, -3, -4),
            torch.arange(0.5, 3.0, 0.25),
            torch.arange(0, 1, 0.1),
            torch.arange(5, dtype=torch.float32),
            torch.arange(3, 3),
            torch.arange(-2.0, 2.0, 0.7, dtype=torch.float64),
            torch.arange(6, dtype=torch.int32),
            x + n,
        )


def test_factories():
    check_custom(
        Factories(),
        (make((3, 5), torch.float32), torch.tensor(1.0)),
        preserve=[aten.zeros.default, aten.ones.default],
        expect_ops={
            "aten::full.out",
            "aten::full_like.out",
            "aten::zeros.out",
            "aten::ones.out",
            "aten::arange.start_out",
        },
    )


class Arange1(torch.nn.Module):
    def forward(self, x):
        return torch.arange(9) + x, torch.arange(4.5) + x


def test_arange_end_only():
    check_custom(Arange1(), (torch.tensor(1),), preserve=[aten.arange.default], expect_ops={"aten::arange.out"})


class BufferCopy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.zeros(3, 4))
        self.register_buffer("ibuf", torch.zeros(2, 4, dtype=torch.int32))

    def forward(self, x, y):
        # Read the buffers before writing them: the exporter substitutes the
        # copy_ source for later reads, without broadcasting or casting it.
        a, b = self.buf * 2, self.ibuf + 1
        self.buf.copy_(x[0])  # copy_, broadcast [4] -> [3, 4]
        self.ibuf.copy_(y)  # copy_, float -> int32
        z = y.clone()
        z.copy_(x[1])  # copy.out with broadcast
        return a, b, z


def test_copy_inplace_and_out():
    runs = [(make((2, 4), torch.float32, s), make((2, 4), torch.float32, s + 5)) for s in range(3)]
    check_custom(BufferCopy(), runs[0], run_inputs=runs, expect_ops={"aten::copy_", "aten::copy.out"})


# ---- advanced indexing ---------------------------------------------------------------


class Index(torch.nn.Module):
    def forward(self, x, i, j, m, m1, k):
        return (
            x[i],  # int64 index with negatives, 2-D
            x[:, j],  # int32 index on dim 1
            x[i, j],  # broadcast [2, 3] with [3]
            x[i, :, j],  # non-adjacent: indexed dims go first
            x[None][:, i, :, j],  # non-adjacent, the first one not at dim 0
            x[:, i, j % 5],  # adjacent at dims 1-2
            x[..., j],
            x[m],  # 2-D bool mask over dims 0-1
            x[m1],  # 1-D mask
            x[m1, 1:3],
            aten.index.Tensor(x, [k]),  # 0-d index tensor
            x[None, i],
            x[:, None, j],
        )


def test_index_tensor():
    dtypes = [torch.float32, torch.int64, torch.bool, torch.float16, torch.uint8]
    i = torch.tensor([[0, -1, 2], [3, 1, -4]])
    j = torch.tensor([4, 0, -2], dtype=torch.int32)
    masks = [
        (make((4, 5), torch.bool, 3), torch.tensor([True, False, True, True]), torch.tensor(-2)),
        (torch.zeros(4, 5, dtype=torch.bool), torch.zeros(4, dtype=torch.bool), torch.tensor(3)),
        (torch.ones(4, 5, dtype=torch.bool), torch.ones(4, dtype=torch.bool), torch.tensor(0)),
    ]
    runs = [
        sum(((make((4, 5, 6), dt, n), i, j, m, m1, k) for n, dt in enumerate(dtypes)), ())
        for m, m1, k in masks
    ]
    check_custom(PerDtype(Index(), 6), runs[0], run_inputs=runs, expect_ops={"aten::index.Tensor_out"})


class IndexPut(torch.nn.Module):
    def forward(self, x, i, j, v, m):
        a = x.clone()
        a[i] = v  # rows, values [3, 6]
        b = x.clone()
        b[i, j] = v[0, 0]  # 0-d value broadcast
        c = x.clone()
        c[:, j] = v[:, :5].t()  # columns
        d = x.clone()
        d[m] = v[0, 0]  # bool mask
        e = x.clone()
        e[i, 1:4] = v[:, :1]  # broadcast along the slice
        out = [a, b, c, d, e]
        if x.dtype != torch.bool:
            out.append(torch.index_put(x, (i,), v, accumulate=True))  # duplicate rows accumulate
            out.append(torch.index_put(x, (i, j), v[0, :3], accumulate=True))
        return tuple(out)


def test_index_put():
    dtypes = [torch.float32, torch.int32, torch.float64, torch.bool, torch.bfloat16, torch.int8]
    i = torch.tensor([1, -1, 1])
    j = torch.tensor([0, 5, 2])
    m = make((5, 6), torch.bool, 9)
    inputs = sum(((make((5, 6), dt, n), i, j, make((3, 6), dt, n + 10), m) for n, dt in enumerate(dtypes)), ())
    check_custom(PerDtype(IndexPut(), 5), inputs, expect_ops={"aten::index_put.out"})


class IndexPutInPlace(torch.nn.Module):
    """In-place writes on one buffer, all values being inputs. (With the
    reinplace pass, ExecuTorch 1.5.1's memory planner lets temporaries made
    after the first index_put_ overlap its buffer, so none are made here.)"""

    def forward(self, x, i, j, v, w, s, m):
        a = x.clone()
        a[i] = v
        a[m] = s
        a.index_put_((i, j), w, accumulate=True)
        return a


@pytest.mark.parametrize("dtype", [torch.float32, torch.int64], ids=str)
def test_index_put_inplace(dtype):
    # one dtype per program: see IndexPutInPlace
    x = make((5, 6), dtype)
    i = torch.tensor([1, -1, 1])
    j = torch.tensor([0, 5, 2])
    v, w, s = make((3, 6), dtype, 7), make((3,), dtype, 8), make((), dtype, 10)
    m = make((5, 6), torch.bool, 9)
    check_custom(IndexPutInPlace(), (x, i, j, v, w, s, m), reinplace=True, expect_ops={"aten::index_put_"})


class IndexCopy(torch.nn.Module):
    def forward(self, x, i, v):
        return torch.index_copy(x, 0, i, v), torch.index_copy(x, 1, i[:2], v[:2].t())


def test_index_copy():
    # x.index_copy_ becomes index_put by default; preserving index_copy keeps index_copy.out
    x = make((5, 5), torch.float32)
    i = torch.tensor([4, 0, 2])
    v = make((3, 5), torch.float32, 1)
    m = IndexCopy()
    pte = check_custom(m, (x, i, v), preserve=[aten.index_copy.default], expect_ops={"aten::index_copy.out"})
    expect_failure(pte, (x, torch.tensor([0, 5, 1]), v), "out of bounds")
    expect_failure(pte, (x, torch.tensor([0, -1, 1]), v), "out of bounds")


class GatherScatter(torch.nn.Module):
    def forward(self, x, idx, idxd, idx0, src, sel, row, col):
        return (
            torch.gather(x, 1, idxd),
            torch.gather(x, 0, idx0),
            torch.gather(x, -1, idx[:, :1]),
            torch.scatter(x, 1, idx, src),
            torch.scatter(x, 0, idx0, src),
            torch.scatter(x, 1, idx, 3),
            torch.scatter_add(x, 1, idxd, src),  # duplicates accumulate
            torch.scatter_add(x, 0, idx0[:, :3], src),
            torch.index_select(x, 0, sel),
            torch.index_select(x, 1, sel),
            torch.index_select(x, -1, sel[:1]),
            torch.slice_scatter(x, src[:, :2], 1, 1, 5, 2),
            torch.slice_scatter(x, src[:2], 0, -2),
            torch.select_scatter(x, row, 0, -1),
            torch.select_scatter(x, col, 1, 2),
        )


def test_gather_scatter():
    dtypes = [
        torch.float32, torch.float64, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.int8, torch.bool
    ]
    idx = torch.tensor([[0, 6, 3, 5], [1, 2, 4, 0], [6, 5, 4, 0], [2, 3, 1, 4]])  # no duplicates per row
    idxd = torch.tensor([[0, 6, 3, 3], [1, 1, 1, 2], [6, 5, 4, 0], [2, 2, 2, 2]])
    idx0 = torch.tensor([[3, 0, 0, 1, 2], [1, 1, 2, 0, 3]])
    sel = torch.tensor([3, 0, 3, 2])

    def group(n, dt, idx=idx, sel=sel):
        x, src = make((4, 7), dt, n), make((4, 7), dt, n + 20)
        row, col = make((7,), dt, n + 40), make((4,), dt, n + 60)
        return (x, idx, idxd, idx0, src, sel, row, col)

    inputs = sum((group(n, dt) for n, dt in enumerate(dtypes)), ())
    module = PerDtype(GatherScatter(), 8)
    pte = check_custom(
        module,
        inputs,
        preserve=[aten.select_scatter.default],
        expect_ops={
            "aten::gather.out",
            "aten::scatter.src_out",
            "aten::scatter.value_out",
            "aten::scatter_add.out",
            "aten::index_select.out",
            "aten::slice_scatter.out",
            "aten::select_scatter.out",
        },
    )
    bad = idx.clone()
    bad[2, 1] = 7
    rest = inputs[8:]
    expect_failure(pte, group(0, torch.float32, idx=bad) + rest, "out of bounds")
    bad[2, 1] = -1
    expect_failure(pte, group(0, torch.float32, idx=bad) + rest, "out of bounds")
    expect_failure(pte, group(0, torch.float32, sel=torch.tensor([0, 4, 1, 2])) + rest, "out of bounds")


class MaskedNonzero(torch.nn.Module):
    def forward(self, x, m, r):
        return (
            torch.masked_select(x, m),
            torch.masked_select(x, m[0]),  # mask broadcast over rows
            torch.nonzero(x).contiguous(),
            torch.repeat_interleave(r, output_size=6),
        )


def test_masked_select_nonzero():
    dtypes = [torch.float32, torch.int64, torch.bool, torch.float16]
    xs = [make((3, 5), dt, n) for n, dt in enumerate(dtypes)]
    xs[0][0, 0] = float("nan")
    xs[0][1, 1] = -0.0
    xs[0][2, 2] = 0.0
    xs[3][0, :] = 0
    zeros = [torch.zeros_like(x) for x in xs]
    variants = [
        (xs, make((3, 5), torch.bool, 4), torch.tensor([1, 0, 3, 2])),
        (zeros, torch.zeros(3, 5, dtype=torch.bool), torch.tensor([0, 6, 0, 0])),
        (xs, torch.ones(3, 5, dtype=torch.bool), torch.tensor([2, 1, 1, 2])),
    ]
    runs = [sum(((x, m, r) for x in group), ()) for group, m, r in variants]
    check_custom(
        PerDtype(MaskedNonzero(), 3),
        runs[0],
        run_inputs=runs,
        expect_ops={"aten::masked_select.out", "aten::nonzero.out", "aten::repeat_interleave.Tensor_out"},
    )


# ---- preserved decomposable ops ----------------------------------------------------------


class RollTri(torch.nn.Module):
    def forward(self, x, y):
        return (
            torch.roll(x, 2, 1),
            torch.roll(x, (-1, 9), (0, 2)),
            torch.roll(x, 5),
            torch.roll(y, 3, 0),
            torch.tril(x),
            torch.tril(x, -1),
            torch.triu(x, 2),
            torch.triu(x[0], -2),
            torch.tril(y.view(3, 3)),
        )


def test_roll_tril_triu():
    dtypes = [torch.float32, torch.int64, torch.bool, torch.bfloat16, torch.uint8]
    inputs = sum(((make((3, 4, 6), dt, n), make((9,), dt, n + 10)) for n, dt in enumerate(dtypes)), ())
    check_custom(
        PerDtype(RollTri(), 2),
        inputs,
        preserve=[aten.roll.default, aten.tril.default, aten.triu.default],
        expect_ops={"aten::roll.out", "aten::tril.out", "aten::triu.out"},
    )


# ---- failures ----------------------------------------------------------------------------


class Gathers(torch.nn.Module):
    def forward(self, x, i):
        return x[i], torch.index_select(x, 0, i)


def test_out_of_range_indices_fail():
    x = make((4, 3), torch.float32)
    pte = export_custom(Gathers(), (x, torch.tensor([0, 3])))
    run_compare(pte, Gathers(), [(x, torch.tensor([0, 3]))])
    expect_failure(pte, (x, torch.tensor([0, 4])), "out of bounds")
    expect_failure(pte, (x, torch.tensor([-5, 1])), "out of bounds")


class PutOOB(torch.nn.Module):
    def forward(self, x, i, v):
        y = x.clone()
        y[i] = v
        return y


def test_index_put_out_of_range_fails():
    x = make((4, 3), torch.float32)
    v = make((2, 3), torch.float32, 1)
    pte = export_custom(PutOOB(), (x, torch.tensor([0, 3]), v))
    run_compare(pte, PutOOB(), [(x, torch.tensor([-4, 3]), v)])
    expect_failure(pte, (x, torch.tensor([4, 0]), v), "out of bounds")


class DynView(torch.nn.Module):
    def forward(self, x):
        return x.view(-1, 2), torch.cat([x, x], 0), x[1:], x.transpose(0, 1)


def test_dynamic_shapes():
    dim = torch.export.Dim("n", min=3, max=16)
    x = make((6, 4), torch.float32)
    runs = [(make((n, 4), torch.float32, n),) for n in (6, 3, 13, 16)]
    pte = export_custom(DynView(), (x,), dynamic_shapes=({0: dim},))
    run_compare(pte, DynView(), runs)
