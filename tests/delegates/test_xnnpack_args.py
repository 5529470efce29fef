"""What an XNNPACK delegate call passes besides plain float tensors, as
ExecuTorch 1.5.1's exporter writes it and its runtime takes it:

- non-tensor arguments: the deprecated to_edge + to_backend flow (which
  ExecuTorch's own linear tests still run) hands the delegate the SymInts of
  the dynamic dims before its tensors; the graph's external ids index the
  whole argument list and the others are ignored;
- addmm's 2-D bias ([1, OC]) on FullyConnected;
- tensors in the channels-last dim_order (a method input, an intermediate
  made by a portable clone, an output): the graph value holds the dims in
  memory order (NHWC) and reads the memory as it lies, as XNNExecutor does;
- int8 tensors bound to qint8 external values (a quantized add with
  constants, quantize / dequantize per tensor).

Each program is compared with ExecuTorch's runtime on the same file and
with torch eager. Then hostile rewrites of the argument lists, the external
ids, a bias shape and a dim_order: each refused at load naming the
argument or value, never a crash (child processes, as in
test_xnnpack_hostile.py)."""

from __future__ import annotations

import struct
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from support.export import assert_close, run_with_executorch
from support.quant import export_quantized
from support.xnnpack import Payload, Table, export_xnnpack, payloads, root, union_names
from torch.export import Dim
from unit.test_hostile import run_cases

import pyexec

# ---- reading the program ----------------------------------------------------------

# Slots (program.fbs / schema.fbs declaration order) and union codes.
PLAN_VALUES, PLAN_CHAINS, CHAIN_INSTRUCTIONS = 2, 5, 2
INSTR_TYPE, INSTR_ARGS, DELEGATE_CALL, DELEGATE_ARGS = 0, 1, 2, 1
EVALUE_TYPE, EVALUE_VAL, TENSOR_SCALAR_TYPE, TENSOR_SIZES, TENSOR_DIM_ORDER = 0, 1, 0, 2, 3
TAG_INT, TAG_TENSOR = 2, 5
XV_TENSOR, XV_QUANTIZED = 1, 2
TV_DATATYPE, TV_DIMS, TV_EXTERNAL_ID, TV_FLAGS, TV_ID_OUT = 0, 2, 4, 5, 6
DT_QINT8, EXTERNAL_INPUT, EXTERNAL_OUTPUT = 3, 1, 2
SCALAR_CHAR = 1


def _plan(pte: bytes) -> Table:
    return root(pte).tables(1)[0]


def _delegate_calls(pte: bytes) -> list[Table]:
    """Every DelegateCall of forward's chains."""
    calls = []
    for chain in _plan(pte).tables(PLAN_CHAINS):
        for ins in chain.tables(CHAIN_INSTRUCTIONS):
            call = ins.table(INSTR_ARGS)
            if ins.scalar(INSTR_TYPE, "B") == DELEGATE_CALL and call is not None:
                calls.append(call)
    return calls


def _call_args(pte: bytes, call: Table) -> list[int]:
    first, n = call.vector(DELEGATE_ARGS)
    return [struct.unpack_from("<i", pte, first + 4 * k)[0] for k in range(n)]


def _value(pte: bytes, index: int) -> tuple[int, Table | None]:
    """(EValue type tag, its table) of value `index`."""
    ev = _plan(pte).tables(PLAN_VALUES)[index]
    return ev.scalar(EVALUE_TYPE, "B"), ev.table(EVALUE_VAL)


def _dim_order(pte: bytes, tensor: Table) -> tuple[int, ...]:
    first, n = tensor.vector(TENSOR_DIM_ORDER)
    return tuple(pte[first : first + n])


def _arg_kinds(pte: bytes) -> list[list[tuple[int, tuple[int, ...] | None]]]:
    """Per DelegateCall, each argument's (tag, dim_order for a tensor)."""
    out = []
    for call in _delegate_calls(pte):
        kinds: list[tuple[int, tuple[int, ...] | None]] = []
        for v in _call_args(pte, call):
            tag, t = _value(pte, v)
            kinds.append((tag, _dim_order(pte, t) if tag == TAG_TENSOR and t is not None else None))
        out.append(kinds)
    return out


def _tensor_values(pte: bytes, p: Payload) -> list[tuple[Table, int]]:
    """(XNNTensorValue, XValue union type) of every value of a payload."""
    out = []
    for xv in p.graph(pte).tables(2):
        u = xv.table(1)
        assert u is not None
        kind = xv.scalar(0, "B")
        tv = u.table(0) if kind == XV_QUANTIZED else u
        assert tv is not None
        out.append((tv, kind))
    return out


def _dims(pte: bytes, tv: Table) -> list[int]:
    first, n = tv.vector(TV_DIMS)
    return [struct.unpack_from("<I", pte, first + 4 * k)[0] for k in range(n)]


# ---- exports ------------------------------------------------------------------------


def export_to_backend(module: torch.nn.Module, inputs: tuple[Any, ...], dynamic_shapes: Any = None) -> bytes:
    """Lowered with the deprecated to_edge + to_backend(XnnpackPartitioner)
    flow ExecuTorch's linear tests run beside to_edge_transform_and_lower
    (tiny models: not cached)."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge

    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        ep = torch.export.export(module, inputs, dynamic_shapes=dynamic_shapes, strict=False)
        return bytes(to_edge(ep).to_backend(XnnpackPartitioner()).to_executorch().buffer)


def _compare(pte: bytes, model: torch.nn.Module, args: list[torch.Tensor], tol: float = 1e-5) -> list[Any]:
    """pyexec's outputs, checked against ExecuTorch's (values, shapes and
    strides) and torch eager's."""
    got = pyexec.load(pte).load_method("forward").execute([a.clone() for a in args])
    et = run_with_executorch(pte, args)
    with torch.no_grad():
        eager = model(*[a.clone() for a in args])
    eager = list(eager) if isinstance(eager, (tuple, list)) else [eager]
    assert len(got) == len(et) == len(eager)
    for k, (g, r, e) in enumerate(zip(got, et, eager)):
        assert_close(g, r, rtol=tol, atol=tol, what=f"output {k} vs ExecuTorch")
        assert_close(g, e, rtol=tol, atol=tol, what=f"output {k} vs eager")
        assert g.stride() == r.stride(), f"output {k}: strides {g.stride()}, ExecuTorch's {r.stride()}"
    return got


# ---- SymInt arguments ----------------------------------------------------------------


class LinearRelu(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(37, 17)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.linear(x))


TWO_BATCH_DIMS = ({0: Dim("b0", min=2, max=4), 1: Dim("b1", min=2, max=4)},)


@pytest.fixture(scope="module")
def sym_linear() -> tuple[torch.nn.Module, bytes]:
    torch.manual_seed(0)
    model = LinearRelu().eval()
    return model, export_to_backend(model, (torch.randn(4, 4, 37),), TWO_BATCH_DIMS)


def test_linear_delegate_takes_sym_int_arguments(sym_linear: tuple[torch.nn.Module, bytes]) -> None:
    model, pte = sym_linear
    (kinds,) = _arg_kinds(pte)
    assert [tag for tag, _ in kinds].count(TAG_INT) == 2, f"the delegate call's arguments: {kinds}"
    assert kinds[0][0] == TAG_INT, "the exporter put the SymInts first"
    method = pyexec.load(pte).load_method("forward")
    for shape in ((4, 4, 37), (2, 3, 37), (3, 2, 37), (2, 2, 37)):
        x = torch.randn(*shape, generator=torch.Generator().manual_seed(sum(shape)))
        (got,) = method.execute([x])
        (et,) = run_with_executorch(pte, [x])
        with torch.no_grad():
            assert_close(got, model(x), rtol=1e-5, atol=1e-5, what=f"{shape} vs eager")
        assert_close(got, et, rtol=1e-5, atol=1e-5, what=f"{shape} vs ExecuTorch")


# ---- addmm's 2-D bias -----------------------------------------------------------------


class AddMM(torch.nn.Module):
    """ExecuTorch's test_fp32_addmm model: bias [1, OC], weights [IC, OC]."""

    def __init__(self, ic: int = 17, oc: int = 37) -> None:
        super().__init__()
        self.mat = torch.nn.Parameter(torch.randn(ic, oc))
        self.bias = torch.nn.Parameter(torch.randn(1, oc))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.addmm(self.bias, x, self.mat)


def _addmm(flow: str) -> tuple[torch.nn.Module, bytes]:
    torch.manual_seed(0)
    model = AddMM().eval()
    x, shapes = torch.randn(4, 17), ({0: Dim("batch", min=2, max=4)},)
    if flow == "to_backend":
        return model, export_to_backend(model, (x,), shapes)
    return model, export_xnnpack(model, (x,), dynamic_shapes=shapes)


def _fc_bias_dims(pte: bytes) -> list[int]:
    """The dims of the FullyConnected node's bias value."""
    names = union_names()
    (p,) = payloads(pte)
    (fc,) = [n for n in p.graph(pte).tables(1) if names[n.scalar(0, "B")] == "FullyConnected"]
    node = fc.table(1)
    assert node is not None
    bias_id = node.scalar(2, "I")  # XNNFullyConnected: input1, filter_id, bias_id, output_id
    by_id = {tv.scalar(TV_ID_OUT, "I"): tv for tv, _ in _tensor_values(pte, p)}
    return _dims(pte, by_id[bias_id])


@pytest.mark.parametrize("flow", ["to_edge_transform_and_lower", "to_backend"])
def test_addmm_with_a_2d_bias_matches_torch_and_executorch(flow: str) -> None:
    model, pte = _addmm(flow)
    assert _fc_bias_dims(pte) == [1, 37]
    for n in (4, 2, 3):
        _compare(pte, model, [torch.randn(n, 17, generator=torch.Generator().manual_seed(n))], tol=1e-4)


# ---- channels-last arguments ------------------------------------------------------------

CHANNELS_LAST = (0, 2, 3, 1)


class ConvRelu(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x))


class BatchNorm(torch.nn.Module):
    """ExecuTorch's test_fp32_batch_norm_nchw_channels_last model."""

    def __init__(self) -> None:
        super().__init__()
        self.bn = torch.nn.BatchNorm2d(3)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-1, 1)
            self.bn.running_var.uniform_(0.5, 2)
            self.bn.weight.uniform_(0.5, 1.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(x)


class CloneToChannelsLast(torch.nn.Module):
    """A portable clone makes the channels-last tensor the delegate reads;
    the delegate's channels-last output goes back through another clone."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.clone(x, memory_format=torch.channels_last)
        return torch.clone(self.conv(y) * 2.0, memory_format=torch.contiguous_format)


def _cl(x: torch.Tensor) -> torch.Tensor:
    return x.to(memory_format=torch.channels_last)


CL_CASES: dict[str, tuple[Callable[[], torch.nn.Module], Callable[[int], torch.Tensor], Any, list[int]]] = {
    # name: (model, input of a batch size, dynamic shapes, batch sizes to run)
    "conv_relu_dynamic_batch": (
        ConvRelu, lambda n: _cl(torch.randn(n, 3, 6, 7)), ({0: Dim("batch", min=1, max=4)},), [4, 1, 3]
    ),
    "batch_norm": (BatchNorm, lambda n: _cl(torch.randn(n, 3, 4, 5)), None, [1]),
    "clone_to_channels_last": (CloneToChannelsLast, lambda n: torch.randn(n, 3, 6, 5), None, [2]),
}


@pytest.fixture(scope="module", params=sorted(CL_CASES))
def cl_case(request: pytest.FixtureRequest) -> tuple[str, torch.nn.Module, bytes]:
    make, inp, shapes, sizes = CL_CASES[request.param]
    torch.manual_seed(0)
    model = make().eval()
    return request.param, model, export_xnnpack(model, (inp(sizes[0]),), dynamic_shapes=shapes)


def test_channels_last_arguments_match_torch_and_executorch(cl_case: tuple[str, torch.nn.Module, bytes]) -> None:
    name, model, pte = cl_case
    _, inp, _, sizes = CL_CASES[name]
    orders = [order for call in _arg_kinds(pte) for tag, order in call if tag == TAG_TENSOR]
    assert CHANNELS_LAST in orders, f"{name}: no channels-last delegate argument: {orders}"
    method = pyexec.load(pte).load_method("forward")
    for n in sizes:
        torch.manual_seed(n)
        x = inp(n)
        got = _compare(pte, model, [x])
        (again,) = method.execute([x.contiguous()])  # any layout in: the slot's dim_order is the program's
        assert_close(again, got[0], rtol=0, atol=0, what=f"{name} batch {n}, contiguous input")


def test_channels_last_output_is_returned_in_its_layout(cl_case: tuple[str, torch.nn.Module, bytes]) -> None:
    """A cloned output keeps the dim_order the program declares, as
    ExecuTorch's runtime returns it; uncloned, it is a strided view."""
    name, model, pte = cl_case
    _, inp, _, sizes = CL_CASES[name]
    x = inp(sizes[0])
    meta = pyexec.load(pte).method_meta("forward")
    assert meta.outputs[0] is not None
    method = pyexec.load(pte).load_method("forward")
    fmt = torch.channels_last if meta.outputs[0].dim_order == CHANNELS_LAST else torch.contiguous_format
    for clone in (True, False):
        (got,) = method.execute([x], clone_outputs=clone)
        assert got.is_contiguous(memory_format=fmt), f"{name} clone={clone}: strides {got.stride()}"


# ---- int8 tensors for qint8 externals -------------------------------------------------


class AddConstant(torch.nn.Module):
    """ExecuTorch's test_qs8_add_constant model: adds of an input and
    constants (a tensor attribute, a buffer, a parameter)."""

    def __init__(self, constant: torch.Tensor) -> None:
        super().__init__()
        self._constant1 = constant
        self.register_buffer("_constant2", constant, persistent=False)
        self.register_parameter("_constant3", torch.nn.Parameter(constant))

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        out1 = x + self._constant1 + torch.ones(1, 1, 1)
        out2 = x + self._constant2 + self._constant3
        return out1, out2


def _output_steps(pte: bytes) -> list[float]:
    """The scales of the qint8 values the payload's Converts turn into its
    float external outputs."""
    names = union_names()
    (p,) = payloads(pte)
    values = {tv.scalar(TV_ID_OUT, "I"): tv for tv, _ in _tensor_values(pte, p)}
    quant = {}  # id -> XNNQuantizedTensorValue
    for xv in p.graph(pte).tables(2):
        u = xv.table(1)
        tv = u.table(0) if u is not None and xv.scalar(0, "B") == XV_QUANTIZED else None
        if u is not None and tv is not None:
            quant[tv.scalar(TV_ID_OUT, "I")] = u
    steps = []
    for n in p.graph(pte).tables(1):
        node = n.table(1)
        if names[n.scalar(0, "B")] != "Convert" or node is None:
            continue
        src, dst = node.scalar(0, "I"), node.scalar(1, "I")
        if values[dst].scalar(TV_FLAGS, "I") & EXTERNAL_OUTPUT and src in quant:
            params = quant[src].table(2)  # XNNQuantizedTensorValue.quant_params: PerTensorQuant {scale, zero_point}
            assert params is not None
            steps.append(float(params.scalar(0, "f")))
    return steps


def _qs8_inputs() -> list[torch.Tensor]:
    return [torch.randn(4, 4, 4, generator=torch.Generator().manual_seed(seed)) for seed in range(3)]


@pytest.fixture(scope="module")
def qs8_add() -> tuple[torch.nn.Module, bytes]:
    """Calibrated on the inputs the test runs (no value outside the
    observed ranges: the eager comparison measures rounding, not clipping)."""
    torch.manual_seed(0)
    model = AddConstant(torch.randn(4, 4, 4)).eval()
    quant = {"scheme": "pt2e", "per_channel": False, "dynamic": False}
    xs = _qs8_inputs()
    return model, export_quantized(model, (xs[0],), quant, calibration=[(x,) for x in xs], lower=True)


def test_qs8_add_with_constants_binds_int8_tensors_to_qint8_values(qs8_add: tuple[torch.nn.Module, bytes]) -> None:
    model, pte = qs8_add
    (p,) = payloads(pte)
    qint8_externals = [
        tv.scalar(TV_EXTERNAL_ID, "I")
        for tv, _ in _tensor_values(pte, p)
        if tv.scalar(TV_DATATYPE, "h") == DT_QINT8 and tv.scalar(TV_FLAGS, "I") & EXTERNAL_INPUT
    ]
    assert qint8_externals, "no qint8 external input"
    (call,) = _delegate_calls(pte)
    args = _call_args(pte, call)
    for ext in qint8_externals:
        tag, t = _value(pte, args[ext])
        assert tag == TAG_TENSOR and t is not None and t.scalar(TENSOR_SCALAR_TYPE, "b") == SCALAR_CHAR
    steps = _output_steps(pte)
    assert len(steps) == 2
    method = pyexec.load(pte).load_method("forward")
    for seed, x in enumerate(_qs8_inputs()):
        got = method.execute([x])
        et = run_with_executorch(pte, [x])
        with torch.no_grad():
            eager = model(x)
        for k, (g, r, e, step) in enumerate(zip(got, et, eager, steps)):
            # XNNPACK's integer add: the same result but for a rounding tie.
            assert_close(g, r, rtol=0, atol=step * 1.001, what=f"seed {seed} output {k} vs ExecuTorch")
            rel = float(torch.linalg.norm(g - e) / torch.linalg.norm(e))
            assert rel < 0.05, f"seed {seed} output {k}: relative error to eager {rel:.3f}"


class QuantizePerTensor(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from executorch.exir.dialects._ops import ops as exir_ops

        return exir_ops.edge.quantized_decomposed.quantize_per_tensor.default(x, 0.12345, 3, -127, 127, torch.int8)


class DequantizePerTensor(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from executorch.exir.dialects._ops import ops as exir_ops

        return exir_ops.edge.quantized_decomposed.dequantize_per_tensor.default(
            x, 0.12345, -2, -127, 127, torch.int8
        )


QDQ: dict[str, tuple[Callable[[], torch.nn.Module], Callable[[torch.Generator], torch.Tensor]]] = {
    # within [-127, 127] steps of 0.12345: XNNPACK's Convert saturates to
    # int8's [-128, 127] whatever quant_min says, and so does pyexec
    "quantize": (QuantizePerTensor, lambda g: torch.randn(2, 3, 4, 4, generator=g).clamp(-3, 3) * 4),
    "dequantize": (
        DequantizePerTensor,
        lambda g: torch.randint(-127, 128, (2, 3, 4, 4), generator=g, dtype=torch.int8),
    ),
}


@pytest.mark.parametrize("name", sorted(QDQ))
def test_quantize_and_dequantize_per_tensor_lowered(name: str) -> None:
    make, inp = QDQ[name]
    model = make()
    pte = export_xnnpack(model, (inp(torch.Generator().manual_seed(0)),))
    names = union_names()
    (p,) = payloads(pte)
    assert [names[n.scalar(0, "B")] for n in p.graph(pte).tables(1)] == ["Convert"]
    datatypes = sorted(tv.scalar(TV_DATATYPE, "h") for tv, _ in _tensor_values(pte, p))
    assert datatypes == [1, DT_QINT8], f"values: {datatypes}"  # fp32 and qint8, both external
    for seed in range(3):
        _compare(pte, model, [inp(torch.Generator().manual_seed(seed))], tol=0.0)


# ---- hostile rewrites -----------------------------------------------------------------


def _put(pte: bytes, fmt: str, pos: int | None, *values: Any) -> bytes:
    assert pos is not None, "field is absent"
    b = bytearray(pte)
    struct.pack_into(fmt, b, pos, *values)
    return bytes(b)


def _input_value(pte: bytes) -> Table:
    """The payload's external input tensor value."""
    (p,) = payloads(pte)
    (tv,) = [tv for tv, _ in _tensor_values(pte, p) if tv.scalar(TV_FLAGS, "I") == EXTERNAL_INPUT]
    return tv


def external_id_at_a_sym_int(pte: bytes) -> bytes:
    """The input value's external id names argument 0, a SymInt."""
    return _put(pte, "<I", _input_value(pte).field(TV_EXTERNAL_ID), 0)


def tensor_argument_made_an_int(pte: bytes) -> bytes:
    """The DelegateCall passes a SymInt's value where its input tensor was."""
    (call,) = _delegate_calls(pte)
    args = _call_args(pte, call)
    tensor_at = next(k for k, v in enumerate(args) if _value(pte, v)[0] == TAG_TENSOR)
    first, _ = call.vector(DELEGATE_ARGS)
    return _put(pte, "<i", first + 4 * tensor_at, args[0])


def too_few_arguments(pte: bytes) -> bytes:
    """The DelegateCall's argument vector cut to its two SymInts."""
    (call,) = _delegate_calls(pte)
    first, _ = call.vector(DELEGATE_ARGS)
    return _put(pte, "<I", first - 4, 2)


def bias_entries(pte: bytes) -> bytes:
    """addmm's bias [1, 37] declared [1, 36]: one entry short of the outputs."""
    (p,) = payloads(pte)
    by_id = {tv.scalar(TV_ID_OUT, "I"): tv for tv, _ in _tensor_values(pte, p)}
    bias = next(tv for tv in by_id.values() if _dims(pte, tv) == [1, 37])
    first, _ = bias.vector(TV_DIMS)
    return _put(pte, "<I", first + 4, 36)


def _channels_last_input(pte: bytes) -> bytes:
    """The method input (a [1, 3, 4, 5] contiguous tensor the delegate reads)
    declared channels-last: its memory then lies as [1, 4, 5, 3], which the
    graph's [1, 3, 4, 5] value cannot hold."""
    (call,) = _delegate_calls(pte)
    for v in _call_args(pte, call):
        tag, t = _value(pte, v)
        if tag == TAG_TENSOR and t is not None and len(_dim_order(pte, t)) == 4:
            first, _ = t.vector(TENSOR_DIM_ORDER)
            b = bytearray(pte)
            b[first : first + 4] = bytes(CHANNELS_LAST)
            return bytes(b)
    raise AssertionError("no 4-D tensor argument")


INVALID = "InvalidProgramError"
HOSTILE: dict[str, tuple[str, Callable[[bytes], bytes], str]] = {
    # name: (program, mutation, words the InvalidProgramError must contain)
    "external_id_at_a_sym_int": ("sym_linear", external_id_at_a_sym_int, "argument 0 is int, not a tensor"),
    "tensor_argument_made_an_int": ("sym_linear", tensor_argument_made_an_int, "is int, not a tensor"),
    "too_few_arguments": ("sym_linear", too_few_arguments, "but the call passes 2 arguments"),
    "bias_entries": ("addmm", bias_entries, "has dims [1, 36] (36 entries), but the filter"),
    "dim_order": ("batch_norm", _channels_last_input, "lies in memory as [1, 4, 5, 3]"),
}


def test_hostile_delegate_arguments_are_refused_at_load(
    sym_linear: tuple[torch.nn.Module, bytes], tmp_path: Path
) -> None:
    torch.manual_seed(0)
    programs = {
        "sym_linear": sym_linear[1],
        "addmm": _addmm("to_edge_transform_and_lower")[1],
        "batch_norm": export_xnnpack(BatchNorm().eval(), (torch.randn(1, 3, 4, 5),)),
    }
    cases = {name: mutate(programs[which]) for name, (which, mutate, _) in HOSTILE.items()}
    results = run_cases(cases, tmp_path)
    for name, (_, _, words) in HOSTILE.items():
        result = str(results[name]["result"])
        assert result.startswith(INVALID), f"{name}: {result}"
        assert words in result, f"{name}: the message does not name it: {result}"


def test_hostile_programs_are_the_real_ones_but_for_the_rewrite(sym_linear: tuple[torch.nn.Module, bytes]) -> None:
    """The unmutated programs load and run: the refusals above come from the rewrites."""
    torch.manual_seed(0)
    model = BatchNorm().eval()
    x = torch.randn(1, 3, 4, 5)
    _compare(export_xnnpack(model, (x,)), model, [x])
    got = pyexec.load(sym_linear[1]).load_method("forward").execute([torch.randn(3, 3, 37)])
    assert tuple(got[0].shape) == (3, 3, 17)
    assert np.isfinite(np.asarray(got[0])).all()
