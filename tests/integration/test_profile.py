"""Profiling (issue 18): Method.profile() lists every executed instruction's
operator in execution order (only the taken branch of a torch.cond), the
nodes an XNNPACK delegate runs inside its call, positive times whose sum is
at most the wall time of the calls; the table, the Chrome trace, the
`pyexec profile` command and their errors."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from support.export import export_program
from support.models import Branchy, Mixed
from support.xnnpack import export_xnnpack

import pyexec
from pyexec.__main__ import main


def instruction_names(pte: bytes) -> list[str]:
    """The names the profile gives the instructions of method 0's chains, in
    program order, read with executorch's own deserialiser."""
    from executorch.exir._serialize._program import deserialize_pte_binary
    from executorch.exir.schema import DelegateCall, JumpFalseCall, KernelCall, MoveCall

    plan = deserialize_pte_binary(pte).program.execution_plan[0]
    names: list[str] = []
    for chain in plan.chains:
        for instr in chain.instructions:
            args = instr.instr_args
            if isinstance(args, KernelCall):
                op = plan.operators[args.op_index]
                names.append(f"{op.name}.{op.overload}" if op.overload else op.name)
            elif isinstance(args, DelegateCall):
                names.append("delegate:" + plan.delegates[args.delegate_index].id)
            elif isinstance(args, MoveCall):
                names.append("(move)")
            elif isinstance(args, JumpFalseCall):
                names.append("(jump_false)")
    return names


def is_subsequence(part: list[str], whole: list[str]) -> bool:
    it = iter(whole)
    return all(any(name == w for w in it) for name in part)


@pytest.fixture(scope="module")
def mixed_pte() -> bytes:
    return export_program(Mixed(), (torch.ones(2, 3), torch.ones(2, 3)))


@pytest.fixture(scope="module")
def cond_pte() -> bytes:
    return export_program(Branchy(), (torch.ones(3, 4),))


@pytest.fixture(scope="module")
def xnnpack_pte() -> bytes:
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    return export_xnnpack(mlp.eval(), (torch.ones(2, 8),))


# ---- events --------------------------------------------------------------------


def test_events_list_every_executed_instruction_in_program_order(mixed_pte: bytes) -> None:
    method = pyexec.load(mixed_pte).load_method("forward")
    inputs = [torch.randn(2, 3), torch.randn(2, 3)]
    with method.profile() as p:
        method.execute(inputs)
        method.execute(inputs)
    expected = instruction_names(mixed_pte)
    assert [e.name for e in p.events if e.run == 0] == expected
    assert [e.name for e in p.events if e.run == 1] == expected
    assert p.runs == 2
    assert all(e.depth == 0 and e.parent is None for e in p.events)
    add = next(e for e in p.events if e.name == "aten::add.out")
    assert add.shapes == "[2,3] [2,3]"
    cat = next(e for e in p.events if e.name == "aten::cat.out")
    assert cat.shapes == "{[2,3] [2,3]}"


def test_times_are_positive_and_sum_to_at_most_the_wall_time(mixed_pte: bytes) -> None:
    method = pyexec.load(mixed_pte).load_method("forward")
    inputs = [torch.randn(2, 3), torch.randn(2, 3)]
    method.execute(inputs)
    with method.profile() as p:
        t0 = time.monotonic_ns()
        method.execute(inputs)
        wall = time.monotonic_ns() - t0
    assert p.events and all(e.duration_ns > 0 and e.start_ns > 0 for e in p.events)
    assert sum(e.duration_ns for e in p.events) <= wall
    starts = [e.start_ns for e in p.events]
    assert starts == sorted(starts)


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_a_cond_program_lists_only_the_taken_branch(cond_pte: bytes, sign: float) -> None:
    method = pyexec.load(cond_pte).load_method("forward")
    with method.profile() as p:
        method.execute([torch.full((3, 4), sign)])
    names = [e.name for e in p.events]
    program = instruction_names(cond_pte)
    assert "(jump_false)" in names and len(names) < len(program)
    assert is_subsequence(names, program)
    if sign > 0:
        assert "aten::mul.out" in names and "aten::tanh.out" not in names
    else:
        assert "aten::tanh.out" in names and "aten::mul.out" not in names


def test_an_xnnpack_program_lists_the_delegate_call_and_its_nodes(xnnpack_pte: bytes) -> None:
    method = pyexec.load(xnnpack_pte).load_method("forward")
    with method.profile() as p:
        method.execute([torch.randn(2, 8)])
    top = [e for e in p.events if e.depth == 0]
    assert [e.name for e in top] == instruction_names(xnnpack_pte)
    call = next(e for e in top if e.name == "delegate:XnnpackBackend")
    assert call.shapes == "[2,8]"
    nodes = [e for e in p.events if e.depth == 1]
    assert [e.name for e in nodes] == ["FullyConnected", "FullyConnected"]
    assert nodes[0].shapes == "[2,8] [16,8] [16]" and nodes[0].parent == "delegate:XnnpackBackend"
    assert [e.index for e in nodes] == [0, 1]
    for node in nodes:
        assert call.start_ns <= node.start_ns
        assert node.start_ns + node.duration_ns <= call.start_ns + call.duration_ns
    table = p.table()
    assert "delegate:XnnpackBackend" in table and "XnnpackBackend/FullyConnected" in table


def test_a_node_without_its_optional_input_lists_the_inputs_it_has() -> None:
    """A FullyConnected without a bias (every linear layer of an 8da4w LLM
    export) has an absent third input: its shapes are the two it has."""
    mlp = torch.nn.Sequential(torch.nn.Linear(8, 16, bias=False), torch.nn.ReLU(), torch.nn.Linear(16, 4))
    pte = export_xnnpack(mlp.eval(), (torch.ones(2, 8),))
    method = pyexec.load(pte).load_method("forward")
    x = torch.randn(2, 8)
    with method.profile() as p:
        (got,) = method.execute([x])
    torch.testing.assert_close(got, mlp(x), rtol=1e-5, atol=1e-5)
    nodes = [e for e in p.events if e.depth == 1]
    assert [e.name for e in nodes] == ["FullyConnected", "FullyConnected"]
    assert [e.shapes for e in nodes] == ["[2,8] [16,8]", "[2,16] [4,16] [4]"]


def test_nothing_is_recorded_outside_the_block(mixed_pte: bytes) -> None:
    method = pyexec.load(mixed_pte).load_method("forward")
    inputs = [torch.randn(2, 3), torch.randn(2, 3)]
    with method.profile() as first:
        method.execute(inputs)
    method.execute(inputs)
    with method.profile() as second:
        pass
    assert first.events and second.events == []
    assert second.runs == 0 and "0 run(s)" in second.table()


# ---- table and trace ------------------------------------------------------------


def test_the_table_has_one_row_per_operator_sorted_by_total(mixed_pte: bytes) -> None:
    method = pyexec.load(mixed_pte).load_method("forward")
    with method.profile() as p:
        for _ in range(3):
            method.execute([torch.randn(2, 3), torch.randn(2, 3)])
    lines = p.table().splitlines()
    assert lines[0].split() == ["operator", "calls", "total", "ms", "mean", "us", "share", "%"]
    rows = [line.split() for line in lines[1:-2]]
    assert {r[0] for r in rows} == set(instruction_names(mixed_pte))
    assert all(r[1] == "3" for r in rows)
    totals = [total for _, _, total in p.summary()]
    assert totals == sorted(totals, reverse=True)
    assert lines[-2].split()[:2] == ["total", str(len(p.events))]


def test_the_chrome_trace_loads_as_trace_events(mixed_pte: bytes, tmp_path: Path) -> None:
    method = pyexec.load(mixed_pte).load_method("forward")
    with method.profile() as p:
        method.execute([torch.randn(2, 3), torch.randn(2, 3)])
    path = tmp_path / "trace.json"
    p.chrome_trace(path)
    doc = json.loads(path.read_text())
    events: list[dict[str, Any]] = doc["traceEvents"]
    assert [e["name"] for e in events] == [e.name for e in p.events]
    for e in events:
        assert e["ph"] == "X" and e["dur"] > 0 and e["ts"] >= 0
        assert isinstance(e["pid"], int) and isinstance(e["tid"], int)
        assert "shapes" in e["args"]
    assert events[0]["ts"] == 0


# ---- errors ------------------------------------------------------------------------


def test_profiling_a_closed_method_raises_the_closed_error(mixed_pte: bytes) -> None:
    method = pyexec.load(mixed_pte).load_method("forward")
    method.close()
    with pytest.raises(pyexec.InvalidArgumentError, match="closed"):
        with method.profile():
            pass


def test_a_trace_to_an_unwritable_path_raises_file_error_naming_it(mixed_pte: bytes, tmp_path: Path) -> None:
    method = pyexec.load(mixed_pte).load_method("forward")
    with method.profile() as p:
        method.execute([torch.randn(2, 3), torch.randn(2, 3)])
    bad = tmp_path / "no" / "such" / "dir" / "trace.json"
    with pytest.raises(pyexec.FileError, match=str(bad)):
        p.chrome_trace(bad)


# ---- command line --------------------------------------------------------------------


def test_the_profile_command_prints_a_table_and_writes_a_trace(
    xnnpack_pte: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = tmp_path / "mlp.pte"
    model.write_bytes(xnnpack_pte)
    trace = tmp_path / "t.json"
    assert main(["profile", str(model), "--runs", "3", "--warmup", "1", "--trace", str(trace)]) == 0
    out = capsys.readouterr().out
    assert "3 profiled runs after 1 warm-up" in out
    assert "delegate:XnnpackBackend" in out and "XnnpackBackend/FullyConnected" in out
    assert "operator" in out and "share %" in out
    assert len(json.loads(trace.read_text())["traceEvents"]) == 3 * 3


def test_the_profile_command_refuses_bad_runs(
    mixed_pte: bytes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = tmp_path / "m.pte"
    model.write_bytes(mixed_pte)
    assert main(["profile", str(model), "--runs", "0"]) == 2
    assert "--runs" in capsys.readouterr().err
