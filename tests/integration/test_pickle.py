"""Programs and Methods across processes (SPEC §7): pickling as the source
(bytes, or a path checked by its sha256, and the data file likewise), Methods
unpickled with fresh state, multiprocessing pools under spawn and fork, and
read-only inputs as an object store hands them out."""

from __future__ import annotations

import multiprocessing
import operator
import pickle
import threading
from pathlib import Path

import numpy as np
import pytest
import torch
from support.export import export_program
from support.external import export_external
from support.models import MLP

import pyexec
from pyexec import FileError, InvalidArgumentError


class AddMul(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x + y, x * y


class Accumulate(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("total", torch.zeros(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.total.add_(x)
        return self.total * 2


class CacheUpdate(torch.nn.Module):
    def forward(self, cache: torch.Tensor, idx: torch.Tensor, val: torch.Tensor) -> torch.Tensor:
        cache.index_copy_(0, idx, val)
        return cache.sum(0, keepdim=True)


X23 = torch.zeros(2, 3)
CACHE_ARGS = (torch.zeros(4, 3), torch.tensor([1]), torch.ones(1, 3))


@pytest.fixture(scope="module")
def addmul() -> bytes:
    return export_program(AddMul(), (X23, X23))


@pytest.fixture(scope="module")
def addmul_unplanned() -> bytes:
    return export_program(AddMul(), (X23, X23), alloc_graph_input=False, alloc_graph_output=False)


@pytest.fixture(scope="module")
def accumulate() -> bytes:
    return export_program(Accumulate(), (torch.zeros(3),))


@pytest.fixture(scope="module")
def cache_inplace() -> bytes:
    return export_program(CacheUpdate(), CACHE_ARGS, alloc_graph_input=False, alloc_graph_output=False, reinplace=True)


def xy(seed: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((2, 3)).astype(np.float32) for _ in range(2)]


def roundtrip(obj: object) -> object:
    return pickle.loads(pickle.dumps(obj))


def test_program_from_bytes_pickles_as_the_bytes(addmul: bytes) -> None:
    for source in (addmul, bytearray(addmul), memoryview(addmul)):
        p = pyexec.load(source)
        data = pickle.dumps(p)
        assert addmul in data  # the bytes themselves travel
        q = pickle.loads(data)
        assert isinstance(q, pyexec.Program) and q.method_names == p.method_names
        x, y = xy(0)
        for a, b in zip(q.load_method().execute([x, y]), p.load_method().execute([x, y])):
            np.testing.assert_array_equal(a, b)
    mutable = bytearray(addmul)
    p = pyexec.load(mutable)
    mutable[:] = b"\0" * len(mutable)  # the caller may change its buffer: the snapshot pickles
    assert roundtrip(p).method_names == {"forward"}  # type: ignore[attr-defined]


def test_program_from_path_pickles_as_path_and_hash(addmul: bytes, tmp_path: Path) -> None:
    path = tmp_path / "addmul.pte"
    path.write_bytes(addmul)
    p = pyexec.load(str(path))
    data = pickle.dumps(p)
    assert addmul not in data and str(path).encode() in data
    q = pickle.loads(data)
    assert repr(q) == repr(p)
    x, y = xy(1)
    np.testing.assert_array_equal(q.load_method().execute([x, y])[0], x + y)


def test_changed_or_missing_file_is_refused(addmul: bytes, accumulate: bytes, tmp_path: Path) -> None:
    path = tmp_path / "m.pte"
    path.write_bytes(addmul)
    data = pickle.dumps(pyexec.load(path))
    path.write_bytes(accumulate)
    with pytest.raises(FileError, match=r"cannot unpickle the program '.*m\.pte': its content changed"):
        pickle.loads(data)
    path.unlink()
    with pytest.raises(FileError, match=r"'.*m\.pte': the file is missing.*content changed"):
        pickle.loads(data)
    # Changed after the load and before the pickle: this process no longer runs what the file holds.
    path.write_bytes(addmul)
    p = pyexec.load(path)
    path.write_bytes(accumulate)
    with pytest.raises(FileError, match=r"cannot pickle the program '.*m\.pte': the file changed since it was loaded"):
        pickle.dumps(p)


def test_data_file_pickles_likewise(tmp_path: Path) -> None:
    torch.manual_seed(0)
    mlp = MLP().eval()
    pte, ptd = export_external(mlp, (torch.randn(1, 16),))
    (tmp_path / "m.pte").write_bytes(pte)
    (tmp_path / "m.ptd").write_bytes(ptd)
    x = np.linspace(-1, 1, 16, dtype=np.float32).reshape(1, 16)
    expected = pyexec.load(pte, data_path=ptd).load_method().execute([x])[0]
    with torch.no_grad():  # the local run is right before the round trip is compared with it
        np.testing.assert_allclose(expected, mlp(torch.from_numpy(x)).numpy(), rtol=1e-5, atol=1e-6)
    for p in (pyexec.load(pte, data_path=ptd), pyexec.load(tmp_path / "m.pte", data_path=tmp_path / "m.ptd")):
        np.testing.assert_array_equal(roundtrip(p).load_method().execute([x])[0], expected)  # type: ignore[attr-defined]
    data = pickle.dumps(pyexec.load(tmp_path / "m.pte", data_path=tmp_path / "m.ptd"))
    (tmp_path / "m.ptd").write_bytes(ptd[:-1] + bytes([ptd[-1] ^ 1]))
    with pytest.raises(FileError, match=r"cannot unpickle the data file '.*m\.ptd': its content changed"):
        pickle.loads(data)


def test_closed_program_and_method_refuse(addmul: bytes) -> None:
    p = pyexec.load(addmul)
    m = p.load_method()
    p.close()
    with pytest.raises(InvalidArgumentError, match="program is closed"):
        pickle.dumps(p)
    assert isinstance(roundtrip(m), pyexec.Method)  # the method keeps its program, and its source
    m.close()
    with pytest.raises(InvalidArgumentError, match="method 'forward' is closed"):
        pickle.dumps(m)


def test_method_unpickles_with_fresh_state(accumulate: bytes, addmul_unplanned: bytes) -> None:
    m = pyexec.load(accumulate).load_method(output_type="numpy")
    one = np.ones(3, np.float32)
    m.execute([one])
    m.execute([one])
    np.testing.assert_array_equal(m.execute([one])[0], 6 * one)
    n = roundtrip(m)
    assert repr(n) == repr(m)
    with pytest.raises(InvalidArgumentError, match="input 0 has not been set"):
        n.execute()  # type: ignore[attr-defined]
    np.testing.assert_array_equal(n.execute([one])[0], 2 * one)  # type: ignore[attr-defined]

    m = pyexec.load(addmul_unplanned).load_method(output_type="torch")
    out = np.zeros((2, 3), np.float32)
    m.set_output(out, 0)
    x, y = xy(2)
    m.set_inputs([x, y])
    n = roundtrip(m)
    assert "output_type='torch'" in repr(n)
    res = n.execute([x, y])  # type: ignore[attr-defined]
    assert isinstance(res[0], torch.Tensor) and not np.shares_memory(res[0].numpy(), out)
    assert (out == 0).all()


@pytest.mark.parametrize("context", ["spawn", "fork"])
def test_pool_runs_methods_in_children(addmul: bytes, tmp_path: Path, context: str) -> None:
    """Children get Methods (from bytes and from a path) by pickle; the work
    is operator.methodcaller, so a spawned child imports pyexec and numpy only."""
    path = tmp_path / "addmul.pte"
    path.write_bytes(addmul)
    methods = [pyexec.load(addmul).load_method(), pyexec.load(path).load_method()]
    jobs = [(methods[i % 2], xy(i)) for i in range(4)]
    expected = [m.execute(b) for m, b in jobs]
    for (_, (x, y)), e in zip(jobs, expected):  # the local run is right, then children must equal it
        np.testing.assert_array_equal(e[0], x + y)
        np.testing.assert_array_equal(e[1], x * y)
    with multiprocessing.get_context(context).Pool(2) as pool:
        pending = [pool.apply_async(operator.methodcaller("execute", b), (m,)) for m, b in jobs]
        got = [r.get(timeout=60) for r in pending]
    for g, e in zip(got, expected):
        assert len(g) == len(e)
        for a, b in zip(g, e):
            np.testing.assert_array_equal(a, b)


def test_fork_while_another_thread_executes(addmul_unplanned: bytes) -> None:
    """A fork waits for calls in flight: the child's Method is unlocked and runs."""
    m = pyexec.load(addmul_unplanned).load_method()
    x, y = xy(3)
    stop = threading.Event()

    def spin() -> None:
        while not stop.is_set():
            m.execute([x, y])

    m.execute([x, y])
    _INHERITED[:] = [m]
    t = threading.Thread(target=spin)
    t.start()
    try:
        ctx = multiprocessing.get_context("fork")
        for _ in range(3):
            with ctx.Pool(1) as pool:  # the forked worker inherits m as it is now
                got = pool.apply_async(_run_inherited).get(timeout=30)
            np.testing.assert_array_equal(got[0], x + y)
    finally:
        stop.set()
        t.join()
        _INHERITED.clear()


_INHERITED: list[pyexec.Method] = []


def _run_inherited() -> list[np.ndarray]:
    return _INHERITED[0].execute()


def read_only(a: np.ndarray) -> np.ndarray:
    a = a.copy()
    a.flags.writeable = False
    return a


@pytest.mark.parametrize("program", ["addmul", "addmul_unplanned"])
def test_read_only_inputs_the_program_only_reads(program: str, request: pytest.FixtureRequest) -> None:
    m = pyexec.load(request.getfixturevalue(program)).load_method()
    x, y = xy(4)
    rx, ry = read_only(x), read_only(y)
    for _ in range(2):  # the first call and a repeat on the same arrays
        out = m.execute([rx, ry])
        np.testing.assert_array_equal(out[0], x + y)
        np.testing.assert_array_equal(out[1], x * y)
    np.testing.assert_array_equal(roundtrip(m).execute([rx, ry])[0], x + y)  # type: ignore[attr-defined]


def test_read_only_input_the_program_writes_is_refused(cache_inplace: bytes) -> None:
    m = pyexec.load(cache_inplace).load_method()
    cache = read_only(np.zeros((4, 3), np.float32))
    idx, val = np.array([1]), np.ones((1, 3), np.float32)
    with pytest.raises(InvalidArgumentError, match=r"input 0 is read-only, but the program writes it in place"):
        m.execute([cache, idx, val])
    assert (cache == 0).all()
    writable = np.zeros((4, 3), np.float32)
    m.execute([writable, read_only(idx), read_only(val)])  # the inputs it only reads may be read-only
    assert (writable[1] == 1).all()
