"""Helpers shared by the tests (and the benchmarks and fixture scripts):
`export` makes real ExecuTorch programs and compares results with torch eager
and ExecuTorch's runtime; `models` and `zoo` hold the test models. Importable
as `support` because pytest puts tests/ on the path (pyproject's
`pythonpath`)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
"""The repository's root."""
