"""Builds libpyexec with the native Makefile and bundles it (with its header)
inside the package. The Python side is pure Python over cffi's ABI mode and
the library does not link Python, so one py3-none-<platform> wheel serves
every CPython 3.

The bundled library is `make dist`'s build (native/build/dist/): the same
code as the development build, stripped, without unused sections, and bound
to glibc 2.17 symbol versions, so `auditwheel repair` tags the wheel
manylinux_2_17 (see native/compat/glibc_2_17.h).

PYEXEC_CROSS=aarch64-linux-gnu- cross-builds the library (`make CROSS=...
dist`, native/build/aarch64/dist/) and tags the wheel linux_aarch64;
scripts/build_wheel_aarch64.sh builds that wheel and repairs it."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from setuptools import Distribution, setup
from setuptools.command.bdist_wheel import bdist_wheel
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
# A cross toolchain's prefix ("aarch64-linux-gnu-"), or "" for a native build.
CROSS = os.environ.get("PYEXEC_CROSS", "")
CROSS_ARCH = CROSS.split("-")[0]
DIST_DIR = ROOT / "native" / "build" / (f"{CROSS_ARCH}/dist" if CROSS else "dist")


class BuildPyWithLibrary(build_py):
    def run(self) -> None:
        make = ["make", "-C", str(ROOT / "native"), "-j2", "dist"]
        subprocess.run(make + ([f"CROSS={CROSS}"] if CROSS else []), check=True)
        super().run()
        dest = Path(self.build_lib) / "pyexec" / "_lib"
        dest.mkdir(parents=True, exist_ok=True)
        shutil.copy2(DIST_DIR / "libpyexec.so", dest / "libpyexec.so")
        shutil.copy2(ROOT / "native" / "include" / "pyexec.h", dest / "pyexec.h")


class BinaryDistribution(Distribution):
    """Has a native library: installed as platlib (the wheel's root, where
    auditwheel looks for it), not under .data/purelib."""

    def has_ext_modules(self) -> bool:
        return True


class PlatformWheel(bdist_wheel):
    def finalize_options(self) -> None:
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self) -> tuple[str, str, str]:
        _, _, plat = super().get_tag()
        return "py3", "none", f"linux_{CROSS_ARCH}" if CROSS else plat


setup(distclass=BinaryDistribution, cmdclass={"build_py": BuildPyWithLibrary, "bdist_wheel": PlatformWheel})
