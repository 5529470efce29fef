"""Quantized programs lowered to XNNPACK, single-threaded: pyexec's XNNPACK
backend against ExecuTorch 1.5.1's runtime with its XNNPACK delegate (thread
pool reset to one thread) on the same .pte, measured round-robin in one
process, beside torch eager on the float model.

    python benchmarks/bench_quant.py [--quick] [--only NAME ...]

The files: a static int8 convolution network (PT2E XNNPACKQuantizer,
per-channel) and bench_xnnpack.py's small CNN in the same static int8, a
dynamic int8 MLP (PT2E, qd8 x qc8w), an 8da4w MLP and an 8da4w transformer
encoder layer (torchao's Int8DynamicActivationIntxWeight, int4 weights in
groups of 32: qd8 x qb4w) and one 8da4w Linear at batch 1
(decode, 8192 x 8192: its 36 MiB of weights and scales do not stay in a 32 MiB
cache between calls), for which the file's bytes over the time per call give
the bandwidth reached, printed beside this machine's measured copy bandwidth.

Then ExecuTorch's own int8 example models, quantized as its XNNPACK example
compiler (examples/xnnpack/aot_compiler.py) does: torchvision's mobilenet_v2,
mobilenet_v3_small and resnet18 at 224 x 224 in static int8 (per-channel
weights, calibrated on the example input; random weights re-initialised by
tv_models.py, so that every layer carries a signal), and the Emformer RNN-T
joiner in dynamic int8 (qd8 FullyConnected over T x U = 32 x 32 rows; the
example's 128 x 128 is 16 times the work). The torchvision rows need
requirements-bench.txt's torchvision; without it they say so and are skipped.

Then the rest of ExecuTorch's int8 example list at the sizes its example
models give (et_example_models.py): resnet50, Inception v3 and v4, EDSR and
DeepLabV3 in static int8; ViT-B/16, Wav2Letter, MobileBERT and its Llama 2
example in dynamic int8. Inception v4 needs timm and MobileBERT transformers
(requirements-bench.txt).

Before timing, pyexec's outputs are checked against ExecuTorch's on the same
file (within 1e-3 of the output's magnitude; static int8 within one output
step), so that a wrong result cannot look fast. A dynamically quantized net
whose float nodes feed the activation quantization (ViT, Llama: softmax,
GELU, norms, where XNNPACK's approximations and pyexec's differ in the last
bits) can round an activation one step the other way and carry it through
the layers after it; it passes when its RMS error against the float model is
within 10% of ExecuTorch's, and both errors are printed. Ratios are times (pyexec /
ExecuTorch): below 1, pyexec is faster."""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Callable
from typing import Any

import et_example_models
import numpy as np
import torch
from _common import add_json_option, fmt_us, interleaved_us, print_table, write_json
from support.et_examples import EmformerJoiner
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


STATIC_PC = {"scheme": "pt2e", "per_channel": True}
DYNAMIC_PC = {"scheme": "pt2e", "per_channel": True, "dynamic": True}


def _torchvision(name: str) -> Callable[[], Spec]:
    def spec() -> Spec:
        import tv_models

        module, inputs = tv_models.build(name)  # RuntimeError when torchvision cannot be imported
        return module, inputs, STATIC_PC, [inputs]  # aot_compiler.py calibrates on the example input

    return spec


def _example(build: Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...]]], dynamic: bool) -> Callable[[], Spec]:
    def spec() -> Spec:
        module, inputs = build()
        if dynamic:
            return module, inputs, DYNAMIC_PC, None
        return module, inputs, STATIC_PC, [inputs]

    return spec


def _small_cnn() -> Spec:
    from bench_xnnpack import SmallCNN  # the float benchmark's small CNN

    calib = [(torch.randn(1, 3, 32, 32),) for _ in range(4)]
    return SmallCNN().eval(), (torch.randn(1, 3, 32, 32),), STATIC_PC, calib


def _emformer_join() -> Spec:
    source, target = torch.rand(1, 32, 1024), torch.rand(1, 32, 1024)
    return EmformerJoiner(), (source, target), DYNAMIC_PC, None


MODELS: dict[str, Callable[[], Spec]] = {
    "conv_int8_static": _conv,
    "small_cnn_int8_static": _small_cnn,
    "mlp_int8_dynamic": lambda: (
        MLP(),
        (torch.randn(8, 512),),
        DYNAMIC_PC,
        None,
    ),
    "mlp_8da4w": lambda: (MLP(), (torch.randn(8, 512),), G32, None),
    "transformer_8da4w": lambda: (TransformerLayer(256, 4, 1024), (torch.randn(1, 64, 256),), G32, None),
    # 8192 x 8192: 32 MiB of 4-bit weights and 4 MiB of scales, more than a 32 MiB L3 holds
    "linear_8da4w_decode": lambda: (nn.Linear(8192, 8192), (torch.randn(1, 8192),), G32, None),
    "mv2_int8_static": _torchvision("mobilenet_v2"),
    "mv3_int8_static": _torchvision("mobilenet_v3_small"),
    "resnet18_int8_static": _torchvision("resnet18"),
    "emformer_join_int8_dynamic": _emformer_join,
    **{f"{k}_int8_static": _example(b, dynamic=False) for k, b in et_example_models.STATIC.items()},
    **{f"{k}_int8_dynamic": _example(b, dynamic=True) for k, b in et_example_models.DYNAMIC.items()},
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


def _flat(out: Any) -> list[torch.Tensor]:
    """A model's outputs in the order a program returns them (tuples, lists and dicts flattened)."""
    if isinstance(out, torch.Tensor):
        return [out]
    items = out.values() if isinstance(out, dict) else out
    return [t for item in items for t in _flat(item)]


def _rms(t: torch.Tensor) -> float:
    return float(t.pow(2).mean().sqrt())


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
    got = [torch.as_tensor(np.asarray(g)) for g in ours.execute(inputs)]
    for i, (g, w) in enumerate(zip(got, want)):
        scale = float(w.abs().max())
        diff = float((g.double() - w.double()).abs().max())
        allowed = scale / 64 if "static" in name else 1e-3 * scale + 1e-5  # int8: a couple of output steps
        if diff <= allowed:
            continue
        if "static" in name:
            return [], 0, f"output {i}: max |pyexec - ExecuTorch| {diff:.3g}, max |ExecuTorch| {scale:.3g}"
        # Dynamic quantization rounds activations that float nodes made (softmax, GELU,
        # norms), where XNNPACK's approximations and pyexec's differ in the last bits: in a
        # deep net a flipped rounding grows past the bound above. Then the result must be
        # as close to the float model as ExecuTorch's is.
        with torch.no_grad():
            ref = _flat(module(*inputs))[i].double()
        mine, theirs = _rms(g.double() - ref), _rms(w.double() - ref)
        print(f"{name}: output {i}: max |pyexec - ExecuTorch| {diff:.3g} (max |ExecuTorch| {scale:.3g}); "
              f"RMS error against the float model: pyexec {mine:.3g}, ExecuTorch {theirs:.3g}", file=sys.stderr)
        if not mine <= 1.1 * theirs:
            return [], 0, f"output {i}: RMS error against the float model {mine:.3g}, ExecuTorch's {theirs:.3g}"

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
        try:
            times, size, wrong = bench_model(name, budget, rounds)
        except RuntimeError as e:
            if "is not available" not in str(e):
                raise
            rows.append([name, f"skipped: {str(e).split(':')[0]}", "", "", ""])
            print(f"{name}: skipped: {e}", file=sys.stderr)
            continue
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
