"""Rows per second of examples/ray/batch_inference.py: the Ray Data actor
pool at 1 and 2 actors on a local Ray (ray.init(num_cpus=2)), beside the same
loop in one process (pyexec, ExecuTorch 1.5.1's runtime and torch eager on
the same batches), so that the overhead Ray adds is visible.

The rows are generated and materialized in the object store before the
clock starts; a Ray run is timed from building the actor pool to the last
classified block stored (results left in the object store, not fetched).
Each Ray run pays for starting its actors; the marginal rate, from runs at
N and 2N rows (2N-N rows over the difference in time), leaves that out. Both
at the example's batch size (256 rows a call) and at the program's largest
(1024): Ray Data's cost is mostly per batch.

    python benchmarks/bench_ray.py [--quick]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from _common import ROOT, interleaved_us, print_table
from support.export import export_program

import pyexec

spec = importlib.util.spec_from_file_location("batch_inference", ROOT / "examples" / "ray" / "batch_inference.py")
assert spec is not None and spec.loader is not None
batch = importlib.util.module_from_spec(spec)
spec.loader.exec_module(batch)
BATCH_SIZES = (batch.BATCH_SIZE, batch.MAX_BATCH)  # the example's, and the largest its program takes


def one_process(pte: bytes, model: torch.nn.Module, rows: int, quick: bool) -> list[tuple[str, int, float]]:
    """(runtime, batch size, rows/s) of the loop over pre-generated rows:
    pyexec at each batch size the Ray runs use, ExecuTorch's runtime and
    torch eager at the example's."""
    from executorch.runtime import Runtime

    x = batch.features(np.arange(rows))
    xt = torch.from_numpy(x)
    method = pyexec.load(pte).load_method(output_type="numpy")
    et = Runtime.get().load_program(pte).load_method("forward")

    def cuts(size: int) -> list[slice]:
        return [slice(s, s + size) for s in range(0, rows, size)]

    def run_pyexec(slices: list[slice]) -> Callable[[], None]:
        def run() -> None:
            for s in slices:
                method.execute([x[s]])

        return run

    def run_et() -> None:
        for s in cuts(batch.BATCH_SIZE):
            et.execute([xt[s]])

    def run_eager() -> None:
        with torch.no_grad():
            for s in cuts(batch.BATCH_SIZE):
                model(xt[s])

    fns = [run_pyexec(cuts(size)) for size in BATCH_SIZES] + [run_et, run_eager]
    names = [("pyexec", size) for size in BATCH_SIZES] + [
        ("ExecuTorch", batch.BATCH_SIZE),
        ("torch eager", batch.BATCH_SIZE),
    ]
    us = interleaved_us(fns, budget_s=0.2 if quick else 0.5, rounds=3 if quick else 7)
    return [(name, size, rows / (t / 1e6)) for (name, size), t in zip(names, us)]


def ray_seconds(program: pyexec.Program, dataset: Any, actors: int, batch_size: int) -> float:
    t0 = time.perf_counter()
    out = batch.classify(program, dataset, actors, batch_size).materialize()
    dt = time.perf_counter() - t0
    assert out.count() == dataset.count()
    return dt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rows and rounds")
    args = parser.parse_args()
    import ray

    rows = 200_000 if args.quick else 1_000_000
    torch.set_num_threads(1)  # each runtime on one thread, as each actor's pyexec runs
    pyexec.set_num_threads(1)
    rounds = 1 if args.quick else 3
    model = batch.build_model()
    pte = export_program(model, batch.example_inputs(), dynamic_shapes=batch.dynamic_shapes(), alloc_graph_input=False)
    program = pyexec.load(pte)
    local = one_process(pte, model, rows, args.quick)

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="warning")
    try:
        import ray.data

        ray.data.DataContext.get_current().enable_progress_bars = False
        sets = {rows: batch.make_dataset(rows, blocks=16), 2 * rows: batch.make_dataset(2 * rows, blocks=32)}
        # The results are those of one local Method (checked once, on the smaller set).
        got = batch.collect(batch.classify(program, sets[rows], 2))
        want = batch.classify_locally(program, rows)
        np.testing.assert_allclose(got["logits"], want["logits"], rtol=1e-6, atol=1e-6)
        best: dict[tuple[int, int, int], float] = {}
        for _ in range(rounds):  # interleaved: a burst of load hits every variant alike
            for size in BATCH_SIZES:
                for actors in (1, 2):
                    for n, ds in sets.items():
                        t = ray_seconds(program, ds, actors, size)
                        best[size, actors, n] = min(best.get((size, actors, n), float("inf")), t)
    finally:
        ray.shutdown()

    base = {size: rate for name, size, rate in local if name == "pyexec"}
    table = [
        [f"one process, {name}", str(size), f"{rows:,}", "", f"{rate:,.0f}", f"{rate / base[size]:.2f}x"]
        for name, size, rate in local
    ]
    for size in BATCH_SIZES:
        for actors in (1, 2):
            t1, t2 = best[size, actors, rows], best[size, actors, 2 * rows]
            what = f"Ray Data, {actors} actor{'s' if actors > 1 else ''}"
            for n, t in ((rows, t1), (2 * rows, t2)):
                table.append([what, str(size), f"{n:,}", f"{t:.2f} s", f"{n / t:,.0f}", f"{n / t / base[size]:.3f}x"])
            # Below the noise (the larger run no slower): no rate to give.
            marginal = rows / (t2 - t1) if t2 > t1 else float("nan")
            table.append(
                [
                    f"{what}, marginal",
                    str(size),
                    f"+{rows:,}",
                    f"+{t2 - t1:.2f} s",
                    f"{marginal:,.0f}" if marginal == marginal else "below noise",
                    f"{marginal / base[size]:.3f}x" if marginal == marginal else "",
                ]
            )
    print_table(
        f"Ray Data batch inference (examples/ray: MLP {batch.FEATURES}-64-{batch.CLASSES}, ray.init(num_cpus=2)); "
        "wall from building the actor pool to the last block stored",
        ["variant", "batch", "rows", "wall", "rows/s", "vs one process, pyexec, same batch"],
        table,
    )


if __name__ == "__main__":
    main()
