"""The README's operator list is the registry's (regenerate it with
scripts/gen_operators.py)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pyexec

ROOT = Path(__file__).resolve().parent.parent


def test_readme_lists_exactly_the_registered_operators() -> None:
    spec = importlib.util.spec_from_file_location("gen_operators", ROOT / "scripts" / "gen_operators.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    expected = gen.operator_block(pyexec.kernels())
    assert expected in (ROOT / "README.md").read_text(), "README operator list is stale: run scripts/gen_operators.py"
