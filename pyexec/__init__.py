"""pyexec: run ExecuTorch programs (.pte) with zero-copy control of inputs and
outputs, over a small C library."""

from . import _ffi
from ._errors import (
    Error,
    ExecutionError,
    FileError,
    InvalidArgumentError,
    InvalidProgramError,
    OutOfMemoryError,
    UnsupportedError,
)
from ._method import Method
from ._profile import Profile, ProfileEvent
from ._program import DelegateInfo, MethodMeta, Program, Runtime, TensorInfo, load

__version__: str = _ffi.ffi.string(_ffi.lib.pyexec_version()).decode()


def kernels() -> list[str]:
    """Names of every operator the library has a kernel for ("aten::add.out")."""
    ffi, lib = _ffi.ffi, _ffi.lib
    return [ffi.string(lib.pyexec_kernel_name(i)).decode() for i in range(lib.pyexec_kernel_count())]


__all__ = [
    "DelegateInfo",
    "Error",
    "ExecutionError",
    "FileError",
    "InvalidArgumentError",
    "InvalidProgramError",
    "Method",
    "MethodMeta",
    "OutOfMemoryError",
    "Profile",
    "ProfileEvent",
    "Program",
    "Runtime",
    "TensorInfo",
    "UnsupportedError",
    "__version__",
    "kernels",
    "load",
]
