"""ETDump recording across calls, for ExecuTorch's `enable_etdump=True` loads
(`Runtime.load_program` and the Module API): every execute of every Method a
program loads is profiled, with a debug buffer per method when asked for,
until the ETDump is written; then recording starts afresh, as ExecuTorch's
ETDump generator does after a dump."""

from __future__ import annotations

import dataclasses
import os
from typing import Optional

from ._errors import FileError, InvalidArgumentError
from ._etdump import write_etdump
from ._events import DebugValue, ProfileEvent
from ._method import Method
from ._profile import Profile


class Recorder:
    """Records every execute of the Methods attached to it (`attach`), with
    a debug buffer of `debug_buffer_size` bytes per method when that is not
    0 (every instruction's outputs, Method.profile(debug_buffer_size=...)).
    `write(path, debug_buffer_path)` writes them all as one ETDump, as
    ExecuTorch's one ETDump generator per program records them."""

    def __init__(self, debug_buffer_size: int = 0) -> None:
        if isinstance(debug_buffer_size, bool) or not isinstance(debug_buffer_size, int) or debug_buffer_size < 0:
            raise InvalidArgumentError(f"debug_buffer_size must be an int >= 0 (bytes), got {debug_buffer_size!r}")
        self.debug_buffer_size = debug_buffer_size
        self._profiles: list[Profile] = []

    def attach(self, method: Method) -> None:
        """Records `method`'s executes from now on."""
        self._profiles.append(method.profile(debug_buffer_size=self.debug_buffer_size).start())

    def write(self, path: str | os.PathLike[str], debug_buffer_path: Optional[str | os.PathLike[str]] = None) -> None:
        """Writes the ETDump of every execute since the last write to `path`
        (and the debug buffer to `debug_buffer_path`), then records afresh.

        Raises:
            InvalidArgumentError: `debug_buffer_path` given without a debug buffer.
            FileError: a file cannot be written (naming it).
        """
        if debug_buffer_path is not None and self.debug_buffer_size == 0:
            raise InvalidArgumentError("a debug buffer path was given, but debug_buffer_size is 0: load the "
                                       "program with debug_buffer_size > 0 to record intermediate outputs")
        # Each later method's runs, event indices and buffer offsets moved
        # past the earlier ones'.
        events: list[ProfileEvent] = []
        spans: list[tuple[int, int] | None] = []
        values: list[DebugValue] = []
        buffer = bytearray()
        for profile in self._profiles:
            profile.stop()
            base_run, base_event = len(spans), len(events)
            buffer += bytes(-len(buffer) % 64)
            base_offset = len(buffer)
            events += [dataclasses.replace(e, run=e.run + base_run) for e in profile.events]
            values += [_moved(v, base_run, base_event, base_offset) for v in profile.debug_values]
            buffer += profile.debug_buffer
            spans += list(profile.run_times) + [None] * (profile.runs - len(profile.run_times))
            profile.start()
        write_etdump(path, events, spans, values)
        if debug_buffer_path is not None:
            try:
                with open(debug_buffer_path, "wb") as f:
                    f.write(buffer)
            except OSError as exc:
                raise FileError(f"cannot write the debug buffer to {os.fspath(debug_buffer_path)!r}: "
                                f"{exc.strerror or exc}") from None


def _moved(v: DebugValue, run: int, event: int, offset: int) -> DebugValue:
    return dataclasses.replace(
        v, run=v.run + run, event=v.event + event if v.event >= 0 else v.event,
        offset=v.offset + offset if v.offset >= 0 else v.offset,
        items=tuple(_moved(i, run, event, offset) for i in v.items),
    )
