"""The command line: the demo the README starts with, inspect, and the help text."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from support import ROOT

import pyexec
from pyexec.__main__ import DEMO_MODEL


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


@pytest.mark.parametrize("steps", ["0", "-3"])
def test_demo_refuses_a_step_count_below_one_in_one_line(steps: str) -> None:
    proc = cli("demo", "--steps", steps)
    assert proc.returncode == 2
    assert proc.stderr == f"pyexec demo: --steps must be at least 1, got {steps}\n"
    assert proc.stdout == ""


def test_demo_says_when_it_caps_the_steps() -> None:
    positions = pyexec.load(DEMO_MODEL).method_meta("forward").inputs[2]
    assert positions is not None
    cap = positions.sizes[2]  # [batch, heads, positions, head_dim]
    proc = cli("demo", "--steps", str(cap + 1))
    assert proc.returncode == 0, proc.stderr
    assert f"--steps {cap + 1} capped at {cap}: the decoder's KV caches hold {cap} positions" in proc.stderr
    assert f"generated {cap} tokens:" in proc.stdout


def test_every_option_and_argument_has_help_and_shows_its_default() -> None:
    helps = {command: cli(command, "--help").stdout for command in ("demo", "inspect", "run", "bench")}
    assert "--steps STEPS  tokens to generate" in helps["demo"] and "(default: 32)" in helps["demo"]
    for command in ("inspect", "run", "bench"):
        assert re.search(r"^  file\s+the \.pte program$", helps[command], re.M), helps[command]
    for command in ("run", "bench"):
        assert re.search(r"-m METHOD, --method METHOD\s+the method to \w+ \(default: forward\)", helps[command])
    bench = re.sub(r"\s+", " ", helps["bench"])
    for option, default in (("--runs RUNS", 200), ("--warmup WARMUP", 10), ("--seed SEED", 0)):
        assert re.search(rf"{option} [^-]+ \(default: {default}\)", bench), (option, bench)


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
    assert proc.stderr.startswith(f"pyexec: {path}: "), proc.stderr  # named, as run and bench name it


def test_demo_model_is_the_exported_decoder() -> None:
    meta = pyexec.load(DEMO_MODEL).method_meta("forward")
    assert [i.dtype for i in meta.inputs if i is not None][:2] == ["int64", "int64"]
    assert all(i is not None and not i.is_memory_planned for i in meta.inputs[2:])
