"""Delegated programs are visible like any other: Program.delegates (and the
C query under it) lists each delegate a method calls with its backend, the
node types its payload uses and what pyexec does not run, without loading
the method; `pyexec inspect` prints the same. The expected node types come
from reading each payload here (support.xnnpack's reader and the schema
executorch ships), never from pyexec's answer."""

from __future__ import annotations

import re
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch
from support import ROOT
from support import export as _export
from support.xnnpack import Table, export_xnnpack, payloads, root, union_names

import pyexec
from pyexec._ffi import ffi, lib

# ---- models and programs --------------------------------------------------------------


class Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.fc2(torch.relu(self.fc1(x))))


class ConvNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.conv(x)).mean(dim=(2, 3)))


class Deconv(torch.nn.Module):
    """A transposed convolution, lowered with qint8 values."""

    def __init__(self) -> None:
        super().__init__()
        self.deconv = torch.nn.ConvTranspose2d(3, 4, 3, stride=2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.deconv(x))


def quantized_xnnpack(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> bytes:
    """`module` quantized with PT2E (XNNPACKQuantizer, static symmetric int8,
    per-channel weights, calibrated on `inputs`) and lowered to XNNPACK;
    cached like support.export's programs."""
    options = {"_lowering": "XnnpackPartitioner+XNNPACKQuantizer", "_source": _export._file_digest(__file__)}
    where = _export.cache_dir()
    paths = None if where is None else [where / f"{_export._export_key(module, inputs, options)}.pte"]
    (pte,) = _export.cached(paths, lambda: [_quantize_and_lower(module, inputs)])
    assert pte is not None
    return pte


def _quantize_and_lower(module: torch.nn.Module, inputs: tuple[torch.Tensor, ...]) -> bytes:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from executorch.exir import to_edge_transform_and_lower
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        quantizer = XNNPACKQuantizer().set_global(get_symmetric_quantization_config(is_per_channel=True))
        prepared = prepare_pt2e(torch.export.export(module, inputs, strict=False).module(), quantizer)
        prepared(*inputs)
        converted = convert_pt2e(prepared)
        ep = torch.export.export(converted, inputs, strict=False)
        return bytes(to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch().buffer)


def _inputs(*shape: int) -> tuple[torch.Tensor, ...]:
    return (torch.randn(*shape, generator=torch.Generator().manual_seed(0)),)


@pytest.fixture(scope="module")
def float_pte() -> bytes:
    return export_xnnpack(Mlp().eval(), _inputs(2, 8))


@pytest.fixture(scope="module", params=["linear", "conv", "deconv"])
def quantized_pte(request: pytest.FixtureRequest) -> bytes:
    torch.manual_seed(0)
    if request.param == "linear":
        return quantized_xnnpack(Mlp().eval(), _inputs(2, 8))
    if request.param == "deconv":
        return quantized_xnnpack(Deconv().eval(), _inputs(1, 3, 8, 8))
    return quantized_xnnpack(ConvNet().eval(), _inputs(1, 3, 8, 8))


# ---- reading the payloads independently ---------------------------------------------------

QUANTIZED_DATATYPES = set(range(3, 12))  # XNNDatatype qint8 .. qpint8 (schema.fbs)
# The node types pyexec runs with quantized values (README, XNNPACK quantized graphs).
QUANTIZED_RUNS = {
    "Convert",
    "FullyConnected",
    "Conv2d",
    "DepthwiseConv2d",
    "ConvTranspose2d",
    "Add",
    "Subtract",
    "Multiply",
    "MaxPooling2d",
    "GlobalAvgPooling2d",
    "Clamp",
    "StaticTranspose",
    "StaticReshape",
    "StaticSlice",
    "StaticConstantPad",
    "Concatenate2",
    "Concatenate3",
    "Concatenate4",
    "Concatenate5",
    "Copy",
}


def _id_slots() -> dict[int, list[int]]:
    """Per XNodeUnion type code, the slots of its table's fields that hold
    value ids (the fields schema.fbs names `*_id`)."""
    import executorch.backends.xnnpack as xnn

    text = (Path(xnn.__file__).parent / "serialization" / "schema.fbs").read_text()
    body = re.search(r"union XNodeUnion \{(.*?)\}", text, re.S)
    assert body is not None
    out = {}
    for code, m in enumerate(re.finditer(r"^\s*(XNN\w+)\s*(?::\s*(\w+))?\s*,?", body.group(1), re.M), start=1):
        table = m.group(2) or m.group(1)
        fields = re.search(rf"table {table} \{{(.*?)\}}", text, re.S)
        assert fields is not None, table
        names = [f.group(1) for f in re.finditer(r"^\s*(\w+)\s*:", fields.group(1), re.M)]
        out[code] = [k for k, n in enumerate(names) if n.endswith("_id")]
    return out


def expected(pte: bytes) -> list[tuple[list[str], list[str]]]:
    """Per XNNPACK payload: (node types, sorted; those with a node reading or
    writing a quantized value that is not of a type pyexec runs quantized,
    sorted)."""
    names, slots = union_names(), _id_slots()
    out = []
    for p in payloads(pte):
        graph = p.graph(pte)
        quantized = set()
        for v in graph.tables(2):
            kind, value = v.scalar(0, "B"), v.table(1)
            assert value is not None
            tensor = value.table(0) if kind == 2 else value
            assert tensor is not None
            if kind == 2 or tensor.scalar(0, "h") in QUANTIZED_DATATYPES:
                quantized.add(tensor.scalar(6, "I"))  # id_out
        types, unsupported = set(), set()
        for node in graph.tables(1):
            code, table = node.scalar(0, "B"), node.table(1)
            assert table is not None
            types.add(names[code])
            if names[code] not in QUANTIZED_RUNS and any(table.scalar(k, "I", None) in quantized for k in slots[code]):
                unsupported.add(names[code])
        out.append((sorted(types), sorted(unsupported)))
    return out


def _delegate_table(pte: bytes, index: int = 0) -> Table:
    """BackendDelegate `index` of the first method."""
    return root(pte).tables(1)[0].tables(7)[index]


# ---- float programs -------------------------------------------------------------------------


def test_float_program_lists_its_node_types_all_supported(float_pte: bytes) -> None:
    ((types, unsupported),) = expected(float_pte)
    assert "FullyConnected" in types and unsupported == []
    delegates = pyexec.load(float_pte).delegates("forward")
    assert delegates == [pyexec.DelegateInfo("XnnpackBackend", True, tuple(types), ())]
    assert delegates[0].runnable
    pyexec.load(float_pte).load_method("forward")  # and it does run


def test_operators_keep_their_shape_for_a_delegated_program(float_pte: bytes) -> None:
    ops, missing = pyexec.load(float_pte).operators("forward")
    assert isinstance(ops, list) and missing == []


def test_partly_delegated_program_lists_operators_and_delegates() -> None:
    class Mixed(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.cumsum(torch.nn.functional.relu(x * 2.0), dim=1)  # cumsum stays portable

    pte = export_xnnpack(Mixed(), _inputs(2, 5))
    program = pyexec.load(pte)
    assert "aten::cumsum.out" in program.operators("forward")[0]
    assert [(d.node_types, d.unsupported) for d in program.delegates("forward")] == [
        (tuple(t), tuple(u)) for t, u in expected(pte)
    ]


def test_program_without_delegates_has_none() -> None:
    program = pyexec.load(ROOT / "native/tests/data/add_mul.pte")
    assert program.delegates("forward") == []


# ---- quantized programs ----------------------------------------------------------------------


def test_quantized_program_reports_the_quantized_nodes_it_does_not_run(quantized_pte: bytes) -> None:
    want = expected(quantized_pte)
    delegates = pyexec.load(quantized_pte).delegates("forward")
    assert [(d.node_types, d.unsupported) for d in delegates] == [(tuple(t), tuple(u)) for t, u in want]
    assert all(d.backend == "XnnpackBackend" and d.supported for d in delegates)
    assert [d.runnable for d in delegates] == [not u for _, u in want]


def test_quantized_program_load_fails_naming_the_unsupported_nodes(quantized_pte: bytes) -> None:
    # Delegates are initialised in order: the first with unsupported nodes refuses.
    first = next(((k, u) for k, (_, u) in enumerate(expected(quantized_pte)) if u), None)
    if first is None:
        pyexec.load(quantized_pte).load_method("forward")  # every quantized node runs
        return
    k, unsupported = first
    with pytest.raises(pyexec.UnsupportedError) as err:
        pyexec.load(quantized_pte).load_method("forward")
    message = str(err.value)
    assert f"delegate {k} (XnnpackBackend)" in message and "quantized" in message
    assert message.endswith("node types pyexec does not run in this payload: " + ", ".join(unsupported))


# ---- unknown backends and malformed payloads ------------------------------------------------


def test_renamed_backend_is_reported_missing_and_refused_at_load(float_pte: bytes) -> None:
    pos, old = _delegate_table(float_pte).string(0)
    new = b"NotARealBacknd"
    assert len(new) == len(old) == 14
    pte = float_pte[:pos] + new + float_pte[pos + len(new) :]
    program = pyexec.load(pte)
    assert program.delegates("forward") == [pyexec.DelegateInfo("NotARealBacknd", False, (), ())]
    assert not program.delegates("forward")[0].runnable
    with pytest.raises(pyexec.UnsupportedError, match="NotARealBacknd"):
        program.load_method("forward")


def test_backend_id_starting_with_bang_keeps_its_bang(float_pte: bytes) -> None:
    pos, _ = _delegate_table(float_pte).string(0)
    pte = float_pte[:pos] + b"!" + float_pte[pos + 1 :]
    (d,) = pyexec.load(pte).delegates("forward")
    assert (d.backend, d.supported) == ("!nnpackBackend", False)


def test_malformed_payload_is_an_error_naming_the_delegate_and_field(float_pte: bytes) -> None:
    p = payloads(float_pte)[0]
    first = p.graph(float_pte).tables(1)[0]
    at = first.field(0)
    assert at is not None
    pte = float_pte[:at] + bytes([200]) + float_pte[at + 1 :]  # node type 200 does not exist
    with pytest.raises(pyexec.InvalidProgramError) as err:
        pyexec.load(pte).delegates("forward")
    message = str(err.value)
    assert "method 'forward'" in message and "delegate 0 (XnnpackBackend)" in message
    assert "xnodes[0]: node type 200 is unknown" in message


def test_truncated_payload_never_crashes(float_pte: bytes) -> None:
    """Every prefix-shortened payload (its header's flatbuffer size cut)
    describes or fails cleanly."""
    p = payloads(float_pte)[0]
    for cut in range(1, 64):
        fb_size = int.from_bytes(float_pte[p.offset + 14 : p.offset + 18], "little")
        pte = bytearray(float_pte)
        pte[p.offset + 14 : p.offset + 18] = max(fb_size - cut * 16, 0).to_bytes(4, "little")
        try:
            pyexec.load(bytes(pte)).delegates("forward")
        except pyexec.InvalidProgramError as exc:
            assert "XNNPACK payload" in str(exc)


def test_delegate_queries_check_their_arguments(float_pte: bytes) -> None:
    program = pyexec.load(float_pte)
    with pytest.raises(pyexec.InvalidArgumentError, match="forward"):
        program.delegates("nope")
    needed, unsupported = ffi.new("size_t *"), ffi.new("size_t *")
    assert lib.pyexec_program_delegate_describe(program._ptr(), b"forward", 1, ffi.NULL, 0, needed, unsupported) == (
        lib.PYEXEC_ERR_INVALID_ARGUMENT
    )
    assert "delegate 1 is out of range (1 delegates)" in ffi.string(lib.pyexec_last_error()).decode()
    program.close()
    with pytest.raises(pyexec.InvalidArgumentError, match="closed"):
        program.delegates("forward")


def test_c_query_truncates_like_the_operators_query(float_pte: bytes) -> None:
    program = pyexec.load(float_pte)
    needed, unsupported = ffi.new("size_t *"), ffi.new("size_t *")
    p = program._ptr()
    assert lib.pyexec_program_delegate_describe(p, b"forward", 0, ffi.NULL, 0, needed, unsupported) == 0
    full = ffi.new("char[]", needed[0])
    assert lib.pyexec_program_delegate_describe(p, b"forward", 0, full, needed[0], needed, unsupported) == 0
    text = ffi.string(full).decode()
    assert len(text) + 1 == needed[0] and text.startswith("XnnpackBackend\n") and unsupported[0] == 0
    for cap in (1, 5, 15, 16, len(text)):
        small = ffi.new("char[]", cap)
        assert lib.pyexec_program_delegate_describe(p, b"forward", 0, small, cap, needed, unsupported) == 0
        assert ffi.string(small).decode() == text[: cap - 1] and needed[0] == len(text) + 1


# ---- the command line ---------------------------------------------------------------------------


def _inspect(pte: bytes, tmp_path: Path) -> str:
    path = tmp_path / "model.pte"
    path.write_bytes(pte)
    proc = subprocess.run([sys.executable, "-m", "pyexec", "inspect", str(path)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_inspect_lists_the_node_types_of_a_float_program(float_pte: bytes, tmp_path: Path) -> None:
    ((types, _),) = expected(float_pte)
    out = _inspect(float_pte, tmp_path)
    assert f"  delegate 0: XnnpackBackend, node types ({len(types)}): {', '.join(types)}\n" in out
    assert "MISSING" not in out


def test_inspect_lists_what_a_quantized_program_lacks(quantized_pte: bytes, tmp_path: Path) -> None:
    out = _inspect(quantized_pte, tmp_path)
    for k, (types, unsupported) in enumerate(expected(quantized_pte)):
        assert f"  delegate {k}: XnnpackBackend, node types ({len(types)}): {', '.join(types)}\n" in out
        missing = f"  MISSING in delegate {k}, node types pyexec does not run ({len(unsupported)}): "
        assert (missing + ", ".join(unsupported) + "\n" in out) == bool(unsupported), out


def test_inspect_names_an_unknown_backend(float_pte: bytes, tmp_path: Path) -> None:
    pos, _ = _delegate_table(float_pte).string(0)
    pte = float_pte[:pos] + b"NotARealBacknd" + float_pte[pos + 14 :]
    out = _inspect(pte, tmp_path)
    assert "  delegate 0: NotARealBacknd: MISSING backend (pyexec has none with this id)\n" in out


def test_inspect_describes_a_malformed_payload_and_goes_on(float_pte: bytes, tmp_path: Path) -> None:
    at = payloads(float_pte)[0].graph(float_pte).tables(1)[0].field(0)
    assert at is not None
    out = _inspect(float_pte[:at] + bytes([200]) + float_pte[at + 1 :], tmp_path)
    assert re.search(r"^  delegates: MALFORMED: .*node type 200 is unknown$", out, re.M), out
