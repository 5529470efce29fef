"""The packed-weight cache (PYEXEC_CACHE, PYEXEC_CACHE_DIR) on ExecuTorch's
llama example exported for XNNPACK 8da4w (4-bit weights, packed at load).

PYEXEC_CACHE=1 forces the cache on for this small program (by default it is
on only for programs of 4 MiB and more). The first load writes one file;
the next maps it (visible in /proc/self/maps) and gives the same bits as a
load without the cache, and logits within the 8da4w tolerance of
test_llm_generate.py of ExecuTorch's runtime. A damaged, truncated, stale or
foreign cache file is ignored and rewritten; two processes loading at once
both succeed and leave one valid file; PYEXEC_CACHE=0 writes nothing; a
directory that cannot be written still loads."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import torch
from support import ROOT
from support.export import assert_close
from support.llm import llama_example

import pyexec

_spec = importlib.util.spec_from_file_location("pyexec_example_generate", ROOT / "examples" / "llm" / "generate.py")
assert _spec is not None and _spec.loader is not None
generate = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(generate)

pytestmark = pytest.mark.slow  # exports the model with export_llm when not cached

Q8_TOL = {"rtol": 0.0, "atol": 2e-2}  # as test_llm_generate.py's 8da4w logits
INPUTS = [torch.tensor([[1, 17, 59, 3]], dtype=torch.long), torch.tensor([0], dtype=torch.long)]


@pytest.fixture(scope="module")
def pte_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pte, _ = llama_example("xnnpack-8da4w")
    path = tmp_path_factory.mktemp("model") / "model.pte"
    path.write_bytes(pte)
    return path


@pytest.fixture
def cache_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    d = tmp_path / "cache"
    monkeypatch.setenv("PYEXEC_CACHE_DIR", str(d))
    monkeypatch.setenv("PYEXEC_CACHE", "1")
    yield d


def _run(path: Path) -> tuple[torch.Tensor, bool]:
    """The logits of one load and run, and whether a cache file is mapped."""
    program = pyexec.load(path)
    method = program.load_method("forward")
    out = method.execute(INPUTS)[0]
    maps = Path("/proc/self/maps").read_text()
    mapped = any(line.endswith(".pxw") for line in maps.splitlines())
    del method, program
    return out, mapped


def _files(d: Path) -> list[Path]:
    """The cache files (not the programs' identity records, .pxid)."""
    return sorted(f for f in d.iterdir() if f.suffix == ".pxw") if d.is_dir() else []


def _uncached(path: Path, monkeypatch: pytest.MonkeyPatch) -> torch.Tensor:
    with monkeypatch.context() as m:
        m.setenv("PYEXEC_CACHE", "0")
        return _run(path)[0]


def test_written_then_mapped(pte_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = _uncached(pte_path, monkeypatch)
    first, mapped = _run(pte_path)
    assert not mapped
    files = _files(cache_dir)
    assert len(files) == 1 and files[0].suffix == ".pxw" and files[0].stat().st_size > 0
    second, mapped = _run(pte_path)
    assert mapped, "the second load does not map the cache file"
    assert _files(cache_dir) == files
    assert torch.equal(first, plain) and torch.equal(second, plain)
    expected = generate.executorch_method(pte_path, None).execute(INPUTS)[0]
    assert_close(second, expected, **Q8_TOL, what="cached logits vs ExecuTorch")


def _damage(f: Path, how: str) -> None:
    b = bytearray(f.read_bytes())
    if how == "truncated":
        b = b[: len(b) // 2]
    elif how == "bitflip_data":
        b[len(b) // 3] ^= 0x10
    elif how == "bitflip_header":
        b[20] ^= 0x01  # inside the key
    elif how == "version":
        b[8] = (b[8] + 1) % 256  # the format version follows the 8-byte magic
    elif how == "empty":
        b = bytearray()
    elif how == "garbage":
        b = bytearray(os.urandom(len(b)))
    f.write_bytes(bytes(b))


@pytest.mark.parametrize("how", ["truncated", "bitflip_data", "bitflip_header", "version", "empty", "garbage"])
def test_bad_file_rebuilt(pte_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch, how: str) -> None:
    plain = _uncached(pte_path, monkeypatch)
    _run(pte_path)
    (f,) = _files(cache_dir)
    good = f.read_bytes()
    _damage(f, how)
    out, _ = _run(pte_path)  # ignored, packed again, rewritten
    assert torch.equal(out, plain)
    assert _files(cache_dir) == [f]
    assert f.read_bytes() == good
    out, mapped = _run(pte_path)
    assert mapped and torch.equal(out, plain)


def test_other_key_not_used(pte_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A valid file of another packing (another PYEXEC_GEMM_ISA) under this
    file's name is stale: its key differs, so it is rebuilt."""
    plain = _uncached(pte_path, monkeypatch)
    _run(pte_path)
    (f,) = _files(cache_dir)
    with monkeypatch.context() as m:
        m.setenv("PYEXEC_GEMM_ISA", "portable")
        _run(pte_path)
    other = [g for g in _files(cache_dir) if g != f]
    assert len(other) == 1
    os.replace(other[0], f)
    out, _ = _run(pte_path)
    assert torch.equal(out, plain)
    out, mapped = _run(pte_path)
    assert mapped and torch.equal(out, plain)


def test_a_killed_writers_leftovers_are_removed(pte_path: Path, cache_dir: Path) -> None:
    """A writer killed mid-write leaves NAME.tmp.XXXXXX behind. The next
    writer of that file removes those untouched for over an hour, and
    leaves a recent one (a writer still at work) and other names alone."""
    _run(pte_path)
    (f,) = _files(cache_dir)
    f.unlink()  # so that the next load writes it again
    hour_ago = time.time() - 3700
    stale = [cache_dir / f"{f.name}.tmp.{s}" for s in ("a1B2c3", "ZZZZZZ")]
    fresh = cache_dir / f"{f.name}.tmp.q9W8e7"
    other = [cache_dir / f"{f.name}.tmp.notes", cache_dir / "other.pxw.tmp.a1B2c3"]
    for p in [*stale, fresh, *other]:
        p.write_bytes(b"partial")
    for p in [*stale, *other]:
        os.utime(p, (hour_ago, hour_ago))
    _, mapped = _run(pte_path)
    assert not mapped and f.is_file()
    assert not any(p.exists() for p in stale), "stale temporaries were left"
    assert fresh.exists() and all(p.exists() for p in other)


def test_off_writes_nothing(pte_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYEXEC_CACHE", "0")
    _, mapped = _run(pte_path)
    assert not mapped and _files(cache_dir) == []


def test_small_program_off_by_default(pte_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("PYEXEC_CACHE")
    assert pte_path.stat().st_size < 4 << 20
    _run(pte_path)
    assert _files(cache_dir) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a read-only directory")
def test_read_only_dir(pte_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    plain = _uncached(pte_path, monkeypatch)
    cache_dir.mkdir()
    cache_dir.chmod(0o555)
    try:
        out, mapped = _run(pte_path)
        assert not mapped and torch.equal(out, plain) and _files(cache_dir) == []
    finally:
        cache_dir.chmod(0o755)


def test_unusable_dir(pte_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """A cache directory that cannot be created (a file is in the way) still loads."""
    plain = _uncached(pte_path, monkeypatch)
    blocker = tmp_path / "file"
    blocker.write_text("x")
    monkeypatch.setenv("PYEXEC_CACHE_DIR", str(blocker / "cache"))
    out, mapped = _run(pte_path)
    assert not mapped and torch.equal(out, plain)


_CHILD = """
import sys, torch, pyexec
p = pyexec.load(sys.argv[1]); m = p.load_method("forward")
out = m.execute([torch.tensor([[1, 17, 59, 3]]), torch.tensor([0])])[0]
torch.save(out, sys.argv[2])
"""


def test_concurrent_loads(pte_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    plain = _uncached(pte_path, monkeypatch)
    outs = [tmp_path / f"out{i}.pt" for i in range(2)]
    procs = [subprocess.Popen([sys.executable, "-c", _CHILD, str(pte_path), str(o)]) for o in outs]
    assert [p.wait(timeout=300) for p in procs] == [0, 0]
    for o in outs:
        assert torch.equal(torch.load(o), plain)
    (f,) = _files(cache_dir)  # one file, no temporary left
    out, mapped = _run(pte_path)
    assert mapped and torch.equal(out, plain)


def test_float32_with_data_file(tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The float32 XNNPACK export with its weights in a .ptd: FullyConnected's
    float panels are cached too, keyed by the data file's content as well."""
    pte, ptd = llama_example("xnnpack-ptd")
    assert ptd is not None
    p, d = tmp_path / "model.pte", tmp_path / "model.ptd"
    p.write_bytes(pte)
    d.write_bytes(ptd)

    def run() -> tuple[torch.Tensor, bool]:
        program = pyexec.load(p, data_path=d)
        method = program.load_method("forward")
        out = method.execute(INPUTS)[0]
        return out, any(line.endswith(".pxw") for line in Path("/proc/self/maps").read_text().splitlines())

    with monkeypatch.context() as m:
        m.setenv("PYEXEC_CACHE", "0")
        plain, _ = run()
    first, mapped = run()
    assert not mapped and len(_files(cache_dir)) == 1
    second, mapped = run()
    assert mapped and torch.equal(first, plain) and torch.equal(second, plain)
    expected = generate.executorch_method(p, d).execute(INPUTS)[0]
    assert_close(second, expected, rtol=0.0, atol=1e-4, what="cached logits vs ExecuTorch")
    # another data file (the same bytes but one weight changed) is another key
    b = bytearray(ptd)
    b[len(b) - 8] ^= 1
    d.write_bytes(bytes(b))
    run()
    assert len(_files(cache_dir)) == 2


class _Convs(torch.nn.Module):
    """A Winograd 3x3 (32 -> 32 channels), a strided direct 3x3, a depthwise
    3x3 and a 1x1 convolution, then a linear layer."""

    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Conv2d(3, 32, 3, padding=1)
        self.wino = torch.nn.Conv2d(32, 32, 3, padding=1)
        self.down = torch.nn.Conv2d(32, 48, 3, stride=2, padding=1)
        self.dw = torch.nn.Conv2d(48, 48, 3, padding=1, groups=48)
        self.pw = torch.nn.Conv2d(48, 24, 1)
        self.fc = torch.nn.Linear(24, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.wino(torch.relu(self.stem(x))))
        y = self.pw(torch.relu(self.dw(torch.relu(self.down(y)))))
        return self.fc(y.mean((2, 3)))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_convolution_plans_cached(
    tmp_path: Path, cache_dir: Path, monkeypatch: pytest.MonkeyPatch, dtype: torch.dtype
) -> None:
    """A CNN's convolution plans (packed, Winograd-transformed and depthwise
    filters with their biases) are cached with the linear layers' panels:
    the second load maps the file and packs nothing, with the same bits as
    a load without the cache, and within ExecuTorch's XNNPACK result."""
    from executorch.runtime import Runtime
    from support.xnnpack import export_xnnpack, has_avx512_fp16

    torch.manual_seed(0)
    module = _Convs().eval().to(dtype)
    x = torch.randn(1, 3, 20, 20).to(dtype)
    path = tmp_path / "cnn.pte"
    path.write_bytes(export_xnnpack(module, (x,)))

    def run() -> tuple[torch.Tensor, bool]:
        method = pyexec.load(path).load_method("forward")
        out = method.execute([x])[0]
        return out, any(line.endswith(".pxw") for line in Path("/proc/self/maps").read_text().splitlines())

    with monkeypatch.context() as m:
        m.setenv("PYEXEC_CACHE", "0")
        plain, _ = run()
    first, mapped = run()
    files = _files(cache_dir)
    assert not mapped and len(files) == 1
    # the Winograd filter alone is 16 positions x 32 x 32 floats (64 KiB);
    # the linear layer's panels are under 4 KiB. Where float16 sums in
    # float16 (AVX512-FP16: no Winograd), the two 3x3 filters' float16 panels
    # are 288 deep and 32 and 64 wide (48 columns in whole 32-column panels).
    native16 = dtype == torch.float16 and has_avx512_fp16()
    floor = 288 * (32 + 64) * 2 if native16 else 16 * 32 * 32 * 4
    assert files[0].stat().st_size > floor, (files[0].stat().st_size, floor)
    second, mapped = run()
    assert mapped, "the second load does not map the cache file"
    assert torch.equal(first, plain) and torch.equal(second, plain)
    expected = Runtime.get().load_program(path).load_method("forward").execute([x])[0]
    tol = 1e-2 if dtype == torch.float16 else 1e-4
    assert_close(second.float(), expected.float(), rtol=0.0, atol=tol, what="cached CNN vs ExecuTorch")


def test_depthwise_plan_is_cached_at_its_filter_size(tmp_path: Path, cache_dir: Path) -> None:
    """A depthwise filter is kept whole (taps x channels), so its cache entry
    is about the filter's bytes: 512 channels of 3x3 taps are 18 KiB, where
    one copy per channel would be 512 times that (9 MiB)."""
    from support.xnnpack import export_xnnpack

    torch.manual_seed(0)
    module = torch.nn.Conv2d(512, 512, 3, padding=1, groups=512).eval()
    x = torch.randn(1, 512, 6, 6)
    path = tmp_path / "dw.pte"
    path.write_bytes(export_xnnpack(module, (x,)))
    method = pyexec.load(path).load_method("forward")
    out = method.execute([x])[0]
    del method
    files = _files(cache_dir)
    assert len(files) == 1
    filter_and_bias = 512 * 9 * 4 + 512 * 4
    assert filter_and_bias < files[0].stat().st_size < filter_and_bias + (64 << 10), files[0].stat().st_size
    assert_close(out, module(x).detach(), rtol=1e-4, atol=1e-5, what="depthwise vs eager")
