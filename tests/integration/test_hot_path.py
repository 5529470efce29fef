"""The one-call execute path (pyexec_method_run) and the objects it reuses:
views of the previous call are returned again only while the library reports
every output description unchanged, and inputs read in place are re-checked
on each execute() (the caller can swap a torch tensor's storage)."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from support.export import export_program
from support.models import CacheUpdate, CatCumsum, cat_cumsum_dynamic, export_spec

import pyexec
from pyexec import InvalidArgumentError


@pytest.fixture(scope="module")
def dynamic_pte() -> bytes:
    return export_spec(cat_cumsum_dynamic())


@pytest.fixture(scope="module")
def dynamic_unplanned_pte() -> bytes:
    return export_spec(cat_cumsum_dynamic(), alloc_graph_input=False, alloc_graph_output=False)


@pytest.fixture(scope="module")
def cache_pte() -> bytes:
    cache = torch.zeros(8, 4)
    return export_program(
        CacheUpdate(), (cache, torch.tensor([0]), torch.zeros(1, 4)),
        alloc_graph_input=False, alloc_graph_output=False, reinplace=True,
    )


@pytest.mark.parametrize("which", ["planned", "unplanned"])
def test_dynamic_output_views_follow_the_written_shape(which: str, dynamic_pte: bytes,
                                                       dynamic_unplanned_pte: bytes) -> None:
    m = pyexec.load(dynamic_pte if which == "planned" else dynamic_unplanned_pte).load_method()
    for n in (3, 3, 5, 5, 1, 8, 3):
        x = torch.randn(n, 3)
        out = m.execute([x], clone_outputs=False)[0]
        assert out.shape == (2 * n, 3)
        torch.testing.assert_close(out, CatCumsum()(x))


def test_uncloned_outputs_of_a_steady_method_are_the_same_views() -> None:
    class AddMul(torch.nn.Module):
        def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
            return x + y, x * y

    x, y = torch.randn(4), torch.randn(4)
    m = pyexec.load(export_program(AddMul(), (x, y))).load_method()
    first = m.execute([x, y], clone_outputs=False)
    first.append("caller's own list")  # the caller may change the list it got
    for _ in range(3):
        x.add_(1)
        outs = m.execute([x, y], clone_outputs=False)
        assert len(outs) == 2
        torch.testing.assert_close(outs[0], x + y)
        torch.testing.assert_close(outs[1], x * y)
        assert outs[0] is first[0]  # one view of planned memory, reused
    cloned = m.execute([x, y])
    assert cloned[0] is not outs[0] and cloned[0].data_ptr() != outs[0].data_ptr()
    torch.testing.assert_close(cloned[0], x + y)


def test_output_type_follows_the_inputs_of_each_call(dynamic_pte: bytes) -> None:
    m = pyexec.load(dynamic_pte).load_method()
    x = torch.randn(4, 3)
    assert isinstance(m.execute([x], clone_outputs=False)[0], torch.Tensor)
    out = m.execute([x.numpy()], clone_outputs=False)[0]
    assert isinstance(out, np.ndarray)
    np.testing.assert_allclose(out, CatCumsum()(x).numpy(), rtol=1e-5)
    assert isinstance(m.execute([x], clone_outputs=False)[0], torch.Tensor)


def test_binding_after_steady_calls_takes_effect(dynamic_unplanned_pte: bytes) -> None:
    m = pyexec.load(dynamic_unplanned_pte).load_method()
    x = torch.randn(4, 3)
    for _ in range(2):
        own = m.execute([x], clone_outputs=False)[0]
    buf = torch.full((16, 3), -1.0)
    m.set_output(buf, 0)
    out = m.execute(clone_outputs=False)[0]
    assert out.data_ptr() == buf.data_ptr() and out.shape == (8, 3)
    torch.testing.assert_close(out, CatCumsum()(x))
    m.set_output(None, 0)
    again = m.execute(clone_outputs=False)[0]
    assert again.data_ptr() == own.data_ptr()
    torch.testing.assert_close(again, CatCumsum()(x))


def test_binding_another_object_over_the_same_memory_returns_that_object(dynamic_unplanned_pte: bytes) -> None:
    """The library sees the same description (the same pointer) before and
    after; the object returned is the one bound all the same."""
    m = pyexec.load(dynamic_unplanned_pte).load_method()
    x = torch.randn(8, 3)  # the output's upper bound: (16, 3)
    own = m.execute([x], clone_outputs=False)[0]
    assert m.execute([x], clone_outputs=False)[0] is own
    alias = own.view(16, 3)
    m.set_output(alias, 0)
    out = m.execute([x], clone_outputs=False)[0]
    assert out is alias
    torch.testing.assert_close(out, CatCumsum()(x))


def test_get_outputs_between_calls(dynamic_pte: bytes) -> None:
    m = pyexec.load(dynamic_pte).load_method()
    a, b = torch.randn(2, 3), torch.randn(6, 3)
    m.execute([a], clone_outputs=False)
    m.execute([b], clone_outputs=False)
    assert m.get_outputs(clone_outputs=False)[0].shape == (12, 3)
    out = m.execute([a], clone_outputs=False)[0]
    assert out.shape == (4, 3)
    torch.testing.assert_close(out, CatCumsum()(a))


def test_in_place_input_whose_storage_was_swapped_is_refused(cache_pte: bytes) -> None:
    m = pyexec.load(cache_pte).load_method()
    cache = torch.zeros(8, 4)
    val = torch.ones(1, 4)
    m.set_inputs([cache, torch.tensor([2]), val])
    m.execute()
    assert torch.equal(cache[2], val[0])
    cache.resize_(64, 4)  # new, larger storage: the method's pointer would dangle
    with pytest.raises(InvalidArgumentError, match="input 0 moved to new memory"):
        m.execute()
    # Passing it again is checked like any input (its shape is wrong now).
    with pytest.raises(InvalidArgumentError, match="input 0"):
        m.execute([cache, torch.tensor([2]), val])
    fresh = torch.zeros(8, 4)
    m.execute([fresh, torch.tensor([7]), val])
    assert torch.equal(fresh[7], val[0]) and fresh[2].abs().sum() == 0


def test_alias_output_follows_the_cache_passed(cache_pte: bytes) -> None:
    m = pyexec.load(cache_pte).load_method()
    alias = [i for i in range(len(m.meta.outputs)) if m.output_aliases_input(i) == 0]
    if not alias:
        pytest.fail("the exported cache update has no output aliasing the cache")
    k = alias[0]
    a, b = torch.zeros(8, 4), torch.zeros(8, 4)
    val = torch.ones(1, 4)
    first = m.execute([a, torch.tensor([1]), val], clone_outputs=False)[k]
    again = m.execute([a, torch.tensor([3]), val], clone_outputs=False)[k]
    assert first.data_ptr() == again.data_ptr() == a.data_ptr() and again is not a
    other = m.execute([b, torch.tensor([4]), val], clone_outputs=False)[k]
    assert other.data_ptr() == b.data_ptr() and torch.equal(other[4], val[0])
    copy = m.execute([b, torch.tensor([5]), val])[k]
    assert copy.data_ptr() != b.data_ptr() and torch.equal(copy, b)


class BufferStep(torch.nn.Module):
    """index_copy into a mutable buffer: the planner gives the bytes of the
    planned `pos` input to a value computed after pos's last use."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("cache", torch.zeros(8, 4))

    def forward(self, pos: torch.Tensor, val: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.cache.index_copy_(0, pos, val)
        return val + 1, self.cache.sum(0)


def test_installed_planned_inputs_survive_runs_that_reuse_their_memory() -> None:
    pos, val = torch.tensor([3]), torch.full((1, 4), 2.0)
    m = pyexec.load(export_program(BufferStep(), (torch.tensor([0]), torch.zeros(1, 4)))).load_method()
    m.set_inputs([pos, val])
    pos.fill_(6)  # planned inputs were copied: this must not matter
    for _ in range(3):  # later runs read the installed inputs again
        plus_one, total = m.execute()
        torch.testing.assert_close(plus_one, val + 1)
        torch.testing.assert_close(total, val[0])  # row 3 written again, never another row
    m.execute([torch.tensor([5]), val])
    torch.testing.assert_close(m.execute()[1], 2 * val[0])
