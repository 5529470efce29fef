"""Quantized exports for the tests: PT2E with ExecuTorch's XNNPACKQuantizer
and the LLM embedding quantizer, each left as portable quantized_decomposed
ops (nothing delegated), cached on disk like export.py's exports.

The cache key is export.py's (`_export_key`: versions, module sources,
parameters, input shapes) plus the quantizer configuration, the calibration
inputs by value (they decide every scale and zero point) and this file."""

from __future__ import annotations

import copy
import os
import tempfile
import warnings
from pathlib import Path
from typing import Any

import torch

from support.export import _CACHE, _export_key, _file_digest, export_manager


def register_quantized_ops() -> None:
    """Registers the quantized_decomposed ops with torch: the reference ops
    (torch.ao) and ExecuTorch's (its AOT library: the out variants, add,
    mixed_*, the embeddings)."""
    import executorch.exir.passes._quant_patterns_and_replacements  # noqa: F401
    import executorch.kernels.quantized  # noqa: F401
    from torch.ao.quantization.fx import _decomposed  # noqa: F401


def _pt2e(module: torch.nn.Module, inputs: tuple[Any, ...], quant: dict[str, Any], calibration: list[tuple]) -> Any:
    from executorch.backends.xnnpack.quantizer.xnnpack_quantizer import (
        XNNPACKQuantizer,
        get_symmetric_quantization_config,
    )
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e

    config = get_symmetric_quantization_config(
        is_per_channel=quant.get("per_channel", False), is_dynamic=quant.get("dynamic", False)
    )
    graph = torch.export.export(module, inputs, strict=False).module()
    prepared = prepare_pt2e(graph, XNNPACKQuantizer().set_global(config))
    for args in calibration:
        prepared(*args)
    return convert_pt2e(prepared)


def _embedding(module: torch.nn.Module, quant: dict[str, Any]) -> torch.nn.Module:
    from executorch.examples.models.llama.source_transformation.quantize import EmbeddingQuantHandler

    bits = quant["bitwidth"]
    handler = EmbeddingQuantHandler(
        module,
        bitwidth=bits,
        group_size=quant.get("group_size"),
        packed=bits in (2, 4),
        precision=quant.get("precision"),
        quantize_with_hqq=False,
    )
    return handler.quantized_model()


def _torchao_8dax(module: torch.nn.Module, quant: dict[str, Any]) -> torch.nn.Module:
    """torchao's Int8DynamicActivationIntxWeightConfig as export_llm's
    "8da4w" / "8da8w" applies it to every Linear (group_size 0: per axis)."""
    from torchao.quantization.granularity import PerAxis, PerGroup
    from torchao.quantization.quant_api import Int8DynamicActivationIntxWeightConfig, quantize_
    from torchao.utils import unwrap_tensor_subclass

    group = quant.get("group_size", 0)
    config = Int8DynamicActivationIntxWeightConfig(
        weight_dtype=getattr(torch, f"int{quant.get('bits', 4)}"),
        weight_granularity=PerAxis(0) if group == 0 else PerGroup(group),
    )
    quantize_(module, config)
    return unwrap_tensor_subclass(module)


def export_quantized(
    module: torch.nn.Module,
    inputs: tuple[Any, ...],
    quant: dict[str, Any],
    calibration: list[tuple] | None = None,
    lower: bool = False,
    partitioner_options: dict[str, Any] | None = None,
) -> bytes:
    """Quantizes a copy of `module` as `quant` says and exports it for the
    portable runtime; returns the .pte bytes (cached).

    quant: {"scheme": "pt2e", "per_channel": bool, "dynamic": bool}, observed
    on `calibration` (default: `inputs`), or {"scheme": "embedding",
    "bitwidth": 8 | 4 | 2, "group_size": int | None, "precision": dtype}
    (export_llm's embedding quantizer: embedding_byte / 4bit / 2bit.dtype),
    or {"scheme": "torchao", "bits": 4 | 8, "group_size": int (0: per
    channel)} (8da4w / 8da8w). lower: lowered with XnnpackPartitioner
    instead of left as portable ops, with partitioner_options as its keyword
    arguments (enable_bf16=True for bfloat16 models)."""
    register_quantized_ops()
    calibration = calibration or [inputs]
    where = os.environ.get("PYEXEC_TEST_EXPORT_CACHE", str(_CACHE))
    options = {"quant": quant, "calibration": calibration, "quant.py": _file_digest(__file__)}
    if lower:
        options["lower"] = "XnnpackPartitioner"
    if partitioner_options:
        options["partitioner_options"] = partitioner_options
    path = None if where == "off" else Path(where) / f"q{_export_key(module, inputs, options)}.pte"
    if path is not None and path.is_file():
        return path.read_bytes()
    m = copy.deepcopy(module).eval()
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        if quant["scheme"] == "pt2e":
            m = _pt2e(m, inputs, quant, calibration)
        elif quant["scheme"] == "embedding":
            m = _embedding(m, quant)
        elif quant["scheme"] == "torchao":
            m = _torchao_8dax(m, quant)
        else:
            raise ValueError(f"unknown quantization scheme {quant['scheme']!r}")
    if lower:
        from support.xnnpack import lower_manager

        pte = bytes(lower_manager(m, inputs, partitioner_options=partitioner_options).buffer)
    else:
        pte = bytes(export_manager(m, inputs, strict_ir=False).buffer)
    if path is not None:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            f.write(pte)
        os.replace(tmp, path)  # atomic: a parallel run never reads half a file
    return pte
