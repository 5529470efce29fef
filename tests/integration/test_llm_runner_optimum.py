"""pyexec.llm on a causal LM exported by optimum-executorch (forward(input_ids
[1, S], cache_position [S]) with planned inputs, logits [1, S, vocab]):
greedy generation gives the same token texts and counts as ExecuTorch's
TextLLMRunner on the same file and tokenizer.

optimum-executorch 1.1.0 pins transformers 5.0.0rc1, so the export runs in a
virtual environment of its own (support.optimum: scripts/setup_optimum_venv.sh
builds .venv-optimum; $PYEXEC_OPTIMUM_PYTHON names another). The model is a tiny LlamaForCausalLM from a config with
random weights (examples/llm/export_hf.py's), its vocabulary the test
tokenizer's, the output rows of the partial-UTF-8 byte tokens zeroed (as
support.llm_runner's whole_chars, for ExecuTorch's binding)."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import pytest
from support.llm_runner import VOCAB, partial_utf8_ids, write_tokenizer
from support.optimum import optimum_python

import pyexec.llm as px

# an optimum-cli export, 2-3 minutes on 2 cores; outside the test command (README)
pytestmark = [pytest.mark.slow, pytest.mark.extended]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "llm" / "export_hf.py"

EXPORT = r"""
import subprocess, sys
from pathlib import Path
import importlib.util
import torch
spec = importlib.util.spec_from_file_location("export_hf", sys.argv[1])
export_hf = importlib.util.module_from_spec(spec); spec.loader.exec_module(export_hf)
out, vocab, zero = Path(sys.argv[2]), int(sys.argv[3]), [int(i) for i in sys.argv[4].split(",")]
export_hf.save_tiny_llama(out / "model", vocab_size=vocab)
from transformers import LlamaForCausalLM
model = LlamaForCausalLM.from_pretrained(out / "model")
with torch.no_grad():
    model.lm_head.weight[zero] = 0.0
model.save_pretrained(out / "model")
cli = Path(sys.executable).with_name("optimum-cli")
subprocess.run([str(cli), "export", "executorch", "--model", str(out / "model"), "--task", "text-generation",
                "--recipe", "portable", "--use_custom_sdpa", "--use_custom_kv_cache", "--max_seq_len", "32",
                "--output_dir", str(out / "pte")], check=True, capture_output=True)
"""


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    python = optimum_python()
    out = tmp_path_factory.mktemp("optimum")
    zero = ",".join(str(i) for i in partial_utf8_ids())
    proc = subprocess.run([python, "-c", EXPORT, str(EXAMPLE), str(out), str(VOCAB), zero],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return {"tokenizer": write_tokenizer(out / "tok"), "model": out / "pte" / "model.pte"}


def test_layout_read_from_the_program(files: dict[str, Path]) -> None:
    llm = px.LLMProgram(files["model"])
    assert llm.per_token_positions and not llm.inputs_unplanned  # cache_position, planned inputs
    assert llm.enable_dynamic_shape and llm.prefill_chunk == 31 and llm.vocab_size == VOCAB


def test_greedy_matches_executorch(files: dict[str, Path]) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import executorch.extension.llm.runner as et
        import executorch.kernels.quantized  # noqa: F401
        from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401

    def run(module: Any) -> list[Any]:
        runner = module.TextLLMRunner(str(files["model"]), str(files["tokenizer"]))
        out = []
        for prompt, n in (("Hello world", 6), ("pyexec runs", 40)):
            pieces: list[str] = []
            stats: list[Any] = []
            runner.generate(prompt, module.GenerationConfig(max_new_tokens=n, temperature=0.0), pieces.append,
                            stats.append)
            out.append((pieces, stats[0].num_prompt_tokens, stats[0].num_generated_tokens))
        return out

    expected = run(et)
    assert run(px) == expected
    assert len({p for turn in expected for p in turn[0][1:]}) > 2
    print(expected, file=sys.stderr)
