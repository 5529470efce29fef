"""ETDump files (issue 18): Profile.write_etdump writes ExecuTorch's own
format, which executorch.devtools.Inspector reads into the same tables as an
ETDump ExecuTorch's runtime writes for the same program and inputs: the same
blocks, event names, instruction ids and counts (ExecuTorch's file also has
a "Default" block timing its program and method loading, which pyexec does
not profile). The events are also checked against the program's
instructions, read with executorch's deserialiser."""

from __future__ import annotations

import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import torch
from support.export import export_program
from support.models import Branchy, Mixed
from support.xnnpack import export_xnnpack

import pyexec
from pyexec.__main__ import main

pytestmark = pytest.mark.filterwarnings("ignore")


@pytest.fixture(scope="module")
def mixed_pte() -> bytes:
    return export_program(Mixed(), (torch.ones(2, 3), torch.ones(2, 3)))


@pytest.fixture(scope="module")
def cond_pte() -> bytes:
    return export_program(Branchy(), (torch.ones(3, 4),))


@pytest.fixture(scope="module")
def xnnpack_pte() -> bytes:
    torch.manual_seed(0)
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    return export_xnnpack(mlp.eval(), (torch.ones(2, 8),))


def instruction_etdump_names(pte: bytes) -> dict[tuple[int, int], list[str]]:
    """(chain, index) -> the names ExecuTorch's runtime gives the events of
    that instruction of method 0, from the program read with executorch's own
    deserialiser (delegate calls: only the DELEGATE_CALL event)."""
    from executorch.exir._serialize._program import deserialize_pte_binary
    from executorch.exir.schema import DelegateCall, JumpFalseCall, KernelCall, MoveCall

    plan = deserialize_pte_binary(pte).program.execution_plan[0]
    out: dict[tuple[int, int], list[str]] = {}
    for c, chain in enumerate(plan.chains):
        for k, instr in enumerate(chain.instructions):
            args = instr.instr_args
            if isinstance(args, KernelCall):
                op = plan.operators[args.op_index]
                out[c, k] = [
                    f"native_call_{op.name.split('::')[-1]}" + (f".{op.overload}" if op.overload else ""),
                    "OPERATOR_CALL",
                ]
            elif isinstance(args, DelegateCall):
                out[c, k] = ["DELEGATE_CALL"]
            elif isinstance(args, MoveCall):
                out[c, k] = ["MOVE_CALL"]
            elif isinstance(args, JumpFalseCall):
                out[c, k] = ["JF_CALL"]
    return out


def executorch_etdump(pte: bytes, inputs: list[list[torch.Tensor]], tmp_path: Path) -> Path:
    """The ETDump ExecuTorch's runtime writes for executes of `inputs`."""
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(pte, enable_etdump=True, debug_buffer_size=0)
    method = program.load_method("forward")
    assert method is not None
    for x in inputs:
        method.execute(x)
    path = tmp_path / "executorch.etdp"
    program.write_etdump_result_to_file(str(path), str(tmp_path / "executorch.debug"))
    return path


def pyexec_etdump(pte: bytes, inputs: list[list[torch.Tensor]], tmp_path: Path) -> tuple[Path, pyexec.Profile]:
    method = pyexec.load(pte).load_method("forward")
    with method.profile() as p:
        for x in inputs:
            method.execute(x)
    path = tmp_path / "pyexec.etdp"
    p.write_etdump(path)
    return path, p


def run_events(path: Path) -> list[list[Any]]:
    """The ProfileEvents of each "Execute" run of an ETDump file."""
    from executorch.devtools.etdump.serialize import deserialize_from_etdump_flatcc

    etdump = deserialize_from_etdump_flatcc(path.read_bytes())
    return [[e.profile_event for e in run.events] for run in etdump.run_data if run.name == "Execute"]


def signature(event: Any) -> tuple[Any, ...]:
    return (
        event.name,
        event.chain_index,
        event.instruction_id,
        event.delegate_debug_id_int,
        event.delegate_debug_id_str is not None,
    )


def inspector_rows(path: Path) -> list[tuple[str, str, int]]:
    """(block, event name, how many times it was timed) per row of the
    Inspector's table, blocks other than "Default"."""
    from executorch.devtools import Inspector

    frame = Inspector(etdump_path=str(path)).to_dataframe()
    return [
        (row.event_block_name, row.event_name, len(row.raw))
        for row in frame.itertuples()
        if row.event_block_name != "Default"
    ]


# ---- the same tables as ExecuTorch's own ETDump -------------------------------------


def test_a_portable_program_tabulates_as_executorchs_etdump_does(mixed_pte: bytes, tmp_path: Path) -> None:
    inputs = [[torch.randn(2, 3), torch.randn(2, 3)] for _ in range(3)]
    ours, p = pyexec_etdump(mixed_pte, inputs, tmp_path)
    theirs = executorch_etdump(mixed_pte, inputs, tmp_path)
    rows = inspector_rows(ours)
    assert rows == inspector_rows(theirs)
    assert all(count == 3 for _, _, count in rows)
    expected = [name for names in instruction_etdump_names(mixed_pte).values() for name in names]
    assert [name for _, name, _ in rows] == [*expected, "Method::execute"]
    runs = run_events(ours)
    assert len(runs) == 3
    assert [[signature(e) for e in run] for run in runs] == [[signature(e) for e in run] for run in run_events(theirs)]
    # The events carry pyexec's times: each instruction's as the profile has it.
    for run, (start, duration) in zip(runs, p.run_times):
        assert run[-1].start_time == start and run[-1].end_time == start + duration
        for e in run[:-1]:
            assert start <= e.start_time <= e.end_time <= start + duration
    first = [e for e in p.events if e.run == 0]
    calls = [e for e in runs[0] if e.name == "OPERATOR_CALL"]
    assert [(e.start_time, e.end_time - e.start_time) for e in calls] == [(e.start_ns, e.duration_ns) for e in first]


def test_an_xnnpack_program_lists_the_call_and_each_node(xnnpack_pte: bytes, tmp_path: Path) -> None:
    inputs = [[torch.randn(2, 8)] for _ in range(2)]
    ours, p = pyexec_etdump(xnnpack_pte, inputs, tmp_path)
    theirs = executorch_etdump(xnnpack_pte, inputs, tmp_path)
    runs, et_runs = run_events(ours), run_events(theirs)
    assert len(runs) == len(et_runs) == 2
    for run, et_run in zip(runs, et_runs):
        # The same events in the same order; the nodes are named by pyexec's
        # node types ("FullyConnected #1"), not XNNPACK's operator names
        # ("Fully Connected (NC, F32) GEMM #1"), numbered alike.
        assert [signature(e) for e in run] == [signature(e) for e in et_run]
        nodes = [e.delegate_debug_id_str for e in run if e.delegate_debug_id_str is not None]
        et_nodes = [e.delegate_debug_id_str for e in et_run if e.delegate_debug_id_str is not None]
        assert [n.rsplit(" #", 1)[1] for n in nodes] == [n.rsplit(" #", 1)[1] for n in et_nodes]
        call = next(e for e in run if e.name == "DELEGATE_CALL")
        for e in run:
            if e.delegate_debug_id_str is not None:
                assert call.start_time <= e.start_time <= e.end_time <= call.end_time
    node_names = [e.name for e in p.events if e.run == 0 and e.depth == 1]
    assert [e.delegate_debug_id_str for e in runs[0] if e.name is None] == [
        f"{name} #{node_names[: k + 1].count(name)}" for k, name in enumerate(node_names)
    ]
    rows = inspector_rows(ours)
    et_rows = inspector_rows(theirs)
    assert [(b, n, c) for b, n, c in rows if not n.startswith("FullyConnected")] == [
        (b, n, c) for b, n, c in et_rows if not n.startswith("Fully Connected")
    ]
    assert [c for _, n, c in rows if n.startswith("FullyConnected")] == [
        c for _, n, c in et_rows if n.startswith("Fully Connected")
    ]
    frame = __import__("executorch.devtools", fromlist=["Inspector"]).Inspector(etdump_path=str(ours)).to_dataframe()
    assert list(frame[frame.is_delegated_op].event_name) == ["FullyConnected #1", "FullyConnected #2"]


def test_a_cond_program_lists_only_the_taken_branch(cond_pte: bytes, tmp_path: Path) -> None:
    inputs = [[torch.ones(3, 4)], [-torch.ones(3, 4)], [torch.ones(3, 4)]]
    ours, _ = pyexec_etdump(cond_pte, inputs, tmp_path)
    theirs = executorch_etdump(cond_pte, inputs, tmp_path)
    runs = run_events(ours)
    assert [[signature(e) for e in run] for run in runs] == [[signature(e) for e in run] for run in run_events(theirs)]
    names = [[e.name for e in run] for run in runs]
    assert "native_call_mul.out" in names[0] and "native_call_tanh.out" not in names[0]
    assert "native_call_tanh.out" in names[1] and "native_call_mul.out" not in names[1]
    assert names[0] == names[2]
    # Each run lists its instructions' events in execution order, a subset of the program's.
    program = instruction_etdump_names(cond_pte)
    for run in runs:
        ids = [(e.chain_index, e.instruction_id) for e in run if e.name in ("OPERATOR_CALL", "JF_CALL", "MOVE_CALL")]
        assert len(ids) < len(program)
        for e in run[:-1]:
            assert e.name in program[e.chain_index, e.instruction_id]
    # Two branches, two blocks (the Inspector groups runs by their events).
    blocks = [b for b, _, _ in inspector_rows(ours)]
    assert blocks.count("Execute") == len(blocks)
    assert inspector_rows(ours) == inspector_rows(theirs)


def test_with_an_etrecord_the_events_map_to_the_same_graph_nodes(tmp_path: Path) -> None:
    # Exported here, not with support.export's cache: the ETRecord comes from
    # the same to_edge call as the program.
    from executorch.devtools import Inspector
    from executorch.exir import to_edge

    with torch.no_grad():
        ep = torch.export.export(Mixed(), (torch.ones(2, 3), torch.ones(2, 3)), strict=False)
    manager = to_edge(ep, generate_etrecord=True).to_executorch()
    record = tmp_path / "mixed.etrecord"
    manager.get_etrecord().save(str(record))
    pte = bytes(manager.buffer)
    inputs = [[torch.randn(2, 3), torch.randn(2, 3)]]
    ours, _ = pyexec_etdump(pte, inputs, tmp_path)
    theirs = executorch_etdump(pte, inputs, tmp_path)

    def nodes(path: Path) -> list[tuple[str, Any, list[str]]]:
        blocks = Inspector(etdump_path=str(path), etrecord=str(record)).event_blocks
        return [(e.name, e.debug_handles, e.op_types) for b in blocks if b.name == "Execute" for e in b.events]

    mapped = nodes(ours)
    assert mapped == nodes(theirs)
    add = next(m for m in mapped if m[0] == "native_call_add.out")
    assert add[2] == ["aten.add.Tensor"]
    assert all(m[2] for m in mapped if m[0] != "Method::execute")


# ---- the file ----------------------------------------------------------------------


def test_the_file_is_a_size_prefixed_flatbuffer_with_etdumps_identifier(mixed_pte: bytes, tmp_path: Path) -> None:
    inputs = [[torch.randn(2, 3), torch.randn(2, 3)]]
    for path in (pyexec_etdump(mixed_pte, inputs, tmp_path)[0], executorch_etdump(mixed_pte, inputs, tmp_path)):
        data = path.read_bytes()
        (size,) = struct.unpack_from("<I", data)
        assert size == len(data) - 4 and data[8:12] == b"ED00" and len(data) % 8 == 0


def test_a_profile_with_no_executes_writes_an_empty_etdump(mixed_pte: bytes, tmp_path: Path) -> None:
    method = pyexec.load(mixed_pte).load_method("forward")
    with method.profile() as p:
        pass
    p.write_etdump(tmp_path / "empty.etdp")
    assert run_events(tmp_path / "empty.etdp") == []


def test_writing_needs_neither_executorch_nor_flatbuffers(mixed_pte: bytes, tmp_path: Path) -> None:
    model = tmp_path / "m.pte"
    model.write_bytes(mixed_pte)
    out = tmp_path / "out.etdp"
    code = (
        "import sys\n"
        "for name in ('executorch', 'flatbuffers', 'torch'):\n"
        "    sys.modules[name] = None\n"
        "import numpy as np, pyexec\n"
        f"m = pyexec.load({str(model)!r}).load_method('forward')\n"
        "with m.profile() as p:\n"
        "    m.execute([np.ones((2, 3), np.float32), np.ones((2, 3), np.float32)])\n"
        f"p.write_etdump({str(out)!r})\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)
    assert [len(run) for run in run_events(out)] == [2 * 5 + 1]


# ---- dropped events ---------------------------------------------------------------------


def test_events_past_max_events_are_counted_as_dropped(mixed_pte: bytes, tmp_path: Path) -> None:
    method = pyexec.load(mixed_pte).load_method("forward")
    inputs = [torch.randn(2, 3), torch.randn(2, 3)]
    with method.profile() as full:
        for _ in range(3):
            method.execute(inputs)
    with method.profile(max_events=7) as p:
        for _ in range(3):
            method.execute(inputs)
    assert len(p.events) == 7 and p.dropped == len(full.events) - 7
    assert [e.name for e in p.events] == [e.name for e in full.events][:7]
    assert p.runs == 3 and len(p.run_times) == 3
    assert f"{p.dropped} later event(s) dropped" in p.table()
    p.write_etdump(tmp_path / "cut.etdp")
    assert [len(run) for run in run_events(tmp_path / "cut.etdp")] == [2 * 5 + 1, 2 * 2 + 1, 1]
    with method.profile() as again:  # the limit lasts one profile
        method.execute(inputs)
    assert again.dropped == 0 and len(again.events) == 5


@pytest.mark.parametrize("bad", [0, -1, 2.5, True, "10"])
def test_max_events_must_be_a_positive_int(mixed_pte: bytes, bad: Any) -> None:
    method = pyexec.load(mixed_pte).load_method("forward")
    with pytest.raises(pyexec.InvalidArgumentError, match="max_events"):
        method.profile(max_events=bad)


# ---- errors ----------------------------------------------------------------------------


def test_an_unwritable_path_raises_file_error_naming_it(mixed_pte: bytes, tmp_path: Path) -> None:
    _, p = pyexec_etdump(mixed_pte, [[torch.randn(2, 3), torch.randn(2, 3)]], tmp_path)
    bad = tmp_path / "no" / "such" / "dir" / "out.etdp"
    with pytest.raises(pyexec.FileError, match=str(bad)):
        p.write_etdump(bad)
    with pytest.raises(pyexec.FileError, match="ETDump"):
        p.write_etdump(tmp_path)  # a directory


def test_writing_inside_the_block_is_refused(mixed_pte: bytes, tmp_path: Path) -> None:
    method = pyexec.load(mixed_pte).load_method("forward")
    with method.profile() as p:
        method.execute([torch.randn(2, 3), torch.randn(2, 3)])
        with pytest.raises(pyexec.InvalidArgumentError, match="after its with block"):
            p.write_etdump(tmp_path / "early.etdp")
    assert not (tmp_path / "early.etdp").exists()


def test_a_closed_method_gives_the_closed_error(mixed_pte: bytes, tmp_path: Path) -> None:
    method = pyexec.load(mixed_pte).load_method("forward")
    method.close()
    with pytest.raises(pyexec.InvalidArgumentError, match="closed"):
        with method.profile():
            pass
    method = pyexec.load(mixed_pte).load_method("forward")
    with pytest.raises(pyexec.InvalidArgumentError, match="closed"):
        with method.profile() as p:
            method.execute([torch.randn(2, 3), torch.randn(2, 3)])
            method.close()
    assert p.events == [] and p.runs == 0


# ---- command line ------------------------------------------------------------------------


def test_the_profile_command_writes_an_etdump(
    xnnpack_pte: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = tmp_path / "mlp.pte"
    model.write_bytes(xnnpack_pte)
    out = tmp_path / "mlp.etdp"
    assert main(["profile", str(model), "--runs", "2", "--warmup", "0", "--etdump", str(out)]) == 0
    assert f"etdump: {out}" in capsys.readouterr().out
    rows = inspector_rows(out)
    assert [n for _, n, _ in rows] == ["FullyConnected #1", "FullyConnected #2", "DELEGATE_CALL", "Method::execute"]
    assert all(c == 2 for _, _, c in rows)
    bad = tmp_path / "missing" / "x.etdp"
    assert main(["profile", str(model), "--runs", "1", "--etdump", str(bad)]) == 1
    assert str(bad) in capsys.readouterr().err
