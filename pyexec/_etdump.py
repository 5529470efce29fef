"""ETDump files from a pyexec profile, in ExecuTorch's own format: the
flatbuffer `etdump_schema_flatcc.fbs` (file identifier "ED00", size-prefixed,
as ExecuTorch's ETDumpGen writes it) that `executorch.devtools.Inspector`
reads. Written here with a small flatbuffer builder so that the package needs
neither executorch nor flatbuffers at run time.

The events follow what ExecuTorch's runtime logs for the same program, in the
same order (each when it ends): per execute one RunData named "Execute"
holding, for every instruction run,

- a kernel call: "native_call_<op>.<overload>" then "OPERATOR_CALL";
- a delegate call: one event per node the backend ran (no name; its
  delegate_debug_id_str "<node type> #<n>", n counting that type within the
  call, as ExecuTorch's XNNPACK profiler numbers its operators) then
  "DELEGATE_CALL";
- a move: "MOVE_CALL"; a jump_false: "JF_CALL";

each with the instruction's chain_index and instruction_id (its index in the
chain), then "Method::execute" (chain_index -1, instruction_id 0) spanning
the instruction loop. Times are CLOCK_MONOTONIC nanoseconds (the Inspector's
default source time scale).
"""

from __future__ import annotations

import os
import struct
from collections.abc import Sequence
from dataclasses import dataclass

from ._errors import FileError
from ._events import ProfileEvent

_FILE_IDENTIFIER = b"ED00"
_SCHEMA_VERSION = 0


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


def _instruction_entries(top: ProfileEvent, nodes: Sequence[ProfileEvent]) -> list[_Entry]:
    """The events ExecuTorch logs for one instruction, in the order they end."""
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
        return [*out, _Entry("DELEGATE_CALL", *span)]
    if top.name == "(move)":
        return [_Entry("MOVE_CALL", *span)]
    if top.name == "(jump_false)":
        return [_Entry("JF_CALL", *span)]
    # pyexec resolves a kernel's arguments at load, so the kernel's own time
    # is the instruction's: both events span it.
    op = top.name.split("::", 1)[-1]
    return [_Entry(f"native_call_{op}", *span), _Entry("OPERATOR_CALL", *span)]


def run_entries(mine: Sequence[ProfileEvent], span: tuple[int, int] | None) -> list[_Entry]:
    """The ETDump events of one execute from its profile events `mine`,
    closed by Method::execute over `span` (start, duration; left out when
    the library kept no times for it)."""
    out: list[_Entry] = []
    k = 0
    while k < len(mine):
        top = mine[k]
        k += 1
        nodes: list[ProfileEvent] = []
        while k < len(mine) and mine[k].depth > 0:
            nodes.append(mine[k])
            k += 1
        if top.depth == 0:
            out += _instruction_entries(top, nodes)
    if span is not None:
        out.append(_Entry("Method::execute", -1, 0, span[0], span[0] + span[1]))
    return out


def _write_entry(b: _Builder, e: _Entry) -> int:
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


def etdump_bytes(events: Sequence[ProfileEvent], runs: Sequence[tuple[int, int] | None]) -> bytes:
    """The ETDump of a profile: one RunData per execute (`runs` holds each
    one's (start, duration) of its instruction loop, or None)."""
    b = _Builder()
    by_run: list[list[ProfileEvent]] = [[] for _ in runs]
    for e in events:
        if 0 <= e.run < len(runs):
            by_run[e.run].append(e)
    run_data: list[int] = []
    for mine, span in zip(by_run, runs):
        entries = [_write_entry(b, e) for e in run_entries(mine, span)]
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
    path: str | os.PathLike[str], events: Sequence[ProfileEvent], runs: Sequence[tuple[int, int] | None]
) -> None:
    """Writes etdump_bytes(events, runs) to `path`.

    Raises:
        FileError: `path` cannot be written (naming it).
    """
    data = etdump_bytes(events, runs)
    try:
        with open(path, "wb") as f:
            f.write(data)
    except OSError as exc:
        raise FileError(f"cannot write the ETDump to {os.fspath(path)!r}: {exc.strerror or exc}") from None
