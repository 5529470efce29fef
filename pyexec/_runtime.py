"""Program, Method and their metadata over the C library."""

from __future__ import annotations

import importlib
import os
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Union

import numpy as np

from . import _dtypes
from ._errors import InvalidArgumentError, check, raise_status
from ._ffi import ffi, lib
from ._tensors import (
    as_output_type,
    check_numpy_code,
    contiguous_copy,
    describe,
    numpy_view,
    physical_layout,
    to_torch,
)

Source = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview]

_OUTPUT_TYPES = ("auto", "torch", "numpy")
_VOIDP = ffi.typeof("void *")
# cffi's backend cast, without the Python-level wrapper's type-string lookup (hot path).
_cast = getattr(ffi, "_backend", ffi).cast
_run = lib.pyexec_method_run
_NULL = ffi.NULL


@dataclass(frozen=True, repr=False)
class TensorInfo:
    """A method's tensor input or output as the program declares it
    (ExecuTorch's `TensorInfo`, with attributes rather than methods)."""

    sizes: tuple[int, ...]
    """Sizes; the upper bound when the tensor is dynamic."""
    dtype: str
    """torch's name of the dtype ("float32")."""
    dim_order: tuple[int, ...]
    """The order of the dims in memory, outermost first: (0, 1, ..., n-1) is
    row-major, (0, 2, 3, 1) channels-last."""
    nbytes: int
    """Bytes at the upper-bound sizes."""
    is_memory_planned: bool
    """The storage is part of the method's planned memory: a planned input is
    copied in by set_inputs; an unplanned one is read in place (see SPEC §3),
    and only an unplanned output can be bound with Method.set_output."""
    is_dynamic: bool
    """The sizes may change from call to call, up to `sizes`."""
    is_mutated: bool
    """For an input: the program writes it in place (what ExecuTorch's export
    records as a user-input mutation, e.g. `cache.index_copy_(0, pos, k)` on an
    argument of `forward`). Unplanned, the caller's tensor itself is updated
    (and must be writable and contiguous); planned, the method's copy is. Either
    way the new value also comes back as the output that
    `Method.output_aliases_input` maps to this input.
    For an output: always False. Every output is written by the program, so
    the flag would say nothing; which output is a mutated input's new value is
    what `Method.output_aliases_input` tells."""

    def _short(self) -> str:
        """`float32[2, 3] planned`, and the flags that are set."""
        flags = ["planned" if self.is_memory_planned else "unplanned"]
        if self.is_dynamic:
            flags.append("dynamic")
        if self.is_mutated:
            flags.append("mutated")
        if self.dim_order != tuple(range(len(self.dim_order))):
            flags.append(f"dim_order={self.dim_order}")
        return f"{self.dtype}{list(self.sizes)}" + "".join(f" {f}" for f in flags)

    def __repr__(self) -> str:
        return f"<pyexec.TensorInfo {self._short()} nbytes={self.nbytes}>"


@dataclass(frozen=True, repr=False)
class MethodMeta:
    """What a method takes and returns, read from the program without loading
    the method (ExecuTorch's `MethodMeta`, with attributes rather than methods)."""

    name: str
    inputs: tuple[TensorInfo | None, ...]
    """One entry per input: TensorInfo, or None for a non-tensor value."""
    outputs: tuple[TensorInfo | None, ...]
    """One entry per output: TensorInfo, or None for a non-tensor value."""

    def __repr__(self) -> str:
        def fmt(infos: tuple[TensorInfo | None, ...]) -> str:
            return "[" + ", ".join("non-tensor" if i is None else i._short() for i in infos) + "]"

        return f"<pyexec.MethodMeta {self.name!r} inputs={fmt(self.inputs)} outputs={fmt(self.outputs)}>"


_TORCH_CODES: dict[Any, int] = {}  # torch dtype -> code, filled once torch is in use


def _check_output_type(output_type: Any) -> None:
    if not isinstance(output_type, str) or output_type not in _OUTPUT_TYPES:
        raise InvalidArgumentError(f"output_type must be 'auto', 'torch' or 'numpy', got {output_type!r}")
    if output_type == "torch":
        try:
            importlib.import_module("torch")
        except ImportError:
            raise InvalidArgumentError(
                "output_type='torch' needs torch, which is not installed (pip install torch); "
                "'numpy' and 'auto' work without it"
            ) from None


def _check_clone(clone_outputs: Any) -> None:
    if clone_outputs is not True and clone_outputs is not False:
        raise InvalidArgumentError(f"clone_outputs must be True or False, got {clone_outputs!r}")


def _layout(info: TensorInfo | None) -> tuple[int, ...] | None:
    if info is None or info.dim_order == tuple(range(len(info.dim_order))):
        return None
    return info.dim_order


def _info(v: Any, output: bool) -> TensorInfo | None:
    """The library's description of an input (`output` False) or output."""
    if v.kind != lib.PYEXEC_VALUE_TENSOR:
        return None
    dim = v.dim
    return TensorInfo(
        sizes=tuple(v.sizes[0:dim]),
        dtype=_dtypes.NAMES.get(v.dtype, str(v.dtype)),
        dim_order=tuple(v.dim_order[0:dim]),
        nbytes=int(v.nbytes),
        is_memory_planned=bool(v.is_memory_planned),
        is_dynamic=bool(v.is_dynamic),
        # The library reports whether the program writes the value, which
        # holds for every output it computes: only inputs keep the flag.
        is_mutated=bool(v.is_mutated) and not output,
    )


class _ProgramHandle:
    """Owns the C program; freed when the last Python reference goes."""

    __slots__ = ("ptr", "__weakref__")

    def __init__(self, ptr: Any) -> None:
        self.ptr = ffi.gc(ptr, lib.pyexec_program_free)


class _MethodHandle:
    """Owns the C method and keeps its program alive. Arrays returned without
    a copy hold this object, so the memory they show outlives the Method."""

    __slots__ = ("ptr", "program", "__weakref__")

    def __init__(self, ptr: Any, program: _ProgramHandle) -> None:
        self.program = program
        self.ptr = ffi.gc(ptr, lib.pyexec_method_free)


def load(source: Source) -> Program:
    """Loads an ExecuTorch program (.pte) from a path, which is memory-mapped
    (constant tensors are read from the mapping, not copied), or from bytes,
    bytearray or memoryview (copied: the caller may change or free it).

    Raises:
        FileError: the file cannot be opened, read or mapped (the message names it).
        InvalidProgramError: the data is not a valid ExecuTorch program.
        UnsupportedError: the program holds something pyexec cannot run that
            is seen at load (a dtype, a non-CPU tensor, a file format version);
            missing kernels and delegates are reported by load_method.
        InvalidArgumentError: `source` is not a path, bytes, bytearray or
            memoryview, or the path contains a NUL character.
        OutOfMemoryError: an allocation failed.
    """
    return Program(source)


class Program:
    """A loaded .pte file: `pyexec.load(source)` (see there for the errors).
    Methods loaded from it keep it alive."""

    _handle: _ProgramHandle | None = None
    _names: tuple[str, ...] = ()
    _source = "?"

    def __init__(self, source: Source) -> None:
        out = ffi.new("pyexec_program **")
        if isinstance(source, (str, os.PathLike)):
            path = os.fsencode(source)
            if b"\0" in path:
                raise InvalidArgumentError(f"path must not contain NUL characters, got {os.fsdecode(path)!r}")
            check(lib.pyexec_program_load_file(path, out))
            self._source = os.fsdecode(path)
        elif isinstance(source, (bytes, bytearray, memoryview)):
            data = source
            if isinstance(data, memoryview) and not data.c_contiguous:
                data = data.tobytes()
            buf = ffi.from_buffer(data)
            check(lib.pyexec_program_load_buffer(buf, len(buf), out))
            self._source = f"<{type(source).__name__}, {len(buf)} bytes>"
        else:
            raise InvalidArgumentError(
                f"load() takes a path, bytes, bytearray or memoryview, got {type(source).__name__}"
            )
        self._handle = _ProgramHandle(out[0])
        p = self._handle.ptr
        names = []
        for i in range(lib.pyexec_program_method_count(p)):
            names.append(ffi.string(lib.pyexec_program_method_name(p, i)).decode())
        self._names = tuple(names)
        self._meta: dict[str, MethodMeta] = {}

    @property
    def method_names(self) -> tuple[str, ...]:
        """The names of the program's methods, in the file's order (still
        readable after close)."""
        return self._names

    def __repr__(self) -> str:
        closed = " closed" if self._handle is None else ""
        source = self._source if self._source.startswith("<") else repr(self._source)
        return f"<pyexec.Program methods={list(self._names)} source={source}{closed}>"

    def close(self) -> None:
        """Releases the program. Methods already loaded keep it alive and keep
        working; anything else on this object raises InvalidArgumentError.
        Closing twice is harmless."""
        self._handle = None

    def __enter__(self) -> Program:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

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

    def metadata(self, name: str) -> MethodMeta:
        """ExecuTorch's spelling of method_meta(name)."""
        return self.method_meta(name)

    def method_meta(self, name: str) -> MethodMeta:
        """Metadata of method `name`, read without loading the method.

        Raises:
            InvalidArgumentError: the program has no such method (the message
                lists those it has), `name` is not a str, or the program is closed.
            InvalidProgramError: the method's inputs or outputs are malformed.
            UnsupportedError: an input or output has a dtype or layout pyexec
                does not support.
        """
        p = self._ptr()
        bname = self._check_name(name)
        meta = self._meta.get(name)
        if meta is not None:
            return meta
        nin = ffi.new("size_t *")
        nout = ffi.new("size_t *")
        check(lib.pyexec_program_method_io_count(p, bname, nin, nout))
        info = ffi.new("pyexec_value_info *")
        ins = []
        for i in range(nin[0]):
            check(lib.pyexec_program_input_info(p, bname, i, info))
            ins.append(_info(info, output=False))
        outs = []
        for i in range(nout[0]):
            check(lib.pyexec_program_output_info(p, bname, i, info))
            outs.append(_info(info, output=True))
        meta = MethodMeta(name=name, inputs=tuple(ins), outputs=tuple(outs))
        self._meta[name] = meta
        return meta

    def operators(self, name: str = "forward") -> tuple[list[str], list[str]]:
        """(operators method `name` uses, those this library has no kernel
        for), as "aten::add.out" names.

        Raises:
            InvalidArgumentError: the program has no such method, `name` is not
                a str, or the program is closed.
            InvalidProgramError: the method's operator table is malformed.
        """
        bname = self._check_name(name)
        needed = ffi.new("size_t *")
        missing = ffi.new("size_t *")
        check(lib.pyexec_program_method_operators(self._ptr(), bname, ffi.NULL, 0, needed, missing))
        buf = ffi.new("char[]", needed[0])
        check(lib.pyexec_program_method_operators(self._ptr(), bname, buf, needed[0], needed, missing))
        lines = ffi.string(buf).decode().splitlines()
        return [ln.lstrip("!") for ln in lines], [ln[1:] for ln in lines if ln.startswith("!")]

    def load_method(self, name: str = "forward", output_type: str = "auto") -> Method:
        """A new, independent Method with its own planned memory, state and
        bindings (each call makes another).

        `output_type` is what execute and get_outputs return tensors as:
        "numpy" (numpy.ndarray), "torch" (torch.Tensor; needs torch), or "auto"
        (the type of the first tensor in the last inputs installed; numpy when
        there was none). Non-tensor outputs come back as int, float, bool, str
        or None whatever it says.

        Raises:
            InvalidArgumentError: the program has no such method (the message
                lists those it has), `name` is not a str, `output_type` is not
                one of the three, "torch" without torch installed, or the
                program is closed.
            UnsupportedError: the method calls operators pyexec has no kernel
                for (all listed at once) or a delegate it cannot run.
            InvalidProgramError: the method is malformed.
            OutOfMemoryError: its planned memory cannot be allocated.
        """
        return Method(self, name, output_type)


class Method:
    """An executable instance of one method of a program, made by
    `Program.load_method(name, output_type)` (see there for `output_type` and
    the errors). One call runs at a time on a Method; different Methods run in
    parallel on different threads."""

    _handle: _MethodHandle | None = None

    def __init__(self, program: Program, name: str, output_type: str = "auto") -> None:
        if not isinstance(program, Program):
            raise InvalidArgumentError(f"program must be a pyexec.Program, got {type(program).__name__}")
        _check_output_type(output_type)
        bname = program._check_name(name)
        self.meta: MethodMeta = program.method_meta(name)
        out = ffi.new("pyexec_method **")
        check(lib.pyexec_method_load(program._ptr(), bname, out))
        assert program._handle is not None
        self._handle = _MethodHandle(out[0], program._handle)
        self._m = self._handle.ptr
        self._output_type = output_type
        self._last_kind = "numpy"
        self._lock = threading.Lock()
        nin, nout = len(self.meta.inputs), len(self.meta.outputs)
        self._nin, self._nout = nin, nout
        # One reusable C argument array; sizes arrays per tensor input.
        self._values = ffi.new("pyexec_value[]", max(nin, 1))
        self._sizes: list[Any] = [ffi.new("int64_t[]", max(len(i.sizes), 1)) if i else None for i in self.meta.inputs]
        self._caller_inputs: list[Any] = [None] * nin  # objects the method reads in place
        self._bound: list[Any] = [None] * nout
        self._bound_ptr: list[tuple[int, int] | None] = [None] * nout
        self._bound_any = False  # some output is bound
        self._alias: list[int | None] = [self._query_alias(i) for i in range(nout)]
        self._alias_any = any(a is not None for a in self._alias)
        self._outs = ffi.new("pyexec_value[]", max(nout, 1))
        self._views: list[Any] = [None] * nout  # [data cdata, shape, numpy view, torch view, dtype code]
        self._static_out = [i is not None and not i.is_dynamic for i in self.meta.outputs]
        # Slots whose C fields still hold the metadata's dtype / rank / sizes, so
        # the fast input path only writes the data pointer and byte count.
        self._slot_clean = [False] * nin
        # (data_ptr, shape, dtype) of the torch tensor the C slot describes (set
        # by the fast path): a tensor with the same key needs no field writes.
        self._last_key: list[Any] = [None] * nin
        self._all_torch_keys = False  # every slot holds a key (all tensor inputs, from torch)
        self._unplanned = [i is not None and not i.is_memory_planned for i in self.meta.inputs]
        self._unplanned_idx = [j for j, u in enumerate(self._unplanned) if u]
        # (input index, object, data_ptr) of each torch tensor the method reads
        # in place: execute() checks the caller did not move it to new memory.
        self._held: list[tuple[int, Any, int]] = []
        # Prepared pyexec_method_run calls (one argument crosses cffi, not six):
        # on the installed inputs, and installing the inputs in self._values.
        self._call_installed = ffi.new("pyexec_run *", {"method": self._m, "outputs": self._outs,
                                                        "num_outputs": nout})
        self._call_inputs = ffi.new("pyexec_run *", {"method": self._m, "inputs": self._values, "num_inputs": nin,
                                                     "outputs": self._outs, "num_outputs": nout})
        # The output list of the last call when every output is a plain view of
        # the method's memory: reused while the library reports no change.
        # (kind, the uncloned outputs returned (None when built by a cloning
        # call), their numpy arrays (None when some output aliases an input),
        # torch.from_numpy or None).
        self._plain: tuple[str, list[Any] | None, list[Any] | None, Any] | None = None
        # Views were built from a description that no pyexec_method_run gave
        # (get_outputs, a rebinding): the next run must not trust "unchanged".
        self._stale = False
        # Per output aliasing a caller's torch input: (input object, its key, detached alias).
        self._alias_cache: list[Any] = [None] * nout
        self._in_codes = [_dtypes.CODE_BY_NAME[i.dtype] if i else None for i in self.meta.inputs]
        # dim_order of slots laid out other than row-major (channels-last, ...), else None.
        self._in_order = [_layout(i) for i in self.meta.inputs]
        self._out_order = [_layout(i) for i in self.meta.outputs]

    def close(self) -> None:
        """Releases the method and every reference it holds (inputs, bindings).
        Outputs already returned without a copy stay valid. Later calls raise
        InvalidArgumentError; closing twice is harmless."""
        with self._lock:
            self._handle = None
            self._m = ffi.NULL
            self._call_installed.method = ffi.NULL
            self._call_inputs.method = ffi.NULL
            self._caller_inputs = [None] * self._nin
            self._bound = [None] * self._nout
            self._bound_ptr = [None] * self._nout
            self._bound_any = False
            self._views = [None] * self._nout
            self._held = []
            self._plain = None
            self._alias_cache = [None] * self._nout

    def __enter__(self) -> Method:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def metadata(self) -> MethodMeta:
        """ExecuTorch's spelling of `meta`."""
        return self.meta

    def __repr__(self) -> str:
        meta = getattr(self, "meta", None)
        if meta is None:  # __init__ failed
            return "<pyexec.Method (not loaded)>"
        closed = " closed" if self._handle is None else ""
        return (f"<pyexec.Method {meta.name!r} inputs={len(meta.inputs)} outputs={len(meta.outputs)} "
                f"output_type={self._output_type!r}{closed}>")

    def _check_open(self) -> None:
        if self._handle is None:
            raise InvalidArgumentError(f"method '{self.meta.name}' is closed")

    # ---- metadata -------------------------------------------------------

    def _query_alias(self, index: int) -> int | None:
        j = ffi.new("size_t *")
        return int(j[0]) if lib.pyexec_method_query_alias(self._m, index, j) else None

    def output_aliases_input(self, index: int) -> int | None:
        """The input index whose value is the very same program value as output
        `index` (a mutated input's new value, or `return x`), or None. Decided
        from the program's structure; no side effects.

        Raises:
            InvalidArgumentError: `index` is not an int in range, or the method is closed.
        """
        self._check_open()
        self._check_output_index(index)
        return self._alias[index]

    def _check_output_index(self, index: Any) -> None:
        if not isinstance(index, int) or isinstance(index, bool):
            raise InvalidArgumentError(f"output index must be an int, got {type(index).__name__}")
        if not 0 <= index < self._nout:
            raise InvalidArgumentError(
                f"output index {index} is out of range (method '{self.meta.name}' has {self._nout} outputs)"
            )

    # ---- inputs ---------------------------------------------------------

    def set_inputs(self, inputs: Sequence[Any]) -> None:
        """Installs all inputs at once: a list or tuple with one torch.Tensor,
        numpy.ndarray or object with `__dlpack__` per tensor input and the
        exported value (int, float, bool, None) per other input. A planned input
        is copied; an unplanned one is read in place, and the method keeps a
        reference to it until the next successful set_inputs.

        Raises:
            InvalidArgumentError: `inputs` is not a list or tuple; the count, a
                dtype (no casting), rank or size does not match (each named with
                both sides); a tensor is not on the CPU; an unplanned input the
                program writes is read-only or not laid out as it must be; an
                unplanned input overlaps a bound output; a non-tensor input is
                not the value the program was exported with; or the method is
                closed. After a failure nothing is installed, and the method
                refuses to run until a complete valid set is.
            UnsupportedError: an input slot holds a kind of value that cannot be set.
        """
        with self._lock:
            self._check_open()
            self._set_inputs_locked(inputs)

    def _invalidate_inputs(self) -> None:
        lib.pyexec_method_set_inputs(self._m, ffi.NULL, 0) if self._nin else None

    def _fill_or_invalidate(self, inputs: Sequence[Any]) -> tuple[list[Any], list[Any]]:
        try:
            return self._fill_inputs(inputs)
        except BaseException:
            self._invalidate_inputs()
            raise

    def _set_inputs_locked(self, inputs: Sequence[Any]) -> None:
        keep, staged = self._fill_or_invalidate(inputs)
        st = lib.pyexec_method_set_inputs(self._m, self._values, self._nin)
        del staged  # planned inputs (and their staged copies) were copied by the call
        self._installed(keep)
        if st:
            raise_status(st)

    def _installed(self, keep: list[Any]) -> None:
        """Records the objects the library now reads in place. Called whatever
        the status: holding a reference too many is harmless, one too few is not."""
        old = self._caller_inputs
        self._caller_inputs = keep
        if self._alias_any and self._plain is not None:
            for a in self._alias:  # the list holds aliases of the previous input objects
                if a is not None and keep[a] is not old[a]:
                    self._plain = None
                    break
        held = []
        tensor_cls = _dtypes.torch_tensor_class() if self._unplanned_idx else None
        if tensor_cls is not None:
            for j in self._unplanned_idx:
                x = keep[j]
                if isinstance(x, tensor_cls):
                    held.append((j, x, x.data_ptr()))
        self._held = held

    def _check_held(self) -> None:
        """An input read in place must still start where it did when it was
        installed: torch's resize_ (growing), set_ and .data move a tensor to
        new memory and may free the old, which the library would then read.
        (What changes without moving, a smaller shape, stays memory the
        tensor's storage owns.)"""
        for j, x, ptr in self._held:
            if x.data_ptr() != ptr:
                raise InvalidArgumentError(
                    f"input {j} moved to new memory since it was installed (resize_, set_ or .data on the "
                    f"tensor); pass the inputs again"
                )

    def _fill_inputs(self, inputs: Sequence[Any]) -> tuple[list[Any], list[Any]]:
        """Fills the C argument array. Returns the objects the method will read
        in place (kept until the next successful set_inputs) and every object
        whose memory the array points to (kept until the C call returns)."""
        if type(inputs) is not list and type(inputs) is not tuple and (
            isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence)
        ):
            raise InvalidArgumentError(f"inputs must be a sequence (list or tuple), got {type(inputs).__name__}")
        n = len(inputs)
        if n != self._nin:
            raise InvalidArgumentError(
                f"method '{self.meta.name}' takes {self._nin} input{'s' if self._nin != 1 else ''}, got {n}"
            )
        tensor_cls = _dtypes.torch_tensor_class()
        if tensor_cls is not None and self._all_torch_keys:
            # Every slot already describes these very tensors (a loop feeding
            # the same buffers): no field to write.
            for x, key in zip(inputs, self._last_key):
                if type(x) is not tensor_cls or key != (x.data_ptr(), x.shape, x.dtype) or not x.is_contiguous():
                    break
            else:
                self._last_kind = "torch"
                held: list[Any] = [None] * n
                for j in self._unplanned_idx:
                    held[j] = inputs[j]
                return held, list(inputs)
        keep: list[Any] = [None] * n
        staged: list[Any] = [None] * n
        first_kind = None
        if tensor_cls is not None and not _TORCH_CODES:
            _TORCH_CODES.update(_dtypes.torch_maps()[0])
        ndarray = np.ndarray
        infos = self.meta.inputs
        last_key = self._last_key
        unplanned = self._unplanned
        for j in range(n):
            x = inputs[j]
            info = infos[j]
            if type(x) is tensor_cls:
                # The same pointer, shape and dtype as the slot already holds:
                # nothing to write (the common case of a loop over one input).
                if last_key[j] == (x.data_ptr(), x.shape, x.dtype) and x.is_contiguous():
                    staged[j] = x
                    if unplanned[j]:
                        keep[j] = x
                    if first_kind is None:
                        first_kind = "torch"
                    continue
            v = self._values[j]
            if info is not None and self._fast_input(j, x, info, v, tensor_cls, ndarray, keep, staged):
                if first_kind is None:
                    first_kind = "torch" if type(x) is tensor_cls else "numpy"
                continue
            self._slot_clean[j] = False
            last_key[j] = None
            if info is None:
                self._fill_scalar(j, x, v)
                continue
            d = describe(x, f"input {j}")
            if first_kind is None:
                first_kind = d.kind
            if not d.cpu:
                raise InvalidArgumentError(f"input {j} is on device {x.device}; only CPU tensors are supported")
            if d.code is None:
                raise InvalidArgumentError(f"input {j} has dtype {info.dtype}, tensor has {d.dtype_name}")
            shape = d.shape
            order = self._in_order[j]
            in_place = info.is_mutated and not info.is_memory_planned
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
                    raise InvalidArgumentError(
                        f"input {j} must be contiguous: the program writes it in place"
                    )
                d = contiguous_copy(d)
            if in_place and not d.writable:
                raise InvalidArgumentError(f"input {j} is read-only, but the program writes it in place")
            if len(shape) > len(info.sizes) or len(shape) > 16:
                raise InvalidArgumentError(
                    f"input {j} has rank {len(info.sizes)}, tensor has rank {len(shape)}"
                )
            sizes = self._sizes[j]
            sizes[0 : len(shape)] = shape
            v.kind = lib.PYEXEC_VALUE_TENSOR
            t = v.tensor
            t.dtype = d.code
            t.dim = len(shape)
            t.sizes = sizes
            t.data = ffi.cast("void *", d.ptr) if d.kind == "torch" else d.ptr
            t.nbytes = d.nbytes
            staged[j] = d
            if not info.is_memory_planned:  # read in place: keep what the method reads alive
                keep[j] = x if in_place else d.obj
        if first_kind is not None:
            self._last_kind = first_kind
        elif n:
            self._last_kind = "numpy"
        self._all_torch_keys = n > 0 and None not in last_key
        return keep, staged

    def _fast_input(
        self, j: int, x: Any, info: TensorInfo, v: Any, tensor_cls: Any, ndarray: Any, keep: list[Any],
        staged: list[Any],
    ) -> bool:
        """The common case with the fewest Python operations: a contiguous CPU
        torch tensor or numpy array of the slot's dtype and (static) shape.
        Returns False to let the general path handle (and explain) anything else."""
        code = self._in_codes[j]
        if self._in_order[j] is not None:
            return False
        if type(x) is tensor_cls:
            if _TORCH_CODES.get(x.dtype) != code or not x.is_cpu or not x.is_contiguous():
                return False
            shape = x.shape
            ptr = x.data_ptr()
            data: Any = _cast(_VOIDP, ptr)
        elif type(x) is ndarray:
            if _dtypes.CODE_BY_NUMPY.get(x.dtype) != code or not x.flags.c_contiguous or x.size == 0:
                return False
            if info.is_mutated and not info.is_memory_planned and not x.flags.writeable:
                return False
            shape = x.shape
            ptr = 0
            data = ffi.from_buffer(x)
        else:
            return False
        if not self._slot_clean[j]:
            v.kind = lib.PYEXEC_VALUE_TENSOR
            t = v.tensor
            t.dtype = code
            t.dim = len(info.sizes)
            t.sizes = self._sizes[j]
            self._sizes[j][0 : len(info.sizes)] = info.sizes
            self._slot_clean[j] = True
        if shape != info.sizes:
            if not info.is_dynamic or len(shape) != len(info.sizes):
                return False
            self._sizes[j][0 : len(shape)] = shape
            self._slot_clean[j] = False  # sizes differ from the metadata now
        t = v.tensor
        t.data = data
        t.nbytes = x.nbytes
        staged[j] = data
        # What the slot now holds, for the next call's shortcut.
        self._last_key[j] = (ptr, shape, x.dtype) if type(x) is tensor_cls else None
        if not info.is_memory_planned:
            keep[j] = x
        return True

    def _fill_scalar(self, j: int, x: Any, v: Any) -> None:
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
        elif isinstance(x, (np.ndarray,)) or hasattr(x, "__dlpack__"):
            v.kind = lib.PYEXEC_VALUE_TENSOR  # the library names the mismatch
            v.tensor.dim = 0
        else:
            raise InvalidArgumentError(f"input {j}: unsupported type {type(x).__name__}")

    # ---- outputs --------------------------------------------------------

    def set_output(self, tensor: Any, index: int) -> None:
        """Binds unplanned output `index` to `tensor` (None unbinds): later calls
        write that output straight into it and return it (a view of its first
        elements when a dynamic output is smaller), whatever clone_outputs says.
        The method keeps a reference to `tensor` until it is unbound or replaced.

        Raises:
            InvalidArgumentError: `index` is not an int in range; the output is
                memory-planned, listed at more than one index, an input, or not
                contiguous in its dim_order; `tensor` has another dtype, is not
                on the CPU, is not contiguous, is read-only, is smaller than the
                output's upper bound, or overlaps another bound output or an
                installed unplanned input; or the method is closed.
        """
        with self._lock:
            self._check_open()
            self._check_output_index(index)
            st = lib.pyexec_method_check_bindable(self._m, index)
            if st:
                raise_status(st)
            if tensor is None:
                check(lib.pyexec_method_set_output_ptr(self._m, index, ffi.NULL, 0))
                self._bound[index] = None
                self._bound_ptr[index] = None
                self._bound_any = any(p is not None for p in self._bound_ptr)
                self._views[index] = None
                self._plain = None
                self._stale = True
                return
            self._bind_locked(tensor, index)
            self._views[index] = None
            self._plain = None
            self._stale = True

    def _bind_locked(self, tensor: Any, index: int) -> None:
        """Checks `tensor` against output `index` and hands its memory to the
        library (which checks size, alignment and overlaps)."""
        info = self.meta.outputs[index]
        assert info is not None
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
        if d.obj is not tensor:  # read through DLPack: bind the array numpy sees
            tensor = d.obj
        ptr = ffi.cast("void *", d.ptr) if d.kind == "torch" else d.ptr
        check(lib.pyexec_method_set_output_ptr(self._m, index, ptr, d.nbytes))
        self._bound[index] = tensor
        self._bound_ptr[index] = (int(ffi.cast("uintptr_t", ptr)), d.nbytes)
        self._bound_any = True

    def _release_changed_bindings(self) -> list[int]:
        """The caller can swap a bound tensor's memory (torch resize_, set_ or
        .data; numpy resize). Bindings whose pointer, size or layout changed
        are released in the library (which then holds no stale pointer) and
        returned, to be bound again, with every check, once the inputs are in."""
        torch = _dtypes.torch_module()
        changed = []
        for i, t in enumerate(self._bound):
            if t is None:
                continue
            if torch is not None and isinstance(t, torch.Tensor):
                same = t.is_cpu and (t.data_ptr(), t.nbytes) == self._bound_ptr[i] and t.is_contiguous()
            else:
                same = (t.__array_interface__["data"][0], t.nbytes) == self._bound_ptr[i] and t.flags.c_contiguous
            if not same:
                self._bound_ptr[i] = (0, -1)  # unusable until bound again
                lib.pyexec_method_set_output_ptr(self._m, i, ffi.NULL, 0)
                changed.append(i)
        return changed

    def execute(self, inputs: Sequence[Any] | None = None, clone_outputs: bool = True) -> list[Any]:
        """Runs the method and returns its outputs, one per output slot.

        `inputs`: installed first, as set_inputs does; None runs on the inputs
        installed before. `clone_outputs`: True, each tensor output is a copy
        the caller owns; False, it shares the method's memory, which the next
        execute overwrites (and which stays valid while the output lives, even
        after the Method is gone). A bound output (set_output) is always its
        bound tensor. Tensors come back as the load_method `output_type` says.

        Raises:
            InvalidArgumentError: as set_inputs for bad `inputs`; "input 0 has
                not been set" when no complete set was installed; an input read
                in place moved to new memory since (torch resize_, set_, .data);
                `clone_outputs` is not a bool; or the method is closed.
            ExecutionError: a kernel failed while running (an index out of
                range, a shape the inputs make impossible, ...).
            UnsupportedError: a bfloat16 output asked for as numpy (which has
                no bfloat16); use output_type="torch".
        """
        if clone_outputs is not True and clone_outputs is not False:
            _check_clone(clone_outputs)
        with self._lock:
            if self._handle is None:
                self._check_open()
            if self._bound_any:
                changed = self._release_changed_bindings()
                if changed:
                    return self._execute_rebinding(inputs, changed, clone_outputs)
            # One library call installs the inputs, runs and describes the outputs.
            if inputs is None:
                if self._held:
                    self._check_held()
                call = self._call_installed
                st = _run(call)
            else:
                keep, staged = self._fill_or_invalidate(inputs)
                call = self._call_inputs
                st = _run(call)
                del staged
                self._installed(keep)
            if st:
                raise_status(st)
            if call.outputs_changed or self._stale:
                self._stale = False
                return self._outputs_locked(clone_outputs, True)
            plain = self._plain
            if plain is not None and not clone_outputs and plain[1] is not None and plain[0] == (
                self._last_kind if self._output_type == "auto" else self._output_type
            ):
                return plain[1].copy()  # the views of the previous call show this call's outputs
            return self._outputs_locked(clone_outputs, False)

    def _execute_rebinding(self, inputs: Sequence[Any] | None, changed: list[int], clone: bool) -> list[Any]:
        """execute when bound tensors changed their memory: the inputs go in
        first, as binding checks overlaps with them."""
        if inputs is not None:
            self._set_inputs_locked(inputs)
        elif self._held:
            self._check_held()
        for i in changed:
            self._bind_locked(self._bound[i], i)
        st = lib.pyexec_method_execute(self._m)
        if st:
            raise_status(st)
        check(lib.pyexec_method_get_outputs(self._m, self._outs, self._nout))
        self._stale = True
        return self._outputs_locked(clone, True)

    def get_outputs(self, clone_outputs: bool = True) -> list[Any]:
        """The outputs of the last execute again, as execute returns them
        (before any execute: the method's initial, zero-filled memory).

        Raises:
            InvalidArgumentError: `clone_outputs` is not a bool, or the method is closed.
            UnsupportedError: a bfloat16 output asked for as numpy.
        """
        _check_clone(clone_outputs)
        with self._lock:
            self._check_open()
            check(lib.pyexec_method_get_outputs(self._m, self._outs, self._nout))
            self._stale = True
            return self._outputs_locked(clone_outputs, True)

    def _kind(self) -> str:
        return self._last_kind if self._output_type == "auto" else self._output_type

    def _outputs_locked(self, clone: bool, changed: bool) -> list[Any]:
        """The outputs `self._outs` describes. `changed` False: the library
        reports every description equal to the previous call's, so views built
        then still show the right memory at the right shape."""
        kind = self._kind()
        plain = self._plain
        if plain is not None and not changed and plain[0] == kind and plain[2 if clone else 1] is not None:
            if not clone:
                return list(plain[1] or ())
            arrays: list[Any] = plain[2] or []
            if kind == "torch" and plain[3] is not None:  # a numpy copy wrapped by torch: ~3x cheaper than clone()
                from_numpy = plain[3]
                return [from_numpy(a.copy()) for a in arrays]
            if kind == "torch":
                return [to_torch(c[2].copy(), c[4]) for c in self._views]
            return [a.copy() for a in arrays]
        result: list[Any] = []
        outs = self._outs
        all_plain = True  # the list can be returned again while nothing changes
        views_only = True  # ... and every entry is a view of the method's memory
        for i in range(self._nout):
            a = self._alias[i]
            if a is not None and self._caller_inputs[a] is not None:
                x = self._caller_inputs[a]
                result.append(self._alias_output(i, x, kind, clone))
                # A torch input read in place is re-checked by every execute():
                # its detached alias stays valid until other inputs come in.
                all_plain = all_plain and kind == "torch" and type(x) is _dtypes.torch_tensor_class()
                views_only = False
                continue
            ov = outs[i]
            if ov.kind != lib.PYEXEC_VALUE_TENSOR:
                result.append(self._scalar_output(ov))
                all_plain = False
                continue
            cached = self._views[i]
            bound = self._bound[i]
            if cached is not None and not changed:
                shape = cached[1]
            else:
                t = ov.tensor
                if cached is not None and self._static_out[i] and cached[0] == t.data:
                    shape = cached[1]
                else:
                    shape = tuple(t.sizes[0 : t.dim])
            if bound is not None:
                result.append(self._bound_output(bound, shape))
                all_plain = False
                continue
            if cached is None or (changed and (cached[0] != ov.tensor.data or cached[1] != shape)):
                t = ov.tensor
                code = t.dtype
                if kind == "numpy":
                    check_numpy_code(code, f"output {i}")
                nv = numpy_view(int(ffi.cast("uintptr_t", t.data)), code, shape, self._handle, self._out_order[i])
                cached = [t.data, shape, nv, None, code]
                self._views[i] = cached
            if kind == "torch":
                if clone:
                    result.append(to_torch(cached[2].copy(), cached[4]))
                    continue
                tv = cached[3]
                if tv is None:
                    tv = cached[3] = to_torch(cached[2], cached[4])
                result.append(tv)
            else:
                check_numpy_code(cached[4], f"output {i}")
                result.append(cached[2].copy() if clone else cached[2])
        if all_plain and (views_only or not clone):
            views = self._views
            # torch.from_numpy when no output is bfloat16 (which needs a view)
            direct = views_only and kind == "torch" and all(c[4] != 15 for c in views)
            from_numpy = _dtypes.torch_module().from_numpy if direct else None
            self._plain = (
                kind, None if clone else list(result), [c[2] for c in views] if views_only else None, from_numpy
            )
        else:
            self._plain = None
        return result

    @staticmethod
    def _scalar_output(ov: Any) -> Any:
        k = ov.kind
        if k == lib.PYEXEC_VALUE_INT:
            return int(ov.i)
        if k == lib.PYEXEC_VALUE_DOUBLE:
            return float(ov.d)
        if k == lib.PYEXEC_VALUE_BOOL:
            return bool(ov.b)
        if k == lib.PYEXEC_VALUE_STRING:
            return ffi.unpack(ov.string.data, ov.string.size).decode("utf-8", "replace")
        return None

    @staticmethod
    def _bound_output(bound: Any, shape: tuple[int, ...]) -> Any:
        if tuple(bound.shape) == shape:
            return bound
        numel = 1
        for s in shape:
            numel *= s
        return bound.reshape(-1)[:numel].reshape(shape)

    def _alias_output(self, i: int, x: Any, kind: str, clone: bool) -> Any:
        torch = _dtypes.torch_module()
        if kind == "torch" and torch is not None and type(x) is torch.Tensor:
            if clone:
                return x.detach().clone()
            # The detached alias of the previous call still shows x while x
            # keeps the storage and shape it had then.
            key = (x.data_ptr(), x.shape, x.dtype)
            c = self._alias_cache[i]
            if c is not None and c[0] is x and c[1] == key:
                return c[2]
            y = x.detach()
            self._alias_cache[i] = (x, key, y)
            return y
        if torch is not None and isinstance(x, torch.Tensor):
            y = x.detach().clone() if clone else x.detach()
        else:
            y = np.array(x, copy=True) if clone else np.asarray(x).view()
        return as_output_type(y, kind)


class Runtime:
    """ExecuTorch's entry point, spelled as `executorch.runtime` spells it:
    `Runtime.get().load_program(data)` is `pyexec.load(data)`."""

    @staticmethod
    def get() -> Runtime:
        """The one Runtime."""
        return _RUNTIME

    def load_program(self, data: Source) -> Program:
        """`pyexec.load(data)`: a path or bytes; raises what load raises."""
        return Program(data)

    def __repr__(self) -> str:
        return "<pyexec.Runtime>"


_RUNTIME = Runtime()
