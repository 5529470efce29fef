"""fp16 and bf16 graphs lowered to XNNPACK: real programs exported with
ExecuTorch's exporter and XnnpackPartitioner (enable_bf16=True for bf16) in
half and bfloat16 precision (a conv net, an MLP, a chain of elementwise and
unary nodes, softmax, pooling with padding, batch matrix multiplies with
slices and permutes, and dynamically quantized linears whose activations
and outputs are fp16 or bf16), each run by pyexec and compared with
ExecuTorch 1.5.1's runtime on the same file (where that runtime runs the
graph: it refuses bf16 convolution, softmax, pooling and batch matrix
multiply) and with torch eager, at one tolerance for both.

Tolerance. pyexec computes every node in float32 and rounds its output to
the value's type where XNNPACK does (xnn_graph.h), to nearest even (on CPUs
with AVX512-FP16, float16 products and convolutions sum in float16 as
XNNPACK's do there: test_xnnpack_f16_arith.py holds those to ExecuTorch's
bits, so here they only add their own roundings to the chain): half a
unit in the last place, eps / 2 relative, eps = 2^-10 for fp16 and 2^-7 for
bf16. torch eager rounds after every operation too, and XNNPACK's own fp16
kernels for the transcendental functions and depthwise convolution differ
from float32-then-round by an ulp or two (its depthwise kernel rounds its
accumulator after each tap). A handful of such roundings along the longest
chain of a model stays within 4 eps of the output's largest magnitude, the
bound both comparisons use (observed: at most 2.4 eps against ExecuTorch on
AMD Zen 4, most outputs equal to it bit for bit; equal to eager or within an
eps). XNNPACK chooses its fp16 kernels by CPU, and on some Intel CPUs its
exp and log are 4.5 eps from the exact value: an output farther than the
bound from ExecuTorch's passes only where pyexec's is the closer of the two
to the float64 result. The
quantized linears differ from eager by the quantization itself: against
eager their bound is the relative L2 error of test_xnnpack_quant.py.

Memory: an fp16 Linear of 64 MiB of weights keeps them 16-bit (packed once,
the file's pages handed back), never as a float32 copy.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from support.export import run_with_executorch
from support.quant import export_quantized, register_quantized_ops
from support.xnnpack import export_xnnpack, node_types, union_names
from unit.test_hostile import SANITIZED, child_env

import pyexec

DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}
EPS = {torch.float16: 2.0**-10, torch.bfloat16: 2.0**-7}
TOLERANCE_EPS = 4.0

# ---- models ---------------------------------------------------------------------


class ConvNet(torch.nn.Module):
    """Conv (fused relu), conv, add, multiply, max pool, depthwise conv,
    hardtanh, average pool, a concatenation of slices and a linear layer."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.dw = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.fc = torch.nn.Linear(8 * 4 * 4 * 2, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.c1(x))
        z = self.c2(y)
        y = (y + z) * z
        y = self.dw(F.max_pool2d(y, 2))
        y = F.avg_pool2d(F.hardtanh(y), 2)
        y = torch.cat([y, y[:, 2:6], y[:, :4]], 1)
        return self.fc(y.flatten(1))


class MLP(torch.nn.Module):
    def __init__(self, d: int = 64, h: int = 128, o: int = 32) -> None:
        super().__init__()
        self.a = torch.nn.Linear(d, h)
        self.b = torch.nn.Linear(h, o)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


class Unary(torch.nn.Module):
    """Every elementwise node the partitioner lowers, in short chains."""

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        a = torch.sqrt(x.abs() + 0.5)
        return (
            torch.exp(-a) * torch.log(a),
            torch.sigmoid(x) - torch.tanh(x),
            F.gelu(x) + F.hardswish(x),
            F.leaky_relu(x, 0.1) / 3.0,
            torch.clamp(x, -0.5, 0.5),
            torch.floor(x) + torch.ceil(x),
            torch.maximum(a, x) - torch.minimum(-a, x),
            x * x,
            torch.rsqrt(a),
            -torch.sin(x) + torch.cos(x),
        )


class Softmax(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return torch.softmax(x * 1.5, -1), torch.softmax(x.permute(0, 2, 1), -1)


class Pool(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        y = F.pad(x, (1, 1, 2, 0), value=0.25)
        return F.max_pool2d(y, 3, stride=2), F.avg_pool2d(x, 2), x.mean(dim=(2, 3), keepdim=True)


class Bmm(torch.nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        sliced = torch.bmm(a[:, :, 3:8] * 2.0, b.permute(0, 2, 1)[:, :, 3:8].permute(0, 2, 1))
        return torch.bmm(a, b), sliced[:, 1:]


def _inputs(name: str, dtype: torch.dtype) -> tuple[torch.Tensor, ...]:
    g = torch.Generator().manual_seed(1)

    def r(*shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=g).to(dtype)

    shapes: dict[str, tuple[tuple[int, ...], ...]] = {
        "conv_net": ((1, 3, 16, 16),),
        "mlp": ((4, 64),),
        "unary": ((3, 70),),
        "softmax": ((2, 5, 40),),
        "pool": ((1, 4, 9, 10),),
        "bmm": ((2, 7, 24), (2, 24, 9)),
    }
    xs = tuple(r(*s) for s in shapes[name])
    return (xs[0] * 2,) if name == "unary" else xs


MODELS: dict[str, tuple[type[torch.nn.Module], set[str]]] = {
    # name: (model, node types its payload must hold)
    "conv_net": (ConvNet, {"Conv2d", "DepthwiseConv2d", "MaxPooling2d", "AvgPooling2d", "Concatenate3", "Add",
                           "Multiply", "FullyConnected", "StaticSlice"}),
    "mlp": (MLP, {"FullyConnected"}),
    "unary": (Unary, {"Abs", "Add", "Ceiling", "Clamp", "Cos", "Div", "Exp", "Floor", "Hardswish", "LeakyReLU",
                      "Log", "Maximum", "Minimum", "Multiply", "Negate", "ReciprocalSquareRoot", "Sigmoid", "Sin",
                      "SquareRoot", "Subtract", "Tanh"}),
    "softmax": (Softmax, {"Softmax", "StaticTranspose"}),
    "pool": (Pool, {"MaxPooling2d", "AvgPooling2d", "GlobalAvgPooling2d", "StaticConstantPad"}),
    "bmm": (Bmm, {"BatchMatrixMultiply", "StaticSlice", "StaticTranspose"}),
}
# Graphs ExecuTorch 1.5.1's runtime refuses to build ("Failed to create ... node"):
# pyexec is compared with eager alone there.
ET_REFUSES = {("bf16", "conv_net"), ("bf16", "softmax"), ("bf16", "pool"), ("bf16", "bmm")}


def _partitioner(dtype: torch.dtype) -> dict[str, Any] | None:
    return {"enable_bf16": True} if dtype == torch.bfloat16 else None


def _lower(name: str, dtype: torch.dtype) -> tuple[bytes, torch.nn.Module, tuple[torch.Tensor, ...]]:
    cls, nodes = MODELS[name]
    torch.manual_seed(0)
    module = cls().eval().to(dtype)
    x = _inputs(name, dtype)
    pte = export_xnnpack(module, x, partitioner_options=_partitioner(dtype))
    names = union_names()
    used = {names[t] for t in node_types(pte)}
    assert nodes <= used, f"the partitioner no longer emits {sorted(nodes - used)} for {name}: {sorted(used)}"
    return pte, module, x


def _close(got: torch.Tensor, want: torch.Tensor, dtype: torch.dtype, what: str, eps: float = TOLERANCE_EPS) -> None:
    """Within `eps` units of the type's epsilon times the largest |want|."""
    assert got.dtype == want.dtype == dtype, f"{what}: dtype {got.dtype}, expected {want.dtype}"
    assert got.shape == want.shape, f"{what}: shape {tuple(got.shape)} != {tuple(want.shape)}"
    g, w = got.double(), want.double()
    bound = eps * EPS[dtype] * max(float(w.abs().max()), EPS[dtype])
    err = float((g - w).abs().max())
    assert err <= bound, f"{what}: largest difference {err:.3g} exceeds {bound:.3g} ({err / bound * eps:.2f} eps)"


def _outputs(result: Any) -> list[torch.Tensor]:
    return [result] if isinstance(result, torch.Tensor) else list(result)


@pytest.mark.parametrize("dt", sorted(DTYPES))
@pytest.mark.parametrize("name", sorted(MODELS))
def test_lowered_half_model_matches_executorch_and_eager(name: str, dt: str) -> None:
    dtype = DTYPES[dt]
    pte, module, x = _lower(name, dtype)
    program = pyexec.load(pte)
    delegates = program.delegates("forward")
    assert delegates and all(d.runnable and not d.unsupported for d in delegates), delegates
    ours = _outputs(program.load_method("forward").execute([t.clone() for t in x]))
    with torch.no_grad():
        eager = _outputs(module(*x))
    assert len(ours) == len(eager)
    for k, (o, e) in enumerate(zip(ours, eager)):
        _close(o, e, dtype, f"{dt} {name} output {k} against eager")
    if (dt, name) in ET_REFUSES:
        with pytest.raises(RuntimeError):
            run_with_executorch(pte, x)
        return
    ref = run_with_executorch(pte, x)
    exact = None
    for k, (o, r) in enumerate(zip(ours, ref)):
        try:
            _close(o, r, dtype, f"{dt} {name} output {k} against ExecuTorch")
        except AssertionError as far:
            # XNNPACK picks its half-precision kernels by CPU, and some of its
            # exp / log kernels are looser than float32-then-round (4.5 eps
            # from the exact value on some x86 CPUs): there pyexec must be the
            # closer of the two to the float64 result.
            if exact is None:
                with torch.no_grad():
                    exact = _outputs(module.double()(*[t.double() for t in x]))
            e = exact[k]
            ours_err, et_err = float((o.double() - e).abs().max()), float((r.double() - e).abs().max())
            assert ours_err <= et_err, f"{far}; and farther from float64 ({ours_err:.3g}) than it ({et_err:.3g})"


def test_half_inputs_are_refused_in_another_dtype() -> None:
    pte, _, x = _lower("mlp", torch.float16)
    method = pyexec.load(pte).load_method("forward")
    with pytest.raises(pyexec.Error, match="float16"):
        method.execute([x[0].float()])


# ---- dynamically quantized linears with fp16 / bf16 activations ----------------------

QUANT = {
    "pt2e_dynamic": {"scheme": "pt2e", "per_channel": True, "dynamic": True},
    "8da4w_g32": {"scheme": "torchao", "bits": 4, "group_size": 32},
}
# (dtype, quantization) pairs the quantizers export: PT2E's dynamic
# quantizer takes float32 and fp16 models only.
QUANT_CASES = [("fp16", "pt2e_dynamic"), ("fp16", "8da4w_g32"), ("bf16", "8da4w_g32")]


class Chain(MLP):
    """Quantized linears with float nodes between and after them."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.a(x)
        return self.b(torch.tanh(h) * 1.5 + h) * 0.5


@pytest.mark.parametrize("dt,scheme", QUANT_CASES)
def test_dynamically_quantized_half_linears_match_executorch(dt: str, scheme: str) -> None:
    """Convert (fp16 / bf16 -> qdint8) and qdint8 FullyConnected -> fp16 /
    bf16: the int8 activations, scales and int32 sums are XNNPACK's, and the
    float nodes after a quantized product stay float32 inside the graph as
    XNNPACK keeps them, so the outputs are expected to equal ExecuTorch's
    (observed: equal); allowed: one eps of the largest output, for a rounding
    tie decided differently. Rounding those float nodes' outputs to the type
    instead moves the result by 3 eps and more."""
    register_quantized_ops()
    dtype = DTYPES[dt]
    torch.manual_seed(1)
    for module in (MLP().eval().to(dtype), Chain().eval().to(dtype)):
        x = (torch.randn(4, 64, generator=torch.Generator().manual_seed(2)).to(dtype),)
        pte = export_quantized(module, x, QUANT[scheme], lower=True, partitioner_options=_partitioner(dtype))
        names = union_names()
        assert {"Convert", "FullyConnected"} <= {names[t] for t in node_types(pte)}
        program = pyexec.load(pte)
        assert all(d.runnable and not d.unsupported for d in program.delegates("forward"))
        (ours,) = program.load_method("forward").execute([t.clone() for t in x])
        (ref,) = run_with_executorch(pte, x)
        _close(ours, ref, dtype, f"{dt} {scheme} {type(module).__name__} against ExecuTorch", eps=1.0)
        with torch.no_grad():
            e = module(*x).double()
        rel = float((ours.double() - e).norm() / e.norm())
        assert rel < 0.1, f"relative L2 error to eager {rel:.3f}"


# ---- memory ------------------------------------------------------------------------------


@pytest.mark.skipif(SANITIZED, reason="resident memory is meaningless under AddressSanitizer")
def test_fp16_linear_weights_are_not_resident_as_float32(tmp_path: Path) -> None:
    """64 MiB of fp16 weights: packed once into 16-bit panels (the same
    bytes) and the file's pages no longer mapped, each block
    widened to float32 only in the GEMM's packing buffer while it runs. A
    float32 copy alone would be twice the file; the bound, 1.4 x the file +
    4 MiB, is what test_xnnpack_quant.py allows the 4-bit weights."""
    torch.manual_seed(3)
    module = torch.nn.Linear(4096, 8192, bias=False).eval().half()
    x = (torch.randn(1, 4096).half(),)
    pte = export_xnnpack(module, x)
    path = tmp_path / "m.pte"
    with open(path, "wb") as f:  # flushed: the kernel cannot drop dirty page-cache pages
        f.write(pte)
        f.flush()
        os.fsync(f.fileno())
    script = (
        "import resource, sys, numpy as np, pyexec\n"
        "def rss(): return int(open('/proc/self/statm').read().split()[1]) * resource.getpagesize()\n"
        "base = rss()\n"
        "m = pyexec.load(sys.argv[1]).load_method('forward')\n"
        "loaded = rss()\n"
        "(y,) = m.execute([np.ones((1, 4096), np.float16)])\n"
        "print(loaded - base, rss() - base, float(np.abs(y.astype(np.float64)).max()))\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=True, env=child_env()
    )
    loaded_s, ran_s, ymax_s = proc.stdout.split()
    loaded, ran = int(loaded_s), int(ran_s)
    with torch.no_grad():
        want = float(module(torch.ones(1, 4096).half()).abs().max())
    assert abs(float(ymax_s) - want) <= TOLERANCE_EPS * EPS[torch.float16] * want
    size, mib = len(pte), 2**20
    assert size > 64 * mib
    assert loaded < 1.4 * size + 4 * mib, f"load grew RSS by {loaded / mib:.1f} MiB for a {size / mib:.1f} MiB file"
    assert ran < 1.4 * size + 4 * mib, f"a run grew RSS to {ran / mib:.1f} MiB for a {size / mib:.1f} MiB file"


def test_half_values_convert_exactly_at_the_boundary() -> None:
    """A graph that only moves values (permute, slice, concatenate): every
    fp16 and bf16 bit pattern but NaN comes out as it went in."""

    class Move(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            y = x.permute(1, 0)
            return torch.cat([y[:, 1:], y[:, :1]], 1)

    for dtype in (torch.float16, torch.bfloat16):
        bits = torch.arange(-(2**15), 2**15, dtype=torch.int32).to(torch.int16).view(dtype).reshape(256, 256)
        x = torch.where(torch.isnan(bits), torch.zeros_like(bits), bits)
        zeros = (torch.zeros(256, 256, dtype=dtype),)
        pte = export_xnnpack(Move().eval(), zeros, partitioner_options=_partitioner(dtype))
        assert node_types(pte), "nothing was delegated"
        (got,) = pyexec.load(pte).load_method("forward").execute([x.clone()])
        want = Move()(x)
        assert torch.equal(got.view(torch.int16), want.view(torch.int16)), dtype


def test_half_program_outputs_to_numpy() -> None:
    pte, module, x = _lower("mlp", torch.float16)
    (y,) = pyexec.load(pte).load_method("forward", output_type="numpy").execute([x[0].numpy()])
    assert isinstance(y, np.ndarray) and y.dtype == np.float16
    with torch.no_grad():
        _close(torch.from_numpy(y), module(*x), torch.float16, "numpy output against eager")


def test_rounding_points_are_xnnpacks() -> None:
    """Where the values are rounded, worked out without pyexec: fp16 rounds
    after every node, as eager does after every op, so the results are
    eager's bit for bit; bf16 keeps float32 between elementwise nodes and
    rounds once, at the output (XNNPACK has no bf16 elementwise kernels on
    x86), which is the float32 computation on the bf16 constants, rounded."""
    x16 = (torch.randn(8, 300, generator=torch.Generator().manual_seed(4)) * 3).half()

    class Lin(torch.nn.Module):
        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return (x * 1.375 + 0.125) * 3.0 - x  # constants exact in both types, as eager's scalars

    pte = export_xnnpack(Lin().eval(), (x16,))
    (got,) = pyexec.load(pte).load_method("forward").execute([x16.clone()])
    assert torch.equal(got, Lin()(x16)), "fp16: not rounded after each node as eager is"
    xb = x16.to(torch.bfloat16)
    pte = export_xnnpack(Lin().eval(), (xb,), partitioner_options=_partitioner(torch.bfloat16))
    (got,) = pyexec.load(pte).load_method("forward").execute([xb.clone()])
    xf = xb.float()
    want = ((xf * 1.375 + 0.125) * 3.0 - xf).to(torch.bfloat16)
    assert torch.equal(got, want), "bf16: not one float32 computation rounded at the output"
    assert not torch.equal(got, Lin()(xb)), "the bf16 inputs no longer tell the two rounding rules apart"
    (ref,) = run_with_executorch(pte, (xb,))
    _close(got, ref, torch.bfloat16, "bf16 chain against ExecuTorch")
