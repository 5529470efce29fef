"""A fixed small part of scripts/llm_matrix.py's family matrix: export_llm
families no other test covers, float32 XNNPACK (KV cache, custom SDPA), tiny
params and random weights exactly as the script exports them:

- Qwen 2.5 (base.model_class=qwen2_5_0_5b): biases on the q, k and v
  projections, Hugging Face rope.
- Phi-4-mini (phi_4_mini): Hugging Face rope over three quarters of each
  head (partial_rotary_factor 0.75).

pyexec and ExecuTorch's runtime are stepped in lock step on the same file (a
5-token prefill, then single-token decode steps to the last cache position,
fed fixed tokens): every step's logits within 1e-4 of ExecuTorch's (float32
summation order only, as the other LLM tests) and the same greedy token.
The whole matrix (every family, every option) is the script's, whose table
docs/llm.md shows."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path
from types import ModuleType

import pytest
from support.export import cache_dir
from support.llm import lock_step

# two export_llm exports (~30-60 s each) when not cached; outside the test command (README)
pytestmark = [pytest.mark.slow, pytest.mark.extended]

FAMILIES = ["qwen2_5", "phi_4_mini"]
FLOAT_TOL = {"rtol": 0.0, "atol": 1e-4}


def _matrix(tmp: Path) -> ModuleType:
    script = Path(__file__).resolve().parents[2] / "scripts" / "llm_matrix.py"
    spec = importlib.util.spec_from_file_location("pyexec_llm_matrix", script)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    # the script's cache (tests/_artifacts/llm_matrix), or $PYEXEC_TEST_EXPORT_CACHE/llm_matrix ("off": a fresh export)
    where = cache_dir()
    if where is None:
        module.CACHE = tmp
    elif os.environ.get("PYEXEC_TEST_EXPORT_CACHE"):
        module.CACHE = where / "llm_matrix"
    return module


@pytest.fixture(scope="module")
def matrix(tmp_path_factory: pytest.TempPathFactory) -> ModuleType:
    return _matrix(tmp_path_factory.mktemp("llm_matrix"))


@pytest.mark.parametrize("family", FAMILIES)
def test_each_step_matches_executorch(family: str, matrix: ModuleType) -> None:
    pte, ptd = matrix.export(family, "xnnpack")
    prompt, fed, max_seq_len = matrix.PROMPT, matrix.FED, matrix.MAX_SEQ_LEN
    _, argmaxes = lock_step(pte, ptd, prompt, max_seq_len, matrix.VOCAB, FLOAT_TOL,
                            lambda pos, logits: fed[pos], family)
    assert len(argmaxes) == max_seq_len - len(prompt) + 1
    assert len(set(argmaxes)) > 3  # the steps' predictions differ: each step is its own check
