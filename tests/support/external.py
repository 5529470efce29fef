"""Programs with their weights in a separate data file (.ptd), for the
external-data tests: `export_external` exports a module either with
ExecutorchBackendConfig(external_constants=True) (portable operators) or
lowered to XNNPACK with its weights routed to the data file
(delegate_external_constants_pass_unlifted, then re-export and lowering),
and returns the .pte and .ptd bytes, cached on disk under export.py's key
plus the kind and this file's digest. `FlatTensor` finds fields of a .ptd to
patch."""

from __future__ import annotations

import struct
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from support import export as _export

TAG = "weights"
"""The tag XNNPACK's weights get, hence the data file's name (weights.ptd)."""


def _manager(module: torch.nn.Module, inputs: tuple[Any, ...], kind: str) -> Any:
    from executorch.exir import ExecutorchBackendConfig, to_edge, to_edge_transform_and_lower

    args = tuple(x.clone() for x in inputs)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        ep = torch.export.export(module, args, strict=False)
        if kind == "portable":
            return to_edge(ep).to_executorch(ExecutorchBackendConfig(external_constants=True))
        if kind != "xnnpack":
            raise ValueError(f"kind must be 'portable' or 'xnnpack', got {kind!r}")
        from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
        from executorch.exir.passes.external_constants_pass import delegate_external_constants_pass_unlifted

        unlifted = ep.module()
        delegate_external_constants_pass_unlifted(module=unlifted, gen_tag_fn=lambda node: TAG)
        ep = torch.export.export(unlifted, args, strict=False)
        return to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch()


def _build(module: torch.nn.Module, inputs: tuple[Any, ...], kind: str) -> tuple[bytes, bytes]:
    manager = _manager(module, inputs, kind)
    with tempfile.TemporaryDirectory() as tmp:
        manager.write_tensor_data_to_file(tmp)
        files = sorted(Path(tmp).glob("*.ptd"))
        if len(files) != 1:
            raise AssertionError(f"expected one .ptd, the export wrote {[f.name for f in files]}")
        return bytes(manager.buffer), files[0].read_bytes()


def export_external(module: torch.nn.Module, inputs: tuple[Any, ...], kind: str = "portable") -> tuple[bytes, bytes]:
    """(.pte bytes, .ptd bytes) of `module` exported with its weights in a
    data file; kind "portable" (external_constants=True) or "xnnpack"
    (XNNPACK-lowered, weights tagged for the data file)."""
    where = _export.cache_dir()
    options = {"_external": kind, "_external_source": _export._file_digest(__file__)}
    key = _export._export_key(module, inputs, options)
    # the .ptd first: the .pte's presence says both are there
    paths = None if where is None else [where / f"{key}.ptd", where / f"{key}.pte"]
    ptd, pte = _export.cached(paths, lambda: _build(module, inputs, kind)[::-1])
    assert pte is not None and ptd is not None
    return pte, ptd


# ---- reading a .ptd's fields ---------------------------------------------------

# flat_tensor.fbs slots.
FT_SEGMENTS, FT_NAMED_DATA = 1, 2
SEG_OFFSET, SEG_SIZE = 0, 1
ND_KEY, ND_SEGMENT, ND_LAYOUT = 0, 1, 2
LAYOUT_SCALAR_TYPE, LAYOUT_SIZES, LAYOUT_DIM_ORDER = 0, 1, 2


@dataclass
class Entry:
    """One NamedData entry and the byte positions of its fields (None when absent)."""

    key: str
    key_at: int
    segment_index: int
    segment_index_at: int | None
    scalar_type_at: int | None
    sizes_at: int | None  # first element
    dim_order_at: int | None  # first element
    rank: int


class FlatTensor:
    """Just enough of a flatbuffer reader to find a .ptd's fields: header
    fields at fixed offsets, segments and named-data entries by position."""

    def __init__(self, data: bytes) -> None:
        self.b = bytes(data)
        assert self.b[4:8] == b"FT01" and self.b[8:12] == b"FH01", "not a .ptd"
        (self.header_length,) = struct.unpack_from("<I", self.b, 12)
        self.fb_offset, self.fb_size, self.segment_base, self.segment_size = struct.unpack_from("<4Q", self.b, 16)
        self.root = struct.unpack_from("<I", self.b, 0)[0]

    def _field(self, table: int, slot: int) -> int | None:
        vt = table - struct.unpack_from("<i", self.b, table)[0]
        vtlen = struct.unpack_from("<H", self.b, vt)[0]
        if 4 + 2 * slot + 2 > vtlen:
            return None
        off = struct.unpack_from("<H", self.b, vt + 4 + 2 * slot)[0]
        return table + off if off else None

    def _ref(self, at: int) -> int:
        return at + struct.unpack_from("<I", self.b, at)[0]

    def _vector(self, table: int, slot: int) -> tuple[int, int]:
        """(first element's position, count) of a vector field."""
        at = self._field(table, slot)
        assert at is not None
        vec = self._ref(at)
        return vec + 4, struct.unpack_from("<I", self.b, vec)[0]

    def segments(self) -> list[tuple[int | None, int | None]]:
        """Per segment: the byte positions of its offset and size fields."""
        first, n = self._vector(self.root, FT_SEGMENTS)
        out = []
        for i in range(n):
            t = self._ref(first + 4 * i)
            out.append((self._field(t, SEG_OFFSET), self._field(t, SEG_SIZE)))
        return out

    def entries(self) -> list[Entry]:
        first, n = self._vector(self.root, FT_NAMED_DATA)
        out = []
        for i in range(n):
            t = self._ref(first + 4 * i)
            key_field = self._field(t, ND_KEY)
            assert key_field is not None
            s = self._ref(key_field)
            (klen,) = struct.unpack_from("<I", self.b, s)
            seg_at = self._field(t, ND_SEGMENT)
            seg = struct.unpack_from("<I", self.b, seg_at)[0] if seg_at else 0
            lay_field = self._field(t, ND_LAYOUT)
            st_at = sizes_at = order_at = None
            rank = 0
            if lay_field is not None:
                lay = self._ref(lay_field)
                st_at = self._field(lay, LAYOUT_SCALAR_TYPE)
                sizes_at, rank = self._vector(lay, LAYOUT_SIZES)
                order_at, _ = self._vector(lay, LAYOUT_DIM_ORDER)
            out.append(Entry(self.b[s + 4 : s + 4 + klen].decode(), s + 4, seg, seg_at, st_at, sizes_at, order_at,
                             rank))
        return out
