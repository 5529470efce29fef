"""pyexec: run ExecuTorch programs (.pte) with zero-copy control of inputs and
outputs, over a small C library."""

from . import _errors, _ffi
from ._bundled import (
    BundledResult,
    BundledTestCase,
    BundledTestSuite,
    VerificationError,
    run_bundled,
    verify_bundled,
)
from ._errors import (
    Error,
    ExecutionError,
    FileError,
    InvalidArgumentError,
    InvalidProgramError,
    OutOfMemoryError,
    UnsupportedError,
)
from ._events import DebugValue, ProfileEvent
from ._meta import DelegateInfo, MethodMeta, TensorInfo
from ._method import Method
from ._profile import Profile
from ._program import Program, Runtime, load

__version__: str = _ffi.ffi.string(_ffi.lib.pyexec_version()).decode()


def set_num_threads(n: int) -> None:
    """Sets how many threads pyexec's kernels may use (the calling thread
    included), for every Method in the process, from the next call on; 1 runs
    everything on the calling thread. Outputs are bit-identical for every
    count. `n` must be an int from 1 to 1024 (else InvalidArgumentError;
    TypeError for a non-int). The pool is shared: while one Method's call
    uses it, a call on another thread runs its kernels on that thread alone."""
    if isinstance(n, bool) or not isinstance(n, int):
        raise TypeError(f"set_num_threads() takes an int, not {type(n).__name__}")
    if not 1 <= n <= 1024:
        raise InvalidArgumentError(f"num_threads must be from 1 to 1024, got {n}")
    _errors.check(_ffi.lib.pyexec_set_num_threads(n))


def get_num_threads() -> int:
    """The number of threads pyexec's kernels may use: the last
    set_num_threads(), else the PYEXEC_NUM_THREADS environment variable (read
    once, at the first use), else the CPUs this process may run on (its
    affinity mask, capped by a cgroup CPU quota when one is set)."""
    n: int = _ffi.lib.pyexec_get_num_threads()
    return n


def kernels() -> list[str]:
    """Names of every operator the library has a kernel for ("aten::add.out")."""
    ffi, lib = _ffi.ffi, _ffi.lib
    return [ffi.string(lib.pyexec_kernel_name(i)).decode() for i in range(lib.pyexec_kernel_count())]


__all__ = [
    "BundledResult",
    "BundledTestCase",
    "BundledTestSuite",
    "VerificationError",
    "run_bundled",
    "verify_bundled",
    "DebugValue",
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
    "get_num_threads",
    "kernels",
    "load",
    "set_num_threads",
]
