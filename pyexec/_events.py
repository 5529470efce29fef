"""Profile events as the library records them (pyexec_profile_event), read
into ProfileEvent records; what Method.profile() collects and _etdump writes."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._errors import check
from ._ffi import ffi, lib


@dataclass(frozen=True)
class ProfileEvent:
    """One executed instruction (depth 0) or one node a delegate ran inside
    the call listed before it (depth 1). `name` is the operator
    ("aten::add.out"), "delegate:<backend id>", or the node's type
    ("FullyConnected"); `parent` is the delegate call's name for a node, else
    None. `shapes` are the input shapes as text (`"[1,8] [8]"`). Times are
    CLOCK_MONOTONIC nanoseconds; `run` counts the executes of the profile
    from 0; `chain` and `index` place the instruction in the program (a
    node: its index in the delegate's graph)."""

    name: str
    shapes: str
    start_ns: int
    duration_ns: int
    depth: int
    chain: int
    index: int
    run: int
    parent: str | None = None

    @property
    def key(self) -> str:
        """The name the table groups by: a node as "<backend>/<node type>"."""
        if self.parent is None:
            return self.name
        return f"{self.parent.removeprefix('delegate:')}/{self.name}"


def read_events(m: Any) -> list[ProfileEvent]:
    """Every event the library recorded for method handle `m` since its reset."""
    out = ffi.new("pyexec_profile_event *")
    events: list[ProfileEvent] = []
    parent: str | None = None
    for i in range(lib.pyexec_method_profile_event_count(m)):
        check(lib.pyexec_method_profile_event(m, i, out))
        name = ffi.string(out.name).decode("utf-8", "replace")
        if out.depth == 0:
            parent = name if name.startswith("delegate:") else None
        events.append(ProfileEvent(
            name, ffi.string(out.shapes).decode("utf-8", "replace"), out.start_ns, out.duration_ns,
            out.depth, out.chain, out.index, out.run, parent if out.depth else None,
        ))
    return events


def read_runs(m: Any) -> list[tuple[int, int]]:
    """(start_ns, duration_ns) of the instruction loop of every execute the
    library recorded for method handle `m` since its reset."""
    start = ffi.new("int64_t *")
    duration = ffi.new("int64_t *")
    runs: list[tuple[int, int]] = []
    for r in range(lib.pyexec_method_profile_run_count(m)):
        check(lib.pyexec_method_profile_run(m, r, start, duration))
        runs.append((start[0], duration[0]))
    return runs


@dataclass(frozen=True)
class DebugValue:
    """One value an instruction wrote, as the debug buffer recorded it after
    the instruction ran (or a method output, recorded after the execute).

    `kind` is "tensor", "tensor_list", "int", "double" or "bool". A tensor
    has `dtype` (a pyexec_dtype code, ExecuTorch's ScalarType code),
    `sizes`, and its row-major bytes at `offset` in the debug buffer
    (`nbytes` long; offset -1 when it has none); a tensor list holds its
    tensors in `items`; a scalar its `value`. `event` is the index in
    `Profile.events` of the instruction that wrote it (-1 for a method
    output, whose index is `output`); `run` counts the executes from 0."""

    kind: str
    event: int
    run: int
    output: int = -1
    dtype: int = -1
    sizes: tuple[int, ...] = ()
    offset: int = -1
    nbytes: int = 0
    value: int | float | bool | None = None
    items: tuple[DebugValue, ...] = ()


def read_debug(m: Any) -> tuple[list[DebugValue], bytes]:
    """The values the library recorded into method handle `m`'s debug
    buffer since its reset, and the buffer's bytes in use."""
    out = ffi.new("pyexec_debug_value *")
    flat: list[DebugValue] = []
    heads: list[tuple[int, int]] = []  # (index in flat of a tensor list, its item count)
    for i in range(lib.pyexec_method_profile_debug_count(m)):
        check(lib.pyexec_method_profile_debug_value(m, i, out))
        kind = {lib.PYEXEC_VALUE_TENSOR: "tensor", lib.PYEXEC_VALUE_INT: "int", lib.PYEXEC_VALUE_DOUBLE: "double",
                lib.PYEXEC_VALUE_BOOL: "bool"}.get(out.kind, "tensor_list")
        value: int | float | bool | None = None
        if kind == "int":
            value = int(out.int_value)
        elif kind == "double":
            value = float(out.double_value)
        elif kind == "bool":
            value = bool(out.int_value)
        v = DebugValue(kind, out.event, out.run, out.output, out.dtype if kind == "tensor" else -1,
                       tuple(out.sizes[k] for k in range(out.dim)) if kind == "tensor" else (),
                       out.offset, out.nbytes, value)
        if out.in_list and heads:
            at, count = heads[-1]
            head = flat[at]
            flat[at] = DebugValue(head.kind, head.event, head.run, head.output, items=(*head.items, v))
            if len(flat[at].items) == count:
                heads.pop()
            continue
        flat.append(v)
        if kind == "tensor_list" and out.count > 0:
            heads.append((len(flat) - 1, out.count))
    data = ffi.new("const void **")
    used = ffi.new("size_t *")
    check(lib.pyexec_method_profile_debug_buffer(m, data, used))
    buffer = bytes(ffi.buffer(data[0], used[0])) if used[0] else b""
    return flat, buffer


@dataclass(frozen=True)
class Collected:
    """What the library recorded between a profile's enter and exit."""

    events: list[ProfileEvent]
    run_times: list[tuple[int, int]]
    dropped: int
    debug_values: list[DebugValue] = field(default_factory=list)
    debug_buffer: bytes = b""


def read_profile(m: Any, debug: bool = False) -> Collected:
    """Everything the library recorded for method handle `m` since its
    reset (the debug buffer's values too when `debug`)."""
    values, buffer = read_debug(m) if debug else ([], b"")
    return Collected(read_events(m), read_runs(m), lib.pyexec_method_profile_dropped(m), values, buffer)
