"""ETDump files from a pyexec profile, in ExecuTorch's own format: the
flatbuffer `etdump_schema_flatcc.fbs` (file identifier "ED00", size-prefixed,
as ExecuTorch's ETDumpGen writes it) that `executorch.devtools.Inspector`
reads. Written here with a small flatbuffer builder so that the package needs
neither executorch nor flatbuffers at run time.

The events follow what ExecuTorch's runtime logs for the same program, in the
same order (each when it ends): per execute one RunData named "Execute"
holding, for every instruction run,

- a kernel call: "native_call_<op>.<overload>" then "OPERATOR_CALL" (a
  prim op, executorch_prim::*, aten::sym_* or aten::_local_scalar_dense:
  "OPERATOR_CALL" alone, as ExecuTorch registers them without their own);
- a delegate call: one event per node the backend ran (no name; its
  delegate_debug_id_str "<node type> #<n>", n counting that type within the
  call, as ExecuTorch's XNNPACK profiler numbers its operators) then
  "DELEGATE_CALL";
- a move: "MOVE_CALL"; a jump_false: "JF_CALL";

each with the instruction's chain_index and instruction_id (its index in the
chain), then "Method::execute" (chain_index -1, instruction_id 0) spanning
the instruction loop. Times are CLOCK_MONOTONIC nanoseconds (the Inspector's
default source time scale).

With a debug buffer, each recorded value is a DebugEvent where ExecuTorch's
ETDumpGen logs it: a kernel's written values after its call (before
"native_call_<op>", which ends after them), a delegate call's arguments
before "DELEGATE_CALL" (after its nodes), each with the instruction's chain
and index and no name; each method output after "Method::execute" (chain_index
2**64-1 and instruction_id 0, as ExecuTorch writes its unset chain), marked
`output` when it is a tensor (ExecuTorch leaves a scalar output unmarked).
A tensor is a Tensor table (scalar type, sizes, row-major strides, offset
of its bytes in the debug buffer).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from ._errors import FileError
from ._events import DebugValue, ProfileEvent

_FILE_IDENTIFIER = b"ED00"
_SCHEMA_VERSION = 0
# ETDump's ValueType.
_VALUE_TYPES = {"int": 1, "bool": 2, "double": 4, "tensor": 5, "tensor_list": 6}
# ExecuTorch's unset chain id (-1) in DebugEvent.chain_index, an unsigned long.
_UNSET_CHAIN = (1 << 64) - 1


class _Builder:
    """A flatbuffer builder: objects are written back to front (children
    before the tables that point to them), each as a chunk; a position is an
    object's distance from the end of the buffer, so that chunks never move.
    Every object is aligned to its size class counted from the end, and the
    finished buffer's length is a multiple of 8, so the alignment also holds
    from the start."""

    def __init__(self) -> None:
        self._chunks: list[bytes] = []
        self._size = 0
        self._vtables: dict[bytes, int] = {}
        self._layouts: dict[tuple[tuple[int, str], ...], tuple[list[int], int, int, bytes]] = {}

    def _put(self, body: bytes, align: int) -> int:
        """Prepends `body`, padded behind so that its start is
        `align`-aligned; returns its position."""
        pad = -(self._size + len(body)) % align
        if pad:
            self._chunks.append(bytes(pad))
        self._chunks.append(body)
        self._size += pad + len(body)
        return self._size

    def string(self, text: str) -> int:
        data = text.encode("utf-8")
        return self._put(struct.pack("<I", len(data)) + data + b"\0", 4)

    def bytes_vector(self, data: bytes) -> int:
        return self._put(struct.pack("<I", len(data)) + data, 4)

    def long_vector(self, values: Sequence[int]) -> int:
        """A vector of int64: its elements 8-aligned, its length just before."""
        self._put(struct.pack(f"<{len(values)}q", *values), 8)
        return self._put(struct.pack("<I", len(values)), 4)

    def table_vector(self, items: Sequence[int]) -> int:
        """A vector of offsets to tables already written."""
        n = len(items)
        at = self._size + (-self._size % 4) + 4 + 4 * n  # the vector's position once written
        out = bytearray(struct.pack("<I", n))
        for k, item in enumerate(items):
            out += struct.pack("<I", (at - 4 - 4 * k) - item)
        return self._put(bytes(out), 4)

    def table(self, fields: Sequence[tuple[int, str, int | float | bool] | None]) -> int:
        """A table from (field id, kind, value) entries: kind "off" (value a
        position returned earlier) or a struct format ("b", "i", "I", "q",
        "Q", "f", "d", "?"). A field left out (None) takes its default."""
        present = [f for f in fields if f is not None]
        key = tuple((fid, kind) for fid, kind, _ in present)
        layout = self._layouts.get(key)
        if layout is None:
            layout = self._layouts[key] = _layout(key)
        offsets, length, align, vtable = layout
        # The table's position once written: its start aligned to `align`.
        at = self._size + (-(self._size + length) % align) + length
        body = bytearray(length)
        for (_, kind, value), off in zip(present, offsets):
            if kind == "off":
                struct.pack_into("<I", body, off, (at - off) - int(value))
            else:
                struct.pack_into("<" + kind, body, off, value)
        known = self._vtables.get(vtable)
        if known is not None:
            # The vtable lies behind (at a higher address): a negative offset.
            struct.pack_into("<i", body, 0, known - at)
            return self._put(bytes(body), align)
        struct.pack_into("<i", body, 0, len(vtable))
        table_at = self._put(bytes(body), align)
        self._chunks.append(vtable)
        self._size += len(vtable)
        self._vtables[vtable] = self._size
        return table_at

    def finish(self, root: int) -> bytes:
        """The buffer: its length, the root table's offset and the file
        identifier, then the objects; the whole a multiple of 8 long."""
        pad = -(self._size + 12) % 8
        total = self._size + pad + 12
        head = struct.pack("<II", total - 4, (total - 4) - root) + _FILE_IDENTIFIER + bytes(pad)
        return head + b"".join(reversed(self._chunks))


def _layout(fields: tuple[tuple[int, str], ...]) -> tuple[list[int], int, int, bytes]:
    """Where a table with these (field id, kind) fields puts each (its
    offset, in the given order), its inline length and alignment, and its
    vtable. The inline part is the vtable offset, then the fields, the
    widest first so that none needs padding but the first."""
    sizes = [4 if kind == "off" else struct.calcsize("<" + kind) for _, kind in fields]
    offsets = [0] * len(fields)
    pos = align = 4
    for k in sorted(range(len(fields)), key=lambda k: -sizes[k]):
        pos += -pos % sizes[k]
        offsets[k] = pos
        pos += sizes[k]
        align = max(align, sizes[k])
    length = pos + (-pos % align)
    nfields = max((fid for fid, _ in fields), default=-1) + 1
    slots = [0] * nfields
    for (fid, _), off in zip(fields, offsets):
        slots[fid] = off
    return offsets, length, align, struct.pack(f"<HH{nfields}H", 4 + 2 * nfields, length, *slots)


@dataclass(frozen=True)
class _Entry:
    """One ProfileEvent of the ETDump schema."""

    name: str | None
    chain: int
    instruction: int
    start_ns: int
    end_ns: int
    delegate_id: str | None = None
    debug: DebugValue | None = None


def _debug_entries(top: ProfileEvent, values: Sequence[DebugValue]) -> list[_Entry]:
    return [_Entry(None, top.chain, top.index, 0, 0, debug=v) for v in values]


def _instruction_entries(top: ProfileEvent, nodes: Sequence[ProfileEvent],
                         values: Sequence[DebugValue] = ()) -> list[_Entry]:
    """The events ExecuTorch logs for one instruction, in the order they end
    (`values`: what the debug buffer recorded for it)."""
    span = (top.chain, top.index, top.start_ns, top.start_ns + top.duration_ns)
    if top.name.startswith("delegate:"):
        out: list[_Entry] = []
        seen: dict[str, int] = {}
        for node in nodes:
            seen[node.name] = seen.get(node.name, 0) + 1
            out.append(
                _Entry(
                    None,
                    top.chain,
                    top.index,
                    node.start_ns,
                    node.start_ns + node.duration_ns,
                    f"{node.name} #{seen[node.name]}",
                )
            )
        return [*out, *_debug_entries(top, values), _Entry("DELEGATE_CALL", *span)]
    if top.name == "(move)":
        return [_Entry("MOVE_CALL", *span)]
    if top.name == "(jump_false)":
        return [_Entry("JF_CALL", *span)]
    # ExecuTorch registers its prim ops without a profiling scope of their
    # own: OPERATOR_CALL alone.
    if top.name.startswith(("executorch_prim::", "aten::sym_")) or top.name == "aten::_local_scalar_dense":
        return [*_debug_entries(top, values), _Entry("OPERATOR_CALL", *span)]
    # pyexec resolves a kernel's arguments at load, so the kernel's own time
    # is the instruction's: both events span it. Kernels ExecuTorch generates
    # from its operator lists (aten, quantized_decomposed, ...) name the event
    # without the namespace; its LLM custom operators, registered by hand
    # (EXECUTORCH_LIBRARY), keep it ("native_call_llama::custom_sdpa.out").
    op = top.name if top.name.startswith("llama::") else top.name.split("::", 1)[-1]
    return [*_debug_entries(top, values), _Entry(f"native_call_{op}", *span), _Entry("OPERATOR_CALL", *span)]


def run_entries(mine: Sequence[ProfileEvent], span: tuple[int, int] | None,
                values: Sequence[Sequence[DebugValue]] = (), outputs: Sequence[DebugValue] = ()) -> list[_Entry]:
    """The ETDump events of one execute from its profile events `mine`,
    closed by Method::execute over `span` (start, duration; left out when
    the library kept no times for it). With a debug buffer, `values[k]`
    holds what event `mine[k]` recorded and `outputs` the method outputs."""
    out: list[_Entry] = []
    k = 0
    while k < len(mine):
        top = mine[k]
        mine_values = values[k] if k < len(values) else ()
        k += 1
        nodes: list[ProfileEvent] = []
        while k < len(mine) and mine[k].depth > 0:
            nodes.append(mine[k])
            k += 1
        if top.depth == 0:
            out += _instruction_entries(top, nodes, mine_values)
    if span is not None:
        out.append(_Entry("Method::execute", -1, 0, span[0], span[0] + span[1]))
    out += [_Entry(None, -1, 0, 0, 0, debug=v) for v in outputs]
    return out


def _row_major_strides(sizes: Sequence[int]) -> list[int]:
    strides = [1] * len(sizes)
    for d in range(len(sizes) - 2, -1, -1):
        strides[d] = strides[d + 1] * max(sizes[d + 1], 1)
    return strides


def _write_tensor(b: _Builder, v: DebugValue) -> int:
    sizes = b.long_vector(v.sizes)
    strides = b.long_vector(_row_major_strides(v.sizes))
    # Tensor: scalar_type 0, sizes 1, strides 2, offset 3.
    return b.table([(0, "b", v.dtype) if v.dtype else None, (1, "off", sizes), (2, "off", strides),
                    (3, "q", v.offset) if v.offset else None])


def _write_value(b: _Builder, v: DebugValue) -> int:
    # Value: val 0, tensor 1, tensor_list 2, int_value 3, float_value 4,
    # double_value 5, bool_value 6, output 7.
    fields: list[tuple[int, str, int | float | bool] | None] = [(0, "b", _VALUE_TYPES[v.kind])]
    if v.kind == "tensor":
        fields.append((1, "off", _write_tensor(b, v)))
    elif v.kind == "tensor_list":
        tensors = b.table_vector([_write_tensor(b, t) for t in v.items])
        fields.append((2, "off", b.table([(0, "off", tensors)])))  # TensorList: tensors 0
    elif v.kind == "int":
        fields.append((3, "off", b.table([(0, "q", int(v.value or 0))] if v.value else [])))  # Int: int_val 0
    elif v.kind == "double":
        fields.append((5, "off", b.table([(0, "d", float(v.value or 0.0))] if v.value else [])))  # Double: double_val 0
    else:
        fields.append((6, "off", b.table([(0, "?", True)] if v.value else [])))  # Bool: bool_val 0
    if v.output >= 0 and v.kind in ("tensor", "tensor_list"):
        # ExecuTorch's log_evalue marks a program output only on a tensor or
        # a tensor list; a scalar output is logged unmarked.
        fields.append((7, "off", b.table([(0, "?", True)])))
    return b.table(fields)


def _write_entry(b: _Builder, e: _Entry) -> int:
    if e.debug is not None:
        value = _write_value(b, e.debug)
        # DebugEvent: chain_index 0, instruction_id 1, debug_entry 2,
        # delegate_debug_id_int 3, delegate_debug_id_str 4, name 5.
        chain = _UNSET_CHAIN if e.chain < 0 else e.chain
        debug = b.table([(0, "Q", chain) if chain else None, (1, "i", e.instruction) if e.instruction != -1 else None,
                         (2, "off", value)])
        return b.table([(2, "off", debug)])  # Event: debug_event 2
    name = b.string(e.name) if e.name is not None else None
    delegate = b.string(e.delegate_id) if e.delegate_id is not None else None
    metadata = b.bytes_vector(b"") if e.delegate_id is not None else None
    # ProfileEvent: name 0, chain_index 1, instruction_id 2, delegate_debug_id_int 3,
    # delegate_debug_id_str 4, delegate_debug_metadata 5, start_time 6, end_time 7.
    profile = b.table(
        [
            (0, "off", name) if name is not None else None,
            (1, "i", e.chain) if e.chain != 0 else None,
            (2, "i", e.instruction) if e.instruction != -1 else None,
            (4, "off", delegate) if delegate is not None else None,
            (5, "off", metadata) if metadata is not None else None,
            (6, "Q", max(e.start_ns, 0)),
            (7, "Q", max(e.end_ns, 0)),
        ]
    )
    # Event: profile_event 0, allocation_event 1, debug_event 2.
    return b.table([(0, "off", profile)])


def etdump_bytes(events: Sequence[ProfileEvent], runs: Sequence[tuple[int, int] | None],
                 debug_values: Sequence[DebugValue] = ()) -> bytes:
    """The ETDump of a profile: one RunData per execute (`runs` holds each
    one's (start, duration) of its instruction loop, or None), with the
    debug events of `debug_values` (a debug buffer's records)."""
    b = _Builder()
    by_run: list[list[ProfileEvent]] = [[] for _ in runs]
    values_by_run: list[list[list[DebugValue]]] = [[] for _ in runs]
    where: dict[int, tuple[int, int]] = {}  # event index -> (run, position in its run)
    for i, e in enumerate(events):
        if 0 <= e.run < len(runs):
            where[i] = (e.run, len(by_run[e.run]))
            by_run[e.run].append(e)
            values_by_run[e.run].append([])
    outputs: list[list[DebugValue]] = [[] for _ in runs]
    for v in debug_values:
        if v.event < 0:
            if 0 <= v.run < len(runs):
                outputs[v.run].append(v)
        elif v.event in where:
            run, at = where[v.event]
            values_by_run[run][at].append(v)
    run_data: list[int] = []
    for mine, span, values, outs in zip(by_run, runs, values_by_run, outputs):
        entries = [_write_entry(b, e) for e in run_entries(mine, span, values, outs)]
        events_vec = b.table_vector(entries)
        name = b.string("Execute")
        # RunData: name 0, bundled_input_index 1, allocators 2 (none, as
        # ExecuTorch's runtime writes it), events 3.
        run_data.append(b.table([(0, "off", name), (3, "off", events_vec)]))
    runs_vec = b.table_vector(run_data)
    # ETDump: version 0, run_data 1.
    root = b.table([(0, "I", _SCHEMA_VERSION) if _SCHEMA_VERSION else None, (1, "off", runs_vec)])
    return b.finish(root)


def write_etdump(
    path: str | os.PathLike[str], events: Sequence[ProfileEvent], runs: Sequence[tuple[int, int] | None],
    debug_values: Sequence[DebugValue] = (),
) -> None:
    """Writes etdump_bytes(events, runs, debug_values) to `path`.

    Raises:
        FileError: `path` cannot be written (naming it).
    """
    data = etdump_bytes(events, runs, debug_values)
    try:
        with open(path, "wb") as f:
            f.write(data)
    except OSError as exc:
        raise FileError(f"cannot write the ETDump to {os.fspath(path)!r}: {exc.strerror or exc}") from None
