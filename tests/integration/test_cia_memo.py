"""support/cia_memo.py, which every test export goes through: the memoized
walk gives exactly the operators torch's own walk gives, before and after a
registration that adds one, and an export through it makes the same program
as an export through torch's own walk."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
import torch._export.utils as export_utils
import torch.export.exported_program as exported_program
from support import cia_memo
from support.export import export_program


@pytest.fixture
def memo() -> Iterator[None]:
    cia_memo.install()  # (support.export installs it on import: this is a no-op then)
    yield


def fresh() -> set[object]:
    assert cia_memo._original is not None
    return cia_memo._original()


def test_the_memo_is_what_torch_export_calls(memo: None) -> None:
    assert exported_program._collect_all_valid_cia_ops is cia_memo._collect
    assert export_utils._collect_all_valid_cia_ops is cia_memo._collect


def test_same_operators_as_torch_across_a_registration(memo: None) -> None:
    before = export_utils._collect_all_valid_cia_ops()
    assert before == fresh() and before
    lib = torch.library.Library("pyexec_cia_memo", "DEF")
    try:
        lib.define("twice(Tensor x) -> Tensor")
        lib.impl("twice", lambda x: x * 2, "CompositeImplicitAutograd")
        after = export_utils._collect_all_valid_cia_ops()
        assert after == fresh()
        assert {op.name() for op in after - before} == {"pyexec_cia_memo::twice"}
    finally:
        lib._destroy()


class _Gelu(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.gelu(torch.nn.functional.layer_norm(x, (8,)), approximate="tanh") * 2


def test_an_export_through_the_memo_is_the_export_without_it(
    memo: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYEXEC_TEST_EXPORT_CACHE", "off")
    x = torch.randn(2, 8)
    with_memo = export_program(_Gelu(), (x,))
    cia_memo.uninstall()
    try:
        assert exported_program._collect_all_valid_cia_ops is not cia_memo._collect
        without = export_program(_Gelu(), (x,))
    finally:
        cia_memo.install()
    assert with_memo == without
