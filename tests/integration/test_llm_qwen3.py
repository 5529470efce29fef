"""Qwen3 as ExecuTorch's own tooling exports it: export_llm with
base.model_class=qwen3_0_6b and a tiny version of Qwen3-0.6B's params.json
(examples/models/qwen3/config/0_6b_config.json: QK-norm, RMSNorm over each
head's query and key, before the Hugging Face style rope; head_dim times
heads wider than dim; the output projection tied to the embedding), random
weights. The portable program and the float32 XNNPACK one with its weights
in a .ptd. (The 8da4w export, whose quantized products are the same nodes as
the llama example's, is tested on that model in test_llm_generate.py: one
export_llm run less.)

pyexec and ExecuTorch's runtime are stepped in lock step on the same files
(a prefill, then single-token decode steps to the last cache position, both
fed the same fixed tokens: with the output tied to the embedding a random
model's greedy choice is mostly the token it was given, which would test one
token over and over): every step's logits within the tolerances of
test_llm_generate.py (the same reasoning: float32 summation order only),
the same argmax, and the same logits as torch eager (the example's
Transformer with the checkpoint's weights, no KV cache, the whole sequence
at once). Then the example's greedy loops give the same tokens in both
runtimes."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch
from support.llm import assert_steps_match_eager, example, llama_example, lock_step

export_llama = example("export_llama")
generate = example("generate")

pytestmark = pytest.mark.slow  # three export_llm exports when not cached

# Qwen3-0.6B's params.json at dim 32: 4 query heads over 2 kv heads of 16
# (so the attention is 64 wide over a 32-wide residual), 2 layers, vocab 64
TINY_QWEN3: dict[str, Any] = {
    "dim": 32,
    "ffn_dim_multiplier": 1,
    "hidden_dim": 96,
    "n_heads": 4,
    "head_dim": 16,
    "n_kv_heads": 2,
    "n_layers": 2,
    "norm_eps": 1e-06,
    "rope_theta": 1000000.0,
    "use_scaled_rope": False,
    "vocab_size": 64,
    "use_hf_rope": True,
    "attention_qkv_bias": False,
    "use_qk_norm": True,
    "qk_norm_before_rope": True,
}
MAX_SEQ_LEN = 24
PROMPT = [1, 17, 59, 3, 42, 33]
FED = [(7 + 13 * i) % 64 for i in range(MAX_SEQ_LEN - len(PROMPT))]  # the decode steps' tokens
VARIANTS = ["portable", "xnnpack-ptd"]
assert set(VARIANTS) <= set(export_llama.VARIANTS)
FLOAT_TOL = {"rtol": 0.0, "atol": 1e-4}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[Path, Path | None]]]:
    out = tmp_path_factory.mktemp("qwen3")
    written: dict[str, tuple[Path, Path | None]] = {}
    for variant in VARIANTS:
        pte, ptd = llama_example(
            variant, TINY_QWEN3, max_seq_len=MAX_SEQ_LEN, model_class="qwen3_0_6b", tied_embedding=True
        )
        pte_name, ptd_name = export_llama.file_names(variant)
        (out / pte_name).write_bytes(pte)
        if ptd is not None:
            assert ptd_name is not None
            (out / ptd_name).write_bytes(ptd)
        written[variant] = (out / pte_name, out / ptd_name if ptd_name else None)
    yield written


@pytest.fixture(scope="module")
def eager() -> torch.nn.Module:
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs

    args = ModelArgs(max_seq_len=MAX_SEQ_LEN, max_context_len=MAX_SEQ_LEN, generate_full_logits=True, **TINY_QWEN3)
    model = construct_transformer(args)
    weights = export_llama.random_checkpoint(TINY_QWEN3, MAX_SEQ_LEN, seed=0, tied_embedding=True)
    missing, unexpected = model.load_state_dict(weights, strict=False)
    assert not unexpected and not [k for k in missing if "weight" in k], (missing, unexpected)
    return model.eval()


def test_the_model_is_qwen3_shaped(eager: torch.nn.Module) -> None:
    """QK-norm weights in every layer, the attention wider than the residual,
    and the output projection the embedding itself (tied)."""
    names = dict(eager.named_parameters())
    assert any("q_norm" in n for n in names) and any("k_norm" in n for n in names), sorted(names)
    wq = next(p for n, p in names.items() if n.endswith("attention.wq.weight"))
    assert tuple(wq.shape) == (TINY_QWEN3["n_heads"] * TINY_QWEN3["head_dim"], TINY_QWEN3["dim"])
    assert torch.equal(names["output.weight"], names["tok_embeddings.weight"])


@pytest.mark.parametrize("variant", VARIANTS)
def test_each_step_matches_executorch_and_eager(
    variant: str, files: dict[str, tuple[Path, Path | None]], eager: torch.nn.Module
) -> None:
    pte, ptd = files[variant]
    sequence = PROMPT + FED  # fed fixed tokens, not the greedy ones
    steps, argmaxes = lock_step(pte, ptd, PROMPT, MAX_SEQ_LEN, TINY_QWEN3["vocab_size"], FLOAT_TOL,
                                lambda pos, logits: sequence[pos], variant)
    assert len(set(argmaxes)) > 3  # the steps' predictions differ: each step is its own check
    assert_steps_match_eager(eager, sequence[:MAX_SEQ_LEN], steps, FLOAT_TOL, variant)


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_examples_greedy_loops_give_the_same_tokens(
    variant: str, files: dict[str, tuple[Path, Path | None]]
) -> None:
    pte, ptd = files[variant]
    steps = MAX_SEQ_LEN - len(PROMPT)
    ours = generate.pyexec_generate(pte, ptd, PROMPT, steps)
    theirs = generate.executorch_generate(pte, ptd, PROMPT, steps)
    assert ours == theirs and len(ours) == steps
