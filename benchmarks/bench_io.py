"""IO-path benchmarks: pyexec against ExecuTorch 1.5.1's Python runtime on the
same .pte files, measured in the same run (ratios printed side by side).

1. Per-call overhead of `return x + y, x * 2` on 1-element tensors.
2. A decode step with a caller-owned cache [S, 64] float32 updated in place
   (`cache.index_copy_(0, pos, val)`, exported with alloc_graph_input=False,
   alloc_graph_output=False and run_reinplace_pass=True), at 1 MiB and at
   256 MiB of cache: pyexec reads and writes the caller's cache in place;
   ExecuTorch returns (copies) the cache every step.

    python benchmarks/bench_io.py [--quick]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from export import export_program  # noqa: E402

import pyexec  # noqa: E402


def per_call_us(fn: Callable[[], object], *, number: int, repeat: int = 7) -> float:
    """Median over `repeat` runs of the mean time of `number` calls, in µs."""
    fn()
    runs = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn()
        runs.append((time.perf_counter() - t0) / number * 1e6)
    return statistics.median(runs)


class AddMul(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x + y, x * 2


class CacheStep(torch.nn.Module):
    def forward(self, cache: torch.Tensor, pos: torch.Tensor, val: torch.Tensor) -> torch.Tensor:
        cache.index_copy_(0, pos, val)
        return val + 1


def bench_overhead(number: int) -> list[tuple[str, float, float]]:
    from executorch.runtime import Runtime

    x, y = torch.ones(1), torch.ones(1)
    pte = export_program(AddMul(), (x, y))
    et = Runtime.get().load_program(pte).load_method("forward")
    ours = pyexec.load(pte).load_method("forward")
    et_us = per_call_us(lambda: et.execute([x, y]), number=number)
    rows = [("ExecuTorch Method.execute([x, y])", et_us, 1.0)]
    a = per_call_us(lambda: ours.execute([x, y]), number=number)
    rows.append(("pyexec execute([x, y])", a, a / et_us))
    ours.set_inputs([x, y])
    b = per_call_us(lambda: ours.execute(clone_outputs=False), number=number)
    rows.append(("pyexec execute() installed inputs, no clone", b, b / et_us))
    return rows


def bench_decode_size(rows: int, number: int) -> list[tuple[str, float, float]]:
    from executorch.runtime import Runtime

    mib = rows * 64 * 4 / 2**20
    cache = torch.zeros(rows, 64)
    val = torch.randn(1, 64)
    pos = torch.tensor([rows // 2])
    pte = export_program(
        CacheStep(), (cache, torch.tensor([0]), val),
        alloc_graph_input=False, alloc_graph_output=False, reinplace=True,
    )
    ours = pyexec.load(pte).load_method("forward")
    ours.set_inputs([cache, pos, val])
    installed = per_call_us(lambda: ours.execute(clone_outputs=False), number=number)
    with_inputs = per_call_us(lambda: ours.execute([cache, pos, val], clone_outputs=False), number=number)
    assert torch.equal(cache[rows // 2], val[0]), "pyexec did not update the cache in place"
    et = Runtime.get().load_program(pte).load_method("forward")
    et_us = per_call_us(lambda: et.execute([cache, pos, val]), number=max(3, number // max(1, int(mib))), repeat=3)
    return [
        (f"ExecuTorch decode step, {mib:.0f} MiB cache", et_us, 1.0),
        (f"pyexec decode step, {mib:.0f} MiB cache, installed inputs", installed, installed / et_us),
        (f"pyexec decode step, {mib:.0f} MiB cache, execute(inputs)", with_inputs, with_inputs / et_us),
    ]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="fewer iterations")
    args = parser.parse_args()
    torch.set_num_threads(1)
    n = 2000 if args.quick else 20000
    rows = bench_overhead(n)
    for cache_rows in (4096, 1 << 20):  # 1 MiB and 256 MiB
        rows += bench_decode_size(cache_rows, 200 if args.quick else 2000)
    width = max(len(r[0]) for r in rows)
    print(f"{'benchmark':<{width}}  {'us/call':>10}  {'vs ExecuTorch':>13}")
    for name, us, ratio in rows:
        print(f"{name:<{width}}  {us:>10.2f}  {ratio:>12.3g}x")


if __name__ == "__main__":
    main()
