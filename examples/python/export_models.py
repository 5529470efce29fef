"""Exports three programs with ExecuTorch's own exporter and runs each with
pyexec, checking every result against torch eager.

- kv_cache.pte: one decode step over a KV cache the caller owns. The cache is
  an unplanned input (MemoryPlanningPass(alloc_graph_input=False)) that the
  program updates in place (run_reinplace_pass=True), so each step writes one
  row straight into the caller's tensor: no copy in, no copy out.
- dynamic.pte: an MLP whose batch dimension is dynamic (torch.export.Dim),
  run at several batch sizes up to the exported bound.
- add_mul.pte: forward(x, y) = (x + y, x * y) with unplanned outputs
  (alloc_graph_output=False), so an output can be bound to a caller's tensor.

The README's Python snippets run on these files. Needs torch and executorch
(`pip install -r requirements-test.txt`) besides pyexec:

    python examples/python/export_models.py [OUT_DIR]     # OUT_DIR: default "."
"""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import torch
from executorch.exir import ExecutorchBackendConfig, to_edge
from executorch.exir.passes import MemoryPlanningPass
from torch import nn

import pyexec

CACHE_ROWS, DIM = 16, 8  # kv_cache.pte: a [16, 8] float32 cache


# ---- the in-place KV cache ---------------------------------------------------------------


class CacheStep(nn.Module):
    """Writes the projection of `x` into row `pos` of `cache`, then attends
    over the rows written so far: forward(x [1, D], pos [1], cache [S, D])."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = nn.Linear(DIM, DIM)

    def forward(self, x: torch.Tensor, pos: torch.Tensor, cache: torch.Tensor) -> torch.Tensor:
        cache.index_copy_(0, pos, self.proj(x))  # the in-place update of an input
        scores = (cache @ x.T).squeeze(1)
        scores = scores.masked_fill(torch.arange(CACHE_ROWS) > pos, float("-inf"))
        return scores.softmax(0) @ cache


def export_kv_cache(model: CacheStep) -> bytes:
    example = (torch.zeros(1, DIM), torch.tensor([0]), torch.zeros(CACHE_ROWS, DIM))
    # no_grad: to_executorch re-traces the in-place update on fake tensors, which
    # autograd refuses while the Linear's parameters require grad.
    with torch.no_grad():
        edge = to_edge(torch.export.export(model, example))
        config = ExecutorchBackendConfig(
            # Inputs are not given planned memory: the method reads (and the
            # program writes) the caller's tensors themselves.
            memory_planning_pass=MemoryPlanningPass(alloc_graph_input=False),
            # index_copy becomes index_put_ on the input instead of a copy of it.
            run_reinplace_pass=True,
        )
        return bytes(edge.to_executorch(config).buffer)


def run_kv_cache(pte: bytes, model: CacheStep) -> str:
    method = pyexec.load(pte).load_method("forward")
    # The program returns the updated cache first (the write-back), then the result.
    assert method.output_aliases_input(0) == 2, "output 0 is input 2, the cache"
    cache = torch.zeros(CACHE_ROWS, DIM)  # ours: pyexec writes into it
    eager_cache = torch.zeros(CACHE_ROWS, DIM)  # torch eager's, updated by the module itself
    storage = cache.data_ptr()
    torch.manual_seed(1)
    for step in range(CACHE_ROWS):
        x, pos = torch.randn(1, DIM), torch.tensor([step])
        # clone_outputs=False: outputs[0] is the cache itself (a detached alias)
        # rather than a copy of it, so the step costs the same at any cache size.
        written, result = method.execute([x, pos, cache], clone_outputs=False)
        with torch.no_grad():
            expected = model(x, pos, eager_cache)
        torch.testing.assert_close(result, expected)
        torch.testing.assert_close(cache, eager_cache)
        assert written.data_ptr() == storage and cache.data_ptr() == storage
    # With the default clone_outputs=True the write-back output is a copy of the
    # cache (as ExecuTorch's runtime returns it); the cache is still updated in place.
    copied = method.get_outputs()[0]
    assert copied.data_ptr() != storage
    torch.testing.assert_close(copied, cache)
    return f"{CACHE_ROWS} steps match torch eager; the cache was updated in place (same storage, eager's values)"


# ---- a dynamic batch dimension -----------------------------------------------------------

MAX_BATCH = 64


def export_dynamic(model: nn.Module) -> bytes:
    batch = torch.export.Dim("batch", min=1, max=MAX_BATCH)
    with torch.no_grad():
        exported = torch.export.export(model, (torch.randn(8, 16),), dynamic_shapes=({0: batch},))
        return bytes(to_edge(exported).to_executorch().buffer)


def run_dynamic(pte: bytes, model: nn.Module) -> str:
    method = pyexec.load(pte).load_method("forward")
    info = method.meta.inputs[0]
    assert info is not None and info.is_dynamic and info.sizes == (MAX_BATCH, 16)  # sizes: the upper bound
    shapes = []
    for batch in (1, 5, MAX_BATCH):
        x = torch.randn(batch, 16)
        (y,) = method.execute([x])
        with torch.no_grad():
            torch.testing.assert_close(y, model(x))
        shapes.append(tuple(y.shape))
    try:
        method.execute([torch.randn(MAX_BATCH + 1, 16)])
    except pyexec.InvalidArgumentError:
        pass  # above the exported bound: refused before anything runs
    else:
        raise AssertionError(f"a batch of {MAX_BATCH + 1} was accepted")
    return f"batch sizes 1, 5, {MAX_BATCH} match torch eager (output shapes {', '.join(map(str, shapes))})"


# ---- bindable outputs --------------------------------------------------------------------


class AddMul(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x + y, x * y


def export_add_mul() -> bytes:
    with torch.no_grad():
        edge = to_edge(torch.export.export(AddMul(), (torch.randn(2, 3), torch.randn(2, 3))))
        # Outputs without planned memory: each can be bound to a caller's tensor.
        config = ExecutorchBackendConfig(memory_planning_pass=MemoryPlanningPass(alloc_graph_output=False))
        return bytes(edge.to_executorch(config).buffer)


def run_add_mul(pte: bytes) -> str:
    method = pyexec.load(pte).load_method("forward")
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    total = torch.empty(2, 3)
    method.set_output(total, 0)
    out = method.execute([x, y])
    assert out[0] is total, "a bound output is returned as the tensor it is bound to"
    torch.testing.assert_close(total, x + y)
    torch.testing.assert_close(out[1], x * y)
    return "outputs match torch eager; output 0 was written into the bound tensor"


def main(out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    cache_model = CacheStep().eval()
    mlp = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 4)).eval()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's deprecation notices
        programs = {
            "kv_cache.pte": export_kv_cache(cache_model),
            "dynamic.pte": export_dynamic(mlp),
            "add_mul.pte": export_add_mul(),
        }
    checks = {
        "kv_cache.pte": lambda pte: run_kv_cache(pte, cache_model),
        "dynamic.pte": lambda pte: run_dynamic(pte, mlp),
        "add_mul.pte": run_add_mul,
    }
    for name, pte in programs.items():
        (out_dir / name).write_bytes(pte)
        print(f"{out_dir / name}: {len(pte)} bytes; {checks[name](pte)}")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else Path("."))
