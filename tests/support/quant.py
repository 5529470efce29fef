"""Quantized exports for the tests: PT2E with ExecuTorch's XNNPACKQuantizer
and the LLM embedding quantizer, each left as portable quantized_decomposed
ops (nothing delegated), cached on disk like export.py's exports.

The cache key is export.py's (`_export_key`: versions, module sources,
parameters, input shapes) plus the quantizer configuration, the calibration
inputs by value (they decide every scale and zero point) and this file."""

from __future__ import annotations

import copy
import warnings
from typing import Any

import torch

from support.export import _export_key, _file_digest, cache_dir, cached, export_manager


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
    where = cache_dir()
    options = {"quant": quant, "calibration": calibration, "quant.py": _file_digest(__file__)}
    if lower:
        options["lower"] = "XnnpackPartitioner"
    if partitioner_options:
        options["partitioner_options"] = partitioner_options
    paths = None if where is None else [where / f"q{_export_key(module, inputs, options)}.pte"]
    (pte,) = cached(paths, lambda: [_export_quantized(module, inputs, quant, calibration, lower, partitioner_options)])
    assert pte is not None
    return pte


def _export_quantized(module: torch.nn.Module, inputs: tuple[Any, ...], quant: dict[str, Any],
                         calibration: list[tuple[torch.Tensor, ...]], lower: bool,
                         partitioner_options: dict[str, Any] | None) -> bytes:
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

        return bytes(lower_manager(m, inputs, partitioner_options=partitioner_options).buffer)
    return bytes(export_manager(m, inputs, strict_ir=False).buffer)


# ---- quantized convolutions and requantization ------------------------------------


class DeconvNet(torch.nn.Module):
    """The quantized convolutions of XNNPACK beyond the plain ones: a grouped
    (not depthwise) Conv2d, a ConvTranspose2d of stride 2 with output padding,
    one of stride 3 with a 2x2 kernel (phases of the output that no tap
    reaches: the bias alone), and a 1x1 Conv2d (which XNNPACK runs as a
    FullyConnected, a dynamically quantized input quantized per pixel)."""

    def __init__(self) -> None:
        super().__init__()
        self.c = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.g = torch.nn.Conv2d(8, 8, 3, padding=1, groups=2)
        self.t = torch.nn.ConvTranspose2d(8, 6, 3, stride=2, padding=1, output_padding=1)
        self.t2 = torch.nn.ConvTranspose2d(6, 4, 2, stride=3)
        self.p = torch.nn.Conv2d(4, 5, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.c(x))
        y = self.t(self.g(y))
        return self.p(self.t2(torch.relu(y)))


def deconv_net() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...], list[tuple[torch.Tensor, ...]]]:
    """DeconvNet, an input and calibration inputs (seeded)."""
    torch.manual_seed(3)
    calib = [(torch.randn(2, 3, 8, 8),) for _ in range(4)]
    return DeconvNet().eval(), (torch.randn(2, 3, 8, 8),), calib


class QdqChain(torch.nn.Module):
    """Explicit quantize / dequantize pairs (scale 0.05, zero point 3) around
    max pooling, a clamp and an abs: lowered, one XNNPACK delegate of
    Convert fp32 -> qint8, StaticTranspose, MaxPooling2d and Clamp on qint8,
    Convert to fp32, Abs, Convert back to qint8, StaticTranspose, Convert to
    fp32."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        from executorch.exir.dialects._ops import ops as exir_ops

        q = exir_ops.edge.quantized_decomposed.quantize_per_tensor.default
        dq = exir_ops.edge.quantized_decomposed.dequantize_per_tensor.default

        def qdq(t: torch.Tensor) -> torch.Tensor:
            return dq(q(t, 0.05, 3, -128, 127, torch.int8), 0.05, 3, -128, 127, torch.int8)

        y = qdq(torch.nn.functional.max_pool2d(qdq(x), 2))
        y = qdq(torch.clamp(y, -0.5, 0.7))
        return qdq(torch.abs(y))


REQUANT_SCALE, REQUANT_ZERO_POINT = 0.08, 9


def qdq_chain(quint8: bool = False, requant: bool = False) -> tuple[bytes, tuple[torch.Tensor, ...]]:
    """QdqChain lowered, then (ExecuTorch 1.5.1's writer emits neither) its
    payload rewritten in place: requant makes the Convert after Abs read the
    Clamp's qint8 output instead, with the values after it quantized with
    scale REQUANT_SCALE and zero point REQUANT_ZERO_POINT, so that it is a
    Convert qint8 -> qint8 (a requantization; Abs's result goes unused);
    quint8 makes every qint8 value quint8 with its zero point plus 128 (the
    same real values). Returns the program and an input."""
    import struct

    from support.xnnpack import Table, export_xnnpack, payloads, union_names

    register_quantized_ops()
    torch.manual_seed(4)
    x = (torch.randn(1, 4, 8, 8) * 4,)
    pte = export_xnnpack(QdqChain(), x)
    g = payloads(pte)[0].graph(pte)
    vals: dict[int, tuple[Table, Table | None]] = {}
    for xv in g.tables(2):
        u = xv.table(1)
        assert u is not None
        if xv.scalar(0, "B") == 2:  # XNNQuantizedTensorValue
            tv = u.table(0)
            assert tv is not None
            vals[tv.scalar(6, "I")] = (tv, u.table(2))
        else:
            vals[u.scalar(6, "I")] = (u, None)
    names = union_names()
    nodes = [(names[n.scalar(0, "B")], n.table(1)) for n in g.tables(1)]
    b = bytearray(pte)

    def put(fmt: str, pos: int | None, value: Any) -> None:
        assert pos is not None, "field is absent"
        struct.pack_into("<" + fmt, b, pos, value)

    if requant:
        clamp = next(t for name, t in nodes if name == "Clamp")
        assert clamp is not None
        # the Convert fp32 -> qint8 after Abs (Convert: input_id, output_id)
        convert = [
            t
            for name, t in nodes
            if name == "Convert" and t is not None and vals[t.scalar(0, "I")][1] is None and vals[t.scalar(1, "I")][1]
        ][-1]
        assert convert is not None
        put("I", convert.field(0), clamp.scalar(1, "I"))
        out = convert.scalar(1, "I")
        # and the StaticTranspose after it (num_dims, perm, input_id, output_id)
        after = [t.scalar(3, "I") for name, t in nodes if name == "StaticTranspose" and t and t.scalar(2, "I") == out]
        for vid in [out, *after]:
            qp = vals[vid][1]
            assert qp is not None
            put("f", qp.field(0), REQUANT_SCALE)
            put("i", qp.field(1), REQUANT_ZERO_POINT)
    if quint8:
        for tv, qp in vals.values():
            if tv.scalar(0, "h") == 3:  # qint8
                assert qp is not None
                put("h", tv.field(0), 4)  # quint8
                put("i", qp.field(1), struct.unpack_from("<i", b, qp.field(1) or 0)[0] + 128)
    return bytes(b), x
