"""The examples: the C ABI from outside Python (`make install` with its
pkg-config file, a Rust program declaring the ABI by hand in examples/rust, a
C program that dlopens the library in examples/c), and exporting programs for
pyexec with ExecuTorch's exporter (examples/python)."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from support import ROOT

import pyexec

pytestmark = pytest.mark.slow  # builds and runs the example programs (C, Rust, Python)

NATIVE = ROOT / "native"
DATA = NATIVE / "tests" / "data"
MODELS = ["add_mul.pte", "add_mul_unplanned.pte"]  # output 0: memory-planned (copied) / bindable (in place)


def run(*cmd: str | os.PathLike[str], env: dict[str, str] | None = None, cwd: Path | None = None) -> str:
    proc = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, env=env, cwd=cwd)
    assert proc.returncode == 0, f"{' '.join(map(str, cmd))} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def need(tool: str) -> None:
    if shutil.which(tool) is None:
        pytest.skip(f"{tool} is not installed")


@pytest.fixture(scope="module")
def prefix(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`make -C native install PREFIX=...` into a temporary prefix."""
    need("make")
    need("cc")
    prefix = tmp_path_factory.mktemp("prefix")
    run("make", "-C", NATIVE, "-j2", "install", f"PREFIX={prefix}")
    return prefix


def pkg_env(prefix: Path) -> dict[str, str]:
    return {**os.environ, "PKG_CONFIG_PATH": str(prefix / "lib" / "pkgconfig")}


def test_install_puts_library_header_and_pkg_config_file_under_the_prefix(prefix: Path) -> None:
    assert (prefix / "lib" / "libpyexec.so").is_file()
    assert (prefix / "include" / "pyexec.h").read_bytes() == (NATIVE / "include" / "pyexec.h").read_bytes()
    pc = (prefix / "lib" / "pkgconfig" / "pyexec.pc").read_text()
    version = re.search(r'#define PYEXEC_VERSION_STRING "(.+?)"', (NATIVE / "include" / "pyexec.h").read_text())
    assert version is not None
    assert f"Version: {version.group(1)}" in pc and f"prefix={prefix}" in pc and "@" not in pc


def test_c_program_builds_with_pkg_config_against_the_installed_library(prefix: Path, tmp_path: Path) -> None:
    need("pkg-config")
    env = pkg_env(prefix)
    assert run("pkg-config", "--modversion", "pyexec", env=env).strip()
    flags = run("pkg-config", "--cflags", "--libs", "pyexec", env=env).split()
    assert f"-I{prefix / 'include'}" in flags and f"-L{prefix / 'lib'}" in flags and "-lpyexec" in flags
    binary = tmp_path / "test_runtime"
    run("cc", "-std=c11", "-Wall", "-Wextra", "-Werror", NATIVE / "tests" / "test_runtime.c", *flags,
        f"-Wl,-rpath,{prefix / 'lib'}", "-o", binary)
    out = run(binary, DATA)
    assert re.search(r"^\d+ passed, 0 failed$", out, re.M), out


@pytest.fixture(scope="module")
def dlopen_example(tmp_path_factory: pytest.TempPathFactory) -> Path:
    need("cc")
    binary = tmp_path_factory.mktemp("c") / "dlopen_example"
    run("cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I", NATIVE / "include",
        ROOT / "examples" / "c" / "dlopen_example.c", "-ldl", "-o", binary)
    return binary


@pytest.mark.parametrize("model", MODELS)
def test_c_dlopen_example_runs_the_model(dlopen_example: Path, prefix: Path, model: str) -> None:
    # The library is never linked: only dlopen'ed from the path given.
    needed = run("readelf", "-d", dlopen_example) if shutil.which("readelf") else ""
    assert "libpyexec" not in needed
    out = run(dlopen_example, prefix / "lib" / "libpyexec.so", DATA / model)
    assert "ok: 6 elements match" in out
    bound = model == "add_mul_unplanned.pte"
    assert ("written in place" in out) == bound and ("copied" in out) == (not bound)


def test_c_dlopen_example_refuses_a_library_of_another_release(prefix: Path, tmp_path: Path) -> None:
    """Built against a header one minor release ahead, the example finds out
    from pyexec_version_number() that the library's types may differ."""
    need("cc")
    text = (NATIVE / "include" / "pyexec.h").read_text()
    minor = re.search(r"#define PYEXEC_VERSION_MINOR (\d+)", text)
    string = re.search(r'#define PYEXEC_VERSION_STRING "(.+?)"', text)
    assert minor is not None and string is not None
    other = string.group(1).split(".")
    other[1] = str(int(minor.group(1)) + 1)
    text = text.replace(minor.group(0), f"#define PYEXEC_VERSION_MINOR {other[1]}")
    text = text.replace(string.group(0), f'#define PYEXEC_VERSION_STRING "{".".join(other)}"')
    (tmp_path / "pyexec.h").write_text(text)
    binary = tmp_path / "dlopen_example"
    run("cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I", tmp_path,
        ROOT / "examples" / "c" / "dlopen_example.c", "-ldl", "-o", binary)
    proc = subprocess.run([binary, prefix / "lib" / "libpyexec.so", DATA / "add_mul.pte"], capture_output=True,
                          text=True)
    assert proc.returncode == 1
    assert f"is libpyexec {pyexec.__version__}; this program was built with the header of {'.'.join(other)}" \
        in proc.stderr


@pytest.fixture(scope="module")
def rust_example(prefix: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/rust built with cargo (no crates: works offline), linked against
    the installed library found through pkg-config."""
    if shutil.which("cargo") is None:
        pytest.skip("cargo is not installed (the Rust example needs a Rust toolchain)")
    target = tmp_path_factory.mktemp("cargo-target")
    env = {**pkg_env(prefix), "CARGO_TARGET_DIR": str(target)}
    env.pop("PYEXEC_LIB_DIR", None)
    run("cargo", "build", "--offline", "--quiet", "--manifest-path", ROOT / "examples" / "rust" / "Cargo.toml",
        env=env)
    binary = target / "debug" / "pyexec-example"
    assert binary.is_file()
    return binary


@pytest.mark.parametrize("model", MODELS)
def test_rust_example_runs_the_model(rust_example: Path, prefix: Path, model: str) -> None:
    libs = run("ldd", rust_example) if shutil.which("ldd") else str(prefix / "lib" / "libpyexec.so")
    assert str(prefix / "lib" / "libpyexec.so") in libs  # the installed copy, found through pkg-config
    out = run(rust_example, DATA / model)
    assert "ok: 6 elements match" in out
    bound = model == "add_mul_unplanned.pte"
    assert ("written in place into a Vec<f32>" in out) == bound


def test_rust_example_reports_a_missing_file(rust_example: Path, tmp_path: Path) -> None:
    proc = subprocess.run([rust_example, tmp_path / "nope.pte"], capture_output=True, text=True)
    assert proc.returncode == 1 and "nope.pte" in proc.stderr


def test_rust_struct_layouts_match_the_c_header(rust_example: Path, tmp_path: Path) -> None:
    """The hand-written #[repr(C)] structs have the sizes and offsets the C
    compiler gives the header's."""
    source = tmp_path / "layout.c"
    source.write_text(
        "#include <stddef.h>\n#include <stdio.h>\n#include <pyexec.h>\n"
        "int main(void) {\n"
        '  printf("sizeof(pyexec_value) %zu\\n", sizeof(pyexec_value));\n'
        '  printf("offsetof(pyexec_value, tensor) %zu\\n", offsetof(pyexec_value, tensor));\n'
        '  printf("offsetof(pyexec_tensor, nbytes) %zu\\n", offsetof(pyexec_tensor, nbytes));\n'
        '  printf("sizeof(pyexec_value_info) %zu\\n", sizeof(pyexec_value_info));\n'
        '  printf("offsetof(pyexec_value_info, sizes) %zu\\n", offsetof(pyexec_value_info, sizes));\n'
        '  printf("offsetof(pyexec_value_info, dim_order) %zu\\n", offsetof(pyexec_value_info, dim_order));\n'
        '  printf("offsetof(pyexec_value_info, nbytes) %zu\\n", offsetof(pyexec_value_info, nbytes));\n'
        "  return 0;\n}\n"
    )
    binary = tmp_path / "layout"
    run("cc", "-std=c11", "-I", NATIVE / "include", source, "-o", binary)
    assert run(rust_example, "--layout") == run(binary)


# ---- Python: exporting programs for pyexec ---------------------------------------------------


def python_env() -> dict[str, str]:
    """The environment under which a child Python imports the pyexec this test
    process imported (the source tree or the installed package)."""
    package_root = str(Path(pyexec.__file__).resolve().parent.parent)
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": package_root + (os.pathsep + path if path else "")}


def test_python_export_example_exports_runs_and_checks_each_program(tmp_path: Path) -> None:
    pytest.importorskip("executorch")
    out = run(sys.executable, ROOT / "examples" / "python" / "export_models.py", tmp_path, env=python_env())
    lines = {Path(line.split(":")[0]).name: line for line in out.splitlines()}
    assert set(lines) == {"kv_cache.pte", "dynamic.pte", "add_mul.pte"}, out
    assert "16 steps match torch eager; the cache was updated in place" in lines["kv_cache.pte"]
    assert "batch sizes 1, 5, 64 match torch eager (output shapes (1, 4), (5, 4), (64, 4))" in lines["dynamic.pte"]
    assert "output 0 was written into the bound tensor" in lines["add_mul.pte"]

    # The files are what the README's snippets take them for.
    cache = pyexec.load(tmp_path / "kv_cache.pte").load_method("forward")
    info = cache.meta.inputs[2]
    assert info is not None and info.is_mutated and not info.is_memory_planned and info.sizes == (16, 8)
    assert cache.output_aliases_input(0) == 2 and cache.output_aliases_input(1) is None
    dynamic = pyexec.load(tmp_path / "dynamic.pte").load_method("forward")
    assert [(i.sizes, i.is_dynamic) for i in dynamic.meta.inputs if i is not None] == [((64, 16), True)]
    add_mul = pyexec.load(tmp_path / "add_mul.pte").load_method("forward")
    assert [o is not None and not o.is_memory_planned for o in add_mul.meta.outputs] == [True, True]
