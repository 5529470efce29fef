"""Load cost against weight size: a program loaded from a path maps its
constants instead of copying them, so load time and resident memory stay flat
until the weights are touched by a run. Compared with ExecuTorch 1.5.1's
Runtime.load_program on the same files.

Each measurement runs in a fresh process (resident memory is read from
/proc/self/statm); the files are read once beforehand so that both runtimes
find them in the page cache.

    python benchmarks/bench_load.py [--quick]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import print_table

PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_mib() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * PAGE / 2**20


def child(runtime: str, path: str, features: int) -> None:
    """Runs in a fresh process: load, load the method, run once."""
    import torch

    x = torch.ones(1, features)
    if runtime == "pyexec":
        import pyexec

        load = pyexec.load
    else:
        from executorch.runtime import Runtime

        load = Runtime.get().load_program
    base = rss_mib()  # after the imports: only what loading this file adds
    t0 = time.perf_counter()
    program = load(path)
    t1 = time.perf_counter()
    rss_load = rss_mib()
    method = program.load_method("forward")
    t2 = time.perf_counter()
    rss_method = rss_mib()
    out = method.execute([x])
    t3 = time.perf_counter()
    assert out[0].shape == (1, features)
    print(json.dumps({
        "load_ms": (t1 - t0) * 1e3, "method_ms": (t2 - t1) * 1e3, "first_run_ms": (t3 - t2) * 1e3,
        "rss_load": rss_load - base, "rss_method": rss_method - base, "rss_run": rss_mib() - base,
    }))


def export_linear(features: int, path: Path) -> None:
    import torch
    from support.export import export_program  # tests/, put on the path by _common

    torch.manual_seed(0)
    module = torch.nn.Linear(features, features, bias=False).eval().requires_grad_(False)
    path.write_bytes(export_program(module, (torch.ones(1, features),)))


def measure(runtime: str, path: Path, features: int) -> dict[str, float]:
    path.read_bytes()  # into the page cache
    out = subprocess.run(
        [sys.executable, __file__, "--child", runtime, str(path), str(features)],
        check=True, capture_output=True, text=True,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--child", nargs=3, metavar=("RUNTIME", "PATH", "FEATURES"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args.child[0], args.child[1], int(args.child[2]))
        return
    sizes = {"1 MB": 512, "100 MB": 5000}  # Linear(n, n) float32 weights: 4 n^2 bytes
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for label, n in sizes.items():
            path = Path(tmp) / f"linear_{n}.pte"
            export_linear(n, path)
            mb = path.stat().st_size / 1e6
            for runtime in ("pyexec", "ExecuTorch"):
                r = measure(runtime, path, n)
                rows.append([
                    f"{label} ({mb:.1f} MB file)", runtime, f"{r['load_ms']:.2f} ms", f"{r['method_ms']:.2f} ms",
                    f"{r['rss_load']:.1f} MiB", f"{r['rss_method']:.1f} MiB", f"{r['first_run_ms']:.1f} ms",
                    f"{r['rss_run']:.1f} MiB",
                ])
    print_table(
        "Loading from a path: time and resident memory added (fresh process each)",
        ["weights", "runtime", "load", "load_method", "RSS after load", "after load_method", "first run",
         "after first run"],
        rows,
    )


if __name__ == "__main__":
    main()
