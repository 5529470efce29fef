"""`collections.abc.Callable[...]` made once per argument tuple instead of
once per subscription.

torch's `OperatorBase.py_impl` defines an inner function annotated
`Callable[_P, _T]` on every call, and torch/_ops.py evaluates annotations at
definition time, so each call builds two `collections.abc` callable aliases.
Every `run_decompositions` calls py_impl about 12,000 times (it overrides
each CompositeImplicitAutograd operator's kernels for the decomposition and
puts them back), three times per XNNPACK lowering; building those aliases is
about a tenth of a small model's export. `typing.Callable` caches its
subscriptions; `collections.abc.Callable` does not.

install() puts a cache in front of `collections.abc.Callable.__class_getitem__`
for hashable arguments (the alias is immutable and compares equal to a fresh
one; unhashable arguments, such as a list of parameter types, build a fresh
alias as before). Speed only: tests/integration/test_alias_memo.py checks
that the aliases equal fresh ones and that an export through the cache is
the export without it."""

from __future__ import annotations

import _collections_abc
import functools
from typing import Any

_original: Any = None


def _make(cls: type, args: Any) -> Any:
    return _original(cls, args)


_cached = functools.lru_cache(maxsize=4096)(_make)


def _class_getitem(cls: type, args: Any) -> Any:
    try:
        return _cached(cls, args)
    except TypeError:  # unhashable arguments: a fresh alias, as without the cache
        return _original(cls, args)


def install() -> None:
    """Caches the subscriptions for this process (idempotent)."""
    global _original
    if _original is not None:
        return
    _original = _collections_abc.Callable.__dict__["__class_getitem__"].__func__
    _collections_abc.Callable.__class_getitem__ = classmethod(_class_getitem)  # type: ignore[assignment]


def uninstall() -> None:
    """Puts the uncached subscription back."""
    global _original
    if _original is None:
        return
    _collections_abc.Callable.__class_getitem__ = classmethod(_original)  # type: ignore[assignment]
    _cached.cache_clear()
    _original = None
