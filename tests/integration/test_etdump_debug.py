"""ETDump with a debug buffer: `method.profile(debug_buffer_size=N)` records
every instruction's outputs as ExecuTorch's runtime does with
`enable_etdump=True, debug_buffer_size=N`, and `Profile.write_etdump(path,
debug_buffer_path)` writes them so that ExecuTorch's Inspector shows the
same intermediate outputs as for ExecuTorch's own files of the same program
(within each operator's tolerance) and `calculate_numeric_gap` against
eager gives small gaps. A CNN (convolution, batch norm, ReLU: fused at load
by pyexec, run unfused while recording; a max pool writing values and
indices; a linear layer) and an MLP (its weight transposes folded at load; a
split filling a tensor list), portable and XNNPACK-lowered; a buffer too
small; no debug buffer."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

import pyexec

DEBUG_BUFFER_SIZE = 1 << 20

# Per event, (rtol, atol) between pyexec's and ExecuTorch's values: data
# movement is exact; arithmetic may round differently (summation order).
EXACT = (0.0, 0.0)
ARITHMETIC = (1e-4, 1e-5)
TOLERANCE = {"native_call_permute_copy.out": EXACT}


class CNN(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3)
        self.bn = torch.nn.BatchNorm2d(8)
        self.pool = torch.nn.MaxPool2d(2)  # two out= tensors (values, indices)
        self.fc = torch.nn.Linear(8 * 3 * 3, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.flatten(self.pool(torch.relu(self.bn(self.conv(x)))), 1))


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(16, 32)
        self.b = torch.nn.Linear(32, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h, g = torch.split(self.a(x), 16, dim=1)  # a tensor list out= argument
        return self.b(torch.cat([torch.relu(h), torch.sigmoid(g)], dim=1))


def make_model(name: str) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(0)
    if name == "cnn":
        model: torch.nn.Module = CNN()
        bn = model.bn
        assert isinstance(bn, torch.nn.BatchNorm2d)
        with torch.no_grad():  # statistics that are not the identity
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
            bn.weight.uniform_(0.5, 1.5)
            bn.bias.uniform_(-0.5, 0.5)
        return model.eval(), (torch.randn(1, 3, 8, 8),)
    return MLP().eval(), (torch.randn(2, 16),)


@dataclass
class Files:
    """One program's files: the .pte and ETRecord, and the ETDump and debug
    buffer each runtime wrote for one execute of `inputs`."""

    pte: Path
    etrecord: Path
    inputs: tuple[torch.Tensor, ...]
    eager: torch.Tensor
    executorch: tuple[Path, Path]
    pyexec: tuple[Path, Path]
    profile: pyexec.Profile
    outputs: list[Any]


def export(name: str, backend: str, tmp: Path) -> tuple[Path, Path, tuple[torch.Tensor, ...], torch.Tensor]:
    """The program exported with ExecuTorch's exporter, and its ETRecord
    (with the inputs as representative inputs, for calculate_numeric_gap)."""
    from executorch.exir import to_edge_transform_and_lower

    model, inputs = make_model(name)
    partitioners: list[Any] = []
    if backend == "xnnpack":
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner

        partitioners = [XnnpackPartitioner()]
    edge = to_edge_transform_and_lower(
        torch.export.export(model, inputs), partitioner=partitioners, generate_etrecord=True
    )
    program = edge.to_executorch()
    pte, etrecord = tmp / "model.pte", tmp / "model.etrecord"
    pte.write_bytes(program.buffer)
    record = program.get_etrecord()
    record.update_representative_inputs([inputs])
    record.save(str(etrecord))
    with torch.no_grad():
        eager = model(*inputs)
    return pte, etrecord, inputs, eager


def executorch_files(pte: Path, inputs: tuple[torch.Tensor, ...], tmp: Path) -> tuple[Path, Path]:
    """ExecuTorch's runtime, with its ETDump and a debug buffer."""
    from executorch.extension.pybindings.portable_lib import _load_for_executorch

    module = _load_for_executorch(str(pte), enable_etdump=True, debug_buffer_size=DEBUG_BUFFER_SIZE)
    module.forward(inputs)
    paths = tmp / "executorch.etdp", tmp / "executorch.bin"
    module.write_etdump_result_to_file(str(paths[0]), str(paths[1]))
    return paths


@pytest.fixture(scope="module", params=["cnn-portable", "cnn-xnnpack", "mlp-portable", "mlp-xnnpack"])
def files(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Files:
    name, backend = request.param.split("-")
    tmp = tmp_path_factory.mktemp(request.param)
    pte, etrecord, inputs, eager = export(name, backend, tmp)
    theirs = executorch_files(pte, inputs, tmp)
    method = pyexec.load(pte.read_bytes()).load_method("forward")
    with method.profile(debug_buffer_size=DEBUG_BUFFER_SIZE) as p:
        outputs = method.execute(list(inputs))
    ours = tmp / "pyexec.etdp", tmp / "pyexec.bin"
    p.write_etdump(ours[0], debug_buffer_path=ours[1])
    return Files(pte, etrecord, inputs, eager, theirs, ours, p, outputs)


def inspector(files: Files, which: tuple[Path, Path]) -> Any:
    from executorch.devtools import Inspector

    return Inspector(etdump_path=str(which[0]), etrecord=str(files.etrecord), debug_buffer_path=str(which[1]))


def intermediate_outputs(ins: Any) -> list[tuple[str, list[Any]]]:
    """(event name, its debug data) per row of the Inspector's table for the
    "Execute" blocks: the intermediate outputs column."""
    frame = ins.to_dataframe()
    return [(row.event_name, list(row.debug_data)) for row in frame.itertuples() if row.event_block_name == "Execute"]


def assert_close(name: str, ours: Any, theirs: Any) -> None:
    if isinstance(theirs, torch.Tensor):
        assert isinstance(ours, torch.Tensor), name
        assert ours.shape == theirs.shape and ours.dtype == theirs.dtype, name
        rtol, atol = TOLERANCE.get(name, ARITHMETIC)
        torch.testing.assert_close(ours, theirs, rtol=rtol, atol=atol, msg=lambda m: f"{name}: {m}")
    elif isinstance(theirs, list):
        assert isinstance(ours, list) and len(ours) == len(theirs), name
        for a, b in zip(ours, theirs):
            assert_close(name, a, b)
    else:
        assert ours == theirs, name


# ---- the same intermediate outputs as ExecuTorch's runtime --------------------------


def test_the_intermediate_outputs_equal_executorchs(files: Files) -> None:
    # The rows with values (the nodes an XNNPACK delegate runs have none, in
    # both; their names are the profile's, not this test's subject).
    ours = [row for row in intermediate_outputs(inspector(files, files.pyexec)) if row[1]]
    theirs = [row for row in intermediate_outputs(inspector(files, files.executorch)) if row[1]]
    assert [name for name, _ in ours] == [name for name, _ in theirs]
    assert theirs  # the comparison compares something
    for (name, a), (_, b) in zip(ours, theirs):
        assert len(a) == len(b), name
        for x, y in zip(a, b):
            assert_close(name, x, y)


@pytest.mark.parametrize("api", ["portable_lib", "runtime"])
def test_executorchs_enable_etdump_loads_record_the_same_intermediate_outputs(
    files: Files, api: str, tmp_path: Path
) -> None:
    # ExecuTorch's own spellings, with pyexec underneath: the Module API
    # (pyexec.portable_lib) and executorch.runtime's (pyexec.Runtime), each
    # loaded with enable_etdump=True and a debug buffer, run twice on the
    # same inputs (two runs in one file; the Inspector checks that repeated
    # runs recorded equal values and shows them once).
    paths = tmp_path / "pyexec.etdp", tmp_path / "pyexec.bin"
    if api == "portable_lib":
        from pyexec.portable_lib import _load_for_executorch

        module = _load_for_executorch(str(files.pte), enable_etdump=True, debug_buffer_size=DEBUG_BUFFER_SIZE)
        assert module.has_etdump()
        for _ in range(2):
            module.forward(files.inputs)
        module.write_etdump_result_to_file(str(paths[0]), str(paths[1]))
    else:
        program = pyexec.Runtime.get().load_program(files.pte.read_bytes(), enable_etdump=True,
                                                    debug_buffer_size=DEBUG_BUFFER_SIZE)
        method = program.load_method("forward")
        for _ in range(2):
            method.execute(list(files.inputs))
        program.write_etdump_result_to_file(paths[0], paths[1])
    ours = [row for row in intermediate_outputs(inspector(files, paths)) if row[1]]
    theirs = [row for row in intermediate_outputs(inspector(files, files.executorch)) if row[1]]
    assert [name for name, _ in ours] == [name for name, _ in theirs] and theirs
    for (name, a), (_, b) in zip(ours, theirs):
        assert len(a) == len(b), name
        for x, y in zip(a, b):
            assert_close(name, x, y)


def test_enable_etdump_without_a_debug_buffer_refuses_a_buffer_path(files: Files, tmp_path: Path) -> None:
    from pyexec.portable_lib import _load_for_executorch

    module = _load_for_executorch(str(files.pte), enable_etdump=True)
    module.forward(files.inputs)
    with pytest.raises(RuntimeError, match="debug_buffer_size"):
        module.write_etdump_result_to_file(str(tmp_path / "a.etdp"), str(tmp_path / "a.bin"))
    plain = _load_for_executorch(str(files.pte))
    assert not plain.has_etdump()
    with pytest.raises(RuntimeError, match="enable_etdump=True"):
        plain.write_etdump_result_to_file(str(tmp_path / "b.etdp"))
    with pytest.raises(pyexec.InvalidArgumentError, match="enable_etdump=True"):
        pyexec.load(files.pte).write_etdump_result_to_file(tmp_path / "c.etdp")


def test_every_instruction_records_what_executorch_logs(files: Files) -> None:
    """Per instruction the same number of values of the same shapes, even
    where pyexec fuses (CNN) or folds (the linear weights' transposes) at
    load: read straight from the files with ExecuTorch's deserialiser."""
    from executorch.devtools.etdump.serialize import deserialize_from_etdump_flatcc

    def debug_events(path: Path) -> list[tuple[int, int, str, tuple[int, ...], bool]]:
        etdump = deserialize_from_etdump_flatcc(path.read_bytes())
        out = []
        for run in etdump.run_data:
            for e in run.events or []:
                d = e.debug_event
                if d is None:
                    continue
                v = d.debug_entry
                sizes = tuple(v.tensor.sizes) if v.tensor is not None else ()
                out.append((d.chain_index, d.instruction_id, v.val, sizes, v.output is not None))
        return out

    ours, theirs = debug_events(files.pyexec[0]), debug_events(files.executorch[0])
    assert ours == theirs
    assert any(output for *_, output in ours)


def test_the_run_outputs_are_the_executes_outputs(files: Files) -> None:
    block = next(b for b in inspector(files, files.pyexec).event_blocks if b.name == "Execute")
    assert len(block.run_output) == len(files.outputs) == 1
    torch.testing.assert_close(block.run_output[0], torch.as_tensor(files.outputs[0]), rtol=0, atol=0)
    outputs = [v for v in files.profile.debug_values if v.output >= 0]
    assert [v.output for v in outputs] == [0]


def test_calculate_numeric_gap_against_eager_gives_small_gaps(files: Files) -> None:
    ours = inspector(files, files.pyexec).calculate_numeric_gap("MSE")
    theirs = inspector(files, files.executorch).calculate_numeric_gap("MSE")
    assert len(ours) > 0
    assert [list(r) for r in ours["aot_ops"]] == [list(r) for r in theirs["aot_ops"]]
    assert [list(r) for r in ours["runtime_ops"]] == [list(r) for r in theirs["runtime_ops"]]
    for aot, gaps in zip(ours["aot_ops"], ours["gap"]):
        for gap in gaps:
            assert math.isfinite(gap) and gap < 1e-8, (aot, gap)
    # The final output is eager's too.
    torch.testing.assert_close(torch.as_tensor(files.outputs[0]), files.eager, rtol=1e-4, atol=1e-5)


def test_the_table_prints(files: Files, tmp_path: Path) -> None:
    path = tmp_path / "table.txt"
    with open(path, "w", encoding="utf-8") as f:
        inspector(files, files.pyexec).print_data_tabular(file=f)
    text = path.read_text(encoding="utf-8")
    assert "Method::execute" in text and ("native_call_" in text or "DELEGATE_CALL" in text)


# ---- the buffer's size, and no buffer -----------------------------------------------


@pytest.fixture(scope="module")
def cnn_method(tmp_path_factory: pytest.TempPathFactory) -> tuple[pyexec.Method, list[torch.Tensor]]:
    pte, _, inputs, _ = export("cnn", "portable", tmp_path_factory.mktemp("cnn"))
    return pyexec.load(pte.read_bytes()).load_method("forward"), list(inputs)


def test_a_buffer_too_small_fails_the_execute_and_keeps_what_fitted(
    cnn_method: tuple[pyexec.Method, list[torch.Tensor]],
) -> None:
    method, inputs = cnn_method
    # The convolution's output alone, 8 x 6 x 6 float32, is 1152 bytes.
    with method.profile(debug_buffer_size=1000) as p:
        with pytest.raises(pyexec.OutOfMemoryError, match=r"debug buffer \(1000 bytes\) is full: .*convolution"):
            method.execute(inputs)
    assert len(p.debug_buffer) <= 1000
    assert all(v.offset + v.nbytes <= len(p.debug_buffer) for v in p.debug_values if v.kind == "tensor")
    # Nothing went wrong with the method: it runs on, with a buffer large
    # enough (unfused, so rounded differently from the fused run) or none.
    expected = method.execute(inputs)
    with method.profile(debug_buffer_size=DEBUG_BUFFER_SIZE) as p:
        got = method.execute(inputs)
    torch.testing.assert_close(torch.as_tensor(got[0]), torch.as_tensor(expected[0]), rtol=1e-4, atol=1e-5)
    assert p.debug_values


def test_without_a_debug_buffer_nothing_is_recorded(
    cnn_method: tuple[pyexec.Method, list[torch.Tensor]], tmp_path: Path
) -> None:
    from executorch.devtools.etdump.serialize import deserialize_from_etdump_flatcc

    method, inputs = cnn_method
    with method.profile() as p:
        method.execute(inputs)
    assert p.events and p.debug_values == [] and p.debug_buffer == b""
    path = tmp_path / "plain.etdp"
    p.write_etdump(path, debug_buffer_path=tmp_path / "plain.bin")
    etdump = deserialize_from_etdump_flatcc(path.read_bytes())
    assert all(e.debug_event is None for run in etdump.run_data for e in run.events or [])
    assert (tmp_path / "plain.bin").read_bytes() == b""
    # Fused as loaded: the profile without a buffer shows the fused convolution.
    assert any("(+" in e.name for e in p.events)


def test_start_and_stop_without_a_with_block(cnn_method: tuple[pyexec.Method, list[torch.Tensor]]) -> None:
    method, inputs = cnn_method
    p = method.profile(debug_buffer_size=DEBUG_BUFFER_SIZE)
    with pytest.raises(pyexec.InvalidArgumentError, match="not collecting"):
        p.stop()
    assert p.start() is p
    with pytest.raises(pyexec.InvalidArgumentError, match="already collecting"):
        p.start()
    method.execute(inputs)
    method.execute(inputs)
    assert p.stop() is p
    assert p.runs == 2
    assert sorted({v.run for v in p.debug_values}) == [0, 1]
    first = [v for v in p.debug_values if v.run == 0]
    second = [v for v in p.debug_values if v.run == 1]
    assert [(v.kind, v.sizes, v.output) for v in first] == [(v.kind, v.sizes, v.output) for v in second]
    # A new start collects afresh.
    p.start()
    method.execute(inputs)
    p.stop()
    assert p.runs == 1 and {v.run for v in p.debug_values} == {0}


@pytest.mark.parametrize("size", [-1, 1.5, True, "8"])
def test_a_bad_debug_buffer_size_is_refused(cnn_method: tuple[pyexec.Method, list[torch.Tensor]], size: Any) -> None:
    method, _ = cnn_method
    with pytest.raises(pyexec.InvalidArgumentError, match="debug_buffer_size"):
        method.profile(debug_buffer_size=size)


# ---- prim ops and scalars: a dynamic shape ------------------------------------------


class Reshape(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, int]:
        return x.reshape(x.shape[0] * 2, -1) + 1.0, x.shape[0]


def test_prim_ops_log_and_time_as_executorchs_do(tmp_path: Path) -> None:
    """sym_size, a scalar multiply and et_view (ExecuTorch's prim ops): an
    OPERATOR_CALL event each and no value, in both runtimes' files; an int
    method output is logged as an Int (unmarked as an output, as ExecuTorch
    logs it)."""
    from executorch.devtools.etdump.serialize import deserialize_from_etdump_flatcc
    from executorch.exir import to_edge_transform_and_lower

    x = torch.randn(4, 6)
    ep = torch.export.export(Reshape(), (x,), dynamic_shapes=({0: torch.export.Dim("n", min=2, max=8)},))
    pte = tmp_path / "reshape.pte"
    pte.write_bytes(to_edge_transform_and_lower(ep).to_executorch().buffer)
    theirs = executorch_files(pte, (x,), tmp_path)
    method = pyexec.load(pte.read_bytes()).load_method("forward")
    with method.profile(debug_buffer_size=DEBUG_BUFFER_SIZE) as p:
        method.execute([x])
    ours = tmp_path / "pyexec.etdp", tmp_path / "pyexec.bin"
    p.write_etdump(ours[0], debug_buffer_path=ours[1])

    def events(path: Path) -> list[tuple[str, int, tuple[int, ...]]]:
        etdump = deserialize_from_etdump_flatcc(path.read_bytes())
        out = []
        for run in etdump.run_data:
            if run.name != "Execute":
                continue
            for e in run.events or []:
                if e.profile_event is not None:
                    out.append((e.profile_event.name, e.profile_event.instruction_id, ()))
                else:
                    v = e.debug_event.debug_entry
                    shape = tuple(v.tensor.sizes) if v.tensor is not None else (v.int_value.int_val,)
                    out.append((f"({v.val}, output={v.output is not None})", e.debug_event.instruction_id, shape))
        return out

    assert events(ours[0]) == events(theirs[0])
    assert ("OPERATOR_CALL", 0, ()) in events(ours[0])  # the prim ops are there
    assert ("(Int, output=False)", 0, (4,)) in events(ours[0])
