"""torch.export's list of the operators it may keep whole, computed once per
state of the dispatcher instead of once per decomposition.

Every `run_decompositions` (three per XNNPACK lowering) walks every operator
namespace for the CompositeImplicitAutograd operators it could preserve
(torch._export.utils._collect_all_valid_cia_ops). torch does not cache the
walk because a custom-op registration can add to the answer. The walk is
about a quarter of a small model's export time, and the tests export
hundreds of small models.

install() puts a memo in front of it, keyed by what the answer is computed
from: the dispatcher's CompositeImplicitAutograd registrations (a new custom
op adds one) and each namespace's list of operators. Any registration
changes the key and the walk runs again, so every export sees the answer
torch itself would compute (tests/unit/test_cia_memo.py checks that it
does, across a registration)."""

from __future__ import annotations

from collections.abc import Callable, Hashable
from typing import Any

_original: Callable[[], set[Any]] | None = None
_memo: tuple[Hashable, frozenset[Any]] | None = None


def _key() -> Hashable:
    import torch

    registrations = torch._C._dispatch_get_registrations_for_dispatch_key("CompositeImplicitAutograd")
    namespaces = tuple((name, len(getattr(getattr(torch.ops, name), "_dir", ()))) for name in torch.ops._dir)
    return tuple(registrations), namespaces


def _collect() -> set[Any]:
    global _memo
    assert _original is not None
    key = _key()
    if _memo is None or _memo[0] != key:
        ops = frozenset(_original())
        _memo = (_key(), ops)  # the walk itself materializes operators: key the state after it
    return set(_memo[1])


def install() -> None:
    """Memoizes the walk for this process (idempotent)."""
    global _original
    import torch._export.utils as utils
    import torch.export.decomp_utils as decomp_utils
    import torch.export.exported_program as exported_program

    if _original is not None:
        return
    _original = utils._collect_all_valid_cia_ops
    for module in (utils, decomp_utils, exported_program):
        if getattr(module, "_collect_all_valid_cia_ops", None) is _original:
            module._collect_all_valid_cia_ops = _collect  # type: ignore[attr-defined]


def uninstall() -> None:
    """Puts torch's own walk back."""
    global _original, _memo
    import torch._export.utils as utils
    import torch.export.decomp_utils as decomp_utils
    import torch.export.exported_program as exported_program

    if _original is None:
        return
    for module in (utils, decomp_utils, exported_program):
        if getattr(module, "_collect_all_valid_cia_ops", None) is _collect:
            module._collect_all_valid_cia_ops = _original  # type: ignore[attr-defined]
    _original, _memo = None, None
