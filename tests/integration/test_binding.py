"""Zero-copy IO binding (SPEC §3-§6): inputs read in place, bound outputs,
rejections, in-place (mutated) inputs, clone semantics and the alias query.

Every program here is exported with ExecuTorch's real exporter and every
result is compared with torch eager."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
import torch
from support.export import as_numpy, assert_close, export_program
from torch.export import Dim

import pyexec
from pyexec import InvalidArgumentError

KINDS = ("torch", "numpy")


def as_kind(t: torch.Tensor, kind: str) -> Any:
    """A fresh copy of `t` as a torch tensor or a numpy array."""
    t = t.detach().clone()
    return t if kind == "torch" else t.numpy()


def empty(shape: tuple[int, ...], kind: str, dtype: Any = torch.float32) -> Any:
    return as_kind(torch.full(shape, -7.0, dtype=dtype), kind)


def ptr(x: Any) -> int:
    if isinstance(x, torch.Tensor):
        return x.data_ptr()
    return int(x.__array_interface__["data"][0])


def shares(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()
    return np.shares_memory(as_numpy(a), as_numpy(b))


def run_eager(module: torch.nn.Module, *args: Any) -> list[torch.Tensor]:
    with torch.no_grad():
        out = module(*[torch.as_tensor(as_numpy(a).copy()) if isinstance(a, np.ndarray) else a.clone() for a in args])
    return list(out) if isinstance(out, (tuple, list)) else [out]


# ---- models ------------------------------------------------------------------


class AddMul(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x + y, x * y


class ReturnInput(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x, x + 1


class Duplicate(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = x + 1
        return y, y


class CacheUpdate(torch.nn.Module):
    def forward(self, cache: torch.Tensor, idx: torch.Tensor, val: torch.Tensor) -> torch.Tensor:
        cache.index_copy_(0, idx, val)
        return cache.sum(0, keepdim=True)


class Double(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


class ChannelsLast(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x * 2).contiguous(memory_format=torch.channels_last)


class Recurrent(torch.nn.Module):
    """h = tanh(x @ W + h @ U)."""

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.W = torch.nn.Parameter(torch.randn(8, 8, generator=g) * 0.4)
        self.U = torch.nn.Parameter(torch.randn(8, 8, generator=g) * 0.4)

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        return torch.tanh(x @ self.W + h @ self.U)


class LinearState(torch.nn.Module):
    """h = x + h @ U as one addmm: the kernel that writes the output reads h."""

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(1)
        self.U = torch.nn.Parameter(torch.randn(8, 8, generator=g) * 0.4)

    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        return torch.addmm(x, h, self.U)


class FlipState(torch.nn.Module):
    def forward(self, x: torch.Tensor, h: torch.Tensor) -> torch.Tensor:
        return torch.flip(h, [1])


X23 = torch.randn(2, 3)
CACHE_ARGS = (torch.zeros(4, 3), torch.tensor([1]), torch.ones(1, 3))


def unplanned(module: torch.nn.Module, inputs: tuple[Any, ...], **kw: Any) -> bytes:
    return export_program(module, inputs, alloc_graph_input=False, alloc_graph_output=False, **kw)


@pytest.fixture(scope="module")
def addmul() -> bytes:
    return unplanned(AddMul(), (X23, X23))


@pytest.fixture(scope="module")
def addmul_planned() -> bytes:
    return export_program(AddMul(), (X23, X23))


@pytest.fixture(scope="module")
def return_input() -> bytes:
    return unplanned(ReturnInput(), (X23,))


@pytest.fixture(scope="module")
def duplicate() -> bytes:
    return unplanned(Duplicate(), (X23,))


@pytest.fixture(scope="module")
def cache_inplace() -> bytes:
    return unplanned(CacheUpdate(), CACHE_ARGS, reinplace=True)


@pytest.fixture(scope="module")
def cache_planned() -> bytes:
    return export_program(CacheUpdate(), CACHE_ARGS)


@pytest.fixture(scope="module")
def dynamic() -> bytes:
    return unplanned(Double(), (torch.randn(6, 3),), dynamic_shapes={"x": {0: Dim("n", max=8)}})


@pytest.fixture(scope="module")
def channels_last() -> bytes:
    return unplanned(ChannelsLast(), (torch.randn(1, 2, 3, 4),))


def method(pte: bytes, output_type: str = "auto") -> pyexec.Method:
    return pyexec.load(pte).load_method("forward", output_type=output_type)


def xy(kind: str, seed: int = 0) -> tuple[Any, Any]:
    g = torch.Generator().manual_seed(seed)
    return as_kind(torch.randn(2, 3, generator=g), kind), as_kind(torch.randn(2, 3, generator=g), kind)


# ---- binding -------------------------------------------------------------------


def test_program_shapes(addmul: bytes, addmul_planned: bytes, cache_inplace: bytes) -> None:
    """The fixtures are what the tests below assume."""
    outs = pyexec.load(addmul).method_meta("forward").outputs
    assert all(o is not None and not o.is_memory_planned for o in outs)
    outs = pyexec.load(addmul_planned).method_meta("forward").outputs
    assert all(o is not None and o.is_memory_planned for o in outs)
    assert pyexec.load(cache_inplace).operators()[0].count("aten::index_put_") == 1
    cache = pyexec.load(cache_inplace).method_meta("forward").inputs[0]
    assert cache is not None and cache.is_mutated and not cache.is_memory_planned


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("clone", [True, False])
def test_bound_outputs_are_written_in_place(addmul: bytes, kind: str, clone: bool) -> None:
    m = method(addmul)
    o0, o1 = empty((2, 3), kind), empty((2, 3), kind)
    p0, p1 = ptr(o0), ptr(o1)
    m.set_output(o0, 0)
    m.set_output(o1, 1)
    for seed in range(3):
        x, y = xy(kind, seed)
        out = m.execute([x, y], clone_outputs=clone)
        assert out[0] is o0 and out[1] is o1
        assert ptr(o0) == p0 and ptr(o1) == p1
        for got, exp in zip(out, run_eager(AddMul(), x, y)):
            assert_close(got, exp)
        got = m.get_outputs(clone_outputs=clone)
        assert got[0] is o0 and got[1] is o1


@pytest.mark.parametrize("kind", KINDS)
def test_bind_one_output_leaves_the_other_to_the_method(addmul: bytes, kind: str) -> None:
    m = method(addmul)
    o1 = empty((2, 3), kind)
    m.set_output(o1, 1)
    x, y = xy(kind)
    out = m.execute([x, y])
    assert out[1] is o1 and not shares(out[0], o1)
    exp = run_eager(AddMul(), x, y)
    assert_close(out[0], exp[0])
    assert_close(o1, exp[1])


@pytest.mark.parametrize("kind", KINDS)
def test_bind_before_and_after_first_call(addmul: bytes, kind: str) -> None:
    x, y = xy(kind)
    exp = run_eager(AddMul(), x, y)
    before = method(addmul)
    o = empty((2, 3), kind)
    before.set_output(o, 0)  # no inputs installed, never run
    assert before.execute([x, y])[0] is o
    assert_close(o, exp[0])

    after = method(addmul)
    first = after.execute([x, y])
    assert_close(first[0], exp[0])
    o = empty((2, 3), kind)
    after.set_output(o, 0)
    assert after.execute()[0] is o  # the installed inputs are reused
    assert_close(o, exp[0])


@pytest.mark.parametrize("kind", KINDS)
def test_rebinding_stops_writing_the_previous_tensor(addmul: bytes, kind: str) -> None:
    m = method(addmul)
    a, b = empty((2, 3), kind), empty((2, 3), kind)
    m.set_output(a, 0)
    x, y = xy(kind, 1)
    m.execute([x, y])
    assert_close(a, run_eager(AddMul(), x, y)[0])
    m.set_output(b, 0)
    a[...] = 123.0
    x, y = xy(kind, 2)
    out = m.execute([x, y])
    assert out[0] is b
    assert_close(b, run_eager(AddMul(), x, y)[0])
    assert (as_numpy(a) == 123.0).all(), "the previous binding was written again"


@pytest.mark.parametrize("kind", KINDS)
def test_unbinding_returns_to_method_storage(addmul: bytes, kind: str) -> None:
    m = method(addmul)
    a = empty((2, 3), kind)
    m.set_output(a, 0)
    m.execute(list(xy(kind, 1)))
    m.set_output(None, 0)
    a[...] = 55.0
    x, y = xy(kind, 2)
    for clone in (True, False):
        out = m.execute([x, y], clone_outputs=clone)
        assert out[0] is not a and not shares(out[0], a)
        assert_close(out[0], run_eager(AddMul(), x, y)[0])
    assert (as_numpy(a) == 55.0).all(), "an unbound tensor was written"
    m.set_output(None, 0)  # unbinding twice is harmless


@pytest.mark.parametrize("kind", KINDS)
def test_dynamic_output_smaller_than_binding_is_a_view(dynamic: bytes, kind: str) -> None:
    m = method(dynamic)
    info = m.meta.outputs[0]
    assert info is not None and info.is_dynamic and info.sizes == (8, 3)
    buf = empty((8, 3), kind)
    m.set_output(buf, 0)
    for n in (5, 8, 1, 3):
        x = as_kind(torch.randn(n, 3), kind)
        out = m.execute([x])[0]
        assert tuple(out.shape) == (n, 3)
        assert ptr(out) == ptr(buf) and shares(out, buf)
        if n == 8:
            assert out is buf
        assert_close(out, run_eager(Double(), x)[0])
        assert_close(as_numpy(buf).reshape(-1)[: n * 3], as_numpy(x).reshape(-1) * 2)
        # later calls overwrite it: a returned view shows the binding itself
        before = out
    assert_close(before, run_eager(Double(), x)[0])


@pytest.mark.parametrize("kind", KINDS)
def test_unbound_output_storage_is_allocated_once(dynamic: bytes, addmul: bytes, kind: str) -> None:
    """Unbound unplanned outputs live in storage the method allocates once, at
    the upper bound: uncloned outputs are overwritten by the next call, cloned
    ones are the caller's; dynamic outputs come back at the written shape."""
    m = method(dynamic)
    first = None
    for n in (2, 8, 5):
        x = as_kind(torch.randn(n, 3), kind)
        own = m.execute([x], clone_outputs=False)[0]
        copy = m.get_outputs()[0]
        assert tuple(own.shape) == (n, 3) and tuple(copy.shape) == (n, 3)
        assert_close(own, run_eager(Double(), x)[0])
        assert_close(copy, own)
        assert not shares(copy, own)
        first = ptr(own) if first is None else first
        assert ptr(own) == first, "the output storage moved"
    m = method(addmul)
    x, y = xy(kind, 1)
    own = m.execute([x, y], clone_outputs=False)
    kept = m.execute([x, y])
    x2, y2 = xy(kind, 2)
    m.execute([x2, y2])
    exp, exp2 = run_eager(AddMul(), x, y), run_eager(AddMul(), x2, y2)
    for k in (0, 1):
        assert_close(kept[k], exp[k])  # the caller's copy
        assert_close(own[k], exp2[k])  # the method's storage, overwritten


@pytest.mark.parametrize("kind", KINDS)
def test_dynamic_input_checks(dynamic: bytes, kind: str) -> None:
    m = method(dynamic)
    with pytest.raises(InvalidArgumentError, match=r"input 0 has shape at most \[8, 3\], tensor has shape \[9, 3\]"):
        m.execute([as_kind(torch.randn(9, 3), kind)])
    with pytest.raises(InvalidArgumentError, match=r"input 0 has shape at most \[8, 3\], tensor has shape \[4, 4\]"):
        m.execute([as_kind(torch.randn(4, 4), kind)])
    x = as_kind(torch.randn(0, 3), kind)
    assert tuple(m.execute([x])[0].shape) == (0, 3)


def test_static_binding_checks_are_not_repeated(addmul: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    """set_output checks once; execute looks only at the bound tensor's
    pointer, size and layout."""
    import pyexec._outputs as rt

    m = method(addmul)
    t0, t1 = torch.empty(2, 3), np.empty((2, 3), np.float32)
    m.set_output(t0, 0)
    m.set_output(t1, 1)
    x, y = xy("torch")
    m.set_inputs([x, y])
    calls: list[Any] = []
    real = rt.describe
    monkeypatch.setattr(rt, "describe", lambda *a: calls.append(a) or real(*a))
    for _ in range(3):
        out = m.execute()
        assert out[0] is t0 and out[1] is t1
    assert calls == []
    t0.resize_(4, 3)  # changed: checked again
    m.execute()
    assert len(calls) == 1


@pytest.mark.parametrize("kind", KINDS)
def test_dynamic_output_binding_must_hold_the_upper_bound(dynamic: bytes, kind: str) -> None:
    m = method(dynamic)
    with pytest.raises(InvalidArgumentError, match=r"output 0 needs 96 bytes.*has 60"):
        m.set_output(empty((5, 3), kind), 0)


# ---- rejections -----------------------------------------------------------------


def check_unchanged(m: pyexec.Method, kind: str) -> None:
    """After a rejected binding the method still runs into its own storage."""
    x, y = xy(kind, 9)
    out = m.execute([x, y])
    for got, exp in zip(out, run_eager(AddMul(), x, y)):
        assert_close(got, exp)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("first_call", [False, True])
def test_rejections(addmul: bytes, kind: str, first_call: bool) -> None:
    m = method(addmul)
    if first_call:
        m.execute(list(xy(kind)))
    good = empty((2, 3), kind)
    cases: list[tuple[Any, int, str]] = [
        (good, 2, r"output index 2 is out of range \(method 'forward' has 2 outputs\)"),
        (good, -1, r"output index -1 is out of range"),
        (empty((2, 3), kind, torch.float64), 1, r"^output 1 has dtype float32, tensor has float64$"),
        (empty((2, 3), kind, torch.int32), 0, r"^output 0 has dtype float32, tensor has int32$"),
        (empty((3, 2), kind).T, 1, r"output 1: tensor is not contiguous"),
        (empty((2, 2), kind), 0, r"output 0 needs 24 bytes \(its upper bound\), the buffer has 16"),
        (empty((5,), kind), 1, r"output 1 needs 24 bytes \(its upper bound\), the buffer has 20"),
    ]
    if kind == "torch":
        cases.append((torch.empty(2, 3, device="meta"), 0, r"output 0: tensor is on device meta"))
    else:
        ro = empty((2, 3), kind)
        ro.flags.writeable = False
        cases.append((ro, 1, r"output 1: tensor is read-only"))
    for tensor, index, msg in cases:
        with pytest.raises(InvalidArgumentError, match=msg):
            m.set_output(tensor, index)
    check_unchanged(m, kind)


@pytest.mark.parametrize("kind", KINDS)
def test_rejects_planned_duplicate_and_input_outputs(
    addmul_planned: bytes, duplicate: bytes, return_input: bytes, cache_inplace: bytes, kind: str
) -> None:
    out = empty((2, 3), kind)
    m = method(addmul_planned)
    for i in (0, 1):
        with pytest.raises(InvalidArgumentError, match=rf"output {i} is memory-planned"):
            m.set_output(out, i)
    check_unchanged(m, kind)

    m = method(duplicate)
    for i in (0, 1):
        with pytest.raises(InvalidArgumentError, match=rf"output {i} is listed at more than one output index"):
            m.set_output(out, i)
    x = as_kind(torch.randn(2, 3), kind)
    got = m.execute([x])
    assert_close(got[0], run_eager(Duplicate(), x)[0])
    assert_close(got[1], run_eager(Duplicate(), x)[0])

    m = method(return_input)
    with pytest.raises(InvalidArgumentError, match=r"output 0 is input 0"):
        m.set_output(out, 0)
    m.set_output(out, 1)  # x + 1 is bindable
    assert m.execute([x])[1] is out

    m = method(cache_inplace)
    with pytest.raises(InvalidArgumentError, match=r"output 0 is input 0"):
        m.set_output(empty((4, 3), kind), 0)


def test_rejects_non_contiguous_dim_order(channels_last: bytes) -> None:
    m = method(channels_last)
    info = m.meta.outputs[0]
    assert info is not None and info.dim_order == (0, 2, 3, 1)
    with pytest.raises(InvalidArgumentError, match=r"output 0 has a non-contiguous dim_order"):
        m.set_output(torch.empty(1, 2, 3, 4), 0)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("first_call", [False, True])
def test_rejects_overlapping_bound_outputs(addmul: bytes, kind: str, first_call: bool) -> None:
    m = method(addmul)
    if first_call:
        m.execute(list(xy(kind)))
    buf = empty((12,), kind)
    m.set_output(buf[0:6].reshape(2, 3), 0)
    with pytest.raises(InvalidArgumentError, match=r"output 1 overlaps the memory bound to output 0"):
        m.set_output(buf[3:9].reshape(2, 3), 1)  # partial overlap: different pointers
    with pytest.raises(InvalidArgumentError, match=r"output 1 overlaps the memory bound to output 0"):
        m.set_output(buf[0:6].reshape(2, 3), 1)
    m.set_output(buf[6:12].reshape(2, 3), 1)  # adjacent is fine
    x, y = xy(kind)
    m.execute([x, y])
    exp = run_eager(AddMul(), x, y)
    assert_close(as_numpy(buf), np.concatenate([as_numpy(e).reshape(-1) for e in exp]))
    # rebinding an output to (part of) its own previous memory is no overlap
    m.set_output(buf[0:6].reshape(2, 3), 0)


@pytest.mark.parametrize("kind", KINDS)
def test_rejects_output_overlapping_an_installed_input(addmul: bytes, kind: str) -> None:
    m = method(addmul)
    buf = as_kind(torch.randn(12), kind)
    x, y = buf[0:6].reshape(2, 3), as_kind(torch.randn(2, 3), kind)
    m.set_inputs([x, y])
    with pytest.raises(InvalidArgumentError, match=r"output 0 overlaps the memory of input 0"):
        m.set_output(buf[3:9].reshape(2, 3), 0)
    with pytest.raises(InvalidArgumentError, match=r"output 1 overlaps the memory of input 1"):
        m.set_output(y, 1)
    m.set_output(buf[6:12].reshape(2, 3), 0)
    out = m.execute()
    assert_close(out[0], run_eager(AddMul(), x, y)[0])


@pytest.mark.parametrize("kind", KINDS)
def test_rejects_input_overlapping_a_bound_output(addmul: bytes, kind: str) -> None:
    m = method(addmul)
    buf = as_kind(torch.randn(12), kind)
    m.set_output(buf[0:6].reshape(2, 3), 1)
    y = as_kind(torch.randn(2, 3), kind)
    with pytest.raises(InvalidArgumentError, match=r"input 0 overlaps the memory bound to output 1"):
        m.set_inputs([buf[4:10].reshape(2, 3), y])
    with pytest.raises(InvalidArgumentError, match=r"input 0 overlaps the memory bound to output 1"):
        m.execute([buf[4:10].reshape(2, 3), y])
    with pytest.raises(InvalidArgumentError, match="input 0 has not been set"):
        m.execute()
    x = buf[6:12].reshape(2, 3)
    out = m.execute([x, y])
    assert_close(out[1], run_eager(AddMul(), x, y)[1])


def test_rejects_bad_index_types(addmul: bytes) -> None:
    m = method(addmul)
    for bad in (True, 1.0, "0", None):
        with pytest.raises(InvalidArgumentError, match="output index must be an int"):
            m.set_output(torch.empty(2, 3), bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidArgumentError, match="output index must be an int"):
            m.output_aliases_input(bad)  # type: ignore[arg-type]


def test_execute_after_binding_without_inputs(addmul: bytes) -> None:
    m = method(addmul)
    m.set_output(torch.empty(2, 3), 0)
    with pytest.raises(InvalidArgumentError, match=r"^input 0 has not been set$"):
        m.execute()


@pytest.mark.parametrize("kind", KINDS)
def test_output_cannot_be_bound_to_the_methods_own_memory(addmul: bytes, kind: str) -> None:
    """An uncloned output is the method's storage: binding another output to
    it would make one output overwrite the other."""
    m = method(addmul)
    own1 = m.execute(list(xy(kind)), clone_outputs=False)[1]
    with pytest.raises(InvalidArgumentError, match=r"output 0 overlaps memory the method uses"):
        m.set_output(own1, 0)
    x, y = xy(kind, 3)
    out = m.execute([x, y])
    for got, exp in zip(out, run_eager(AddMul(), x, y)):
        assert_close(got, exp)


class CacheAndDouble(torch.nn.Module):
    def forward(self, cache: torch.Tensor, idx: torch.Tensor, val: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        cache.index_copy_(0, idx, val)
        return cache.sum(0, keepdim=True), cache * 2


def test_in_place_input_cannot_be_the_methods_own_memory() -> None:
    """An uncloned output passed back as an input the program writes in place:
    the write-back and the output would share memory; refused, not corrupted."""
    m = method(unplanned(CacheAndDouble(), CACHE_ARGS, reinplace=True))
    idx, val = cache_args("torch", 0)
    doubled = m.execute([torch.zeros(4, 3), idx, val], clone_outputs=False)[2]
    with pytest.raises(InvalidArgumentError, match=r"input 0 is written in place by the program, but its memory"):
        m.set_inputs([doubled, idx, val])
    cache = doubled.clone()
    out = m.execute([cache, idx, val])
    assert_close(out[2], cache * 2)


# ---- failed set_inputs -------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_failed_set_inputs_installs_nothing(addmul: bytes, kind: str) -> None:
    m = method(addmul)
    with pytest.raises(InvalidArgumentError, match=r"^input 0 has not been set$"):
        m.execute()
    x, y = xy(kind)
    m.set_inputs([x, y])
    bad_inputs = [
        ([x], r"takes 2 inputs, got 1"),
        ([x, as_kind(torch.randn(2, 3, dtype=torch.float64), kind)], r"input 1 has dtype float32, tensor has float64"),
        ([x, as_kind(torch.randn(3, 2), kind)], r"input 1 has shape \[2, 3\], tensor has shape \[3, 2\]"),
        ([x, as_kind(torch.randn(6), kind)], r"input 1 has rank 2, tensor has rank 1"),
        ([x, "y"], r"input 1"),
    ]
    if kind == "torch":
        bad_inputs.append(([x, torch.empty(2, 3, device="meta")], r"input 1 is on device meta"))
    for bad, msg in bad_inputs:
        with pytest.raises(InvalidArgumentError, match=msg):
            m.set_inputs(bad)
        # the earlier complete set is gone too: the method refuses to run
        with pytest.raises(InvalidArgumentError, match=r"has not been set"):
            m.execute()
        # nothing of the failed call is installed: x's memory can be bound
        m.set_output(x, 0)
        m.set_output(None, 0)
        m.set_inputs([x, y])
    out = m.execute()
    assert_close(out[0], run_eager(AddMul(), x, y)[0])


# ---- unplanned inputs: read in place ------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_unplanned_input_is_read_in_place(addmul: bytes, kind: str) -> None:
    m = method(addmul)
    x, y = xy(kind)
    m.set_inputs([x, y])
    x[...] = 2.0  # changed after set_inputs: the method reads the caller's memory
    out = m.execute()
    assert_close(out[1], run_eager(AddMul(), x, y)[1])


@pytest.mark.parametrize("kind", KINDS)
def test_planned_input_is_copied(addmul_planned: bytes, kind: str) -> None:
    m = method(addmul_planned)
    x, y = xy(kind)
    exp = run_eager(AddMul(), x, y)
    m.set_inputs([x, y])
    x[...] = 2.0  # the caller may change it: the method has its copy
    out = m.execute()
    assert_close(out[0], exp[0])


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("planned", [False, True])
def test_non_contiguous_read_only_input_is_staged(
    addmul: bytes, addmul_planned: bytes, kind: str, planned: bool
) -> None:
    m = method(addmul_planned if planned else addmul)
    x = as_kind(torch.randn(3, 2), kind).T
    y = as_kind(torch.randn(2, 3), kind)
    if kind == "numpy":
        y.flags.writeable = False
    out = m.execute([x, y])
    for got, exp in zip(out, run_eager(AddMul(), x, y)):
        assert_close(got, exp)


# ---- mutated (in-place) inputs ------------------------------------------------------------


def cache_args(kind: str, step: int) -> tuple[Any, Any]:
    idx = torch.tensor([step % 4])
    val = torch.full((1, 3), float(step + 1))
    return (as_kind(idx, kind), as_kind(val, kind))


@pytest.mark.parametrize("kind", KINDS)
def test_mutated_unplanned_input_is_updated_in_place(cache_inplace: bytes, kind: str) -> None:
    m = method(cache_inplace)
    assert m.output_aliases_input(0) == 0 and m.output_aliases_input(1) is None
    cache = as_kind(torch.zeros(4, 3), kind)
    p = ptr(cache)
    eager = torch.zeros(4, 3)
    for step in range(5):
        idx, val = cache_args(kind, step)
        exp = run_eager(CacheUpdate(), eager, idx, val)
        eager.index_copy_(0, torch.as_tensor(as_numpy(idx)), torch.as_tensor(as_numpy(val)))
        out = m.execute([cache, idx, val])
        assert ptr(cache) == p
        assert_close(cache, eager, what="caller's cache")
        assert_close(out[1], exp[0], what="sum")
        # output 0 is the write-back: a copy by default
        assert out[0] is not cache and not shares(out[0], cache)
        assert_close(out[0], eager)
    assert type(out[0]) is type(cache)


def test_mutated_input_uncloned_is_a_detached_alias(cache_inplace: bytes) -> None:
    m = method(cache_inplace)
    cache = torch.zeros(4, 3, requires_grad=True)
    idx, val = cache_args("torch", 2)
    out = m.execute([cache, idx, val], clone_outputs=False)
    assert out[0] is not cache
    assert out[0].data_ptr() == cache.data_ptr()
    assert out[0].requires_grad is False
    assert_close(cache, torch.tensor([[0.0] * 3, [0.0] * 3, [3.0] * 3, [0.0] * 3]))
    assert_close(out[0], cache)
    cloned = m.get_outputs()[0]
    assert cloned.data_ptr() != cache.data_ptr() and cloned.requires_grad is False


def test_mutated_input_uncloned_numpy(cache_inplace: bytes) -> None:
    m = method(cache_inplace)
    cache = np.zeros((4, 3), np.float32)
    idx, val = cache_args("numpy", 1)
    out = m.execute([cache, idx, val], clone_outputs=False)
    assert isinstance(out[0], np.ndarray) and out[0] is not cache
    assert np.shares_memory(out[0], cache) and ptr(out[0]) == ptr(cache)
    assert (cache[1] == 2.0).all()


@pytest.mark.parametrize("kind", KINDS)
def test_mutated_input_must_be_contiguous_and_writable(cache_inplace: bytes, kind: str) -> None:
    m = method(cache_inplace)
    idx, val = cache_args(kind, 0)
    with pytest.raises(InvalidArgumentError, match=r"input 0 must be contiguous"):
        m.execute([as_kind(torch.zeros(3, 4), kind).T, idx, val])
    if kind == "numpy":
        ro = np.zeros((4, 3), np.float32)
        ro.flags.writeable = False
        with pytest.raises(InvalidArgumentError, match=r"input 0 is read-only"):
            m.execute([ro, idx, val])
        assert (ro == 0).all()


@pytest.mark.parametrize("kind", KINDS)
def test_planned_mutated_input_is_not_updated(cache_planned: bytes, kind: str) -> None:
    m = method(cache_planned)
    info = m.meta.inputs[0]
    assert info is not None and info.is_memory_planned and info.is_mutated
    cache = as_kind(torch.arange(12.0).reshape(4, 3), kind)
    before = as_numpy(cache).copy()
    for step in range(3):
        idx, val = cache_args(kind, step)
        eager = torch.as_tensor(before).clone()
        exp_sum = run_eager(CacheUpdate(), eager, idx, val)[0]
        eager.index_copy_(0, torch.as_tensor(as_numpy(idx)), torch.as_tensor(as_numpy(val)))
        for clone in (True, False):
            out = m.execute([cache, idx, val], clone_outputs=clone)
            np.testing.assert_array_equal(as_numpy(cache), before)  # never written
            assert not shares(out[0], cache)
            assert_close(out[0], eager, what="new value comes back as output 0")
            assert_close(out[1], exp_sum)


# ---- outputs that are inputs --------------------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_returned_input_is_cloned_by_default(return_input: bytes, kind: str) -> None:
    m = method(return_input)
    x = as_kind(torch.randn(2, 3), kind)
    x0 = as_numpy(x).copy()
    out = m.execute([x])
    assert out[0] is not x and not shares(out[0], x)
    assert_close(out[0], x0)
    assert_close(out[1], x0 + 1)
    out[0][...] = 9.0
    np.testing.assert_array_equal(as_numpy(x), x0)
    out = m.execute([x], clone_outputs=False)
    assert out[0] is not x and shares(out[0], x) and ptr(out[0]) == ptr(x)
    if kind == "torch":
        assert out[0].requires_grad is False


# ---- alias query ---------------------------------------------------------------------------


def test_alias_query(
    addmul: bytes, return_input: bytes, cache_inplace: bytes, cache_planned: bytes, duplicate: bytes
) -> None:
    expected = {
        addmul: [None, None],
        return_input: [0, None],
        cache_inplace: [0, None],
        cache_planned: [0, None],
        duplicate: [None, None],
    }
    for pte, want in expected.items():
        m = method(pte)
        assert [m.output_aliases_input(i) for i in range(len(want))] == want
        with pytest.raises(InvalidArgumentError, match="out of range"):
            m.output_aliases_input(len(want))
        # side-effect free: no input became set
        with pytest.raises(InvalidArgumentError, match=r"^input 0 has not been set$"):
            m.execute()


def test_alias_query_ignores_data_pointers(addmul: bytes) -> None:
    """Outputs bound to memory an input also shows are still no aliases."""
    m = method(addmul)
    x, y = xy("torch")
    m.set_inputs([x, y])
    assert m.output_aliases_input(0) is None
    out = m.execute(clone_outputs=False)
    m.set_inputs([out[0], out[1]])  # inputs now point at output storage
    assert m.output_aliases_input(0) is None and m.output_aliases_input(1) is None


# ---- recurrent state: uncloned output fed back -----------------------------------------


_RECURRENT: dict[tuple[type, str], bytes] = {}


@pytest.mark.parametrize("model", [Recurrent, LinearState, FlipState])
@pytest.mark.parametrize("planning", ["unplanned", "planned_out", "planned"])
@pytest.mark.parametrize("kind", KINDS)
def test_uncloned_output_fed_back_as_input(model: type, planning: str, kind: str) -> None:
    """Recurrent state: the output returned without a copy is the next input."""
    key = (model, planning)
    if key not in _RECURRENT:
        ins = (torch.randn(4, 8), torch.randn(4, 8))
        _RECURRENT[key] = export_program(
            model(), ins, alloc_graph_input=planning == "planned", alloc_graph_output=planning != "unplanned"
        )
    m = method(_RECURRENT[key])
    module = model().eval()
    g = torch.Generator().manual_seed(5)
    h_eager = torch.randn(4, 8, generator=g)
    h = as_kind(h_eager, kind)
    for step in range(6):
        x_t = torch.randn(4, 8, generator=g)
        with torch.no_grad():
            h_eager = module(x_t, h_eager)
        h = m.execute([as_kind(x_t, kind), h], clone_outputs=False)[0]
        assert_close(h, h_eager, what=f"step {step}")


# ---- bound tensors the caller changes -----------------------------------------------------


def test_resized_bound_tensor_is_rechecked(addmul: bytes) -> None:
    m = method(addmul)
    t = torch.zeros(2, 3)
    m.set_output(t, 0)
    x, y = xy("torch")
    exp = run_eager(AddMul(), x, y)[0]
    m.set_inputs([x, y])
    t.resize_(1)  # too small now
    with pytest.raises(InvalidArgumentError, match=r"output 0 needs 24 bytes"):
        m.execute()
    t.resize_(1000)  # larger: its storage is reallocated
    out = m.execute()
    # t has another shape now: the output is a view of its first elements
    assert out[0].data_ptr() == t.data_ptr() and tuple(out[0].shape) == (2, 3)
    assert_close(out[0], exp)
    assert_close(t[:6], exp.reshape(-1))
    t.resize_(2, 3)
    assert m.execute()[0] is t
    t.t_()  # same memory, no longer contiguous
    with pytest.raises(InvalidArgumentError, match=r"output 0: tensor is not contiguous"):
        m.execute()
    t.t_()
    t.data = torch.zeros(2, 3, dtype=torch.float64)  # new storage and dtype
    with pytest.raises(InvalidArgumentError, match=r"output 0 has dtype float32, tensor has float64"):
        m.execute()
    t.data = torch.zeros(2, 3)
    assert m.execute()[0] is t
    assert_close(t, exp)


def test_bound_tensor_given_new_storage(addmul: bytes) -> None:
    m = method(addmul)
    t = torch.zeros(2, 3)
    old = t.view(-1)  # keeps the old storage alive to watch it
    m.set_output(t, 1)
    x, y = xy("torch")
    exp = run_eager(AddMul(), x, y)[1]
    m.execute([x, y])
    old.fill_(-1.0)
    t.set_(torch.full((2, 3), 4.0).untyped_storage())
    t.resize_(2, 3)
    out = m.execute()
    assert out[1] is t
    assert_close(t, exp)
    assert (old == -1.0).all(), "the old storage was written"
    # the memory the binding left may be an input now; the new one is checked
    a = torch.zeros(2, 3)
    t.set_(a.untyped_storage(), 0, (2, 3))
    m.execute([x, y])  # the binding is at a
    t.set_(torch.zeros(2, 3).untyped_storage(), 0, (2, 3))
    out = m.execute([a, y])  # a was the binding's memory: no longer
    assert out[1] is t
    assert_close(t, run_eager(AddMul(), a, y)[1])
    with pytest.raises(InvalidArgumentError, match=r"output 1 overlaps the memory of input 0"):
        t.set_(a.untyped_storage(), 0, (2, 3))
        m.execute()
    # new storage overlapping another binding is refused, not written
    b0 = torch.zeros(2, 3)
    m.set_output(b0, 0)
    t.set_(b0.untyped_storage())
    with pytest.raises(InvalidArgumentError, match=r"overlaps"):
        m.execute()


def test_resized_bound_numpy_array_is_rechecked(addmul: bytes) -> None:
    m = method(addmul)
    a = np.zeros((2, 3), np.float32)
    m.set_output(a, 0)
    x, y = xy("numpy")
    exp = run_eager(AddMul(), x, y)[0]
    a.resize((4000,), refcheck=False)  # reallocates the buffer in place
    out = m.execute([x, y])
    assert np.shares_memory(out[0], a) and out[0].shape == (2, 3)
    assert_close(a[:6].reshape(2, 3), exp)
    a.resize((2,), refcheck=False)
    with pytest.raises(InvalidArgumentError, match=r"output 0 needs 24 bytes"):
        m.execute()


# ---- other tensor kinds ------------------------------------------------------------------


class DLPackOnly:
    """Neither a torch tensor nor an ndarray: only the DLPack protocol."""

    def __init__(self, a: np.ndarray) -> None:
        self._a = a

    def __dlpack__(self, **kwargs: Any) -> Any:
        return self._a.__dlpack__(**kwargs)

    def __dlpack_device__(self) -> Any:
        return self._a.__dlpack_device__()


def test_dlpack_object_as_input(addmul: bytes, addmul_planned: bytes) -> None:
    x, y = xy("numpy")
    exp = run_eager(AddMul(), x, y)
    for pte in (addmul, addmul_planned):
        m = method(pte)
        out = m.execute([DLPackOnly(x), DLPackOnly(y)])
        assert isinstance(out[0], np.ndarray)
        for got, e in zip(out, exp):
            assert_close(got, e)


def test_dlpack_object_as_in_place_input_and_binding(cache_inplace: bytes, addmul: bytes) -> None:
    m = method(cache_inplace)
    cache = np.zeros((4, 3), np.float32)
    idx, val = cache_args("numpy", 3)
    m.execute([DLPackOnly(cache), idx, val])
    assert (cache[3] == 4.0).all()
    m = method(addmul)
    buf = np.zeros((2, 3), np.float32)
    m.set_output(DLPackOnly(buf), 0)
    x, y = xy("numpy")
    out = m.execute([x, y])
    assert np.shares_memory(out[0], buf)
    assert_close(buf, run_eager(AddMul(), x, y)[0])


@pytest.mark.parametrize("output_type", ["torch", "numpy"])
def test_output_type_of_bound_and_alias_outputs(addmul: bytes, return_input: bytes, output_type: str) -> None:
    m = method(return_input, output_type=output_type)
    x = torch.randn(2, 3)
    for clone in (True, False):
        out = m.execute([x], clone_outputs=clone)
        want = torch.Tensor if output_type == "torch" else np.ndarray
        assert all(isinstance(o, want) for o in out)
        assert shares(out[0], x) is (not clone)
