"""Profiling a Method: `with method.profile() as p: method.execute(...)`
records one timed event per executed instruction (and per node a delegate
runs inside its call) through the library's pyexec_method_profile_* calls;
`p.events`, `p.table()`, `p.chrome_trace(path)` and `p.write_etdump(path)`
read them."""

from __future__ import annotations

import json
import os
from collections.abc import Callable

from ._errors import FileError, InvalidArgumentError
from ._etdump import write_etdump
from ._events import Collected, ProfileEvent


class Profile:
    """What `Method.profile()` collected: `events` (filled when the `with`
    block exits, in execution order, over every execute inside it),
    `run_times` ((start_ns, duration_ns) of each execute's instruction loop)
    and `dropped` (events not kept because `max_events` was reached)."""

    def __init__(self, switch: Callable[..., Collected | None], max_events: int | None = None) -> None:
        if max_events is not None and (isinstance(max_events, bool) or not isinstance(max_events, int)
                                       or max_events < 1):
            raise InvalidArgumentError(f"max_events must be a positive int or None, got {max_events!r}")
        self._switch = switch
        self._max_events = max_events or 0
        self._open = False
        self.events: list[ProfileEvent] = []
        self.run_times: list[tuple[int, int]] = []
        self.dropped = 0

    def __enter__(self) -> Profile:
        self._switch(True, self._max_events)
        self._open = True
        return self

    def __exit__(self, *exc: object) -> None:
        self._open = False
        got = self._switch(False)
        if got is not None:
            self.events, self.run_times, self.dropped = got.events, got.run_times, got.dropped

    @property
    def runs(self) -> int:
        """How many executes the profile covers."""
        return max(len(self.run_times), max((e.run for e in self.events), default=-1) + 1)

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
        if self.dropped:
            note += f"; {self.dropped} later event(s) dropped (over max_events)"
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

    def write_etdump(self, path: str | os.PathLike[str]) -> None:
        """Writes the profile as an ETDump file (ExecuTorch's
        etdump_schema_flatcc.fbs, the format its runtime writes with
        enable_etdump=True), which `executorch.devtools.Inspector(etdump_path=
        path)` reads: one "Execute" block per execute, with events named as
        ExecuTorch's runtime names them (native_call_<op> and OPERATOR_CALL
        per kernel, DELEGATE_CALL and one event per node per delegate call,
        MOVE_CALL, JF_CALL, Method::execute), carrying each instruction's
        chain and index.

        Raises:
            InvalidArgumentError: called inside the `with` block (nothing is
                collected until it exits).
            FileError: `path` cannot be written (naming it).
        """
        if self._open:
            raise InvalidArgumentError("the profile is still collecting: write the ETDump after its with block")
        spans: list[tuple[int, int] | None] = list(self.run_times)
        spans += [None] * (self.runs - len(spans))
        write_etdump(path, self.events, spans)
