"""A real ExecuTorch LLM export for the tests: the llama example
(executorch/examples/models/llama) exported through its own export API, the
one `python -m executorch.extension.llm.export.export_llm` calls, with a tiny
params.json and random weights, kept in export.py's on-disk cache."""

from __future__ import annotations

import hashlib
import json
import tempfile
import warnings
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from support.export import _file_digest, assert_close, cache_dir, cached

# dim 64, 2 layers, 4 query heads sharing 2 kv heads (head_dim 16), vocab 128
TINY_LLAMA = {
    "dim": 64,
    "n_layers": 2,
    "n_heads": 4,
    "n_kv_heads": 2,
    "vocab_size": 128,
    "multiple_of": 32,
    "norm_eps": 1e-5,
    "rope_theta": 500000.0,
    "use_scaled_rope": False,
}


def _export(params: dict[str, Any], max_seq_len: int, seed: int, sdpa_with_kv_cache: bool) -> bytes:
    from executorch.examples.models.llama.export_llama_lib import export_llama
    from executorch.extension.llm.export.config.llm_config import LlmConfig, ModelType

    with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (Path(d) / "params.json").write_text(json.dumps(params))
        torch.save(example("export_llama").random_checkpoint(params, max_seq_len, seed), Path(d) / "model.pth")
        config = LlmConfig()
        config.base.model_class = ModelType.llama3
        config.base.params = str(Path(d) / "params.json")
        config.base.checkpoint = str(Path(d) / "model.pth")
        config.model.use_kv_cache = True
        config.model.use_sdpa_with_kv_cache = sdpa_with_kv_cache
        config.export.max_seq_length = max_seq_len
        config.export.max_context_length = max_seq_len
        config.export.output_dir = d
        return Path(export_llama(config)).read_bytes()


def llama_program(
    params: dict[str, Any] = TINY_LLAMA, *, max_seq_len: int = 32, seed: int = 0, sdpa_with_kv_cache: bool = True
) -> bytes:
    """The .pte of ExecuTorch's llama example (use_kv_cache; with
    use_sdpa_with_kv_cache, which executorch 1.5.1 exports as the custom
    llama::update_cache and llama::custom_sdpa ops) for
    `params`, random weights drawn from `seed`: forward(tokens [1, S], input_pos
    [1]) -> logits of the last position [1, vocab], KV caches held in the
    program's mutable buffers.

    Cached next to export.py's exports ($PYEXEC_TEST_EXPORT_CACHE; "off"
    disables it), keyed by the torch and executorch versions, this file and
    every argument."""
    import executorch

    options = {"params": params, "max_seq_len": max_seq_len, "seed": seed, "sdpa": sdpa_with_kv_cache}
    h = hashlib.sha256()
    h.update(f"{torch.__version__}|{getattr(executorch, '__version__', '?')}".encode())
    h.update(_file_digest(__file__).encode())
    h.update(json.dumps(options, sort_keys=True).encode())
    where = cache_dir()
    paths = None if where is None else [where / f"llama-{h.hexdigest()[:32]}.pte"]
    (pte,) = cached(paths, lambda: [_export(params, max_seq_len, seed, sdpa_with_kv_cache)])
    assert pte is not None
    return pte


# ---- the exports of examples/llm/export_llama.py ---------------------------------

_EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "llm"
_EXAMPLE = _EXAMPLES / "export_llama.py"


def example(name: str) -> ModuleType:
    """examples/llm/NAME.py as a module (examples/ is no package)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"pyexec_example_{name}", _EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def llama_example(
    variant: str,
    params: dict[str, Any] | None = None,
    *,
    max_seq_len: int = 32,
    seed: int = 0,
    model_class: str = "llama3",
    tied_embedding: bool = False,
) -> tuple[bytes, bytes | None]:
    """(.pte, .ptd or None) of examples/llm/export_llama.py's `variant`
    ("portable", "xnnpack-8da4w", "xnnpack-ptd") for `params` (the example's
    tiny ones by default), random weights from `seed` (with tied_embedding,
    the output projection is the embedding, as Qwen3-0.6B's checkpoint has
    it): export_llm's own configuration for `model_class` (its
    base.model_class: llama3, qwen3_0_6b, ...) run in this process
    (export_in_process). Cached like llama_program, keyed also by the
    example's source."""
    import executorch

    example_module = example("export_llama")
    params = params or example_module.TINY_PARAMS
    options: dict[str, Any] = {"variant": variant, "params": params, "max_seq_len": max_seq_len, "seed": seed}
    if model_class != "llama3" or tied_embedding:  # (the llama3 keys as they were: their cached files stay)
        options.update(model_class=model_class, tied_embedding=tied_embedding)
    h = hashlib.sha256()
    h.update(f"{torch.__version__}|{getattr(executorch, '__version__', '?')}".encode())
    h.update(_file_digest(__file__).encode())
    h.update(_file_digest(str(_EXAMPLE)).encode())
    h.update(json.dumps(options, sort_keys=True).encode())
    where = cache_dir()
    stem = None if where is None else where / f"llama-{variant}-{h.hexdigest()[:24]}"

    def make() -> tuple[bytes | None, bytes]:
        with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            example_module.write_model(Path(d), params, max_seq_len, seed, tied_embedding=tied_embedding)
            pte_file, ptd_file = example_module.export_in_process(variant, Path(d), max_seq_len,
                                                                  model_class=model_class)
            return (ptd_file.read_bytes() if ptd_file else None), pte_file.read_bytes()

    # the .pte last: its presence says both are there
    ptd, pte = cached(None if stem is None else [stem.with_suffix(".ptd"), stem.with_suffix(".pte")], make)
    assert pte is not None
    return pte, ptd


# ---- stepping a program in pyexec and ExecuTorch side by side ---------------------


def lock_step(
    pte: Path,
    ptd: Path | None,
    prompt: list[int],
    max_seq_len: int,
    vocab: int,
    tol: dict[str, float],
    next_token: Callable[[int, torch.Tensor], int],
    what: str,
) -> tuple[list[tuple[int, torch.Tensor]], list[int]]:
    """Steps pyexec and ExecuTorch's runtime side by side on the same files:
    `prompt` as one prefill, then one token a step up to the last cache
    position, next_token(pos, logits) choosing the token fed at `pos` from
    ExecuTorch's logits of the step before. Every step's logits are within
    `tol` of ExecuTorch's, with the same argmax. Returns each step's
    (position its logits are for, pyexec's logits) and ExecuTorch's argmaxes."""
    import pyexec

    ours = pyexec.load(pte, data_path=ptd).load_method("forward")
    theirs = example("generate").executorch_method(pte, ptd)
    tokens, pos = torch.tensor([prompt]), 0
    steps: list[tuple[int, torch.Tensor]] = []
    argmaxes: list[int] = []
    while pos < max_seq_len:
        args = [tokens, torch.tensor([pos])]
        (got,) = ours.execute([a.clone() for a in args])
        (expected,) = theirs.execute([a.clone() for a in args])
        assert got.shape == (1, vocab)
        assert_close(got, expected, what=f"{what}: logits at position {pos} vs ExecuTorch", **tol)
        top2 = expected[0].topk(2).values.tolist()
        assert int(got.argmax()) == int(expected.argmax()), f"{what}, position {pos}: ExecuTorch's top two {top2}"
        argmaxes.append(int(expected.argmax()))
        steps.append((pos + tokens.shape[1] - 1, got))
        pos += tokens.shape[1]
        if pos < max_seq_len:
            tokens = torch.tensor([[next_token(pos, expected)]])
    return steps, argmaxes


def assert_steps_match_eager(
    eager: torch.nn.Module, sequence: list[int], steps: list[tuple[int, torch.Tensor]], tol: dict[str, float],
    what: str,
) -> None:
    """Each step's logits (lock_step's) within `tol` of torch eager run over
    the whole `sequence` at once (no KV cache)."""
    with torch.no_grad():
        full = eager(torch.tensor([sequence]))
    for last, got in steps:
        assert_close(got[0], full[0, last], what=f"{what}: logits at position {last} vs eager", **tol)
