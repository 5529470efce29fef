"""Programs and their metadata: `pyexec.load`, Program, MethodMeta and
TensorInfo, read from the C library (Method, the executable instance, lives
in _method.py)."""

from __future__ import annotations

import os
from typing import Any, Protocol, Union

import numpy as np

from . import _dtypes
from ._bundled import BundledTestCase, BundledTestSuite
from ._errors import InvalidArgumentError, UnsupportedError, check
from ._ffi import ffi, lib
from ._handles import ProgramBase, ProgramHandle, origin_of, pickle_state, verified
from ._meta import DelegateInfo, MethodMeta, MethodNames, TensorInfo, read_attributes, tensor_info
from ._method import Method
from ._recording import Recorder


class Readable(Protocol):
    """A file-like object: anything with `read()` returning bytes (an open
    binary file, io.BytesIO)."""

    def read(self, /) -> bytes: ...


Source = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview, Readable]


def load(source: Source, data_path: Source | None = None) -> Program:
    """Loads an ExecuTorch program (.pte) from a path, which is memory-mapped
    (constant tensors are read from the mapping, not copied), from bytes,
    bytearray or memoryview (copied: the caller may change or free it), or
    from a file-like object (anything with `read()`, read to its end).

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
            bytearray, memoryview or file-like object, a file-like object's
            read() returned something other than bytes, or a path contains a
            NUL character.
        OutOfMemoryError: an allocation failed.
    """
    return Program(source, data_path)


def _read_if_file_like(what: str, source: Any) -> Any:
    """The bytes of a file-like object (read to its end), else `source`."""
    if isinstance(source, (str, os.PathLike, bytes, bytearray, memoryview)) or not hasattr(source, "read"):
        return source
    data = source.read()
    if not isinstance(data, (bytes, bytearray, memoryview)):
        raise InvalidArgumentError(
            f"{what}: a file-like object's read() must return bytes, got {type(data).__name__} "
            "(open the file in binary mode)"
        )
    return data


def _as_path(source: str | os.PathLike[str]) -> bytes:
    path = os.fsencode(source)
    if b"\0" in path:
        raise InvalidArgumentError(f"path must not contain NUL characters, got {os.fsdecode(path)!r}")
    return path


def _as_bytes(source: bytes | bytearray | memoryview) -> bytes:
    if type(source) is bytes:
        return source
    return source.tobytes() if isinstance(source, memoryview) else bytes(source)


def _as_buffer(source: bytes | bytearray | memoryview) -> Any:
    data = source
    if isinstance(data, memoryview) and not data.c_contiguous:
        data = data.tobytes()
    return ffi.from_buffer(data)


class Program(ProgramBase):
    """A loaded .pte file, with its data file when it has one:
    `pyexec.load(source, data_path=None)` (see there for the errors).
    Methods loaded from it keep it alive.

    A Program pickles as its source, and unpickling loads it again: bytes
    as the bytes (a `bytes` source is kept by the Program, not copied; a
    bytearray or memoryview is snapshot as bytes at load), a path as its
    absolute path plus the file's sha256. The data file goes the same way.
    Pickling a path-loaded program refuses (FileError) a file replaced or
    modified since the load; unpickling hashes the file again and refuses
    (FileError, naming the path) one that is missing or whose content
    changed, so the other process never runs another model than this one.
    Pickling a closed Program raises InvalidArgumentError."""

    _handle: ProgramHandle | None = None
    _names: tuple[str, ...] = ()
    _source = "?"
    _data_source: str | None = None

    def __init__(self, source: Source, data_path: Source | None = None) -> None:
        source = _read_if_file_like("source", source)
        if data_path is not None:
            data_path = _read_if_file_like("data_path", data_path)
        if data_path is not None and not isinstance(data_path, (str, os.PathLike, bytes, bytearray, memoryview)):
            raise InvalidArgumentError(
                f"data_path must be a path, bytes, bytearray, memoryview or file-like object, "
                f"got {type(data_path).__name__}"
            )
        out = ffi.new("pyexec_program **")
        path: bytes | None = None
        borrowed: bytes | None = None
        if isinstance(source, (str, os.PathLike)):
            path = _as_path(source)
            check(lib.pyexec_program_load_file(path, out))
            self._source = os.fsdecode(path)
        elif isinstance(source, (bytes, bytearray, memoryview)):
            # Kept for pickling anyway: immutable bytes (a snapshot of a
            # bytearray or memoryview) that the library reads in place when
            # they are 16-byte aligned (CPython's usually are), so the
            # program is held once, not twice; otherwise it takes a copy.
            kept = _as_bytes(source)
            buf = ffi.from_buffer(kept)
            if int(ffi.cast("uintptr_t", buf)) % 16 == 0:
                check(lib.pyexec_program_load_borrowed(buf, len(kept), out))
                borrowed = kept
            else:
                check(lib.pyexec_program_load_buffer(buf, len(kept), out))
            self._source = f"<{type(source).__name__}, {len(kept)} bytes>"
            source = kept
        else:
            raise InvalidArgumentError(
                f"load() takes a path, bytes, bytearray, memoryview or file-like object, got {type(source).__name__}"
            )
        handle = ProgramHandle(out[0], borrowed)  # frees the program if attaching fails
        origin = origin_of("program", source, path)
        data_origin = None
        if isinstance(data_path, (str, os.PathLike)):
            dpath = _as_path(data_path)
            check(lib.pyexec_program_attach_data_file(handle.ptr, dpath))
            self._data_source = os.fsdecode(dpath)
            data_origin = origin_of("data file", data_path, dpath)
        elif data_path is not None:
            dbuf = _as_buffer(data_path)
            check(lib.pyexec_program_attach_data_buffer(handle.ptr, dbuf, len(dbuf)))
            self._data_source = f"<{type(data_path).__name__}, {len(dbuf)} bytes>"
            data_origin = origin_of("data file", data_path, None)
        self._origins = (origin, data_origin)
        self._handle = handle
        p = self._handle.ptr
        names = []
        for i in range(lib.pyexec_program_method_count(p)):
            names.append(ffi.string(lib.pyexec_program_method_name(p, i)).decode())
        self._names = tuple(names)
        self._meta: dict[str, MethodMeta] = {}
        self._attributes: dict[str, dict[str, TensorInfo]] = {}
        self._recorder: Recorder | None = None
        self._bundled = bool(lib.pyexec_program_is_bundled(p))
        self._suites: dict[str, BundledTestSuite] | None = None

    @property
    def method_names(self) -> MethodNames:
        """The names of the program's methods: a set, as ExecuTorch's is, that
        iterates in the file's order (still readable after close)."""
        return MethodNames(self._names)

    def __repr__(self) -> str:
        closed = " closed" if self._handle is None else ""
        source = self._source if self._source.startswith("<") else repr(self._source)
        data = ""
        if self._data_source is not None:
            shown = self._data_source if self._data_source.startswith("<") else repr(self._data_source)
            data = f" data={shown}"
        return f"<pyexec.Program methods={list(self._names)} source={source}{data}{closed}>"

    def __reduce__(self) -> tuple[Any, ...]:
        self._ptr()  # a closed program refuses
        return (Program._reopen, pickle_state(self._origins))

    def close(self) -> None:
        """Releases the program. Methods already loaded keep it alive and keep
        working; anything else on this object raises InvalidArgumentError.
        Closing twice is harmless."""
        self._handle = None

    def __enter__(self) -> Program:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @property
    def is_bundled(self) -> bool:
        """Whether the file is a bundled program (.bpte): a program wrapped
        with test sets (ExecuTorch's BundledProgram). The program inside is
        what runs; `bundled_test_suites` holds the test sets."""
        return self._bundled

    @property
    def bundled_test_suites(self) -> dict[str, BundledTestSuite]:
        """The test sets of a bundled program by method name, in the file's
        order: each test case's inputs and expected outputs (numpy arrays,
        read-only, in the method's logical layout; int, float or bool for
        scalars). Empty for a plain program. Run them with
        `pyexec.verify_bundled(program)`.

        Raises:
            InvalidArgumentError: the program is closed.
            UnsupportedError: a bfloat16 tensor while torch is not imported
                (numpy has no bfloat16; with torch they are torch tensors).
        """
        if self._suites is None:
            self._suites = _read_test_suites(self._ptr())
        return dict(self._suites)

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
            ins.append(tensor_info(info, output=False))
        outs = []
        for i in range(nout[0]):
            check(lib.pyexec_program_output_info(p, bname, i, info))
            outs.append(tensor_info(info, output=True))
        meta = MethodMeta(name=name, inputs=tuple(ins), outputs=tuple(outs))
        self._meta[name] = meta
        return meta

    def attributes(self, name: str = "forward") -> dict[str, TensorInfo]:
        """The attributes of method `name`: the tensors the program names
        (mutable buffers exported with ExecutorchBackendConfig(
        emit_mutable_buffer_names=True), weights kept in a data file), by
        name, in the method's value order (ExecuTorch's
        MethodMeta.attribute_tensor_meta). Read without loading the method;
        `Method.get_attribute(name)` gives a loaded method's current value.

        Raises:
            InvalidArgumentError: the program has no such method, or is closed.
            InvalidProgramError: a tensor of the method is malformed.
        """
        p = self._ptr()
        bname = self._check_name(name)
        got = self._attributes.get(name)
        if got is not None:
            return dict(got)
        found = read_attributes(p, bname)
        self._attributes[name] = found
        return dict(found)

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
        method = Method(self, name, output_type)
        if self._recorder is not None:
            self._recorder.attach(method)
        return method

    def write_etdump_result_to_file(self, etdump_path: str | os.PathLike[str],
                                    debug_buffer_path: str | os.PathLike[str] | None = None) -> None:
        """For a program loaded with `Runtime.get().load_program(...,
        enable_etdump=True)` (ExecuTorch's spelling): writes the ETDump of
        every execute of its Methods since the last write (and, loaded with
        debug_buffer_size > 0, every instruction's outputs into
        `debug_buffer_path`) for ExecuTorch's Inspector, then records afresh.

        Raises:
            InvalidArgumentError: the program was not loaded with
                enable_etdump=True, or `debug_buffer_path` was given without a
                debug buffer.
            FileError: a file cannot be written (naming it).
        """
        if self._recorder is None:
            raise InvalidArgumentError("ETDump is not enabled for this program: load it with "
                                       "Runtime.get().load_program(..., enable_etdump=True)")
        self._recorder.write(etdump_path, debug_buffer_path)

    @classmethod
    def _reopen(cls, source: tuple[str, Any, str | None], data: tuple[str, Any, str | None] | None) -> Program:
        """The program again, from a pickled (source, data file): the bytes, or
        the path once the file there hashes to what was pickled."""
        return cls(verified("program", source), None if data is None else verified("data file", data))


def _test_value(v: Any, where: str) -> Any:
    """A pyexec_test_value as Python: a read-only array in the tensor's
    logical layout (its bytes copied), or an int, float or bool."""
    if v.kind == lib.PYEXEC_VALUE_INT:
        return int(v.i)
    if v.kind == lib.PYEXEC_VALUE_DOUBLE:
        return float(v.d)
    if v.kind == lib.PYEXEC_VALUE_BOOL:
        return bool(v.b)
    dim = int(v.dim)
    sizes = [int(s) for s in v.sizes[0:dim]]
    order = [int(d) for d in v.dim_order[0:dim]]
    raw = ffi.buffer(v.data, v.nbytes)[:] if v.nbytes else b""
    in_memory = [sizes[d] for d in order]  # the bytes hold the dims in dim_order
    logical = [order.index(k) for k in range(dim)]
    code = int(v.dtype)
    if code in _dtypes.NUMPY:
        arr = np.frombuffer(raw, dtype=_dtypes.NUMPY[code]).copy().reshape(in_memory).transpose(logical)
        arr.flags.writeable = False
        return arr
    torch = _dtypes.torch_module()
    if torch is None:
        raise UnsupportedError(f"{where}: a {_dtypes.NAMES[code]} tensor needs torch (numpy has no such dtype); "
                               "import torch first")
    by_code = _dtypes.torch_maps()[1]
    return torch.frombuffer(bytearray(raw), dtype=by_code[code]).reshape(in_memory).permute(logical)


def _read_test_suites(p: Any) -> dict[str, BundledTestSuite]:
    """The test suites of a (bundled) program, read from the library."""
    suites: dict[str, BundledTestSuite] = {}
    ncases = ffi.new("size_t *")
    nvalues = ffi.new("size_t *")
    v = ffi.new("pyexec_test_value *")
    for s in range(lib.pyexec_program_test_suite_count(p)):
        name = ffi.string(lib.pyexec_program_test_suite_method(p, s)).decode()
        check(lib.pyexec_program_test_case_count(p, s, ncases))
        cases = []
        for c in range(ncases[0]):
            values: list[tuple[Any, ...]] = []
            for expected, what in ((0, "input"), (1, "expected output")):
                check(lib.pyexec_program_test_value_count(p, s, c, expected, nvalues))
                row = []
                for k in range(nvalues[0]):
                    check(lib.pyexec_program_test_value(p, s, c, expected, k, v))
                    row.append(_test_value(v, f"method '{name}', test case {c}, {what} {k}"))
                values.append(tuple(row))
            cases.append(BundledTestCase(inputs=values[0], expected_outputs=values[1]))
        suites.setdefault(name, BundledTestSuite(method_name=name, test_cases=tuple(cases)))
    return suites


class OperatorRegistry:
    """The operators pyexec has kernels for (ExecuTorch's
    `Runtime.operator_registry`)."""

    @property
    def operator_names(self) -> set[str]:
        """Every operator name ("aten::add.out"), as a set."""
        return {ffi.string(lib.pyexec_kernel_name(i)).decode() for i in range(lib.pyexec_kernel_count())}


class BackendRegistry:
    """The delegate backends pyexec runs (ExecuTorch's
    `Runtime.backend_registry`)."""

    @property
    def registered_backend_names(self) -> list[str]:
        """The backend ids, as programs name them ("XnnpackBackend")."""
        return [ffi.string(lib.pyexec_backend_name(i)).decode() for i in range(lib.pyexec_backend_count())]

    def is_available(self, backend_name: str) -> bool:
        """Whether a program's delegate to `backend_name` can run here."""
        return backend_name in self.registered_backend_names


class Runtime:
    """ExecuTorch's entry point, spelled as `executorch.runtime` spells it:
    `Runtime.get().load_program(data, data_path=...)` is
    `pyexec.load(data, data_path=...)`, and `operator_registry` /
    `backend_registry` list what the library runs."""

    operator_registry = OperatorRegistry()
    backend_registry = BackendRegistry()

    @staticmethod
    def get() -> Runtime:
        """The one Runtime."""
        return _RUNTIME

    def load_program(
        self,
        data: Source,
        data_path: Source | None = None,
        *,
        verification: Any = None,
        enable_etdump: bool = False,
        debug_buffer_size: int = 0,
    ) -> Program:
        """`pyexec.load(data, data_path)`: the program (a path, bytes or a
        file-like object) and its optional data file (.ptd); raises what load
        raises.

        `verification` is accepted for ExecuTorch's callers and changes
        nothing: pyexec always checks the whole file (every offset, index and
        count) before running it. With `enable_etdump=True` every execute of
        the program's Methods is recorded (and, with `debug_buffer_size` > 0,
        every instruction's outputs, into a buffer of that many bytes per
        method) until `program.write_etdump_result_to_file(path,
        debug_buffer_path)` writes them for ExecuTorch's Inspector.

        Raises: what load raises; InvalidArgumentError for a
        `debug_buffer_size` that is not an int >= 0."""
        del verification
        recorder = Recorder(debug_buffer_size) if enable_etdump else None
        program = Program(data, data_path)
        program._recorder = recorder
        return program

    def __repr__(self) -> str:
        return "<pyexec.Runtime>"


_RUNTIME = Runtime()
