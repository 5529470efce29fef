"""The aarch64 wheel, cross-built by scripts/build_wheel.sh --cross aarch64-linux-gnu-: one
py3-none-manylinux_2_17_aarch64 wheel whose library is AArch64 code, under
1 MiB, linked against libc/libm only, exporting only pyexec_ symbols and
needing no glibc newer than 2.17. Skipped without the cross toolchain
(scripts/test.sh installs it). Nothing here runs the wheel: Python for
aarch64 under qemu would need a multiarch arm64 userland (see README, ARM64);
the C tests and the model fixtures run under qemu in scripts/test.sh."""

from __future__ import annotations

import re
import shutil
import subprocess
import zipfile
from pathlib import Path

import pytest
from support.wheel import built_wheel

pytestmark = pytest.mark.slow  # cross-builds the library and a wheel

READELF = "aarch64-linux-gnu-readelf"


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    for tool in ("aarch64-linux-gnu-gcc", READELF):
        if shutil.which(tool) is None:
            pytest.skip(f"{tool} is not installed (scripts/test.sh installs the cross toolchain)")
    return built_wheel("aarch64", tmp_path_factory.mktemp("wheel_aarch64"), cross="aarch64-linux-gnu-")[0]


@pytest.fixture(scope="module")
def library(wheel: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    dest = tmp_path_factory.mktemp("lib_aarch64") / "libpyexec.so"
    with zipfile.ZipFile(wheel) as z:
        dest.write_bytes(z.read("pyexec/_lib/libpyexec.so"))
    return dest


def readelf(*args: str | Path) -> str:
    return subprocess.run([READELF, *map(str, args)], capture_output=True, text=True, check=True).stdout


def test_one_py3_none_manylinux_2_17_aarch64_wheel(wheel: Path) -> None:
    tags = wheel.name.removesuffix(".whl").split("-")[2:]
    assert tags[:2] == ["py3", "none"]
    assert "manylinux_2_17_aarch64" in tags[2].split("."), wheel.name


def test_library_is_small_aarch64_and_stripped(library: Path) -> None:
    assert library.stat().st_size < 1 << 20, library.stat().st_size
    assert re.search(r"Machine:\s+AArch64", readelf("-h", library))
    assert ".symtab" not in readelf("-S", "-W", library)


def test_library_links_libc_and_libm_only_and_exports_pyexec_only(library: Path) -> None:
    needed = set(re.findall(r"\(NEEDED\)\s+Shared library: \[(.+?)\]", readelf("-d", library)))
    assert needed <= {"libc.so.6", "libm.so.6", "libpthread.so.0"}, needed
    exported = [
        line.split()[-1]
        for line in readelf("--dyn-syms", "-W", library).splitlines()
        if re.search(r"\b(FUNC|OBJECT)\s+GLOBAL\s+DEFAULT\s+\d+", line)
    ]
    assert exported and all(name.startswith("pyexec_") for name in exported), exported


def test_library_needs_no_glibc_newer_than_2_17(library: Path) -> None:
    versions = {(int(a), int(b)) for a, b in re.findall(r"GLIBC_(\d+)\.(\d+)", readelf("-V", "-W", library))}
    assert versions and max(versions) <= (2, 17), sorted(versions)
