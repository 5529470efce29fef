"""Thread scaling, in one run: the zoo benchmark's models (bench_zoo.py,
portable export) and the XNNPACK benchmark's models (bench_xnnpack.py,
lowered export) timed at 1 and 2 threads (or --threads ...) for pyexec
(pyexec.set_num_threads), torch eager (torch.set_num_threads) and, on the
lowered files, ExecuTorch with its XNNPACK delegate (its pybindings thread
pool reset with _unsafe_reset_threadpool). ExecuTorch's portable kernels run
on one thread whatever the setting, so the zoo table has no ExecuTorch
column. Outputs are checked against torch eager before anything is timed,
and at every thread count pyexec's outputs must equal its one-thread outputs
bit for bit.

    python benchmarks/bench_threads.py [--quick] [--only NAME ...] [--threads 1 2]

Columns "nT/1T" are time ratios (below 1: faster with more threads; ideal
1/n); "vs torch" and "vs ET+XNNPACK" are the other's time over pyexec's at
the highest count (above 1: pyexec faster). Each count is measured with the
runtimes interleaved, best of a few rounds; on a shared machine the figures
move with its load (see the printed load average)."""

from __future__ import annotations

import argparse
import math
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np
import torch
from _common import fmt_us, interleaved_us, print_table
from bench_xnnpack import MODELS as XNN_MODELS
from bench_xnnpack import build, set_et_threads
from bench_zoo import ZOO, _prepare
from support.export import assert_close, export_program  # tests/, put on the path by _common

import pyexec


def as_bytes(outs: Sequence[Any]) -> bytes:
    return b"".join(np.ascontiguousarray(o).tobytes() for o in outs)


def scale(
    name: str,
    counts: Sequence[int],
    make_runners: Callable[[int], dict[str, Callable[[], object]]],
    budget_s: float,
    rounds: int,
) -> dict[str, list[float]]:
    """{runtime: [µs per call at each count]}; make_runners(n) sets the
    thread counts to n and returns the calls to time."""
    times: dict[str, list[float]] = {}
    for n in counts:
        runners = make_runners(n)
        got = interleaved_us(list(runners.values()), budget_s=budget_s, rounds=rounds)
        for k, t in zip(runners, got):
            times.setdefault(k, []).append(t)
        print(f"{name} @ {n} threads: " + ", ".join(f"{k} {fmt_us(t)}" for k, t in zip(runners, got)), file=sys.stderr)
    return times


def ratio_cols(ts: list[float]) -> list[str]:
    return [fmt_us(t) for t in ts] + [f"{t / ts[0]:.2f}" for t in ts[1:]]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="shorter measurements")
    parser.add_argument("--only", nargs="*", help="models to run (names from either table)")
    parser.add_argument("--threads", nargs="*", type=int, default=[1, 2], help="thread counts (first is the base)")
    args = parser.parse_args()
    counts: list[int] = args.threads
    budget, rounds = (0.05, 3) if args.quick else (0.25, 5)

    def want(name: str) -> bool:
        return not args.only or name in args.only

    # ---- the zoo, portable export: pyexec and torch eager
    zoo_rows = []
    for name, entry in ZOO.items():
        if not want(name) or not entry.heavy or entry.torchvision:  # tv_* rows: bench_zoo.py's
            continue
        torch.manual_seed(0)
        module, example = entry.make()
        module = _prepare(module)
        pte = export_program(
            module,
            example,
            dynamic_shapes=entry.dynamic_shapes,
            alloc_graph_input=not entry.unplanned_inputs,
            reinplace=entry.unplanned_inputs,
        )
        inputs = entry.run_inputs() if entry.run_inputs else example
        ours = pyexec.load(pte).load_method("forward", output_type="numpy")
        ref_bits = b""
        for n in counts:  # correct, and the same bits at every count
            pyexec.set_num_threads(n)
            got = ours.execute([x.clone() for x in inputs])
            if n == counts[0]:
                ref_bits = as_bytes(got)
                with torch.no_grad():
                    expected = module(*[x.clone() for x in inputs])
                exp_list = list(expected) if isinstance(expected, tuple) else [expected]
                returned = [g for i, g in enumerate(got) if ours.output_aliases_input(i) is None]
                for i, (g, e) in enumerate(zip(returned, exp_list)):
                    assert_close(g, e, rtol=2e-3, atol=2e-4, what=f"{name} output {i}")
            assert as_bytes(got) == ref_bits, f"{name}: outputs at {n} threads differ from {counts[0]} thread(s)"

        def eager(module: torch.nn.Module = module, inputs: Any = inputs) -> object:
            with torch.no_grad():
                return module(*inputs)

        def zoo_runners(n: int, ours: Any = ours, inputs: Any = inputs, eager: Any = eager) -> dict[str, Any]:
            pyexec.set_num_threads(n)
            torch.set_num_threads(n)
            return {"pyexec": lambda: ours.execute(inputs), "torch": eager}

        t = scale(name, counts, zoo_runners, budget, rounds)
        zoo_rows.append(
            [name, *ratio_cols(t["pyexec"]), *ratio_cols(t["torch"]), f"{t['torch'][-1] / t['pyexec'][-1]:.2f}x"]
        )

    # ---- the XNNPACK models, lowered export: pyexec, ExecuTorch+XNNPACK, torch eager
    from executorch.runtime import Runtime

    xnn_rows = []
    for name in XNN_MODELS:
        if not want(name):
            continue
        module, inputs, _, lowered = build(name)
        ours = pyexec.load(lowered).load_method("forward", output_type="numpy")
        ref_bits = b""
        for n in counts:
            pyexec.set_num_threads(n)
            got = ours.execute(inputs)
            if n == counts[0]:
                ref_bits = as_bytes(got)
                with torch.no_grad():
                    assert_close(got[0], module(*inputs), rtol=2e-3, atol=2e-4, what=name)
            assert as_bytes(got) == ref_bits, f"{name}: outputs at {n} threads differ from {counts[0]} thread(s)"

        def eager_x(module: torch.nn.Module = module, inputs: Any = inputs) -> object:
            with torch.no_grad():
                return module(*inputs)

        held: list[Any] = []  # ExecuTorch's Method does not keep its program alive

        def xnn_runners(
            n: int,
            ours: Any = ours,
            inputs: Any = inputs,
            eager: Any = eager_x,
            lowered: bytes = lowered,
            held: list[Any] = held,
        ) -> dict[str, Any]:
            pyexec.set_num_threads(n)
            torch.set_num_threads(n)
            # a delegate keeps the thread pool it was loaded with: reset, then load
            set_et_threads(n)
            held[:] = [Runtime.get().load_program(lowered)]
            et = held[0].load_method("forward")
            return {"pyexec": lambda: ours.execute(inputs), "ET+XNNPACK": lambda: et.execute(inputs), "torch": eager}

        t = scale(name, counts, xnn_runners, budget, rounds)
        xnn_rows.append(
            [
                name,
                *ratio_cols(t["pyexec"]),
                *ratio_cols(t["ET+XNNPACK"]),
                *ratio_cols(t["torch"]),
                f"{t['ET+XNNPACK'][-1] / t['pyexec'][-1]:.2f}x",
                f"{t['torch'][-1] / t['pyexec'][-1]:.2f}x",
            ]
        )

    top = counts[-1]
    per = [f"{n}T" for n in counts] + [f"{n}T/{counts[0]}T" for n in counts[1:]]

    def geo_row(rows: list[list[str]], first: int, width: int) -> list[str]:
        out = ["geometric mean"] + [""] * (width - 1)
        for c in range(first, width):
            vals = [float(r[c].rstrip("x")) for r in rows if r[c] and r[c][0].isdigit() and "s" not in r[c]]
            if vals and len(vals) == len(rows):
                out[c] = f"{math.exp(sum(math.log(v) for v in vals) / len(vals)):.2f}"
        return out

    load = os.getloadavg()[0]
    if zoo_rows:
        header = ["model (portable)", *[f"pyexec {p}" for p in per], *[f"torch {p}" for p in per], f"vs torch @{top}T"]
        print_table(
            f"Zoo models, 1 to {top} threads (load average {load:.1f} on {os.cpu_count()} CPUs)",
            header,
            [*zoo_rows, geo_row(zoo_rows, 1, len(header))],
        )
    if xnn_rows:
        header = [
            "model (XNNPACK-lowered)",
            *[f"pyexec {p}" for p in per],
            *[f"ET+XNNPACK {p}" for p in per],
            *[f"torch {p}" for p in per],
            f"vs ET+XNNPACK @{top}T",
            f"vs torch @{top}T",
        ]
        print_table(
            f"XNNPACK models, 1 to {top} threads (load average {load:.1f} on {os.cpu_count()} CPUs)",
            header,
            [*xnn_rows, geo_row(xnn_rows, 1, len(header))],
        )
    if not args.only or "busy_core" in args.only:
        busy_core_table(0.05 if args.quick else 0.2)


BURNER = "import time\nend = time.monotonic() + {seconds}\nwhile time.monotonic() < end:\n    pass\n"


def busy_core_table(budget_s: float, model: str = "small_cnn") -> None:
    """pyexec at 1 and 2 threads on an XNNPACK-lowered small CNN while a
    CPU burner (a subprocess, stopped when the measurement ends and in any
    case by itself after 10 s) keeps another core busy: two threads must
    not be slower than one there."""
    import subprocess
    import time

    _, inputs, _, lowered = build(model)
    method = pyexec.load(lowered).load_method("forward")
    args = list(inputs)

    def at(n: int) -> Callable[[], object]:
        def run() -> object:
            pyexec.set_num_threads(n)
            return method.execute(args)

        return run

    seconds = 10.0  # its own limit; stopped as soon as the measurement ends (2-3 s)
    burner = subprocess.Popen([sys.executable, "-c", BURNER.format(seconds=seconds)])
    try:
        time.sleep(0.2)  # the burner running
        one, two = interleaved_us([at(1), at(2)], budget_s=budget_s, rounds=3)
    finally:
        burner.terminate()
        burner.wait(timeout=seconds + 10)
    pyexec.set_num_threads(1)
    print_table(
        f"pyexec, {model} (XNNPACK-lowered) with another core busy ({os.cpu_count()} CPUs; one run, noisy)",
        ["model", "pyexec 1T", "pyexec 2T", "2T/1T"],
        [[model, fmt_us(one), fmt_us(two), f"{two / one:.2f}"]],
    )


if __name__ == "__main__":
    main()
