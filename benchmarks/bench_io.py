"""IO-path benchmarks: pyexec against ExecuTorch 1.5.1's Python runtime (and
ONNX Runtime's IO binding) on the same models, measured interleaved in one
run, with ratios printed side by side.

1. Per-call overhead of `return x + y, x * 2` on 1-element tensors, through
   each runtime's Method and through ExecuTorch's pybindings Module API
   (`portable_lib`) and pyexec's (`pyexec.portable_lib`).
2. A decode step with a caller-owned cache [S, 64] float32 updated in place
   (`cache.index_copy_(0, pos, val)`, exported with alloc_graph_input=False,
   alloc_graph_output=False and run_reinplace_pass=True) for S from 4 Ki to
   1 Mi rows (1 MiB to 256 MiB): pyexec reads and writes the caller's cache in
   place; ExecuTorch returns (copies) the cache every step. Both are compared
   with the same step holding the cache as a mutable buffer inside the program.

    python benchmarks/bench_io.py [--quick]
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

import torch
from _common import fmt_us, interleaved_us, print_table
from support.export import export_program  # tests/, put on the path by _common

import pyexec


class AddMul(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x + y, x * 2


class CacheStep(torch.nn.Module):
    def forward(self, cache: torch.Tensor, pos: torch.Tensor, val: torch.Tensor) -> torch.Tensor:
        cache.index_copy_(0, pos, val)
        return val + 1


class BufferStep(torch.nn.Module):
    """The same step with the cache held inside the program (a mutable buffer)."""

    def __init__(self, rows: int) -> None:
        super().__init__()
        self.register_buffer("cache", torch.zeros(rows, 64))

    def forward(self, pos: torch.Tensor, val: torch.Tensor) -> torch.Tensor:
        self.cache.index_copy_(0, pos, val)
        return val + 1


def _onnx_add_mul() -> Callable[[], object] | None:
    """ONNX Runtime's run_with_iobinding on the same model (inputs and outputs
    bound once, one thread); None when onnxruntime or onnx is missing."""
    try:
        import numpy as np
        import onnxruntime as ort
        from onnx import TensorProto, helper
    except ImportError:
        return None
    two = helper.make_tensor("two", TensorProto.FLOAT, [1], [2.0])
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "y"], ["sum"]), helper.make_node("Mul", ["x", "two"], ["twice"])],
        "add_mul",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1]) for n in ("x", "y")],
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, [1]) for n in ("sum", "twice")],
        initializer=[two],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    options.inter_op_num_threads = 1
    sess = ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])
    binding = sess.io_binding()
    arrays = {n: np.ones(1, np.float32) for n in ("x", "y", "sum", "twice")}
    for n in ("x", "y"):
        binding.bind_cpu_input(n, arrays[n])
    for n in ("sum", "twice"):
        binding.bind_output(n, "cpu", 0, np.float32, [1], arrays[n].ctypes.data)
    sess.run_with_iobinding(binding)
    assert arrays["sum"][0] == 2.0 and arrays["twice"][0] == 2.0
    return lambda: sess.run_with_iobinding(binding)


def bench_overhead(budget: float) -> list[list[str]]:
    from executorch.runtime import Runtime

    x, y = torch.ones(1), torch.ones(1)
    pte = export_program(AddMul(), (x, y))
    et_program = Runtime.get().load_program(pte)  # ExecuTorch's Method does not keep it alive
    et = et_program.load_method("forward")
    ours = pyexec.load(pte).load_method("forward")
    installed = pyexec.load(pte).load_method("forward")
    installed.set_inputs([x, y])
    # ExecuTorch's pybindings Module API, and pyexec's (pyexec.portable_lib) on the same file.
    from executorch.extension.pybindings import portable_lib as et_lib

    import pyexec.portable_lib as px_lib

    et_module = et_lib._load_for_executorch_from_buffer(pte)
    px_module = px_lib._load_for_executorch_from_buffer(pte)
    fns: list[Callable[[], object]] = [
        lambda: et.execute([x, y]),
        lambda: ours.execute([x, y]),
        lambda: installed.execute(clone_outputs=False),
        lambda: et_module.forward([x, y]),
        lambda: px_module.forward([x, y]),
    ]
    names = [
        "ExecuTorch Method.execute([x, y])",
        "pyexec execute([x, y])",
        "pyexec execute(), installed inputs, clone_outputs=False",
        "ExecuTorch portable_lib Module.forward([x, y])",
        "pyexec.portable_lib Module.forward([x, y])",
    ]
    ort_fn = _onnx_add_mul()
    if ort_fn is not None:
        fns.append(ort_fn)
        names.append("ONNX Runtime run_with_iobinding (bound once)")
    times = interleaved_us(fns, budget_s=budget, rounds=9)
    et_us = times[0]
    rows = [[n, fmt_us(t), f"{t / et_us:.3f}x"] for n, t in zip(names, times)]
    rows.append(["pyexec.portable_lib forward - pyexec execute (goal <= 1 us)", fmt_us(times[4] - times[1]), ""])
    return rows


def decode_variants(rows: int) -> dict[str, Callable[[], object]]:
    """The step at one cache size, each way it can be run."""
    from executorch.runtime import Runtime

    cache = torch.zeros(rows, 64)
    val = torch.randn(1, 64)
    pos = torch.tensor([rows // 2])
    pte = export_program(
        CacheStep(), (cache, torch.tensor([0]), val),
        alloc_graph_input=False, alloc_graph_output=False, reinplace=True,
    )
    buffer_pte = export_program(BufferStep(rows), (torch.tensor([0]), val), reinplace=True)
    ours = pyexec.load(pte).load_method("forward")
    ours.set_inputs([cache, pos, val])
    ours.execute(clone_outputs=False)
    assert torch.equal(cache[rows // 2], val[0]), "pyexec did not update the caller's cache in place"
    with_inputs = pyexec.load(pte).load_method("forward")
    buf = pyexec.load(buffer_pte).load_method("forward")
    buf.set_inputs([pos, val])
    # ExecuTorch's Method does not keep its Program alive: hold both.
    et_programs = [Runtime.get().load_program(pte), Runtime.get().load_program(buffer_pte)]
    et = et_programs[0].load_method("forward")
    et_buf = et_programs[1].load_method("forward")
    inputs = [cache, pos, val]
    return {
        "_programs": lambda: et_programs,
        "installed": lambda: ours.execute(clone_outputs=False),
        "inputs": lambda: with_inputs.execute(inputs, clone_outputs=False),
        "buffer": lambda: buf.execute(clone_outputs=False),
        "et_buffer": lambda: et_buf.execute([pos, val]),
        "et": lambda: et.execute(inputs),
    }


def bench_decode(sizes: list[int], budget: float, et_budget: float) -> list[dict[str, float]]:
    """Every size's fast variants are timed round-robin together, so that a
    burst of machine noise cannot make one cache size look slower."""
    variants = [decode_variants(r) for r in sizes]
    fast_keys = ["installed", "inputs", "buffer", "et_buffer"]
    fns = [v[k] for v in variants for k in fast_keys]
    times = interleaved_us(fns, budget_s=budget, rounds=7)
    results = []
    for n, (rows, v) in enumerate(zip(sizes, variants)):
        r: dict[str, float] = dict(zip(fast_keys, times[n * len(fast_keys):(n + 1) * len(fast_keys)]))
        (r["et"],) = interleaved_us([v["et"]], budget_s=et_budget, rounds=3)
        r["mib"] = rows * 64 * 4 / 2**20
        results.append(r)
    return results


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="shorter measurements")
    args = parser.parse_args()
    torch.set_num_threads(1)
    budget = 0.05 if args.quick else 0.2
    print_table("Per-call overhead, `return x + y, x * 2` on 1-element tensors",
                ["variant", "per call", "vs ExecuTorch"], bench_overhead(budget))

    results = bench_decode([4096, 16384, 65536, 262144, 1 << 20], budget, 0.1 if args.quick else 0.5)
    base = results[0]["installed"]
    rows = []
    for r in results:
        rows.append([
            f"{r['mib']:.0f} MiB", fmt_us(r["installed"]), fmt_us(r["inputs"]), fmt_us(r["buffer"]),
            fmt_us(r["et"]), fmt_us(r["et_buffer"]), f"{r['installed'] / base:.2f}x",
            f"{r['installed'] / r['buffer']:.2f}x", f"{r['et'] / r['installed']:.0f}x",
        ])
    print_table(
        "Decode step, caller-owned cache [S, 64] float32 updated in place",
        ["cache", "pyexec execute()", "pyexec execute(inputs)", "pyexec, cache as buffer", "ExecuTorch",
         "ExecuTorch, cache as buffer", "vs 1 MiB", "vs buffer", "ExecuTorch / pyexec"],
        rows,
    )
    print("\npyexec execute(): inputs installed once, clone_outputs=False. 'vs buffer': pyexec's step with the "
          "caller's cache over its step with the cache held inside the program.")


if __name__ == "__main__":
    main()
