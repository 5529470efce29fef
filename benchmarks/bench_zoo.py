"""Steady-state latency of a model zoo, single-threaded: pyexec against
ExecuTorch 1.5.1's runtime (portable kernels) on the same .pte file, and
against torch eager. Every model is exported by the real exporter here, and
pyexec's outputs are checked against torch eager before anything is timed.

    python benchmarks/bench_zoo.py [--quick] [--only NAME ...]

Ratios are speed-ups (other's time / pyexec's time): above 1 means pyexec is
faster. GFLOP/s counts the convolutions' and matrix products' flops (torch's
flop counter, 2 per multiply-add) over pyexec's time, printed beside the
machine's single-core FMA peak (benchmarks/bench_gemm.py). mobilenet_v2,
resnet18 and r3d_18 are torchvision's layouts rebuilt by hand with random
weights; ExecuTorch's portable kernels cannot run r3d_18 (no 3-D convolution),
so its column is n/a there.

The rows named tv_* are torchvision 0.28's own model definitions at the
issue's input sizes (benchmarks/tv_models.py: random weights re-initialised
so that every layer carries a signal, batch-norm statistics measured on random
inputs). They are skipped, with a note, when torchvision cannot be imported.
ExecuTorch's portable kernels take seconds per call on them, so their
ExecuTorch column is a single call after a warm-up one (--no-et-tv: n/a).
--save DIR writes every exported program to DIR/NAME.pte (for
`python -m pyexec profile`)."""

from __future__ import annotations

import argparse
import math
import os
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from _common import fmt_us, interleaved_us, print_table
from bench_gemm import measure_peak
from bench_xnnpack import MobileNetV2, ResNet18  # torchvision's layouts rebuilt by hand
from support.export import assert_close, export_program  # tests/, put on the path by _common
from support.zoo import AudioConv, DecoderStep, InvertedResidual, ResNetBlock, TransformerLayer
from torch import nn
from tv_models import MODELS as TV_MODELS
from tv_models import available as tv_available
from tv_models import maker as tv_maker

import pyexec


class SmallCNN(nn.Module):
    """A small image classifier: conv-bn-relu stages, pooling, a linear head."""

    def __init__(self) -> None:
        super().__init__()
        chans = [3, 16, 32, 64]
        layers: list[nn.Module] = []
        for a, b in zip(chans, chans[1:]):
            layers += [nn.Conv2d(a, b, 3, padding=1, bias=False), nn.BatchNorm2d(b), nn.ReLU(), nn.MaxPool2d(2)]
        self.features = nn.Sequential(*layers)
        self.head = nn.Linear(64, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).mean((2, 3)))


class MLP(nn.Module):
    def __init__(self, d: int = 256, hidden: int = 1024) -> None:
        super().__init__()
        self.fc1, self.fc2, self.fc3 = nn.Linear(d, hidden), nn.Linear(hidden, hidden), nn.Linear(hidden, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc3(F.gelu(self.fc2(F.gelu(self.fc1(x)))))


class LSTMStep(nn.Module):
    def __init__(self, d: int = 256, hidden: int = 512) -> None:
        super().__init__()
        self.cell = nn.LSTMCell(d, hidden)

    def forward(self, x: torch.Tensor, h: torch.Tensor, c: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.cell(x, (h, c))


class KVDecodeStep(nn.Module):
    """One token through embedding, attention over a caller-owned KV cache
    (updated in place) and an output projection."""

    def __init__(self, vocab: int = 2000, d: int = 256, heads: int = 4, max_seq: int = 256) -> None:
        super().__init__()
        self.h, self.dh, self.max_seq = heads, d // heads, max_seq
        self.emb = nn.Embedding(vocab, d)
        self.qkv = nn.Linear(d, 3 * d, bias=False)
        self.o = nn.Linear(d, d, bias=False)
        self.up, self.down = nn.Linear(d, 4 * d, bias=False), nn.Linear(4 * d, d, bias=False)
        self.out = nn.Linear(d, vocab, bias=False)

    def forward(self, tok: torch.Tensor, pos: torch.Tensor, k_cache: torch.Tensor, v_cache: torch.Tensor) -> Any:
        x = self.emb(tok)  # [1, 1, d]
        q, k, v = self.qkv(x).view(1, 1, 3, self.h, self.dh).permute(2, 0, 3, 1, 4)
        k_cache.index_copy_(2, pos, k)
        v_cache.index_copy_(2, pos, v)
        mask = (torch.arange(self.max_seq) <= pos).view(1, 1, 1, self.max_seq)
        a = F.scaled_dot_product_attention(q, k_cache, v_cache, attn_mask=mask)
        x = x + self.o(a.transpose(1, 2).reshape(1, 1, -1))
        x = x + self.down(F.silu(self.up(x)))
        return self.out(x)


class DynamicEncoder(nn.Module):
    """Token encoder over a dynamic sequence length."""

    def __init__(self, vocab: int = 1000, d: int = 128) -> None:
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        self.ln = nn.LayerNorm(d)
        self.fc1, self.fc2 = nn.Linear(d, 4 * d), nn.Linear(4 * d, d)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        x = self.ln(self.emb(ids))
        x = x + self.fc2(F.gelu(self.fc1(x)))
        return x.mean(1)


class Block3d(nn.Module):
    """torchvision's video BasicBlock (r3d_18): two 3x3x3 conv-bn, a 1x1x1
    strided projection on the skip path when the shape changes."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.c1, self.b1 = nn.Conv3d(cin, cout, 3, stride, 1, bias=False), nn.BatchNorm3d(cout)
        self.c2, self.b2 = nn.Conv3d(cout, cout, 3, 1, 1, bias=False), nn.BatchNorm3d(cout)
        self.down = (
            nn.Sequential(nn.Conv3d(cin, cout, 1, stride, bias=False), nn.BatchNorm3d(cout))
            if stride != 1 or cin != cout
            else nn.Identity()
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(self.b2(self.c2(F.relu(self.b1(self.c1(x))))) + self.down(x))


class R3D18(nn.Module):
    """r3d_18 (torchvision's layout, random weights): (3, 7, 7) stem with
    stride (1, 2, 2), four stages of two 3-D basic blocks (64, 128, 256, 512;
    stride 2 from the second), global average pool, 400-way classifier."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv3d(3, 64, (3, 7, 7), (1, 2, 2), (1, 3, 3), bias=False), nn.BatchNorm3d(64), nn.ReLU()
        )
        blocks: list[nn.Module] = []
        cin = 64
        for i, c in enumerate([64, 128, 256, 512]):
            blocks += [Block3d(cin, c, 1 if i == 0 else 2), Block3d(c, c, 1)]
            cin = c
        self.layers = nn.Sequential(*blocks)
        self.fc = nn.Linear(512, 400)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(F.adaptive_avg_pool3d(self.layers(self.stem(x)), 1).flatten(1))


@dataclass
class Entry:
    make: Callable[[], tuple[nn.Module, tuple[Any, ...]]]
    heavy: bool  # matrix / convolution bound: the torch-eager target applies
    dynamic_shapes: Any = None
    run_inputs: Callable[[], tuple[Any, ...]] | None = None  # inputs to time, when not the example
    unplanned_inputs: bool = False
    torchvision: bool = False  # initialised by tv_models (statistics kept), ExecuTorch timed once


def _seq(n: int) -> Any:
    return ({1: torch.export.Dim("seq", min=2, max=n)},)


ZOO: dict[str, Entry] = {
    "resnet_block": Entry(lambda: (ResNetBlock(32), (torch.randn(1, 32, 28, 28),)), heavy=True),
    "mobilenet_block": Entry(lambda: (InvertedResidual(32, 4), (torch.randn(1, 32, 28, 28),)), heavy=True),
    "small_cnn": Entry(lambda: (SmallCNN(), (torch.randn(1, 3, 64, 64),)), heavy=True),
    "audio_conv1d": Entry(lambda: (AudioConv(32, 64, 4, 8), (torch.randn(1, 1, 16000),)), heavy=True),
    "mlp_batch16": Entry(lambda: (MLP(), (torch.randn(16, 256),)), heavy=True),
    "transformer_layer": Entry(lambda: (TransformerLayer(256, 4, 1024), (torch.randn(1, 64, 256),)), heavy=True),
    "decoder_layer": Entry(lambda: (DecoderStep(256, 8, 32), (torch.randn(1, 32, 256),)), heavy=True),
    "lstm_cell": Entry(
        lambda: (LSTMStep(), (torch.randn(1, 256), torch.randn(1, 512), torch.randn(1, 512))), heavy=False
    ),
    "kv_decode_step": Entry(
        lambda: (
            KVDecodeStep(),
            (torch.tensor([[5]]), torch.tensor([17]), torch.randn(1, 4, 256, 64), torch.randn(1, 4, 256, 64)),
        ),
        heavy=False,
        unplanned_inputs=True,
    ),
    "mobilenet_v2": Entry(lambda: (MobileNetV2(), (torch.randn(1, 3, 224, 224),)), heavy=True),
    "resnet18": Entry(lambda: (ResNet18(), (torch.randn(1, 3, 224, 224),)), heavy=True),
    "r3d_18": Entry(lambda: (R3D18(), (torch.randn(1, 3, 4, 32, 32),)), heavy=True),
    "dynamic_encoder": Entry(
        lambda: (DynamicEncoder(), (torch.randint(0, 1000, (1, 96)),)),
        heavy=False,
        dynamic_shapes=_seq(128),
        run_inputs=lambda: (torch.randint(0, 1000, (1, 48)),),
    ),
}


TV_PREFIX = "tv_"
for _name in TV_MODELS:
    ZOO[TV_PREFIX + _name] = Entry(tv_maker(_name), heavy=True, torchvision=True)

CNNS = ("resnet_block", "mobilenet_block", "small_cnn", "mobilenet_v2", "resnet18", "r3d_18")


def _prepare(module: nn.Module) -> nn.Module:
    module.eval().requires_grad_(False)
    for m in module.modules():  # non-trivial batch-norm statistics
        if isinstance(m, (nn.BatchNorm2d, nn.BatchNorm3d)):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
    return module


def bench_model(
    name: str, entry: Entry, budget_s: float, rounds: int, *, et_tv: bool = True, save: str | None = None
) -> tuple[float, float, float]:
    """(pyexec µs, ExecuTorch µs, torch eager µs) per call."""
    from executorch.runtime import Runtime

    torch.manual_seed(0)
    module, example = entry.make()
    if not entry.torchvision:  # tv_models measured the statistics already
        module = _prepare(module)
    pte = export_program(
        module,
        example,
        dynamic_shapes=entry.dynamic_shapes,
        alloc_graph_input=not entry.unplanned_inputs,
        reinplace=entry.unplanned_inputs,
    )
    if save:
        with open(f"{save}/{name}.pte", "wb") as f:
            f.write(pte)
    inputs = entry.run_inputs() if entry.run_inputs else example
    ours = pyexec.load(pte).load_method("forward")
    et_program = Runtime.get().load_program(pte)  # ExecuTorch's Method does not keep it alive
    et: Any = None
    if et_tv or not entry.torchvision:
        try:  # ExecuTorch's portable kernels lack some ops (3-D convolution and pooling)
            et = et_program.load_method("forward")
            et.execute([x.clone() for x in inputs])
        except Exception as e:  # noqa: BLE001 - any refusal: that column is n/a
            print(f"{name}: ExecuTorch cannot run it ({type(e).__name__})", file=sys.stderr)
            et = None

    # Correct first: pyexec against torch eager on copies (caches are mutated).
    with torch.no_grad():
        expected = module(*[x.clone() for x in inputs])
    got = ours.execute([x.clone() for x in inputs])
    expected_list = list(expected) if isinstance(expected, tuple) else [expected]
    # The program lists inputs it updates in place (caches) as outputs first.
    returned = [g for i, g in enumerate(got) if ours.output_aliases_input(i) is None]
    assert len(returned) == len(expected_list), f"{name}: {len(returned)} outputs, torch returns {len(expected_list)}"
    for i, (g, e) in enumerate(zip(returned, expected_list)):
        assert_close(g, e, rtol=2e-3, atol=2e-4, what=f"{name} output {i}")

    def run_ours() -> object:
        return ours.execute(inputs)

    def run_et() -> object:
        return et.execute(inputs)

    def run_eager() -> object:
        with torch.no_grad():
            return module(*inputs)

    if et is None or entry.torchvision:
        a, c = interleaved_us([run_ours, run_eager], budget_s=budget_s, rounds=rounds)
        if et is None:
            return a, math.nan, c
        t0 = time.perf_counter()  # seconds per call: one call after the warm-up
        run_et()
        return a, (time.perf_counter() - t0) * 1e6, c
    a, b, c = interleaved_us([run_ours, run_et, run_eager], budget_s=budget_s, rounds=rounds)
    return a, b, c


def model_flops(entry: Entry) -> float:
    """Floating-point operations of one call (torch's flop counter over the
    eager module: convolutions and matrix products, 2 per multiply-add)."""
    from torch.utils.flop_counter import FlopCounterMode

    torch.manual_seed(0)
    module, example = entry.make()
    inputs = entry.run_inputs() if entry.run_inputs else example
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        module.eval()(*[x.clone() if isinstance(x, torch.Tensor) else x for x in inputs])
    return float(counter.get_total_flops())


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="shorter measurements")
    parser.add_argument("--only", nargs="*", help="models to run")
    parser.add_argument("--no-et-tv", action="store_true", help="no ExecuTorch call on the tv_* rows (n/a)")
    parser.add_argument("--save", metavar="DIR", help="write each exported program to DIR/NAME.pte")
    args = parser.parse_args()
    torch.set_num_threads(1)
    pyexec.set_num_threads(1)  # the same one thread as eager and ExecuTorch's portable kernels
    budget, rounds = (0.05, 3) if args.quick else (0.25, 5)
    tv_missing = tv_available()
    if tv_missing:
        print(f"torchvision rows (tv_*) skipped: torchvision cannot be imported ({tv_missing})", file=sys.stderr)
    if args.save:
        os.makedirs(args.save, exist_ok=True)
    tables: dict[bool, list[list[str]]] = {False: [], True: []}
    speedups_et: dict[bool, list[float]] = {False: [], True: []}
    speedups_eager: dict[bool, list[float]] = {False: [], True: []}
    speedups_cnn = []
    for name, entry in ZOO.items():
        if args.only and name not in args.only:
            continue
        if entry.torchvision and tv_missing:
            continue
        ours, et, eager = bench_model(name, entry, budget, rounds, et_tv=not args.no_et_tv, save=args.save)
        gflops = model_flops(entry) / (ours * 1e3)  # flops / µs / 1e3 = GFLOP/s
        tv = entry.torchvision
        if not math.isnan(et):
            speedups_et[tv].append(et / ours)
        speedups_eager[tv].append(eager / ours)
        if name in CNNS:
            speedups_cnn.append(eager / ours)
        et_col = fmt_us(et) if not math.isnan(et) else "n/a"
        tables[tv].append(
            [
                name + (" *" if entry.heavy else ""),
                fmt_us(ours),
                et_col,
                fmt_us(eager),
                f"{et / ours:.2f}x" if not math.isnan(et) else "n/a",
                f"{eager / ours:.2f}x",
                f"{gflops:.1f}" if gflops >= 0.05 else "",
            ]
        )
        print(f"{name}: pyexec {fmt_us(ours)}, ExecuTorch {et_col}, torch {fmt_us(eager)}", file=sys.stderr)

    def geo(xs: list[float]) -> str:
        return f"{math.exp(sum(math.log(s) for s in xs) / len(xs)):.2f}x" if xs else ""

    header = ["model", "pyexec", "ExecuTorch", "torch eager", "vs ExecuTorch", "vs torch", "pyexec GFLOP/s"]
    if tables[False] or not tables[True]:
        rows = tables[False]
        rows.append(["geometric mean", "", "", "", geo(speedups_et[False]), geo(speedups_eager[False]), ""])
        if speedups_cnn:
            rows.append(["geometric mean, CNNs", "", "", "", "", geo(speedups_cnn), ""])
        print_table("Model zoo, one thread, per call (* matrix / convolution bound)", header, rows)
    if tables[True]:
        rows = tables[True]
        rows.append(["geometric mean", "", "", "", geo(speedups_et[True]), geo(speedups_eager[True]), ""])
        print_table(
            "torchvision 0.28 models, one thread, per call (ExecuTorch: one call after a warm-up one)", header, rows
        )
    print(f"\nsingle-core float32 FMA peak of this machine: {measure_peak():.1f} GFLOP/s (benchmarks/bench_gemm.py)")


if __name__ == "__main__":
    main()
