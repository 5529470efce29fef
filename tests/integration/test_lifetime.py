"""Lifetimes, garbage collection, state and threads (SPEC §3-§5, §7): what
keeps which memory alive, and one Method used from several threads."""

from __future__ import annotations

import gc
import threading
import weakref
from typing import Any

import numpy as np
import pytest
import torch
from support.export import as_numpy, assert_close, export_program

import pyexec
from pyexec import InvalidArgumentError

KINDS = ("torch", "numpy")


def as_kind(t: torch.Tensor, kind: str) -> Any:
    t = t.detach().clone()
    return t if kind == "torch" else t.numpy()


class AddMul(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x + y, x * y


class Accumulate(torch.nn.Module):
    """Module state: a mutable buffer updated by every call. (Zeros: the
    exporter stores no initial value for a planned mutable buffer, and
    ExecuTorch's runtime starts it from zeroed planned memory.)"""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("total", torch.zeros(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.total.add_(x)
        return self.total * 2


class Heavy(torch.nn.Module):
    """Enough work per call that threads really overlap."""

    def __init__(self) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(0)
        self.w = torch.nn.ParameterList([torch.nn.Parameter(torch.randn(96, 96, generator=g) / 10) for _ in range(4)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for w in self.w:
            x = torch.tanh(x @ w)
        return x


X23 = torch.randn(2, 3)


@pytest.fixture(scope="module")
def addmul() -> bytes:
    return export_program(AddMul(), (X23, X23), alloc_graph_input=False, alloc_graph_output=False)


@pytest.fixture(scope="module")
def addmul_planned() -> bytes:
    return export_program(AddMul(), (X23, X23))


@pytest.fixture(scope="module")
def accumulate() -> bytes:
    return export_program(Accumulate(), (torch.zeros(3),))


@pytest.fixture(scope="module")
def heavy() -> bytes:
    return export_program(Heavy(), (torch.randn(64, 96),), alloc_graph_input=False, alloc_graph_output=False)


@pytest.fixture(scope="module", autouse=True)
def cheap_gc(addmul: bytes, addmul_planned: bytes, accumulate: bytes, heavy: bytes) -> Any:
    """After the exports, moves every object into the permanent generation so
    that the many gc.collect() calls below scan only what the tests make."""
    gc.collect()
    gc.freeze()
    yield
    gc.unfreeze()


def eager_addmul(x: Any, y: Any) -> list[torch.Tensor]:
    x, y = torch.as_tensor(as_numpy(x).copy()), torch.as_tensor(as_numpy(y).copy())
    return [x + y, x * y]


def churn(pte: bytes) -> None:
    """Allocates and frees programs, methods and outputs so that freed memory
    is reused: anything still pointing at it would show other values."""
    for _ in range(3):
        m = pyexec.load(pte).load_method()
        m.execute([torch.full((2, 3), 1e6), torch.full((2, 3), -1e6)], clone_outputs=False)
        del m  # freed by its reference count: no cycles


def xy(kind: str, seed: int) -> tuple[Any, Any]:
    g = torch.Generator().manual_seed(seed)
    return as_kind(torch.randn(2, 3, generator=g), kind), as_kind(torch.randn(2, 3, generator=g), kind)


# ---- program, method and output lifetimes ------------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("planned", [False, True])
def test_uncloned_outputs_outlive_method_and_program(
    addmul: bytes, addmul_planned: bytes, kind: str, planned: bool
) -> None:
    pte = addmul_planned if planned else addmul
    program = pyexec.load(pte)
    m = program.load_method()
    x, y = xy(kind, 0)
    out = m.execute([x, y], clone_outputs=False)
    exp = eager_addmul(x, y)
    w_program, w_method = weakref.ref(program), weakref.ref(m)
    w_mhandle, w_phandle = weakref.ref(m._handle), weakref.ref(program._handle)
    del program, m
    gc.collect()
    assert w_program() is None and w_method() is None, "Program / Method objects are not collected"
    assert w_mhandle() is not None and w_phandle() is not None, "memory behind live outputs was freed"
    churn(pte)
    for k, e in enumerate(exp):
        assert_close(out[k], e)
    # views derived from an output keep it alive too
    view = out[0][1:]
    del out
    gc.collect()
    assert w_mhandle() is not None
    assert_close(view, exp[0][1:])
    del view
    gc.collect()
    assert w_mhandle() is None and w_phandle() is None, "method or program memory is never freed"


def test_method_outlives_program(addmul: bytes) -> None:
    program = pyexec.load(addmul)
    m = program.load_method()
    w = weakref.ref(program)
    del program
    gc.collect()
    assert w() is None
    for seed in range(3):
        x, y = xy("torch", seed)
        for got, e in zip(m.execute([x, y]), eager_addmul(x, y)):
            assert_close(got, e)


def test_program_bytes_are_read_in_place_for_as_long_as_methods_live(addmul: bytes) -> None:
    """A program given as bytes is read in place (its weights too), so the
    bytes must live as long as the C program, past the Program object."""
    torch.manual_seed(0)
    lin = torch.nn.Linear(8, 4).eval()
    pte = export_program(lin, (torch.randn(2, 8),))
    source = bytes(bytearray(pte))  # a fresh object no one else holds
    program = pyexec.load(source)
    if program._handle.borrowed is None:
        pytest.skip("this bytes object is not 16-byte aligned: the library took a copy")
    assert program._handle.borrowed is source, "the library reads the caller's bytes, no copy"
    m = program.load_method()
    w = weakref.ref(program)
    del program, source
    gc.collect()
    assert w() is None
    churn(addmul)  # reuses freed memory: a dangling read would see other values
    x = torch.randn(2, 8)
    with torch.no_grad():
        assert_close(m.execute([x])[0], lin(x))


def test_cloned_outputs_do_not_hold_the_method(addmul: bytes) -> None:
    m = pyexec.load(addmul).load_method()
    x, y = xy("numpy", 1)
    out = m.execute([x, y])
    w = weakref.ref(m._handle)
    del m
    gc.collect()
    assert w() is None, "a cloned output keeps the method alive"
    churn(addmul)
    for got, e in zip(out, eager_addmul(x, y)):
        assert_close(got, e)


@pytest.mark.parametrize("kind", KINDS)
def test_methods_have_independent_storage(addmul: bytes, addmul_planned: bytes, kind: str) -> None:
    for pte in (addmul, addmul_planned):
        program = pyexec.load(pte)
        a, b = program.load_method(), program.load_method()
        xa, ya = xy(kind, 1)
        xb, yb = xy(kind, 2)
        oa = a.execute([xa, ya], clone_outputs=False)
        ob = b.execute([xb, yb], clone_outputs=False)
        assert not np.shares_memory(as_numpy(oa[0]), as_numpy(ob[0]))
        for got, e in zip(oa, eager_addmul(xa, ya)):
            assert_close(got, e)
        for got, e in zip(ob, eager_addmul(xb, yb)):
            assert_close(got, e)


# ---- references held for the caller's memory --------------------------------------------


@pytest.mark.parametrize("kind", KINDS)
def test_binding_holds_its_tensor(addmul: bytes, kind: str) -> None:
    m = pyexec.load(addmul).load_method()

    def bind(m: pyexec.Method, index: int) -> weakref.ref[Any]:
        t = as_kind(torch.zeros(2, 3), kind)
        m.set_output(t, index)
        return weakref.ref(t)

    w0 = bind(m, 0)
    gc.collect()
    assert w0() is not None, "a bound tensor was released while bound"
    x, y = xy(kind, 3)
    churn(addmul)
    out = m.execute([x, y])
    assert out[0] is w0()
    assert_close(out[0], eager_addmul(x, y)[0])
    del out
    m.set_output(None, 0)  # unbind: released
    gc.collect()
    assert w0() is None
    w0 = bind(m, 0)
    w0b = bind(m, 0)  # replaced: the first one is released
    gc.collect()
    assert w0() is None and w0b() is not None
    w1 = bind(m, 1)
    del m
    gc.collect()
    assert w0b() is None and w1() is None, "bindings outlive their Method"


@pytest.mark.parametrize("kind", KINDS)
def test_unplanned_input_is_held_until_next_successful_set_inputs(addmul: bytes, kind: str) -> None:
    m = pyexec.load(addmul).load_method()
    x, y = xy(kind, 4)
    exp = eager_addmul(x, y)
    wx = weakref.ref(x)
    m.set_inputs([x, y])
    del x, y
    gc.collect()
    assert wx() is not None, "the method reads memory it does not hold"
    churn(addmul)
    for got, e in zip(m.execute(), exp):
        assert_close(got, e)
    with pytest.raises(InvalidArgumentError):
        m.set_inputs([as_kind(torch.zeros(2, 3), kind)])
    gc.collect()
    assert wx() is not None
    m.set_inputs(list(xy(kind, 5)))
    gc.collect()
    assert wx() is None, "a replaced input is still held"


@pytest.mark.parametrize("kind", KINDS)
def test_planned_input_is_not_held(addmul_planned: bytes, kind: str) -> None:
    m = pyexec.load(addmul_planned).load_method()
    x, y = xy(kind, 6)
    exp = eager_addmul(x, y)
    wx = weakref.ref(x)
    m.set_inputs([x, y])
    del x
    gc.collect()
    assert wx() is None
    assert_close(m.execute()[1], exp[1])


@pytest.mark.parametrize("kind", KINDS)
def test_uncloned_outputs_survive_rebinding_and_unbinding(addmul: bytes, kind: str) -> None:
    m = pyexec.load(addmul).load_method()
    x1, y1 = xy(kind, 7)
    own = m.execute([x1, y1], clone_outputs=False)[0]  # the method's storage
    a = as_kind(torch.zeros(2, 3), kind)
    m.set_output(a, 0)
    x2, y2 = xy(kind, 8)
    m.execute([x2, y2])
    assert_close(a, eager_addmul(x2, y2)[0])
    assert_close(own, eager_addmul(x1, y1)[0])  # not written while bound
    b = as_kind(torch.zeros(2, 3), kind)
    m.set_output(b, 0)  # rebinding
    m.execute([x1, y1])
    assert_close(own, eager_addmul(x1, y1)[0])
    m.set_output(None, 0)  # unbinding: the method's own storage again
    x3, y3 = xy(kind, 9)
    again = m.execute([x3, y3], clone_outputs=False)[0]
    assert np.shares_memory(as_numpy(again), as_numpy(own))
    assert_close(own, eager_addmul(x3, y3)[0])
    del m
    gc.collect()
    churn(addmul)
    assert_close(own, eager_addmul(x3, y3)[0])


# ---- module state ---------------------------------------------------------------------------


def test_mutable_buffers_persist_and_are_per_method(accumulate: bytes) -> None:
    program = pyexec.load(accumulate)
    a, b = program.load_method(), program.load_method()
    module = Accumulate()
    total_a = torch.zeros(3)
    for step in range(4):
        x = torch.full((3,), float(step + 1))
        total_a += x
        with torch.no_grad():
            expected = module(x.clone())
        assert_close(a.execute([x])[0], expected, what=f"step {step}")
        assert_close(expected, total_a * 2)
    # b starts from the program's initial value, untouched by a's calls
    x = torch.full((3,), 0.5)
    assert_close(b.execute([x])[0], x * 2)
    assert_close(a.execute([x])[0], (total_a + x) * 2)
    c = program.load_method()
    assert_close(c.execute([x])[0], x * 2)


# ---- threads ----------------------------------------------------------------------------


def run_threads(targets: list[Any]) -> None:
    errors: list[BaseException] = []

    def wrap(fn: Any) -> Any:
        def run() -> None:
            try:
                fn()
            except BaseException as exc:  # noqa: BLE001 - reported below
                errors.append(exc)

        return run

    threads = [threading.Thread(target=wrap(fn)) for fn in targets]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=300)
        assert not t.is_alive(), "a thread hung"
    if errors:
        raise errors[0]


def test_threads_on_different_methods(heavy: bytes) -> None:
    program = pyexec.load(heavy)
    module = Heavy()
    barrier = threading.Barrier(2)

    def worker(seed: int, bind: bool) -> Any:
        m = program.load_method()
        g = torch.Generator().manual_seed(seed)
        cases = [torch.randn(64, 96, generator=g) for _ in range(6)]
        with torch.no_grad():
            expected = [module(x) for x in cases]

        bound = torch.empty(64, 96)
        if bind:
            m.set_output(bound, 0)

        def run() -> None:
            barrier.wait()
            for _ in range(3):
                for x, e in zip(cases, expected):
                    out = m.execute([x], clone_outputs=False)[0]
                    assert (out is bound) is bind
                    assert_close(out, e)

        return run

    run_threads([worker(1, False), worker(2, True)])


def test_concurrent_calls_on_one_method_are_serialized(addmul: bytes, heavy: bytes) -> None:
    m = pyexec.load(heavy).load_method()
    module = Heavy()
    g = torch.Generator().manual_seed(3)
    cases = [torch.randn(64, 96, generator=g) for _ in range(4)]
    with torch.no_grad():
        expected = [module(x) for x in cases]
    barrier = threading.Barrier(len(cases))

    def worker(k: int) -> Any:
        def run() -> None:
            barrier.wait()
            for _ in range(15):
                out = m.execute([cases[k]])[0]  # installs, runs and copies as one call
                assert_close(out, expected[k])

        return run

    run_threads([worker(k) for k in range(len(cases))])

    # unplanned inputs read in place, outputs bound, several threads
    m = pyexec.load(addmul).load_method()
    inputs = [xy("numpy", 20 + k) for k in range(4)]
    exp = [eager_addmul(x, y) for x, y in inputs]
    barrier = threading.Barrier(len(inputs))

    def worker2(k: int) -> Any:
        def run() -> None:
            barrier.wait()
            for _ in range(200):
                out = m.execute(list(inputs[k]))
                assert_close(out[0], exp[k][0])
                assert_close(out[1], exp[k][1])
                m.get_outputs()

        return run

    run_threads([worker2(k) for k in range(len(inputs))])
