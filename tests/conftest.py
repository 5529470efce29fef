"""tests/: unit/ (no torch needed: the library, CLI, hostile files, threads),
ops/ (each kernel family against torch eager), integration/ (binding and
lifetime rules, models, examples, README, wheel). Shared helpers are the
`support` package (on the path through pyproject's `pythonpath`)."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The files marked slow first, in their order, then the rest in theirs:
    with one file per worker at a time (scripts/test.sh: --dist loadfile)
    the longest files start at once instead of running alone at the end."""
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)
