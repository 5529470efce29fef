"""The command line: the demo the README starts with, and inspect."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np

import pyexec
from pyexec.__main__ import DEMO_MODEL

ROOT = Path(__file__).resolve().parent.parent


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pyexec", *args], capture_output=True, text=True, cwd=ROOT / "tests")


def test_demo_generates_tokens_with_the_cache_updated_in_place() -> None:
    proc = cli("demo", "--steps", "12")
    assert proc.returncode == 0, proc.stderr
    tokens = re.search(r"generated 12 tokens: ([\d ]+)", proc.stdout)
    assert tokens is not None, proc.stdout
    assert len(tokens.group(1).split()) == 12
    assert "cache rows written in place: 48 (= 4 caches x 12 steps)" in proc.stdout
    assert re.search(r"per step \(median\): [\d.]+ us", proc.stdout)


def test_demo_tokens_match_an_independent_greedy_loop() -> None:
    """The demo's greedy tokens, recomputed here by driving the shipped program
    directly with caches copied in and out (no binding, no in-place update)."""
    method = pyexec.load(DEMO_MODEL).load_method("forward", output_type="numpy")
    caches = [np.zeros(i.sizes, np.float32) for i in method.meta.inputs[2:] if i is not None]
    token, tokens = 1, []
    for pos in range(8):
        *new_caches, logits = method.execute([np.array([[token]]), np.array([pos]), *[c.copy() for c in caches]])
        caches = list(new_caches)
        token = int(np.argmax(logits))
        tokens.append(token)
    proc = cli("demo", "--steps", "8")
    assert f"generated 8 tokens: {' '.join(map(str, tokens))}" in proc.stdout


def test_inspect_describes_inputs_outputs_aliases_and_operators() -> None:
    proc = cli("inspect", str(ROOT / "native/tests/data/cache_update_unplanned.pte"))
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "input 0: float32[8, 4] unplanned, written by the program" in out
    assert "input 1: int64[1] unplanned\n" in out
    # The cache's new value is output 0; output 1 is computed (and not "written by the program": every output is).
    assert "output 0: float32[8, 4] unplanned (is input 0, updated in place)\n" in out
    assert "output 1: float32[1, 4] unplanned\n" in out
    assert "aten::index_put_" in out and "MISSING" not in out


def test_inspect_reports_a_missing_file_clearly(tmp_path: Path) -> None:
    proc = cli("inspect", str(tmp_path / "nope.pte"))
    assert proc.returncode == 1
    assert "nope.pte" in proc.stderr and "Traceback" not in proc.stderr


def test_inspect_reports_a_non_pte_file_clearly(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a program")
    proc = cli("inspect", str(path))
    assert proc.returncode == 1 and "ET12" in proc.stderr


def test_demo_model_is_the_exported_decoder() -> None:
    meta = pyexec.load(DEMO_MODEL).method_meta("forward")
    assert [i.dtype for i in meta.inputs if i is not None][:2] == ["int64", "int64"]
    assert all(i is not None and not i.is_memory_planned for i in meta.inputs[2:])
