"""XNNPACK's quantized graphs (issue 14): programs quantized with the real
quantizers (PT2E XNNPACKQuantizer static per-tensor and per-channel, and
dynamic; torchao's Int8DynamicActivationIntxWeightConfig "8da4w" with group
sizes 32 and 128 and per channel; transposed, grouped and 1x1 convolutions,
static and dynamic; a requantizing Convert and quint8 values, in real
payloads rewritten so since ExecuTorch 1.5.1 writes neither), lowered with
XnnpackPartitioner and also left as portable quantized ops, run by pyexec and
compared with ExecuTorch 1.5.1's runtime on the same file, and loosely with
torch eager on the float model.

Tolerances, from the reference's part A10:
  - static int8: every node's integer arithmetic is XNNPACK's (int32 sums,
    the same float requantization and rounding, Add's fixed point), so the
    outputs are expected to agree; allowed: one step of the output's
    quantization (its scale, read from the payload), for a rounding tie
    decided differently somewhere upstream.
  - dynamic (qd8) products: the int8 activations, their zero points and
    scales and the int32 sums are the same; only the float scaling and the
    bias addition may round in another order: a few float32 ulps of the
    outputs' magnitude (rtol 1e-5 of the largest output).
  - eager: quantization error itself, a loose relative bound.
Malformed quantization, convolution, Convert and quint8 parameters written
into a real payload fail at load with an error naming the value and what is
wrong; an 8da4w model's resident
memory after load stays near its file size (the 4-bit weights stay 4-bit).
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from support.export import run_with_executorch
from support.models import cnn
from support.quant import (
    REQUANT_SCALE,
    REQUANT_ZERO_POINT,
    deconv_net,
    export_quantized,
    qdq_chain,
    register_quantized_ops,
)
from support.xnnpack import Payload, Table, node_types, payloads, root, union_names
from unit.test_hostile import SANITIZED, child_env, run_cases

import pyexec

# ---- models ---------------------------------------------------------------


class ConvNet(torch.nn.Module):
    """Conv (fused relu), conv, add, multiply, max pool, depthwise conv,
    average pool, a concatenation and a linear layer."""

    def __init__(self) -> None:
        super().__init__()
        self.c1 = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.c2 = torch.nn.Conv2d(8, 8, 3, padding=1)
        self.dw = torch.nn.Conv2d(8, 8, 3, padding=1, groups=8)
        self.pool = torch.nn.MaxPool2d(2)
        self.ap = torch.nn.AvgPool2d(2)
        self.fc = torch.nn.Linear(8 * 4 * 4, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.c1(x))
        z = self.c2(y)
        y = (y + z) * z
        y = self.dw(self.pool(y))
        y = self.ap(y)
        y = torch.cat([y, y], 1)[:, :8]
        return self.fc(y.flatten(1))


class MLP(torch.nn.Module):
    def __init__(self, d: int = 256, h: int = 512, o: int = 128) -> None:
        super().__init__()
        self.a = torch.nn.Linear(d, h)
        self.b = torch.nn.Linear(h, o)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


def _conv_net() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...], list[tuple[torch.Tensor, ...]]]:
    torch.manual_seed(0)
    calib = [(torch.randn(1, 3, 16, 16),) for _ in range(4)]
    return ConvNet().eval(), (torch.randn(1, 3, 16, 16),), calib


def _mlp() -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    torch.manual_seed(1)
    return MLP().eval(), (torch.randn(4, 256),)


STATIC = {"per_tensor": {"scheme": "pt2e"}, "per_channel": {"scheme": "pt2e", "per_channel": True}}
DYNAMIC = {
    "pt2e_dynamic": {"scheme": "pt2e", "per_channel": True, "dynamic": True},
    "8da4w_g32": {"scheme": "torchao", "bits": 4, "group_size": 32},
    "8da4w_g128": {"scheme": "torchao", "bits": 4, "group_size": 128},
    "8da4w_per_channel": {"scheme": "torchao", "bits": 4, "group_size": 0},
}  # 8da8w (torchao, int8 per channel) lowers to the qd8 x qcint8 product pt2e_dynamic covers


def _static(name: str, lower: bool) -> tuple[bytes, torch.nn.Module, tuple[torch.Tensor, ...]]:
    m, x, calib = _conv_net()
    return export_quantized(m, x, STATIC[name], calibration=calib, lower=lower), m, x


def _dynamic(name: str, lower: bool) -> tuple[bytes, torch.nn.Module, tuple[torch.Tensor, ...]]:
    m, x = _mlp()
    return export_quantized(m, x, DYNAMIC[name], lower=lower), m, x


# ---- reading the payload --------------------------------------------------

DT_QINT8, DT_QDINT8, DT_QBINT4 = 3, 9, 10
Q_PER_CHANNEL, Q_PER_TENSOR, Q_PER_TOKEN, Q_GROUP = 1, 2, 3, 4


def _values(pte: bytes, p: Payload) -> list[tuple[Table, Table | None, int]]:
    """(tensor_value, quant_params or None, quant type) of every value."""
    out = []
    for xv in p.graph(pte).tables(2):
        u = xv.table(1)
        assert u is not None
        if xv.scalar(0, "B") == 2:
            tv = u.table(0)
            assert tv is not None
            out.append((tv, u.table(2), u.scalar(1, "B")))
        else:
            out.append((u, None, 0))
    return out


def _output_step(pte: bytes) -> float:
    """The scale of the qint8 value the program's last Convert dequantizes."""
    p = payloads(pte)[-1]
    vals = _values(pte, p)
    by_id = {tv.scalar(6, "I"): (tv, q, k) for tv, q, k in vals}
    convert = [n for n in p.graph(pte).tables(1) if union_names()[n.scalar(0, "B")] == "Convert"][-1]
    node = convert.table(1)
    assert node is not None
    _, q, kind = by_id[node.scalar(0, "I")]
    assert kind == Q_PER_TENSOR and q is not None
    return float(q.scalar(0, "f"))


# ---- running ----------------------------------------------------------------


def _run_both(pte: bytes, x: tuple[torch.Tensor, ...]) -> tuple[np.ndarray, np.ndarray]:
    register_quantized_ops()
    import executorch.extension.llm.custom_ops  # noqa: F401

    (ours,) = pyexec.load(pte).load_method("forward").execute([t.clone() for t in x])
    (ref,) = run_with_executorch(pte, x)
    return np.asarray(ours), ref.numpy()


def _near_eager(got: np.ndarray, m: torch.nn.Module, x: tuple[torch.Tensor, ...], bound: float) -> None:
    with torch.no_grad():
        e = m(*x).numpy()
    rel = float(np.linalg.norm(got - e) / np.linalg.norm(e))
    assert rel < bound, f"relative L2 error to eager float {rel:.3f} (bound {bound})"


# ---- static int8 ------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(STATIC))
def test_static_int8_conv_net_lowered_matches_executorch_within_one_step(name: str) -> None:
    pte, m, x = _static(name, lower=True)
    names = {union_names()[t] for t in node_types(pte)}
    assert {"Conv2d", "DepthwiseConv2d", "Add", "Multiply", "MaxPooling2d", "FullyConnected"} <= names, names
    ours, ref = _run_both(pte, x)
    step = _output_step(pte)
    diff = np.abs(ours - ref)
    assert diff.max() <= step * 1.001, f"max difference {diff.max()} above one step {step}"
    _near_eager(ours, m, x, 0.25)


def test_static_int8_cnn_with_batch_norm_and_global_pooling_lowered_matches_executorch() -> None:
    """tests/support/models.py's CNN (conv, batch norm, relu, max pool, mean
    over H and W as a qint8 GlobalAvgPooling2d, linear) at batch 2."""
    spec = cnn()
    pte = export_quantized(spec.module, spec.inputs, STATIC["per_channel"], lower=True)
    assert "GlobalAvgPooling2d" in {union_names()[t] for t in node_types(pte)}
    ours, ref = _run_both(pte, spec.inputs)
    assert np.abs(ours - ref).max() <= _output_step(pte) * 1.001
    _near_eager(ours, spec.module, spec.inputs, 0.25)


class ClampCat(torch.nn.Module):
    """A qint8 Clamp (hardtanh after max pooling) and a qint8 Concatenate2."""

    def __init__(self) -> None:
        super().__init__()
        self.c = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.d = torch.nn.Conv2d(8, 8, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.nn.functional.hardtanh(torch.nn.functional.max_pool2d(self.c(x), 2), -0.5, 0.5)
        return torch.cat([y, torch.relu(self.d(y))], 1)


def test_static_int8_clamp_and_concatenate_lowered_match_executorch() -> None:
    torch.manual_seed(0)
    m, x = ClampCat().eval(), (torch.randn(1, 3, 16, 16),)
    pte = export_quantized(m, x, STATIC["per_channel"], lower=True)
    assert {"Clamp", "Concatenate2"} <= {union_names()[t] for t in node_types(pte)}
    ours, ref = _run_both(pte, x)
    assert np.abs(ours - ref).max() <= _output_step(pte) * 1.001


@pytest.mark.parametrize("name", ["per_channel"])
def test_static_int8_conv_net_portable_matches_executorch(name: str) -> None:
    pte, m, x = _static(name, lower=False)
    assert not payloads(pte)
    ours, ref = _run_both(pte, x)
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-5 * float(np.abs(ref).max()))
    _near_eager(ours, m, x, 0.25)


# ---- dynamic: qd8 x qc8w / qc4w / qb4w -------------------------------------------


@pytest.mark.parametrize("name", sorted(DYNAMIC))
def test_dynamic_quantized_mlp_lowered_matches_executorch(name: str) -> None:
    pte, m, x = _dynamic(name, lower=True)
    kinds = {(tv.scalar(0, "h"), k) for p in payloads(pte) for tv, _, k in _values(pte, p)}
    assert (DT_QDINT8, Q_PER_TOKEN) in kinds
    if DYNAMIC[name].get("bits") == 4:
        assert (DT_QBINT4, Q_GROUP) in kinds
    ours, ref = _run_both(pte, x)
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-5 * float(np.abs(ref).max()))
    _near_eager(ours, m, x, 0.1)


@pytest.mark.parametrize("name", ["pt2e_dynamic", "8da4w_g32"])
def test_dynamic_quantized_mlp_runs_for_other_batch_sizes(name: str) -> None:
    """qd8 rows are quantized one by one: a single row and many rows."""
    pte, m, _ = _dynamic(name, lower=True)
    method = pyexec.load(pte).load_method("forward")
    for rows in (1, 4):
        x = (torch.randn(rows, 256) * 3,) if rows == 4 else (torch.randn(4, 256)[:1].expand(4, 256).clone(),)
        (ours,) = method.execute([x[0].clone()])
        (ref,) = run_with_executorch(pte, x)
        np.testing.assert_allclose(np.asarray(ours), ref.numpy(), rtol=0, atol=1e-5 * float(ref.abs().max()))


class JoinAndGelu(torch.nn.Module):
    """Dynamically quantized linear layers whose input an elementwise node
    makes: an RNN-T joiner's broadcast add (with a ReLU, which becomes the
    Add's bounds), an MLP's GELU, and a residual add of two same-shape
    values (one run of elements longer than a row)."""

    def __init__(self) -> None:
        super().__init__()
        self.join = torch.nn.Linear(64, 40)
        self.fc1, self.fc2 = torch.nn.Linear(64, 96), torch.nn.Linear(96, 48)
        self.pre, self.post = torch.nn.Linear(64, 64), torch.nn.Linear(64, 24)

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        rows = a.reshape(12, 64)
        return (self.join(torch.relu(a + b)), self.fc2(torch.nn.functional.gelu(self.fc1(a))),
                self.post(self.pre(rows) + rows))


def test_an_elementwise_node_and_the_row_quantization_after_it_run_as_one(monkeypatch: pytest.MonkeyPatch) -> None:
    """The Add and the Gelu that feed a dynamically quantized linear layer
    run with its input's per-row quantization, row by row
    ("QuantizeRows [Add, Convert]", "QuantizeRows [Gelu, Convert]"): the
    bits of the graph run node by node (PYEXEC_FUSE=0) at one and three
    threads, ExecuTorch's within its tolerance."""
    torch.manual_seed(8)
    m = JoinAndGelu().eval()
    x = (torch.randn(1, 12, 1, 64), torch.randn(1, 1, 9, 64))
    pte = export_quantized(m, x, DYNAMIC["pt2e_dynamic"], lower=True)
    before = pyexec.get_num_threads()

    def run() -> tuple[list[np.ndarray], list[str]]:
        method = pyexec.load(pte).load_method("forward")
        with method.profile() as prof:
            got = method.execute([t.clone() for t in x])
        return [np.asarray(g) for g in got], [e.name for e in prof.events]

    try:
        for threads in (1, 3):
            pyexec.set_num_threads(threads)
            fused, events = run()
            assert events.count("QuantizeRows [Add, Convert]") == 2, events
            assert "QuantizeRows [Gelu, Convert]" in events, events
            with monkeypatch.context() as env:
                env.setenv("PYEXEC_FUSE", "0")
                plain, plain_events = run()
            assert not any(e.startswith("QuantizeRows") for e in plain_events), plain_events
            for f, p in zip(fused, plain):
                assert np.array_equal(f.view(np.int32), p.view(np.int32))
    finally:
        pyexec.set_num_threads(before)
    register_quantized_ops()
    for ours, ref in zip(fused, run_with_executorch(pte, x)):
        np.testing.assert_allclose(ours, ref.numpy(), rtol=0, atol=1e-5 * float(ref.abs().max()))


@pytest.mark.parametrize("name", ["pt2e_dynamic"])
def test_dynamic_quantized_mlp_portable_matches_executorch(name: str) -> None:
    pte, m, x = _dynamic(name, lower=False)
    ours, ref = _run_both(pte, x)
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-5 * float(np.abs(ref).max()))
    _near_eager(ours, m, x, 0.1)


# ---- convolutions: transposed, grouped, dynamic ----------------------------------------

DT_FP32, DT_QCINT8, DT_QUINT8 = 1, 6, 4
CONV2D, CONV_TRANSPOSE2D = 7, 39


def _deconv(name: str) -> tuple[bytes, torch.nn.Module, tuple[torch.Tensor, ...]]:
    m, x, calib = deconv_net()
    quant = {**STATIC, **DYNAMIC}[name]
    return export_quantized(m, x, quant, calibration=calib, lower=True), m, x


def _conv_nodes(pte: bytes) -> list[tuple[int, Table, int]]:
    """(type, node table, input datatype) of every convolution node."""
    out = []
    for p in payloads(pte):
        dts = {tv.scalar(6, "I"): tv.scalar(0, "h") for tv, _, _ in _values(pte, p)}
        for n in p.graph(pte).tables(1):
            t = n.table(1)
            assert t is not None
            if n.scalar(0, "B") in (CONV2D, CONV_TRANSPOSE2D):
                out.append((n.scalar(0, "B"), t, dts[t.scalar(15, "I")]))  # input1_id
    return out


@pytest.mark.parametrize("name", sorted(STATIC))
def test_static_int8_transposed_and_grouped_convolutions_lowered_equal_executorch(name: str) -> None:
    """Two qs8 ConvTranspose2d (one of stride 3 with a 2x2 kernel: output
    phases no tap reaches), a grouped Conv2d and a 1x1 one. Every sum is an
    exact int32 sum and the requantization is XNNPACK's (float32 product,
    clamp, round half to even), so the outputs are expected bit for bit."""
    pte, m, x = _deconv(name)
    convs = _conv_nodes(pte)
    assert sum(t == CONV_TRANSPOSE2D and dt == DT_QINT8 for t, _, dt in convs) == 2, convs
    assert any(t == CONV2D and dt == DT_QINT8 and n.scalar(12, "I") == 2 for t, n, dt in convs)  # groups
    ours, ref = _run_both(pte, x)
    np.testing.assert_array_equal(ours, ref)
    _near_eager(ours, m, x, 0.25)


def test_dynamic_quantized_convolutions_lowered_match_executorch() -> None:
    """qd8 (a zero point and scale per image) Conv2d and ConvTranspose2d with
    per-channel qcint8 filters and float output; the 1x1 Conv2d's input is
    quantized per pixel as XNNPACK's FullyConnected rewrite does. The int8
    activations, parameters and int32 sums are the same; only the float
    scaling and bias addition may round in another order: a few float32 ulps
    of the outputs' magnitude."""
    pte, m, x = _deconv("pt2e_dynamic")
    convs = _conv_nodes(pte)
    assert {(t, dt) for t, _, dt in convs} >= {(CONV2D, DT_QDINT8), (CONV_TRANSPOSE2D, DT_QDINT8)}, convs
    assert any(t == CONV2D and dt == DT_QDINT8 and n.scalar(4, "I") == 1 for t, n, dt in convs)  # the 1x1 one
    ours, ref = _run_both(pte, x)
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-5 * float(np.abs(ref).max()))
    _near_eager(ours, m, x, 0.1)


def test_quantized_convolutions_give_the_same_bits_at_any_thread_count() -> None:
    """1 and 3 threads: the products are split so that every output is
    computed the same way whichever thread computes it."""
    for name in ("per_channel", "pt2e_dynamic"):
        pte, _, _ = _deconv(name)
        method = pyexec.load(pte).load_method("forward")
        x = (torch.randn(2, 3, 8, 8),)
        results = []
        threads = pyexec.get_num_threads()
        try:
            for n in (1, 3):
                pyexec.set_num_threads(n)
                results.append(np.asarray(method.execute([x[0].clone()])[0]).copy())
        finally:
            pyexec.set_num_threads(threads)
        np.testing.assert_array_equal(results[0], results[1])


# ---- float pointwise chains between int8 values -------------------------------------


class Pointwise(torch.nn.Module):
    """Activations the quantizer leaves in float: each becomes Convert to
    fp32 -> the float node -> Convert to int8 in the lowered graph.
    `float_out` also returns the hardswish's float result, which a fused
    chain would lose."""

    def __init__(self, float_out: bool) -> None:
        super().__init__()
        self.c = torch.nn.ModuleList(torch.nn.Conv2d(8, 8, 1) for _ in range(5))
        self.float_out = float_out

    def forward(self, x: torch.Tensor) -> Any:
        h = torch.nn.functional.hardswish(self.c[0](x))
        y = torch.sigmoid(self.c[1](h))
        y = torch.tanh(self.c[2](y))
        y = torch.nn.functional.leaky_relu(self.c[3](y), 0.1)
        y = self.c[4](y)
        return (y, h) if self.float_out else y


def _profiled(pte: bytes, x: torch.Tensor, threads: int) -> tuple[list[np.ndarray], set[str]]:
    before = pyexec.get_num_threads()
    try:
        pyexec.set_num_threads(threads)
        method = pyexec.load(pte).load_method("forward")
        with method.profile() as p:
            out = method.execute([x.clone()])
    finally:
        pyexec.set_num_threads(before)
    return [np.asarray(o) for o in out], {e.name for e in p.events}


def test_float_activation_chains_between_int8_values_run_as_byte_tables_equal_to_executorch() -> None:
    """Each Convert -> Hardswish / Sigmoid / Tanh / LeakyReLU -> Convert runs
    as one table lookup (its profile event names the float node it stands
    for), and gives ExecuTorch's bytes exactly, at one thread and at three,
    on inputs wide enough to reach both ends of every int8 range."""
    torch.manual_seed(11)
    m = Pointwise(float_out=False).eval()
    x = 3 * torch.randn(2, 8, 15, 17)
    pte = export_quantized(m, (x,), {"scheme": "pt2e", "per_channel": True}, lower=True)
    names = [union_names()[t] for t in node_types(pte)]
    assert names.count("Convert") >= 10 and "Hardswish" in names, names
    torch.manual_seed(12)
    x2 = 3 * torch.randn_like(x)
    (ref,) = run_with_executorch(pte, (x2,))
    for threads in (1, 3):
        (ours,), events = _profiled(pte, x2, threads)
        np.testing.assert_array_equal(ours, ref.numpy())
        fused = {f"Lookup8 [{n}]" for n in ("Hardswish", "Sigmoid", "Tanh", "LeakyReLU")}
        assert fused <= events, sorted(events)
        assert not {"Hardswish", "Sigmoid", "Tanh", "LeakyReLU"} & events, sorted(events)
    _near_eager(ours, m, (x2,), 0.2)


def test_a_float_value_read_outside_its_chain_keeps_the_chain_unfused() -> None:
    """The hardswish's float result is also a program output, so its chain
    must run node by node; the chains after it are still fused."""
    torch.manual_seed(11)
    m = Pointwise(float_out=True).eval()
    x = 3 * torch.randn(1, 8, 9, 9)
    pte = export_quantized(m, (x,), {"scheme": "pt2e", "per_channel": True}, lower=True)
    ours, events = _profiled(pte, x, 1)
    refs = run_with_executorch(pte, (x,))
    assert len(ours) == len(refs) == 2
    for o, r in zip(ours, refs):
        np.testing.assert_array_equal(o, r.numpy())
    assert "Hardswish" in events and "Lookup8 [Hardswish]" not in events, sorted(events)
    assert "Lookup8 [Sigmoid]" in events, sorted(events)


# ---- requantization and quint8 ---------------------------------------------------


def test_requantizing_convert_matches_executorch_and_the_float_formula() -> None:
    """Convert qint8 -> qint8 between two scales and zero points (a payload
    rewritten so: ExecuTorch 1.5.1's writer emits two Converts through fp32
    instead): XNNPACK's fixed-point multiply, equal to ExecuTorch's runtime
    bit for bit, and within one output step of round(q_real / scale) + zp."""
    pte, x = qdq_chain(requant=True)
    ours, ref = _run_both(pte, x)
    np.testing.assert_array_equal(ours, ref)
    plain, _ = qdq_chain()
    # the Clamp's output (the plain chain's result before Abs), requantized in float
    with torch.no_grad():
        y = torch.clamp(torch.nn.functional.max_pool2d(_fake_quant(x[0], 0.05, 3), 2), -0.5, 0.7)
        y = _fake_quant(_fake_quant(y, 0.05, 3), REQUANT_SCALE, REQUANT_ZERO_POINT)
    assert np.abs(ours - y.numpy()).max() <= REQUANT_SCALE * 1.001
    assert not np.array_equal(ours, _run_both(plain, x)[0])  # the rewrite took


def _fake_quant(t: torch.Tensor, scale: float, zp: int) -> torch.Tensor:
    return torch.fake_quantize_per_tensor_affine(t, scale, zp, -128, 127)


@pytest.mark.parametrize("requant", [False, True])
def test_quint8_values_match_executorch_and_their_qint8_twin(requant: bool) -> None:
    """The chain with every qint8 value made quint8 (zero points + 128):
    Convert fp32 <-> quint8, quint8 -> quint8, StaticTranspose, MaxPooling2d
    and Clamp on quint8. Equal to ExecuTorch's runtime and to the qint8
    program bit for bit (the same real values)."""
    pte, x = qdq_chain(quint8=True, requant=requant)
    kinds = {tv.scalar(0, "h") for p in payloads(pte) for tv, _, _ in _values(pte, p)}
    assert DT_QUINT8 in kinds and DT_QINT8 not in kinds
    ours, ref = _run_both(pte, x)
    np.testing.assert_array_equal(ours, ref)
    twin, _ = qdq_chain(requant=requant)
    np.testing.assert_array_equal(ours, _run_both(twin, x)[0])


# ---- malformed quantization parameters ---------------------------------------------


class QCase:
    """A lowered quantized program as a mutable buffer."""

    def __init__(self, pte: bytes) -> None:
        self.b = bytearray(pte)
        self.p = payloads(pte)[0]
        self.vals = _values(pte, self.p)

    def find(self, pred: Callable[[Table, Table | None, int], bool]) -> tuple[int, Table, Table]:
        for i, (tv, q, k) in enumerate(self.vals):
            if q is not None and pred(tv, q, k):
                return i, tv, q
        raise AssertionError("no such value")

    def put(self, fmt: str, pos: int | None, *values: Any) -> bytes:
        assert pos is not None, "field is absent"
        struct.pack_into(fmt, self.b, pos, *values)
        return bytes(self.b)

    def named(self, key: bytes) -> int:
        """File offset of the named data entry `key` (Program.named_data)."""
        pte = bytes(self.b)
        program = root(pte)
        seg_base = struct.unpack_from("<Q", pte, 24)[0]
        for nd in program.tables(7):
            if nd.string(0)[1] == key:
                return seg_base + program.tables(4)[nd.scalar(1, "I")].scalar(0, "Q")
        raise AssertionError("no such key")

    def constant_key(self, idx: int) -> bytes:
        cd = self.p.graph(bytes(self.b)).tables(8)[idx]
        return cd.string(2)[1]


def _static_case() -> QCase:
    return QCase(_static("per_channel", lower=True)[0])


def _dynamic_case() -> QCase:
    return QCase(_dynamic("8da4w_g32", lower=True)[0])


def _per_tensor(c: QCase) -> tuple[int, Table, Table]:
    return c.find(lambda tv, q, k: k == Q_PER_TENSOR and tv.scalar(0, "h") == DT_QINT8 and q.scalar(1, "i") != 0)


def scale_zero() -> tuple[bytes, str]:
    c = _static_case()
    i, _, q = _per_tensor(c)
    return c.put("<f", q.field(0), 0.0), f"value {i} (qint8): scale 0 is not finite and > 0"


def scale_negative() -> tuple[bytes, str]:
    c = _static_case()
    i, _, q = _per_tensor(c)
    return c.put("<f", q.field(0), -0.5), f"value {i} (qint8): scale -0.5 is not finite and > 0"


def scale_nan() -> tuple[bytes, str]:
    c = _static_case()
    i, _, q = _per_tensor(c)
    return c.put("<f", q.field(0), float("nan")), f"value {i} (qint8): scale nan"


def zero_point_range() -> tuple[bytes, str]:
    c = _static_case()
    i, _, q = _per_tensor(c)
    return c.put("<i", q.field(1), 300), f"value {i} (qint8): zero_point 300 is outside [-128, 127]"


def channel_scale_zero() -> tuple[bytes, str]:
    c = _static_case()
    i, _, q = c.find(lambda tv, q, k: k == Q_PER_CHANNEL and tv.scalar(0, "h") == 6)
    at = c.named(c.constant_key(q.scalar(2, "I")))
    return c.put("<f", at + 8, 0.0), f"value {i} (qcint8): scale 2 is 0"


def channel_count() -> tuple[bytes, str]:
    c = _static_case()
    i, _, q = c.find(lambda tv, q, k: k == Q_PER_CHANNEL and tv.scalar(0, "h") == 6)
    return c.put("<I", q.field(3), 7), f"value {i} (qcint8): num_scales 7, but the value needs 8"


def channel_dim() -> tuple[bytes, str]:
    c = _static_case()
    i, _, q = c.find(lambda tv, q, k: k == Q_PER_CHANNEL and q.field(1) is not None)  # depthwise: dim 3
    return c.put("<i", q.field(1), 9), f"value {i} (qcint8): channel_dim 9 is outside"


def group_not_dividing() -> tuple[bytes, str]:
    c = _dynamic_case()
    i, _, q = c.find(lambda tv, q, k: k == Q_GROUP)
    return c.put("<i", q.field(2), 48), f"value {i} (qbint4): group_size 48 does not divide the 256 input channels"


def group_scale_count() -> tuple[bytes, str]:
    c = _dynamic_case()
    i, _, q = c.find(lambda tv, q, k: k == Q_GROUP)
    return c.put("<I", q.field(5), 5), f"value {i} (qbint4): num_scales 5, but the value needs 4096"


def group_scale_inf() -> tuple[bytes, str]:
    c = _dynamic_case()
    i, _, q = c.find(lambda tv, q, k: k == Q_GROUP)
    at = c.named(c.constant_key(q.scalar(4, "I")))
    return c.put("<H", at + 6, 0x7F80), f"value {i} (qbint4): scale 3 is inf"


def token_dims() -> tuple[bytes, str]:
    c = _dynamic_case()
    i, _, q = c.find(lambda tv, q, k: k == Q_PER_TOKEN)
    return c.put("<i", q.field(0), 5), f"value {i} (qdint8): num_nonbatch_dims 5 is outside [1, 2]"


def wrong_kind_for_datatype() -> tuple[bytes, str]:
    c = _dynamic_case()
    i, tv, _ = c.find(lambda tv, q, k: k == Q_PER_TOKEN)
    return c.put("<h", tv.field(0), DT_QINT8), f"value {i}: datatype qint8 needs PerTensorQuant"


QCASES: dict[str, Callable[[], tuple[bytes, str]]] = {
    f.__name__: f
    for f in (
        scale_zero,
        scale_negative,
        scale_nan,
        zero_point_range,
        channel_scale_zero,
        channel_count,
        channel_dim,
        group_not_dividing,
        group_scale_count,
        group_scale_inf,
        token_dims,
        wrong_kind_for_datatype,
    )
}


@pytest.fixture(scope="module")
def hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[str, str]]:
    made = {name: make() for name, make in QCASES.items()}
    results = run_cases({name: pte for name, (pte, _) in made.items()}, tmp_path_factory.mktemp("xnnq"))
    return {name: (str(results[name]["result"]), words) for name, (_, words) in made.items()}


@pytest.mark.parametrize("case", sorted(QCASES))
def test_malformed_quantization_parameters_fail_at_load_naming_the_value(
    case: str, hostile: dict[str, tuple[str, str]]
) -> None:
    result, words = hostile[case]
    assert result.startswith("InvalidProgramError"), f"{case}: {result}"
    assert words in result, f"{case}: message does not say what is wrong: {result}"


# Convolution, Convert and quint8 parameters written into real payloads:
# name -> (mutation, the error class, words the message must contain).


def _conv_case(name: str) -> tuple[QCase, list[tuple[int, Table]]]:
    c = QCase(_deconv(name)[0])
    nodes = [(n.scalar(0, "B"), n.table(1)) for n in c.p.graph(bytes(c.b)).tables(1)]
    return c, [(t, n) for t, n in nodes if n is not None and t in (CONV2D, CONV_TRANSPOSE2D)]


def _first(nodes: list[tuple[int, Table]], kind: int, pred: Callable[[Table], bool] = lambda n: True) -> Table:
    return next(n for t, n in nodes if t == kind and pred(n))


def _grouped(n: Table) -> bool:
    return n.scalar(12, "I") == 2


def tconv_adjustment() -> bytes:
    c, nodes = _conv_case("per_channel")
    return c.put("<I", _first(nodes, CONV_TRANSPOSE2D).field(13), 2)  # adjustment_height = stride


def tconv_groups() -> bytes:
    c, nodes = _conv_case("per_channel")
    return c.put("<I", _first(nodes, CONV_TRANSPOSE2D).field(12), 2)


def tconv_padding() -> bytes:
    c, nodes = _conv_case("per_channel")
    return c.put("<I", _first(nodes, CONV_TRANSPOSE2D).field(0), 60000)


def tconv_requant() -> bytes:
    c, nodes = _conv_case("per_tensor")
    out = _first(nodes, CONV_TRANSPOSE2D).scalar(18, "I")
    _, _, q = c.find(lambda tv, q, k: tv.scalar(6, "I") == out)
    return c.put("<f", q.field(0), 1e-9)


def conv_kernel() -> bytes:
    c, nodes = _conv_case("per_channel")
    return c.put("<I", _first(nodes, CONV2D, _grouped).field(4), 5)


def conv_stride() -> bytes:
    c, nodes = _conv_case("per_channel")
    return c.put("<I", _first(nodes, CONV2D, _grouped).field(6), 70000)


def conv_input_channels() -> bytes:
    c, nodes = _conv_case("per_channel")
    return c.put("<I", _first(nodes, CONV2D, _grouped).field(10), 3)


def conv_output_channels() -> bytes:
    c, nodes = _conv_case("per_channel")
    out = _first(nodes, CONV2D, _grouped).scalar(18, "I")
    _, tv, _ = c.find(lambda tv, q, k: tv.scalar(6, "I") == out)
    first, n = tv.vector(2)
    assert n == 4
    return c.put("<I", first + 12, 9)


def dq_conv_rows() -> bytes:
    c, nodes = _conv_case("pt2e_dynamic")
    x = _first(nodes, CONV2D, _grouped).scalar(15, "I")  # a qd8 3x3 one
    _, _, q = c.find(lambda tv, q, k: tv.scalar(6, "I") == x)
    return c.put("<i", q.field(0), 2)


def dq_conv_padding() -> bytes:
    c, nodes = _conv_case("pt2e_dynamic")
    return c.put("<I", _first(nodes, CONV2D, _grouped).field(0), 60000)  # the qd8 grouped one's padding_top


def requant_ratio() -> bytes:
    pte, _ = qdq_chain(requant=True)
    c = QCase(pte)
    _, _, q = c.find(lambda tv, q, k: k == Q_PER_TENSOR and abs(q.scalar(0, "f") - REQUANT_SCALE) < 1e-6)
    return c.put("<f", q.field(0), 100.0)


def quint8_zero_point() -> bytes:
    pte, _ = qdq_chain(quint8=True)
    c = QCase(pte)
    _, _, q = c.find(lambda tv, q, k: tv.scalar(0, "h") == DT_QUINT8)
    return c.put("<i", q.field(1), 300)


INVALID_PROGRAM, UNSUPPORTED = "InvalidProgramError", "UnsupportedError"
NODE_CASES: dict[str, tuple[Callable[[], bytes], str, str]] = {
    "tconv_adjustment": (tconv_adjustment, INVALID_PROGRAM, "adjustment 2x1 must be smaller than the stride 2x2"),
    "tconv_groups": (tconv_groups, INVALID_PROGRAM, "expected [12, 3, 3, 8] for 2 groups of 8 -> 6 channels"),
    "tconv_padding": (tconv_padding, INVALID_PROGRAM, "padding 60000/1/1/1) gives no output for a 8x8 input"),
    "tconv_requant": (tconv_requant, INVALID_PROGRAM, "is outside (0, 256)"),
    "conv_kernel": (conv_kernel, INVALID_PROGRAM, "filter dims [8, 3, 3, 4], expected [8, 5, 3, 4]"),
    "conv_stride": (conv_stride, INVALID_PROGRAM, "subsampling_height is 70000, above 65536"),
    "conv_input_channels": (conv_input_channels, INVALID_PROGRAM, "expected [8, 3, 3, 3] for 2 groups of 3 -> 4"),
    "conv_output_channels": (conv_output_channels, INVALID_PROGRAM, "output has 9 channels, the convolution computes"),
    "dq_conv_rows": (dq_conv_rows, UNSUPPORTED, "a qdint8 input quantized over its last 2 of 4 dims"),
    "dq_conv_padding": (dq_conv_padding, INVALID_PROGRAM, "gives a 60007x8 output, larger than the output value's 8x8"),
    "requant_ratio": (requant_ratio, INVALID_PROGRAM, "input / output scale ratio 0.0005 lies outside [2^-8, 2^7]"),
    "quint8_zero_point": (quint8_zero_point, INVALID_PROGRAM, "(quint8): zero_point 300 is outside [0, 255]"),
}


@pytest.fixture(scope="module")
def node_hostile(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    results = run_cases({name: make() for name, (make, _, _) in NODE_CASES.items()}, tmp_path_factory.mktemp("xnnc"))
    return {name: str(results[name]["result"]) for name in NODE_CASES}


@pytest.mark.parametrize("case", sorted(NODE_CASES))
def test_malformed_convolution_convert_and_quint8_parameters_fail_at_load_naming_them(
    case: str, node_hostile: dict[str, str]
) -> None:
    result = node_hostile[case]
    _, error, words = NODE_CASES[case]
    assert result.startswith(error), f"{case}: {result}"
    assert words in result, f"{case}: message does not say what is wrong: {result}"


FLIPPED: dict[str, tuple[Callable[[], bytes], int]] = {  # program, step
    "static": (lambda: _static("per_channel", True)[0], 13),
    "8da4w": (lambda: _dynamic("8da4w_g32", True)[0], 7),
    "deconv_static": (lambda: _deconv("per_channel")[0], 5),
    "deconv_dynamic": (lambda: _deconv("pt2e_dynamic")[0], 5),
    "quint8_requant": (lambda: qdq_chain(quint8=True, requant=True)[0], 2),
}


@pytest.mark.parametrize("which", sorted(FLIPPED))
def test_flipped_quantized_payload_bytes_fail_cleanly(which: str, tmp_path: Path) -> None:
    """Bytes of a quantized payload's flatbuffer inverted, one at a time (every
    few, to bound the time; quant params, scales' indices, group sizes,
    datatypes, convolution parameters among them): the program runs or
    fails with a pyexec error; nothing crashes."""
    make, step = FLIPPED[which]
    pte = make()
    p = payloads(pte)[0]
    cases = {}
    for k in range(p.fb_offset - p.offset, p.size, step):
        b = bytearray(pte)
        b[p.offset + k] ^= 0xFF
        cases[f"flip_{k:05d}"] = bytes(b)
    results = run_cases(cases, tmp_path)
    allowed = ("ok", "InvalidProgramError", "UnsupportedError", "ExecutionError", "InvalidArgumentError")
    for case in cases:
        assert str(results[case]["result"]).split(":")[0] in allowed + ("OutOfMemoryError",), results[case]


# ---- memory -------------------------------------------------------------------------


@pytest.mark.skipif(SANITIZED, reason="resident memory is meaningless under AddressSanitizer")
@pytest.mark.parametrize("cache", ["off", "writing", "mapped"])
def test_8da4w_model_resident_memory_after_load_is_near_its_file_size(tmp_path: Path, cache: str) -> None:
    """4-bit weights stay 4-bit: a float copy would be 8 times the weights.
    What load adds: the packed 4-bit weights, their bf16 scales and per-block
    sums for the zero point (about the file's size; 5.7 MiB for this 4.5 MiB
    file when measured); the file's own pages, read once while packing, are
    no longer mapped. The bound, 1.4 x the file + 2 MiB, is far below a
    float copy (8 x the weights). It holds packing with the packed-weight
    cache off, packing while writing the cache file (whose staging copies
    once stayed resident: 9.6 MiB) and mapping the file a load wrote."""
    torch.manual_seed(2)
    m = MLP(1024, 4096, 1024).eval()
    x = (torch.randn(1, 1024),)
    pte = export_quantized(m, x, DYNAMIC["8da4w_g32"], lower=True)
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
        "m.execute([np.ones((1, 1024), np.float32)])\n"
        "print(loaded - base, rss() - base)\n"
    )
    env = {**child_env(), "PYEXEC_CACHE": "0" if cache == "off" else "1", "PYEXEC_CACHE_DIR": str(tmp_path / "c")}
    if cache == "mapped":  # an earlier load wrote the cache file
        subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, check=True, env=env)
    proc = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=True,
                          env=env)
    loaded, ran = (int(v) for v in proc.stdout.split())
    assert any((tmp_path / "c").glob("*.pxw")) == (cache != "off")
    size = len(pte)
    mib = 2**20
    assert loaded < 1.4 * size + 2 * mib, f"load grew RSS by {loaded / mib:.1f} MiB for a {size / mib:.1f} MiB file"
    assert ran < 1.4 * size + 4 * mib, f"a run grew RSS to {ran / mib:.1f} MiB for a {size / mib:.1f} MiB file"


@pytest.mark.parametrize("lowered", ["static", "8da4w"])
def test_quantized_payloads_are_described_as_runnable(lowered: str) -> None:
    pte = _static("per_channel", True)[0] if lowered == "static" else _dynamic("8da4w_g32", True)[0]
    delegates = pyexec.load(pte).delegates("forward")
    assert delegates and all(d.runnable and not d.unsupported for d in delegates), delegates
