"""Regenerates the small .pte fixtures committed for the C tests
(native/tests/data). Run from the repository root:

    python scripts/make_fixtures.py

Besides the API fixtures (and two_methods.bpte, a bundled program from
tests/support/bundled.py) it writes native/tests/data/models/: a few real
programs (a conv net, a transformer encoder layer, an MLP lowered to XNNPACK,
a PT2E-quantized MLP), each NAME.pte with NAME.io holding its inputs and the
outputs computed here on x86, for native/tests/run_fixtures.c (the model runner
the aarch64 build runs under emulation). NAME.io, little-endian:

    "PXIO", u32 version (1), f32 rtol, f32 atol, u32 inputs, u32 outputs,
    then each tensor: i32 dtype (a pyexec_dtype code), i32 rank,
    i64 sizes[rank], u64 nbytes, the bytes (contiguous)

An output matches when |got - want| <= atol + rtol * |want| elementwise
(float32), or exactly (integer dtypes).
"""

from __future__ import annotations

import struct
import sys
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support.bundled import make_bundle  # noqa: E402
from support.export import export_program, run_with_executorch  # noqa: E402
from support.external import export_external  # noqa: E402
from support.models import cnn, mlp, transformer  # noqa: E402
from support.quant import export_quantized  # noqa: E402
from support.xnnpack import export_xnnpack  # noqa: E402

# pyexec_dtype codes of the dtypes the model fixtures use.
DTYPE_CODES = {torch.uint8: 0, torch.int8: 1, torch.int32: 3, torch.int64: 4, torch.float32: 6, torch.bool: 11}


class AddMul(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x + y, x * y


class CacheUpdate(torch.nn.Module):
    def forward(self, cache: torch.Tensor, idx: torch.Tensor, val: torch.Tensor) -> torch.Tensor:
        cache.index_copy_(0, idx, val)
        return cache.sum(0, keepdim=True)


class AddWeight(torch.nn.Module):
    """x + w with w = [0.5, 1.5, 2.5, 3.5, 4.5, 5.5] kept in a data file."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.arange(6.0).reshape(2, 3) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.w


class Mlp8da4w(torch.nn.Module):
    """Two Linear layers for torchao's 8da4w (depths divisible by its group size 32)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(64, 96)
        self.b = torch.nn.Linear(96, 32)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


def pack_tensor(t: torch.Tensor) -> bytes:
    t = t.detach().contiguous()
    data = t.numpy().tobytes()
    head = struct.pack("<ii", DTYPE_CODES[t.dtype], t.dim()) + struct.pack(f"<{t.dim()}q", *t.shape)
    return head + struct.pack("<Q", len(data)) + data


def pack_io(inputs: tuple[Any, ...], outputs: list[torch.Tensor], rtol: float, atol: float) -> bytes:
    head = b"PXIO" + struct.pack("<IffII", 1, rtol, atol, len(inputs), len(outputs))
    return head + b"".join(pack_tensor(t) for t in [*inputs, *outputs])


def as_list(out: Any) -> list[torch.Tensor]:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def model_fixtures() -> dict[str, tuple[bytes, bytes]]:
    """NAME -> (.pte, .io). Float programs are checked against eager PyTorch
    (rtol 1e-4, atol 1e-5, as the Python suite's assert_close); the quantized
    one against ExecuTorch's portable runtime, within one int8 step of its
    output range (rounding at a requantize may land on the other side)."""
    fixtures = {}
    for name, spec in (("cnn", cnn()), ("transformer", transformer())):
        with torch.no_grad():
            want = as_list(spec.module(*spec.inputs))
        fixtures[name] = (export_program(spec.module, spec.inputs), pack_io(spec.inputs, want, 1e-4, 1e-5))
    spec = mlp()
    with torch.no_grad():
        want = as_list(spec.module(*spec.inputs))
    fixtures["mlp_xnnpack"] = (export_xnnpack(spec.module, spec.inputs), pack_io(spec.inputs, want, 1e-4, 1e-5))
    pte = export_quantized(spec.module, spec.inputs, {"scheme": "pt2e", "per_channel": True})
    want = as_list(run_with_executorch(pte, spec.inputs))
    step = float(max(t.abs().max() for t in want)) / 127
    fixtures["mlp_q8"] = (pte, pack_io(spec.inputs, want, 0.0, step))
    # XNNPACK's quantized graphs: qd8 activations x 4-bit blockwise weights
    # (torchao 8da4w, group 32) lowered, checked against ExecuTorch+XNNPACK:
    # the int32 sums are the same, only float scaling rounds in another order.
    torch.manual_seed(3)
    m, x = Mlp8da4w().eval(), (torch.randn(3, 64),)
    pte = export_quantized(m, x, {"scheme": "torchao", "bits": 4, "group_size": 32}, lower=True)
    want = as_list(run_with_executorch(pte, x))
    fixtures["mlp_8da4w_xnnpack"] = (pte, pack_io(x, want, 1e-5, 1e-5 * float(max(t.abs().max() for t in want))))
    # static int8 (PT2E per-channel) lowered: convolutions, add, max pooling
    spec = cnn()
    pte = export_quantized(spec.module, spec.inputs, {"scheme": "pt2e", "per_channel": True}, lower=True)
    want = as_list(run_with_executorch(pte, spec.inputs))
    step = float(max(t.abs().max() for t in want)) / 127
    fixtures["cnn_q8_xnnpack"] = (pte, pack_io(spec.inputs, want, 0.0, step))
    return fixtures


def main() -> None:
    out = ROOT / "native" / "tests" / "data"
    out.mkdir(parents=True, exist_ok=True)
    xy = (torch.randn(2, 3), torch.randn(2, 3))
    (out / "add_mul.pte").write_bytes(export_program(AddMul(), xy))
    (out / "add_mul_unplanned.pte").write_bytes(
        export_program(AddMul(), xy, alloc_graph_input=False, alloc_graph_output=False)
    )
    cache = (torch.zeros(8, 4), torch.tensor([0]), torch.randn(1, 4))
    (out / "cache_update_unplanned.pte").write_bytes(
        export_program(CacheUpdate(), cache, alloc_graph_input=False, alloc_graph_output=False, reinplace=True)
    )
    pte, ptd = export_external(AddWeight(), (torch.randn(2, 3),))
    (out / "add_weight.pte").write_bytes(pte)
    (out / "add_weight.ptd").write_bytes(ptd)
    # a bundled program (.bpte): two methods with test cases, one with a dynamic batch dim
    (out / "two_methods.bpte").write_bytes(make_bundle())
    models = out / "models"
    models.mkdir(exist_ok=True)
    for name, (pte, io) in model_fixtures().items():
        (models / f"{name}.pte").write_bytes(pte)
        (models / f"{name}.io").write_bytes(io)
    for f in sorted([*out.glob("*.pte"), *out.glob("*.ptd"), *out.glob("*.bpte"), *models.glob("*")]):
        print(f"{f.relative_to(ROOT)}: {f.stat().st_size} bytes")


if __name__ == "__main__":
    main()
