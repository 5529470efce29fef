"""Rows per second of examples/ray/batch_inference.py: the Ray Data actor
pool at 1 and 2 actors on a local Ray (ray.init(num_cpus=2)), beside the same
loop in one process (pyexec, ExecuTorch 1.5.1's runtime and torch eager on
the same batches), so that the overhead Ray adds is visible.

The rows are generated and materialized in the object store before the
clock starts; a Ray run is timed from building the actor pool to the last
classified block stored (results left in the object store, not fetched).
Each Ray run pays for starting its actors; the marginal rate, from runs at
N and 2N rows (2N-N rows over the difference in time), leaves that out.

    python benchmarks/bench_ray.py [--quick]
"""

from __future__ import annotations

import argparse
import importlib.util
import time
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


def one_process(pte: bytes, model: torch.nn.Module, rows: int, quick: bool) -> list[tuple[str, float]]:
    """(runtime, rows/s) of the loop over pre-generated rows, BATCH_SIZE at a time."""
    from executorch.runtime import Runtime

    x = batch.features(np.arange(rows))
    xt = torch.from_numpy(x)
    slices = [slice(s, s + batch.BATCH_SIZE) for s in range(0, rows, batch.BATCH_SIZE)]
    method = pyexec.load(pte).load_method(output_type="numpy")
    et = Runtime.get().load_program(pte).load_method("forward")

    def run_pyexec() -> None:
        for s in slices:
            method.execute([x[s]])

    def run_et() -> None:
        for s in slices:
            et.execute([xt[s]])

    def run_eager() -> None:
        with torch.no_grad():
            for s in slices:
                model(xt[s])

    us = interleaved_us([run_pyexec, run_et, run_eager], budget_s=0.2 if quick else 0.5, rounds=3 if quick else 7)
    return [(name, rows / (t / 1e6)) for name, t in zip(("pyexec", "ExecuTorch", "torch eager"), us)]


def ray_seconds(program: pyexec.Program, dataset: Any, actors: int) -> float:
    t0 = time.perf_counter()
    out = batch.classify(program, dataset, actors).materialize()
    dt = time.perf_counter() - t0
    assert out.count() == dataset.count()
    return dt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer rows and rounds")
    args = parser.parse_args()
    import ray

    rows = 200_000 if args.quick else 1_000_000
    torch.set_num_threads(1)  # each runtime on one thread, as pyexec runs
    rounds = 1 if args.quick else 3
    model = batch.build_model()
    pte = export_program(model, batch.example_inputs(), dynamic_shapes=batch.dynamic_shapes(), alloc_graph_input=False)
    program = pyexec.load(pte)
    local = one_process(pte, model, rows, args.quick)

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, logging_level="warning")
    try:
        import ray.data

        ray.data.DataContext.get_current().enable_progress_bars = False
        small, large = batch.make_dataset(rows, blocks=16), batch.make_dataset(2 * rows, blocks=32)
        # The results are those of one local Method (checked once, on the small set).
        got = batch.collect(batch.classify(program, small, 2))
        want = batch.classify_locally(program, rows)
        np.testing.assert_allclose(got["logits"], want["logits"], rtol=1e-6, atol=1e-6)
        best: dict[tuple[int, int], float] = {}
        for _ in range(rounds):  # interleaved: a burst of load hits every variant alike
            for actors in (1, 2):
                for n, ds in ((rows, small), (2 * rows, large)):
                    best[actors, n] = min(best.get((actors, n), float("inf")), ray_seconds(program, ds, actors))
    finally:
        ray.shutdown()

    base = local[0][1]
    table = [[f"one process, {name}", f"{rows:,}", "", f"{rate:,.0f}", f"{rate / base:.2f}x"] for name, rate in local]
    for actors in (1, 2):
        t1, t2 = best[actors, rows], best[actors, 2 * rows]
        marginal = rows / (t2 - t1) if t2 > t1 else float("nan")
        table.append(
            [
                f"Ray Data, {actors} actor(s), pyexec",
                f"{rows:,}",
                f"{t1:.2f} s",
                f"{rows / t1:,.0f}",
                f"{rows / t1 / base:.3f}x",
            ]
        )
        table.append(
            [
                f"Ray Data, {actors} actor(s), pyexec",
                f"{2 * rows:,}",
                f"{t2:.2f} s",
                f"{2 * rows / t2:,.0f}",
                f"{2 * rows / t2 / base:.3f}x",
            ]
        )
        table.append(
            [f"Ray Data, {actors} actor(s), marginal", f"+{rows:,}", f"+{t2 - t1:.2f} s", f"{marginal:,.0f}", ""]
        )
    print_table(
        f"Ray Data batch inference (examples/ray, MLP {batch.FEATURES}-64-{batch.CLASSES}, "
        f"batches of {batch.BATCH_SIZE}, ray.init(num_cpus=2))",
        ["variant", "rows", "wall", "rows/s", "vs one process, pyexec"],
        table,
    )


if __name__ == "__main__":
    main()
