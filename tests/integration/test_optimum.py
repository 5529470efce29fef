"""optimum-executorch 1.1.0 on pyexec: a fixed small part of the corpus of
scripts/optimum_corpus.py, each file exported by optimum-executorch's own
exporter and run by its ExecuTorchModelFor* class twice, on ExecuTorch's
runtime and after `pyexec.portable_lib.install()`: the same greedy tokens and
logits within the dtype's tolerance.

optimum-executorch pins its own transformers, so this runs in the venv that
scripts/setup_optimum_venv.sh builds (.venv-optimum, or the python named by
PYEXEC_OPTIMUM_PYTHON; set that variable to an empty string to skip)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from support.optimum import optimum_python

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parents[2]

# A causal LM (Llama with custom SDPA and KV cache) and a masked LM (BERT); the
# whole corpus, Qwen3 8da4w and Whisper among it: scripts/optimum_corpus.py
# (docs/from-executorch.md).
CASES = ["llama-xnnpack-sdpa-kv", "bert-xnnpack"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    python = optimum_python()
    work = tmp_path_factory.mktemp("optimum")
    out = work / "results.json"
    cmd = [python, str(ROOT / "scripts" / "optimum_corpus.py"), "--cases", ",".join(CASES), "--json", str(out),
           "--work-dir", str(work / "cases"), "--timeout", "500"]
    r = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, timeout=1800)
    assert out.exists(), f"the corpus driver wrote no results (status {r.returncode}):\n{r.stderr[-4000:]}"
    print(r.stdout)
    return {row["case"]: row for row in json.loads(out.read_text())}


@pytest.mark.parametrize("case", CASES)
def test_pyexec_gives_executorchs_tokens_and_logits(corpus: dict[str, dict[str, Any]], case: str) -> None:
    row = corpus[case]
    assert row["exported"], f"optimum-executorch's export failed: {row['export_error']}"
    assert row["et_runs"], f"ExecuTorch's runtime failed: {row['et_error']}"
    assert row["pyexec_runs"], f"pyexec failed: {row['pyexec_error']}"
    assert row["pyexec_loader"] == "pyexec.portable_lib"
    assert row["tokens_et"], "no tokens to compare"
    assert row["tokens_pyexec"] == row["tokens_et"]
    assert row["same_tokens"]
    assert row["logits_close"], (f"logits differ by {row['max_logit_diff']} (atol {row['atol']}, "
                                 f"rtol {row['rtol']})")
