"""`pyexec run` and `pyexec bench`: outputs written to .npy compared with numpy
arithmetic on the same inputs, printed outputs, latency tables, and clear
messages (no traceback) for every mistake on the command line."""

from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
from support import ROOT

from pyexec.__main__ import verdict

DATA = ROOT / "native" / "tests" / "data"
ADD_MUL = DATA / "add_mul.pte"


def cli(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "pyexec", *map(str, args)], capture_output=True, text=True, cwd=ROOT / "tests"
    )


def ok(*args: str | Path) -> subprocess.CompletedProcess[str]:
    proc = cli(*args)
    assert proc.returncode == 0, proc.stderr
    return proc


def fails(code: int, *args: str | Path) -> str:
    proc = cli(*args)
    assert proc.returncode == code, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr, proc.stderr
    return proc.stderr


@pytest.fixture
def xy(tmp_path: Path) -> tuple[np.ndarray, np.ndarray, Path, Path]:
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3)).astype(np.float32)
    y = rng.standard_normal((2, 3)).astype(np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    return x, y, tmp_path / "x.npy", tmp_path / "y.npy"


@pytest.fixture(scope="module")
def scale_pte(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """forward(x, n: int, s: float) = x * n + s, exported with n=3, s=0.5."""
    pytest.importorskip("executorch")
    import torch
    from support.export import export_program

    class Scale(torch.nn.Module):
        def forward(self, x: torch.Tensor, n: int, s: float) -> torch.Tensor:
            return x * n + s

    path = tmp_path_factory.mktemp("scale") / "scale.pte"
    path.write_bytes(export_program(Scale(), (torch.randn(2, 3), 3, 0.5)))
    yield path


# ---- run -------------------------------------------------------------------


@pytest.mark.parametrize("model", ["add_mul.pte", "add_mul_unplanned.pte"])
@pytest.mark.parametrize("style", ["names", "indices", "one-flag"])
def test_run_writes_outputs_matching_numpy(xy: tuple, tmp_path: Path, model: str, style: str) -> None:
    x, y, xf, yf = xy
    args = {
        "names": ["--input", f"input0={xf}", "--input", f"input1={yf}"],
        "indices": ["-i", f"1={yf}", "-i", f"0={xf}"],
        "one-flag": ["--input", f"input0={xf}", f"1={yf}"],
    }[style]
    out = tmp_path / "out"
    proc = ok("run", DATA / model, *args, "--output-dir", out)
    assert sorted(p.name for p in out.iterdir()) == ["output0.npy", "output1.npy"]
    s, p = np.load(out / "output0.npy"), np.load(out / "output1.npy")
    assert s.dtype == np.float32 and s.shape == (2, 3)
    np.testing.assert_array_equal(s, x + y)
    np.testing.assert_array_equal(p, x * y)
    assert f"output 0: float32[2, 3] -> {out / 'output0.npy'}" in proc.stdout


def test_run_prints_shape_dtype_and_values_without_an_output_dir(tmp_path: Path) -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.full((2, 3), 2, np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    out = ok("run", ADD_MUL, "-i", f"0={tmp_path / 'x.npy'}", f"1={tmp_path / 'y.npy'}").stdout
    assert "output 0: float32[2, 3]" in out and "output 1: float32[2, 3]" in out
    printed = out.split("output 1:")
    assert re.findall(r"-?\d+\.?\d*", printed[0].split("]", 1)[1]) == [f"{v:g}." for v in (x + y).ravel()]
    assert re.findall(r"-?\d+\.?\d*", printed[1].split("]", 1)[1]) == [f"{v:g}." for v in (x * y).ravel()]


def test_run_updates_a_cache_in_place_and_abbreviates_large_outputs(tmp_path: Path) -> None:
    """cache_update_unplanned.pte: cache.index_copy_(0, idx, val); returns (cache, cache.sum(0))."""
    rng = np.random.default_rng(3)
    cache = rng.standard_normal((8, 4)).astype(np.float32)
    idx = np.array([5], dtype=np.int64)
    val = rng.standard_normal((1, 4)).astype(np.float32)
    for name, a in {"cache": cache, "idx": idx, "val": val}.items():
        np.save(tmp_path / f"{name}.npy", a)
    inputs = [f"{j}={tmp_path / n}.npy" for j, n in enumerate(["cache", "idx", "val"])]
    proc = ok("run", DATA / "cache_update_unplanned.pte", "-i", *inputs, "-o", tmp_path / "out")
    expected = cache.copy()
    expected[5] = val[0]
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "output0.npy"), expected)
    np.testing.assert_allclose(np.load(tmp_path / "out" / "output1.npy"), expected.sum(0, keepdims=True), rtol=1e-6)
    assert "output 0: float32[8, 4] (is input 0, updated in place)" in proc.stdout
    printed = ok("run", DATA / "cache_update_unplanned.pte", "-i", *inputs).stdout
    assert "..." in printed.split("output 1:")[0]  # 32 values: abbreviated


def test_run_takes_scalar_literals(scale_pte: Path, xy: tuple, tmp_path: Path) -> None:
    x, _, xf, _ = xy
    ok("run", scale_pte, "-i", f"0={xf}", "1=3", "input2=0.5", "-o", tmp_path / "out")
    np.testing.assert_allclose(np.load(tmp_path / "out" / "output0.npy"), x * 3 + 0.5, rtol=1e-6)
    # A scalar must be the value the program was exported with: the library's message.
    err = fails(1, "run", scale_pte, "-i", f"0={xf}", "1=4", "2=0.5")
    assert "input 1 was exported as the constant 3, got 4" in err


def test_run_reports_a_missing_file(tmp_path: Path) -> None:
    err = fails(1, "run", tmp_path / "nope.pte")
    assert "nope.pte" in err and "No such file" in err


def test_run_reports_a_non_pte_file(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_text("not a program")
    err = fails(1, "run", path, "-i", "0=1")
    assert "notes.txt" in err and "not an ExecuTorch program" in err and "ET12" in err


def test_run_reports_a_wrong_input_name(xy: tuple) -> None:
    err = fails(2, "run", ADD_MUL, "-i", f"x={xy[2]}", f"1={xy[3]}")
    assert "unknown input 'x'" in err and "input0, input1" in err
    err = fails(2, "run", ADD_MUL, "-i", f"input2={xy[2]}")
    assert "unknown input 'input2'" in err


def test_run_reports_a_wrong_shape_and_dtype(xy: tuple, tmp_path: Path) -> None:
    np.save(tmp_path / "wide.npy", np.zeros((3, 3), np.float32))
    np.save(tmp_path / "double.npy", np.zeros((2, 3), np.float64))
    err = fails(1, "run", ADD_MUL, "-i", f"0={tmp_path / 'wide.npy'}", f"1={xy[3]}")
    assert "input 0 has shape [2, 3], tensor has shape [3, 3]" in err
    err = fails(1, "run", ADD_MUL, "-i", f"0={xy[2]}", f"1={tmp_path / 'double.npy'}")
    assert "input 1 has dtype float32, tensor has float64" in err


def test_run_reports_a_missing_input(xy: tuple) -> None:
    err = fails(2, "run", ADD_MUL, "-i", f"0={xy[2]}")
    assert "missing input: input1 (float32[2, 3])" in err
    err = fails(2, "run", ADD_MUL)
    assert "missing inputs: input0 (float32[2, 3]), input1 (float32[2, 3])" in err


@pytest.mark.parametrize(
    "spec, message",
    [
        ("0", "expected NAME=FILE.npy or NAME=VALUE"),
        ("0=/no/such/x.npy", "input 0: no such file '/no/such/x.npy'"),
        ("0=banana", "neither a .npy file nor a literal"),
        ("0=3", "input 0 is a tensor float32[2, 3]: give a .npy file"),
        ("0=README.md", "is not a .npy file"),
    ],
)
def test_run_reports_bad_input_values(spec: str, message: str) -> None:
    err = subprocess.run(
        [sys.executable, "-m", "pyexec", "run", str(ADD_MUL), "-i", spec, "1=2"],
        capture_output=True, text=True, cwd=ROOT,
    )
    assert err.returncode == 2 and message in err.stderr and "Traceback" not in err.stderr, err.stderr


def test_run_reports_an_unknown_method(xy: tuple) -> None:
    err = fails(2, "run", ADD_MUL, "--method", "decode", "-i", f"0={xy[2]}", f"1={xy[3]}")
    assert "pyexec run: program has no method 'decode' (methods: 'forward')\n" == err  # the library's message


# ---- bench -----------------------------------------------------------------

ROW = r"^{}\s+" + r"\s+".join([r"(\d+\.\d)"] * 5) + r"$"


def latency_row(out: str, label: str) -> list[float]:
    m = re.search(ROW.format(label), out, re.M)
    assert m is not None, out
    values = [float(v) for v in m.groups()]
    assert values == sorted(values) and values[0] > 0, values  # min <= median <= p90 <= p99 <= max
    return values


def test_bench_prints_the_latency_distribution() -> None:
    proc = ok("bench", ADD_MUL, "--runs", "40", "--warmup", "3", "--no-executorch")
    out = proc.stdout
    assert "method 'forward', 40 runs after 3 warm-up, inputs: float32[2, 3], float32[2, 3]" in out
    assert "importing" not in proc.stderr
    assert re.search(r"^latency us\s+min\s+median\s+p90\s+p99\s+max$", out, re.M), out
    latency_row(out, "pyexec")
    assert "executorch" not in out


def test_bench_compares_with_executorch_when_importable() -> None:
    if importlib.util.find_spec("executorch") is None:
        pytest.skip("executorch is not installed")
    proc = ok("bench", ADD_MUL, "--runs", "30", "--warmup", "3", "--threads", "1")
    out = proc.stdout
    # The import takes seconds: said on stderr before it starts.
    assert "pyexec bench: importing torch and ExecuTorch's runtime to compare with (--no-executorch skips this)" \
        in proc.stderr, proc.stderr
    latency_row(out, "pyexec")
    latency_row(out, "executorch")
    assert "threads: 1 (each runtime)" in out
    ours, theirs = latency_row(out, "pyexec")[1], latency_row(out, "executorch")[1]
    times = r" \(median time ([\d.]+ .?s) for pyexec, ([\d.]+ .?s) for ExecuTorch\)$"
    tie = re.search(r"^pyexec and ExecuTorch took the same time" + times, out, re.M)
    if tie is not None:  # medians within half a percent (the table rounds to 0.1 us)
        assert abs(ours - theirs) <= 0.005 * max(ours, theirs) + 0.1, out
        return
    m = re.search(r"^(pyexec|ExecuTorch) (\d+\.\d\d)x faster than (pyexec|ExecuTorch)" + times, out, re.M)
    assert m is not None and {m.group(1), m.group(3)} == {"pyexec", "ExecuTorch"}, out
    # The winner is the one with the lower median in the table above.
    assert (m.group(1) == "pyexec") == (ours < theirs), out


def test_bench_verdict_names_the_faster_runtime_in_words() -> None:
    assert verdict(38e-6, 62e-6) == (
        "pyexec 1.63x faster than ExecuTorch (median time 38 \u00b5s for pyexec, 62 \u00b5s for ExecuTorch)")
    assert verdict(2.5e-3, 1e-3) == (
        "ExecuTorch 2.50x faster than pyexec (median time 2.5 ms for pyexec, 1 ms for ExecuTorch)")
    assert verdict(1.0, 1.001).startswith("pyexec and ExecuTorch took the same time")


@pytest.mark.parametrize("command", ["bench", "profile", "run"])
def test_threads_option_sets_the_count_and_refuses_bad_ones(
    command: str, xy: tuple[np.ndarray, np.ndarray, Path, Path]
) -> None:
    x_npy, y_npy = xy[2], xy[3]
    extra = {"bench": ["--runs", "5", "--no-executorch"], "profile": ["--runs", "2"],
             "run": ["-i", f"0={x_npy}", f"1={y_npy}"]}[command]
    out = ok(command, ADD_MUL, "--threads", "1", *extra).stdout
    if command == "bench":
        assert "threads: 1\n" in out
    if command == "profile":
        assert "1 thread(s)" in out
    assert "--threads must be from 1 to 1024, got 0" in fails(2, command, ADD_MUL, "--threads", "0", *extra)


def test_bench_shows_a_progress_bar_on_stderr() -> None:
    proc = ok("bench", DATA / "cache_update_unplanned.pte", "--runs", "25", "--progress", "on", "--no-executorch")
    assert re.search(r"pyexec\s+\[#+\] 25/25\n", proc.stderr.replace("\r", "\n")), proc.stderr
    assert "[" not in ok("bench", ADD_MUL, "--runs", "25", "--progress", "off", "--no-executorch").stderr
    latency_row(proc.stdout, "pyexec")  # int64 index input drawn within range: it ran


def test_bench_needs_non_tensor_inputs_given(scale_pte: Path) -> None:
    err = fails(2, "bench", scale_pte, "--runs", "5", "--no-executorch")
    assert "input 1 is a non-tensor value" in err and "--input 1=VALUE" in err
    out = ok("bench", scale_pte, "--runs", "5", "-i", "1=3", "2=0.5", "--no-executorch").stdout
    assert "inputs: float32[2, 3], 3, 0.5" in out
    latency_row(out, "pyexec")


def test_bench_reports_a_missing_file_and_bad_counts(tmp_path: Path) -> None:
    assert "nope.pte" in fails(1, "bench", tmp_path / "nope.pte")
    assert "--runs must be at least 1" in fails(2, "bench", ADD_MUL, "--runs", "0")
