"""The llama custom operators (native/src/kernels/llm/): update_cache,
update_cache_with_indices, custom_sdpa, sdpa_with_kv_cache and
fast_hadamard_transform, as ExecuTorch's LLM exports use them.

Small modules calling torch.ops.llama.* are exported with ExecuTorch's
exporter and run step by step (a prefill, then decode steps and chunks up to
the last cache position) by pyexec and by ExecuTorch's runtime on the same
file; both are compared with the same attention written in plain torch
(float64, causal from start_pos, grouped-query heads expanded). Then the real
thing: ExecuTorch's llama example exported through its own export API with a
tiny params.json, a prefill and decode steps compared logit by logit and
token by token with ExecuTorch's runtime.

Tolerances: float32 results within 2e-5 absolute / 1e-5 relative of the
float64 reference and of ExecuTorch (both accumulate in float32 in different
orders: blocked online softmax here, ExecuTorch's own tiling there, a few
ulps of O(1) values); float16 within 4e-3 (half an ulp of the output is
~5e-4 at 1, plus the rounding of q, k and v themselves in the reference)."""

from __future__ import annotations

import math
import re
import warnings
from collections.abc import Sequence
from typing import Any

import pytest
import torch
from support.export import assert_close, export_program

import pyexec


@pytest.fixture(scope="module", autouse=True)
def llama_ops() -> None:
    """Registers the llama:: operators with torch (to export them) and their
    kernels with ExecuTorch's runtime (to run them there)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401


def executorch_method(pte: bytes) -> Any:
    from executorch.runtime import Runtime

    return Runtime.get().load_program(pte).load_method("forward")


def rand(shape: Sequence[int], seed: int, dtype: torch.dtype = torch.float32) -> torch.Tensor:
    return torch.randn(tuple(shape), generator=torch.Generator().manual_seed(seed)).to(dtype)


def tol(dtype: torch.dtype) -> dict[str, float]:
    return {"rtol": 4e-3, "atol": 4e-3} if dtype == torch.float16 else {"rtol": 1e-5, "atol": 2e-5}


def reference_attention(
    q: torch.Tensor,
    k: torch.Tensor,
    v: torch.Tensor,
    start_pos: int,
    *,
    causal: bool = True,
    mask: torch.Tensor | None = None,
    scale: float | None = None,
) -> torch.Tensor:
    """custom_sdpa's meaning in plain torch, in float64: q [B, S, Hq, D]
    attends keys [0, start_pos + S) of k, v [B, S_kv, Hkv, D] (all S_kv with a
    mask, added after scaling), row s stopping at start_pos + s when causal;
    query head h reads kv head h // (Hq / Hkv)."""
    S, Hq, D = q.shape[1], q.shape[2], q.shape[3]
    n = k.shape[1] if mask is not None else start_pos + S
    groups = Hq // k.shape[2]
    qh = q.double().transpose(1, 2)  # [B, Hq, S, D]
    kh = k[:, :n].double().repeat_interleave(groups, dim=2).transpose(1, 2)
    vh = v[:, :n].double().repeat_interleave(groups, dim=2).transpose(1, 2)
    scores = qh @ kh.transpose(-1, -2) * (scale if scale is not None else 1.0 / math.sqrt(D))
    if mask is not None:
        scores = scores + mask.double()
    if causal:
        allowed = torch.arange(n)[None, :] <= start_pos + torch.arange(S)[:, None]
        scores = scores.masked_fill(~allowed, float("-inf"))
    return (torch.softmax(scores, dim=-1) @ vh).transpose(1, 2).to(q.dtype)


# ---- update_cache + custom_sdpa, step by step ---------------------------------


class CachedAttention(torch.nn.Module):
    """One attention layer's cache work as ExecuTorch's llama export does it:
    update_cache of k and v at input_pos[0], then custom_sdpa over the
    caches, causal. Returns the attention and copies of both caches."""

    def __init__(self, max_seq: int, kv_heads: int, head_dim: int, dtype: torch.dtype) -> None:
        super().__init__()
        self.register_buffer("k_cache", torch.zeros(1, max_seq, kv_heads, head_dim, dtype=dtype))
        self.register_buffer("v_cache", torch.zeros(1, max_seq, kv_heads, head_dim, dtype=dtype))

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, input_pos: torch.Tensor) -> Any:
        start_pos = input_pos[0].item()
        torch._check_is_size(start_pos)
        torch._check(start_pos < self.k_cache.shape[1])
        torch.ops.llama.update_cache(k, self.k_cache, start_pos)
        torch.ops.llama.update_cache(v, self.v_cache, start_pos)
        out = torch.ops.llama.custom_sdpa(q, self.k_cache, self.v_cache, start_pos, None, 0.0, True)
        return out, self.k_cache.clone(), self.v_cache.clone()


class FusedCachedAttention(CachedAttention):
    """The same with the older fused op: sdpa_with_kv_cache writes the caches
    and attends over them."""

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, input_pos: torch.Tensor) -> Any:
        start_pos = input_pos[0].item()
        torch._check_is_size(start_pos)
        torch._check(start_pos < self.k_cache.shape[1])
        out = torch.ops.llama.sdpa_with_kv_cache(
            q, k, v, self.k_cache, self.v_cache, start_pos, q.shape[1], None, 0.0, True
        )
        return out, self.k_cache.clone(), self.v_cache.clone()


def export_cached(cls: type, max_seq: int, heads: int, kv_heads: int, head_dim: int, dtype: torch.dtype) -> bytes:
    module = cls(max_seq, kv_heads, head_dim, dtype)
    seq = torch.export.Dim("seq", min=1, max=max_seq)
    example = (
        torch.zeros(1, 2, heads, head_dim, dtype=dtype),
        torch.zeros(1, 2, kv_heads, head_dim, dtype=dtype),
        torch.zeros(1, 2, kv_heads, head_dim, dtype=dtype),
        torch.tensor([0]),
    )
    shapes = ({1: seq}, {1: seq}, {1: seq}, None)
    pte = export_program(module, example, dynamic_shapes=shapes, strict_ir=False)
    return pte


def steps_to_end(max_seq: int, prefill: int) -> list[tuple[int, int]]:
    """(start_pos, length) chunks from a prefill to the last cache position:
    single-token decode steps, one 3-token chunk in the middle, the last
    step writing position max_seq - 1."""
    steps, pos = [(0, prefill)], prefill
    while pos < max_seq:
        n = 3 if pos == prefill + 2 and pos + 3 <= max_seq else 1
        steps.append((pos, n))
        pos += n
    return steps


CACHED = [
    # (fused, max_seq, heads, kv_heads, head_dim, dtype, prefill): fused is
    # sdpa_with_kv_cache instead of update_cache + custom_sdpa
    pytest.param(False, 16, 4, 2, 16, torch.float32, 5, id="gqa-f32"),
    pytest.param(False, 12, 6, 2, 5, torch.float32, 4, id="gqa3-odd-dim"),
    pytest.param(False, 10, 3, 3, 8, torch.float32, 3, id="mha"),
    pytest.param(False, 12, 4, 1, 16, torch.float16, 4, id="mqa-f16"),
    pytest.param(True, 16, 4, 2, 16, torch.float32, 5, id="fused-gqa-f32"),
    pytest.param(True, 10, 3, 3, 8, torch.float32, 3, id="fused-mha"),
]


@pytest.mark.parametrize("fused,max_seq,heads,kv_heads,head_dim,dtype,prefill", CACHED)
def test_cached_attention_steps_match_torch_and_executorch(
    fused: bool, max_seq: int, heads: int, kv_heads: int, head_dim: int, dtype: torch.dtype, prefill: int
) -> None:
    cls = FusedCachedAttention if fused else CachedAttention
    pte = export_cached(cls, max_seq, heads, kv_heads, head_dim, dtype)
    ops = {op for op in _ops_in(pte) if op.startswith("llama::")}
    assert ops == (
        {"llama::sdpa_with_kv_cache.out"} if fused else {"llama::update_cache.out", "llama::custom_sdpa.out"}
    )
    ours, theirs = pyexec.load(pte).load_method("forward"), executorch_method(pte)
    k_ref = torch.zeros(1, max_seq, kv_heads, head_dim, dtype=dtype)
    v_ref = torch.zeros_like(k_ref)
    for step, (pos, n) in enumerate(steps_to_end(max_seq, prefill)):
        q = rand((1, n, heads, head_dim), 3 * step, dtype)
        k = rand((1, n, kv_heads, head_dim), 3 * step + 1, dtype)
        v = rand((1, n, kv_heads, head_dim), 3 * step + 2, dtype)
        k_ref[:, pos : pos + n], v_ref[:, pos : pos + n] = k, v
        expected = reference_attention(q, k_ref, v_ref, pos)
        args = [q, k, v, torch.tensor([pos])]
        got = ours.execute([a.clone() for a in args])
        et = theirs.execute([a.clone() for a in args])
        what = f"step {step} (start_pos {pos}, {n} tokens)"
        assert_close(got[1], k_ref, rtol=0, atol=0, what=f"{what}: key cache")
        assert_close(got[2], v_ref, rtol=0, atol=0, what=f"{what}: value cache")
        assert_close(got[0], expected, what=f"{what}: attention vs torch", **tol(dtype))
        assert_close(got[0], et[0], what=f"{what}: attention vs ExecuTorch", **tol(dtype))


def test_long_context_crosses_key_blocks_and_row_tiles() -> None:
    """A 300-token prefill and decode steps over a 600-position cache: more
    than one 256-key block (online softmax rescaling between blocks) and many
    64-row query tiles, against torch and ExecuTorch."""
    max_seq, heads, kv_heads, head_dim = 600, 4, 2, 32
    pte = export_cached(CachedAttention, max_seq, heads, kv_heads, head_dim, torch.float32)
    ours, theirs = pyexec.load(pte).load_method("forward"), executorch_method(pte)
    k_ref = torch.zeros(1, max_seq, kv_heads, head_dim)
    v_ref = torch.zeros_like(k_ref)
    for step, (pos, n) in enumerate([(0, 300), (300, 1), (301, 1), (302, 290), (592, 8)]):
        # larger scores than randn gives: a peaked softmax whose maximum moves between blocks
        q = rand((1, n, heads, head_dim), 10 * step) * 2.0
        k = rand((1, n, kv_heads, head_dim), 10 * step + 1)
        v = rand((1, n, kv_heads, head_dim), 10 * step + 2)
        k_ref[:, pos : pos + n], v_ref[:, pos : pos + n] = k, v
        args = [q, k, v, torch.tensor([pos])]
        got = ours.execute([a.clone() for a in args])[0]
        et = theirs.execute([a.clone() for a in args])[0]
        assert_close(got, reference_attention(q, k_ref, v_ref, pos), what=f"step {step} vs torch", **tol(torch.float32))
        assert_close(got, et, what=f"step {step} vs ExecuTorch", **tol(torch.float32))


@pytest.mark.parametrize(
    "pos,n,message",
    [
        (12, 1, "start_pos 12 is outside cache's 12 positions"),
        (-1, 1, "start_pos -1 is outside"),
        (10, 3, "start_pos 10 + value's 3 positions = 13 overruns cache's 12 positions"),
    ],
)
def test_bad_start_pos_is_refused_and_the_cache_survives(pos: int, n: int, message: str) -> None:
    pte = export_cached(CachedAttention, 12, 4, 2, 16, torch.float32)
    method = pyexec.load(pte).load_method("forward")
    q, k, v = rand((1, n, 4, 16), 1), rand((1, n, 2, 16), 2), rand((1, n, 2, 16), 3)
    first = method.execute([q[:, :1], k[:, :1], v[:, :1], torch.tensor([0])])
    with pytest.raises(pyexec.ExecutionError, match=re.escape(message)):
        method.execute([q, k, v, torch.tensor([pos])])
    # nothing was written: the next step sees the cache the first one left
    again = method.execute([q[:, :1], k[:, :1] * 0, v[:, :1] * 0, torch.tensor([1])])
    assert torch.equal(again[1][:, :1], first[1][:, :1])
    assert not again[1][:, 2:].any()


# ---- custom_sdpa with a mask, without causality, with a scale ------------------------


class MaskedSdpa(torch.nn.Module):
    """custom_sdpa on k / v given as inputs: with a [S, S_kv] mask (every key
    counts), non-causal over [0, start_pos + S), and causal with a scale."""

    def forward(
        self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, mask: torch.Tensor, input_pos: torch.Tensor
    ) -> Any:
        start_pos = input_pos[0].item()
        torch._check_is_size(start_pos)
        torch._check(start_pos + q.shape[1] <= k.shape[1])
        masked = torch.ops.llama.custom_sdpa(q, k, v, 0, mask, 0.0, False)
        open_ = torch.ops.llama.custom_sdpa(q, k, v, start_pos, None, 0.0, False)
        scaled = torch.ops.llama.custom_sdpa(q, k, v, start_pos, None, 0.0, True, 0.3)
        return masked, open_, scaled


def test_mask_no_causality_and_scale_match_torch_and_executorch() -> None:
    S, S_kv, heads, kv_heads, D = 4, 9, 4, 2, 8
    q, k, v = rand((1, S, heads, D), 1), rand((1, S_kv, kv_heads, D), 2), rand((1, S_kv, kv_heads, D), 3)
    mask = torch.where(rand((S, S_kv), 4) > 0.3, 0.0, float("-inf")) + rand((S, S_kv), 5) * 0.1
    mask[0, 3] = 0.0  # a row with at least one key
    mask[2] = float("-inf")  # a row with none: NaN, as in torch and ExecuTorch
    pos = torch.tensor([3])
    pte = export_program(MaskedSdpa(), (q, k, v, mask, pos), strict_ir=False)
    got = pyexec.load(pte).load_method("forward").execute([q, k, v, mask, pos])
    et = executorch_method(pte).execute([q, k, v, mask, pos])
    expected = [
        reference_attention(q, k, v, 0, causal=False, mask=mask),
        reference_attention(q, k, v, 3, causal=False),
        reference_attention(q, k, v, 3, scale=0.3),
    ]
    assert torch.isnan(got[0][0, 2]).all()
    for j, name in enumerate(["masked", "non-causal", "scaled"]):
        assert_close(got[j], expected[j], what=f"{name} vs torch", **tol(torch.float32))
        assert_close(got[j], et[j], what=f"{name} vs ExecuTorch", **tol(torch.float32))


def test_too_many_keys_for_start_pos_is_refused() -> None:
    q, k, v = rand((1, 4, 4, 8), 1), rand((1, 9, 2, 8), 2), rand((1, 9, 2, 8), 3)
    mask = torch.zeros(4, 9)
    pte = export_program(MaskedSdpa(), (q, k, v, mask, torch.tensor([3])), strict_ir=False)
    method = pyexec.load(pte).load_method("forward")
    with pytest.raises(
        pyexec.ExecutionError, match=re.escape("start_pos 6 + query's 4 positions = 10 exceeds the key's 9")
    ):
        method.execute([q, k, v, mask, torch.tensor([6])])


# ---- update_cache_with_indices ------------------------------------------------------


class IndexedCache(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("cache", torch.zeros(2, 10, 3, 4))

    def forward(self, value: torch.Tensor, indices: torch.Tensor, input_pos: torch.Tensor) -> torch.Tensor:
        start_pos = input_pos[0].item()
        torch._check_is_size(start_pos)
        torch.ops.llama.update_cache_with_indices(value, self.cache, start_pos, indices)
        return self.cache.clone()


def test_update_cache_with_indices_writes_where_told() -> None:
    value, indices = rand((2, 3, 3, 4), 1), torch.tensor([[9, 0, 4], [2, 7, 5]])
    pte = export_program(IndexedCache(), (value, indices, torch.tensor([0])), strict_ir=False)
    ours, theirs = pyexec.load(pte).load_method("forward"), executorch_method(pte)
    expected = torch.zeros(2, 10, 3, 4)
    for step in range(2):
        value = rand((2, 3, 3, 4), step + 1)
        indices = torch.tensor([[9, 0, 4], [2, 7, 5]]) if step == 0 else torch.tensor([[1, 9, 8], [3, 2, 0]])
        for b in range(2):
            expected[b, indices[b]] = value[b]
        args = [value, indices, torch.tensor([0])]
        got = ours.execute([a.clone() for a in args])[0]
        assert_close(got, expected, rtol=0, atol=0, what=f"step {step}")
        assert_close(
            got, theirs.execute([a.clone() for a in args])[0], rtol=0, atol=0, what=f"step {step} vs ExecuTorch"
        )
    with pytest.raises(pyexec.ExecutionError, match=re.escape("indices[1, 2] is 10, outside cache's 10 positions")):
        ours.execute([value, torch.tensor([[0, 1, 2], [3, 4, 10]]), torch.tensor([0])])


# ---- fast_hadamard_transform ------------------------------------------------------------


class Hadamard(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.llama.fast_hadamard_transform(x)


def reference_hadamard(x: torch.Tensor) -> torch.Tensor:
    """Sylvester's matrix over 2^k / sqrt(2^k); for 28 * 2^k, that on each of
    28 rows of 2^k, then had_28_will (unnormalised) across the rows."""
    from executorch.extension.llm.custom_ops.spinquant.special_hadamard_code_gen import had_28_will

    n = x.shape[-1]
    m = n // 28 if n % 28 == 0 else n
    h = torch.ones(1, 1, dtype=torch.float64)
    while h.shape[0] < m:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    y = x.double().reshape(-1, n // m, m) @ h.T / math.sqrt(m)
    if m != n:
        h28 = torch.tensor(
            [[1.0 if c == "+" else -1.0 for c in row] for row in had_28_will.split()], dtype=torch.float64
        )
        y = h28 @ y
    return y.reshape(x.shape).to(x.dtype)


@pytest.mark.parametrize(
    "shape,dtype",
    [((3, 64), torch.float32), ((2, 5, 112), torch.float32), ((4, 1), torch.float32), ((2, 56), torch.float16)],
    ids=["2^6", "28x4", "n=1", "28x2-f16"],
)
def test_fast_hadamard_transform_matches_torch_and_executorch(shape: tuple[int, ...], dtype: torch.dtype) -> None:
    x = rand(shape, 7, dtype)
    pte = export_program(Hadamard(), (x,), strict_ir=False)
    got = pyexec.load(pte).load_method("forward").execute([x])[0]
    assert_close(got, reference_hadamard(x), what="vs torch", **tol(dtype))
    if dtype == torch.float32:
        assert_close(got, executorch_method(pte).execute([x])[0], what="vs ExecuTorch", **tol(dtype))


def test_fast_hadamard_transform_refuses_other_sizes() -> None:
    x = rand((2, 64), 1)
    pte = export_program(
        Hadamard(), (x,), dynamic_shapes=({1: torch.export.Dim("n", min=2, max=128)},), strict_ir=False
    )
    with pytest.raises(pyexec.ExecutionError, match="power of two or 28 times one"):
        pyexec.load(pte).load_method("forward").execute([rand((2, 24), 1)])


# ---- an operator pyexec has no kernel for ---------------------------------------------


_MISSING_LIB: Any = None


def _define_missing_llama_op() -> None:
    """A llama:: operator no runtime has a kernel for (defined here, in
    torch only, with an out variant so that ExecuTorch's exporter keeps it)."""
    global _MISSING_LIB
    if _MISSING_LIB is not None:
        return
    lib = torch.library.Library("llama", "FRAGMENT")
    lib.define("pyexec_test_missing(Tensor x) -> Tensor")
    lib.define("pyexec_test_missing.out(Tensor x, *, Tensor(a!) out) -> Tensor(a!)")
    lib.impl("pyexec_test_missing", lambda x: x * 2, "CompositeExplicitAutograd")
    lib.impl("pyexec_test_missing.out", lambda x, *, out: out.copy_(x * 2), "CompositeExplicitAutograd")
    _MISSING_LIB = lib


class MissingLlamaOp(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.llama.pyexec_test_missing(x)


def test_other_llama_operators_are_refused_at_load_by_name() -> None:
    _define_missing_llama_op()
    pte = export_program(MissingLlamaOp(), (torch.ones(2, 3),), strict_ir=False)
    with pytest.raises(pyexec.Error, match=re.escape("llama::pyexec_test_missing.out")):
        pyexec.load(pte).load_method("forward")


# ---- ExecuTorch's llama example --------------------------------------------------------


def test_tiny_llama_export_decodes_like_executorch() -> None:
    """ExecuTorch's llama example (use_kv_cache, use_sdpa_with_kv_cache: its
    KV caches are mutable buffers updated by update_cache, its attention
    custom_sdpa), dim 64, 2 layers, 4 heads over 2 kv heads, max_seq_len 32,
    random weights: a 7-token prefill and decode steps to the last position,
    each step's logits within 1e-4 of ExecuTorch's (float32 GEMMs and
    attention summed in different orders over two layers: ~2e-6 seen on
    logits of size ~3) and the same next token, fed to both."""
    from support.llm import TINY_LLAMA, llama_program

    pte = llama_program(TINY_LLAMA, max_seq_len=32)
    ops = _ops_in(pte)
    assert {"llama::update_cache.out", "llama::custom_sdpa.out"} <= ops
    ours, theirs = pyexec.load(pte).load_method("forward"), executorch_method(pte)
    tokens = torch.tensor([[1, 17, 99, 3, 42, 64, 5]])
    pos, seen = 0, []
    while pos < 32:
        args = [tokens, torch.tensor([pos])]
        got = ours.execute([a.clone() for a in args])[0]
        expected = theirs.execute([a.clone() for a in args])[0]
        assert got.shape == (1, TINY_LLAMA["vocab_size"])
        assert_close(got, expected, rtol=0, atol=1e-4, what=f"logits at position {pos}")
        token = int(expected.argmax())
        top2 = expected[0].topk(2).values
        assert int(got.argmax()) == token, f"position {pos}: top two logits {top2.tolist()}"
        seen.append(token)
        pos += tokens.shape[1]
        tokens = torch.tensor([[token]])
    assert len(set(seen)) > 3  # random weights still give a varied sequence


def _ops_in(pte: bytes) -> set[str]:
    from executorch.exir._serialize._program import deserialize_pte_binary

    p = deserialize_pte_binary(pte)
    p = getattr(p, "program", p)
    return {f"{op.name}.{op.overload}" if op.overload else op.name for op in p.execution_plan[0].operators}
