"""Method: an executable instance of one method of a program. Its parts
(input slots, output views and bindings) are the classes of _inputs.py and
_outputs.py; this file holds the public calls, the lock, and the one
execute path."""

from __future__ import annotations

import importlib
import os
import threading
import weakref
from collections.abc import Sequence
from typing import Any

from . import _dtypes
from ._errors import InvalidArgumentError, check, raise_status
from ._events import Collected, read_profile
from ._ffi import ffi, lib
from ._handles import MethodHandle, ProgramBase, pickle_state
from ._inputs import Inputs
from ._meta import MethodMeta, TensorInfo, dim_order_if_not_row_major, read_attributes
from ._outputs import Binding, Outputs
from ._profile import Profile
from ._tensors import check_numpy_code, numpy_view, to_torch

_OUTPUT_TYPES = ("auto", "torch", "numpy")
_run = lib.pyexec_method_run


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


# Every live Method, for the fork hooks below.
_live: weakref.WeakSet[Method] = weakref.WeakSet()
_live_lock = threading.Lock()
_held: list[Method] = []


def _before_fork() -> None:
    """Takes every live Method's lock, so that no other thread is inside a
    library call on one when the process forks: the child then gets each
    method whole (its state from a finished call) and with its locks (this
    one and the library's own mutex) free. A fork waits for the calls in
    flight to end."""
    _live_lock.acquire()
    _held[:] = list(_live)
    for m in _held:
        m._lock.acquire()


def _after_fork() -> None:
    """Releases what _before_fork took, in the parent and in the child."""
    for m in _held:
        m._lock.release()
    _held.clear()
    _live_lock.release()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork, after_in_child=_after_fork)


def _unpickle_method(kind: type[ProgramBase], program: tuple[Any, Any], name: str, output_type: str) -> Method:
    return Method(kind._reopen(*program), name, output_type)


def _check_clone(clone_outputs: Any) -> None:
    if clone_outputs is not True and clone_outputs is not False:
        raise InvalidArgumentError(f"clone_outputs must be True or False, got {clone_outputs!r}")


class Method:
    """An executable instance of one method of a program, made by
    `Program.load_method(name, output_type)` (see there for `output_type` and
    the errors). One call runs at a time on a Method; different Methods run in
    parallel on different threads.

    A Method pickles as its program (see Program: the bytes, or the path and
    its sha256), its name and its output_type; unpickling loads the program
    and the method again, with fresh state: no inputs installed, no outputs
    bound, and the program's state (mutable buffers) as a new load_method
    has it, not as this Method's calls left it. A closed Method refuses to
    pickle (InvalidArgumentError); one whose Program was closed still
    pickles.

    Forking (multiprocessing's "fork") is safe while other threads use
    Methods: the fork waits for calls in flight, so the child gets every
    Method whole and unlocked (os.register_at_fork hooks)."""

    _handle: MethodHandle | None = None
    _attribute_infos: dict[str, TensorInfo] | None = None

    def __init__(self, program: ProgramBase, name: str, output_type: str = "auto") -> None:
        if not isinstance(program, ProgramBase):
            raise InvalidArgumentError(f"program must be a pyexec.Program, got {type(program).__name__}")
        _check_output_type(output_type)
        bname = program._check_name(name)
        self.meta: MethodMeta = program.method_meta(name)
        out = ffi.new("pyexec_method **")
        check(lib.pyexec_method_load(program._ptr(), bname, out))
        assert program._handle is not None
        self._handle = MethodHandle(out[0], program._handle)
        self._m = self._handle.ptr
        self._output_type = output_type
        self._origins = program._origins
        self._program_kind = type(program)
        self._lock = threading.Lock()
        with _live_lock:
            _live.add(self)
        self._inputs = Inputs(name, self.meta.inputs)
        alias = [self._query_alias(i) for i in range(len(self.meta.outputs))]
        self._outputs = Outputs(self.meta.outputs, alias, self._handle)
        # Prepared pyexec_method_run calls (one argument crosses cffi, not six):
        # on the installed inputs, and installing the inputs of the C array first.
        outs, nout = self._outputs.descs, self._outputs.count
        self._run_installed = ffi.new("pyexec_run *", {"method": self._m, "outputs": outs, "output_count": nout})
        self._run_inputs = ffi.new("pyexec_run *", {
            "method": self._m, "inputs": self._inputs.values, "input_count": self._inputs.count,
            "outputs": outs, "output_count": nout,
        })

    def close(self) -> None:
        """Releases the method and every reference it holds (inputs, bindings).
        Outputs already returned without a copy stay valid. Later calls raise
        InvalidArgumentError; closing twice is harmless."""
        with self._lock:
            self._handle = None
            self._m = ffi.NULL
            self._run_installed.method = ffi.NULL
            self._run_inputs.method = ffi.NULL
            self._inputs.forget()
            self._outputs.forget()

    def __reduce__(self) -> tuple[Any, ...]:
        self._check_open()
        return (_unpickle_method, (self._program_kind, pickle_state(self._origins), self.meta.name, self._output_type))

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
        return self._outputs.alias[index]

    def _check_output_index(self, index: Any) -> None:
        if not isinstance(index, int) or isinstance(index, bool):
            raise InvalidArgumentError(f"output index must be an int, got {type(index).__name__}")
        n = self._outputs.count
        if not 0 <= index < n:
            raise InvalidArgumentError(
                f"output index {index} is out of range (method '{self.meta.name}' has {n} outputs)"
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
            self._install(inputs)

    def _fill(self, inputs: Sequence[Any]) -> tuple[list[Any], list[Any]]:
        """Inputs.fill; when it refuses the inputs, the library's are cleared
        too (a failed install leaves none). The caller's objects stay held
        until the next successful install, as SPEC §3 says."""
        try:
            return self._inputs.fill(inputs)
        except BaseException:
            lib.pyexec_method_clear_inputs(self._m)
            raise

    def _install(self, inputs: Sequence[Any]) -> None:
        keep, staged = self._fill(inputs)
        st = lib.pyexec_method_set_inputs(self._m, self._inputs.values, self._inputs.count)
        del staged  # planned inputs (and their staged copies) were copied by the call
        self._inputs.installed(keep)
        if st:
            raise_status(st)

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
            check(lib.pyexec_method_check_bindable(self._m, index))
            if tensor is None:
                check(lib.pyexec_method_set_output_ptr(self._m, index, ffi.NULL, 0))
                self._outputs.bind(index, None)
            else:
                self._bind(tensor, index)

    def _bind(self, tensor: Any, index: int) -> None:
        """Checks `tensor` against output `index` and hands its memory to the
        library (which checks size, alignment and overlaps)."""
        info = self.meta.outputs[index]
        assert info is not None
        binding = Binding(tensor, index, info)
        check(lib.pyexec_method_set_output_ptr(self._m, index, binding.pointer, binding.nbytes))
        self._outputs.bind(index, binding)

    def _rebind_moved(self, inputs: Sequence[Any] | None) -> Sequence[Any] | None:
        """The caller can swap a bound tensor's memory (torch resize_, set_ or
        .data; numpy resize). Bindings whose pointer, size or layout changed are
        released in the library (which then holds no stale pointer) and bound
        again, with every check, once the inputs are in (binding checks
        overlaps with them). Returns the inputs still to install: None when it
        installed them itself."""
        torch = _dtypes.torch_module()
        moved = []
        for i, b in enumerate(self._outputs.bindings):
            if b is not None and b.moved(torch):
                b.ptr, b.nbytes = 0, -1  # unusable until bound again
                lib.pyexec_method_set_output_ptr(self._m, i, ffi.NULL, 0)
                moved.append(i)
        if not moved:
            return inputs
        if inputs is not None:
            self._install(inputs)
        for i in moved:
            b = self._outputs.bindings[i]
            assert b is not None
            self._bind(b.tensor, i)
        return None

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
            outputs = self._outputs
            if outputs.bound_any:
                inputs = self._rebind_moved(inputs)
            # One library call installs the inputs (if any), runs and describes the outputs.
            slots = self._inputs
            if inputs is None:
                if slots.held:
                    slots.check_held()
                run = self._run_installed
                st = _run(run)
            else:
                keep, staged = self._fill(inputs)
                run = self._run_inputs
                st = _run(run)
                del staged
                slots.installed(keep)
            if st:
                raise_status(st)
            kind = slots.kind if self._output_type == "auto" else self._output_type
            last = outputs.last
            if (last is not None and not clone_outputs and not run.outputs_changed and last.kind == kind
                    and last.uncloned is not None and not last.aliased):
                return last.uncloned.copy()  # Outputs.collect's first case, inlined: a loop's steady state
            return outputs.collect(run.outputs_changed, clone_outputs, kind, slots.caller)

    def profile(self, max_events: int | None = None, debug_buffer_size: int = 0) -> Profile:
        """A context manager timing every execute inside its `with` block:

            with method.profile() as p:
                method.execute(inputs)
            print(p.table())

        Collection is on only inside the block (outside it costs nothing); at
        its exit `p.events` holds one ProfileEvent per executed instruction,
        and per node a delegate ran, over every execute in the block.
        `p.write_etdump(path)` writes them as an ETDump file for ExecuTorch's
        Inspector. At most `max_events` events are kept (None: 2**21); those
        beyond are counted in `p.dropped`. `p.start()` and `p.stop()` do
        what entering and leaving the block do, for use without one.

        With `debug_buffer_size` > 0 (bytes), every instruction's outputs are
        also copied, after it runs, into a debug buffer of that size, as
        ExecuTorch's runtime does with `enable_etdump=True,
        debug_buffer_size=N`: `p.debug_values` and `p.debug_buffer` hold
        them, and `p.write_etdump(path, debug_buffer_path=...)` writes them
        for the Inspector's intermediate outputs and `calculate_numeric_gap`.
        An execute whose outputs do not fit fails with OutOfMemoryError.

        Raises:
            InvalidArgumentError: `max_events` is not a positive int or None,
                or `debug_buffer_size` not an int >= 0; the method is closed
                (on starting or stopping).
        """
        return Profile(self._profile_switch, max_events, debug_buffer_size)

    def _profile_switch(self, on: bool, max_events: int = 0, debug_buffer_size: int = 0) -> Collected | None:
        """Starts collection on empty events (keeping at most `max_events`,
        0: the library's default; with a debug buffer of `debug_buffer_size`
        bytes, 0: none), or stops it and returns what it recorded (the debug
        buffer is then released)."""
        with self._lock:
            self._check_open()
            got = None if on else read_profile(self._m, debug=True)
            check(lib.pyexec_method_profile_reset(self._m))
            if on:
                check(lib.pyexec_method_profile_set_limit(self._m, max_events))
            check(lib.pyexec_method_profile_set_debug_buffer(self._m, debug_buffer_size if on else 0))
            check(lib.pyexec_method_profile_enable(self._m, 1 if on else 0))
            return got

    def attribute_names(self) -> list[str]:
        """The names of the method's attributes (Program.attributes), in order."""
        return list(self._attributes())

    def _attributes(self) -> dict[str, TensorInfo]:
        got = self._attribute_infos
        if got is None:
            with self._lock:
                self._check_open()
                assert self._handle is not None
                got = self._attribute_infos = read_attributes(self._handle.program.ptr, self.meta.name.encode())
        return got

    def get_attribute(self, name: str, clone: bool = True) -> Any:
        """The current value of attribute `name` (see Program.attributes): a
        mutable buffer as the last execute left it, or a named constant.
        `clone` True gives a copy the caller owns; False a view of the
        method's memory, which the next execute may change. numpy or torch as
        the method's output_type says ("auto": torch when torch is imported).

        Raises:
            InvalidArgumentError: no attribute has that name (the message lists
                those the method has), or the method is closed.
            UnsupportedError: a bfloat16 attribute asked for as numpy.
        """
        infos = self._attributes()
        if not isinstance(name, str) or name not in infos:
            names = ", ".join(repr(n) for n in infos) or "none"
            raise InvalidArgumentError(
                f"method '{self.meta.name}' has no attribute {name!r} (its attributes: {names})"
            )
        index = list(infos).index(name)
        info = infos[name]
        with self._lock:
            self._check_open()
            value = ffi.new("pyexec_value *")
            check(lib.pyexec_method_get_attribute(self._m, index, value))
            t = value.tensor
            shape = tuple(t.sizes[0:t.dim])
            kind = self._inputs.kind if self._output_type == "auto" else self._output_type
            if kind == "numpy":
                check_numpy_code(t.dtype, f"attribute {name!r}")
            array = numpy_view(int(ffi.cast("uintptr_t", t.data)), t.dtype, shape, self._handle,
                               dim_order_if_not_row_major(info))
            if clone:
                array = array.copy()
            return to_torch(array, t.dtype) if kind == "torch" else array

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
            outputs = self._outputs
            check(lib.pyexec_method_get_outputs(self._m, outputs.descs, outputs.count))
            kind = self._inputs.kind if self._output_type == "auto" else self._output_type
            return outputs.described(clone_outputs, kind, self._inputs.caller)
