"""What a Method needs of its Program, below both: the C handles, where the
program came from (for pickling), and ProgramBase, the part of a Program a
Method reads (Program, in _program.py, is its one subclass)."""

from __future__ import annotations

import hashlib
import os
from typing import Any

from ._errors import FileError, InvalidArgumentError
from ._ffi import ffi, lib
from ._meta import MethodMeta


class ProgramHandle:
    """Owns the C program; freed when the last Python reference goes.
    `borrowed` holds the bytes a program was loaded from in place, for as
    long as the C program (and so every Method) lives."""

    __slots__ = ("ptr", "borrowed", "__weakref__")

    def __init__(self, ptr: Any, borrowed: bytes | None = None) -> None:
        self.ptr = ffi.gc(ptr, lib.pyexec_program_free)
        self.borrowed = borrowed


class MethodHandle:
    """Owns the C method and keeps its program alive. Arrays returned without
    a copy hold this object, so the memory they show outlives the Method."""

    __slots__ = ("ptr", "program", "__weakref__")

    def __init__(self, ptr: Any, program: ProgramHandle) -> None:
        self.program = program
        self.ptr = ffi.gc(ptr, lib.pyexec_method_free)


def file_key(path: str) -> tuple[int, int, int, int]:
    """What says a file is still the one that was loaded: device, inode,
    size and modification time."""
    st = os.stat(path)
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def sha256(path: str) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            h.update(chunk)
    return h.hexdigest()


class Origin:
    """Where a program or data file came from, as pickling needs it: the
    bytes themselves (a `bytes` source is kept, not copied; a bytearray or
    memoryview is snapshot, since the caller may change it), or the absolute
    path with what identified the file at load (device, inode, size, mtime).
    The file's sha256 is computed on the first pickle and kept. Shared by a
    Program and its Methods, so that a Method still pickles after its
    Program is closed."""

    __slots__ = ("what", "data", "path", "key", "digest")

    def __init__(self, what: str, data: bytes | None, path: str | None) -> None:
        self.what = what  # "program" or "data file", for messages
        self.data = data
        self.path = path
        self.key = file_key(path) if path is not None else None
        self.digest: str | None = None

    def state(self) -> tuple[str, Any, str | None]:
        """("bytes", data, None) or ("path", path, sha256). A file that is no
        longer the one loaded (replaced, resized or touched since) is refused:
        its hash would not describe what this process runs."""
        if self.path is None:
            return ("bytes", self.data, None)
        try:
            key = file_key(self.path)
        except OSError as e:
            raise FileError(f"cannot pickle the {self.what} '{self.path}': {e.strerror or e}") from None
        if key != self.key:
            raise FileError(
                f"cannot pickle the {self.what} '{self.path}': the file changed since it was loaded "
                f"(its content no longer is what this process runs)"
            )
        if self.digest is None:
            self.digest = sha256(self.path)
        return ("path", self.path, self.digest)


def verified(what: str, state: tuple[str, Any, str | None]) -> Any:
    """The source to load for a pickled origin: the bytes, or the path once
    the file there hashes to what was pickled."""
    kind, value, digest = state
    if kind == "bytes":
        return value
    try:
        before = file_key(value)
        actual = sha256(value)
        after = file_key(value)
    except OSError as e:
        raise FileError(
            f"cannot unpickle the {what} '{value}': the file is missing or unreadable "
            f"({e.strerror or e}); its content changed since it was pickled"
        ) from None
    if actual != digest or before != after:
        raise FileError(
            f"cannot unpickle the {what} '{value}': its content changed since it was pickled "
            f"(sha256 {actual}, pickled with {digest})"
        )
    return value


def pickle_state(origins: tuple[Origin, Origin | None]) -> tuple[Any, Any]:
    """(source, data file) of a program, as ProgramBase._reopen takes them."""
    origin, data = origins
    return (origin.state(), None if data is None else data.state())


def origin_of(what: str, source: Any, path: bytes | None) -> Origin:
    if path is not None:
        return Origin(what, None, os.path.abspath(os.fsdecode(path)))
    return Origin(what, source if type(source) is bytes else bytes(source), None)


class ProgramBase:
    """The part of a Program that a Method reads: its C handle, where it came
    from, its method metadata, and how to load it again from a pickled state."""

    _handle: ProgramHandle | None = None
    _origins: tuple[Origin, Origin | None]

    def _ptr(self) -> Any:
        if self._handle is None:
            raise InvalidArgumentError("program is closed")
        return self._handle.ptr

    @staticmethod
    def _check_name(name: str) -> bytes:
        """The name as the library takes it. Whether the program has such a
        method is the library's check, so that its message (which lists the
        methods) is the one every caller sees."""
        if not isinstance(name, str):
            raise InvalidArgumentError(f"method name must be a str, got {type(name).__name__}")
        if "\0" in name:
            raise InvalidArgumentError(f"method name must not contain NUL characters, got {name!r}")
        return name.encode()

    def method_meta(self, name: str) -> MethodMeta:
        raise NotImplementedError

    @classmethod
    def _reopen(cls, source: tuple[str, Any, str | None], data: tuple[str, Any, str | None] | None) -> ProgramBase:
        """The program again, from pickle_state's (source, data file)."""
        raise NotImplementedError
