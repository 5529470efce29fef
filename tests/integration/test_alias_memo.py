"""support/alias_memo.py, which every test export goes through: a cached
`collections.abc.Callable[...]` equals a fresh one, unhashable arguments
still work, uninstalling puts the uncached subscription back, and an export
through the cache makes the same program as an export without it."""

from __future__ import annotations

import collections.abc
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

import pytest
import torch
from support import alias_memo
from support.export import export_program
from typing_extensions import ParamSpec

P = ParamSpec("P")
T = TypeVar("T")


@pytest.fixture
def memo() -> Iterator[None]:
    alias_memo.install()  # (support.export installs it on import: this is a no-op then)
    yield


def fresh(args: Any) -> Any:
    assert alias_memo._original is not None
    return alias_memo._original(collections.abc.Callable, args)


@pytest.mark.parametrize(
    "args",
    [(P, T), (..., int), ((int, str), bool), ((), None), (P, Callable[P, T])],
    ids=["paramspec", "ellipsis", "tuple", "empty", "nested"],
)
def test_a_cached_alias_equals_a_fresh_one(memo: None, args: tuple[Any, ...]) -> None:
    got = Callable[args]  # type: ignore[valid-type]
    assert got == fresh(args)
    assert type(got) is type(fresh(args))
    assert got.__args__ == fresh(args).__args__
    assert Callable[args] is got  # type: ignore[valid-type]  # the second subscription is the cached one


def test_unhashable_arguments_and_bad_ones_behave_as_without_the_cache(memo: None) -> None:
    assert Callable[[int, str], bool] == fresh(([int, str], bool))
    assert Callable[[int, str], bool].__args__ == (int, str, bool)
    with pytest.raises(TypeError):
        Callable[1]  # type: ignore[misc]
    with pytest.raises(TypeError):
        fresh(1)


class _Gelu(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(torch.nn.functional.layer_norm(x, (8,)), approximate="tanh") * 2


def test_an_export_through_the_cache_is_the_export_without_it(memo: None, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYEXEC_TEST_EXPORT_CACHE", "off")
    x = torch.randn(2, 8)
    with_memo = export_program(_Gelu(), (x,))
    alias_memo.uninstall()
    try:
        assert Callable[P, T] is not Callable[P, T]  # fresh aliases again
        without = export_program(_Gelu(), (x,))
    finally:
        alias_memo.install()
    assert with_memo == without
