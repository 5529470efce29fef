"""Negative entries in index tensors (native/src/kernels/index/, where embedding lives too).

torch eager is not uniform here, and pyexec follows it kernel by kernel:

- index.Tensor, index_put and index_put_ wrap a negative index like Python
  (-1 is the last row); only indices below -size fail.
- index_select, gather, scatter (src / value), scatter_add, index_copy and
  embedding reject every negative index.
- select_scatter and slice_scatter take scalar indices, which wrap.

Each case exports a small program with ExecuTorch's exporter, runs it with
pyexec on negative indices and compares with torch eager run on the same
inputs: wrapping kernels must give eager's values, rejecting kernels must
raise pyexec.ExecutionError naming the kernel, the index and the valid range
while eager raises too (both sides are asserted, so a change on either side
fails the test).

One trap is pinned down at the end: `state.index_copy_(0, pos, x)` reaches
the program as index_put (the exporter decomposes index_copy), so pos = -1
writes the last row there, as eager's index_put does, although eager's
index_copy_ raises. Preserving index_copy keeps eager's check.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from support.export import assert_close

import pyexec

aten = torch.ops.aten

ROWS, COLS = 16, 8  # the [16, 8] state of the original report


def export(module: torch.nn.Module, inputs: tuple[Any, ...], *, preserve=(), reinplace=False) -> bytes:
    """Exports `module` with ExecuTorch (keeping the ops in `preserve`
    undecomposed) and returns the .pte bytes."""
    from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge

    args = tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in inputs)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        ep = torch.export.export(module, args, strict=False)
        edge = to_edge(ep, compile_config=EdgeCompileConfig(_check_ir_validity=False, preserve_ops=list(preserve)))
        config = ExecutorchBackendConfig(run_reinplace_pass=reinplace)
        return bytes(edge.to_executorch(config).buffer)


def operators(pte: bytes) -> set[str]:
    """The operator names ("aten::index_put.out") the program calls."""
    from executorch.exir._serialize._program import deserialize_pte_binary

    prog = deserialize_pte_binary(pte)
    prog = getattr(prog, "program", prog)
    plan = prog.execution_plan[0]
    return {f"{op.name}.{op.overload}" if op.overload else op.name for op in plan.operators}


def clones(args: tuple[Any, ...]) -> list[Any]:
    return [x.clone() if isinstance(x, torch.Tensor) else x for x in args]


def run_eager(module: torch.nn.Module, args: tuple[Any, ...]) -> list[torch.Tensor]:
    with torch.no_grad():
        out = module(*clones(args))
    return list(out) if isinstance(out, (tuple, list)) else [out]


def run_pyexec(pte: bytes, args: tuple[Any, ...]) -> list[Any]:
    return pyexec.load(pte).load_method("forward").execute(clones(args))


def assert_same_as_eager(pte: bytes, module: torch.nn.Module, args: tuple[Any, ...]) -> None:
    expected = run_eager(module, args)
    got = run_pyexec(pte, args)
    assert len(got) == len(expected)
    for k, (g, e) in enumerate(zip(got, expected)):
        assert_close(g, e, what=f"output {k}")


def assert_both_reject(pte: bytes, module: torch.nn.Module, args: tuple[Any, ...], message: str) -> None:
    """Eager raises an index error, and pyexec an ExecutionError whose message
    contains `message` (plain text, not a pattern)."""
    with pytest.raises((IndexError, RuntimeError), match=r"out of (bounds|range)"):
        run_eager(module, args)
    with pytest.raises(pyexec.ExecutionError, match=re.escape(message)):
        run_pyexec(pte, args)


def state(seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(ROWS, COLS, generator=g)


def rows(n: int, seed: int = 1) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randn(n, COLS, generator=g)


def idx(*values: int, dtype: torch.dtype = torch.int64) -> torch.Tensor:
    return torch.tensor(values, dtype=dtype)


# ---- kernels that wrap negative indices ---------------------------------------------


class IndexRead(torch.nn.Module):
    def forward(self, x, i, j):
        return x[i], x[i, j], x[:, j]


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32], ids=str)
def test_index_tensor_wraps_negative_indices_like_eager(dtype):
    x = state()
    pte = export(IndexRead(), (x, idx(0, 3, dtype=dtype), idx(1, 2, dtype=dtype)))
    assert "aten::index.Tensor_out" in operators(pte)
    m = IndexRead()
    assert_same_as_eager(pte, m, (x, idx(-1, -16, dtype=dtype), idx(-8, -1, dtype=dtype)))
    expected_last_row = run_eager(m, (x, idx(-1, dtype=dtype), idx(0, dtype=dtype)))[0]
    assert torch.equal(expected_last_row, x[15:16])  # eager really wraps


def test_index_tensor_below_minus_size_fails_on_both_sides():
    x = state()
    pte = export(IndexRead(), (x, idx(0, 3), idx(1, 2)))
    assert_both_reject(
        pte,
        IndexRead(),
        (x, idx(-17, 0), idx(1, 2)),
        "aten::index.Tensor_out: index -17 is out of bounds for dimension 0 with size 16 (valid range [-16, 15])",
    )


def test_index_tensor_on_the_last_dim_below_minus_size_fails_on_both_sides():
    # x[:, j]: one index on the last dim, the kernel's row-gather path
    x = state()
    pte = export(IndexRead(), (x, idx(0, 3), idx(1, 2)))
    assert_both_reject(
        pte,
        IndexRead(),
        (x, idx(0, 1), idx(1, -9)),
        f"aten::index.Tensor_out: index -9 is out of bounds for dimension 1 with size {COLS} (valid range "
        f"[-{COLS}, {COLS - 1}])",
    )


class IndexPut(torch.nn.Module):
    def forward(self, x, i, v):
        return torch.index_put(x, (i,), v), torch.index_put(x, (i,), v, accumulate=True)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32], ids=str)
def test_index_put_wraps_negative_indices_like_eager(dtype):
    x, v = state(), rows(3)
    pte = export(IndexPut(), (x, idx(0, 1, 2, dtype=dtype), v))
    assert "aten::index_put.out" in operators(pte)
    m = IndexPut()
    assert_same_as_eager(pte, m, (x, idx(-1, -16, -1, dtype=dtype), v))  # -1 twice accumulates
    put = run_eager(m, (x, idx(-1, 2, 3, dtype=dtype), v))[0]
    assert torch.equal(put[15], v[0])  # eager really writes the last row


def test_index_put_below_minus_size_fails_on_both_sides():
    x, v = state(), rows(1)
    pte = export(IndexPut(), (x, idx(0), v))
    assert_both_reject(
        pte,
        IndexPut(),
        (x, idx(-17), v),
        "aten::index_put.out: index -17 is out of bounds for dimension 0 with size 16 (valid range [-16, 15])",
    )


class IndexPutInPlace(torch.nn.Module):
    """Every value is an input: with the reinplace pass, ExecuTorch 1.5.1's
    memory planner lets temporaries made after the first index_put_ overlap
    its buffer (see test_ops_shape.IndexPutInPlace)."""

    def forward(self, x, i, j, v, w):
        a = x.clone()
        a.index_put_((i,), v)
        a.index_put_((i, j), w, accumulate=True)
        return a


def test_index_put_inplace_wraps_negative_indices_like_eager():
    # (ExecuTorch 1.5.1's own index_put_ rejects -1 here; torch eager wraps.)
    x, v, w = state(), rows(2), rows(1)[0, :2]
    pte = export(IndexPutInPlace(), (x, idx(0, 1), idx(2, 3), v, w), reinplace=True)
    assert "aten::index_put_" in operators(pte)
    assert_same_as_eager(pte, IndexPutInPlace(), (x, idx(-1, -16), idx(-1, -8), v, w))


class ScalarScatters(torch.nn.Module):
    def forward(self, x, row, block):
        return torch.select_scatter(x, row, 0, -1), torch.slice_scatter(x, block, 0, -2)


def test_select_and_slice_scatter_wrap_negative_scalar_indices_like_eager():
    x = state()
    pte = export(ScalarScatters(), (x, rows(1)[0], rows(2)), preserve=(aten.select_scatter.default,))
    assert {"aten::select_scatter.out", "aten::slice_scatter.out"} <= operators(pte)
    assert_same_as_eager(pte, ScalarScatters(), (x, rows(1, 5)[0], rows(2, 6)))


# ---- kernels that reject negative indices ------------------------------------------


class IndexSelect(torch.nn.Module):
    def forward(self, x, i):
        return torch.index_select(x, 0, i)


class Gather(torch.nn.Module):
    def forward(self, x, i):
        return torch.gather(x, 1, i)


class ScatterSrc(torch.nn.Module):
    def forward(self, x, i):
        return torch.scatter(x, 1, i, torch.ones_like(i, dtype=x.dtype))


class ScatterValue(torch.nn.Module):
    def forward(self, x, i):
        return torch.scatter(x, 1, i, 5.0)


class ScatterAdd(torch.nn.Module):
    def forward(self, x, i):
        return torch.scatter_add(x, 1, i, torch.ones_like(i, dtype=x.dtype))


class IndexCopy(torch.nn.Module):
    def forward(self, x, i):
        return torch.index_copy(x, 0, i, torch.ones(i.shape[0], x.shape[1]))


class Embedding(torch.nn.Module):
    def forward(self, x, i):
        return F.embedding(i, x)


DIM0 = "is out of bounds for dimension 0 with size 16"
DIM1 = "is out of bounds for dimension 1 with size 8"

# kernel, module, a good index, a negative index, what pyexec must say, ops to preserve
REJECTING = [
    ("aten::index_select.out", IndexSelect, idx(2, 5), idx(2, -1), f"index -1 {DIM0}", ()),
    ("aten::gather.out", Gather, idx(1, 7).view(1, 2), idx(1, -1).view(1, 2), f"index -1 {DIM1}", ()),
    ("aten::scatter.src_out", ScatterSrc, idx(1, 7).view(1, 2), idx(-1, 3).view(1, 2), f"index -1 {DIM1}", ()),
    ("aten::scatter.value_out", ScatterValue, idx(1, 7).view(1, 2), idx(-8, 3).view(1, 2), f"index -8 {DIM1}", ()),
    ("aten::scatter_add.out", ScatterAdd, idx(1, 7).view(1, 2), idx(4, -1).view(1, 2), f"index -1 {DIM1}", ()),
    ("aten::index_copy.out", IndexCopy, idx(3), idx(-1), f"index -1 {DIM0}", (aten.index_copy.default,)),
    (
        "aten::embedding.out",
        Embedding,
        idx(0, 15),
        idx(-1, 0),
        "index -1 is out of range for a weight with 16 rows",
        (),
    ),
]


@pytest.mark.parametrize(
    "kernel,module,good,negative,message,preserve", REJECTING, ids=[r[0].split("::")[1] for r in REJECTING]
)
def test_negative_index_is_rejected_like_eager(kernel, module, good, negative, message, preserve):
    x = state()
    pte = export(module(), (x, good), preserve=preserve)
    assert kernel in operators(pte)
    assert_same_as_eager(pte, module(), (x, good))  # the program itself runs
    size = COLS if "dimension 1" in message else ROWS
    assert_both_reject(pte, module(), (x, negative), f"{kernel}: {message} (valid range [0, {size - 1}]")


def test_int32_negative_index_is_rejected_by_index_select_and_embedding():
    x = state()
    for module, kernel in ((IndexSelect, "aten::index_select.out"), (Embedding, "aten::embedding.out")):
        pte = export(module(), (x, idx(1, 2, dtype=torch.int32)))
        assert kernel in operators(pte)
        assert_both_reject(pte, module(), (x, idx(0, -16, dtype=torch.int32)), f"{kernel}: index -16 ")


# ---- index_copy_ on a state buffer: the report's case -------------------------------------


class StateUpdate(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("state", torch.zeros(ROWS, COLS))

    def forward(self, pos, x):
        self.state.index_copy_(0, pos, x)
        return self.state.sum(1)


def test_index_copy_exported_by_default_becomes_index_put_which_wraps():
    """The exporter turns index_copy_ into index_put, whose eager semantics
    wrap -1 to the last row, so the program writes row 15 while eager's
    index_copy_ raises. pyexec cannot see the difference in the program;
    this test fails if the exporter ever keeps index_copy here."""
    x = rows(1)
    pte = export(StateUpdate(), (idx(3), x))
    ops = operators(pte)
    assert "aten::index_put.out" in ops and not any("index_copy" in op for op in ops), ops
    with pytest.raises(IndexError, match=r"index_copy_\(\): index -1 is out of bounds"):
        run_eager(StateUpdate(), (idx(-1), x))
    got = run_pyexec(pte, (idx(-1), x))[0]
    expected = torch.index_put(torch.zeros(ROWS, COLS), (idx(-1),), x).sum(1)  # eager index_put
    assert_close(got, expected, what="state row sums")
    assert got[15] != 0 and not got[:15].any()


def test_index_copy_preserved_on_a_state_buffer_rejects_minus_one_like_eager():
    pte = export(StateUpdate(), (idx(3), rows(1)), preserve=(aten.index_copy.default,))
    assert "aten::index_copy.out" in operators(pte)
    assert_same_as_eager(pte, StateUpdate(), (idx(3), rows(1, 4)))
    assert_both_reject(
        pte,
        StateUpdate(),
        (idx(-1), rows(1)),
        "aten::index_copy.out: index -1 is out of bounds for dimension 0 with size 16 (valid range [0, 15]",
    )
