"""XNNPACK-lowered programs for the delegate tests: `export_xnnpack` lowers a
module with ExecuTorch's XnnpackPartitioner (to_edge_transform_and_lower)
and caches the .pte like export.export_program, under the same key function
plus this file's digest; `payloads` reads the XNNPACK payloads and node types
out of a .pte with executorch's own deserialisers."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import torch

from support import export as _export

_HERE = Path(__file__).resolve().parent


def lower_manager(
    module: torch.nn.Module,
    inputs: tuple[Any, ...],
    *,
    dynamic_shapes: Any = None,
    alloc_graph_input: bool = True,
    alloc_graph_output: bool = True,
    extract_delegate_segments: bool = True,
    partitioner_options: dict[str, Any] | None = None,
) -> Any:
    """Exports `module` and lowers every partition XnnpackPartitioner takes;
    returns the ExecutorchProgramManager. extract_delegate_segments=False
    keeps the payloads inline (Program.backend_delegate_data);
    partitioner_options are XnnpackPartitioner's keyword arguments
    (enable_bf16=True: it takes bfloat16 nodes too)."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
    from executorch.exir.passes import MemoryPlanningPass

    args = tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in inputs)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        ep = torch.export.export(module, args, dynamic_shapes=dynamic_shapes, strict=False)
        edge = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner(**(partitioner_options or {}))])
        config = ExecutorchBackendConfig(
            memory_planning_pass=MemoryPlanningPass(
                alloc_graph_input=alloc_graph_input, alloc_graph_output=alloc_graph_output
            ),
            extract_delegate_segments=extract_delegate_segments,
        )
        return edge.to_executorch(config)


def export_xnnpack(module: torch.nn.Module, inputs: tuple[Any, ...], **kwargs: Any) -> bytes:
    """The lowered program's .pte bytes (lower_manager's options), cached on
    disk like export.export_program."""
    where = _export.cache_dir()
    options = dict(kwargs, _lowering="XnnpackPartitioner", _lowering_source=_export._file_digest(__file__))
    paths = None if where is None else [where / f"{_export._export_key(module, inputs, options)}.pte"]
    (pte,) = _export.cached(paths, lambda: [bytes(lower_manager(module, inputs, **kwargs).buffer)])
    assert pte is not None
    return pte


# ---- reading payloads out of a .pte ------------------------------------------------
# A small flatbuffer reader (positions are absolute offsets into the buffer
# it reads), enough to find each delegate's payload in a .pte, the nodes and
# values of its XNNGraph, and the byte position of any field, so that tests
# can both list node types and mutate single fields.

import struct  # noqa: E402
from dataclasses import dataclass  # noqa: E402


class Table:
    def __init__(self, buf: bytes, pos: int) -> None:
        self.buf, self.pos = buf, pos
        self.vt = pos - struct.unpack_from("<i", buf, pos)[0]
        self.vtlen = struct.unpack_from("<H", buf, self.vt)[0]

    def field(self, slot: int) -> int | None:
        """Absolute position of field `slot`, None when absent."""
        e = 4 + 2 * slot
        if e + 2 > self.vtlen:
            return None
        off = struct.unpack_from("<H", self.buf, self.vt + e)[0]
        return self.pos + off if off else None

    def scalar(self, slot: int, fmt: str, default: Any = 0) -> Any:
        p = self.field(slot)
        return default if p is None else struct.unpack_from("<" + fmt, self.buf, p)[0]

    def table(self, slot: int) -> Table | None:
        p = self.field(slot)
        return None if p is None else Table(self.buf, p + struct.unpack_from("<I", self.buf, p)[0])

    def vector(self, slot: int) -> tuple[int, int]:
        """(position of the first element, count); (0, 0) when absent."""
        p = self.field(slot)
        if p is None:
            return 0, 0
        v = p + struct.unpack_from("<I", self.buf, p)[0]
        return v + 4, struct.unpack_from("<I", self.buf, v)[0]

    def tables(self, slot: int) -> list[Table]:
        first, n = self.vector(slot)
        out = []
        for k in range(n):
            e = first + 4 * k
            out.append(Table(self.buf, e + struct.unpack_from("<I", self.buf, e)[0]))
        return out

    def string(self, slot: int) -> tuple[int, bytes]:
        """(position of the first byte, the bytes)."""
        first, n = self.vector(slot)
        return first, self.buf[first : first + n]


def root(buf: bytes, at: int = 0) -> Table:
    return Table(buf, at + struct.unpack_from("<I", buf, at)[0])


@dataclass
class Payload:
    backend: str
    offset: int  # in the .pte
    size: int
    fb_offset: int  # the XNNGraph flatbuffer, in the .pte

    def graph(self, pte: bytes) -> Table:
        return root(pte, self.fb_offset)


def payloads(pte: bytes) -> list[Payload]:
    """Every delegate payload of every method of a .pte (segment or inline)."""
    seg_base = struct.unpack_from("<Q", pte, 24)[0] if pte[8:12] == b"eh00" else 0
    program = root(pte)
    segments = program.tables(4)
    inline = program.tables(3)
    out = []
    for plan in program.tables(1):
        for d in plan.tables(7):
            backend = d.string(0)[1].decode()
            ref = d.table(1)
            assert ref is not None
            loc, index = ref.scalar(0, "B"), ref.scalar(1, "I")
            if loc == 1:
                seg = segments[index]
                offset, size = seg_base + seg.scalar(0, "Q"), seg.scalar(1, "Q")
            else:
                offset, size = inline[index].vector(0)
            has_header = pte[offset + 4 : offset + 8] == b"XH00"
            fb = offset + struct.unpack_from("<I", pte, offset + 10)[0] if has_header else offset
            out.append(Payload(backend, offset, size, fb))
    return out


def node_types(pte: bytes) -> list[int]:
    """The XNodeUnion type code of every node of every XNNPACK payload."""
    return [n.scalar(0, "B") for p in payloads(pte) for n in p.graph(pte).tables(1)]


def union_names() -> dict[int, str]:
    """XNodeUnion's members by type code, read from the executorch wheel's
    schema.fbs."""
    import re

    import executorch.backends.xnnpack as xnn

    text = (Path(xnn.__file__).parent / "serialization" / "schema.fbs").read_text()
    body = re.search(r"union XNodeUnion \{(.*?)\}", text, re.S)
    assert body is not None
    names = [m.group(1) for m in re.finditer(r"^\s*XNN(\w+)\s*[:,]", body.group(1), re.M)]
    return {k + 1: n for k, n in enumerate(names)}


def has_avx512_fp16() -> bool:
    """Whether this CPU has AVX512-FP16, where XNNPACK's (and pyexec's) float16
    products and convolutions sum in float16 (docs/supported.md)."""
    try:
        with open("/proc/cpuinfo") as f:
            return any(line.startswith("flags") and " avx512_fp16" in line for line in f)
    except OSError:
        return False
