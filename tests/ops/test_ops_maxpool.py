"""float32 max_pool2d_with_indices (native/src/kernels/pool.c): the fast path
for 2-D float32 pooling (interior columns in vector blocks, borders by the
plain scan) against torch eager and ExecuTorch's runtime on the same exported
program, values bit for bit and indices exactly.

One module pools three inputs (4-D with batch 2 and 6 channels, 3-D CHW, one
channel) with kernels, strides (1, 2, 3 and mixed), padding, dilation and
ceil_mode chosen so that every variant has interior blocks, a partial last
block, border columns and border rows; a 49-tap and a 1089-tap window (the
latter past the fast path's tap limit, so the plain scan). The inputs are run
as random values with NaNs (several in one window: the last one is reported),
-inf regions and a whole -inf plane, integer values (ties everywhere: the
first maximum is reported), and signed zeros. Each runs at 1 and 2 threads (the
planes split over the pool; results identical), and again in a subprocess
with PYEXEC_POOL_ISA=avx2 and =portable, the lesser SIMD variants, which a
machine with AVX-512 never picks by itself."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from support import ROOT
from support.export import export_program, run_with_executorch

import pyexec

NAN, INF = float("nan"), float("inf")

# (kernel, stride, padding, dilation, ceil_mode) applied to the 4-D input
CONFIGS: list[tuple[Any, Any, Any, Any, bool]] = [
    (3, 2, 1, 1, False),  # resnet's stem pool
    (3, 1, 1, 1, False),  # stride 1
    (2, 2, 0, 1, False),
    (3, 3, 1, 1, True),  # stride 3: loads one float at a time
    ((2, 3), (1, 2), (1, 0), (2, 1), False),  # dilated rows
    (3, 2, 1, 2, True),  # dilated both ways, ceil_mode
    ((5, 4), (2, 3), (2, 1), 1, False),
    (1, 1, 0, 1, False),  # one tap
    (7, 1, 3, 1, False),  # 49 taps
    ((1, 3), 2, (0, 1), (1, 3), True),
    (33, 4, 16, 1, False),  # 1089 taps: past the fast path's table, the plain scan
]
X_SHAPE, Y_SHAPE, Z_SHAPE = (2, 6, 41, 57), (3, 29, 35), (1, 1, 20, 70)


class MaxPools(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out: list[torch.Tensor] = []
        for k, s, p, d, c in CONFIGS:
            out += F.max_pool2d(x, k, s, p, d, ceil_mode=c, return_indices=True)
        out += F.max_pool2d(y, 3, 2, 1, return_indices=True)  # 3-D CHW input
        out += F.max_pool2d(y, 2, 3, 1, ceil_mode=True, return_indices=True)
        out += F.max_pool2d(z, 3, 2, 1, return_indices=True)  # one channel
        out += F.max_pool2d(z, (3, 5), 1, (1, 2), return_indices=True)
        return tuple(out)


def _gen(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def with_nans(shape: tuple[int, ...], seed: int) -> torch.Tensor:
    """Normal values, about 1% NaN, some +inf, -inf regions."""
    g = _gen(seed)
    x = torch.randn(shape, generator=g)
    x[torch.rand(shape, generator=g) < 0.01] = NAN
    x[torch.rand(shape, generator=g) < 0.005] = INF
    x[..., :6, :9] = -INF  # a -inf corner: border rows and columns
    return x


def nan_input() -> tuple[torch.Tensor, ...]:
    x, y, z = with_nans(X_SHAPE, 1), with_nans(Y_SHAPE, 2), with_nans(Z_SHAPE, 3)
    x[0, 0, 10, 20:23] = torch.tensor([NAN, 5.0, NAN])  # two NaNs, one window: the last wins
    x[0, 0, 11, 21] = NAN
    x[0, 1, 20, 30:34] = torch.tensor([-NAN, 1.0, NAN, 2.0])  # NaNs of both signs
    x[1, 3] = -INF  # a whole -inf plane: every index is the window's first tap
    x[1, 4, :, 40] = NAN  # a NaN column through the interior
    return x, y, z


def tie_input() -> tuple[torch.Tensor, ...]:
    """Small integers: equal maxima in most windows (the first is reported)."""
    return tuple(
        torch.randint(-3, 3, s, generator=_gen(10 + i)).float() for i, s in enumerate((X_SHAPE, Y_SHAPE, Z_SHAPE))
    )


def zero_input() -> tuple[torch.Tensor, ...]:
    """+0 and -0 at random: equal under >, so the first stays, sign and all."""
    out = []
    for i, s in enumerate((X_SHAPE, Y_SHAPE, Z_SHAPE)):
        sign = torch.randint(0, 2, s, generator=_gen(20 + i)).float() * 2 - 1
        out.append(torch.zeros(s) * sign)
    return tuple(out)


INPUTS = {"nan": nan_input, "ties": tie_input, "zeros": zero_input}


def bits(t: Any) -> np.ndarray:
    """Float32 values as their bit patterns (exact, NaN payload and zero sign
    included); indices as they are."""
    a = t.detach().numpy() if isinstance(t, torch.Tensor) else np.asarray(t)
    a = np.ascontiguousarray(a)
    return a.view(np.uint32) if a.dtype == np.float32 else a


def what(k: int) -> str:
    return " (indices)" if k % 2 else " (values)"


def assert_same(
    got: list[Any], expected: list[Any], who: str, skip: list[np.ndarray] | None = None, pairs: bool = True
) -> None:
    """Every output bit for bit; `skip` (one mask per pair of outputs) leaves
    out the positions it marks. `pairs`: the outputs are (values, indices)
    pairs."""
    assert len(got) == len(expected), f"{who}: {len(got)} outputs, expected {len(expected)}"
    for k, (g, e) in enumerate(zip(got, expected)):
        gb, eb = bits(g), bits(e)
        assert gb.shape == eb.shape and gb.dtype == eb.dtype, (
            f"{who}: output {k} is {gb.dtype}{gb.shape}, expected {eb.dtype}{eb.shape}"
        )
        differs = gb != eb
        if skip is not None:
            differs &= ~skip[k // 2]
        bad = np.argwhere(differs)
        assert bad.size == 0, (
            f"{who}: output {k}{what(k) if pairs else ''} differs at {len(bad)} places, "
            f"first {tuple(bad[0])}: {gb[tuple(bad[0])]} != {eb[tuple(bad[0])]}"
        )


@pytest.fixture(scope="module")
def program() -> bytes:
    return export_program(MaxPools(), nan_input())


@pytest.fixture
def restore_threads() -> Iterator[None]:
    before = pyexec.get_num_threads()
    yield
    pyexec.set_num_threads(before)


@pytest.mark.parametrize("kind", list(INPUTS))
def test_max_pool_matches_torch_and_executorch_at_1_and_2_threads(
    program: bytes, kind: str, restore_threads: None
) -> None:
    inputs = INPUTS[kind]()
    with torch.no_grad():
        expected = list(MaxPools()(*[x.clone() for x in inputs]))
    # ExecuTorch's portable kernel starts from the window's first tap and
    # takes only greater values, so it reports a NaN only there: compared
    # where the window holds no NaN (torch and pyexec report the last NaN).
    with torch.no_grad():
        nan_windows = [o.numpy() > 0 for o in MaxPools()(*[x.isnan().float() for x in inputs])[::2]]
    assert_same(run_with_executorch(program, list(inputs)), expected, "ExecuTorch", skip=nan_windows)
    for n in (1, 2):
        pyexec.set_num_threads(n)
        method = pyexec.load(program).load_method("forward")
        assert_same(method.execute([x.clone() for x in inputs]), expected, f"pyexec at {n} thread(s)")


def test_the_program_pools_with_the_kernel_under_test(program: bytes) -> None:
    assert "aten::max_pool2d_with_indices.out" in pyexec.load(program).operators("forward")[0]


# ---- avg_pool2d ----------------------------------------------------------------

# (kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)
AVG_CONFIGS: list[tuple[Any, Any, Any, bool, bool, int | None]] = [
    (3, 2, 1, False, True, None),
    (3, 1, 1, False, False, None),
    (2, 2, 0, False, True, None),
    (3, 3, 1, True, True, None),  # stride 3, ceil_mode
    ((2, 3), (1, 2), (1, 0), True, False, None),
    ((5, 4), (2, 3), (2, 1), False, True, 7),
    (7, 1, 3, False, False, None),
]


class AvgPools(torch.nn.Module):
    """avg_pool2d (float32 2-D: the fast path) or, with `as_3d`, the same pools
    as avg_pool3d over a depth of one, which takes the plain scan: pyexec's
    two must agree bit for bit."""

    def __init__(self, as_3d: bool) -> None:
        super().__init__()
        self.as_3d = as_3d

    def forward(self, x: torch.Tensor, z: torch.Tensor) -> tuple[torch.Tensor, ...]:
        out = []
        for t in (x, z):
            for k, s, p, c, inc, div in AVG_CONFIGS:
                if self.as_3d:
                    k3, s3, p3 = ((1, *_pair(k)), (1, *_pair(s)), (0, *_pair(p)))
                    out.append(F.avg_pool3d(t.unsqueeze(-3), k3, s3, p3, c, inc, div).squeeze(-3))
                else:
                    out.append(F.avg_pool2d(t, k, s, p, c, inc, div))
        return tuple(out)


def _pair(v: Any) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else tuple(v)


def avg_input(seed: int) -> tuple[torch.Tensor, torch.Tensor]:
    x, z = torch.randn(X_SHAPE, generator=_gen(seed)), torch.randn(Z_SHAPE, generator=_gen(seed + 1)) * 1e3
    x[0, 0, 3, 3:6] = torch.tensor([NAN, INF, -INF])
    x[1, 2, 10:20, 10:20] = 1e30  # large sums: rounding in every addition
    return x, z


def test_avg_pool_matches_the_plain_scan_torch_and_executorch(restore_threads: None) -> None:
    inputs = avg_input(30)
    pte = export_program(AvgPools(False), inputs)
    assert "aten::avg_pool2d.out" in pyexec.load(pte).operators("forward")[0]
    scan = pyexec.load(export_program(AvgPools(True), inputs)).load_method("forward")
    pyexec.set_num_threads(1)
    reference = scan.execute([x.clone() for x in inputs])  # the plain float scan
    with torch.no_grad():
        eager = AvgPools(False)(*[x.clone() for x in inputs])
    for k, (r, e) in enumerate(zip(reference, eager)):  # torch sums in double: close, not equal
        np.testing.assert_allclose(r.numpy(), e.numpy(), rtol=1e-5, atol=1e-5, err_msg=f"output {k}")
    assert_same(run_with_executorch(pte, list(inputs)), reference, "ExecuTorch", pairs=False)
    for n in (1, 2):
        pyexec.set_num_threads(n)
        method = pyexec.load(pte).load_method("forward")
        assert_same(method.execute([x.clone() for x in inputs]), reference, f"pyexec at {n} thread(s)", pairs=False)


# ---- the lesser SIMD variants ----------------------------------------------------

# Each in a fresh process (the variant is chosen once per process): runs
# every program on each of its input sets at 1 and 2 threads and writes the
# outputs back.
_WORKER = """
import json, sys
import numpy as np
import pyexec
for pte, inputs, out in json.loads(sys.stdin.read()):
    method = pyexec.load(pte).load_method("forward", output_type="numpy")
    data = np.load(inputs)
    results = {}
    for kind in sorted({k.split("/")[0] for k in data.files}):
        xs = [data[f"{kind}/{i}"] for i in range(sum(k.startswith(kind + "/") for k in data.files))]
        for n in (1, 2):
            pyexec.set_num_threads(n)
            for k, o in enumerate(method.execute([x.copy() for x in xs])):
                results[f"{kind}/{n}/{k}"] = o
    np.savez(out, **results)
"""


@pytest.mark.parametrize("isa", ["avx2", "portable"])
def test_lesser_simd_variants_give_the_same_results(
    program: bytes, isa: str, tmp_path: Path, restore_threads: None
) -> None:
    avg_inputs = avg_input(30)
    avg_pte = export_program(AvgPools(False), avg_inputs)
    pyexec.set_num_threads(1)
    avg_reference = pyexec.load(export_program(AvgPools(True), avg_inputs)).load_method("forward")
    jobs: list[tuple[bytes, dict[str, tuple[torch.Tensor, ...]], Any]] = [
        (program, {kind: make() for kind, make in INPUTS.items()}, lambda xs: list(MaxPools()(*xs))),
        (avg_pte, {"avg": avg_inputs}, lambda xs: avg_reference.execute([x.clone() for x in xs])),
    ]
    files = []
    for i, (pte, sets, _) in enumerate(jobs):
        paths = [tmp_path / f"{i}.pte", tmp_path / f"{i}.in.npz", tmp_path / f"{i}.out.npz"]
        paths[0].write_bytes(pte)
        np.savez(paths[1], **{f"{kind}/{k}": x.numpy() for kind, xs in sets.items() for k, x in enumerate(xs)})
        files.append([str(p) for p in paths])
    env = dict(os.environ, PYEXEC_POOL_ISA=isa, PYEXEC_PARALLEL_MIN_COST="1")
    r = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(_WORKER)],
        input=json.dumps(files),
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
        cwd=ROOT,
    )
    assert r.returncode == 0, r.stderr[-4000:]
    for (_, sets, reference), (_, _, out) in zip(jobs, files):
        got = np.load(out)
        for kind, xs in sets.items():
            with torch.no_grad():
                expected = reference(xs)
            for n in (1, 2):
                outputs = [got[f"{kind}/{n}/{k}"] for k in range(len(expected))]
                assert_same(outputs, expected, f"{isa}, {kind}, {n} thread(s)", pairs=kind != "avg")
