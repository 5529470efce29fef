"""Hostile XNNPACK payloads: single fields of a real lowered program's payload
(header magic, offsets and sizes, a value id, a dim count, a dim, a constant
key, an external id, a node type, a permutation, a datatype; in the fp16 and
bf16 programs a half constant's dims and datatype, the inputs' and outputs'
datatypes) and of its delegate entries, overwritten; every truncation of the
payload and bytes of the payload flipped, in float32, fp16 and bf16. Each must fail at load with the right pyexec error
naming the field (or run), never crash: every case runs in a child process
(tests/unit/test_hostile.py's runner)."""

from __future__ import annotations

import struct
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from support.xnnpack import Payload, Table, export_xnnpack, payloads, root
from unit.test_hostile import run_cases


class Model(torch.nn.Module):
    """Constants from named data (linear weights and biases), a transpose, a
    slice and a concatenation in one delegate."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(6, 8)
        self.b = torch.nn.Linear(8, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = torch.relu(self.a(x))
        y = self.b(h.permute(1, 0).permute(1, 0) * 2.0)
        return torch.cat([y, h[:, 1:5]], dim=1)


def _program(dtype: torch.dtype = torch.float32) -> bytes:
    """The model lowered in float32, fp16 or bf16 (the partitioner takes
    bf16 nodes with enable_bf16)."""
    torch.manual_seed(0)
    options = {"enable_bf16": True} if dtype == torch.bfloat16 else None
    return export_xnnpack(Model().eval().to(dtype), (torch.randn(3, 6).to(dtype),), partitioner_options=options)


class Case:
    """The program as a mutable buffer, with its payload's graph at hand."""

    def __init__(self, dtype: torch.dtype = torch.float32) -> None:
        self.b = bytearray(_program(dtype))
        (self.p,) = payloads(bytes(self.b))
        self.g = self.p.graph(bytes(self.b))

    def put(self, fmt: str, pos: int | None, *values: int) -> bytes:
        assert pos is not None, "field is absent"
        struct.pack_into(fmt, self.b, pos, *values)
        return bytes(self.b)

    def node(self, type_code: int) -> Table:
        """The last node of a type (the first reads external 0, whose id the writer omits)."""
        return [n for n in self.g.tables(1) if n.scalar(0, "B") == type_code][-1]

    def tensor_value(self, pred: Callable[[Table], bool]) -> Table:
        for xv in self.g.tables(2):
            tv = xv.table(1)
            if tv is not None and pred(tv):
                return tv
        raise AssertionError("no such value")


FULLY_CONNECTED, STATIC_TRANSPOSE = 2, 5


def magic() -> bytes:
    c = Case()
    return c.put("<4s", c.p.offset + 4, b"XH0X")


def flatbuffer_offset() -> bytes:
    c = Case()
    return c.put("<I", c.p.offset + 10, 0xFFFFFF00)


def flatbuffer_size() -> bytes:
    c = Case()
    return c.put("<I", c.p.offset + 14, c.p.size)


def constant_data_size() -> bytes:
    c = Case()
    return c.put("<Q", c.p.offset + 22, 1 << 40)


def node_input_id() -> bytes:
    c = Case()
    union = c.node(FULLY_CONNECTED).table(1)
    assert union is not None
    return c.put("<I", union.field(0), 9999)


def node_type_unknown() -> bytes:
    c = Case()
    return c.put("<B", c.node(FULLY_CONNECTED).field(0), 200)


def node_type_sdpa() -> bytes:
    c = Case()
    return c.put("<B", c.node(FULLY_CONNECTED).field(0), 36)


def num_dims() -> bytes:
    c = Case()
    return c.put("<I", c.tensor_value(lambda t: t.scalar(1, "I") == 2).field(1), 7)


def constant_dim() -> bytes:
    c = Case()
    tv = c.tensor_value(lambda t: t.scalar(3, "I") > 0)
    first, _ = tv.vector(2)
    return c.put("<I", first, 0x7FFFFFFF)


def constant_key() -> bytes:
    c = Case()
    entry = c.g.tables(8)[1]
    pos, key = entry.string(2)
    assert len(key) == 64
    return c.put("<B", pos, ord("g"))  # not a hex digit: no such named data


def external_id() -> bytes:
    c = Case()
    return c.put("<I", c.tensor_value(lambda t: t.scalar(5, "I") == 2).field(4), 5000)


def value_flags() -> bytes:
    c = Case()
    return c.put("<I", c.tensor_value(lambda t: t.scalar(5, "I") == 1).field(5), 4)


def datatype_quantized() -> bytes:
    c = Case()
    return c.put("<h", c.tensor_value(lambda t: t.scalar(3, "I") > 0).field(0), 3)


def permutation() -> bytes:
    c = Case()
    union = c.node(STATIC_TRANSPOSE).table(1)
    assert union is not None
    first, n = union.vector(1)
    assert n == 2
    return c.put("<II", first, 0, 0)


def _delegate(c: Case) -> Table:
    plan = root(bytes(c.b)).tables(1)[0]
    return plan.tables(7)[0]


def delegate_processed_index() -> bytes:
    c = Case()
    ref = _delegate(c).table(1)
    assert ref is not None
    return c.put("<I", ref.field(1), 77)


def delegate_location() -> bytes:
    c = Case()
    ref = _delegate(c).table(1)
    assert ref is not None
    return c.put("<B", ref.field(0), 9)


# ---- fp16 / bf16 programs ---------------------------------------------------------

DT_FP32, DT_FP16, DT_PFP32, DT_BF16 = 1, 2, 13, 14


def _half_constant(c: Case) -> Table:
    """The first fp16 / bf16 constant (a linear's weight or bias)."""
    return c.tensor_value(lambda t: t.scalar(3, "I") > 0 and t.scalar(0, "h") in (DT_FP16, DT_BF16))


def half_constant_dim() -> bytes:
    """An fp16 weight whose dims claim twice the bytes it has."""
    c = Case(torch.float16)
    tv = _half_constant(c)
    first, _ = tv.vector(2)
    dim = struct.unpack_from("<I", c.b, first)[0]
    return c.put("<I", first, 2 * dim)


def half_constant_as_fp32() -> bytes:
    """A bf16 constant relabelled fp32: its bytes are half what fp32 needs."""
    c = Case(torch.bfloat16)
    return c.put("<h", _half_constant(c).field(0), DT_FP32)


def half_input_as_bf16() -> bytes:
    """The fp16 external input relabelled bf16: the float16 argument no longer matches."""
    c = Case(torch.float16)
    return c.put("<h", c.tensor_value(lambda t: t.scalar(5, "I") == 1).field(0), DT_BF16)


def half_output_as_fp32() -> bytes:
    c = Case(torch.bfloat16)
    return c.put("<h", c.tensor_value(lambda t: t.scalar(5, "I") == 2).field(0), DT_FP32)


def half_value_as_pfp32() -> bytes:
    c = Case(torch.float16)
    return c.put("<h", c.tensor_value(lambda t: t.scalar(3, "I") == 0 and t.scalar(5, "I") == 0).field(0), DT_PFP32)


def half_datatype_unknown() -> bytes:
    c = Case(torch.bfloat16)
    return c.put("<h", _half_constant(c).field(0), 15)


INVALID, UNSUPPORTED = ("InvalidProgramError",), ("UnsupportedError",)
EXECUTION = ("ExecutionError", "InvalidArgumentError")
CASES: dict[str, tuple[Callable[[], bytes], tuple[str, ...], str]] = {
    # name: (mutation, accepted errors, words the message must contain)
    "magic": (magic, INVALID, "identifier is not XN00 or XN01"),
    "flatbuffer_offset": (flatbuffer_offset, INVALID, "flatbuffer_offset"),
    "flatbuffer_size": (flatbuffer_size, INVALID, "flatbuffer_size"),
    "constant_data_size": (constant_data_size, INVALID, "constant_data_size"),
    "node_input_id": (node_input_id, INVALID, "input id 9999 is not a value"),
    "node_type_unknown": (node_type_unknown, INVALID, "node type 200 is unknown"),
    "node_type_sdpa": (node_type_sdpa, UNSUPPORTED, "ScaledDotProductAttention"),
    "num_dims": (num_dims, INVALID, "num_dims is 7"),
    "constant_dim": (constant_dim, INVALID, "constant 1 holds 192 bytes"),
    "constant_key": (constant_key, INVALID, "named_key"),
    "external_id": (external_id, INVALID, "external_id 5000 is out of range"),
    "value_flags": (value_flags, INVALID, "flags 0x4 has unknown bits"),
    "datatype_quantized": (datatype_quantized, INVALID, "datatype qint8 needs PerTensorQuant"),
    "permutation": (permutation, INVALID, "perm is not a permutation"),
    "delegate_processed_index": (delegate_processed_index, INVALID, "segment 77"),
    "delegate_location": (delegate_location, INVALID, "location 9 is unknown"),
    "half_constant_dim": (half_constant_dim, INVALID, "its dims need"),
    "half_constant_as_fp32": (half_constant_as_fp32, INVALID, "its dims need"),
    "half_input_as_bf16": (half_input_as_bf16, INVALID, "dtype float16, the graph's value"),
    "half_output_as_fp32": (half_output_as_fp32, INVALID, "dtype bfloat16, the graph's value"),
    "half_value_as_pfp32": (half_value_as_pfp32, UNSUPPORTED, "pfp32"),
    "half_datatype_unknown": (half_datatype_unknown, INVALID, "datatype 15 is unknown"),
}


@pytest.fixture(scope="module")
def results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, object]]:
    return run_cases({name: make() for name, (make, _, _) in CASES.items()}, tmp_path_factory.mktemp("xnn"))


@pytest.mark.parametrize("case", sorted(CASES))
def test_mutated_payload_field_is_refused_naming_it(case: str, results: dict[str, dict[str, object]]) -> None:
    result = str(results[case]["result"])
    _, expected, words = CASES[case]
    assert result.split(":")[0] in expected, f"{case}: expected {expected}, got {result}"
    assert words in result, f"{case}: message does not name the field: {result}"


def _segment_size_field(pte: bytes, p: Payload) -> int:
    program = root(pte)
    ref = program.tables(1)[0].tables(7)[0].table(1)
    assert ref is not None and ref.scalar(0, "B") == 1
    pos = program.tables(4)[ref.scalar(1, "I")].field(1)
    assert pos is not None
    return pos


HALF = {"fp32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}


@pytest.mark.parametrize("dt", sorted(HALF))
def test_every_truncation_of_the_payload_is_refused(dt: str, tmp_path: Path) -> None:
    pte = _program(HALF[dt])
    (p,) = payloads(pte)
    pos = _segment_size_field(pte, p)
    cases = {}
    for n in range(0, p.size, 5):
        b = bytearray(pte)
        struct.pack_into("<Q", b, pos, n)
        cases[f"trunc_{n:05d}"] = bytes(b)
    results = run_cases(cases, tmp_path)
    for case in cases:
        assert str(results[case]["result"]).startswith("InvalidProgramError"), f"{case}: {results[case]}"


@pytest.mark.parametrize("dt", sorted(HALF))
def test_flipped_payload_bytes_fail_cleanly(dt: str, tmp_path: Path) -> None:
    """Each third byte of the payload's flatbuffer, one at a time, inverted
    (the float32, fp16 and bf16 programs): the program runs or fails with a
    pyexec error; nothing crashes. A dim turned huge (below the 1 TiB
    declared-size limit) may fail to get its intermediate storage:
    OutOfMemoryError, as for a planned buffer larger than memory."""
    pte = _program(HALF[dt])
    (p,) = payloads(pte)
    cases = {}
    for k in range(p.fb_offset - p.offset, p.size, 3):
        b = bytearray(pte)
        b[p.offset + k] ^= 0xFF
        cases[f"flip_{k:05d}"] = bytes(b)
    results = run_cases(cases, tmp_path)
    allowed = ("ok", "InvalidProgramError", "UnsupportedError", "ExecutionError", "InvalidArgumentError",
               "OutOfMemoryError")
    for case in cases:
        assert str(results[case]["result"]).startswith(allowed), f"{case}: {results[case]}"
