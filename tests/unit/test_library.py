"""The shared library and the package as shipped: what it links and exports,
the binding generated from the header, and numpy-only results. (The wheel and
a fresh virtual environment without torch: tests/integration/test_wheel.py.)"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
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


def test_precompiled_declarations_are_those_of_the_header() -> None:
    import importlib.util

    spec = importlib.util.spec_from_file_location("gen_ffi", ROOT / "scripts" / "gen_ffi.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    generated = (ROOT / "pyexec" / "_ffi_types.py").read_text()
    assert generated == gen.generate(HEADER), "pyexec/_ffi_types.py is stale: run scripts/gen_ffi.py"


def _binding_in_child(site: Path, library: Path | None) -> list[str]:
    """In a child importing pyexec from `site`: the module of its FFI, whether
    a C parser was imported, and a loaded program's method names."""
    demo = Path(pyexec.__file__).resolve().parent / "demo" / "decoder.pte"
    code = ("import sys, pyexec\n"
            "print(type(pyexec._ffi.ffi).__module__, 'pycparser' in sys.modules)\n"
            f"print(sorted(pyexec.load({str(demo)!r}).method_names))\n")
    proc = import_in_child(site, library, code)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.split("\n")[:2]


def test_import_runs_no_c_parser_with_the_header_the_declarations_came_from(tmp_path: Path) -> None:
    site = package_copy(tmp_path)
    library_copy(site / "pyexec" / "_lib")
    assert _binding_in_child(site, None) == ["_cffi_backend False", "['forward']"]


def test_another_header_is_parsed_at_import(tmp_path: Path) -> None:
    """A library with a header of other bytes (here one more comment) gets
    declarations parsed from that header, not the precompiled ones."""
    site = package_copy(tmp_path)
    lib = library_copy(tmp_path / "other", HEADER.read_text() + "\n/* a local build */\n")
    assert _binding_in_child(site, lib) == ["cffi.api True", "['forward']"]


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


# ---- finding the library, and its version --------------------------------


def package_copy(tmp_path: Path) -> Path:
    """The pyexec package's Python files copied under tmp_path (no bundled
    library yet); returns the folder to put on PYTHONPATH."""
    root = tmp_path / "site"
    shutil.copytree(Path(pyexec.__file__).resolve().parent, root / "pyexec",
                    ignore=shutil.ignore_patterns("_lib", "__pycache__"))
    return root


def library_copy(folder: Path, header_text: str | None = None) -> Path:
    """A copy of the library with its header (or `header_text`) beside it."""
    folder.mkdir(parents=True, exist_ok=True)
    shutil.copy2(LIB, folder / "libpyexec.so")
    (folder / "pyexec.h").write_text(header_text if header_text is not None else HEADER.read_text())
    return folder / "libpyexec.so"


MAPPED_LIBRARY = ("import pyexec\n"
                  "print({l.split()[-1] for l in open('/proc/self/maps')\n"
                  "       if l.rstrip().endswith('libpyexec.so')}.pop())")


def import_in_child(site: Path, library: Path | None, code: str = MAPPED_LIBRARY) -> subprocess.CompletedProcess[str]:
    """Runs `code` (by default: imports pyexec and prints the libpyexec.so the
    process mapped) in a child importing pyexec from `site`, with
    PYEXEC_LIBRARY=`library` (unset for None)."""
    env = {k: v for k, v in os.environ.items() if k != "PYEXEC_LIBRARY"}
    env["PYTHONPATH"] = str(site)
    if library is not None:
        env["PYEXEC_LIBRARY"] = str(library)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=site)


def test_pyexec_library_overrides_the_bundled_copy(tmp_path: Path) -> None:
    site = package_copy(tmp_path)
    bundled = library_copy(site / "pyexec" / "_lib")
    override = library_copy(tmp_path / "override")
    by_default = import_in_child(site, None)
    assert by_default.returncode == 0, by_default.stderr
    assert by_default.stdout.strip() == str(bundled)
    overridden = import_in_child(site, override)
    assert overridden.returncode == 0, overridden.stderr
    assert overridden.stdout.strip() == str(override)


def test_an_unusable_pyexec_library_is_an_error_not_a_fallback(tmp_path: Path) -> None:
    site = package_copy(tmp_path)
    library_copy(site / "pyexec" / "_lib")
    missing = tmp_path / "nowhere" / "libpyexec.so"
    proc = import_in_child(site, missing)
    assert proc.returncode != 0
    assert "ImportError" in proc.stderr and f"PYEXEC_LIBRARY={missing}" in proc.stderr


def test_a_library_of_another_version_than_its_header_is_refused_at_import(tmp_path: Path) -> None:
    text = HEADER.read_text()
    minor = re.search(r"#define PYEXEC_VERSION_MINOR (\d+)", text)
    assert minor is not None
    other = int(minor.group(1)) + 1
    lib = library_copy(tmp_path / "other", text.replace(minor.group(0), f"#define PYEXEC_VERSION_MINOR {other}"))
    proc = import_in_child(package_copy(tmp_path), lib)
    assert proc.returncode != 0
    message = proc.stderr.strip().splitlines()[-1]
    assert message.startswith("ImportError"), proc.stderr
    assert f"is version {pyexec.__version__}" in message
    major, _, patch = pyexec.__version__.split(".")
    assert f"is version {major}.{other}.{patch}" in message


class FakeLibrary:
    """What check_version reads of a binding: the header's version macros and
    the library's pyexec_version()."""

    def __init__(self, header: tuple[int, int, int], library: str) -> None:
        self.PYEXEC_VERSION_MAJOR, self.PYEXEC_VERSION_MINOR, self.PYEXEC_VERSION_PATCH = header
        self._library = _ffi.ffi.new("char[]", library.encode())

    def pyexec_version(self) -> object:
        return self._library


def test_check_version_names_both_versions() -> None:
    major, minor = _ffi.API_VERSION
    same = f"{major}.{minor}.7"
    _ffi.check_version(FakeLibrary((major, minor, 7), same), _ffi.ffi, Path("lib.so"), Path("pyexec.h"))
    with pytest.raises(ImportError, match=rf"lib\.so is version {major}\.{minor}\.6, but the header pyexec\.h .* "
                                          rf"is version {major}\.{minor}\.7"):
        _ffi.check_version(FakeLibrary((major, minor, 7), f"{major}.{minor}.6"), _ffi.ffi, Path("lib.so"),
                           Path("pyexec.h"))
    # A matching pair of another release than the package's Python code.
    with pytest.raises(ImportError, match=rf"needs native library version {major}\.{minor}\.x, but lib\.so is "
                                          rf"version {major}\.{minor + 1}\.0"):
        _ffi.check_version(FakeLibrary((major, minor + 1, 0), f"{major}.{minor + 1}.0"), _ffi.ffi,
                           Path("lib.so"), Path("pyexec.h"))


def test_package_header_and_pyproject_agree_on_the_version() -> None:
    pyproject = re.search(r'^version = "(.+?)"', (ROOT / "pyproject.toml").read_text(), re.M)
    assert pyproject is not None and pyproject.group(1) == pyexec.__version__
    assert tuple(int(p) for p in pyexec.__version__.split(".")[:2]) == _ffi.API_VERSION


def test_clear_inputs_uninstalls_every_input() -> None:
    """pyexec_method_clear_inputs: the method refuses to run, and keeps no
    pointer to the unplanned inputs it read (their memory can be bound)."""
    m = pyexec.load(ROOT / "native" / "tests" / "data" / "add_mul_unplanned.pte").load_method()
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = np.full((2, 3), 2.0, np.float32)
    m.set_inputs([x, y])
    m.execute()
    assert _ffi.lib.pyexec_method_clear_inputs(m._m) == _ffi.lib.PYEXEC_OK
    with pytest.raises(pyexec.InvalidArgumentError, match=r"^input 0 has not been set$"):
        m.execute()
    m.set_output(x, 0)  # x is no longer an installed input: no overlap
    m.set_output(None, 0)
    assert _ffi.lib.pyexec_method_clear_inputs(_ffi.ffi.NULL) == _ffi.lib.PYEXEC_ERR_INVALID_ARGUMENT
    s, p = m.execute([x, y])
    np.testing.assert_array_equal(s, x + y)
    np.testing.assert_array_equal(p, x * y)
