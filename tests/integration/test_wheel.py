"""The wheel as shipped: built by `pip wheel` from a clean copy of the checkout,
repaired by auditwheel into one py3-none-manylinux_2_17 wheel (every CPython 3
on glibc >= 2.17), small, with the library, header and type hints; installed
into a fresh virtual environment without torch, it runs a model with numpy."""

from __future__ import annotations

import email.parser
import importlib.util
import os
import platform
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
from support import ROOT
from support.wheel import built_wheel

pytestmark = pytest.mark.slow  # builds the wheel and fresh venvs

HEADER = ROOT / "native" / "include" / "pyexec.h"
DATA = ROOT / "native" / "tests" / "data"
X86_64 = platform.machine() in ("x86_64", "AMD64")


def run(*cmd: str | os.PathLike[str], cwd: Path | None = None, env: dict[str, str] | None = None) -> str:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, cwd=cwd, env=env)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def build(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """The repaired wheel, and what the build backend printed while building it."""
    if importlib.util.find_spec("auditwheel") is None:
        pytest.skip("auditwheel is not installed (scripts/test.sh installs it)")
    return built_wheel(platform.machine(), tmp_path_factory.mktemp("wheel"))


@pytest.fixture(scope="module")
def wheel(build: tuple[Path, str]) -> Path:
    return build[0]


def test_the_build_prints_no_setuptools_warning(build: tuple[Path, str]) -> None:
    """pyproject.toml lists every package (pyexec.demo holds only data) and
    gives the license as an SPDX expression."""
    warnings = [line.strip() for line in build[1].splitlines() if re.search(r"Warning\b|is absent from", line)]
    assert not warnings, "\n".join(warnings)


def wheel_metadata(wheel: Path, name: str) -> email.message.Message:
    with zipfile.ZipFile(wheel) as z:
        (path,) = [n for n in z.namelist() if n.endswith(f".dist-info/{name}")]
        return email.parser.Parser().parsestr(z.read(path).decode())


def test_one_py3_none_manylinux_wheel_for_every_cpython_3(wheel: Path) -> None:
    tags = wheel_metadata(wheel, "WHEEL").get_all("Tag")
    assert tags and all(t.startswith("py3-none-manylinux") for t in tags), tags
    if X86_64:  # glibc symbols bound to 2.17 versions (native/compat/glibc_2_17.h)
        assert "py3-none-manylinux_2_17_x86_64" in tags, tags
        assert re.fullmatch(r"pyexec-[\w.]+-py3-none-(manylinux2014_x86_64\.)?manylinux_2_17_x86_64\.whl", wheel.name)
    assert wheel_metadata(wheel, "WHEEL")["Root-Is-Purelib"] == "false"


def test_wheel_holds_the_package_library_header_type_hints_and_license_only(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as z:
        names = {n for n in z.namelist() if not n.endswith("/")}
        lib_size = z.getinfo("pyexec/_lib/libpyexec.so").file_size
        header = z.read("pyexec/_lib/pyexec.h")
    package = {n for n in names if ".dist-info/" not in n}
    (license_file,) = [n for n in names if n.endswith(".dist-info/licenses/LICENSE")]
    sources = {f"pyexec/{p.relative_to(ROOT / 'pyexec').as_posix()}" for p in (ROOT / "pyexec").rglob("*.py")
               if "demo" not in p.parts}
    assert package == sources | {
        "pyexec/py.typed",
        "pyexec/_lib/libpyexec.so",
        "pyexec/_lib/pyexec.h",
        "pyexec/demo/decoder.pte",
    }, package ^ sources  # nothing grafted by auditwheel (no pyexec.libs/), nothing under .data/
    assert header == HEADER.read_bytes()
    assert lib_size < 1024 * 1024, f"libpyexec.so is {lib_size} bytes"
    assert wheel.stat().st_size < 2 * 1024 * 1024, f"the wheel is {wheel.stat().st_size} bytes"
    with zipfile.ZipFile(wheel) as z:
        assert z.read(license_file) == (ROOT / "LICENSE").read_bytes()
    meta = wheel_metadata(wheel, "METADATA")
    assert meta["License-Expression"] == "BSD-3-Clause" and meta.get_all("License-File") == ["LICENSE"]
    requires = " ".join(meta.get_all("Requires-Dist") or [])
    assert "numpy" in requires and "cffi" in requires and re.search(r"torch.*extra", requires)


def test_wheel_library_is_stripped_and_needs_only_old_glibc(wheel: Path, tmp_path: Path) -> None:
    if shutil.which("readelf") is None:
        pytest.skip("readelf is not installed")
    with zipfile.ZipFile(wheel) as z:
        lib = Path(z.extract("pyexec/_lib/libpyexec.so", tmp_path))
    assert ".symtab" not in run("readelf", "-S", "-W", lib)  # stripped
    needed = re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", run("readelf", "-d", lib))
    assert all(re.match(r"^(libc|libm|libpthread)\.so\.\d+$|^ld-linux[-\w]*\.so\.\d+$", n) for n in needed), needed
    if X86_64:
        versions = set(re.findall(r"GLIBC_(\d+)\.(\d+)", run("readelf", "-V", "-W", lib)))
        newest = max((int(a), int(b)) for a, b in versions)
        assert newest <= (2, 17), f"needs GLIBC_{newest[0]}.{newest[1]}"


def test_fresh_venv_without_torch_runs_a_model_with_numpy(wheel: Path, tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    run(sys.executable, "-m", "venv", venv)
    py = venv / "bin" / "python"
    run(py, "-m", "pip", "install", "-q", wheel)
    # The wheel's package and its bundled library: not a source tree on
    # PYTHONPATH, nor a library PYEXEC_LIBRARY (which overrides it) names.
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYEXEC_LIBRARY")}
    script = (
        "import importlib.util, pathlib, numpy as np, pyexec\n"
        "assert importlib.util.find_spec('torch') is None\n"
        "lib = pathlib.Path(pyexec.__file__).parent / '_lib' / 'libpyexec.so'\n"
        "assert lib.is_file() and 'site-packages' in str(lib)\n"
        "assert str(lib) in open('/proc/self/maps').read()\n"
        "m = pyexec.load('add_mul.pte').load_method('forward')\n"
        "rng = np.random.default_rng(0)\n"
        "for _ in range(3):\n"
        "    x = rng.standard_normal((2, 3)).astype(np.float32)\n"
        "    y = rng.standard_normal((2, 3)).astype(np.float32)\n"
        "    s, p = m.execute([x, y])\n"
        "    assert isinstance(s, np.ndarray) and s.dtype == np.float32\n"
        "    np.testing.assert_array_equal(s, x + y)\n"
        "    np.testing.assert_array_equal(p, x * y)\n"
        "print('ok', pyexec.__version__)\n"
    )
    out = run(py, "-c", script, cwd=DATA, env=env)
    assert out.split()[0] == "ok"

    # The console script from the wheel: run with .npy inputs, outputs checked with numpy.
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2.5
    y = np.full((2, 3), 1.5, np.float32)
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", y)
    run(venv / "bin" / "pyexec", "run", DATA / "add_mul.pte", "--input", f"input0={tmp_path / 'x.npy'}",
        f"1={tmp_path / 'y.npy'}", "--output-dir", tmp_path / "out", env=env)
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "output0.npy"), x + y)
    np.testing.assert_array_equal(np.load(tmp_path / "out" / "output1.npy"), x * y)
    assert "aten::add.out" in run(venv / "bin" / "pyexec", "inspect", DATA / "add_mul.pte", env=env)
