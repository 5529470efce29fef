"""Profile events as the library records them (pyexec_profile_event), read
into ProfileEvent records; what Method.profile() collects and _etdump writes."""

from __future__ import annotations

from dataclasses import dataclass
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
class Collected:
    """What the library recorded between a profile's enter and exit."""

    events: list[ProfileEvent]
    run_times: list[tuple[int, int]]
    dropped: int


def read_profile(m: Any) -> Collected:
    """Everything the library recorded for method handle `m` since its reset."""
    return Collected(read_events(m), read_runs(m), lib.pyexec_method_profile_dropped(m))
