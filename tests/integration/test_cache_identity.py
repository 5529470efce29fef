"""A load from the packed-weight cache does not read the program's weights.

The cache file is named by the program's content hash, and hashing reads
every byte. So the cache directory keeps a record (NAME.pxid) of each file's
identity (device, inode, size, modification and status-change times) and its
hash, written once the file's times are more than three seconds old; a later
load of the unchanged file takes the hash from the record.

Each load runs in a child process; the parent evicts the program from the
page cache beforehand and asks the kernel (mincore) afterwards which of its
pages were read back.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import torch
from delegates.test_packed_file_pages import Mlp, _cached_pages
from support.export import assert_close
from support.xnnpack import export_xnnpack
from unit.test_hostile import child_env

RACY_SECONDS = 3  # native/src/runtime/weight_cache.c
SHAPE = (2, 2048)

CHILD = """
import sys, numpy as np, pyexec
m = pyexec.load(sys.argv[1]).load_method('forward')
if sys.argv[2] != '-':
    np.save(sys.argv[2], np.asarray(m.execute([np.ones((2, 2048), np.float32)])[0]))
"""


def _model(seed: int) -> Mlp:
    torch.manual_seed(seed)
    return Mlp().eval().requires_grad_(False)


def _write(path: Path, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())  # clean pages, which the kernel can evict when asked


def _settle(path: Path) -> None:
    """Waits until the file's times are older than the cache's racy window."""
    st = path.stat()
    age = time.time() - max(st.st_mtime, st.st_ctime)
    assert age > -1, "the file's times are in the future"
    if age < RACY_SECONDS + 0.2:
        time.sleep(RACY_SECONDS + 0.2 - age)


def _evict(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)
    cached, pages = _cached_pages(path)
    assert cached < pages // 100, f"the test needs the file out of the page cache: {cached} of {pages} pages stay"


def _load(path: Path, cache: Path, out: Path | None) -> None:
    """Loads the program's method in a child process, and runs it when out
    names a file for its output."""
    env = {**child_env(), "PYEXEC_CACHE_DIR": str(cache), "PYEXEC_CACHE": "1"}
    subprocess.run([sys.executable, "-c", CHILD, str(path), str(out or "-")], check=True, env=env,
                   capture_output=True, text=True)


def _run(path: Path, cache: Path, tmp: Path) -> np.ndarray:
    _load(path, cache, tmp / "out.npy")
    return np.load(tmp / "out.npy")


def _pages_read_by_load_method(path: Path, cache: Path) -> tuple[int, int]:
    _evict(path)
    _load(path, cache, None)
    return _cached_pages(path)


def _kinds(cache: Path) -> tuple[list[Path], list[Path]]:
    files = sorted(cache.iterdir()) if cache.is_dir() else []
    return [f for f in files if f.suffix == ".pxw"], [f for f in files if f.suffix == ".pxid"]


def test_a_cached_load_reads_no_weights(tmp_path: Path) -> None:
    model = _model(0)
    path, cache = tmp_path / "m.pte", tmp_path / "cache"
    _write(path, export_xnnpack(model, (torch.ones(*SHAPE),)))
    expected = model(torch.ones(*SHAPE)).numpy()

    # a modification time in the future (as a file being written could
    # have): the identity may not stand for the bytes yet
    later = time.time() + 3600
    os.utime(path, (later, later))
    first = _run(path, cache, tmp_path)  # packs, writes the cache file
    plans, records = _kinds(cache)
    assert len(plans) == 1 and records == [], "a file whose times are not settled got an identity record"
    assert_close(first, expected, what="packed at load vs eager")

    earlier = time.time() - 3600
    os.utime(path, (earlier, earlier))  # (this sets the status-change time to now)
    _settle(path)
    _run(path, cache, tmp_path)  # hashes the settled file once more, records it
    plans, records = _kinds(cache)
    assert len(plans) == 1 and len(records) == 1

    cached, pages = _pages_read_by_load_method(path, cache)
    # the flatbuffer and the delegate's graph at the start of the file, and
    # what the kernel reads ahead of the first fault there (8 MiB on some
    # VMs' disks, 128 KiB by default): under half of the 32 MiB file
    assert cached < pages // 2, f"a load from the cache read {cached} of the program's {pages} pages"
    assert np.array_equal(_run(path, cache, tmp_path), first), "the cached plans gave other bits than packing"

    # without the record the content is hashed again: every page is read
    records[0].unlink()
    cached, pages = _pages_read_by_load_method(path, cache)
    assert cached > pages * 9 // 10, f"hashing read only {cached} of the program's {pages} pages"
    assert len(_kinds(cache)[1]) == 1, "the record was not written again"
    assert np.array_equal(_run(path, cache, tmp_path), first)


def test_a_file_rewritten_in_place_is_not_taken_for_the_old_one(tmp_path: Path) -> None:
    """Same path, inode and size, other weights: the file's times changed, so
    its old record does not apply and its new content gets its own plans."""
    path, cache = tmp_path / "m.pte", tmp_path / "cache"
    old = export_xnnpack(_model(0), (torch.ones(*SHAPE),))
    _write(path, old)
    _settle(path)
    first = _run(path, cache, tmp_path)
    assert len(_kinds(cache)[1]) == 1
    _run(path, cache, tmp_path)  # the record used: the cache is mapped

    model = _model(1)
    new = export_xnnpack(model, (torch.ones(*SHAPE),))
    assert len(new) == len(old) and new != old
    ino = path.stat().st_ino
    with open(path, "r+b") as f:  # in place: the same inode
        f.write(new)
    assert path.stat().st_ino == ino
    out = _run(path, cache, tmp_path)
    assert not np.array_equal(out, first)
    assert_close(out, model(torch.ones(*SHAPE)).numpy(), what="rewritten program vs eager")
    assert len(_kinds(cache)[0]) == 2, "the rewritten program was not packed into a cache file of its own"


def test_a_damaged_record_is_ignored_and_replaced(tmp_path: Path) -> None:
    model = _model(0)
    path, cache = tmp_path / "m.pte", tmp_path / "cache"
    _write(path, export_xnnpack(model, (torch.ones(*SHAPE),)))
    _settle(path)
    first = _run(path, cache, tmp_path)
    (record,) = _kinds(cache)[1]
    good = record.read_bytes()
    damaged = [b"", good[:40], bytes(len(good)), good[:-8] + bytes(8), bytes([good[0] ^ 1]) + good[1:],
               good[:80] + bytes([good[80] ^ 1]) + good[81:]]  # the magic, the hash
    for bad in damaged:
        record.write_bytes(bad)
        out = _run(path, cache, tmp_path)
        assert np.array_equal(out, first)
        assert record.read_bytes() == good, f"a damaged record ({len(bad)} bytes) was not replaced"
    assert len(_kinds(cache)[0]) == 1
