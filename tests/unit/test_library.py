"""The shared library and the package as shipped: what it links and exports,
the binding generated from the header, and numpy-only results. (The wheel and
a fresh virtual environment without torch: tests/integration/test_wheel.py.)"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
from support import ROOT

import pyexec
from pyexec import _ffi

LIB = Path(pyexec.__file__).resolve().parent / "_lib" / "libpyexec.so"
if not LIB.exists():  # running from the source tree
    LIB = ROOT / "native" / "build" / "libpyexec.so"
HEADER = ROOT / "native" / "include" / "pyexec.h"


def run(*cmd: str | os.PathLike[str], **kw: object) -> str:
    return subprocess.run([str(c) for c in cmd], check=True, capture_output=True, text=True, **kw).stdout  # type: ignore[call-overload, no-any-return]


def test_library_links_only_libc_libm_and_pthreads() -> None:
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", run("readelf", "-d", LIB))
    assert needed, "readelf found no NEEDED entries"
    # ld-linux is glibc's own loader (thread-local storage in a shared object needs __tls_get_addr).
    allowed = re.compile(r"^(libc|libm|libpthread)\.so\.\d+$|^ld-linux[-\w]*\.so\.\d+$")
    assert all(allowed.match(n) for n in needed), needed


def test_library_exports_exactly_the_header_functions() -> None:
    exported = {
        line.split()[-1]
        for line in run("nm", "-D", "--defined-only", LIB).splitlines()
        if line.split()[1] in ("T", "D", "B", "R")
    }
    declared = set(re.findall(r"PYEXEC_API\s+[^;(]*?\b(pyexec_\w+)\s*\(", HEADER.read_text()))
    assert declared, "no declarations found in the header"
    assert exported == declared


def test_cdef_is_generated_from_the_header() -> None:
    cdef = _ffi.cdef_from_header(HEADER.read_text())
    for name in re.findall(r"\b(pyexec_\w+)\s*\(", cdef):
        assert hasattr(_ffi.lib, name), name
    assert "PYEXEC_API" not in cdef and "#include" not in cdef


def test_version_matches_the_header() -> None:
    version = re.search(r'#define PYEXEC_VERSION_STRING "(.+?)"', HEADER.read_text())
    assert version is not None and pyexec.__version__ == version.group(1)


def test_c_program_runs_against_the_library(tmp_path: Path) -> None:
    if shutil.which("cc") is None:
        pytest.skip("no C compiler")
    binary = tmp_path / "test_runtime"
    run("cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-I", HEADER.parent, ROOT / "native/tests/test_runtime.c",
        "-L", LIB.parent, f"-Wl,-rpath,{LIB.parent}", "-l:libpyexec.so", "-o", binary)
    out = run(binary, ROOT / "native" / "tests" / "data")
    assert re.search(r"^\d+ passed, 0 failed$", out, re.M), out


def test_numpy_only_results_match_numpy_arithmetic() -> None:
    m = pyexec.load(ROOT / "native" / "tests" / "data" / "add_mul.pte").load_method("forward")
    x = np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)
    y = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    s, p = m.execute([x, y])
    np.testing.assert_array_equal(s, x + y)
    np.testing.assert_array_equal(p, x * y)
