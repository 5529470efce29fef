"""The core release's reference models, exported by executorch 1.5.1, run by
pyexec and compared with torch eager and with ExecuTorch's own runtime on the
same file; with default memory planning and with graph inputs and outputs
left unplanned."""

from __future__ import annotations

import functools

import numpy as np
import pytest
import torch
from support.export import assert_close, run_with_executorch
from support.models import MODELS, ModelSpec, clone_inputs, export_spec

import pyexec

VARIANTS = {"planned": (True, True), "unplanned": (False, False)}


@functools.cache
def exported(name: str, variant: str) -> tuple[ModelSpec, bytes]:
    spec = MODELS[name]()
    a_in, a_out = VARIANTS[variant]
    return spec, export_spec(spec, alloc_graph_input=a_in, alloc_graph_output=a_out)


def eager(spec: ModelSpec) -> tuple[list[torch.Tensor], tuple]:
    """torch eager outputs, and the inputs after eager mutated them."""
    args = clone_inputs(spec.inputs)
    with torch.no_grad():
        out = spec.module(*args)
    return list(out) if isinstance(out, tuple) else [out], args


def mutated_inputs(spec: ModelSpec, after: tuple) -> list[int]:
    return [
        j for j, (a, b) in enumerate(zip(spec.inputs, after))
        if isinstance(a, torch.Tensor) and not torch.equal(a, b)
    ]


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("name", sorted(MODELS))
def test_model_matches_torch_eager(name: str, variant: str) -> None:
    spec, pte = exported(name, variant)
    expected, eager_after = eager(spec)
    changed = mutated_inputs(spec, eager_after)
    method = pyexec.load(pte).load_method("forward")
    ours_in = list(clone_inputs(spec.inputs))
    got = method.execute(ours_in)
    # The program returns the inputs it mutates first, then the user outputs.
    assert len(got) == len(changed) + len(expected)
    for k, e in enumerate(expected):
        assert_close(got[len(changed) + k], e, what=f"{name} output {k}")
    for k, j in enumerate(changed):
        assert_close(got[k], eager_after[j], what=f"{name} new value of input {j}")
        # Unplanned inputs are updated in place; planned ones are copies, never written back.
        if variant == "unplanned":
            assert_close(ours_in[j], eager_after[j], what=f"{name} input {j} updated in place")
        else:
            assert torch.equal(ours_in[j], spec.inputs[j]), f"planned input {j} was written"


# ExecuTorch 1.5.1's Python runtime gives wrong results when an unplanned
# output is also an input (it points the shared tensor at zeroed output
# storage before executing; see shared/reference/pte-format-and-runtime.md §5).
ET_ALIAS_BUG = {"x_and_x_plus_1", "cache_update", "decode_step"}


@pytest.mark.parametrize(
    "name,variant",
    [(n, v) for n in sorted(MODELS) for v in VARIANTS if not (v == "unplanned" and n in ET_ALIAS_BUG)],
)
def test_model_matches_executorch_runtime(name: str, variant: str) -> None:
    spec, pte = exported(name, variant)
    reference = run_with_executorch(pte, clone_inputs(spec.inputs))
    got = pyexec.load(pte).load_method("forward").execute(list(clone_inputs(spec.inputs)))
    assert len(got) == len(reference)
    for k, (g, r) in enumerate(zip(got, reference)):
        assert_close(g, r, what=f"{name} output {k} vs ExecuTorch")


@pytest.mark.parametrize("n", [1, 3, 8])
def test_dynamic_first_dimension_at_several_sizes(n: int) -> None:
    spec, pte = exported("cat_cumsum_dynamic", "planned")
    method = pyexec.load(pte).load_method("forward")
    x = torch.randn(n, 3)
    (got,) = method.execute([x])
    assert got.shape == (2 * n, 3)
    assert_close(got, spec.module(x))


def test_dynamic_input_above_its_bound_is_refused() -> None:
    _, pte = exported("cat_cumsum_dynamic", "planned")
    method = pyexec.load(pte).load_method("forward")
    with pytest.raises(pyexec.InvalidArgumentError, match=r"input 0 .*\[8, 3\].*\[9, 3\]"):
        method.execute([torch.randn(9, 3)])


def test_numpy_inputs_give_numpy_outputs() -> None:
    spec, pte = exported("mlp", "planned")
    x = spec.inputs[0].numpy()
    (got,) = pyexec.load(pte).load_method("forward").execute([x])
    assert isinstance(got, np.ndarray)
    assert_close(got, spec.module(torch.from_numpy(x)))


def test_decode_loop_with_caller_owned_cache_matches_eager() -> None:
    spec, pte = exported("decode_step", "unplanned")
    method = pyexec.load(pte).load_method("forward")
    tokens, _, k0, v0 = spec.inputs
    k_ours, v_ours = k0.clone(), v0.clone()
    k_ref, v_ref = k0.clone(), v0.clone()
    for step in range(6):
        tok = torch.tensor([[(7 * step + 3) % 50]])
        pos = torch.tensor([step])
        *_, logits = method.execute([tok, pos, k_ours, v_ours], clone_outputs=False)
        with torch.no_grad():
            expected = spec.module(tok, pos, k_ref, v_ref)
        assert_close(logits, expected, what=f"step {step}")
    assert_close(k_ours, k_ref)
    assert_close(v_ours, v_ref)
