"""Exceptions, and the one place that turns a C status into one."""

from __future__ import annotations

from typing import NoReturn

from ._ffi import ffi, lib


class Error(Exception):
    """Base class of every error pyexec raises.

    `code` is the library's pyexec_status for the failure (the class's own
    status when Python found the problem before calling the library), and
    `status_name` the library's name for it ("invalid argument"). A bare
    Error made outside pyexec has no status: `code` None."""

    code: int | None = None

    @property
    def status_name(self) -> str:
        """The library's name for `code` ("invalid argument"); "" when None."""
        if self.code is None:
            return ""
        name: bytes = ffi.string(lib.pyexec_status_name(self.code))
        return name.decode("utf-8", "replace")


class InvalidProgramError(Error, ValueError):
    """The file is not a valid ExecuTorch program."""

    code = lib.PYEXEC_ERR_INVALID_PROGRAM


class UnsupportedError(Error, NotImplementedError):
    """The program needs an operator, delegate or dtype pyexec lacks."""

    code = lib.PYEXEC_ERR_UNSUPPORTED


class InvalidArgumentError(Error, ValueError):
    """An input, output binding or index is wrong."""

    code = lib.PYEXEC_ERR_INVALID_ARGUMENT


class ExecutionError(Error, RuntimeError):
    """A kernel failed while the method was executing."""

    code = lib.PYEXEC_ERR_EXECUTION


class FileError(Error, OSError):
    """A file could not be opened, read or mapped."""

    code = lib.PYEXEC_ERR_IO


class OutOfMemoryError(Error, MemoryError):
    """An allocation failed."""

    code = lib.PYEXEC_ERR_OUT_OF_MEMORY


_CLASSES = (InvalidArgumentError, InvalidProgramError, UnsupportedError, ExecutionError, OutOfMemoryError, FileError)
_BY_STATUS: dict[int, type[Error]] = {cls.code: cls for cls in _CLASSES if cls.code is not None}


def raise_status(status: int) -> NoReturn:
    """Raises the exception for a failing status with the library's message."""
    message = ffi.string(lib.pyexec_last_error()).decode("utf-8", "replace")
    exc = _BY_STATUS.get(status, Error)(message)
    exc.code = status
    raise exc


def check(status: int) -> None:
    if status:
        raise_status(status)
