"""Generation end to end with ExecuTorch's llama example as its own tooling
exports it (examples/llm/export_llama.py: export_llm's configuration, a tiny
params.json, random weights): the portable program, the XNNPACK 8da4w one
(8-bit dynamic activations, 4-bit weights in groups of 32) and the float32
XNNPACK one with its weights in a .ptd.

Each is stepped in lock step by pyexec and by ExecuTorch's runtime on the same
files (a prefill, then single-token decode steps to the last cache position,
both fed ExecuTorch's greedy token): every step's logits within a stated
tolerance of ExecuTorch's and of torch eager (the example's Transformer with
the same weights, without a KV cache, over the whole sequence at once), and the
same argmax. Then the example's own greedy loops (examples/llm/generate.py:
inputs installed once and written in place, logits read from the method's
memory) give the same tokens in pyexec as in ExecuTorch.

Tolerances. Float32 (portable, XNNPACK): 1e-4 absolute on logits of size ~3
(GEMMs, attention and RMSNorm summed in different orders over two layers;
~2e-6 seen). Against eager, which attends through torch's SDPA with a mask
rather than a KV cache, the same (~1.5e-6 seen). 8da4w: activations are
quantized to int8 per token at run time, so a last-bit difference before a
quantization step can move a value by one int8 step: logits within 2e-2 of
ExecuTorch's (5e-7 seen), and eager is not compared (it runs the float
weights; the 4-bit rounding moves logits by ~0.7)."""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from support.llm import assert_steps_match_eager, example, llama_example, lock_step

import pyexec

export_llama = example("export_llama")
generate = example("generate")

pytestmark = pytest.mark.slow  # exports three models with export_llm (about 20-60 s each when not cached)

MAX_SEQ_LEN = 32
PROMPT = [1, 17, 59, 3, 42, 33, 5]
VOCAB = export_llama.TINY_PARAMS["vocab_size"]

FLOAT_TOL = {"rtol": 0.0, "atol": 1e-4}
VARIANTS = export_llama.VARIANTS  # portable, xnnpack-8da4w, xnnpack-ptd
TOLERANCES = {"portable": FLOAT_TOL, "xnnpack-ptd": FLOAT_TOL, "xnnpack-8da4w": {"rtol": 0.0, "atol": 2e-2}}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, tuple[Path, Path | None]]]:
    """Each variant's .pte (and .ptd) on disk, exported once per session."""
    out = tmp_path_factory.mktemp("llm")
    written: dict[str, tuple[Path, Path | None]] = {}
    for variant in VARIANTS:
        pte, ptd = llama_example(variant, max_seq_len=MAX_SEQ_LEN)
        pte_name, ptd_name = export_llama.file_names(variant)
        (out / pte_name).write_bytes(pte)
        if ptd is not None:
            assert ptd_name is not None
            (out / ptd_name).write_bytes(ptd)
        written[variant] = (out / pte_name, out / ptd_name if ptd_name else None)
    yield written


@pytest.fixture(scope="module")
def eager() -> torch.nn.Module:
    """The example's Transformer with the export's weights, no KV cache, all
    positions' logits."""
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs

    params = export_llama.TINY_PARAMS
    args = ModelArgs(max_seq_len=MAX_SEQ_LEN, max_context_len=MAX_SEQ_LEN, generate_full_logits=True, **params)
    model = construct_transformer(args)
    model.load_state_dict(export_llama.random_checkpoint(params, MAX_SEQ_LEN, seed=0), strict=False)
    return model.eval()


def _ops(pte: Path) -> tuple[set[str], list[str]]:
    from executorch.exir._serialize._program import deserialize_pte_binary

    p = deserialize_pte_binary(pte.read_bytes())
    plan = getattr(p, "program", p).execution_plan[0]
    return {f"{o.name}.{o.overload}" for o in plan.operators}, [d.id for d in plan.delegates]


def test_the_exports_are_export_llms(files: dict[str, tuple[Path, Path | None]]) -> None:
    """The llama custom operators in every program; XNNPACK delegates and a
    data file where asked for."""
    for variant, (pte, ptd) in files.items():
        ops, delegates = _ops(pte)
        assert {"llama::update_cache.out", "llama::custom_sdpa.out"} <= ops, variant
        assert bool(delegates) == variant.startswith("xnnpack"), (variant, delegates)
        assert set(delegates) <= {"XnnpackBackend"}
        assert (ptd is not None) == (variant == "xnnpack-ptd")
    # the weights really are in the data file, not in the program
    weights = export_llama.random_checkpoint(export_llama.TINY_PARAMS, MAX_SEQ_LEN, seed=0)
    nbytes = sum(w.numel() * w.element_size() for w in weights.values())
    pte, ptd = files["xnnpack-ptd"]
    assert ptd is not None and ptd.stat().st_size >= nbytes > 2 * pte.stat().st_size, (nbytes, pte, ptd)


@pytest.mark.parametrize("variant", VARIANTS)
def test_each_step_matches_executorch_and_eager(
    variant: str, files: dict[str, tuple[Path, Path | None]], eager: torch.nn.Module
) -> None:
    pte, ptd = files[variant]
    # fed ExecuTorch's greedy token
    steps, argmaxes = lock_step(pte, ptd, PROMPT, MAX_SEQ_LEN, VOCAB, TOLERANCES[variant],
                                lambda pos, logits: int(logits.argmax()), variant)
    sequence = PROMPT + argmaxes
    assert len(set(sequence[len(PROMPT) :])) > 3  # random weights still give a varied sequence
    if variant == "xnnpack-8da4w":
        return
    assert_steps_match_eager(eager, sequence[:MAX_SEQ_LEN], steps, FLOAT_TOL, variant)


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_examples_greedy_loops_give_the_same_tokens(
    variant: str, files: dict[str, tuple[Path, Path | None]]
) -> None:
    pte, ptd = files[variant]
    steps = MAX_SEQ_LEN - len(PROMPT)
    seen: list[int] = []
    ours = generate.pyexec_generate(pte, ptd, PROMPT, steps, on_logits=lambda pos, logits: seen.append(pos))
    theirs = generate.executorch_generate(pte, ptd, PROMPT, steps)
    assert ours == theirs
    assert len(ours) == steps and seen == [0, *range(len(PROMPT), MAX_SEQ_LEN - 1)]


def test_a_second_generation_on_the_same_method_starts_over(files: dict[str, tuple[Path, Path | None]]) -> None:
    """The caches are overwritten from position 0: the same prompt gives the
    same tokens again, another prompt other tokens (as ExecuTorch gives)."""
    pte, _ = files["portable"]
    method = pyexec.load(pte).load_method("forward")
    first = generate.pyexec_generate(pte, None, PROMPT, 10, method=method)
    again = generate.pyexec_generate(pte, None, PROMPT, 10, method=method)
    other = generate.pyexec_generate(pte, None, [7, 7, 8], 10, method=method)
    assert first == again
    assert other == generate.executorch_generate(pte, None, [7, 7, 8], 10)


def test_too_long_a_generation_is_refused_before_running(files: dict[str, tuple[Path, Path | None]]) -> None:
    pte, _ = files["portable"]
    message = f"{len(PROMPT)} prompt tokens + {MAX_SEQ_LEN} steps exceed the cache's {MAX_SEQ_LEN} positions"
    with pytest.raises(ValueError, match=re.escape(message)):
        generate.pyexec_generate(pte, None, PROMPT, MAX_SEQ_LEN)


def test_the_split_program_without_its_data_file_names_a_weight(files: dict[str, tuple[Path, Path | None]]) -> None:
    pte, _ = files["xnnpack-ptd"]
    with pytest.raises(pyexec.InvalidProgramError, match="data file"):
        pyexec.load(pte).load_method("forward")
