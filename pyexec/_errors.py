"""Exceptions, and the one place that turns a C status into one."""

from __future__ import annotations

from typing import NoReturn

from ._ffi import ffi, lib


class Error(Exception):
    """Base class of every error pyexec raises."""


class InvalidProgramError(Error, ValueError):
    """The file is not a valid ExecuTorch program."""


class UnsupportedError(Error, NotImplementedError):
    """The program needs an operator, delegate or dtype pyexec lacks."""


class InvalidArgumentError(Error, ValueError):
    """An input, output binding or index is wrong."""


class ExecutionError(Error, RuntimeError):
    """A kernel failed while the method was executing."""


class FileError(Error, OSError):
    """A file could not be opened, read or mapped."""


class OutOfMemoryError(Error, MemoryError):
    """An allocation failed."""


_BY_STATUS: dict[int, type[Error]] = {
    lib.PYEXEC_ERR_INVALID_ARGUMENT: InvalidArgumentError,
    lib.PYEXEC_ERR_INVALID_PROGRAM: InvalidProgramError,
    lib.PYEXEC_ERR_UNSUPPORTED: UnsupportedError,
    lib.PYEXEC_ERR_EXECUTION: ExecutionError,
    lib.PYEXEC_ERR_OUT_OF_MEMORY: OutOfMemoryError,
    lib.PYEXEC_ERR_IO: FileError,
}


def raise_status(status: int) -> NoReturn:
    """Raises the exception for a failing status with the library's message."""
    message = ffi.string(lib.pyexec_last_error()).decode("utf-8", "replace")
    cls = _BY_STATUS.get(status, Error)
    raise cls(message)


def check(status: int) -> None:
    if status:
        raise_status(status)
