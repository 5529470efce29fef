"""Quantized programs lowered to XNNPACK, single-threaded: pyexec's XNNPACK
backend against ExecuTorch 1.5.1's runtime with its XNNPACK delegate (thread
pool reset to one thread) on the same .pte, measured round-robin in one
process, beside torch eager on the float model.

    python benchmarks/bench_quant.py [--quick] [--only NAME ...]

The files: a static int8 convolution network (PT2E XNNPACKQuantizer,
per-channel), a dynamic int8 MLP (PT2E, qd8 x qc8w), an 8da4w MLP and an
8da4w transformer encoder layer (torchao's Int8DynamicActivationIntxWeight,
int4 weights in groups of 32: qd8 x qb4w) and one 8da4w Linear at batch 1
(decode, 8192 x 8192: its 36 MiB of weights and scales do not stay in a 32 MiB
cache between calls), for which the file's bytes over the time per call give
the bandwidth reached, printed beside this machine's measured copy bandwidth.

Before timing, pyexec's outputs are checked against ExecuTorch's on the same
file (within 1e-3 of the output's magnitude; static int8 within one output
step), so that a wrong result cannot look fast. Ratios are times (pyexec /
ExecuTorch): below 1, pyexec is faster."""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch
from _common import add_json_option, fmt_us, interleaved_us, print_table, write_json
from support.quant import export_quantized, register_quantized_ops
from support.zoo import TransformerLayer
from torch import nn


class ConvNet(nn.Module):
    """Stem, two residual stages with a depthwise conv and max pooling, and a classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 32, 3, stride=2, padding=1)
        self.c1 = nn.Conv2d(32, 32, 3, padding=1)
        self.dw = nn.Conv2d(32, 32, 3, padding=1, groups=32)
        self.pw = nn.Conv2d(32, 64, 1)
        self.c2 = nn.Conv2d(64, 64, 3, padding=1)
        self.pool = nn.MaxPool2d(2)
        self.fc = nn.Linear(64 * 8 * 8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = torch.relu(self.stem(x))
        x = self.pool(x + torch.relu(self.c1(x)))
        x = torch.relu(self.pw(self.dw(x)))
        x = self.pool(x + self.c2(x))
        return self.fc(x.flatten(1))


class MLP(nn.Module):
    def __init__(self, d: int = 512, hidden: int = 2048) -> None:
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(d, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


G32 = {"scheme": "torchao", "bits": 4, "group_size": 32}
Spec = tuple[nn.Module, tuple[torch.Tensor, ...], dict[str, Any], list[tuple[torch.Tensor, ...]] | None]


def _conv() -> Spec:
    calib = [(torch.randn(1, 3, 64, 64),) for _ in range(4)]
    return ConvNet(), (torch.randn(1, 3, 64, 64),), {"scheme": "pt2e", "per_channel": True}, calib


MODELS: dict[str, Callable[[], Spec]] = {
    "conv_int8_static": _conv,
    "mlp_int8_dynamic": lambda: (
        MLP(),
        (torch.randn(8, 512),),
        {"scheme": "pt2e", "per_channel": True, "dynamic": True},
        None,
    ),
    "mlp_8da4w": lambda: (MLP(), (torch.randn(8, 512),), G32, None),
    "transformer_8da4w": lambda: (TransformerLayer(256, 4, 1024), (torch.randn(1, 64, 256),), G32, None),
    # 8192 x 8192: 32 MiB of 4-bit weights and 4 MiB of scales, more than a 32 MiB L3 holds
    "linear_8da4w_decode": lambda: (nn.Linear(8192, 8192), (torch.randn(1, 8192),), G32, None),
}


def build(name: str) -> tuple[nn.Module, tuple[torch.Tensor, ...], bytes]:
    torch.manual_seed(0)
    module, inputs, quant, calib = MODELS[name]()
    module = module.eval().requires_grad_(False)
    return module, inputs, export_quantized(module, inputs, quant, calibration=calib, lower=True)


def set_et_threads(n: int) -> None:
    from executorch.extension.pybindings.portable_lib import _threadpool_get_thread_count, _unsafe_reset_threadpool

    _unsafe_reset_threadpool(n)
    assert _threadpool_get_thread_count() == n


def copy_bandwidth_gbs() -> float:
    """Bytes read plus written per second by a 256 MiB numpy copy, best of 5."""
    src = np.ones(1 << 26, np.float32)
    dst = np.empty_like(src)
    best = float("inf")
    for _ in range(5):
        t0 = time.perf_counter()
        np.copyto(dst, src)
        best = min(best, time.perf_counter() - t0)
    return 2 * src.nbytes / best / 1e9


def bench_model(name: str, budget_s: float, rounds: int) -> tuple[list[float], int, str | None]:
    """([eager float, ExecuTorch XNNPACK, pyexec] µs per call, file size, None) or ([], 0, what was wrong)."""
    from executorch.runtime import Runtime

    import pyexec

    module, inputs, pte = build(name)
    program = pyexec.load(pte)
    types = sorted({t for d in program.delegates("forward") for t in d.node_types})
    print(f"{name}: {len(pte)} bytes, node types {types}; outside: {program.operators('forward')[0]}", file=sys.stderr)
    ours = program.load_method("forward")
    et_program = Runtime.get().load_program(pte)
    et = et_program.load_method("forward")
    want = [t.clone() for t in et.execute(inputs)]
    got = list(ours.execute(inputs))
    for i, (g, w) in enumerate(zip(got, want)):
        scale = float(w.abs().max())
        diff = float((g.double() - w.double()).abs().max())
        allowed = scale / 64 if "static" in name else 1e-3 * scale + 1e-5  # int8: a couple of output steps
        if not diff <= allowed:
            return [], 0, f"output {i}: max |pyexec - ExecuTorch| {diff:.3g}, max |ExecuTorch| {scale:.3g}"

    def eager() -> object:
        with torch.no_grad():
            return module(*inputs)

    fns = [eager, lambda: et.execute(inputs), lambda: ours.execute(inputs)]
    return interleaved_us(fns, budget_s=budget_s, rounds=rounds), len(pte), None


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="shorter measurements")
    parser.add_argument("--only", nargs="*", choices=list(MODELS), help="models to run")
    parser.add_argument("--threads", type=int, default=1, help="threads for every runtime (default 1)")
    add_json_option(parser)
    args = parser.parse_args()
    import pyexec

    register_quantized_ops()
    threads = args.threads
    torch.set_num_threads(threads)
    set_et_threads(threads)
    pyexec.set_num_threads(threads)  # the default is one thread per core: set it like the others
    print(f"threads: {threads} (torch, ExecuTorch's pool and pyexec)", file=sys.stderr)
    budget, rounds = (0.05, 3) if args.quick else (0.25, 5)
    rows, ratios, notes = [], [], []
    values: list[dict[str, object]] = []
    for name in MODELS:
        if args.only and name not in args.only:
            continue
        times, size, wrong = bench_model(name, budget, rounds)
        if wrong:
            rows.append([name, "wrong result, not timed", "", "", ""])
            print(f"{name}: WRONG: {wrong}", file=sys.stderr)
            continue
        eager, et, ours = times
        ratios.append(ours / et)
        rows.append([name, fmt_us(eager), fmt_us(et), fmt_us(ours), f"{ours / et:.2f}x"])
        values.append({"model": name, "threads": threads, "eager_us": eager, "et_xnnpack_us": et,
                       "pyexec_lowered_us": ours, "pyexec_over_et_xnnpack": ours / et})
        if name == "linear_8da4w_decode":
            notes.append(
                f"linear_8da4w_decode reads about {size / 1e6:.1f} MB of weights and scales per call: "
                f"pyexec {size / ours / 1e3:.1f} GB/s, ExecuTorch+XNNPACK {size / et / 1e3:.1f} GB/s; "
                f"this machine's copy bandwidth (numpy, read + write) {copy_bandwidth_gbs():.1f} GB/s"
            )
    if ratios:
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        rows.append(["geometric mean", "", "", "", f"{geo:.2f}x"])
    per = "one thread" if threads == 1 else f"{threads} threads"
    print_table(
        f"Quantized programs lowered to XNNPACK, {per}, per call (ratios are times: below 1, pyexec is faster)",
        ["model", "torch eager (float)", "ExecuTorch XNNPACK", "pyexec", "pyexec / ExecuTorch"],
        rows, values,
    )
    for note in notes:
        print(f"\n{note}")
    write_json(args.json, "bench_quant", {"threads": threads, "quick": args.quick, "notes": notes})


if __name__ == "__main__":
    main()
