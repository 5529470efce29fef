"""Programs and their metadata: `pyexec.load`, Program, MethodMeta and
TensorInfo, read from the C library (Method, the executable instance, lives
in _method.py)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Union

from . import _dtypes
from ._errors import InvalidArgumentError, check
from ._ffi import ffi, lib

if TYPE_CHECKING:
    from ._method import Method

Source = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview]


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


def dim_order_if_not_row_major(info: TensorInfo | None) -> tuple[int, ...] | None:
    """The dim_order of a slot laid out other than row-major (channels-last, ...), else None."""
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


@dataclass(frozen=True)
class DelegateInfo:
    """One delegate a method calls (a part of the program the exporter
    handed to a backend such as XNNPACK), described from the file without
    loading the method: `Program.delegates(name)`."""

    backend: str
    """The backend id the program names ("XnnpackBackend")."""
    supported: bool
    """pyexec has a backend with this id (it then lists the node types)."""
    node_types: tuple[str, ...]
    """The node types the delegate's payload uses, sorted ("Conv2d",
    "FullyConnected"); empty when pyexec has no such backend."""
    unsupported: tuple[str, ...]
    """Those of node_types pyexec does not run here: a node type it lacks, or
    one whose nodes have quantized values. load_method names them when it
    refuses the method."""

    @property
    def runnable(self) -> bool:
        """pyexec has the backend and runs every node type the payload uses."""
        return self.supported and not self.unsupported


class ProgramHandle:
    """Owns the C program; freed when the last Python reference goes."""

    __slots__ = ("ptr", "__weakref__")

    def __init__(self, ptr: Any) -> None:
        self.ptr = ffi.gc(ptr, lib.pyexec_program_free)


class MethodHandle:
    """Owns the C method and keeps its program alive. Arrays returned without
    a copy hold this object, so the memory they show outlives the Method."""

    __slots__ = ("ptr", "program", "__weakref__")

    def __init__(self, ptr: Any, program: ProgramHandle) -> None:
        self.program = program
        self.ptr = ffi.gc(ptr, lib.pyexec_method_free)


def load(source: Source, data_path: Source | None = None) -> Program:
    """Loads an ExecuTorch program (.pte) from a path, which is memory-mapped
    (constant tensors are read from the mapping, not copied), or from bytes,
    bytearray or memoryview (copied: the caller may change or free it).

    `data_path` is the program's data file (.ptd), for a program exported
    with its weights kept apart (ExecutorchBackendConfig(external_constants=
    True), or XNNPACK weights routed to a .ptd): a path (memory-mapped) or
    bytes (copied), like `source`. The whole file is checked here; tensors
    the program marks external are then looked up in it by name when a
    method is loaded, and delegates find their named data in it first, then
    in the program.

    Raises:
        FileError: a file cannot be opened, read or mapped (the message names it).
        InvalidProgramError: the data is not a valid ExecuTorch program, or
            the data file is malformed (the message names the field) or holds
            a key the program's own named data also holds.
        UnsupportedError: the program holds something pyexec cannot run that
            is seen at load (a dtype, a non-CPU tensor, a file format version);
            missing kernels and delegates are reported by load_method.
        InvalidArgumentError: `source` or `data_path` is not a path, bytes,
            bytearray or memoryview, or a path contains a NUL character.
        OutOfMemoryError: an allocation failed.
    """
    return Program(source, data_path)


def _as_path(source: str | os.PathLike[str]) -> bytes:
    path = os.fsencode(source)
    if b"\0" in path:
        raise InvalidArgumentError(f"path must not contain NUL characters, got {os.fsdecode(path)!r}")
    return path


def _as_buffer(source: bytes | bytearray | memoryview) -> Any:
    data = source
    if isinstance(data, memoryview) and not data.c_contiguous:
        data = data.tobytes()
    return ffi.from_buffer(data)


class Program:
    """A loaded .pte file, with its data file when it has one:
    `pyexec.load(source, data_path=None)` (see there for the errors).
    Methods loaded from it keep it alive."""

    _handle: ProgramHandle | None = None
    _names: tuple[str, ...] = ()
    _source = "?"
    _data_source: str | None = None

    def __init__(self, source: Source, data_path: Source | None = None) -> None:
        if data_path is not None and not isinstance(data_path, (str, os.PathLike, bytes, bytearray, memoryview)):
            raise InvalidArgumentError(
                f"data_path must be a path, bytes, bytearray or memoryview, got {type(data_path).__name__}"
            )
        out = ffi.new("pyexec_program **")
        if isinstance(source, (str, os.PathLike)):
            path = _as_path(source)
            check(lib.pyexec_program_load_file(path, out))
            self._source = os.fsdecode(path)
        elif isinstance(source, (bytes, bytearray, memoryview)):
            buf = _as_buffer(source)
            check(lib.pyexec_program_load_buffer(buf, len(buf), out))
            self._source = f"<{type(source).__name__}, {len(buf)} bytes>"
        else:
            raise InvalidArgumentError(
                f"load() takes a path, bytes, bytearray or memoryview, got {type(source).__name__}"
            )
        handle = ProgramHandle(out[0])  # frees the program if attaching fails
        if isinstance(data_path, (str, os.PathLike)):
            dpath = _as_path(data_path)
            check(lib.pyexec_program_attach_data_file(handle.ptr, dpath))
            self._data_source = os.fsdecode(dpath)
        elif data_path is not None:
            dbuf = _as_buffer(data_path)
            check(lib.pyexec_program_attach_data_buffer(handle.ptr, dbuf, len(dbuf)))
            self._data_source = f"<{type(data_path).__name__}, {len(dbuf)} bytes>"
        self._handle = handle
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
        data = ""
        if self._data_source is not None:
            shown = self._data_source if self._data_source.startswith("<") else repr(self._data_source)
            data = f" data={shown}"
        return f"<pyexec.Program methods={list(self._names)} source={source}{data}{closed}>"

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
        check(lib.pyexec_program_input_count(p, bname, nin))
        check(lib.pyexec_program_output_count(p, bname, nout))
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
        for), as "aten::add.out" names. The parts of the method handed to a
        backend are not operators: `delegates(name)` lists them.

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

    def delegates(self, name: str = "forward") -> list[DelegateInfo]:
        """The delegates method `name` calls, in the program's order (the
        order its DelegateCall instructions index), each with its backend id,
        whether pyexec has that backend, the node types its payload uses and
        those pyexec does not run. Read without loading the method, so a
        method load_method refuses can be described.

        Raises:
            InvalidArgumentError: the program has no such method, `name` is not
                a str, or the program is closed.
            InvalidProgramError: the method's delegate table or a delegate's
                payload is malformed (the message names the delegate and
                the field).
            OutOfMemoryError: an allocation failed while reading a payload.
        """
        p = self._ptr()
        bname = self._check_name(name)
        count = ffi.new("size_t *")
        check(lib.pyexec_program_delegate_count(p, bname, count))
        needed = ffi.new("size_t *")
        unsupported = ffi.new("size_t *")
        out = []
        for i in range(count[0]):
            check(lib.pyexec_program_delegate_describe(p, bname, i, ffi.NULL, 0, needed, unsupported))
            buf = ffi.new("char[]", needed[0])
            check(lib.pyexec_program_delegate_describe(p, bname, i, buf, needed[0], needed, unsupported))
            first, *nodes = ffi.buffer(buf, needed[0] - 1)[:].decode().split("\n")[:-1]
            supported = not first.startswith("!")
            out.append(
                DelegateInfo(
                    backend=first if supported else first[1:],
                    supported=supported,
                    node_types=tuple(n.lstrip("!") for n in nodes),
                    unsupported=tuple(n[1:] for n in nodes if n.startswith("!")),
                )
            )
        return out

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
            InvalidProgramError: the method is malformed; or it has tensors
                stored in a data file and the program was loaded without one
                (the message says a data file is needed), the data file lacks
                one (naming the first missing key) or holds it with another
                dtype, rank, sizes or dim_order (naming the tensor and both
                layouts).
            OutOfMemoryError: its planned memory cannot be allocated.
        """
        from ._method import Method  # imports this module: bound at call time

        return Method(self, name, output_type)


class Runtime:
    """ExecuTorch's entry point, spelled as `executorch.runtime` spells it:
    `Runtime.get().load_program(data, data_path=...)` is
    `pyexec.load(data, data_path=...)`."""

    @staticmethod
    def get() -> Runtime:
        """The one Runtime."""
        return _RUNTIME

    def load_program(self, data: Source, data_path: Source | None = None) -> Program:
        """`pyexec.load(data, data_path)`: the program and its optional data
        file (.ptd), each a path or bytes; raises what load raises."""
        return Program(data, data_path)

    def __repr__(self) -> str:
        return "<pyexec.Runtime>"


_RUNTIME = Runtime()
