"""Profiling a Method: `with method.profile() as p: method.execute(...)`
records one timed event per executed instruction (and per node a delegate
runs inside its call) through the library's pyexec_method_profile_* calls;
`p.events`, `p.table()` and `p.chrome_trace(path)` read them."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ._errors import FileError, check
from ._ffi import ffi, lib

if TYPE_CHECKING:
    from ._method import Method


@dataclass(frozen=True)
class ProfileEvent:
    """One executed instruction (depth 0) or one node a delegate ran inside
    the call listed before it (depth 1). `name` is the operator
    ("aten::add.out"), "delegate:<backend id>", or the node's type
    ("FullyConnected"); `parent` is the delegate call's name for a node, else
    None. `shapes` are the input shapes as text ("[1,8] [8]"). Times are
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


class Profile:
    """What `Method.profile()` collected: `events` (filled when the `with`
    block exits, in execution order, over every execute inside it)."""

    def __init__(self, method: Method) -> None:
        self._method = method
        self.events: list[ProfileEvent] = []

    def __enter__(self) -> Profile:
        self._method._profile_switch(True)
        return self

    def __exit__(self, *exc: object) -> None:
        self.events = self._method._profile_switch(False)

    @property
    def runs(self) -> int:
        """How many executes the events cover."""
        return max((e.run for e in self.events), default=-1) + 1

    def summary(self) -> list[tuple[str, int, int]]:
        """(name, calls, total ns) per `ProfileEvent.key`, largest total first."""
        rows: dict[str, list[int]] = {}
        for e in self.events:
            row = rows.setdefault(e.key, [0, 0])
            row[0] += 1
            row[1] += e.duration_ns
        return sorted(((k, c, t) for k, (c, t) in rows.items()), key=lambda r: (-r[2], r[0]))

    def table(self) -> str:
        """A printable table, one row per operator (nodes inside a delegate as
        "<backend>/<node type>"): calls, total ms, mean µs and share of the
        time of all instructions, largest total first."""
        total = sum(e.duration_ns for e in self.events if e.depth == 0)
        rows = self.summary()
        width = max([len("operator")] + [len(r[0]) for r in rows])
        lines = [f"{'operator':<{width}}  {'calls':>7}  {'total ms':>10}  {'mean us':>10}  {'share %':>7}"]
        for name, calls, ns in rows:
            share = 100.0 * ns / total if total else 0.0
            lines.append(f"{name:<{width}}  {calls:>7}  {ns / 1e6:>10.3f}  {ns / calls / 1e3:>10.2f}  {share:>7.1f}")
        lines.append(f"{'total':<{width}}  {sum(1 for e in self.events if e.depth == 0):>7}  {total / 1e6:>10.3f}"
                     f"  {'':>10}  {100.0 if total else 0.0:>7.1f}")
        note = f"{self.runs} run(s)"
        if any(e.depth for e in self.events):
            note += "; a row with '/' is a node inside a delegate call, its time also in the call's row"
        lines.append(note)
        return "\n".join(lines)

    def chrome_trace(self, path: str | os.PathLike[str]) -> None:
        """Writes the events as Chrome trace-event JSON ("X" complete events,
        times in µs from the first event) that Perfetto (ui.perfetto.dev) and
        chrome://tracing open.

        Raises:
            FileError: `path` cannot be written (naming it).
        """
        t0 = min((e.start_ns for e in self.events), default=0)
        trace = [{
            "name": e.name, "cat": "delegate" if e.depth else "instruction", "ph": "X",
            "ts": (e.start_ns - t0) / 1e3, "dur": e.duration_ns / 1e3, "pid": os.getpid(), "tid": 0,
            "args": {"shapes": e.shapes, "run": e.run, "chain": e.chain, "index": e.index},
        } for e in self.events]
        doc = {"traceEvents": trace, "displayTimeUnit": "ms"}
        try:
            with open(path, "w", encoding="utf-8") as f:
                json.dump(doc, f)
        except OSError as exc:
            raise FileError(f"cannot write the trace to {os.fspath(path)!r}: {exc.strerror or exc}") from None
