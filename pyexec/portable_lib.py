"""ExecuTorch's pybindings Module API (`executorch.extension.pybindings.portable_lib`)
with pyexec underneath: the same names, arguments, defaults, return types and
exceptions, so code written for ExecuTorch's Python runtime runs on pyexec.

    from pyexec.portable_lib import _load_for_executorch

    module = _load_for_executorch("model.pte")
    logits = module.forward((input_ids, cache_position))[0]

Or, for code that imports ExecuTorch's module itself (optimum-executorch, ExecuTorch's
examples), one line before that code is imported:

    import pyexec.portable_lib; pyexec.portable_lib.install()

Like ExecuTorch's Module, an ExecuTorchModule keeps one loaded Method per name for its
whole life, so state in mutable buffers (a KV cache) persists from call to call.
Tensor outputs are torch tensors when torch is installed (numpy arrays otherwise).
Failures raise what ExecuTorch's bindings raise: RuntimeError (the pyexec error that
caused it chained as `__cause__`), IndexError for a metadata index out of range,
TypeError for inputs that are neither a tensor nor a sequence.

Beyond ExecuTorch's API, `ExecuTorchModule.method(name)` gives the pyexec Method
behind a name (for `set_output`, `output_aliases_input`, `profile`, ...), and
`ExecuTorchModule.program` the pyexec Program.
"""

from __future__ import annotations

import enum
import os
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Optional, Union

import numpy as np

from . import _dtypes
from ._bundled import BundledTestCase, BundledTestSuite, mismatch
from ._errors import Error
from ._meta import MethodMeta as _PxMethodMeta
from ._meta import TensorInfo as _PxTensorInfo
from ._method import Method
from ._program import Program
from ._program import Runtime as _Runtime
from ._recording import Recorder

__all__ = [
    "BundledModule",
    "ExecuTorchMethod",
    "ExecuTorchModule",
    "ExecuTorchProgram",
    "MethodMeta",
    "TensorInfo",
    "Verification",
    "_create_profile_block",
    "_dump_profile_results",
    "_get_operator_names",
    "_get_registered_backend_names",
    "_is_available",
    "_load_bundled_program_from_buffer",
    "_load_for_executorch",
    "_load_for_executorch_from_buffer",
    "_load_for_executorch_from_bundled_program",
    "_load_program",
    "_load_program_from_buffer",
    "_reset_profile_results",
    "_threadpool_get_thread_count",
    "_unsafe_reset_threadpool",
    "install",
]

# ExecuTorch's ScalarType names (runtime/core/portable_type/scalar_type.h), by code;
# pyexec's dtype codes are ExecuTorch's.
_SCALAR_TYPE_NAMES = {
    0: "Byte", 1: "Char", 2: "Short", 3: "Int", 4: "Long", 5: "Half", 6: "Float", 7: "Double",
    8: "ComplexHalf", 9: "ComplexFloat", 10: "ComplexDouble", 11: "Bool", 12: "QInt8", 13: "QUInt8",
    14: "QInt32", 15: "BFloat16", 27: "UInt16", 28: "UInt32", 29: "UInt64",
}
_CODES = {name: code for code, name in _dtypes.NAMES.items()}


class Verification(enum.Enum):
    """How much of a program ExecuTorch checks at load (Program::Verification).
    pyexec always checks the whole file, so both values load the same way."""

    Minimal = 0
    InternalConsistency = 1


@contextmanager
def _as_runtime_error() -> Iterator[None]:
    """pyexec's errors as the RuntimeError ExecuTorch's bindings raise, the
    original chained; ExecutionError already is one and passes unchanged."""
    try:
        yield
    except RuntimeError:
        raise
    except Error as e:
        raise RuntimeError(str(e)) from e


def _torch() -> Any:
    """torch when it is installed (imported here on first use), else None."""
    mod = sys.modules.get("torch")
    if mod is not None:
        return mod
    try:
        import torch
    except ImportError:
        return None
    return torch


def _output_type() -> str:
    return "torch" if _torch() is not None else "numpy"


class TensorInfo:
    """A tensor's metadata as ExecuTorch's bindings give it: methods, not
    attributes, and the dtype as ExecuTorch's ScalarType code (6 for float32)."""

    __slots__ = ("_info",)

    def __init__(self, info: _PxTensorInfo) -> None:
        self._info = info

    def sizes(self) -> tuple[int, ...]:
        """The shape (the upper bound for a dynamic tensor)."""
        return tuple(self._info.sizes)

    def dtype(self) -> int:
        """ExecuTorch's ScalarType code of the elements (6: Float, 4: Long, ...)."""
        return _CODES[self._info.dtype]

    def is_memory_planned(self) -> bool:
        """The storage is part of the method's planned memory."""
        return self._info.is_memory_planned

    def nbytes(self) -> int:
        """Bytes at the (upper-bound) sizes."""
        return self._info.nbytes

    @property
    def info(self) -> _PxTensorInfo:
        """pyexec's TensorInfo (dim_order, is_dynamic, is_mutated too)."""
        return self._info

    def __repr__(self) -> str:
        sizes = "[" + ", ".join(str(s) for s in self._info.sizes) + "]"
        dtype = _SCALAR_TYPE_NAMES.get(self.dtype(), str(self.dtype()))
        return (f"TensorInfo(sizes={sizes}, dtype={dtype}, is_memory_planned={self._info.is_memory_planned}, "
                f"nbytes={self._info.nbytes})")


_TAG_NAMES = {"NoneType": "None", "int": "Int", "float": "Double", "bool": "Bool", "str": "String"}


class MethodMeta:
    """What a method takes and returns, as ExecuTorch's bindings spell it."""

    __slots__ = ("_meta", "_attributes")

    def __init__(self, meta: _PxMethodMeta, attributes: dict[str, _PxTensorInfo]) -> None:
        self._meta = meta
        self._attributes = list(attributes.values())

    def name(self) -> str:
        """The method's name ("forward")."""
        return self._meta.name

    def num_inputs(self) -> int:
        """The number of inputs a caller passes."""
        return len(self._meta.inputs)

    def num_outputs(self) -> int:
        """The number of outputs a call returns."""
        return len(self._meta.outputs)

    def num_attributes(self) -> int:
        """The number of named tensors (attributes) of the method."""
        return len(self._attributes)

    @staticmethod
    def _pick(infos: Sequence[_PxTensorInfo | None], index: int, what: str) -> TensorInfo:
        if isinstance(index, bool) or not isinstance(index, int):
            raise TypeError(f"{what} index must be an int, got {type(index).__name__}")
        if not 0 <= index < len(infos):
            raise IndexError(f"Cannot get {what} tensor meta at {index}")
        info = infos[index]
        if info is None:
            raise IndexError(f"Cannot get {what} tensor meta at {index}: it is not a tensor")
        return TensorInfo(info)

    def input_tensor_meta(self, index: int) -> TensorInfo:
        """Input `index` (IndexError when out of range or not a tensor)."""
        return self._pick(self._meta.inputs, index, "input")

    def output_tensor_meta(self, index: int) -> TensorInfo:
        """Output `index` (IndexError when out of range or not a tensor)."""
        return self._pick(self._meta.outputs, index, "output")

    def attribute_tensor_meta(self, index: int) -> TensorInfo:
        """Attribute `index` (IndexError when out of range)."""
        return self._pick(self._attributes, index, "attribute")

    @property
    def meta(self) -> _PxMethodMeta:
        """pyexec's MethodMeta for the same method."""
        return self._meta

    def __repr__(self) -> str:
        def strs(infos: Sequence[_PxTensorInfo | None]) -> list[str]:
            return ["None" if i is None else repr(TensorInfo(i)) for i in infos]

        return (f"MethodMeta(name='{self._meta.name}', num_inputs={len(self._meta.inputs)}, "
                f"input_tensor_meta={strs(self._meta.inputs)}, num_outputs={len(self._meta.outputs)}, "
                f"output_tensor_meta={strs(self._meta.outputs)})")


def _normalize_inputs(inputs: Any) -> Sequence[Any]:
    """ExecuTorch's rule: one tensor (torch, or anything with the buffer
    protocol) is a call with that one input; else a flat sequence of inputs.
    What each input is, pyexec's Method checks."""
    kind = type(inputs)
    if kind is tuple or kind is list:
        return inputs  # type: ignore[no-any-return]
    torch = sys.modules.get("torch")
    if (torch is not None and isinstance(inputs, torch.Tensor)) or isinstance(inputs, np.ndarray):
        return [inputs]
    if isinstance(inputs, (str, bytes)) or not isinstance(inputs, Sequence):
        try:
            memoryview(inputs)  # type: ignore[arg-type]  # anything with the buffer protocol
        except TypeError:
            raise TypeError("Inputs must be a tensor buffer or a flat sequence") from None
        return [inputs]
    return list(inputs)


def _refused(e: Error, inputs: Sequence[Any], method_name: str) -> RuntimeError:
    """The RuntimeError ExecuTorch raises for inputs pyexec refused (`e`):
    its wording for a tensor on another device or an input of a type it does
    not take, else pyexec's message."""
    torch = sys.modules.get("torch")
    for i, x in enumerate(inputs):
        if torch is not None and isinstance(x, torch.Tensor):
            if x.device.type != "cpu" and x.numel() != 0:
                return RuntimeError(
                    f"Input {i} for method {method_name} is on device {x.device}, and only CPU and CUDA tensors can "
                    f"be passed to a method; pyexec runs on the CPU: move it there with .cpu()"
                )
        elif not (x is None or isinstance(x, (bool, int, float, np.ndarray, np.generic))):
            try:
                memoryview(x)
            except TypeError:
                return RuntimeError(
                    f"Unsupported python type {type(x)}. Ensure that inputs are passed as a flat list of tensors."
                )
    return RuntimeError(str(e))


def _call(method: Method, inputs: Any, clone_outputs: bool) -> list[Any]:
    args = _normalize_inputs(inputs)
    try:
        return method.execute(args, clone_outputs=clone_outputs)
    except RuntimeError:
        raise
    except Error as e:
        raise _refused(e, args, method.meta.name) from e


class _Debug:
    """enable_etdump / debug_buffer_size of a Module or Program: pyexec's
    Recorder, failing as ExecuTorch's bindings fail."""

    def __init__(self, enabled: bool, debug_buffer_size: int) -> None:
        if isinstance(debug_buffer_size, bool) or not isinstance(debug_buffer_size, int) or debug_buffer_size < 0:
            raise TypeError(f"debug_buffer_size must be a non-negative int, got {debug_buffer_size!r}")
        self.enabled = bool(enabled)
        self.recorder = Recorder(debug_buffer_size) if self.enabled else None

    def attach(self, method: Method) -> None:
        if self.recorder is not None:
            self.recorder.attach(method)

    def write(self, path: str, debug_buffer_path: Optional[str]) -> None:
        if self.recorder is None:
            raise RuntimeError("ETDump is not enabled: load the program with enable_etdump=True")
        with _as_runtime_error():
            self.recorder.write(path, debug_buffer_path)


def _open(source: Any, data: Any) -> tuple[Program, Exception | None]:
    """The program, and the error of its data file if attaching it failed:
    ExecuTorch reads the data file when a method is loaded, so its error
    surfaces there."""
    with _as_runtime_error():
        if data is None:
            return Program(source), None
        try:
            return Program(source, data), None
        except Error as e:
            program = Program(source)
            return program, RuntimeError(f"the data file could not be used: {e}")


class ExecuTorchModule:
    """A loaded program with one Method per name, kept for the module's life
    (ExecuTorch's `Module`): `forward`, `run_method`, `method_meta`, ..."""

    def __init__(self, program: Program, data_error: Exception | None = None, enable_etdump: bool = False,
                 debug_buffer_size: int = 0, bundle: BundledModule | None = None) -> None:
        self._program = program
        self._data_error = data_error
        self._methods: dict[str, Method] = {}
        self._lock = threading.Lock()
        self._debug = _Debug(enable_etdump, debug_buffer_size)
        self._bundle = bundle

    @property
    def program(self) -> Program:
        """The pyexec Program underneath."""
        return self._program

    def method(self, method_name: str) -> Method:
        """The pyexec Method this module runs for `method_name`, loaded on
        first use and kept (RuntimeError when the program has no such method
        or it cannot be loaded)."""
        m = self._methods.get(method_name)
        if m is not None:
            return m
        with self._lock:
            m = self._methods.get(method_name)
            if m is None:
                if not isinstance(method_name, str):
                    raise TypeError(f"method_name must be a str, got {type(method_name).__name__}")
                with _as_runtime_error():
                    if method_name not in self._program.method_names:
                        names = ", ".join(self._program.method_names)
                        raise RuntimeError(f"the program has no method {method_name!r} (it has: {names})")
                    try:
                        m = self._program.load_method(method_name, output_type=_output_type())
                    except Error as e:
                        if self._data_error is not None:
                            raise RuntimeError(f"{e} ({self._data_error})") from e
                        raise
                self._debug.attach(m)
                self._methods[method_name] = m
        return m

    def forward(self, inputs: Any = (), clone_outputs: bool = True) -> list[Any]:
        """Runs "forward" on `inputs` (a tensor, or a sequence of inputs) and
        returns its outputs as a list."""
        return _call(self.method("forward"), inputs, clone_outputs)

    def __call__(self, inputs: Any = (), clone_outputs: bool = True) -> list[Any]:
        """forward(inputs, clone_outputs)."""
        return self.forward(inputs, clone_outputs)

    def run_method(self, method_name: str, inputs: Any = (), clone_outputs: bool = True) -> list[Any]:
        """Runs method `method_name` on `inputs` and returns its outputs."""
        return _call(self.method(method_name), inputs, clone_outputs)

    def plan_execute(self, method_name: str, clone_outputs: bool = True) -> list[Any]:
        """Runs `method_name` on the inputs installed before (load_bundled_input)."""
        m = self.method(method_name)
        with _as_runtime_error():
            return m.execute(None, clone_outputs=clone_outputs)

    def method_names(self) -> list[str]:
        """The program's method names, in the file's order."""
        return list(self._program.method_names)

    def method_meta(self, method_name: str) -> MethodMeta:
        """Metadata of `method_name` (RuntimeError when there is no such method)."""
        with _as_runtime_error():
            return MethodMeta(self._program.method_meta(method_name), self._program.attributes(method_name))

    def _test_case(self, bundle: BundledModule, method_name: str, testset_idx: int) -> BundledTestCase:
        return bundle._test_case(method_name, testset_idx)

    def load_bundled_input(self, bundle: BundledModule, method_name: str, testset_idx: int) -> None:
        """Installs the inputs of test case `testset_idx` of `method_name` from
        a bundled program as the method's inputs (run them with plan_execute)."""
        case = self._test_case(bundle, method_name, testset_idx)
        m = self.method(method_name)
        with _as_runtime_error():
            m.set_inputs(list(case.inputs))

    def verify_result_with_bundled_expected_output(self, bundle: BundledModule, method_name: str, testset_idx: int,
                                                   rtol: float = 1e-5, atol: float = 1e-8) -> list[Any]:
        """Compares the method's last outputs with the expected outputs of test
        case `testset_idx` (RuntimeError naming the first output that differs)
        and returns those outputs."""
        case = self._test_case(bundle, method_name, testset_idx)
        m = self.method(method_name)
        with _as_runtime_error():
            outputs = m.get_outputs()
        _verify(method_name, testset_idx, outputs, case, rtol, atol)
        return outputs

    def has_etdump(self) -> bool:
        """The module was loaded with enable_etdump=True."""
        return self._debug.enabled

    def write_etdump_result_to_file(self, path: str, debug_buffer_path: Optional[str] = None) -> None:
        """Writes the ETDump of every call so far (and, with a debug buffer,
        the intermediate outputs to `debug_buffer_path`) for ExecuTorch's
        Inspector; the events are then cleared."""
        self._debug.write(path, debug_buffer_path)

    def __repr__(self) -> str:
        return f"<pyexec.portable_lib.ExecuTorchModule methods={self.method_names()}>"


def _verify(method_name: str, testset_idx: int, outputs: Sequence[Any], case: BundledTestCase, rtol: float,
            atol: float) -> None:
    problem, _ = mismatch(case, outputs, rtol, atol)
    if problem is not None:
        raise RuntimeError(f"Result verification failed: method '{method_name}', test set {testset_idx}: {problem}")


class BundledModule:
    """A bundled program (.bpte): the program and its test sets
    (`_load_bundled_program_from_buffer`)."""

    def __init__(self, buffer: Any) -> None:
        with _as_runtime_error():
            program = Program(buffer)
        if not program.is_bundled:
            raise RuntimeError("the buffer is not a bundled program (.bpte): it holds a plain program")
        self._buffer = buffer
        self._program = program
        self._module: ExecuTorchModule | None = None

    @property
    def program(self) -> Program:
        """The pyexec Program inside the bundle."""
        return self._program

    @property
    def test_suites(self) -> dict[str, BundledTestSuite]:
        """The bundled test sets, by method name."""
        return self._program.bundled_test_suites

    def _test_case(self, method_name: str, testset_idx: int) -> BundledTestCase:
        suites = self._program.bundled_test_suites
        suite = suites.get(method_name)
        if suite is None:
            have = ", ".join(suites) or "none"
            raise RuntimeError(f"the bundled program has no test sets for method {method_name!r} (it has: {have})")
        if isinstance(testset_idx, bool) or not isinstance(testset_idx, int):
            raise TypeError(f"testset_idx must be an int, got {type(testset_idx).__name__}")
        if not 0 <= testset_idx < len(suite.test_cases):
            raise RuntimeError(f"test set {testset_idx} is out of range: method '{method_name}' has "
                               f"{len(suite.test_cases)}")
        return suite.test_cases[testset_idx]

    def verify_result_with_bundled_expected_output(self, method_name: str, testset_idx: int, rtol: float = 1e-5,
                                                   atol: float = 1e-8) -> list[Any]:
        """Runs test set `testset_idx` of `method_name` and compares the outputs
        with its expected outputs (RuntimeError naming the first that
        differs); returns the outputs."""
        case = self._test_case(method_name, testset_idx)
        if self._module is None:
            self._module = ExecuTorchModule(self._program)
        m = self._module.method(method_name)
        with _as_runtime_error():
            outputs = m.execute(list(case.inputs))
        _verify(method_name, testset_idx, outputs, case, rtol, atol)
        return outputs


class ExecuTorchMethod:
    """One loaded method of an ExecuTorchProgram (a new pyexec Method per load_method)."""

    def __init__(self, method: Method, program: Program) -> None:
        self._method = method
        self._program = program

    @property
    def method(self) -> Method:
        """The pyexec Method underneath."""
        return self._method

    def set_inputs(self, inputs: Any) -> None:
        """Installs `inputs` for the next execute()."""
        args = _normalize_inputs(inputs)
        try:
            self._method.set_inputs(args)
        except Error as e:
            raise _refused(e, args, self._method.meta.name) from e

    def execute(self) -> None:
        """Runs the method on the installed inputs."""
        with _as_runtime_error():
            self._method.execute(None, clone_outputs=False)

    def get_outputs(self, clone_outputs: bool = True) -> list[Any]:
        """The outputs of the last execute."""
        with _as_runtime_error():
            return self._method.get_outputs(clone_outputs)

    def call(self, inputs: Any = (), clone_outputs: bool = True) -> list[Any]:
        """Runs the method on `inputs` and returns its outputs."""
        return _call(self._method, inputs, clone_outputs)

    def __call__(self, inputs: Any = (), clone_outputs: bool = True) -> list[Any]:
        """call(inputs, clone_outputs)."""
        return self.call(inputs, clone_outputs)

    def method_meta(self) -> MethodMeta:
        """The method's metadata."""
        name = self._method.meta.name
        with _as_runtime_error():
            return MethodMeta(self._method.meta, self._program.attributes(name))

    def get_attribute(self, name: str) -> Any:
        """The current value of attribute `name` (a copy)."""
        with _as_runtime_error():
            return self._method.get_attribute(name)


class ExecuTorchProgram:
    """A loaded program (`_load_program`): load_method gives a new Method each call."""

    def __init__(self, program: Program, data_error: Exception | None, enable_etdump: bool,
                 debug_buffer_size: int) -> None:
        self._program = program
        self._data_error = data_error
        self._debug = _Debug(enable_etdump, debug_buffer_size)

    @property
    def program(self) -> Program:
        """The pyexec Program underneath."""
        return self._program

    def num_methods(self) -> int:
        """The number of methods."""
        return len(self._program.method_names)

    def get_method_name(self, method_index: int) -> str:
        """The name of method `method_index` (RuntimeError when out of range)."""
        names = list(self._program.method_names)
        if isinstance(method_index, bool) or not isinstance(method_index, int):
            raise TypeError(f"method_index must be an int, got {type(method_index).__name__}")
        if not 0 <= method_index < len(names):
            raise RuntimeError(f"method index {method_index} is out of range: the program has {len(names)} methods")
        return names[method_index]

    def load_method(self, method_name: str) -> ExecuTorchMethod:
        """Loads method `method_name` (RuntimeError when it cannot be)."""
        with _as_runtime_error():
            if method_name not in self._program.method_names:
                raise RuntimeError(f"the program has no method {method_name!r} "
                                   f"(it has: {', '.join(self._program.method_names)})")
            try:
                m = self._program.load_method(method_name, output_type=_output_type())
            except Error as e:
                if self._data_error is not None:
                    raise RuntimeError(f"{e} ({self._data_error})") from e
                raise
        self._debug.attach(m)
        return ExecuTorchMethod(m, self._program)

    def method_meta(self, method_name: str) -> MethodMeta:
        """Metadata of `method_name`."""
        with _as_runtime_error():
            return MethodMeta(self._program.method_meta(method_name), self._program.attributes(method_name))

    def has_etdump(self) -> bool:
        """The program was loaded with enable_etdump=True."""
        return self._debug.enabled

    def write_etdump_result_to_file(self, path: str, debug_buffer_path: Optional[str] = None) -> None:
        """As ExecuTorchModule.write_etdump_result_to_file, for the methods loaded from this program."""
        self._debug.write(path, debug_buffer_path)


_PathOrBytes = Union[str, "os.PathLike[str]", bytes, bytearray, memoryview]


def _load_for_executorch(program_path: str, data_path: Optional[str] = None, enable_etdump: bool = False,
                         debug_buffer_size: int = 0,
                         program_verification: Verification = Verification.InternalConsistency) -> ExecuTorchModule:
    """Loads a program (.pte, or a bundled .bpte) from a file, which is
    memory-mapped; `data_path` is its .ptd data file. With enable_etdump every
    call is recorded for write_etdump_result_to_file, and with
    debug_buffer_size > 0 every operator's outputs too."""
    program, err = _open(_path(program_path, "program_path"), None if data_path is None else
                         _path(data_path, "data_path"))
    return ExecuTorchModule(program, err, enable_etdump, debug_buffer_size)


def _load_for_executorch_from_buffer(buffer: bytes, data_map_buffer: Optional[bytes] = None,
                                     enable_etdump: bool = False, debug_buffer_size: int = 0,
                                     program_verification: Verification = Verification.InternalConsistency,
                                     ) -> ExecuTorchModule:
    """_load_for_executorch from bytes (the program's, and its data file's)."""
    program, err = _open(_buffer(buffer, "buffer"), None if data_map_buffer is None else
                         _buffer(data_map_buffer, "data_map_buffer"))
    return ExecuTorchModule(program, err, enable_etdump, debug_buffer_size)


def _load_for_executorch_from_bundled_program(module: BundledModule, data_map_buffer: Optional[Any] = None,
                                              enable_etdump: bool = False, debug_buffer_size: int = 0,
                                              ) -> ExecuTorchModule:
    """A module over the program of a bundled program; `data_map_buffer` is its
    data file, as bytes or a path."""
    if not isinstance(module, BundledModule):
        raise TypeError(f"module must be a BundledModule, got {type(module).__name__}")
    program = module.program
    err: Exception | None = None
    if data_map_buffer is not None:
        data = _path(data_map_buffer, "data_map_buffer") if isinstance(data_map_buffer, (str, os.PathLike)) \
            else _buffer(data_map_buffer, "data_map_buffer")
        program, err = _open(module._buffer, data)
    return ExecuTorchModule(program, err, enable_etdump, debug_buffer_size, bundle=module)


def _load_bundled_program_from_buffer(buffer: bytes, non_const_pool_size: int = 16 * 1024) -> BundledModule:
    """A bundled program (.bpte) from bytes. `non_const_pool_size` is accepted
    for ExecuTorch's signature (pyexec sizes its memory from the program)."""
    return BundledModule(_buffer(buffer, "buffer"))


def _load_program(path: str, enable_etdump: bool = False, debug_buffer_size: int = 0,
                  program_verification: Verification = Verification.Minimal,
                  data_path: Optional[str] = None) -> ExecuTorchProgram:
    """A program from a file, whose methods are loaded one by one (load_method)."""
    program, err = _open(_path(path, "path"), None if data_path is None else _path(data_path, "data_path"))
    return ExecuTorchProgram(program, err, enable_etdump, debug_buffer_size)


def _load_program_from_buffer(buffer: bytes, enable_etdump: bool = False, debug_buffer_size: int = 0,
                              program_verification: Verification = Verification.Minimal,
                              data_path: Optional[str] = None) -> ExecuTorchProgram:
    """_load_program from bytes; `data_path` is a data file's path."""
    program, err = _open(_buffer(buffer, "buffer"), None if data_path is None else _path(data_path, "data_path"))
    return ExecuTorchProgram(program, err, enable_etdump, debug_buffer_size)


def _path(value: Any, what: str) -> Any:
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{what} must be a path (str), got {type(value).__name__}")
    return value


def _buffer(value: Any, what: str) -> Any:
    if not isinstance(value, (bytes, bytearray, memoryview)):
        raise TypeError(f"{what} must be bytes, got {type(value).__name__}")
    return value


def _get_operator_names() -> list[str]:
    """Every operator pyexec has a kernel for ("aten::add.out")."""
    from . import kernels

    return kernels()


def _get_registered_backend_names() -> list[str]:
    """The delegate backends pyexec runs ("XnnpackBackend")."""
    return list(_Runtime.get().backend_registry.registered_backend_names)


def _is_available(backend_name: str) -> bool:
    """pyexec runs delegates of backend `backend_name`."""
    return _Runtime.get().backend_registry.is_available(backend_name)


def _threadpool_get_thread_count() -> int:
    """The number of threads pyexec's kernels may use (pyexec.get_num_threads)."""
    from . import get_num_threads

    return get_num_threads()


def _unsafe_reset_threadpool(num_threads: int) -> None:
    """Sets the number of threads pyexec's kernels may use (pyexec.set_num_threads);
    safe in pyexec at any time: calls already running keep their count."""
    from . import set_num_threads

    with _as_runtime_error():
        set_num_threads(num_threads)


def _create_profile_block(name: str) -> None:
    """ExecuTorch's legacy profiler marker. Its results are compiled out of
    ExecuTorch's release builds (_dump_profile_results returns b"") and pyexec
    does the same; use enable_etdump or Method.profile for timings."""
    if not isinstance(name, str):
        raise TypeError(f"name must be a str, got {type(name).__name__}")


def _dump_profile_results() -> bytes:
    """The legacy profiler's results: b"" (see _create_profile_block)."""
    return b""


def _reset_profile_results() -> None:
    """Clears the legacy profiler's results (there are none)."""


def install() -> None:
    """Makes `executorch.extension.pybindings.portable_lib` this module, so
    that code importing ExecuTorch's bindings (optimum-executorch, ExecuTorch's
    examples) runs on pyexec. Call it before that code is imported; modules
    that already imported names from ExecuTorch's bindings keep them, except
    optimum-executorch's modeling module, whose names are replaced too."""
    me = sys.modules[__name__]
    sys.modules["executorch.extension.pybindings.portable_lib"] = me
    parent = sys.modules.get("executorch.extension.pybindings")
    if parent is not None:
        parent.portable_lib = me  # type: ignore[attr-defined]
    modeling = sys.modules.get("optimum.executorch.modeling")
    if modeling is not None:
        modeling._load_for_executorch = _load_for_executorch  # type: ignore[attr-defined]
        modeling.ExecuTorchModule = ExecuTorchModule  # type: ignore[attr-defined]
