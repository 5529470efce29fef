"""Export helpers shared by the tests: real ExecuTorch programs, compared with
torch eager and with ExecuTorch's own runtime."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

import numpy as np
import torch


def export_manager(
    module: torch.nn.Module,
    inputs: tuple[Any, ...],
    *,
    dynamic_shapes: Any = None,
    alloc_graph_input: bool = True,
    alloc_graph_output: bool = True,
    reinplace: bool = False,
    strict_ir: bool = True,
    passes: list[Any] | None = None,
) -> Any:
    """Exports `module` with executorch's exporter (on copies of `inputs`) and
    returns the ExecutorchProgramManager."""
    from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge
    from executorch.exir.passes import MemoryPlanningPass

    args = tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in inputs)
    # no_grad: to_executorch re-traces in-place updates of user inputs on fake
    # tensors, which autograd refuses when parameters require grad.
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        ep = torch.export.export(module, args, dynamic_shapes=dynamic_shapes, strict=False)
        edge = to_edge(ep, compile_config=EdgeCompileConfig(_check_ir_validity=strict_ir))
        config = ExecutorchBackendConfig(
            memory_planning_pass=MemoryPlanningPass(
                alloc_graph_input=alloc_graph_input, alloc_graph_output=alloc_graph_output
            ),
            run_reinplace_pass=reinplace,
            passes=list(passes or []),
        )
        return edge.to_executorch(config)


def export_program(module: torch.nn.Module, inputs: tuple[Any, ...], **kwargs: Any) -> bytes:
    """Exports `module` (see export_manager) and returns the .pte bytes."""
    return bytes(export_manager(module, inputs, **kwargs).buffer)


def run_with_executorch(pte: bytes, inputs: Sequence[Any]) -> list[Any]:
    """Runs the program's forward with ExecuTorch's own runtime."""
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(pte)
    method = program.load_method("forward")
    return list(method.execute([x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]))


def as_numpy(x: Any) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        if x.dtype == torch.bfloat16:  # numpy has no bfloat16: compare exactly as float32
            x = x.float()
        return x.detach().cpu().numpy()
    return np.asarray(x)


def assert_close(actual: Any, expected: Any, *, rtol: float = 1e-4, atol: float = 1e-5, what: str = "") -> None:
    """Floating values within rtol/atol (nan == nan); integers and bools exactly."""
    a = as_numpy(actual)
    e = as_numpy(expected)
    assert a.shape == e.shape, f"{what}: shape {a.shape} != expected {e.shape}"
    assert a.dtype == e.dtype, f"{what}: dtype {a.dtype} != expected {e.dtype}"
    if np.issubdtype(e.dtype, np.floating) or e.dtype == np.float16:
        np.testing.assert_allclose(
            a.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True, err_msg=what
        )
    else:
        np.testing.assert_array_equal(a, e, err_msg=what)


def check_module(
    module: torch.nn.Module,
    inputs: tuple[Any, ...],
    *,
    rtol: float = 1e-4,
    atol: float = 1e-5,
    dynamic_shapes: Any = None,
    run_inputs: Sequence[tuple[Any, ...]] | None = None,
    **export_kwargs: Any,
) -> bytes:
    """Exports `module`, runs it with pyexec on `inputs` (and on every tuple in
    `run_inputs`), and compares each output with torch eager on fresh copies
    of the same inputs. Returns the program bytes."""
    import pyexec

    pte = export_program(module, inputs, dynamic_shapes=dynamic_shapes, **export_kwargs)
    method = pyexec.load(pte).load_method("forward")
    for args in run_inputs or [inputs]:
        eager_args = tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in args)
        ours_args = [x.clone() if isinstance(x, torch.Tensor) else x for x in args]
        with torch.no_grad():
            expected = module(*eager_args)
        if not isinstance(expected, (tuple, list)):
            expected = (expected,)
        got = method.execute(ours_args)
        assert len(got) == len(expected), f"{len(got)} outputs, torch gives {len(expected)}"
        for k, (g, e) in enumerate(zip(got, expected)):
            assert_close(g, e, rtol=rtol, atol=atol, what=f"output {k}")
    return pte
