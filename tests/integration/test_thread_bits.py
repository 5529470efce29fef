"""Results are bit-identical for any thread count: the model zoo (portable and
lowered to XNNPACK), the tiny llama with its custom attention, a set of
operator programs aimed at every kernel that splits its work over the pool
(elementwise with broadcasting and dtype conversion, softmax along the last and
an inner dim, the norms, reductions of both loop forms, a wide Winograd
convolution), and every program
the operator tests have exported into the export cache so far (up to
CACHED_MAX of them, whatever their order of running left there) run at 1, 2
and 3 threads with the same inputs and compared byte for byte.

The runs happen in one subprocess started with PYEXEC_PARALLEL_MIN_COST=1, so
that every kernel splits its work however small the program (at the default
threshold these small programs would run on one thread and prove nothing).
A program whose inputs the test cannot make (non-tensor or bfloat16 inputs)
is left out, and so is one that draws random numbers (dropout, rand, randn:
different on every run by design); one that fails must fail with the same
message at every count."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from support import ROOT
from support.export import _CACHE, export_program
from support.llm import llama_program
from support.xnnpack import export_xnnpack
from support.zoo import ZOO
from torch import nn

pytestmark = pytest.mark.slow

COUNTS = (1, 2, 3)
CACHED_MAX = 200
XNNPACK_ZOO = ("resnet_block", "inverted_residual", "transformer_layer", "audio_conv1d")

# Loads each program, makes inputs from its metadata (seeded by the file name),
# runs it at each count and prints a digest (or the error) per count.
_WORKER = """
import hashlib, json, sys, zlib
import numpy as np
import pyexec
paths, counts = json.loads(sys.stdin.read())
RANDOM = {"aten::native_dropout", "aten::rand", "aten::randn"}
out = {}
for path in paths:
    rng = np.random.default_rng(zlib.crc32(path.encode()))
    try:
        prog = pyexec.load(path)
        meta = prog.method_meta("forward")
        if any(i is None for i in meta.inputs):
            continue
        if any(op.split(".")[0] in RANDOM for op in prog.operators("forward")[0]):
            continue
        inputs = []
        for i in meta.inputs:
            if i.dtype.startswith("float") or i.dtype == "bfloat16":
                x = rng.standard_normal(i.sizes).astype(np.float32)
                x = x.astype(np.float16) if i.dtype == "float16" else x.astype(i.dtype) if i.dtype == "float64" else x
            elif i.dtype == "bool":
                x = rng.integers(0, 2, i.sizes).astype(np.bool_)
            else:
                x = rng.integers(0, 2, i.sizes).astype(i.dtype)
            inputs.append(x)
        if any(i.dtype == "bfloat16" for i in meta.inputs):
            continue
    except Exception as e:
        out[path] = ["setup: " + str(e)]
        continue
    digests = []
    for n in counts:
        pyexec.set_num_threads(n)
        try:
            m = prog.load_method("forward", output_type="numpy")
            h = hashlib.sha256()
            for o in m.execute([x.copy() for x in inputs]):
                h.update(np.ascontiguousarray(o).tobytes() if isinstance(o, np.ndarray) else repr(o).encode())
            digests.append(h.hexdigest())
        except Exception as e:
            digests.append(type(e).__name__ + ": " + str(e))
    out[path] = digests
print(json.dumps(out))
"""


def run_counts(paths: list[Path]) -> dict[str, list[str]]:
    env = dict(os.environ, PYEXEC_PARALLEL_MIN_COST="1")
    env.pop("PYEXEC_NUM_THREADS", None)
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_WORKER)],
        input=json.dumps([[str(p) for p in paths], list(COUNTS)]),
        capture_output=True,
        text=True,
        env=env,
        timeout=900,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr[-4000:]
    result: dict[str, list[str]] = json.loads(r.stdout.splitlines()[-1])
    return result


# ---- operator programs aimed at the kernels that split -------------------------------


class Elementwise(nn.Module):
    def forward(self, a: torch.Tensor, b: torch.Tensor, i: torch.Tensor, c: torch.Tensor) -> Any:
        s = a + b  # broadcast [37, 65] + [65]
        p = a * i  # int64 promoted to float: converted in pieces
        t = torch.tanh(a) * torch.sigmoid(s) + torch.exp(-a.abs())
        w = torch.where(c, s, p)
        q = a.transpose(0, 1).contiguous() * 2.0 - b.unsqueeze(1)  # strided input
        return s, p, t, w, q, a.to(torch.float16) + 1


class Softmaxes(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> Any:
        return F.softmax(x, -1), F.softmax(x, 1), F.log_softmax(y, -1), F.softmax(y, 0)


class Norms(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(48)
        self.gn = nn.GroupNorm(4, 8)
        self.bn = nn.BatchNorm2d(8).eval()
        self.bn.running_mean.uniform_(-0.5, 0.5)
        self.bn.running_var.uniform_(0.5, 1.5)

    def forward(self, x: torch.Tensor, z: torch.Tensor) -> Any:
        return self.ln(x), self.gn(z), self.bn(z)


class Reductions(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor, k: torch.Tensor) -> Any:
        return (
            x.sum(0),  # ROW form, one kept block cut into columns
            x.mean(-1),  # INNER form
            y.amax((0, 2)),
            y.sum((1,), keepdim=True),
            k.sum(1),  # int32 into int64
            torch.var(x, 0),
            y.prod(-1),
        )


OPS: dict[str, Callable[[], tuple[nn.Module, tuple[Any, ...]]]] = {
    "elementwise": lambda: (
        Elementwise(),
        (torch.randn(37, 65), torch.randn(65), torch.randint(-3, 4, (37, 65)), torch.rand(37, 65) > 0.5),
    ),
    "softmax": lambda: (Softmaxes(), (torch.randn(3, 17, 40), torch.randn(9, 33).double())),
    "norms": lambda: (Norms(), (torch.randn(4, 10, 48), torch.randn(2, 8, 5, 5))),
    # 160 x 160 filters: 1.6 MiB once transformed, past what a core's L2 is
    # given, so the products of a block of tiles split by position
    "winograd_wide": lambda: (nn.Conv2d(160, 160, 3, padding=1), (torch.randn(1, 160, 9, 8),)),
    "reductions": lambda: (
        Reductions(),
        (torch.randn(37, 2100), torch.randn(5, 6, 7), torch.randint(-9, 9, (6, 300), dtype=torch.int32)),
    ),
}


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    where = tmp_path_factory.mktemp("bits")
    made: dict[str, bytes] = {}
    torch.manual_seed(0)
    for name, make in OPS.items():
        module, inputs = make()
        made[f"op_{name}"] = export_program(module.eval(), inputs, strict_ir=False)
    for name, factory in ZOO.items():
        z = factory()
        made[f"zoo_{name}"] = export_program(z.module, z.inputs, dynamic_shapes=z.dynamic_shapes)
        if name in XNNPACK_ZOO:
            made[f"zoo_{name}_xnnpack"] = export_xnnpack(z.module, z.inputs)
    made["llama"] = llama_program()
    paths = {}
    for name, pte in made.items():
        paths[name] = where / f"{name}.pte"
        paths[name].write_bytes(pte)
    return paths


@pytest.fixture(scope="module")
def results(programs: dict[str, Path]) -> dict[str, list[str]]:
    cached = sorted(Path(os.environ.get("PYEXEC_TEST_EXPORT_CACHE", str(_CACHE))).glob("*.pte"))[:CACHED_MAX]
    return run_counts(list(programs.values()) + cached)


def names() -> list[str]:
    return [f"op_{n}" for n in OPS] + [f"zoo_{n}" for n in ZOO] + [f"zoo_{n}_xnnpack" for n in XNNPACK_ZOO] + ["llama"]


@pytest.mark.parametrize("name", names())
def test_same_bits_at_every_thread_count(name: str, programs: dict[str, Path], results: dict[str, list[str]]) -> None:
    digests = results[str(programs[name])]
    assert len(digests) == len(COUNTS)
    assert not digests[0].startswith(("setup:", "Error", "Execution")), f"{name} did not run: {digests[0]}"
    assert digests == [digests[0]] * len(COUNTS), f"{name}: outputs differ between thread counts {COUNTS}"


def test_cached_operator_programs_give_the_same_bits(programs: dict[str, Path], results: dict[str, list[str]]) -> None:
    own = {str(p) for p in programs.values()}
    differ = {p: d for p, d in results.items() if p not in own and d != [d[0]] * len(d)}
    assert not differ, f"{len(differ)} cached programs differ between thread counts: {differ}"
