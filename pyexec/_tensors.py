"""Tensors in and out: reading a caller's torch / numpy / DLPack tensor as
(pointer, bytes, shape, dtype code), and making numpy / torch views over
memory the library or the caller owns."""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _dtypes
from ._errors import InvalidArgumentError, UnsupportedError
from ._ffi import ffi


class Described:
    """A caller's tensor as the library sees it."""

    __slots__ = ("obj", "kind", "ptr", "nbytes", "shape", "code", "contiguous", "writable", "cpu", "dtype_name")

    def __init__(
        self,
        obj: Any,
        kind: str,
        ptr: Any,
        nbytes: int,
        shape: tuple[int, ...],
        code: int | None,
        contiguous: bool,
        writable: bool,
        cpu: bool,
        dtype_name: str,
    ) -> None:
        self.obj = obj
        self.kind = kind  # "torch" or "numpy"
        self.ptr = ptr  # int (torch) or cffi buffer (numpy)
        self.nbytes = nbytes
        self.shape = shape
        self.code = code
        self.contiguous = contiguous
        self.writable = writable
        self.cpu = cpu
        self.dtype_name = dtype_name


def is_tensor_like(x: Any) -> bool:
    if isinstance(x, np.ndarray):
        return True
    torch = _dtypes.torch_module()
    if torch is not None and isinstance(x, torch.Tensor):
        return True
    return hasattr(x, "__dlpack__")


def describe(x: Any, what: str) -> Described:
    """Reads a tensor-like object; raises InvalidArgumentError for anything else."""
    torch = _dtypes.torch_module()
    if torch is not None and isinstance(x, torch.Tensor):
        code = _dtypes.torch_maps()[0].get(x.dtype)
        name = _dtypes.NAMES[code] if code is not None else str(x.dtype).replace("torch.", "")
        cpu = bool(x.is_cpu)
        return Described(
            x, "torch", x.data_ptr() if cpu else 0, x.nbytes, tuple(x.shape), code,
            bool(x.is_contiguous()), True, cpu, name,
        )
    if not isinstance(x, np.ndarray):
        if hasattr(x, "__dlpack__"):
            try:
                x = np.from_dlpack(x)
            except (BufferError, TypeError, RuntimeError, ValueError) as exc:
                raise InvalidArgumentError(f"{what}: cannot read the object through DLPack ({exc})") from None
        else:
            raise InvalidArgumentError(
                f"{what}: expected a torch.Tensor, numpy.ndarray or an object with __dlpack__, "
                f"got {type(x).__name__}"
            )
    code = _dtypes.CODE_BY_NUMPY.get(x.dtype)
    name = _dtypes.NAMES[code] if code is not None else str(x.dtype)
    contiguous = bool(x.flags.c_contiguous)
    ptr: Any = None
    if contiguous:
        ptr = ffi.from_buffer(x) if x.size else ffi.NULL
    return Described(x, "numpy", ptr, x.nbytes, x.shape, code, contiguous, bool(x.flags.writeable), True, name)


def contiguous_copy(d: Described) -> Described:
    """A contiguous copy of a described tensor (staging)."""
    if d.kind == "torch":
        return describe(d.obj.contiguous(), "")
    return describe(np.ascontiguousarray(d.obj), "")


class _Memory:
    """Exposes a raw block to numpy while keeping its owner alive: arrays made
    from it hold this object as their base, and it holds the owner."""

    __slots__ = ("__array_interface__", "_owner")

    def __init__(self, ptr: int, nbytes: int, owner: Any) -> None:
        self.__array_interface__ = {
            "data": (ptr, False),
            "shape": (nbytes,),
            "typestr": "|u1",
            "version": 3,
        }
        self._owner = owner


def numpy_view(
    ptr: int, code: int, shape: tuple[int, ...], owner: Any, dim_order: tuple[int, ...] | None = None
) -> np.ndarray:
    """A numpy array over `ptr` (numel elements of dtype `code`, laid out
    contiguously in `dim_order`, row-major when None), keeping `owner` alive
    while the array (or any view of it) lives."""
    storage = _dtypes.NUMPY_STORAGE[code]
    numel = 1
    for s in shape:
        numel *= s
    if numel == 0 or ptr == 0:
        return np.empty(shape, dtype=storage)
    raw = np.asarray(_Memory(ptr, numel * storage.itemsize, owner)).view(storage)
    if dim_order is None or list(dim_order) == sorted(dim_order):
        return raw.reshape(shape)
    # Memory holds the dims in dim_order (outermost first); present them in logical order.
    physical = raw.reshape([shape[d] for d in dim_order])
    return physical.transpose(np.argsort(dim_order))


def physical_layout(x: Any, dim_order: tuple[int, ...]) -> Any:
    """`x` (logical layout) seen with its dims in `dim_order`: what a slot with
    that dim_order expects in memory. A view when the caller's tensor already
    has that layout (a channels_last torch tensor for [0, 2, 3, 1])."""
    if isinstance(x, np.ndarray):
        return x.transpose(dim_order)
    return x.permute(*dim_order)


def to_torch(arr: np.ndarray, code: int) -> Any:
    torch = _dtypes.torch_module()
    if torch is None:
        import torch
    t = torch.from_numpy(arr)
    if code in _dtypes.NOT_IN_NUMPY:  # numpy carried the bits: see them as the real dtype
        t = t.view(_dtypes.torch_maps()[1][code])
    return t


def check_numpy_code(code: int, what: str) -> None:
    if code in _dtypes.NOT_IN_NUMPY:
        raise UnsupportedError(
            f"{what} is {_dtypes.NAMES[code]}, which numpy cannot represent; use output_type='torch'"
        )


def as_output_type(x: Any, output_type: str) -> Any:
    """A caller's tensor seen as the requested output type, sharing memory."""
    torch = _dtypes.torch_module()
    if output_type == "torch":
        if torch is not None and isinstance(x, torch.Tensor):
            return x
        import torch as _torch

        return _torch.from_numpy(np.asarray(x))
    if torch is not None and isinstance(x, torch.Tensor):
        return x.numpy()
    return np.asarray(x)
