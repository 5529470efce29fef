"""What a program declares about its methods, read from the C library:
TensorInfo, MethodMeta, DelegateInfo and the set of method names."""

from __future__ import annotations

from collections.abc import Iterator, Set
from dataclasses import dataclass
from typing import Any

from . import _dtypes
from ._errors import check
from ._ffi import ffi, lib


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


def tensor_info(v: Any, output: bool) -> TensorInfo | None:
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
        # The library sets it only for an input the program writes in place.
        is_mutated=bool(v.is_mutated_input),
    )


def read_attributes(program: Any, bname: bytes) -> dict[str, TensorInfo]:
    """The attributes of a method (the library's program pointer, the
    method's name as bytes): name -> TensorInfo, in the method's value order."""
    count = ffi.new("size_t *")
    check(lib.pyexec_program_attribute_count(program, bname, count))
    info = ffi.new("pyexec_value_info *")
    needed = ffi.new("size_t *")
    found: dict[str, TensorInfo] = {}
    for i in range(count[0]):
        check(lib.pyexec_program_attribute_info(program, bname, i, info, ffi.NULL, 0, needed))
        buf = ffi.new("char[]", needed[0])
        check(lib.pyexec_program_attribute_info(program, bname, i, info, buf, needed[0], needed))
        meta = tensor_info(info, output=False)
        assert meta is not None
        found[ffi.string(buf).decode()] = meta
    return found


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


class MethodNames(Set[str]):
    """A program's method names: a set, as ExecuTorch's `Program.method_names`
    is (it compares equal to `{"forward"}`), that iterates in the file's order."""

    __slots__ = ("_names",)

    def __init__(self, names: tuple[str, ...]) -> None:
        self._names = names

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)

    def __hash__(self) -> int:
        return self._hash()

    def __repr__(self) -> str:
        return "{" + ", ".join(repr(n) for n in self._names) + "}"
