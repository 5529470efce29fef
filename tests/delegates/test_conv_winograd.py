"""Winograd F(2x2, 3x3) for 3x3 stride-1 float32 convolutions, in the XNNPACK
Conv2d node and the portable convolution (its filter packed at load), against
the direct (GEMM) path and a float64 reference.

PYEXEC_CONV_WINOGRAD is read once per process, so each setting runs the same
.pte in its own interpreter. The numerics rule the path is held to: its error
against torch in float64 (the module in double precision) is at most twice
the direct path's, on every output; and both stay within the delegate tests'
tolerances of ExecuTorch's own runtime on the same file.
"""

from __future__ import annotations

import copy
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from support.export import assert_close, export_program, run_with_executorch
from support.xnnpack import export_xnnpack

LAYER = dict(rtol=1e-4, atol=1e-5)
STACK = dict(rtol=1e-3, atol=1e-4)

# Runs the .pte once under the profiler, saves the output, prints the
# convolution events' names (one a line). numpy only: the child starts
# without importing torch.
_RUNNER = """
import sys, numpy as np, pyexec
x = np.load(sys.argv[2])
method = pyexec.load(open(sys.argv[1], "rb").read()).load_method("forward")
with method.profile() as p:
    out = method.execute([x])
np.save(sys.argv[3], np.asarray(out[0]))
print("\\n".join(e.name for e in p.events if e.name.startswith("Conv2d")))
"""

WINO, DIRECT = "Conv2d [winograd F(2x2,3x3)]", "Conv2d [direct]"


def run_pyexec(pte: Path, x: torch.Tensor, winograd: bool, tmp: Path) -> tuple[np.ndarray, list[str]]:
    """The output, and the profile's names of the convolutions."""
    xin, out = tmp / "x.npy", tmp / f"y{int(winograd)}.npy"
    np.save(xin, x.numpy())
    env = dict(os.environ, PYEXEC_CONV_WINOGRAD="1" if winograd else "0")
    run = subprocess.run([sys.executable, "-c", _RUNNER, str(pte), str(xin), str(out)], check=True, env=env,
                         capture_output=True, text=True)
    return np.load(out), run.stdout.strip().splitlines()


class Block(torch.nn.Module):
    """A resnet-like basic block: two 3x3 convolutions with ReLU and a skip."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.a = torch.nn.Conv2d(c, c, 3, padding=1)
        self.b = torch.nn.Conv2d(c, c, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.b(torch.relu(self.a(x))) + x)


def cases() -> list[tuple[str, torch.nn.Module, tuple[int, ...], dict[str, float]]]:
    torch.manual_seed(0)  # the layers' weights
    return [
        ("conv16_pad1", torch.nn.Conv2d(16, 24, 3, padding=1), (1, 16, 13, 11), LAYER),
        ("conv32_pad0", torch.nn.Conv2d(32, 16, 3, padding=0), (2, 32, 10, 9), LAYER),
        ("conv64_pad2_relu", torch.nn.Sequential(torch.nn.Conv2d(64, 64, 3, padding=2), torch.nn.ReLU()),
         (1, 64, 14, 14), LAYER),
        ("block64", Block(64), (1, 64, 16, 16), STACK),
        ("conv128_7x7", torch.nn.Conv2d(128, 128, 3, padding=1), (1, 128, 7, 7), LAYER),
    ]


@pytest.mark.parametrize("lowered", [True, False], ids=["xnnpack", "portable"])
@pytest.mark.parametrize("name, module, shape, tol", cases(), ids=[c[0] for c in cases()])
def test_winograd_error_within_twice_direct(
    name: str, module: torch.nn.Module, shape: tuple[int, ...], tol: dict[str, float], lowered: bool,
    tmp_path: Path,
) -> None:
    module = module.eval()
    x = torch.randn(*shape, generator=torch.Generator().manual_seed(1))
    pte_bytes = (export_xnnpack if lowered else export_program)(module, (x,))
    pte = tmp_path / f"{name}.pte"
    pte.write_bytes(pte_bytes)
    with torch.no_grad():
        ref = copy.deepcopy(module).double()(x.double()).numpy()
    wino, wino_events = run_pyexec(pte, x, True, tmp_path)
    direct, direct_events = run_pyexec(pte, x, False, tmp_path)
    if lowered:  # the portable path's events name the operator
        assert wino_events and set(wino_events) == {WINO}, wino_events
        assert direct_events and set(direct_events) == {DIRECT}, direct_events
    assert not np.array_equal(wino, direct), "the two settings ran the same path"
    err_w = float(np.abs(wino.astype(np.float64) - ref).max())
    err_d = float(np.abs(direct.astype(np.float64) - ref).max())
    assert err_d > 0.0
    where = "xnnpack" if lowered else "portable"
    print(f"{name} {where}: max error vs float64 winograd {err_w:.3g}, direct {err_d:.3g}, ratio {err_w / err_d:.2f}")
    assert err_w <= 2.0 * err_d, f"winograd error {err_w:.3g} > 2 x direct {err_d:.3g}"
    et = run_with_executorch(pte_bytes, [x])[0]
    assert_close(wino, et, **tol, what="winograd vs ExecuTorch")
    assert_close(direct, et, **tol, what="direct vs ExecuTorch")


def test_few_channels_and_strided_convolutions_stay_direct(tmp_path: Path) -> None:
    """Below 16 channels, and with stride 2, the direct path runs."""
    module = torch.nn.Sequential(
        torch.nn.Conv2d(8, 32, 3, padding=1), torch.nn.Conv2d(32, 32, 3, stride=2, padding=1)
    ).eval()
    x = torch.randn(1, 8, 12, 12, generator=torch.Generator().manual_seed(2))
    pte_bytes = export_xnnpack(module, (x,))
    pte = tmp_path / "few.pte"
    pte.write_bytes(pte_bytes)
    got, events = run_pyexec(pte, x, True, tmp_path)
    assert events == [DIRECT, DIRECT], events
    assert_close(got, run_with_executorch(pte_bytes, [x])[0], **LAYER, what="vs ExecuTorch")


# Memory load_method adds (RssAnon, from a path: the file's own pages are
# not anonymous).
_LOAD_GROWTH = """
import sys, pyexec

def anon():
    for line in open("/proc/self/status"):
        if line.startswith("RssAnon:"):
            return int(line.split()[1]) * 1024
    raise SystemExit("no RssAnon in /proc/self/status")

program = pyexec.load(sys.argv[1])
before = anon()
method = program.load_method("forward")
print(anon() - before)
"""


def test_a_winograd_layer_keeps_only_its_transformed_filter(tmp_path: Path) -> None:
    """With Winograd a 3x3 layer holds its transformed filter (16 values per
    input and output channel pair) instead of, not beside, the direct one (9
    values): load_method adds 7/9 of the direct filters' bytes D more than
    with PYEXEC_CONV_WINOGRAD=0 (about 1.2 D with the transform's scratch
    the allocator keeps), where keeping both filters adds 16/9 D (about
    2.2 D): the bound is 1.6 D."""
    c, layers = 256, 4
    module = torch.nn.Sequential(*[torch.nn.Conv2d(c, c, 3, padding=1) for _ in range(layers)]).eval()
    x = torch.randn(1, c, 8, 8, generator=torch.Generator().manual_seed(3))
    pte = tmp_path / "deep.pte"
    pte.write_bytes(export_xnnpack(module, (x,)))
    growth = {}
    for winograd in (True, False):
        # packed at load, not mapped from a packed-weight cache file
        env = dict(os.environ, PYEXEC_CACHE="0", PYEXEC_CONV_WINOGRAD="1" if winograd else "0")
        run = subprocess.run([sys.executable, "-c", _LOAD_GROWTH, str(pte)], check=True, env=env,
                             capture_output=True, text=True)
        growth[winograd] = int(run.stdout)
    direct = layers * c * c * 9 * 4  # bytes of the direct filters
    extra = growth[True] - growth[False]
    print(f"load_method adds {growth[True] / 2**20:.1f} MiB with Winograd, {growth[False] / 2**20:.1f} MiB without")
    assert growth[False] >= direct, growth  # the measure sees the packed filters at all
    assert extra < 1.6 * direct, f"{extra / 2**20:.1f} MiB more with Winograd: both filters kept?"
