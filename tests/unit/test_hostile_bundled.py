"""Hostile bundled programs (.bpte): hand-crafted and mutated variants of a
real bundle (native/tests/data/two_methods.bpte, written by ExecuTorch's
serializer) must load and verify, or fail with a pyexec.Error naming the
problem; never crash. Every case runs in a child process, so a crash fails
the test instead of ending the run."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest
from support import ROOT

import pyexec

BUNDLE = ROOT / "native" / "tests" / "data" / "two_methods.bpte"
SANITIZED = "asan" in os.environ.get("LD_PRELOAD", "")

# Slots of bundled_program_schema.fbs's tables.
BP_SUITES, BP_PROGRAM = 1, 2
SUITE_CASES = 1
CASE_INPUTS, CASE_EXPECTED = 0, 1
VALUE_TYPE, VALUE_VAL = 0, 1
BTENSOR_SIZES, BTENSOR_DATA, BTENSOR_DIM_ORDER = 1, 2, 3


class Fb:
    """Just enough of a flatbuffer reader to find a field in the bundle and overwrite it."""

    def __init__(self, data: bytes) -> None:
        self.b = bytearray(data)

    def u16(self, p: int) -> int:
        return int(struct.unpack_from("<H", self.b, p)[0])

    def u32(self, p: int) -> int:
        return int(struct.unpack_from("<I", self.b, p)[0])

    def field(self, table: int, slot: int) -> int:
        vt = table - int(struct.unpack_from("<i", self.b, table)[0])
        off = self.u16(vt + 4 + 2 * slot)
        assert off, f"slot {slot} absent"
        return table + off

    def sub(self, table: int, slot: int) -> int:
        p = self.field(table, slot)
        return p + self.u32(p)

    def vec(self, table: int, slot: int) -> tuple[int, int]:
        """(position of the length field, count) of a vector field."""
        v = self.sub(table, slot)
        return v, self.u32(v)

    def item(self, table: int, slot: int, i: int) -> int:
        v, n = self.vec(table, slot)
        assert i < n
        p = v + 4 + 4 * i
        return p + self.u32(p)

    def tensor(self, suite: int, case: int, slot: int, index: int) -> int:
        """The Tensor table of a test value."""
        s = self.item(self.u32(0), BP_SUITES, suite)
        c = self.item(s, SUITE_CASES, case)
        v = self.item(c, slot, index)
        return self.sub(v, VALUE_VAL)

    def put(self, fmt: str, p: int, *values: int) -> Fb:
        struct.pack_into(fmt, self.b, p, *values)
        return self

    def bytes(self) -> bytes:
        return bytes(self.b)


def good() -> Fb:
    return Fb(BUNDLE.read_bytes())


def program_range() -> tuple[int, int]:
    f = good()
    v, n = f.vec(f.u32(0), BP_PROGRAM)
    return v + 4, n


# ---- hand-crafted cases -----------------------------------------------------------------


def bp07() -> bytes:
    return good().put("4s", 4, b"BP07").bytes()


def program_beyond_file() -> bytes:
    f = good()
    v, _ = f.vec(f.u32(0), BP_PROGRAM)
    return f.put("<I", v, len(f.b)).bytes()


def program_misaligned() -> bytes:
    """The program's offset moved by 4: inside the file, but not where a program can start."""
    f = good()
    p = f.field(f.u32(0), BP_PROGRAM)
    return f.put("<I", p, f.u32(p) + 4).bytes()


def no_program() -> bytes:
    f = good()
    v, _ = f.vec(f.u32(0), BP_PROGRAM)
    return f.put("<I", v, 0).bytes()


def suites_count_huge() -> bytes:
    f = good()
    v, _ = f.vec(f.u32(0), BP_SUITES)
    return f.put("<I", v, 0x3FFFFFFF).bytes()


def tensor_size_huge() -> bytes:
    f = good()
    t = f.tensor(1, 0, CASE_INPUTS, 0)  # forward's x, [2, 3, 4]
    v, _ = f.vec(t, BTENSOR_SIZES)
    return f.put("<i", v + 4, 1 << 30).bytes()


def tensor_size_negative() -> bytes:
    f = good()
    v, _ = f.vec(f.tensor(1, 0, CASE_INPUTS, 0), BTENSOR_SIZES)
    return f.put("<i", v + 8, -3).bytes()


def tensor_data_short() -> bytes:
    f = good()
    v, n = f.vec(f.tensor(0, 1, CASE_EXPECTED, 0), BTENSOR_DATA)
    return f.put("<I", v, n - 1).bytes()


def dim_order_repeated() -> bytes:
    f = good()
    v, _ = f.vec(f.tensor(1, 2, CASE_EXPECTED, 0), BTENSOR_DIM_ORDER)
    return f.put("<B", v + 5, 0).bytes()


def value_type_unknown() -> bytes:
    f = good()
    s = f.item(f.u32(0), BP_SUITES, 0)
    v = f.item(f.item(s, SUITE_CASES, 0), CASE_INPUTS, 1)
    return f.put("<B", f.field(v, VALUE_TYPE), 9).bytes()


def pte_labelled_bp08() -> bytes:
    """A plain program whose identifier says bundled: another schema's tables."""
    data = (ROOT / "native" / "tests" / "data" / "add_mul.pte").read_bytes()
    return data[:4] + b"BP08" + data[8:]


def bundle_labelled_et12() -> bytes:
    return good().put("4s", 4, b"ET12").bytes()


CRAFTED: dict[str, tuple[Callable[[], bytes], str, str]] = {
    "pte_labelled_bp08": (pte_labelled_bp08, "InvalidProgramError", "bundled program holds no program"),
    "bundle_labelled_et12": (bundle_labelled_et12, "InvalidProgramError", "is malformed"),
    "bp07": (bp07, "UnsupportedError", "bundled program identifier 'BP07' is not supported"),
    "program_beyond_file": (program_beyond_file, "InvalidProgramError", "bundled program: program is malformed"),
    "program_misaligned": (program_misaligned, "InvalidProgramError", "program"),
    "no_program": (no_program, "InvalidProgramError", "bundled program holds no program"),
    "suites_count_huge": (suites_count_huge, "InvalidProgramError", "method_test_suites are malformed"),
    "tensor_size_huge": (tensor_size_huge, "InvalidProgramError",
                         "test suite 1, test case 0, input 0: tensor data holds 96 bytes"),
    "tensor_size_negative": (tensor_size_negative, "InvalidProgramError", "negative size -3 at dim 1"),
    "tensor_data_short": (tensor_data_short, "InvalidProgramError",
                          "test suite 0, test case 1, expected output 0: tensor data holds 15 bytes"),
    "dim_order_repeated": (dim_order_repeated, "InvalidProgramError",
                           "test suite 1, test case 2, expected output 0: dim_order is not a permutation"),
    "value_type_unknown": (value_type_unknown, "InvalidProgramError",
                           "test suite 0, test case 0, input 1 has unknown value type 9"),
}

CHILD = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    import pyexec

    def attempt(data):
        try:
            program = pyexec.load(data)
            program.bundled_test_suites
            results = pyexec.run_bundled(program)
            return "ok: " + ",".join("pass" if r.passed else "fail" for r in results)
        except pyexec.Error as e:
            return type(e).__name__ + ": " + str(e)[:300]

    for f in sorted(Path(sys.argv[1]).glob("*.bpte")):
        print(json.dumps({"case": f.stem, "result": attempt(f.read_bytes())}), flush=True)
    """
)


def child_env() -> dict[str, str]:
    env = dict(os.environ)
    here = str(Path(pyexec.__file__).parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    if SANITIZED:
        env["ASAN_OPTIONS"] = ":".join(filter(None, (env.get("ASAN_OPTIONS"), "allocator_may_return_null=1")))
    return env


def run_cases(cases: dict[str, bytes], tmp: Path) -> dict[str, str]:
    """Each case through load, the test sets and run_bundled, in one child."""
    tmp.mkdir(parents=True, exist_ok=True)
    for name, data in cases.items():
        (tmp / f"{name}.bpte").write_bytes(data)
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tmp)], capture_output=True, text=True, env=child_env(),
                          timeout=600)
    results = {}
    for line in proc.stdout.splitlines():
        r = json.loads(line)
        results[r["case"]] = r["result"]
    assert proc.returncode == 0, f"child exited {proc.returncode} after {list(results)}:\n{proc.stderr[-4000:]}"
    assert len(results) == len(cases)
    return results


def test_the_fixture_verifies(tmp_path: Path) -> None:
    assert run_cases({"good": good().bytes()}, tmp_path) == {"good": "ok: pass,pass,pass,pass,pass"}


@pytest.fixture(scope="module")
def crafted_results(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return run_cases({name: make() for name, (make, _, _) in CRAFTED.items()}, tmp_path_factory.mktemp("crafted"))


@pytest.mark.parametrize("case", sorted(CRAFTED))
def test_a_crafted_bundle_is_refused_naming_the_problem(case: str, crafted_results: dict[str, str]) -> None:
    _, cls, message = CRAFTED[case]
    result = crafted_results[case]
    assert result.startswith(cls + ":") and message in result, f"{case}: {result}"


def test_every_truncation_is_refused(tmp_path: Path) -> None:
    data = good().bytes()
    results = run_cases({f"t{n:05d}": data[:n] for n in range(0, len(data), 3 if SANITIZED else 1)}, tmp_path)
    for case, result in results.items():
        n = int(case[1:])
        if set(data[n:]) == {0} and result.startswith("ok"):
            continue  # only the flatbuffer's trailing padding cut off
        assert result.startswith("InvalidProgramError:"), f"{case}: {result}"


def test_every_byte_of_the_bundle_overwritten_fails_cleanly_or_verifies(tmp_path: Path) -> None:
    """The bundle's own bytes (not the program inside), each overwritten with
    a few patterns: a pyexec.Error, or a bundle that loads and runs."""
    data = good().bytes()
    start, n = program_range()
    cases = {}
    for i in [*range(0, start), *range(start + n, len(data))]:
        for k, pattern in enumerate((0x00, 0xFF, 0x80)):
            if data[i] != pattern:
                b = bytearray(data)
                b[i] = pattern
                cases[f"b{i:05d}_{k}"] = bytes(b)
    results = run_cases(cases, tmp_path)
    kinds = {r.split(":")[0] for r in results.values()}
    assert kinds <= {"ok", "InvalidProgramError", "UnsupportedError", "InvalidArgumentError", "VerificationError",
                     "ExecutionError"}, kinds
    assert "InvalidProgramError" in kinds and "ok" in kinds
