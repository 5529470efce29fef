"""A Method's outputs, in small classes: OutputView (numpy / torch objects
over the memory one output description points to), Binding (a caller's tensor
bound to an output, and the memory it had then), LastOutputs (the list a run
returned, kept while it can be returned again) and Outputs (the descriptions
the library writes, with the views, bindings and last list built over them).

Whether the output descriptions changed since the previous run is the
library's fact (pyexec_run.outputs_changed), which Outputs only reads. What
Python itself decides (which objects are bound, which caller objects an
output aliases, numpy or torch) it checks itself.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from . import _dtypes
from ._errors import InvalidArgumentError
from ._ffi import ffi, lib
from ._meta import TensorInfo, dim_order_if_not_row_major
from ._tensors import as_output_type, check_numpy_code, describe, numpy_view, to_torch

_TENSOR = lib.PYEXEC_VALUE_TENSOR


class OutputView:
    """numpy / torch objects over the memory one output description points to
    (the method's storage), at the shape it gave."""

    __slots__ = ("data", "shape", "array", "tensor", "code")

    def __init__(self, data: Any, shape: tuple[int, ...], array: np.ndarray, code: int) -> None:
        self.data = data  # the description's data pointer (cdata)
        self.shape = shape
        self.array = array
        self.tensor: Any = None  # torch view of `array`, made when first asked for
        self.code = code

    def torch(self) -> Any:
        t = self.tensor
        if t is None:
            t = self.tensor = to_torch(self.array, self.code)
        return t


class Binding:
    """A caller's tensor bound to an output (Method.set_output): the checks
    that cannot change are made once, here; `moved` re-checks only what the
    caller can change (the storage pointer, size and layout)."""

    __slots__ = ("tensor", "pointer", "ptr", "nbytes")

    def __init__(self, tensor: Any, index: int, info: TensorInfo) -> None:
        d = describe(tensor, f"output {index}")
        if d.code is None or _dtypes.NAMES[d.code] != info.dtype:
            raise InvalidArgumentError(f"output {index} has dtype {info.dtype}, tensor has {d.dtype_name}")
        if not d.cpu:
            raise InvalidArgumentError(
                f"output {index}: tensor is on device {tensor.device}; only CPU tensors can be bound"
            )
        if not d.contiguous:
            raise InvalidArgumentError(f"output {index}: tensor is not contiguous")
        if not d.writable:
            raise InvalidArgumentError(f"output {index}: tensor is read-only")
        # Read through DLPack: bind the array numpy sees.
        self.tensor = d.obj
        self.pointer = ffi.cast("void *", d.ptr) if d.kind == "torch" else d.ptr  # for the library
        self.ptr = int(ffi.cast("uintptr_t", self.pointer))
        self.nbytes = d.nbytes

    def moved(self, torch: Any) -> bool:
        """The caller swapped the tensor's memory since it was bound (torch
        resize_, set_ or .data; numpy resize), or made it non-contiguous."""
        t = self.tensor
        if torch is not None and isinstance(t, torch.Tensor):
            return not (t.is_cpu and t.data_ptr() == self.ptr and t.nbytes == self.nbytes and t.is_contiguous())
        return t.__array_interface__["data"][0] != self.ptr or t.nbytes != self.nbytes or not t.flags.c_contiguous

    def output(self, shape: tuple[int, ...]) -> Any:
        """The tensor itself, or a view of its first elements at a smaller written shape."""
        bound = self.tensor
        if tuple(bound.shape) == shape:
            return bound
        numel = 1
        for s in shape:
            numel *= s
        return bound.reshape(-1)[:numel].reshape(shape)


class LastOutputs:
    """The list a run returned when every output was a plain view of the
    method's memory (or the detached alias of a torch input read in place):
    returned again, or cloned from, while the library reports the
    descriptions unchanged and the same inputs are aliased."""

    __slots__ = ("kind", "uncloned", "arrays", "codes", "from_numpy", "aliased")

    def __init__(
        self, kind: str, uncloned: list[Any] | None, views: list[OutputView] | None, from_numpy: Any,
        aliased: tuple[tuple[int, Any], ...],
    ) -> None:
        self.kind = kind
        self.uncloned = uncloned  # the outputs returned; None when built by a cloning call
        # The numpy arrays and dtype codes of the outputs; None when some output aliases an input.
        self.arrays = [v.array for v in views] if views is not None else None
        self.codes = [v.code for v in views] if views is not None else None
        self.from_numpy = from_numpy  # torch.from_numpy when no output needs a dtype view, else None
        self.aliased = aliased  # (input index, caller object) of each output aliasing an input


class Outputs:
    """A method's outputs: the descriptions the library writes (`descs`, a
    pyexec_value per output), the views and bindings built over them, and the
    list the last run returned."""

    __slots__ = (
        "count", "descs", "owner", "views", "bindings", "bound_any", "alias", "aliases", "alias_cache", "static",
        "order", "last",
    )

    def __init__(self, infos: tuple[TensorInfo | None, ...], alias: list[int | None], owner: Any) -> None:
        n = len(infos)
        self.count = n
        self.descs = ffi.new("pyexec_value[]", max(n, 1))
        self.owner = owner  # kept alive by every view: the memory they show
        self.views: list[OutputView | None] = [None] * n
        self.bindings: list[Binding | None] = [None] * n
        self.bound_any = False
        self.alias = alias  # the input each output is, or None
        self.aliases = [(i, a) for i, a in enumerate(alias) if a is not None]
        # Per output aliasing a caller's torch input: (input object, its key, detached alias).
        self.alias_cache: list[Any] = [None] * n
        self.static = [i is not None and not i.is_dynamic for i in infos]
        self.order = [dim_order_if_not_row_major(i) for i in infos]
        self.last: LastOutputs | None = None

    def bind(self, index: int, binding: Binding | None) -> None:
        """Records output `index`'s binding (None: unbound); the view and list
        built for the object returned before are dropped."""
        self.bindings[index] = binding
        self.bound_any = any(b is not None for b in self.bindings)
        self.views[index] = None
        self.last = None

    def forget(self) -> None:
        n = self.count
        self.views = [None] * n
        self.bindings = [None] * n
        self.bound_any = False
        self.alias_cache = [None] * n
        self.last = None

    def collect(self, changed: int, clone: bool, kind: str, caller: list[Any]) -> list[Any]:
        """The outputs after a run that described them into `descs`. `changed`
        is the library's outputs_changed: 0 says every description equals the
        previous run's, so what was built then still shows the right memory at
        the right shape."""
        last = self.last
        if last is not None and not changed and last.kind == kind and (
            not last.aliased or all(caller[j] is x for j, x in last.aliased)
        ):
            if not clone:
                if last.uncloned is not None:
                    return last.uncloned.copy()
            elif last.arrays is not None:
                arrays = last.arrays
                if last.from_numpy is not None:  # a numpy copy wrapped by torch: ~3x cheaper than clone()
                    from_numpy = last.from_numpy
                    return [from_numpy(a.copy("K")) for a in arrays]
                if kind == "torch":
                    return [to_torch(a.copy("K"), code) for a, code in zip(arrays, last.codes or ())]
                return [a.copy("K") for a in arrays]
        return self.build(changed, clone, kind, caller, self.views, True)

    def described(self, clone: bool, kind: str, caller: list[Any]) -> list[Any]:
        """The outputs `descs` describes, read outside a run (get_outputs):
        views are reused where they show the same memory at the same shape,
        but what is built here is not kept for runs, whose reuse follows the
        library's report against the previous run alone."""
        return self.build(True, clone, kind, caller, list(self.views), False)

    def build(
        self, changed: int, clone: bool, kind: str, caller: list[Any], views: list[OutputView | None], keep: bool
    ) -> list[Any]:
        result: list[Any] = []
        descs = self.descs
        alias = self.alias
        plain = True  # the list can be returned again while nothing changes
        views_only = True  # ... and every entry is a view of the method's memory
        for i in range(self.count):
            a = alias[i]
            if a is not None and caller[a] is not None:
                x = caller[a]
                result.append(self._alias_output(i, x, kind, clone))
                # A torch input read in place is re-checked by every execute():
                # its detached alias stays valid while the same object is installed.
                plain = plain and kind == "torch" and type(x) is _dtypes.torch_tensor_class()
                views_only = False
                continue
            desc = descs[i]
            if desc.kind != _TENSOR:
                result.append(_scalar(desc))
                plain = False
                continue
            view = views[i]
            if view is not None and not changed:
                shape = view.shape
            else:
                t = desc.tensor
                if view is not None and self.static[i] and view.data == t.data:
                    shape = view.shape
                else:
                    shape = tuple(t.sizes[0 : t.dim])
            binding = self.bindings[i]
            if binding is not None:
                result.append(binding.output(shape))
                plain = False
                continue
            if view is None or (changed and (view.data != desc.tensor.data or view.shape != shape)):
                t = desc.tensor
                code = t.dtype
                if kind == "numpy":
                    check_numpy_code(code, f"output {i}")
                array = numpy_view(int(ffi.cast("uintptr_t", t.data)), code, shape, self.owner, self.order[i])
                view = views[i] = OutputView(t.data, shape, array, code)
            if kind == "torch":
                result.append(to_torch(view.array.copy("K"), view.code) if clone else view.torch())
            else:
                check_numpy_code(view.code, f"output {i}")
                result.append(view.array.copy("K") if clone else view.array)
        if keep:
            self.last = self._last(kind, clone, result, plain, views_only, caller)
        return result

    def _last(
        self, kind: str, clone: bool, result: list[Any], plain: bool, views_only: bool, caller: list[Any]
    ) -> LastOutputs | None:
        if not plain or not (views_only or not clone):
            return None
        views = [v for v in self.views if v is not None] if views_only else None
        # torch.from_numpy when no output needs a dtype view (bfloat16 does)
        direct = views is not None and kind == "torch" and all(v.code not in _dtypes.NOT_IN_NUMPY for v in views)
        from_numpy = _dtypes.torch_module().from_numpy if direct else None
        aliased = tuple((a, caller[a]) for _, a in self.aliases)
        return LastOutputs(kind, None if clone else list(result), views, from_numpy, aliased)

    def _alias_output(self, i: int, x: Any, kind: str, clone: bool) -> Any:
        """Output `i` when it is input `x` read in place: a copy, or a new
        object sharing x's memory (for torch a detached alias)."""
        torch = _dtypes.torch_module()
        if kind == "torch" and torch is not None and type(x) is torch.Tensor:
            if clone:
                return x.detach().clone()
            # The detached alias of the previous call still shows x while x
            # keeps the storage and shape it had then.
            key = (x.data_ptr(), x.shape, x.dtype)
            c = self.alias_cache[i]
            if c is not None and c[0] is x and c[1] == key:
                return c[2]
            y = x.detach()
            self.alias_cache[i] = (x, key, y)
            return y
        if torch is not None and isinstance(x, torch.Tensor):
            y = x.detach().clone() if clone else x.detach()
        else:
            y = np.array(x, copy=True) if clone else np.asarray(x).view()
        return as_output_type(y, kind)


def _scalar(desc: Any) -> Any:
    """A non-tensor output's value."""
    k = desc.kind
    if k == lib.PYEXEC_VALUE_INT:
        return int(desc.i)
    if k == lib.PYEXEC_VALUE_DOUBLE:
        return float(desc.d)
    if k == lib.PYEXEC_VALUE_BOOL:
        return bool(desc.b)
    if k == lib.PYEXEC_VALUE_STRING:
        return ffi.unpack(desc.string.data, desc.string.size).decode("utf-8", "replace")
    return None
