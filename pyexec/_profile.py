"""Profiling a Method: `with method.profile() as p: method.execute(...)`
records one timed event per executed instruction (and per node a delegate
runs inside its call) through the library's pyexec_method_profile_* calls;
`p.events`, `p.table()`, `p.chrome_trace(path)` and `p.write_etdump(path)`
read them. With `method.profile(debug_buffer_size=N)` the outputs of every
instruction are recorded too (`p.debug_values`, `p.debug_buffer`), and
`p.write_etdump(path, debug_buffer_path)` writes them as ExecuTorch's
runtime writes its ETDump and debug buffer."""

from __future__ import annotations

import json
import os
from collections.abc import Callable

from ._errors import FileError, InvalidArgumentError
from ._etdump import write_etdump
from ._events import Collected, DebugValue, ProfileEvent


class Profile:
    """What `Method.profile()` collected: `events` (filled when the `with`
    block exits, or at `stop()`, in execution order, over every execute
    inside it), `run_times` ((start_ns, duration_ns) of each execute's
    instruction loop), `dropped` (events not kept because `max_events` was
    reached), and with a debug buffer `debug_values` (what each instruction
    wrote, then each execute's method outputs) and `debug_buffer` (the
    bytes they point into)."""

    def __init__(self, switch: Callable[..., Collected | None], max_events: int | None = None,
                 debug_buffer_size: int = 0) -> None:
        if max_events is not None and (isinstance(max_events, bool) or not isinstance(max_events, int)
                                       or max_events < 1):
            raise InvalidArgumentError(f"max_events must be a positive int or None, got {max_events!r}")
        if isinstance(debug_buffer_size, bool) or not isinstance(debug_buffer_size, int) or debug_buffer_size < 0:
            raise InvalidArgumentError(f"debug_buffer_size must be an int >= 0 (bytes), got {debug_buffer_size!r}")
        self._switch = switch
        self._max_events = max_events or 0
        self._debug_buffer_size = debug_buffer_size
        self._open = False
        self.events: list[ProfileEvent] = []
        self.run_times: list[tuple[int, int]] = []
        self.dropped = 0
        #: With a debug buffer: what each instruction wrote, in execution
        #: order, then each execute's method outputs (DebugValue.event says
        #: which event of `events` wrote it; -1 for a method output).
        self.debug_values: list[DebugValue] = []
        #: The debug buffer's bytes in use, which `debug_values` point into.
        self.debug_buffer = b""

    def start(self) -> Profile:
        """Starts collecting (what entering the `with` block does): every
        execute of the method from now on is recorded, on empty events and an
        empty debug buffer, until `stop()`. Returns the profile.

        Raises:
            InvalidArgumentError: the profile is already collecting, or the
                method is closed.
            OutOfMemoryError: the debug buffer cannot be reserved.
        """
        if self._open:
            raise InvalidArgumentError("the profile is already collecting: stop() it first")
        self._switch(True, self._max_events, self._debug_buffer_size)
        self._open = True
        return self

    def stop(self) -> Profile:
        """Stops collecting (what leaving the `with` block does) and fills
        `events`, `run_times`, `dropped`, `debug_values` and `debug_buffer`
        with what the executes since `start()` recorded, replacing what they
        held; the method's debug buffer is released. A later `start()`
        collects afresh. Returns the profile.

        Raises:
            InvalidArgumentError: the profile is not collecting, or the
                method is closed.
        """
        if not self._open:
            raise InvalidArgumentError("the profile is not collecting: start() it first")
        self._open = False
        got = self._switch(False)
        if got is not None:
            self.events, self.run_times, self.dropped = got.events, got.run_times, got.dropped
            self.debug_values, self.debug_buffer = got.debug_values, got.debug_buffer
        return self

    def __enter__(self) -> Profile:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

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

    def write_etdump(self, path: str | os.PathLike[str],
                     debug_buffer_path: str | os.PathLike[str] | None = None) -> None:
        """Writes the profile as an ETDump file (ExecuTorch's
        etdump_schema_flatcc.fbs, the format its runtime writes with
        enable_etdump=True), which `executorch.devtools.Inspector(etdump_path=
        path)` reads: one "Execute" block per execute, with events named as
        ExecuTorch's runtime names them (native_call_<op> and OPERATOR_CALL
        per kernel, DELEGATE_CALL and one event per node per delegate call,
        MOVE_CALL, JF_CALL, Method::execute), carrying each instruction's
        chain and index.

        With a debug buffer (`method.profile(debug_buffer_size=N)`), the
        ETDump also holds a debug event per recorded value, where ExecuTorch
        logs it (a kernel's outputs before its native_call event, a delegate
        call's arguments before DELEGATE_CALL, the method outputs after
        Method::execute), each tensor pointing at its bytes in the debug
        buffer, which is written to `debug_buffer_path`: read both with
        `Inspector(etdump_path=path, debug_buffer_path=debug_buffer_path)`.
        Without `debug_buffer_path` the debug events are written alone (the
        Inspector then shows zero tensors of the right shapes).

        Raises:
            InvalidArgumentError: called while collecting (nothing is
                collected until the `with` block exits or `stop()`).
            FileError: `path` or `debug_buffer_path` cannot be written (naming it).
        """
        if self._open:
            raise InvalidArgumentError("the profile is still collecting: write the ETDump after its with block")
        spans: list[tuple[int, int] | None] = list(self.run_times)
        spans += [None] * (self.runs - len(spans))
        write_etdump(path, self.events, spans, self.debug_values)
        if debug_buffer_path is not None:
            try:
                with open(debug_buffer_path, "wb") as f:
                    f.write(self.debug_buffer)
            except OSError as exc:
                raise FileError(f"cannot write the debug buffer to {os.fspath(debug_buffer_path)!r}: "
                                f"{exc.strerror or exc}") from None
