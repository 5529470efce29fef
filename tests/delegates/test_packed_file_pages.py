"""What loading does to the file's pages once its weights are packed: the
process stops mapping them (its resident memory does not hold the file beside
the packed copy), and they stay in the page cache, so that the next process
to load the same file reads memory, not the disk.

Each program is loaded, prepared and run in a child process; the parent then
asks the kernel (mincore) which of the file's pages are still cached.
"""

from __future__ import annotations

import ctypes
import mmap
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from support.export import export_program
from support.xnnpack import export_xnnpack
from unit.test_hostile import SANITIZED, child_env

MIB = 2**20


class Mlp(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(2048, 2048)
        self.b = torch.nn.Linear(2048, 2048)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.a(x)))


class ConvNet(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Conv2d(256, 512, 3, padding=1)
        self.bn = torch.nn.BatchNorm2d(512)
        self.b = torch.nn.Conv2d(512, 512, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.b(torch.relu(self.bn(self.a(x))))


def _program(name: str) -> tuple[bytes, tuple[int, ...]]:
    torch.manual_seed(0)
    mlp, conv = Mlp().eval(), ConvNet().eval()
    x_mlp, x_conv = (torch.randn(2, 2048),), (torch.randn(1, 256, 6, 6),)
    programs = {
        "xnnpack_linear": (lambda: export_xnnpack(mlp, x_mlp), (2, 2048)),
        "xnnpack_conv": (lambda: export_xnnpack(conv, x_conv), (1, 256, 6, 6)),
        # portable: the batch norm is folded into the convolution at load
        "portable_conv_bn": (lambda: export_program(conv, x_conv), (1, 256, 6, 6)),
    }
    export, shape = programs[name]
    return export(), shape


CHILD = """
import sys, numpy as np, pyexec
def rss_file():
    for line in open('/proc/self/status'):
        if line.startswith('RssFile:'):
            return int(line.split()[1]) * 1024
base = rss_file()
m = pyexec.load(sys.argv[1]).load_method('forward')
m.execute([np.ones(tuple(int(d) for d in sys.argv[2:]), np.float32)])
print(rss_file() - base)
"""


def _cached_pages(path: Path) -> tuple[int, int]:
    """(pages of the file in the page cache, pages in all), from mincore on a
    read-only mapping of it (mapping it reads nothing)."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.mmap.restype = ctypes.c_void_p
    libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
    libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
    libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.POINTER(ctypes.c_ubyte)]
    size = path.stat().st_size
    pages = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE
    fd = os.open(path, os.O_RDONLY)
    try:
        addr = libc.mmap(None, size, mmap.PROT_READ, mmap.MAP_SHARED, fd, 0)
        if addr in (None, ctypes.c_void_p(-1).value):
            raise OSError(ctypes.get_errno(), "mmap failed")
        try:
            vec = (ctypes.c_ubyte * pages)()
            if libc.mincore(addr, size, vec) != 0:
                raise OSError(ctypes.get_errno(), "mincore failed")
        finally:
            libc.munmap(addr, size)
    finally:
        os.close(fd)
    return sum(v & 1 for v in vec), pages


@pytest.mark.skipif(SANITIZED, reason="resident memory is meaningless under AddressSanitizer")
@pytest.mark.parametrize("name", ["xnnpack_linear", "xnnpack_conv", "portable_conv_bn"])
def test_packed_weights_leave_the_file_in_the_page_cache_and_out_of_the_process(name: str, tmp_path: Path) -> None:
    pte, shape = _program(name)
    path = tmp_path / "m.pte"
    with open(path, "wb") as f:
        f.write(pte)
        f.flush()
        os.fsync(f.fileno())  # clean pages: the kernel could evict them if asked to
    path.read_bytes()
    cached, pages = _cached_pages(path)
    assert cached == pages, f"the test needs the file cached first: {cached} of {pages} pages"
    env = {**child_env(), "PYEXEC_CACHE": "0"}  # packs at load (no packed-weight cache file)
    proc = subprocess.run([sys.executable, "-c", CHILD, str(path), *map(str, shape)],
                          capture_output=True, text=True, check=True, env=env)
    file_resident = int(proc.stdout.split()[-1])
    cached, pages = _cached_pages(path)
    assert cached == pages, f"loading evicted {pages - cached} of the file's {pages} pages from the page cache"
    # the weights are nearly all of the file (14 to 32 MiB); what stays
    # mapped is its header and the constants nothing packed (biases), each
    # with its neighbours when the kernel maps the file in large folios
    # (up to 2 MiB around each)
    assert file_resident < 0.4 * len(pte), (
        f"{file_resident / MIB:.1f} MiB of the {len(pte) / MIB:.1f} MiB file still resident after packing"
    )
