"""XNNPACK-lowered programs, single-threaded: pyexec's own XNNPACK backend
against ExecuTorch 1.5.1's runtime with its XNNPACK delegate (thread pool
reset to one thread) on the same lowered .pte, measured in one run beside
torch eager, ExecuTorch's portable kernels and pyexec on the portable export
of the same model.

    python benchmarks/bench_xnnpack.py [--quick] [--threads N] [--only NAME ...] [--no-load] [--json PATH]

Before anything is timed, pyexec's result on the lowered file is checked
against ExecuTorch's XNNPACK result (and pyexec's portable result against
torch eager), with a loose tolerance scaled by the output's magnitude (ten
times looser for the float16 rows), so that a wrong result cannot look fast.
Where ExecuTorch's own XNNPACK result is off from torch eager (its float16
attention block, ExecuTorch 1.5.1), the lowered columns say n/a and only
the portable ones are timed.
Every runtime runs at the same thread count (--threads, default 1), printed
with the table. Ratios are times (pyexec's time / the
other's): below 1 means pyexec is faster.

efficientnet_b0 and mobilenet_v3_small are torchvision's
(requirements-bench.txt; tv_models.py gives them random weights and measured
batch-norm statistics); without torchvision their rows say so. silero_vad is
ExecuTorch's Silero VAD example model (examples/models/silero_vad) with
random weights.

The last table loads a lowered program in a fresh process per runtime and
reports the time and resident memory each step adds (as bench_load.py).
pyexec has two rows: packing the weights at load (PYEXEC_CACHE=0, as on a
first load), and mapping them from the packed-weight cache file an earlier
process wrote (in a temporary directory; on by default for programs of 4 MiB
and more)."""

from __future__ import annotations

import argparse
import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch
import torch.nn.functional as F
from _common import add_json_option, fmt_us, interleaved_us, print_table, write_json
from support.export import export_program  # tests/, put on the path by _common
from support.models import EncoderBlock
from support.xnnpack import export_xnnpack
from support.zoo import InvertedResidual, TransformerLayer
from torch import nn

import pyexec

# ---- models (random weights; torchvision's layouts rebuilt by hand) --------------


class MLP(nn.Module):
    def __init__(self, d: int = 256, hidden: int = 1024) -> None:
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(d, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(F.gelu(self.fc2(F.gelu(self.fc1(x)))))


def _conv_bn(cin: int, cout: int, k: int, stride: int = 1, groups: int = 1, act: bool = True) -> list[nn.Module]:
    layers: list[nn.Module] = [
        nn.Conv2d(cin, cout, k, stride, (k - 1) // 2, groups=groups, bias=False), nn.BatchNorm2d(cout)
    ]
    return layers + [nn.ReLU6()] if act else layers


class MBV2Block(nn.Module):
    """torchvision's MobileNetV2 inverted residual: 1x1 expand (skipped at
    expansion 1), 3x3 depthwise with the stride, 1x1 linear projection, and
    the skip connection when the shape is kept."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        layers = _conv_bn(cin, hidden, 1) if expand != 1 else []
        layers += _conv_bn(hidden, hidden, 3, stride, groups=hidden) + _conv_bn(hidden, cout, 1, act=False)
        self.body = nn.Sequential(*layers)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.body(x)
        return x + y if self.residual else y


class MobileNetV2(nn.Module):
    """mobilenet_v2 (width 1.0): stem, the 17 blocks of its (t, c, n, s)
    table, 1x1 conv to 1280, global average pool, 1000-way classifier."""

    CONFIG = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
              (6, 320, 1, 1)]

    def __init__(self) -> None:
        super().__init__()
        layers = _conv_bn(3, 32, 3, 2)
        cin = 32
        for t, c, n, s in self.CONFIG:
            for i in range(n):
                layers.append(MBV2Block(cin, c, s if i == 0 else 1, t))
                cin = c
        layers += _conv_bn(cin, 1280, 1)
        self.features = nn.Sequential(*layers)
        self.classifier = nn.Linear(1280, 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.classifier(self.features(x).mean((2, 3)))


class BasicBlock(nn.Module):
    """torchvision's ResNet basic block: two 3x3 conv-bn, a 1x1 conv-bn
    downsample on the skip path when the stride or width changes."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.c1, self.b1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm2d(cout)
        self.c2, self.b2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm2d(cout)
        self.down = (
            nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))
            if stride != 1 or cin != cout else nn.Identity()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.b1(self.c1(x)))
        return F.relu(self.b2(self.c2(y)) + self.down(x))


class ResNet18(nn.Module):
    """resnet18: 7x7/2 stem, 3x3/2 max pool, four stages of two basic blocks
    (64, 128, 256, 512; stride 2 from the second), average pool, fc 1000."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)
        )
        blocks: list[nn.Module] = []
        cin = 64
        for i, c in enumerate([64, 128, 256, 512]):
            blocks += [BasicBlock(cin, c, 1 if i == 0 else 2), BasicBlock(c, c, 1)]
            cin = c
        self.layers = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, 1000)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.layers(self.stem(x)).mean((2, 3)))


class SmallCNN(nn.Module):
    """A small image classifier: 3x3 conv 3 -> 16 at 32x32, a stride-2 3x3
    conv 16 -> 32, global average pool, a 10-way Linear."""

    def __init__(self) -> None:
        super().__init__()
        self.c1, self.c2 = nn.Conv2d(3, 16, 3, padding=1), nn.Conv2d(16, 32, 3, 2, 1)
        self.fc = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(F.relu(self.c2(F.relu(self.c1(x)))).mean((2, 3)))


def _half(make: Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...]]]
          ) -> Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...]]]:
    """The same model and inputs in float16 (an fp16 XNNPACK graph)."""
    def build() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        module, inputs = make()
        return module.half(), tuple(t.half() for t in inputs)
    return build


def _torchvision(name: str) -> Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...]]]:
    """torchvision's model `name` (tv_models.py: random weights, measured
    batch-norm statistics); RuntimeError when torchvision cannot be imported."""
    def build() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
        import tv_models

        return tv_models.build(name)
    return build


def _silero_vad() -> tuple[nn.Module, tuple[torch.Tensor, ...]]:
    """ExecuTorch's Silero VAD example (its own eager reimplementation, which
    the example fills from the official weights; random ones here): one
    512-sample window with its 64 samples of context, and the LSTM state."""
    from executorch.examples.models.silero_vad.export_silero_vad import SileroVAD16k

    return SileroVAD16k(), (torch.randn(1, 576), 0.1 * torch.randn(2, 1, 128))


TORCHVISION = ("efficientnet_b0", "mobilenet_v3_small")
MODELS: dict[str, Callable[[], tuple[nn.Module, tuple[torch.Tensor, ...]]]] = {
    "small_cnn": lambda: (SmallCNN(), (torch.randn(1, 3, 32, 32),)),
    "small_cnn_fp16": _half(lambda: (SmallCNN(), (torch.randn(1, 3, 32, 32),))),
    "mlp_batch8_fp16": _half(lambda: (MLP(), (torch.randn(8, 256),))),
    "attention_block_fp16": _half(lambda: (EncoderBlock(256, 4, 1024), (torch.randn(1, 64, 256),))),
    "mobile_block": lambda: (InvertedResidual(32, 4), (torch.randn(1, 32, 56, 56),)),
    "transformer_layer": lambda: (TransformerLayer(256, 4, 1024), (torch.randn(1, 128, 256),)),
    "mlp_batch8": lambda: (MLP(), (torch.randn(8, 256),)),
    "mobilenet_v2": lambda: (MobileNetV2(), (torch.randn(1, 3, 224, 224),)),
    "resnet18": lambda: (ResNet18(), (torch.randn(1, 3, 224, 224),)),
    "silero_vad": _silero_vad,
    **{name: _torchvision(name) for name in TORCHVISION},
}
LOAD_MODELS = ("mobilenet_v2", "resnet18", "efficientnet_b0")  # the load / memory table


def _prepare(module: nn.Module) -> nn.Module:
    module.eval().requires_grad_(False)
    for m in module.modules():  # non-trivial batch-norm statistics
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
    return module


def build(name: str) -> tuple[nn.Module, tuple[torch.Tensor, ...], bytes, bytes]:
    """(module, inputs, portable .pte, XNNPACK-lowered .pte), exports cached."""
    torch.manual_seed(0)
    module, inputs = MODELS[name]()
    if name not in TORCHVISION:  # tv_models measured its statistics
        module = _prepare(module)
    return module, inputs, export_program(module, inputs), export_xnnpack(module, inputs)


def set_et_threads(n: int) -> None:
    """ExecuTorch's XNNPACK delegate runs on the pybindings' shared thread pool
    (as many threads as cores by default)."""
    from executorch.extension.pybindings.portable_lib import _threadpool_get_thread_count, _unsafe_reset_threadpool

    _unsafe_reset_threadpool(n)
    assert _threadpool_get_thread_count() == n


def mismatch(got: Sequence[torch.Tensor], want: Sequence[torch.Tensor], rel: float) -> str | None:
    """None when every output is within rel * max|want| (+ 1e-5) of `want`,
    otherwise the first difference, described."""
    if len(got) != len(want):
        return f"{len(got)} outputs, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want)):
        if g.shape != w.shape:
            return f"output {i}: shape {tuple(g.shape)}, expected {tuple(w.shape)}"
        scale = w.abs().max().item()
        diff = (g.double() - w.double()).abs().max().item()
        if not diff <= rel * scale + 1e-5:  # also catches nan
            return f"output {i} {tuple(w.shape)}: max |difference| {diff:.3g}, max |expected| {scale:.3g}"
    return None


def bench_model(name: str, budget_s: float, rounds: int) -> tuple[list[float], str | None]:
    """([eager, ET portable, ET XNNPACK, pyexec lowered, pyexec portable] µs
    per call, None) or ([], what was wrong)."""
    from executorch.runtime import Runtime

    module, inputs, portable, lowered = build(name)
    program = pyexec.load(lowered)
    delegates = program.delegates("forward")
    outside = program.operators("forward")[0]
    print(f"{name}: {len(delegates)} XNNPACK delegate(s), node types "
          f"{sorted({t for d in delegates for t in d.node_types})}; outside them: {outside}", file=sys.stderr)
    ours_x = program.load_method("forward")
    ours_p = pyexec.load(portable).load_method("forward")
    runtime = Runtime.get()
    et_px, et_pp = runtime.load_program(lowered), runtime.load_program(portable)  # Methods do not keep these
    et_x, et_p = et_px.load_method("forward"), et_pp.load_method("forward")

    with torch.no_grad():
        out = module(*inputs)
    expected = list(out) if isinstance(out, (tuple, list)) else [out]  # every output
    want_x = [t.clone() for t in et_x.execute(inputs)]
    rel = 1e-2 if inputs[0].dtype == torch.float16 else 1e-3
    et_wrong = mismatch(list(want_x), expected, rel)
    if et_wrong:  # ExecuTorch's XNNPACK result is off: the lowered columns are n/a, the portable ones timed
        print(f"{name}: ExecuTorch XNNPACK vs torch eager: {et_wrong}; lowered columns n/a", file=sys.stderr)
        wrong = mismatch(list(ours_p.execute(inputs)), expected, rel)
        if wrong:
            return [], f"pyexec portable vs torch eager: {wrong}"

        def eager_only() -> object:
            with torch.no_grad():
                return module(*inputs)

        e, p, o = interleaved_us([eager_only, lambda: et_p.execute(inputs), lambda: ours_p.execute(inputs)],
                                 budget_s=budget_s, rounds=rounds)
        return [e, p, math.nan, math.nan, o], None
    for what, got, want in [
        ("pyexec lowered vs ExecuTorch XNNPACK", ours_x.execute(inputs), want_x),
        ("ExecuTorch XNNPACK vs torch eager", want_x, expected),
        ("pyexec portable vs torch eager", ours_p.execute(inputs), expected),
    ]:
        wrong = mismatch(list(got), want, rel)
        if wrong:
            return [], f"{what}: {wrong}"

    def eager() -> object:
        with torch.no_grad():
            return module(*inputs)

    fns = [eager, lambda: et_p.execute(inputs), lambda: et_x.execute(inputs), lambda: ours_x.execute(inputs),
           lambda: ours_p.execute(inputs)]
    return interleaved_us(fns, budget_s=budget_s, rounds=rounds), None


# ---- load time and resident memory of a lowered program ------------------------


def rss_mib() -> tuple[float, float]:
    """(resident, of which anonymous) MiB: the rest is file pages, here
    mostly the mapped .pte, which the page cache shares."""
    with open("/proc/self/status") as f:
        kib = {k: int(v.split()[0]) for k, v in (line.split(":", 1) for line in f) if k in ("VmRSS", "RssAnon")}
    return kib["VmRSS"] / 1024, kib["RssAnon"] / 1024


def _grown(now: tuple[float, float], base: tuple[float, float]) -> list[float]:
    return [now[0] - base[0], now[1] - base[1]]


def child(runtime: str, path: str, shape: list[int]) -> None:
    """Runs in a fresh process: load, load the method, run twice."""
    x = torch.randn(*shape)
    if runtime == "pyexec":
        pyexec.set_num_threads(1)
        load = pyexec.load
    else:
        from executorch.runtime import Runtime

        set_et_threads(1)
        load = Runtime.get().load_program
    base = rss_mib()  # after the imports (and the thread pool): only what this file adds
    t0 = time.perf_counter()
    program = load(path)
    t1 = time.perf_counter()
    rss_load = rss_mib()
    method = program.load_method("forward")
    t2 = time.perf_counter()
    rss_method = rss_mib()
    method.execute([x])
    t3 = time.perf_counter()
    rss_run = rss_mib()
    method.execute([x])
    t4 = time.perf_counter()
    print(json.dumps({
        "load_ms": (t1 - t0) * 1e3, "method_ms": (t2 - t1) * 1e3, "first_ms": (t3 - t2) * 1e3,
        "second_ms": (t4 - t3) * 1e3, "rss_load": _grown(rss_load, base), "rss_method": _grown(rss_method, base),
        "rss_run": _grown(rss_run, base),
    }))


def measure_load(runtime: str, path: Path, shape: Sequence[int], env: dict[str, str]) -> dict[str, float]:
    path.read_bytes()  # into the page cache
    out = subprocess.run(
        [sys.executable, __file__, "--child", runtime, str(path), json.dumps(list(shape))],
        check=True, capture_output=True, text=True, env={**os.environ, **env},
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


RACY_SECONDS = 3.2  # a program's identity record is written once its file is 3 s old (weight_cache.c)


def load_table(names: Sequence[str], repeats: int) -> None:
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name in names:
            try:
                _, inputs, _, lowered = build(name)
            except RuntimeError as e:
                if name not in TORCHVISION:
                    raise
                print(f"{name}: skipped: {e}", file=sys.stderr)
                continue
            path = Path(tmp) / f"{name}_xnnpack.pte"
            path.write_bytes(lowered)
            cache = {"PYEXEC_CACHE": "1", "PYEXEC_CACHE_DIR": str(Path(tmp) / "cache")}
            measure_load("pyexec", path, inputs[0].shape, cache)  # writes the packed-weight cache file
            time.sleep(RACY_SECONDS)  # then the file's identity stands for its content hash
            for label, runtime, env in (("pyexec, packing", "pyexec", {"PYEXEC_CACHE": "0"}),
                                        ("pyexec, cache file", "pyexec", cache),
                                        ("ExecuTorch", "ExecuTorch", {})):
                # Best time of a few fresh processes, and their median memory:
                # what a process adds varies from run to run when the allocator
                # reuses memory the imports freed (ExecuTorch's packed weights
                # land there in some runs and in fresh pages in others).
                runs = [measure_load(runtime, path, inputs[0].shape, env) for _ in range(repeats)]
                best = {k: (min if k.endswith("_ms") else statistics.median_low)(r[k] for r in runs)
                        for k in runs[0]}
                rows.append([
                    f"{name} ({len(lowered) / 1e6:.1f} MB)", label, f"{best['load_ms']:.2f} ms",
                    f"{best['method_ms']:.2f} ms", f"{best['load_ms'] + best['method_ms']:.2f} ms",
                    "{:.1f} MiB ({:.1f})".format(*best["rss_method"]), f"{best['first_ms']:.1f} ms",
                    "{:.1f} MiB ({:.1f})".format(*best["rss_run"]),
                    f"{best['second_ms']:.1f} ms",
                ])
    print_table(
        "Loading a lowered program from a path: time and resident memory added (fresh process each, one thread)",
        ["lowered program", "runtime", "load", "load_method", "together", "RSS (anon) after load_method",
         "first run", "RSS (anon) after first run", "second run"],
        rows,
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="shorter measurements")
    parser.add_argument("--only", nargs="*", choices=list(MODELS), help="models to run")
    parser.add_argument("--no-load", action="store_true", help="skip the load / memory table")
    parser.add_argument("--threads", type=int, default=1, help="threads for every runtime (default 1)")
    add_json_option(parser)
    parser.add_argument("--child", nargs=3, metavar=("RUNTIME", "PATH", "SHAPE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], json.loads(args.child[2]))
        return
    threads = args.threads
    torch.set_num_threads(threads)
    set_et_threads(threads)
    pyexec.set_num_threads(threads)  # the default is one thread per core: set it like the others
    print(f"threads: {threads} (torch, ExecuTorch's pool and pyexec)", file=sys.stderr)
    budget, rounds = (0.05, 3) if args.quick else (0.25, 5)
    rows, ratios, failures = [], [], []
    values: list[dict[str, object]] = []
    for name in MODELS:
        if args.only and name not in args.only:
            continue
        try:
            times, wrong = bench_model(name, budget, rounds)
        except RuntimeError as e:
            if name not in TORCHVISION:
                raise
            rows.append([name, f"skipped: {str(e).split(':')[0]}", "", "", "", "", "", ""])
            print(f"{name}: skipped: {e}", file=sys.stderr)
            continue
        if wrong:
            failures.append(f"{name}: {wrong}")
            rows.append([name, "wrong result, not timed", "", "", "", "", "", ""])
            print(f"{name}: WRONG: {wrong}", file=sys.stderr)
            continue
        eager, et_p, et_x, ours_x, ours_p = times
        if math.isnan(et_x):
            values.append({"model": name, "threads": threads, "eager_us": eager, "et_portable_us": et_p,
                           "pyexec_portable_us": ours_p})
            rows.append([name, fmt_us(eager), fmt_us(et_p), "n/a (wrong result)", "n/a", fmt_us(ours_p), "", ""])
            continue
        ratios.append(ours_x / et_x)
        values.append({"model": name, "threads": threads, "eager_us": eager, "et_portable_us": et_p,
                       "et_xnnpack_us": et_x, "pyexec_lowered_us": ours_x, "pyexec_portable_us": ours_p,
                       "pyexec_over_et_xnnpack": ours_x / et_x})
        rows.append([name, *map(fmt_us, times), f"{ours_x / et_x:.2f}x", f"{ours_x / ours_p:.2f}x"])
        print(f"{name}: " + ", ".join(fmt_us(t) for t in times), file=sys.stderr)
    if ratios:
        geo = math.exp(sum(math.log(r) for r in ratios) / len(ratios))
        rows.append(["geometric mean", "", "", "", "", "", f"{geo:.2f}x", ""])
    per = "one thread" if threads == 1 else f"{threads} threads"
    print_table(
        f"XNNPACK-lowered programs, {per}, per call (ratios are times: below 1, pyexec is faster)",
        ["model", "torch eager", "ExecuTorch portable", "ExecuTorch XNNPACK", "pyexec lowered", "pyexec portable",
         "pyexec lowered / ET XNNPACK", "pyexec lowered / portable"],
        rows, values,
    )
    if not args.no_load:
        names = [n for n in LOAD_MODELS if not args.only or n in args.only]
        if names:
            load_table(names, 1 if args.quick else 5)
    write_json(args.json, "bench_xnnpack", {"threads": threads, "quick": args.quick})
    if failures:
        sys.exit("wrong results:\n  " + "\n  ".join(failures))


if __name__ == "__main__":
    main()
