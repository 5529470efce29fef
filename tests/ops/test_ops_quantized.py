"""Quantized kernels (native/src/kernels/quantized/): the 19
quantized_decomposed out variants, on programs left as portable ops (nothing
delegated), each run by pyexec and by ExecuTorch's runtime on the same file
(with its quantized kernels registered by `import executorch.kernels.quantized`).

Integer outputs (quantized tensors, zero points) must match ExecuTorch
exactly, and so must float outputs that come straight out of a
dequantize, an embedding or choose_qparams (the same float arithmetic,
operation for operation). Where float ops sit between quantize and
dequantize (conv / linear in the PT2E programs), pyexec's float kernels sum
in another order than ExecuTorch's, so a value at a rounding midpoint may
quantize one step apart: there the tolerance is one quantization step of
the output. mixed_linear / mixed_mm run on pyexec's GEMM engine, which sums
in another order than ExecuTorch's loops: there float32 rounding is allowed
(relative to the sum of absolute products).

Torch's reference ops (torch.ao's quantized_decomposed) are compared too:
exactly where they compute the same float products, within one integer step
where they form 1/scale in double instead of float."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from support.export import assert_close, export_program, run_with_executorch
from support.quant import export_quantized, register_quantized_ops

import pyexec

register_quantized_ops()
qd = torch.ops.quantized_decomposed


def _register_fakes() -> None:
    """Shape functions for the ops ExecuTorch's AOT library defines without
    one (mixed_linear, mixed_mm, add), so that torch.export can trace them."""
    lib = "quantized_decomposed::"
    try:
        torch.library.register_fake(lib + "mixed_linear")(
            lambda x, w, s, z=None, dtype=None: x.new_empty((x.shape[0], w.shape[0]), dtype=dtype or x.dtype)
        )
        torch.library.register_fake(lib + "mixed_mm")(lambda x, w, s, z=None: x.new_empty((x.shape[0], w.shape[1])))
        torch.library.register_fake(lib + "add")(lambda a, *args: torch.empty_like(a))
    except RuntimeError:  # already registered (the module imported twice)
        pass


_register_fakes()


def op_names(pte: bytes) -> set[str]:
    from executorch.exir._serialize._program import deserialize_pte_binary

    prog = deserialize_pte_binary(pte)
    prog = getattr(prog, "program", prog)
    return {f"{op.name}.{op.overload}" for op in prog.execution_plan[0].operators}


def run_pyexec(pte: bytes, inputs) -> list[torch.Tensor]:
    method = pyexec.load(pte).load_method("forward")
    return [torch.as_tensor(np.asarray(x)) for x in method.execute([x.clone() for x in inputs])]


def run_both(pte: bytes, inputs) -> tuple[list[torch.Tensor], list[torch.Tensor]]:
    return run_pyexec(pte, inputs), run_with_executorch(pte, inputs)


def same(got, expected, what: str = "") -> None:
    for k, (g, e) in enumerate(zip(got, expected, strict=True)):
        if e.dtype in (torch.float16, torch.bfloat16):
            assert g.dtype == e.dtype, f"{what} output {k}: dtype {g.dtype} != {e.dtype}"
            g, e = g.float(), e.float()
        assert_close(g, e, rtol=0, atol=0, what=f"{what} output {k}")


def export(module, inputs) -> bytes:
    return export_program(module, inputs, strict_ir=False)


def output_step(t: torch.Tensor, levels: int = 255) -> float:
    """One quantization step of an int8-quantized output: its range
    (including 0, as the observers take it) over the 255 steps."""
    t = t.float()
    return float(max(t.max().item(), 0.0) - min(t.min().item(), 0.0)) / levels


# ---- programs from the real quantizers ------------------------------------------


class ConvNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.fc = torch.nn.Linear(8 * 6 * 6, 10)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).flatten(1))


@pytest.mark.parametrize("per_channel", [False, True], ids=["per_tensor", "per_channel"])
def test_pt2e_static_int8_matches_executorch_within_one_step(per_channel):
    torch.manual_seed(0)
    model, x = ConvNet().eval(), torch.randn(2, 3, 6, 6)
    pte = export_quantized(model, (x,), {"scheme": "pt2e", "per_channel": per_channel})
    names = op_names(pte)
    assert {"quantized_decomposed::quantize_per_tensor.out", "quantized_decomposed::dequantize_per_tensor.out"} <= names
    if per_channel:
        assert "quantized_decomposed::dequantize_per_channel.out" in names
    for inp in (x, torch.randn(2, 3, 6, 6) * 0.5):
        ours, et = run_both(pte, [inp])
        step = output_step(et[0])
        assert_close(ours[0], et[0], rtol=0, atol=step * 1.001, what="vs ExecuTorch")
    with torch.no_grad():  # the float model on the calibration input, within int8 quantization error
        ref = model(x)
    assert_close(run_pyexec(pte, [x])[0], ref, rtol=0, atol=0.1 * float(ref.abs().max()), what="vs float")


def test_pt2e_dynamic_int8_linear_chooses_qparams_per_input():
    torch.manual_seed(1)
    model = torch.nn.Sequential(torch.nn.Linear(16, 12), torch.nn.ReLU(), torch.nn.Linear(12, 5)).eval()
    x = torch.randn(3, 16)
    pte = export_quantized(model, (x,), {"scheme": "pt2e", "per_channel": True, "dynamic": True})
    assert {
        "quantized_decomposed::choose_qparams.Tensor_out",
        "quantized_decomposed::quantize_per_tensor.Tensor_out",
        "quantized_decomposed::dequantize_per_tensor.Tensor_out",
        "quantized_decomposed::dequantize_per_channel.out",
    } <= op_names(pte)
    for inp in (x, torch.randn(3, 16) * 10, torch.rand(3, 16) + 2):  # ranges the export never saw
        ours, et = run_both(pte, [inp])
        assert_close(ours[0], et[0], rtol=0, atol=output_step(et[0]) * 1.001, what="vs ExecuTorch")


@pytest.mark.parametrize(
    "quant",
    [
        {"scheme": "embedding", "bitwidth": 8},
        {"scheme": "embedding", "bitwidth": 8, "group_size": 8, "precision": torch.float16},
        {"scheme": "embedding", "bitwidth": 4, "group_size": 8},
        {"scheme": "embedding", "bitwidth": 2, "group_size": 16},
    ],
    ids=["byte", "byte_fp16_groups", "4bit", "2bit"],
)
def test_llm_embedding_quantizer_matches_executorch_exactly(quant):
    torch.manual_seed(2)
    model = torch.nn.Sequential(torch.nn.Embedding(20, 32))
    idx = torch.tensor([[0, 5, 19], [3, 3, 7]])
    pte = export_quantized(model, (idx,), quant)
    op = {8: "embedding_byte", 4: "embedding_4bit", 2: "embedding_2bit"}[quant["bitwidth"]]
    assert f"quantized_decomposed::{op}.dtype_out" in op_names(pte)
    ours, et = run_both(pte, [idx])
    same(ours, et, op)
    bits, w = quant["bitwidth"], model[0].weight.detach()
    ref = w[idx]
    atol = 2 * float(w.abs().max()) / (2**bits - 1) + 1e-3  # one step of the symmetric grid
    assert_close(ours[0].float(), ref, rtol=0, atol=atol, what="vs the float table")


# ---- each op called directly: dtypes, rounding, packing --------------------------


class QuantDequant(torch.nn.Module):
    def __init__(self, scale, zp, qmin, qmax, dtype, out_dtype=None):
        super().__init__()
        self.scale, self.zp, self.qmin, self.qmax, self.dtype, self.out_dtype = scale, zp, qmin, qmax, dtype, out_dtype

    def forward(self, x):
        q = qd.quantize_per_tensor(x, self.scale, self.zp, self.qmin, self.qmax, self.dtype)
        d = qd.dequantize_per_tensor(q, self.scale, self.zp, self.qmin, self.qmax, self.dtype, out_dtype=self.out_dtype)
        return q, d


HALF_STEPS = torch.tensor([0.25, 0.75, 1.25, -0.25, -0.75, -1.25, 100.0, -100.0, 0.0])  # scale 0.5


@pytest.mark.parametrize(
    "qdtype,qmin,qmax,zp",
    [
        (torch.uint8, 0, 255, 128),
        (torch.int8, -128, 127, 3),
        (torch.int16, -32768, 32767, -7),
        (torch.int32, -(2**31), 2**31 - 1, 0),
    ],
)
@pytest.mark.parametrize("out_dtype", [None, torch.float64, torch.float16], ids=str)
def test_quantize_dequantize_per_tensor_dtypes(qdtype, qmin, qmax, zp, out_dtype):
    # the input is float32: torch's reference quantize refuses others when exporting
    g = torch.Generator().manual_seed(3)
    x = torch.cat([HALF_STEPS, torch.randn(23, generator=g) * 30])
    module = QuantDequant(0.5, zp, qmin, qmax, qdtype, out_dtype)
    pte = export(module, (x,))
    ours, et = run_both(pte, [x])
    same(ours, et, "quantize/dequantize")
    # round half to even: 0.5 -> 0, 1.5 -> 2, 2.5 -> 2, -0.5 -> 0, -1.5 -> -2, -2.5 -> -2
    expect = torch.tensor([0, 2, 2, 0, -2, -2]) + zp
    assert ours[0][:6].long().tolist() == expect.clamp(qmin, qmax).tolist()
    ref = qd.quantize_per_tensor(x, 0.5, zp, qmin, qmax, qdtype)  # 1/0.5 is exact: the same products
    assert_close(ours[0], ref, rtol=0, atol=0, what="vs torch reference")


def test_quantize_saturates_and_maps_nan_to_quant_min():
    x = torch.tensor([1e30, -1e30, float("inf"), float("-inf"), float("nan"), 1.0])
    pte = export(QuantDequant(0.1, 0, -100, 100, torch.int8), (x,))
    q = run_pyexec(pte, [x])[0]
    assert q.tolist() == [100, -100, 100, -100, -100, 10]


class QuantTensorArgs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.tensor([0.037], dtype=torch.float64))
        self.register_buffer("zp", torch.tensor([-5], dtype=torch.int64))

    def forward(self, x):
        q = qd.quantize_per_tensor.tensor(x, self.scale, self.zp, -128, 127, torch.int8)
        return q, qd.dequantize_per_tensor.tensor(q, self.scale, self.zp, -128, 127, torch.int8)


def test_tensor_args_overloads_match_executorch_and_reference():
    x = torch.randn(4, 7, generator=torch.Generator().manual_seed(4)) * 3
    module = QuantTensorArgs()
    pte = export(module, (x,))
    assert "quantized_decomposed::quantize_per_tensor.Tensor_out" in op_names(pte)
    ours, et = run_both(pte, [x])
    same(ours, et, "Tensor_out")
    ref_q, ref_d = module(x)  # reference forms 1/scale in double: one step at most
    assert (ours[0].int() - ref_q.int()).abs().max() <= 1
    assert_close(ours[1], ref_d, rtol=0, atol=0.037 * 1.001)


class PerChannel(torch.nn.Module):
    def __init__(self, channels, axis, out_dtype=None):
        super().__init__()
        g = torch.Generator().manual_seed(5)
        self.axis, self.out_dtype = axis, out_dtype
        self.register_buffer("scales", (torch.rand(channels, generator=g, dtype=torch.float64) + 0.05) / 10)
        self.register_buffer("zps", torch.randint(-20, 20, (channels,), generator=g))

    def forward(self, x):
        q = qd.quantize_per_channel(x, self.scales, self.zps, self.axis, -128, 127, torch.int8)
        d = qd.dequantize_per_channel(
            q, self.scales, self.zps, self.axis, -128, 127, torch.int8, out_dtype=self.out_dtype
        )
        d0 = qd.dequantize_per_channel(q, self.scales.float(), None, self.axis, -128, 127, torch.int8)
        return q, d, d0


@pytest.mark.parametrize(
    "shape,axis,out_dtype",
    [((3, 5, 4), 1, None), ((3, 5, 4), -1, torch.float16), ((6,), 0, torch.float64), ((2, 4), 0, None)],
)
def test_per_channel_matches_executorch_exactly(shape, axis, out_dtype):
    x = torch.randn(shape, generator=torch.Generator().manual_seed(6))
    module = PerChannel(shape[axis], axis, out_dtype)
    pte = export(module, (x,))
    assert "quantized_decomposed::quantize_per_channel.out" in op_names(pte)
    ours, et = run_both(pte, [x])
    same(ours, et, "per channel")
    ref_q = module(x)[0]
    assert (ours[0].int() - ref_q.int()).abs().max() <= 1  # reference: 1/scale in double


class PerToken(torch.nn.Module):
    def forward(self, x):
        s, z = qd.choose_qparams_per_token_asymmetric(x, torch.int8)
        q = qd.quantize_per_token(x, s, z, -128, 127, torch.int8)
        return s, z, q, qd.dequantize_per_token(q, s, z, -128, 127, torch.int8, torch.float32)


def test_per_token_ops_match_executorch_and_the_documented_example():
    x = torch.randn(2, 3, 8, generator=torch.Generator().manual_seed(7)) * 4
    x[0, 0, :4] = torch.tensor([0.1, 0.7, -0.3, 2.0])
    x[0, 0, 4:] = 0.5
    x[0, 1] = torch.linspace(1, 4, 8)  # all positive: zp -128
    x[1, 2] = 1e-7  # tiny range: the 6.1e-5 floor
    pte = export(PerToken(), (x,))
    assert {
        "quantized_decomposed::choose_qparams_per_token_asymmetric.out",
        "quantized_decomposed::quantize_per_token.out",
        "quantized_decomposed::dequantize_per_token.out",
    } <= op_names(pte)
    ours, et = run_both(pte, [x])
    same(ours, et, "per token")
    assert ours[0].shape == (2, 3, 1) and ours[1].dtype == torch.int64
    assert abs(float(ours[0][0, 0, 0]) - 2.3 / 255) < 1e-9 and int(ours[1][0, 0, 0]) == -95
    assert abs(float(ours[0][0, 1, 0]) - 4 / 255) < 1e-9 and int(ours[1][0, 1, 0]) == -128


class ChooseQparams(torch.nn.Module):
    def __init__(self, qmin, qmax, dtype):
        super().__init__()
        self.qmin, self.qmax, self.dtype = qmin, qmax, dtype

    def forward(self, x):
        s, z = qd.choose_qparams.tensor(x, self.qmin, self.qmax, 1e-5, self.dtype)
        return s, z, qd.quantize_per_tensor.tensor(x, s, z, self.qmin, self.qmax, self.dtype)


@pytest.mark.parametrize("qmin,qmax,dtype", [(-128, 127, torch.int8), (0, 255, torch.uint8)])
def test_choose_qparams_matches_executorch(qmin, qmax, dtype):
    pte = export(ChooseQparams(qmin, qmax, dtype), (torch.randn(5, 6),))
    g = torch.Generator().manual_seed(8)
    for x in (torch.randn(5, 6, generator=g), torch.rand(5, 6, generator=g) + 1, -torch.rand(5, 6, generator=g) * 1e-6):
        ours, et = run_both(pte, [x])
        same(ours, et, "choose_qparams")


class Embeddings(torch.nn.Module):
    """The .out overloads (no dtype), with zero points and per-group scales."""

    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(9)
        self.register_buffer("w8", torch.randint(-128, 128, (10, 12), generator=g, dtype=torch.int8))
        self.register_buffer("w4", torch.randint(0, 256, (10, 6), generator=g, dtype=torch.uint8))
        self.register_buffer("w2", torch.randint(0, 256, (10, 3), generator=g, dtype=torch.uint8))
        self.register_buffer("s", torch.rand(10, 3, generator=g) + 0.1)
        self.register_buffer("z", torch.randn(10, 3, generator=g))

    def forward(self, idx):
        return (
            qd.embedding_byte(self.w8, self.s, self.z, -128, 127, idx),
            qd.embedding_4bit(self.w4, self.s, self.z, -8, 7, idx),
            qd.embedding_2bit(self.w2, self.s, None, -2, 1, idx),
            qd.embedding_4bit.dtype(self.w4, self.s.half(), None, -8, 7, idx, dtype=torch.float16),
        )


def test_embedding_out_overloads_and_packing_match_executorch():
    module = Embeddings()
    idx = torch.tensor([[9, 0, 4], [4, 1, 2]])
    pte = export(module, (idx,))
    for op in ("embedding_byte.out", "embedding_4bit.out", "embedding_2bit.out", "embedding_4bit.dtype_out"):
        assert f"quantized_decomposed::{op}" in op_names(pte)
    ours, et = run_both(pte, [idx])
    same(ours, et, "embeddings")
    # the packing, independently: 4-bit high nibble first, 2-bit lowest pair first
    w4, w2, s = module.w4.long(), module.w2.long(), module.s
    nib = torch.stack([w4 >> 4, w4 & 15], -1).reshape(10, 12) - 8
    crumb = torch.stack([(w2 >> (2 * r)) & 3 for r in range(4)], -1).reshape(10, 12) - 2
    sg = s.repeat_interleave(4, dim=1)
    assert_close(ours[1], ((nib - module.z.repeat_interleave(4, dim=1)) * sg)[idx], rtol=1e-6, atol=1e-6)
    assert_close(ours[2], (crumb * sg)[idx], rtol=1e-6, atol=1e-6)


class Mixed(torch.nn.Module):
    def __init__(self, n, p, groups, dtype):
        super().__init__()
        g = torch.Generator().manual_seed(10)
        self.register_buffer("w", torch.randint(-128, 128, (p, n), generator=g, dtype=torch.int8))
        shape = (p, groups) if groups else (p,)
        self.register_buffer("s", (torch.rand(shape, generator=g) / 50).to(dtype))
        self.register_buffer("wmm", torch.randint(-128, 128, (n, p), generator=g, dtype=torch.int8))
        self.register_buffer("smm", (torch.rand(n, generator=g) / 50).to(dtype))

    def forward(self, x):
        return qd.mixed_linear(x, self.w, self.s, None), qd.mixed_mm(x, self.wmm, self.smm, None)


@pytest.mark.parametrize("groups,dtype", [(0, torch.float32), (4, torch.float32), (2, torch.float16)])
def test_mixed_linear_and_mm_on_the_gemm_engine(groups, dtype):
    m, n, p = 5, 32, 7
    module = Mixed(n, p, groups, dtype)
    x = torch.randn(m, n, generator=torch.Generator().manual_seed(11)).to(dtype)
    pte = export(module, (x,))
    assert {"quantized_decomposed::mixed_linear.out", "quantized_decomposed::mixed_mm.out"} <= op_names(pte)
    ours, et = run_both(pte, [x])
    xd = x.double()
    wl = module.w.double() * (
        module.s.double().repeat_interleave(n // groups, 1) if groups else module.s.double()[:, None]
    )
    wm = module.wmm.double() * module.smm.double()[:, None]
    rel = 1e-5 if dtype == torch.float32 else 2e-3  # float32 rounding; float16 storage of the result
    for k, (exact, mag) in enumerate([(xd @ wl.T, xd.abs() @ wl.abs().T), (xd @ wm, xd.abs() @ wm.abs())]):
        assert ours[k].dtype == dtype
        assert ((ours[k].double() - exact).abs() <= rel * mag + 1e-6).all(), f"output {k} vs exact"
        assert ((ours[k].double() - et[k].double()).abs() <= 2 * rel * mag + 1e-6).all(), f"output {k} vs ExecuTorch"


class QAdd(torch.nn.Module):
    def forward(self, a, b):
        return qd.add(a, 0.05, 120, 0, 255, b, 0.02, 10, 0, 255, 0.07, 100, 0, 255)


def test_quantized_add_matches_executorch_and_reference():
    g = torch.Generator().manual_seed(12)
    a = torch.randint(0, 256, (4, 9), generator=g, dtype=torch.uint8)
    b = torch.randint(0, 256, (4, 9), generator=g, dtype=torch.uint8)
    pte = export(QAdd(), (a, b))
    assert "quantized_decomposed::add.out" in op_names(pte)
    ours, et = run_both(pte, [a, b])
    same(ours, et, "add")
    fa = (a.double() - 120) * 0.05
    fb = (b.double() - 10) * 0.02
    ref = torch.clamp(torch.round((fa + fb) / 0.07) + 100, 0, 255).to(torch.uint8)
    assert (ours[0].int() - ref.int()).abs().max() <= 1


# ---- malformed parameters: a clear ExecutionError, never a crash -----------------


def patch_args(pte: bytes, op: str, changes: dict[int, float | int]) -> bytes:
    """The program with argument k of every call to `op` replaced (Int or
    Double values: a program the torch-side checks would never export)."""
    from executorch.exir._serialize._program import deserialize_pte_binary, serialize_pte_binary

    pf = deserialize_pte_binary(pte)
    plan = pf.program.execution_plan[0]
    names = [f"{o.name}.{o.overload}" for o in plan.operators]
    for chain in plan.chains:
        for ins in chain.instructions:
            call = ins.instr_args
            if getattr(call, "op_index", None) is None or names[call.op_index] != op:
                continue
            for k, v in changes.items():
                val = plan.values[call.args[k]].val
                if hasattr(val, "int_val"):
                    val.int_val = int(v)
                else:
                    val.double_val = float(v)
    return bytes(serialize_pte_binary(pf))


def expect_error(pte: bytes, inputs, *words: str) -> None:
    with pytest.raises(pyexec.ExecutionError) as err:
        run_pyexec(pte, inputs)
    msg = str(err.value)
    assert all(w in msg for w in words), msg


QPT = "quantized_decomposed::quantize_per_tensor.out"
DQPT = "quantized_decomposed::dequantize_per_tensor.out"


@pytest.mark.parametrize(
    "op,changes,words",
    [
        (QPT, {1: 0.0}, ("scale is 0", "positive")),
        (QPT, {1: -0.5}, ("scale is -0.5",)),
        (DQPT, {1: float("nan")}, ("scale is nan",)),
        (QPT, {2: 200}, ("zero_point 200", "quant_min")),
        (DQPT, {2: -129}, ("zero_point -129",)),
        (QPT, {3: -300}, ("quant_min -300", "int8's range")),
        (DQPT, {4: 1000}, ("quant_max 1000",)),
        (QPT, {3: 50, 4: 10}, ("quant_min 50 is greater than quant_max 10",)),
        (QPT, {5: 0}, ("dtype argument is uint8",)),
    ],
)
def test_malformed_per_tensor_parameters_fail_cleanly(op, changes, words):
    x = torch.randn(3, 4)
    pte = patch_args(export(QuantDequant(0.5, 3, -128, 127, torch.int8), (x,)), op, changes)
    expect_error(pte, [x], *words)


def test_malformed_per_channel_and_embedding_parameters_fail_cleanly():
    x = torch.randn(5, 5)
    pte = export(PerChannel(5, 0), (x,))
    # an axis past the input's dims, then one whose size differs from the scale count
    expect_error(patch_args(pte, "quantized_decomposed::quantize_per_channel.out", {3: 2}), [x], "dim")
    x2 = torch.randn(5, 3)
    pte2 = export(PerChannel(5, 0), (x2,))
    expect_error(
        patch_args(pte2, "quantized_decomposed::quantize_per_channel.out", {3: 1}), [x2], "scales has 5 elements", "3"
    )
    idx = torch.tensor([[9, 0, 4], [4, 1, 2]])
    pte3 = export(Embeddings(), (idx,))
    expect_error(pte3, [torch.tensor([[9, 0, 10], [4, 1, 2]])], "indices[2] is 10", "10 rows")
    expect_error(pte3, [torch.tensor([[9, 0, -1], [4, 1, 2]])], "indices[2] is -1")


def test_malformed_add_and_choose_qparams_fail_cleanly():
    a = torch.randint(0, 256, (2, 3), dtype=torch.uint8)
    pte = export(QAdd(), (a, a))
    add = "quantized_decomposed::add.out"
    expect_error(patch_args(pte, add, {4: 300}), [a, a], "a_quant_min 0 / a_quant_max 300")
    expect_error(patch_args(pte, add, {10: 0.0}), [a, a], "out_scale is 0")
    expect_error(patch_args(pte, add, {7: 300}), [a, a], "b_zero_point 300")
    cq = export(ChooseQparams(-128, 127, torch.int8), (torch.randn(5, 6),))
    expect_error(cq, [torch.full((5, 6), float("nan"))], "NaN or infinite")
    bad = patch_args(cq, "quantized_decomposed::choose_qparams.Tensor_out", {1: 5, 2: 5})
    expect_error(bad, [torch.randn(5, 6)], "quant_min 5 must be less than quant_max 5")
