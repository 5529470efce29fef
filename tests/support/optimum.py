"""The optimum-executorch environment the tests use: its own venv
(scripts/setup_optimum_venv.sh builds .venv-optimum; optimum-executorch pins
a transformers the main venv does not have)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from support import ROOT


def optimum_python() -> str:
    """The python of the optimum-executorch venv: $PYEXEC_OPTIMUM_PYTHON, else
    .venv-optimum's. The test fails when it is missing (the test command
    builds it); PYEXEC_OPTIMUM_PYTHON set to an empty string skips the test."""
    value = os.environ.get("PYEXEC_OPTIMUM_PYTHON")
    if value == "":
        pytest.skip("PYEXEC_OPTIMUM_PYTHON is set to an empty string")
    path = Path(value) if value else ROOT / ".venv-optimum" / "bin" / "python"
    if not path.exists():
        pytest.fail(f"no optimum-executorch venv python at {path}: build it with scripts/setup_optimum_venv.sh "
                    f"(or set PYEXEC_OPTIMUM_PYTHON to its python, or to an empty string to skip these tests)")
    return str(path)
