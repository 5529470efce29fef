"""The newer llama custom operators: gated_delta_rule (and its older name
channelwise_gated_delta_rule), custom_quantized_sdpa, quantized_moe_ffn and
fallback, as ExecuTorch 1.5.1's LLM exports use them.

Small modules calling torch.ops.llama.* are exported with ExecuTorch's
exporter and run step by step (a prefill, then decode steps and chunks) by
pyexec and by ExecuTorch's runtime on the same file; both are compared with
the operator's meaning written in plain torch (float64).

Tolerances:
- gated_delta_rule: 1e-4 absolute / relative against ExecuTorch and the
  float64 recurrence. ExecuTorch walks a prompt in chunks of 32 tokens with
  matrix products, pyexec token by token: float32 results of O(1) values
  summed in different orders over up to 40 tokens of a recurrence (a few
  1e-6 seen; 1e-4 leaves room for the accumulation over the steps).
- custom_quantized_sdpa: 1e-5 relative / 2e-5 absolute, as custom_sdpa's
  float32 tests: both runtimes take the scores as exact integer products
  times the scales, so only float32 summation order differs (~2e-7 seen).
- quantized_moe_ffn: 1e-4 relative / 1e-5 absolute: both runtimes
  dequantize the experts exactly (an int times its group's scale) and differ
  only in the order of float32 sums over dim and hidden_dim.
"""

from __future__ import annotations

import re
import warnings
from typing import Any

import pytest
import torch
from support.export import assert_close, export_program

import pyexec


@pytest.fixture(scope="module", autouse=True)
def llama_ops() -> None:
    """Registers the llama:: and quantized_decomposed:: operators with torch
    (to export them) and their kernels with ExecuTorch's runtime."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import executorch.kernels.quantized  # noqa: F401
        from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401


def executorch_method(pte: bytes) -> Any:
    from executorch.runtime import Runtime

    return Runtime.get().load_program(pte).load_method("forward")


def ops_in(pte: bytes) -> set[str]:
    from executorch.exir._serialize._program import deserialize_pte_binary

    p = deserialize_pte_binary(pte)
    p = getattr(p, "program", p)
    return {f"{op.name}.{op.overload}" if op.overload else op.name for op in p.execution_plan[0].operators}


def gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


# ---- gated_delta_rule ----------------------------------------------------------------


def reference_gated_delta(
    q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, decay: torch.Tensor, beta: torch.Tensor, state: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """The gated delta rule in float64, token by token: q [B, Hq, T, K],
    k [B, Hs, T, K], v [B, Hs, T, V], decay [B, Hs, T, K] or [B, Hs, T],
    beta [B, Hs, T], state [B, Hs, K, V]; query head h reads state head
    h // (Hq / Hs). Returns (out [B, Hq, T, V], final state)."""
    q, k, v, decay, beta, s = (x.double() for x in (q, k, v, decay, beta, state))
    if decay.dim() == 3:
        decay = decay.unsqueeze(-1).expand_as(k)
    groups = q.shape[1] // k.shape[1]
    out = torch.zeros(q.shape[0], q.shape[1], q.shape[2], v.shape[3], dtype=torch.float64)
    for t in range(q.shape[2]):
        s = s * decay[:, :, t].unsqueeze(-1)
        pred = (s * k[:, :, t].unsqueeze(-1)).sum(-2)
        delta = (v[:, :, t] - pred) * beta[:, :, t].unsqueeze(-1)
        s = s + k[:, :, t].unsqueeze(-1) * delta.unsqueeze(-2)
        out[:, :, t] = (s.repeat_interleave(groups, dim=1) * q[:, :, t].unsqueeze(-1)).sum(-2)
    return out, s


def gdr_inputs(
    B: int, Hq: int, Hs: int, T: int, K: int, V: int, channelwise: bool, seed: int
) -> list[torch.Tensor]:
    """Inputs shaped as Qwen 3.5's linear attention makes them: q and k
    L2-normalised (q also scaled by K^-1/2), decay = exp(-softplus(.)) in
    (0, 1), beta a sigmoid."""
    g = gen(seed)
    q = torch.nn.functional.normalize(torch.randn(B, Hq, T, K, generator=g), dim=-1) * K**-0.5
    k = torch.nn.functional.normalize(torch.randn(B, Hs, T, K, generator=g), dim=-1)
    v = torch.randn(B, Hs, T, V, generator=g)
    shape = (B, Hs, T, K) if channelwise else (B, Hs, T)
    decay = torch.exp(-torch.nn.functional.softplus(torch.randn(shape, generator=g)))
    beta = torch.sigmoid(torch.randn(B, Hs, T, generator=g))
    return [q, k, v, decay, beta]


class GatedDelta(torch.nn.Module):
    """One linear-attention layer's recurrence as Qwen 3.5's export does it:
    the op reads the layer's state buffer as initial_state, and its
    final_state is copied back into the buffer. Returns the output and a
    copy of the state."""

    def __init__(self, B: int, Hs: int, K: int, V: int, alias: bool = False) -> None:
        super().__init__()
        self.alias = alias
        self.register_buffer("state", torch.zeros(B, Hs, K, V))

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, decay: torch.Tensor,
                beta: torch.Tensor) -> Any:
        op = torch.ops.llama.channelwise_gated_delta_rule if self.alias else torch.ops.llama.gated_delta_rule
        out, final = op(q, k, v, decay, beta, self.state)
        self.state.copy_(final)
        return out, self.state.clone()


def export_gated_delta(B: int, Hq: int, Hs: int, K: int, V: int, channelwise: bool, alias: bool = False) -> bytes:
    T = torch.export.Dim("T", min=1, max=64)
    example = tuple(gdr_inputs(B, Hq, Hs, 3, K, V, channelwise, 0))
    shapes = ({2: T}, {2: T}, {2: T}, {2: T}, {2: T})
    return export_program(GatedDelta(B, Hs, K, V, alias), example, dynamic_shapes=shapes, strict_ir=False)


GDR = [
    # (B, Hq, Hs, K, V, channelwise, alias)
    pytest.param(1, 4, 2, 16, 16, False, False, id="grouped-scalar-decay"),
    pytest.param(2, 4, 2, 8, 6, True, False, id="grouped-channelwise-batch2"),
    pytest.param(1, 3, 3, 5, 7, False, False, id="mha-odd-dims"),
    pytest.param(1, 4, 1, 8, 8, True, True, id="alias-one-state-head"),
]


@pytest.mark.parametrize("B,Hq,Hs,K,V,channelwise,alias", GDR)
def test_gated_delta_rule_steps_match_torch_and_executorch(
    B: int, Hq: int, Hs: int, K: int, V: int, channelwise: bool, alias: bool
) -> None:
    """A 35-token prefill (more than ExecuTorch's 32-token chunk), decode
    steps, a 3-token chunk and a 40-token chunk, the state carried in the
    program's buffer from one execute call to the next."""
    pte = export_gated_delta(B, Hq, Hs, K, V, channelwise, alias)
    name = "channelwise_gated_delta_rule" if alias else "gated_delta_rule"
    assert {op for op in ops_in(pte) if op.startswith("llama::")} == {f"llama::{name}.out"}
    ours, theirs = pyexec.load(pte).load_method("forward"), executorch_method(pte)
    state = torch.zeros(B, Hs, K, V, dtype=torch.float64)
    tol = {"rtol": 1e-4, "atol": 1e-4}
    for step, n in enumerate([35, 1, 1, 3, 1, 40]):
        args = gdr_inputs(B, Hq, Hs, n, K, V, channelwise, 100 + step)
        expected, state = reference_gated_delta(*args, state)
        got = ours.execute([a.clone() for a in args])
        et = theirs.execute([a.clone() for a in args])
        what = f"step {step} ({n} tokens)"
        assert got[0].shape == (B, Hq, n, V)
        assert_close(got[0], expected.float(), what=f"{what}: output vs torch", **tol)
        assert_close(got[1], state.float(), what=f"{what}: state vs torch", **tol)
        assert_close(got[0], et[0], what=f"{what}: output vs ExecuTorch", **tol)
        assert_close(got[1], et[1], what=f"{what}: state vs ExecuTorch", **tol)
    assert state.abs().max() > 0.1  # the state carries something between the steps


class GatedDeltaInputs(torch.nn.Module):
    """gated_delta_rule with every tensor (the state too) a program input,
    each dimension dynamic: the runtime checks only each input's bounds, so
    the kernel's own checks see mismatched shapes."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, decay: torch.Tensor, beta: torch.Tensor,
                state: torch.Tensor) -> Any:
        return torch.ops.llama.gated_delta_rule(q, k, v, decay, beta, state)


def gated_delta_inputs_program(channelwise: bool) -> bytes:
    Dim = torch.export.Dim
    B, H, Hq, T = Dim("B", min=1, max=4), Dim("H", min=1, max=8), Dim("Hq", min=1, max=16), Dim("T", min=1, max=16)
    K, V = Dim("K", min=1, max=16), Dim("V", min=1, max=16)
    example = (*gdr_inputs(2, 4, 2, 3, 5, 6, channelwise, 0), torch.zeros(2, 2, 5, 6))
    decay_shape = {0: B, 1: H, 2: T, 3: K} if channelwise else {0: B, 1: H, 2: T}
    shapes = ({0: B, 1: Hq, 2: T, 3: K}, {0: B, 1: H, 2: T, 3: K}, {0: B, 1: H, 2: T, 3: V}, decay_shape,
              {0: B, 1: H, 2: T}, {0: B, 1: H, 2: K, 3: V})
    return export_program(GatedDeltaInputs(), example, dynamic_shapes=shapes, strict_ir=False)


def test_gated_delta_rule_state_as_an_input_matches_torch() -> None:
    """The same program shape the error tests use, with good inputs: the
    state an unplanned input, its final value an output."""
    method = pyexec.load(gated_delta_inputs_program(True)).load_method("forward")
    args = [*gdr_inputs(2, 4, 2, 5, 5, 6, True, 7), torch.randn(2, 2, 5, 6, generator=gen(8))]
    out, final = method.execute([a.clone() for a in args])
    expected, state = reference_gated_delta(*args)
    assert_close(out, expected.float(), rtol=1e-5, atol=1e-5, what="output")
    assert_close(final, state.float(), rtol=1e-5, atol=1e-5, what="final state")


def _bad(change: str) -> list[torch.Tensor]:
    q, k, v, decay, beta = gdr_inputs(2, 4, 2, 3, 5, 6, True, 1)
    state = torch.zeros(2, 2, 5, 6)
    if change == "uneven-groups":
        q = q[:, :3]
    elif change == "state-value-dim":
        state = torch.zeros(2, 2, 5, 5)
    elif change == "state-heads":
        state = torch.zeros(2, 1, 5, 6)
    elif change == "decay-tokens":
        decay = decay[:, :, :2]
    elif change == "beta-heads":
        beta = beta[:, :1]
    elif change == "query-tokens":
        q = q[:, :, :2]
    elif change == "value-batch":
        v = v[:1]
    return [q, k, v, decay, beta, state]


@pytest.mark.parametrize(
    "change,message",
    [
        ("uneven-groups", "query has 3 heads and key 2; the key's heads must divide the query's"),
        ("state-value-dim", "initial_state has shape [2, 2, 5, 5]; expected [2, 2, 5, 6]"),
        ("state-heads", "initial_state has shape [2, 1, 5, 6]; expected [2, 2, 5, 6]"),
        ("decay-tokens", "decay"),
        ("beta-heads", "beta"),
        ("query-tokens", "query"),
        ("value-batch", "value"),
    ],
)
def test_gated_delta_rule_refuses_mismatched_shapes(change: str, message: str) -> None:
    method = pyexec.load(gated_delta_inputs_program(True)).load_method("forward")
    with pytest.raises(pyexec.ExecutionError, match="gated_delta_rule.out: " + re.escape(message)):
        method.execute(_bad(change))
    # the method still runs afterwards
    method.execute(_bad("none"))


# ---- custom_quantized_sdpa -------------------------------------------------------------


def quantize_per_token(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """x as ExecuTorch's quantized KV cache stores it: int8 per (batch,
    position, head) row with a float32 scale and an int8 zero point."""
    qd = torch.ops.quantized_decomposed
    scale, zp = qd.choose_qparams_per_token_asymmetric.default(x, torch.int8)
    xq = qd.quantize_per_token(x, scale, zp, -128, 127, torch.int8)
    return xq, scale.to(torch.float32), zp.to(torch.int8)


def dequantize(xq: torch.Tensor, scale: torch.Tensor, zp: torch.Tensor) -> torch.Tensor:
    return (xq.double() - zp.double()) * scale.double()


def reference_attention(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, start_pos: int) -> torch.Tensor:
    """Causal attention in float64 of q [B, S, Hq, D] over keys [0, start_pos +
    S) of k, v [B, S_kv, Hkv, D], row s stopping at start_pos + s, query head
    h reading kv head h // (Hq / Hkv)."""
    S, Hq, D = q.shape[1], q.shape[2], q.shape[3]
    n, groups = start_pos + S, Hq // k.shape[2]
    qh = q.double().transpose(1, 2)
    kh = k[:, :n].double().repeat_interleave(groups, dim=2).transpose(1, 2)
    vh = v[:, :n].double().repeat_interleave(groups, dim=2).transpose(1, 2)
    scores = qh @ kh.transpose(-1, -2) / D**0.5
    rows = torch.arange(S).unsqueeze(1) + start_pos
    scores = scores.masked_fill(torch.arange(n).unsqueeze(0) > rows, float("-inf"))
    return (scores.softmax(-1) @ vh).transpose(1, 2)


class QuantizedCachedAttention(torch.nn.Module):
    """An attention layer over an int8 KV cache as model.quantize_kv_cache
    exports it (QuantizedKVCache + QuantizedSDPA): k, v and q quantized per
    token and head, the caches and their scales / zero points written with
    update_cache, then custom_quantized_sdpa, causal from input_pos[0].
    Returns the attention, q quantized (values, scales, zero points) and
    copies of the six caches."""

    def __init__(self, max_seq: int, kv_heads: int, head_dim: int) -> None:
        super().__init__()
        for n in "kv":
            self.register_buffer(f"{n}_cache", torch.zeros(1, max_seq, kv_heads, head_dim, dtype=torch.int8))
            self.register_buffer(f"{n}_scales", torch.ones(1, max_seq, kv_heads, 1))
            self.register_buffer(f"{n}_zero_points", torch.zeros(1, max_seq, kv_heads, 1, dtype=torch.int8))

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, input_pos: torch.Tensor) -> Any:
        pos = input_pos[0].item()
        torch._check_is_size(pos)
        torch._check(pos < self.k_cache.shape[1])
        for n, x in (("k", k), ("v", v)):
            xq, scale, zp = quantize_per_token(x)
            torch.ops.llama.update_cache(xq, getattr(self, f"{n}_cache"), pos)
            torch.ops.llama.update_cache(scale, getattr(self, f"{n}_scales"), pos)
            torch.ops.llama.update_cache(zp, getattr(self, f"{n}_zero_points"), pos)
        qq, qs, qz = quantize_per_token(q)
        out = torch.ops.llama.custom_quantized_sdpa(
            qq, self.k_cache, self.v_cache, pos, None, 0.0, True, None,
            qz, qs, self.k_zero_points, self.k_scales, self.v_zero_points, self.v_scales,
        )
        caches = (self.k_cache, self.k_scales, self.k_zero_points, self.v_cache, self.v_scales, self.v_zero_points)
        return out, qq, qs, qz, *(c.clone() for c in caches)


def export_quantized_cached(max_seq: int, heads: int, kv_heads: int, head_dim: int) -> bytes:
    seq = torch.export.Dim("seq", min=1, max=max_seq)
    example = (torch.zeros(1, 2, heads, head_dim), torch.zeros(1, 2, kv_heads, head_dim),
               torch.zeros(1, 2, kv_heads, head_dim), torch.tensor([0]))
    return export_program(QuantizedCachedAttention(max_seq, kv_heads, head_dim), example,
                          dynamic_shapes=({1: seq}, {1: seq}, {1: seq}, None), strict_ir=False)


QCACHED = [
    # (max_seq, heads, kv_heads, head_dim, prefill)
    pytest.param(16, 4, 2, 16, 5, id="gqa"),
    pytest.param(12, 3, 3, 8, 3, id="mha"),
    pytest.param(12, 6, 2, 5, 4, id="gqa3-odd-dim"),
    pytest.param(300, 4, 1, 32, 260, id="mqa-long-prefill"),  # > one 256-key block, several query tiles
]


@pytest.mark.parametrize("max_seq,heads,kv_heads,head_dim,prefill", QCACHED)
def test_quantized_cached_attention_steps_match_torch_and_executorch(
    max_seq: int, heads: int, kv_heads: int, head_dim: int, prefill: int
) -> None:
    pte = export_quantized_cached(max_seq, heads, kv_heads, head_dim)
    assert "llama::custom_quantized_sdpa.out" in ops_in(pte)
    ours, theirs = pyexec.load(pte).load_method("forward"), executorch_method(pte)
    steps, pos = [(0, prefill)], prefill
    while pos < max_seq and len(steps) < 12:
        n = 3 if len(steps) == 3 and pos + 3 <= max_seq else 1
        steps.append((pos, n))
        pos += n
    for step, (pos, n) in enumerate(steps):
        g = gen(step)
        q, k, v = (torch.randn(1, n, h, head_dim, generator=g) for h in (heads, kv_heads, kv_heads))
        args = [q, k, v, torch.tensor([pos])]
        got = ours.execute([a.clone() for a in args])
        et = theirs.execute([a.clone() for a in args])
        what = f"step {step} (start_pos {pos}, {n} tokens)"
        # The quantized q and caches as ExecuTorch's kernels make them (torch
        # eager's choose_qparams rounds a rare row's zero point the other
        # way), the same in both runtimes, and the reference attention is
        # taken over those values.
        for i, name in enumerate(["q", "q_scales", "q_zero_points", "k_cache", "k_scales", "k_zero_points",
                                  "v_cache", "v_scales", "v_zero_points"]):
            assert torch.equal(got[1 + i], et[1 + i]), f"{what}: {name} differs from ExecuTorch's"
        qq, qs, qz, kc, ks, kz, vc, vs, vz = got[1:]
        expected = reference_attention(dequantize(qq, qs, qz), dequantize(kc, ks, kz), dequantize(vc, vs, vz), pos)
        assert got[0].dtype == torch.float32 and got[0].shape == (1, n, heads, head_dim)
        assert_close(got[0], expected.float(), rtol=1e-5, atol=2e-5, what=f"{what}: vs torch")
        assert_close(got[0], et[0], rtol=1e-5, atol=2e-5, what=f"{what}: vs ExecuTorch")
        # the cache holds this step's keys: torch's quantization of k within a step of it
        assert_close(dequantize(kc, ks, kz)[:, pos : pos + n], k.double(), rtol=0, atol=0.02,
                     what=f"{what}: cached keys")


class QuantizedSdpaInputs(torch.nn.Module):
    """custom_quantized_sdpa with every tensor a program input, causal from
    start_pos (an int input), seq at dim 1 or 2."""

    def __init__(self, seq_at_dim_2: bool) -> None:
        super().__init__()
        self.seq_at_dim_2 = seq_at_dim_2

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, qz: torch.Tensor, qs: torch.Tensor,
                kz: torch.Tensor, ks: torch.Tensor, vz: torch.Tensor, vs: torch.Tensor,
                start: torch.Tensor) -> torch.Tensor:
        pos = start[0].item()
        torch._check_is_size(pos)
        return torch.ops.llama.custom_quantized_sdpa(q, k, v, pos, None, 0.0, True, None, qz, qs, kz, ks, vz, vs,
                                                     self.seq_at_dim_2)


def quantized_inputs(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> list[torch.Tensor]:
    qq, qs, qz = quantize_per_token(q)
    kq, ks, kz = quantize_per_token(k)
    vq, vs, vz = quantize_per_token(v)
    return [qq, kq, vq, qz, qs, kz, ks, vz, vs]


def quantized_inputs_program(seq_at_dim_2: bool) -> bytes:
    Dim = torch.export.Dim
    S, Skv = Dim("S", min=1, max=16), Dim("Skv", min=1, max=32)
    H, Hkv = Dim("H", min=1, max=8), Dim("Hkv", min=1, max=8)
    s_dim, h_dim = (2, 1) if seq_at_dim_2 else (1, 2)
    shape = (1, 8, 4, 8) if not seq_at_dim_2 else (1, 4, 8, 8)
    kv_shape = (1, 8, 2, 8) if not seq_at_dim_2 else (1, 2, 8, 8)
    example = (*quantized_inputs(torch.randn(shape), torch.randn(kv_shape), torch.randn(kv_shape)), torch.tensor([0]))
    qd, kvd = {s_dim: S, h_dim: H}, {s_dim: Skv, h_dim: Hkv}
    shapes = (qd, kvd, kvd, qd, qd, kvd, kvd, kvd, kvd, None)
    return export_program(QuantizedSdpaInputs(seq_at_dim_2), example, dynamic_shapes=shapes, strict_ir=False)


@pytest.mark.parametrize("seq_at_dim_2", [False, True])
def test_quantized_sdpa_both_layouts_match_torch_and_executorch(seq_at_dim_2: bool) -> None:
    pte = quantized_inputs_program(seq_at_dim_2)
    ours, theirs = pyexec.load(pte).load_method("forward"), executorch_method(pte)
    for step, (S, Skv, start) in enumerate([(5, 20, 0), (1, 20, 12), (3, 20, 17)]):
        g = gen(50 + step)
        q, k, v = torch.randn(1, S, 4, 8, generator=g), torch.randn(1, Skv, 2, 8, generator=g), torch.randn(
            1, Skv, 2, 8, generator=g)
        expected = reference_attention(dequantize(*quantize_per_token(q)), dequantize(*quantize_per_token(k)),
                                       dequantize(*quantize_per_token(v)), start)
        if seq_at_dim_2:  # [B, H, S, D] and row parameters [B, H, S, 1]
            q, k, v = (x.transpose(1, 2).contiguous() for x in (q, k, v))
            expected = expected.transpose(1, 2)
        args = [*quantized_inputs(q, k, v), torch.tensor([start])]
        got = ours.execute([a.clone() for a in args])[0]
        et = theirs.execute([a.clone() for a in args])[0]
        assert_close(got, expected.float(), rtol=1e-5, atol=2e-5, what=f"step {step} vs torch")
        assert_close(got, et, rtol=1e-5, atol=2e-5, what=f"step {step} vs ExecuTorch")


def _bad_quantized(change: str) -> list[torch.Tensor]:
    g = gen(3)
    q, k, v = torch.randn(1, 2, 4, 8, generator=g), torch.randn(1, 10, 2, 8, generator=g), torch.randn(
        1, 10, 2, 8, generator=g)
    start = 4
    if change == "uneven-groups":
        q = q[:, :, :3]
    args = quantized_inputs(q, k, v)
    if change == "k-scales-length":
        args[6] = args[6][:, :9]
    elif change == "v-zero-points-heads":
        args[7] = args[7][:, :, :1]
    elif change == "q-scales-length":
        args[4] = args[4][:, :1]
    elif change == "start-past-cache":
        start = 9
    return [*args, torch.tensor([start])]


@pytest.mark.parametrize(
    "change,message",
    [
        ("uneven-groups", "query has 3 heads and key 2; the key's heads must divide the query's"),
        ("k-scales-length", "k_scales"),
        ("v-zero-points-heads", "v_zero_points"),
        ("q-scales-length", "q_scales"),
        ("start-past-cache", "start_pos 9 + query's 2 positions = 11 exceeds the key's 10 positions"),
    ],
)
def test_quantized_sdpa_refuses_bad_arguments(change: str, message: str) -> None:
    method = pyexec.load(quantized_inputs_program(False)).load_method("forward")
    with pytest.raises(pyexec.ExecutionError, match="custom_quantized_sdpa.out: " + re.escape(message)):
        method.execute(_bad_quantized(change))
    method.execute(_bad_quantized("none"))


# ---- fallback ----------------------------------------------------------------------------


class TwoLayers(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.layers = torch.nn.ModuleList([torch.nn.Linear(5, 5), torch.nn.Linear(5, 5)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = torch.relu(layer(x)) * 2.0
        return x


def test_fallback_between_shards_is_the_identity() -> None:
    """ExecuTorch's model sharding (split_graph, as its Qualcomm LLM export
    runs it) puts llama::fallback between layer 0 and layer 1."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from executorch.exir import to_edge
        from executorch.extension.llm.custom_ops.model_sharding import split_graph

        module, x = TwoLayers().eval(), torch.randn(3, 5, generator=gen(0))
        edge = to_edge(torch.export.export(module, (x,), strict=False))
        split_graph(edge.exported_program(), num_layers=2, shares=2)
        pte = bytes(edge.to_executorch().buffer)
    assert "llama::fallback.out" in ops_in(pte)
    got = pyexec.load(pte).load_method("forward").execute([x])[0]
    with torch.no_grad():
        assert_close(got, module(x), rtol=1e-6, atol=1e-6, what="vs torch")
    # (the linear layers' sums in another order: an ulp apart)
    assert_close(got, executorch_method(pte).execute([x])[0], rtol=1e-6, atol=1e-6, what="vs ExecuTorch")


# ---- quantized_moe_ffn ---------------------------------------------------------------------


def pack_torchao_blob(q: torch.Tensor, scales: torch.Tensor, group_size: int, nbit: int) -> torch.Tensor:
    """An [N, K] int8 weight (values in nbit's signed range) with one float32
    scale per group of K, packed as torchao's linear_8bit_act_xbit_weight
    blob that ExecuTorch's quantized_moe_ffn kernel unpacks: a 64-byte header
    (magic 6712, format 1), then blocks of 8 rows, group by group: per 16
    values of K the 8 x 16 values in two halves of 8 per row, bit-packed (4
    bits: value + 8, byte i of each 16 holding value i low and value i + 16
    high), then the 8 rows' scales and int32 sums. (torchao's own packing op
    is not in this torchao build: its kernel library is not loaded.)"""
    import struct

    import numpy as np

    N, K = q.shape
    groups = K // group_size
    Np = (N + 7) // 8 * 8
    qv = np.zeros((Np, K), np.int8)
    qv[:N] = q.numpy()
    sc = np.zeros((Np, groups), np.float32)
    sc[:N] = scales.reshape(N, groups).numpy()
    out = [struct.pack("<16i", 6712, 1, *([0] * 14))]
    for n0 in range(0, Np, 8):
        for g in range(groups):
            for k0 in range(g * group_size, (g + 1) * group_size, 16):
                block = qv[n0 : n0 + 8, k0 : k0 + 16]
                vals = np.concatenate([block[:, :8].reshape(-1), block[:, 8:].reshape(-1)])
                if nbit == 4:
                    u = (vals.astype(np.int16) + 8).astype(np.uint8).reshape(4, 32)
                    out.append(((u[:, 16:] << 4) | u[:, :16]).astype(np.uint8).tobytes())
                else:
                    out.append(vals.tobytes())
            out.append(sc[n0 : n0 + 8, g].astype("<f4").tobytes())
            sums = qv[n0 : n0 + 8, g * group_size : (g + 1) * group_size].astype(np.int32).sum(1)
            out.append(sums.astype("<i4").tobytes())
    return torch.frombuffer(bytearray(b"".join(out)), dtype=torch.uint8)


def moe_module(E: int, K: int, D: int, F: int, gs: int, nbit: int, score_func: str, bias: bool, seed: int) -> Any:
    """ExecuTorch's QuantizedMoEFFN (the module replace_moe_with_quantized_op
    puts in place of MOEFeedForward) over random experts quantized by its own
    _symmetric_quantize_per_group, plus the dequantized weights for the
    reference."""
    from executorch.examples.models.llama.source_transformation.moe import (
        QuantizedMoEFFN,
        _symmetric_quantize_per_group,
    )

    g = gen(seed)
    gate = torch.randn(E, D, generator=g) / D**0.5
    w13s, w2s, deq13, deq2 = [], [], [], []
    for _ in range(E):
        w13 = torch.randn(2 * F, D, generator=g) / D**0.5
        w2 = torch.randn(D, F, generator=g) / F**0.5
        for w, packed, deq in ((w13, w13s, deq13), (w2, w2s, deq2)):
            q, s = _symmetric_quantize_per_group(w, gs, nbit)
            packed.append(pack_torchao_blob(q, s, gs, nbit))
            rows = w.shape[0]
            deq.append((q.double().reshape(rows, -1, gs) * s.double().reshape(rows, -1, 1)).reshape(w.shape))
    module = QuantizedMoEFFN(
        gate, torch.randn(E, generator=g) if bias else None, torch.stack(w13s), torch.stack(w2s),
        num_experts=E, num_activated_experts=K, hidden_dim=F, dim=D, group_size=gs, weight_nbit=nbit,
        score_func=score_func, route_scale=2.5,
    )
    return module, torch.stack(deq13), torch.stack(deq2)


def reference_moe(module: Any, w13: torch.Tensor, w2: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """The op's routing and experts in float64 (op_moe.cpp's contract)."""
    xd = x.double().reshape(-1, module.dim)
    scores = xd @ module.gate_weight.double().T
    F, K = module.hidden_dim, module.num_activated_experts
    out = torch.zeros_like(xd)
    for t in range(xd.shape[0]):
        if module.score_func == "sigmoid":
            s = scores[t].sigmoid()
            sel = s + module.expert_bias.double() if module.expert_bias.numel() else s
            idx = sel.topk(K).indices
            w = s[idx] * module.route_scale / s[idx].sum()
        else:
            idx = scores[t].topk(K).indices
            w = scores[t][idx].softmax(0)
        for e, we in zip(idx.tolist(), w):
            h = w13[e] @ xd[t]
            out[t] += we * (w2[e] @ (torch.nn.functional.silu(h[:F]) * h[F:]))
    return out.reshape(x.shape)


MOE = [
    # (E, K, D, F, group_size, nbit, score_func, bias)
    pytest.param(4, 2, 32, 32, 32, 4, "sigmoid", True, id="int4-sigmoid-bias"),
    pytest.param(6, 3, 64, 48, 16, 4, "softmax", False, id="int4-softmax-rows-not-multiple-of-8"),
    pytest.param(4, 1, 32, 64, 32, 8, "sigmoid", False, id="int8-top1"),
]


@pytest.mark.parametrize("E,K,D,F,gs,nbit,score_func,bias", MOE)
def test_quantized_moe_ffn_matches_torch_and_executorch(
    E: int, K: int, D: int, F: int, gs: int, nbit: int, score_func: str, bias: bool
) -> None:
    module, w13, w2 = moe_module(E, K, D, F, gs, nbit, score_func, bias, seed=E + F)
    T = torch.export.Dim("T", min=1, max=64)
    pte = export_program(module, (torch.randn(1, 3, D),), dynamic_shapes=({1: T},), strict_ir=False)
    assert "llama::quantized_moe_ffn.out" in ops_in(pte)
    ours, theirs = pyexec.load(pte).load_method("forward"), executorch_method(pte)
    for n in (7, 1, 1, 20):
        x = torch.randn(1, n, D, generator=gen(100 + n))
        got = ours.execute([x])[0]
        assert_close(got, reference_moe(module, w13, w2, x).float(), rtol=1e-4, atol=1e-5, what=f"{n} tokens vs torch")
        assert_close(got, theirs.execute([x])[0], rtol=1e-4, atol=1e-5, what=f"{n} tokens vs ExecuTorch")


class MoEInputs(torch.nn.Module):
    def forward(self, x: torch.Tensor, gate: torch.Tensor, bias: torch.Tensor, w13: torch.Tensor,
                w2: torch.Tensor) -> torch.Tensor:
        return torch.ops.llama.quantized_moe_ffn(x, gate, bias, w13, w2, 2, 4, 32, 32, 32, 4, "sigmoid", 2.5)


def test_quantized_moe_ffn_refuses_short_blobs_and_bad_shapes() -> None:
    module, _, _ = moe_module(4, 2, 32, 32, 32, 4, "sigmoid", True, seed=1)
    args = [torch.randn(3, 32), module.gate_weight, module.expert_bias, module.packed_w13, module.packed_w2]
    Dim = torch.export.Dim
    # (the expert count and dims are the op's arguments: the exporter fixes
    # the shapes that must match them; the blobs' lengths stay free)
    shapes = ({0: Dim("T", min=1, max=8)}, None, None, {1: Dim("B13", min=1, max=4096)},
              {1: Dim("B2", min=1, max=4096)})
    pte = export_program(MoEInputs(), tuple(args), dynamic_shapes=shapes, strict_ir=False)
    method = pyexec.load(pte).load_method("forward")
    expected = method.execute(args)[0]
    assert_close(expected, module(args[0]), rtol=1e-4, atol=1e-5, what="good inputs vs eager")
    bad = {
        "packed_w13 has 1599 bytes per expert; [2 * hidden_dim, dim] at 4 bits needs 1600": (3, args[3][:, :-1]),
        "packed_w2 has 100 bytes per expert": (4, args[4][:, :100]),
    }
    for message, (i, value) in bad.items():
        call = list(args)
        call[i] = value.contiguous()
        with pytest.raises(pyexec.ExecutionError, match="quantized_moe_ffn.out: " + re.escape(message)):
            method.execute(call)
    assert torch.equal(method.execute(args)[0], expected)
