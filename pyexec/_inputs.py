"""A Method's inputs, in two small classes: InputSlot (one input's metadata
and its entry in the C argument array, with what that entry holds now) and
Inputs (the slots together, the array they fill, and the caller's objects
the library reads in place)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from . import _dtypes
from ._errors import InvalidArgumentError
from ._ffi import ffi, lib
from ._meta import TensorInfo, dim_order_if_not_row_major
from ._tensors import Described, contiguous_copy, describe, physical_layout

_TENSOR = lib.PYEXEC_VALUE_TENSOR
_TORCH_CODES: dict[Any, int] = {}  # torch dtype -> code, filled once torch is in use


class InputSlot:
    """One input: its metadata and its entry in the C argument array (a
    pyexec_value), with what that entry holds now."""

    __slots__ = (
        "index", "info", "code", "order", "value", "tensor", "sizes", "data_field", "planned", "in_place",
        "clean", "key",
    )

    def __init__(self, index: int, info: TensorInfo | None, value: Any) -> None:
        self.index = index
        self.info = info
        self.value = value  # the pyexec_value in Inputs.values
        self.tensor = value.tensor
        self.code = _dtypes.CODE_BY_NAME[info.dtype] if info is not None else None
        self.order = dim_order_if_not_row_major(info)
        self.sizes: Any = ffi.new("int64_t[]", max(len(info.sizes), 1)) if info is not None else None
        # The entry's data pointer seen as an integer: a torch tensor's
        # data_ptr() goes in with one item assignment, no pointer object.
        self.data_field = ffi.cast("uintptr_t *", ffi.addressof(value, "tensor", "data"))
        self.planned = info is None or info.is_memory_planned
        self.in_place = info is not None and info.is_mutated and not info.is_memory_planned
        # The entry still holds the metadata's dtype, rank and sizes: the fast
        # path writes only the data pointer and byte count.
        self.clean = False
        # (data_ptr, shape, dtype) of the torch tensor the entry describes: a
        # tensor with the same key needs no write at all.
        self.key: tuple[int, Any, Any] | None = None

    def fill_fast(self, x: Any, tensor_cls: Any, keep: list[Any], staged: list[Any]) -> bool:
        """The common case with the fewest Python operations: a contiguous CPU
        torch tensor or numpy array of the slot's dtype and row-major layout.
        Returns False to let `fill` handle (and explain) anything else."""
        info = self.info
        if info is None or self.order is not None:
            return False
        if type(x) is tensor_cls:
            if _TORCH_CODES.get(x.dtype) != self.code or not x.is_cpu or not x.is_contiguous():
                return False
            data = None
        elif type(x) is np.ndarray:
            if _dtypes.CODE_BY_NUMPY.get(x.dtype) != self.code or not x.flags.c_contiguous or x.size == 0:
                return False
            if self.in_place and not x.flags.writeable:
                return False
            data = ffi.from_buffer(x)
        else:
            return False
        shape = x.shape
        t = self.tensor
        if not self.clean:
            self.value.kind = _TENSOR
            t.dtype = self.code
            t.dim = len(info.sizes)
            t.sizes = self.sizes
            self.sizes[0 : len(info.sizes)] = info.sizes
            self.clean = True
        if shape != info.sizes:
            if not info.is_dynamic or len(shape) != len(info.sizes):
                return False
            self.sizes[0 : len(shape)] = shape
            self.clean = False  # the sizes differ from the metadata now
        if data is None:
            ptr = x.data_ptr()
            self.data_field[0] = ptr
            self.key = (ptr, shape, x.dtype)
            staged[self.index] = x
        else:
            t.data = data
            self.key = None
            staged[self.index] = data
        t.nbytes = x.nbytes
        if not self.planned:
            keep[self.index] = x
        return True

    def fill(self, x: Any) -> Described:
        """Any tensor the slot may take, checked and staged where it must be:
        the entry is written; returns what it points to."""
        self.clean = False
        self.key = None
        j = self.index
        info = self.info
        assert info is not None
        d = describe(x, f"input {j}")
        if not d.cpu:
            raise InvalidArgumentError(f"input {j} is on device {x.device}; only CPU tensors are supported")
        if d.code is None:
            raise InvalidArgumentError(f"input {j} has dtype {info.dtype}, tensor has {d.dtype_name}")
        shape = d.shape
        order = self.order
        in_place = self.in_place
        if order is not None and len(shape) == len(order):
            # The slot wants its dims in memory in dim_order: a view when the
            # caller's tensor already is (channels-last), else a staged copy.
            d = describe(physical_layout(d.obj, order), f"input {j}")
            if not d.contiguous and in_place:
                raise InvalidArgumentError(
                    f"input {j} must be laid out in dim_order {list(order)}: the program writes it in place"
                )
        if not d.contiguous:
            if in_place:
                raise InvalidArgumentError(f"input {j} must be contiguous: the program writes it in place")
            d = contiguous_copy(d)
        if in_place and not d.writable:
            raise InvalidArgumentError(f"input {j} is read-only, but the program writes it in place")
        if len(shape) > len(info.sizes) or len(shape) > _dtypes.MAX_DIM:
            raise InvalidArgumentError(f"input {j} has rank {len(info.sizes)}, tensor has rank {len(shape)}")
        self.sizes[0 : len(shape)] = shape
        self.value.kind = _TENSOR
        t = self.tensor
        t.dtype = d.code
        t.dim = len(shape)
        t.sizes = self.sizes
        if d.kind == "torch":
            self.data_field[0] = d.ptr
        else:
            t.data = d.ptr
        t.nbytes = d.nbytes
        return d

    def fill_scalar(self, x: Any) -> None:
        """A non-tensor input; the library checks it against the exported value."""
        v = self.value
        self.clean = False
        self.key = None
        if x is None:
            v.kind = lib.PYEXEC_VALUE_NONE
        elif isinstance(x, bool):
            v.kind = lib.PYEXEC_VALUE_BOOL
            v.b = int(x)
        elif isinstance(x, int):
            v.kind = lib.PYEXEC_VALUE_INT
            v.i = x
        elif isinstance(x, float):
            v.kind = lib.PYEXEC_VALUE_DOUBLE
            v.d = x
        elif isinstance(x, np.ndarray) or hasattr(x, "__dlpack__"):
            v.kind = _TENSOR  # the library names the mismatch
            v.tensor.dim = 0
        else:
            raise InvalidArgumentError(f"input {self.index}: unsupported type {type(x).__name__}")


class Inputs:
    """A method's inputs: a slot per input, the C argument array they fill,
    and the caller's objects the library reads in place (kept until the next
    successful install, or until the inputs are cleared)."""

    __slots__ = ("method_name", "slots", "values", "count", "unplanned", "caller", "held", "kind", "all_keys")

    def __init__(self, method_name: str, infos: tuple[TensorInfo | None, ...]) -> None:
        n = len(infos)
        self.method_name = method_name
        self.count = n
        self.values = ffi.new("pyexec_value[]", max(n, 1))
        self.slots = [InputSlot(j, info, self.values[j]) for j, info in enumerate(infos)]
        self.unplanned = [s.index for s in self.slots if not s.planned]
        self.caller: list[Any] = [None] * n
        # (index, tensor, data_ptr) of each torch tensor the library reads in
        # place: check_held sees that the caller did not move it to new memory.
        self.held: list[tuple[int, Any, int]] = []
        self.kind = "numpy"  # of the first tensor in the last inputs filled
        self.all_keys = False  # every slot holds a key (all tensor inputs, from torch)

    def fill(self, inputs: Sequence[Any]) -> tuple[list[Any], list[Any]]:
        """Fills the C argument array. Returns the objects the library will read
        in place (for `installed`) and every object whose memory the array
        points to (to keep alive until the C call returns)."""
        if type(inputs) is not list and type(inputs) is not tuple and (
            isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence)
        ):
            raise InvalidArgumentError(f"inputs must be a sequence (list or tuple), got {type(inputs).__name__}")
        n = len(inputs)
        if n != self.count:
            raise InvalidArgumentError(
                f"method '{self.method_name}' takes {self.count} input{'s' if self.count != 1 else ''}, got {n}"
            )
        slots = self.slots
        tensor_cls = _dtypes.torch_tensor_class()
        if tensor_cls is not None and self.all_keys:
            # Every entry already describes these very tensors (a loop feeding
            # the same buffers): nothing to write.
            for x, s in zip(inputs, slots):
                if type(x) is not tensor_cls or s.key != (x.data_ptr(), x.shape, x.dtype) or not x.is_contiguous():
                    break
            else:
                self.kind = "torch"
                keep: list[Any] = [None] * n
                for j in self.unplanned:
                    keep[j] = inputs[j]
                return keep, list(inputs)
        keep = [None] * n
        staged: list[Any] = [None] * n
        first_kind = None
        if tensor_cls is not None and not _TORCH_CODES:
            _TORCH_CODES.update(_dtypes.torch_maps()[0])
        for s, x in zip(slots, inputs):
            if type(x) is tensor_cls and s.key is not None:
                # The same pointer, shape and dtype as the entry holds: nothing
                # to write (the common case of a loop over one input).
                if s.key == (x.data_ptr(), x.shape, x.dtype) and x.is_contiguous():
                    staged[s.index] = x
                    if not s.planned:
                        keep[s.index] = x
                    if first_kind is None:
                        first_kind = "torch"
                    continue
            if s.fill_fast(x, tensor_cls, keep, staged):
                if first_kind is None:
                    first_kind = "torch" if type(x) is tensor_cls else "numpy"
                continue
            if s.info is None:
                s.fill_scalar(x)
                continue
            d = s.fill(x)
            if first_kind is None:
                first_kind = d.kind
            staged[s.index] = d
            if not s.planned:  # read in place: keep what the library reads alive
                keep[s.index] = x if s.in_place else d.obj
        if first_kind is not None:
            self.kind = first_kind
        elif n:
            self.kind = "numpy"
        self.all_keys = n > 0 and all(s.key is not None for s in slots)
        return keep, staged

    def installed(self, keep: list[Any]) -> None:
        """Records the objects the library now reads in place. Called whatever
        the status: holding a reference too many is harmless, one too few is not."""
        self.caller = keep
        held = []
        tensor_cls = _dtypes.torch_tensor_class() if self.unplanned else None
        if tensor_cls is not None:
            for j in self.unplanned:
                x = keep[j]
                if isinstance(x, tensor_cls):
                    held.append((j, x, x.data_ptr()))
        self.held = held

    def check_held(self) -> None:
        """An input read in place must still start where it did when it was
        installed: torch's resize_ (growing), set_ and .data move a tensor to
        new memory and may free the old, which the library would then read.
        (What changes without moving, a smaller shape, stays memory the
        tensor's storage owns.)"""
        for j, x, ptr in self.held:
            if x.data_ptr() != ptr:
                raise InvalidArgumentError(
                    f"input {j} moved to new memory since it was installed (resize_, set_ or .data on the "
                    f"tensor); pass the inputs again"
                )

    def forget(self) -> None:
        """The library reads no caller memory any more (inputs cleared, method closed)."""
        self.caller = [None] * self.count
        self.held = []
