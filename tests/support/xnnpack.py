"""XNNPACK-lowered programs for the delegate tests: `export_xnnpack` lowers a
module with ExecuTorch's XnnpackPartitioner (to_edge_transform_and_lower)
and caches the .pte like export.export_program, under the same key function
plus this file's digest; `payloads` reads the XNNPACK payloads and node types
out of a .pte with executorch's own deserialisers."""

from __future__ import annotations

import os
import tempfile
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
) -> Any:
    """Exports `module` and lowers every partition XnnpackPartitioner takes;
    returns the ExecutorchProgramManager."""
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import ExecutorchBackendConfig, to_edge_transform_and_lower
    from executorch.exir.passes import MemoryPlanningPass

    args = tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in inputs)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        ep = torch.export.export(module, args, dynamic_shapes=dynamic_shapes, strict=False)
        edge = to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()])
        config = ExecutorchBackendConfig(
            memory_planning_pass=MemoryPlanningPass(
                alloc_graph_input=alloc_graph_input, alloc_graph_output=alloc_graph_output
            )
        )
        return edge.to_executorch(config)


def export_xnnpack(module: torch.nn.Module, inputs: tuple[Any, ...], **kwargs: Any) -> bytes:
    """The lowered program's .pte bytes (lower_manager's options), cached on
    disk like export.export_program."""
    where = os.environ.get("PYEXEC_TEST_EXPORT_CACHE", str(_export._CACHE))
    if where == "off":
        return bytes(lower_manager(module, inputs, **kwargs).buffer)
    options = dict(kwargs, _lowering="XnnpackPartitioner", _lowering_source=_export._file_digest(__file__))
    path = Path(where) / f"{_export._export_key(module, inputs, options)}.pte"
    if path.is_file():
        return path.read_bytes()
    pte = bytes(lower_manager(module, inputs, **kwargs).buffer)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        f.write(pte)
    os.replace(tmp, path)
    return pte
