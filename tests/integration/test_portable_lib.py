"""pyexec.portable_lib, ExecuTorch's pybindings Module API over pyexec,
checked against ExecuTorch's own `executorch.extension.pybindings.portable_lib`
on the same files: state kept across calls, method metadata, attributes,
error types, install(), ETDump, output aliasing and the thread pool calls."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from support.export import assert_close

import pyexec
import pyexec.portable_lib as px

pytestmark = pytest.mark.filterwarnings("ignore")

ROOT = Path(__file__).resolve().parents[2]


def _et() -> Any:
    from executorch.extension.pybindings import portable_lib

    return portable_lib


class Counter(torch.nn.Module):
    """A mutable buffer added to on every call; inputs of three dtypes."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros(2, 3))

    def forward(self, x: torch.Tensor, i: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, ...]:
        self.count.add_(x)
        return self.count * 1.0, i + 1, h * 2


class KVCache(torch.nn.Module):
    """A static cache written at `pos` each call; returns the cache's sum over positions."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(1, 8, 4))

    def forward(self, x: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:
        self.k_cache.index_copy_(1, pos, x)
        return self.k_cache.sum(1) * 1.0


def _export(module: torch.nn.Module, inputs: tuple[Any, ...], path: Path) -> str:
    from executorch.exir import ExecutorchBackendConfig, to_edge

    ep = torch.export.export(module, inputs)
    pte = to_edge(ep).to_executorch(ExecutorchBackendConfig(emit_mutable_buffer_names=True)).buffer
    path.write_bytes(pte)
    return str(path)


def counter_inputs(step: int = 1) -> tuple[torch.Tensor, ...]:
    return (torch.full((2, 3), float(step)), torch.arange(4) * step, torch.full((3,), 0.5 * step, dtype=torch.float16))


@pytest.fixture(scope="module")
def counter(tmp_path_factory: pytest.TempPathFactory) -> str:
    return _export(Counter(), counter_inputs(), tmp_path_factory.mktemp("pl") / "counter.pte")


@pytest.fixture(scope="module")
def kv_cache(tmp_path_factory: pytest.TempPathFactory) -> str:
    inputs = (torch.ones(1, 1, 4), torch.tensor([0]))
    return _export(KVCache(), inputs, tmp_path_factory.mktemp("pl") / "kv.pte")


# ---- state ----------------------------------------------------------------------


def test_a_module_keeps_its_mutable_buffer_across_calls_like_executorch(counter: str) -> None:
    ours, theirs = px._load_for_executorch(counter), _et()._load_for_executorch(counter)
    seen = []
    for step in (1, 2, 3):
        got, expected = ours.forward(counter_inputs(step)), theirs.forward(counter_inputs(step))
        assert len(got) == len(expected) == 3
        for k, (g, e) in enumerate(zip(got, expected)):
            assert isinstance(g, torch.Tensor) and g.dtype == e.dtype
            assert_close(g, e, rtol=0, atol=0, what=f"call {step}, output {k}")
        seen.append(got[0])
    # 1, 1 + 2, 1 + 2 + 3: the buffer was kept, not reloaded per call.
    assert_close(seen[2], torch.full((2, 3), 6.0), rtol=0, atol=0)


def test_a_kv_cache_filled_call_by_call_matches_executorch(kv_cache: str) -> None:
    ours, theirs = px._load_for_executorch(kv_cache), _et()._load_for_executorch(kv_cache)
    torch.manual_seed(0)
    total = torch.zeros(1, 4)
    for pos in range(5):
        x = torch.randn(1, 1, 4)
        total += x[0]
        (got,) = ours.run_method("forward", (x, torch.tensor([pos])))
        (expected,) = theirs.run_method("forward", (x, torch.tensor([pos])))
        assert_close(got, expected, what=f"position {pos}")
        assert_close(got, total, what=f"position {pos}")


# ---- metadata and attributes -----------------------------------------------------


def test_method_meta_matches_executorchs_for_float32_int64_and_float16_inputs(counter: str) -> None:
    ours = px._load_for_executorch(counter).method_meta("forward")
    theirs = _et()._load_for_executorch(counter).method_meta("forward")
    assert ours.name() == theirs.name() == "forward"
    assert (ours.num_inputs(), ours.num_outputs(), ours.num_attributes()) == (
        theirs.num_inputs(), theirs.num_outputs(), theirs.num_attributes())
    for i in range(theirs.num_inputs()):
        a, e = ours.input_tensor_meta(i), theirs.input_tensor_meta(i)
        assert (a.sizes(), a.dtype(), a.nbytes(), a.is_memory_planned()) == (
            e.sizes(), e.dtype(), e.nbytes(), e.is_memory_planned()), f"input {i}"
    for i in range(theirs.num_outputs()):
        a, e = ours.output_tensor_meta(i), theirs.output_tensor_meta(i)
        assert (a.sizes(), a.dtype()) == (e.sizes(), e.dtype()), f"output {i}"
    # ExecuTorch's ScalarType codes: Float 6, Long 4, Half 5.
    assert [ours.input_tensor_meta(i).dtype() for i in range(3)] == [6, 4, 5]
    assert ours.attribute_tensor_meta(0).sizes() == theirs.attribute_tensor_meta(0).sizes() == (2, 3)
    assert repr(ours) == repr(theirs)


def test_get_attribute_after_calls_matches_executorch(counter: str) -> None:
    ours = px._load_program(counter).load_method("forward")
    theirs = _et()._load_program(counter).load_method("forward")
    for step in (1, 2):
        ours(counter_inputs(step))
        theirs(counter_inputs(step))
    got, expected = ours.get_attribute("count"), theirs.get_attribute("count")
    assert_close(got, expected, rtol=0, atol=0)
    assert_close(got, torch.full((2, 3), 3.0), rtol=0, atol=0)


# ---- errors ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "error", "words"),
    [
        (lambda m: m.run_method("nope", counter_inputs()), RuntimeError, "nope"),
        (lambda m: m.method_meta("nope"), RuntimeError, "nope"),
        (lambda m: m.forward(counter_inputs()[:2]), RuntimeError, "3 inputs, got 2"),
        (lambda m: m.forward(5), TypeError, "sequence"),
        (lambda m: m.forward([object(), 1, 2]), RuntimeError, "Unsupported python type"),
        (lambda m: m.method_meta("forward").input_tensor_meta(7), IndexError, "7"),
        (lambda m: m.method_meta("forward").output_tensor_meta(-1), IndexError, "-1"),
    ],
    ids=["unknown-method", "unknown-meta", "input-count", "not-a-sequence", "bad-element", "meta-index",
         "negative-index"],
)
def test_errors_have_executorchs_types_and_name_what_is_wrong(counter: str, call: Any, error: type, words: str) -> None:
    with pytest.raises(error, match=words) as info:
        call(px._load_for_executorch(counter))
    assert type(info.value) is error


def test_the_error_types_are_executorchs_where_executorch_raises(counter: str) -> None:
    """ExecuTorch's module raises the same types (it accepts a short input
    list without an error, reusing the inputs of the previous call, so that
    case is pyexec's alone)."""
    theirs = _et()._load_for_executorch(counter)
    for call, error in [
        (lambda m: m.run_method("nope", counter_inputs()), RuntimeError),
        (lambda m: m.forward(5), TypeError),
        (lambda m: m.method_meta("forward").input_tensor_meta(7), IndexError),
    ]:
        with pytest.raises(error):
            call(theirs)
        with pytest.raises(error):
            call(px._load_for_executorch(counter))


def test_a_missing_file_is_a_runtime_error_naming_it(tmp_path: Path) -> None:
    with pytest.raises(RuntimeError, match="missing.pte"):
        px._load_for_executorch(str(tmp_path / "missing.pte"))


# ---- install() -----------------------------------------------------------------------


def test_install_makes_executorchs_module_name_give_pyexecs(counter: str) -> None:
    code = (
        "import pyexec.portable_lib as p\n"
        "import executorch.extension.pybindings\n"
        "p.install()\n"
        "from executorch.extension.pybindings.portable_lib import _load_for_executorch, ExecuTorchModule\n"
        "from executorch.extension.pybindings import portable_lib\n"
        "assert _load_for_executorch is p._load_for_executorch, _load_for_executorch\n"
        "assert ExecuTorchModule is p.ExecuTorchModule and portable_lib is p\n"
        f"m = _load_for_executorch({counter!r})\n"
        "print(type(m).__module__, m.forward((__import__('torch').ones(2, 3), __import__('torch').arange(4),"
        " __import__('torch').ones(3, dtype=__import__('torch').float16)))[1].tolist())\n"
    )
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300,
                       env={**__import__("os").environ, "PYTHONPATH": str(ROOT)})
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split("\n")[-2] == "pyexec.portable_lib [1, 2, 3, 4]"


# ---- ETDump ---------------------------------------------------------------------------


def _inspector_rows(path: Path) -> list[tuple[str, str, int]]:
    from executorch.devtools import Inspector

    frame = Inspector(etdump_path=str(path)).to_dataframe()
    return [(r.event_block_name, r.event_name, len(r.raw)) for r in frame.itertuples()
            if r.event_block_name != "Default"]


def test_an_etdump_written_by_a_module_reads_in_executorchs_inspector_as_executorchs(counter: str,
                                                                                      tmp_path: Path) -> None:
    paths = []
    for lib, name in ((px, "pyexec.etdp"), (_et(), "executorch.etdp")):
        m = lib._load_for_executorch(counter, enable_etdump=True)
        assert m.has_etdump()
        for step in (1, 2, 3):
            m.forward(counter_inputs(step))
        m.write_etdump_result_to_file(str(tmp_path / name))
        paths.append(tmp_path / name)
    ours, theirs = (_inspector_rows(p) for p in paths)
    assert ours == theirs
    assert ours and all(count == 3 for _, _, count in ours)


def test_writing_an_etdump_without_enabling_it_is_a_runtime_error(counter: str, tmp_path: Path) -> None:
    m = px._load_for_executorch(counter)
    assert not m.has_etdump()
    with pytest.raises(RuntimeError, match="enable_etdump"):
        m.write_etdump_result_to_file(str(tmp_path / "x.etdp"))


# ---- clone_outputs --------------------------------------------------------------------


def _aliasing(lib: Any, path: str, clone: bool) -> tuple[list[float], list[float], bool]:
    m = lib._load_for_executorch(path)
    first = m.forward(counter_inputs(1), clone_outputs=clone)[0]
    value = first.flatten().tolist()
    second = m.forward(counter_inputs(1), clone_outputs=clone)[0]
    return value, first.flatten().tolist(), first.data_ptr() == second.data_ptr()


@pytest.mark.parametrize("clone", [False, True])
def test_clone_outputs_aliases_the_methods_memory_exactly_when_executorch_does(counter: str, clone: bool) -> None:
    ours, theirs = _aliasing(px, counter, clone), _aliasing(_et(), counter, clone)
    assert ours == theirs
    before, after, same_storage = ours
    if clone:  # an owned copy: the second call leaves it alone
        assert before == after == [1.0] * 6 and not same_storage
    else:  # a view of the output's memory: the second call's value shows through it
        assert before == [1.0] * 6 and after == [2.0] * 6 and same_storage


# ---- thread pool ----------------------------------------------------------------------


def test_threadpool_calls_set_and_read_pyexecs_thread_count() -> None:
    start = px._threadpool_get_thread_count()
    assert start == pyexec.get_num_threads() >= 1
    try:
        px._unsafe_reset_threadpool(1)
        assert px._threadpool_get_thread_count() == 1 == pyexec.get_num_threads()
        px._unsafe_reset_threadpool(2)
        assert px._threadpool_get_thread_count() == 2
    finally:
        px._unsafe_reset_threadpool(start)
    assert px._threadpool_get_thread_count() == start


def test_a_bad_thread_count_is_an_error_naming_it() -> None:
    start = px._threadpool_get_thread_count()
    with pytest.raises(RuntimeError, match="num_threads .* got 0"):
        px._unsafe_reset_threadpool(0)
    assert px._threadpool_get_thread_count() == start
