"""Bundled programs (.bpte): made with ExecuTorch's own API (BundledProgram,
serialize_from_bundled_program_to_flatbuffer) from a program with two
methods, one with a dynamic batch dim; loaded by pyexec, which runs the
program inside and verifies the test cases, and by ExecuTorch's runtime
(_load_bundled_program_from_buffer, _load_for_executorch_from_bundled_program,
verify_result_with_bundled_expected_output) on the same bytes."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from support.bundled import encode_cases, forward_cases, make_bundle, manager, suites
from support.export import assert_close, export_manager

import pyexec
from pyexec.__main__ import main as cli


class Bundles:
    def __init__(self, tmp: Path) -> None:
        mgr = manager()
        self.pte = bytes(mgr.buffer)
        self.good = make_bundle(program=mgr)
        self.wrong = make_bundle(("forward", 1, 1), program=mgr)  # output 1 of case 1 off by 1e-2
        self.path = tmp / "two.bpte"
        self.path.write_bytes(self.good)
        self.wrong_path = tmp / "wrong.bpte"
        self.wrong_path.write_bytes(self.wrong)
        self.pte_path = tmp / "two.pte"
        self.pte_path.write_bytes(self.pte)
        self.mgr = mgr


@pytest.fixture(scope="module")
def bundles(tmp_path_factory: pytest.TempPathFactory) -> Bundles:
    return Bundles(tmp_path_factory.mktemp("bundled"))


def et_bundle(data: bytes) -> Any:
    from executorch.extension.pybindings.portable_lib import _load_bundled_program_from_buffer

    return _load_bundled_program_from_buffer(data)


def et_verify(data: bytes, method: str, case: int, rtol: float = 1e-5, atol: float = 1e-8) -> list[Any] | None:
    """ExecuTorch's outputs for a test case when it verifies, None when it reports a mismatch."""
    try:
        return list(et_bundle(data).verify_result_with_bundled_expected_output(method, case, rtol, atol))
    except RuntimeError as exc:
        assert "verification failed" in str(exc)
        return None


# ---- loading ----------------------------------------------------------------------------


@pytest.mark.parametrize("how", ["path", "bytes", "file"])
def test_a_bpte_loads_and_runs_the_program_inside_as_executorch_does(bundles: Bundles, how: str) -> None:
    from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_bundled_program

    source: Any = {"path": bundles.path, "bytes": bundles.good, "file": open(bundles.path, "rb")}[how]
    program = pyexec.load(source)
    assert program.is_bundled
    et = _load_for_executorch_from_bundled_program(et_bundle(bundles.good))
    assert program.method_names == set(et.method_names()) == {"forward", "encode"}
    x = torch.randn(3, 3, 4)
    got = program.load_method("forward").execute([x, 3])
    want = et.run_method("forward", [x, 3])
    for g, w in zip(got, want, strict=True):
        assert_close(g, w, rtol=1e-6, atol=1e-6)
    a, q = encode_cases()[1]
    assert_close(program.load_method("encode").execute([a, q])[0], et.run_method("encode", [a, q])[0], rtol=0, atol=0)


def test_a_bpte_and_its_pte_describe_the_same_methods(bundles: Bundles) -> None:
    bundled, plain = pyexec.load(bundles.path), pyexec.load(bundles.pte)
    assert not plain.is_bundled and plain.bundled_test_suites == {}
    for name in ("forward", "encode"):
        assert bundled.method_meta(name) == plain.method_meta(name)
        assert bundled.operators(name) == plain.operators(name)


def test_a_bundled_program_pickles_and_reloads_as_bundled(bundles: Bundles) -> None:
    import pickle

    for source in (bundles.path, bundles.good):
        again = pickle.loads(pickle.dumps(pyexec.load(source)))
        assert again.is_bundled and set(again.bundled_test_suites) == {"forward", "encode"}


# ---- the test sets ----------------------------------------------------------------------


def test_test_suites_hold_what_executorch_bundled(bundles: Bundles) -> None:
    """Each input and expected output as given to ExecuTorch's MethodTestCase
    (expected outputs from torch eager), in the method's name order."""
    got = pyexec.load(bundles.path).bundled_test_suites
    assert list(got) == ["encode", "forward"]  # BundledProgram sorts its suites by name
    for suite in suites():
        mine = got[suite.method_name]
        assert mine.method_name == suite.method_name
        assert len(mine.test_cases) == len(suite.test_cases)
        for case, ref in zip(mine.test_cases, suite.test_cases):
            assert len(case.inputs) == len(ref.inputs) and len(case.expected_outputs) == len(ref.expected_outputs)
            for a, b in zip([*case.inputs, *case.expected_outputs], [*ref.inputs, *ref.expected_outputs]):
                if isinstance(b, torch.Tensor):
                    assert isinstance(a, np.ndarray) and not a.flags.writeable
                    assert_close(a, b, rtol=0, atol=0)
                else:
                    assert type(a) is type(b) and a == b
    shapes = [c.inputs[0].shape for c in got["forward"].test_cases]
    assert shapes == [tuple(c[0].shape) for c in forward_cases()] == [(2, 3, 4), (1, 3, 4), (4, 3, 4)]


def test_the_test_suites_are_frozen_dataclasses(bundles: Bundles) -> None:
    suite = pyexec.load(bundles.path).bundled_test_suites["encode"]
    assert isinstance(suite, pyexec.BundledTestSuite) and isinstance(suite.test_cases[0], pyexec.BundledTestCase)
    with pytest.raises(AttributeError):
        suite.method_name = "x"  # type: ignore[misc]


# ---- verification -----------------------------------------------------------------------


def test_verify_bundled_passes_every_case_with_the_outputs_executorch_verifies(bundles: Bundles) -> None:
    results = pyexec.verify_bundled(pyexec.load(bundles.path))
    assert [(r.method_name, r.test_case) for r in results] == [
        ("encode", 0), ("encode", 1), ("forward", 0), ("forward", 1), ("forward", 2)
    ]
    for r in results:
        assert r.passed
        want = et_verify(bundles.good, r.method_name, r.test_case)
        assert want is not None
        for g, w in zip(r.outputs, want, strict=True):
            assert_close(g, w, rtol=1e-6, atol=1e-6)


def test_a_wrong_expected_output_fails_naming_method_case_and_output(bundles: Bundles) -> None:
    program = pyexec.load(bundles.wrong_path)
    message = r"method 'forward', test case 1: output 1: 1 of 1 elements"
    with pytest.raises(pyexec.VerificationError, match=message) as e:
        pyexec.verify_bundled(program)
    assert (e.value.method_name, e.value.test_case, e.value.output) == ("forward", 1, 1)
    assert isinstance(e.value, RuntimeError)  # as ExecuTorch raises it
    # every other case passes, in pyexec as in ExecuTorch, which fails exactly that one
    verdicts = [(r.method_name, r.test_case, r.passed) for r in pyexec.run_bundled(program)]
    et = [(m, i, et_verify(bundles.wrong, m, i) is not None) for m, i, _ in verdicts]
    assert verdicts == et
    assert [v for v in verdicts if not v[2]] == [("forward", 1, False)]


def test_tolerances_decide_as_executorchs(bundles: Bundles) -> None:
    """The wrong output is 1e-2 off: atol 2e-2 accepts it, 5e-3 does not,
    and a relative tolerance of 1e-3 (of ~39.5) accepts it; ExecuTorch agrees."""
    program = pyexec.load(bundles.wrong_path)
    for rtol, atol, ok in ((1e-5, 2e-2, True), (1e-5, 5e-3, False), (1e-3, 0.0, True), (1e-4, 0.0, False)):
        passed = all(r.passed for r in pyexec.run_bundled(program, "forward", rtol, atol))
        assert passed is ok, (rtol, atol)
        assert (et_verify(bundles.wrong, "forward", 1, rtol, atol) is not None) is ok, (rtol, atol)


def test_compare_follows_executorchs_nan_inf_and_exact_rules() -> None:
    from pyexec._bundled import compare

    nan, inf = float("nan"), float("inf")
    f = np.array
    assert compare(f([nan, inf, -inf, 1.0], np.float32), f([nan, inf, -inf, 1.0], np.float32), 0, 0) is None
    assert compare(f([nan], np.float32), f([1.0], np.float32), 1e-5, 1e-8) is not None
    assert compare(f([inf], np.float32), f([-inf], np.float32), 1e-5, 1e-8) is not None
    assert compare(f([1.0], np.float32), f([np.nextafter(np.float32(1), np.float32(2))], np.float32), 0, 0) is not None
    assert compare(f([1.0], np.float16), f([1.0009765625], np.float16), 1e-3, 0) is None
    assert compare(f([1, 2], np.int32), f([1, 3], np.int32), 1, 1) is not None  # integers: exact whatever the tolerance
    assert compare(f([1.0], np.float32), f([1.0], np.float64), 1, 1) is not None  # dtypes must match
    assert compare(f([1.0], np.float32), f([[1.0]], np.float32), 1, 1) is not None  # shapes must match


def test_verify_one_method_and_the_errors_around_it(bundles: Bundles) -> None:
    program = pyexec.load(bundles.path)
    assert [r.test_case for r in pyexec.verify_bundled(program, "encode")] == [0, 1]
    with pytest.raises(pyexec.InvalidArgumentError, match="no test suite for method 'nope'"):
        pyexec.verify_bundled(program, "nope")
    with pytest.raises(pyexec.InvalidArgumentError, match="not a bundled program"):
        pyexec.verify_bundled(pyexec.load(bundles.pte))
    with pytest.raises(pyexec.InvalidArgumentError, match="rtol must be a number >= 0"):
        pyexec.verify_bundled(program, rtol=-1)


# ---- test cases that do not fit their method --------------------------------------------


def bundle_unchecked(tmp_path: Path, pte: bytes, method: str, cases: list[tuple[list[Any], list[Any]]]) -> bytes:
    """A bundle ExecuTorch's serializer writes without checking the test
    cases against the program (BundledProgram from a .pte path skips it)."""
    from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
    from executorch.devtools.bundled_program.core import BundledProgram
    from executorch.devtools.bundled_program.serialize import serialize_from_bundled_program_to_flatbuffer

    path = tmp_path / "p.pte"
    path.write_bytes(pte)
    tcs = [MethodTestCase(inputs=i, expected_outputs=o) for i, o in cases]
    bp = BundledProgram(None, [MethodTestSuite(method_name=method, test_cases=tcs)], pte_file_path=str(path))
    return bytes(serialize_from_bundled_program_to_flatbuffer(bp))


@pytest.mark.parametrize(
    ("method", "inputs", "outputs", "message"),
    [
        ("encode", [torch.zeros(2, 2, dtype=torch.int32)], [torch.zeros(2, 2, dtype=torch.int32)],
         "test case 0: has 1 inputs, method 'encode' takes 2"),
        ("encode", [torch.zeros(2, 2), torch.zeros(2, 2)], [torch.zeros(2, 2, dtype=torch.int32)],
         "test case 0: input 0 has dtype float32, the method's has int32"),
        ("encode", [torch.zeros(3, 2, dtype=torch.int32)] * 2, [torch.zeros(3, 2, dtype=torch.int32)],
         r"test case 0: input 0 has shape \[3, 2\], the method's is \[2, 2\] \(dim 0\)"),
        ("forward", [torch.zeros(5, 3, 4), 3], [torch.zeros(5, 3, 4), torch.zeros(5)],
         r"input 0 has shape \[5, 3, 4\], the method's is at most \[4, 3, 4\] \(dim 0\)"),
        ("forward", [torch.zeros(2, 3), 3], [torch.zeros(2, 3, 4), torch.zeros(2)],
         "input 0 has rank 2, the method's has rank 3"),
        ("forward", [torch.zeros(2, 3, 4), torch.zeros(1)], [torch.zeros(2, 3, 4), torch.zeros(2)],
         "input 1 is a tensor, the method's slot holds no tensor"),
        ("encode", [torch.zeros(2, 2, dtype=torch.int32)] * 2, [torch.zeros(2, 2, dtype=torch.int32)] * 2,
         "has 2 expected outputs, method 'encode' returns 1"),
        ("missing", [torch.zeros(2)], [torch.zeros(2)], "bundled test suite for method 'missing': the program has no"),
    ],
)
def test_a_test_case_that_does_not_fit_its_method_is_an_invalid_program(
    bundles: Bundles, tmp_path: Path, method: str, inputs: list[Any], outputs: list[Any], message: str
) -> None:
    data = bundle_unchecked(tmp_path, bundles.pte, method, [(inputs, outputs)])
    program = pyexec.load(data)  # the program itself is fine and runs
    assert program.load_method("encode").execute(list(encode_cases()[0]))[0].shape == (2, 2)
    with pytest.raises(pyexec.InvalidProgramError, match=message):
        pyexec.verify_bundled(program)


def test_a_test_case_without_expected_outputs_runs_but_does_not_verify(bundles: Bundles, tmp_path: Path) -> None:
    data = bundle_unchecked(tmp_path, bundles.pte, "encode", [(list(encode_cases()[0]), [])])
    program = pyexec.load(data)
    (result,) = pyexec.run_bundled(program)
    assert not result.passed and "no expected outputs" in (result.mismatch or "")
    with pytest.raises(pyexec.VerificationError, match="test case 0: no expected outputs"):
        pyexec.verify_bundled(program)


# ---- malformed bundles ------------------------------------------------------------------


def program_vector(data: bytes) -> tuple[int, int]:
    """(offset of the program vector's length field, its length) in a bundle."""
    root = struct.unpack_from("<I", data, 0)[0]
    vt = root - struct.unpack_from("<i", data, root)[0]
    field = struct.unpack_from("<H", data, vt + 4 + 2 * 2)[0]  # slot 2: program
    at = root + field
    vec = at + struct.unpack_from("<I", data, at)[0]
    return vec, struct.unpack_from("<I", data, vec)[0]


def test_malformed_bundles_are_clear_errors(bundles: Bundles) -> None:
    good = bundles.good
    with pytest.raises(pyexec.UnsupportedError, match="bundled program identifier 'BP07' is not supported"):
        pyexec.load(good[:4] + b"BP07" + good[8:])
    vec, n = program_vector(good)
    assert good[vec + 4 + 4 : vec + 8 + 4] == b"ET12" and n == len(bundles.pte)
    too_long = bytearray(good)
    struct.pack_into("<I", too_long, vec, len(good))
    with pytest.raises(pyexec.InvalidProgramError, match="bundled program: program is malformed"):
        pyexec.load(bytes(too_long))
    not_et = bytearray(good)
    not_et[vec + 8 : vec + 12] = b"XX99"
    with pytest.raises(pyexec.InvalidProgramError, match="in the program inside the bundled program"):
        pyexec.load(bytes(not_et))
    with pytest.raises(pyexec.InvalidProgramError):
        pyexec.load(good[: len(good) // 2])


def test_every_truncation_and_byte_flip_of_a_bundle_is_an_error_or_a_valid_program(bundles: Bundles) -> None:
    """Nothing crashes: each variant loads (and its test sets read, its
    methods verify or fail with a pyexec error) or is refused with one."""
    good = bundles.good
    vec, _ = program_vector(good)
    variants = [good[:n] for n in range(0, len(good), 7)]
    # the bundle's own tables (before the program and after it), every byte, a few patterns
    positions = [*range(0, vec + 16), *range(vec + 4 + len(bundles.pte), len(good))]
    for i in positions:
        for pattern in (0x00, 0xFF, 0x80):
            b = bytearray(good)
            b[i] = pattern
            variants.append(bytes(b))
    loaded = 0
    for data in variants:
        try:
            program = pyexec.load(data)
            _ = program.bundled_test_suites
            loaded += 1
            pyexec.run_bundled(program)
        except pyexec.Error:
            pass
    assert loaded > 0


# ---- the command line -------------------------------------------------------------------


def test_cli_inspect_lists_the_test_suites(bundles: Bundles, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(["inspect", str(bundles.path)]) == 0
    out = capsys.readouterr().out
    assert "bundled test suites (2)" in out
    assert "  method 'encode': 2 test cases" in out and "  method 'forward': 3 test cases" in out
    assert "    test case 1: inputs float32[1, 3, 4], int 3 -> expected float32[1, 3, 4], float32[1]" in out
    assert cli(["inspect", str(bundles.pte_path)]) == 0
    assert "bundled test suites" not in capsys.readouterr().out


def test_cli_run_verify_reports_each_case_and_fails_on_a_mismatch(
    bundles: Bundles, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli(["run", str(bundles.path), "--verify"]) == 0
    out = capsys.readouterr().out
    assert out.count(": PASS") == 5 and "5 test cases: 5 passed, 0 failed" in out
    assert cli(["run", str(bundles.wrong_path), "--verify"]) == 1
    out = capsys.readouterr().out
    assert "method 'forward', test case 1: FAIL: output 1: 1 of 1 elements differ" in out
    assert "5 test cases: 4 passed, 1 failed" in out
    assert cli(["run", str(bundles.wrong_path), "--verify", "--atol", "0.02", "-m", "forward"]) == 0
    assert "3 test cases: 3 passed, 0 failed (rtol=1e-05, atol=0.02)" in capsys.readouterr().out
    assert cli(["run", str(bundles.pte_path), "--verify"]) == 2
    assert "is not a bundled program" in capsys.readouterr().err
    assert cli(["run", str(bundles.path), "--verify", "-m", "nope"]) == 2
    assert "no test cases for method 'nope' (tested: 'encode', 'forward')" in capsys.readouterr().err


def test_cli_run_runs_a_bpte_like_a_pte(bundles: Bundles, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    a, q = (np.asarray(t) for t in encode_cases()[0])
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "q.npy", q)
    assert cli(["run", str(bundles.path), "-m", "encode", "-i", f"0={tmp_path / 'a.npy'}", f"1={tmp_path / 'q.npy'}",
                "-o", str(tmp_path)]) == 0
    np.testing.assert_array_equal(np.load(tmp_path / "output0.npy"), a * q + 1)


class HalfPrecision(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x * 2 + 1, (y * y).float()


def test_bfloat16_and_float16_test_values_verify_as_executorch_does(tmp_path: Path) -> None:
    """bfloat16 values (numpy has none) come as torch tensors and compare bit
    for bit; float16 within the tolerances; ExecuTorch gives the same verdicts."""
    from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite
    from executorch.devtools.bundled_program.core import BundledProgram
    from executorch.devtools.bundled_program.serialize import serialize_from_bundled_program_to_flatbuffer

    x, y = torch.randn(2, 3).to(torch.bfloat16), torch.randn(4).half()
    mgr = export_manager(HalfPrecision(), (x, y))
    m = HalfPrecision()
    good = [MethodTestCase(inputs=[x, y], expected_outputs=list(m(x, y)))]
    off = list(m(x, y))
    off[0] = off[0].clone()
    off[0].view(-1)[3] += 0.0625  # one bfloat16 step or more: any difference fails, whatever the tolerance
    bad = [MethodTestCase(inputs=[x, y], expected_outputs=off)]
    for cases, ok in ((good, True), (bad, False)):
        data = bytes(serialize_from_bundled_program_to_flatbuffer(
            BundledProgram(mgr, [MethodTestSuite(method_name="forward", test_cases=cases)])))
        program = pyexec.load(data)
        case = program.bundled_test_suites["forward"].test_cases[0]
        assert isinstance(case.inputs[0], torch.Tensor) and case.inputs[0].dtype == torch.bfloat16
        assert torch.equal(case.inputs[0], x) and np.array_equal(case.inputs[1], y.numpy())
        (result,) = pyexec.run_bundled(program, rtol=1e-2, atol=1e-2)
        assert result.passed is ok, result.mismatch
        assert (et_verify(data, "forward", 0, 1e-2, 1e-2) is not None) is ok
