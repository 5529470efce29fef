"""pyexec: run ExecuTorch programs (.pte) with zero-copy control of inputs and
outputs, over a small C library."""

from ._errors import (
    Error,
    ExecutionError,
    FileError,
    InvalidArgumentError,
    InvalidProgramError,
    OutOfMemoryError,
    UnsupportedError,
)
from ._ffi import ffi as _ffi
from ._ffi import lib as _lib
from ._runtime import Method, MethodMeta, Program, TensorInfo, load

__version__ = _ffi.string(_lib.pyexec_version()).decode()


def kernels() -> list[str]:
    """Names of every operator the library has a kernel for ("aten::add.out")."""
    return [_ffi.string(_lib.pyexec_kernel_name(i)).decode() for i in range(_lib.pyexec_kernel_count())]


__all__ = [
    "Error",
    "ExecutionError",
    "FileError",
    "InvalidArgumentError",
    "InvalidProgramError",
    "Method",
    "MethodMeta",
    "OutOfMemoryError",
    "Program",
    "TensorInfo",
    "UnsupportedError",
    "__version__",
    "kernels",
    "load",
]
