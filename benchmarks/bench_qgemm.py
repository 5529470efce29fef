"""The integer GEMM of quantized programs against the machine's memory bandwidth.

    python benchmarks/bench_qgemm.py [--build native/build] [--runs 5] [--quick]

Builds benchmarks/qgemm_bench.c against the library objects of a build
directory (make -C native first; BUILD=... for another one), runs it with one
thread (PYEXEC_NUM_THREADS=1) and prints the machine's copy and read
bandwidth, then for qd8 x qc8w, qd8 x qb4w (blocks of 32 and 128) and
qd8 x qc4w at M = 1 (decode) and M = 64, K = N = 2048 and 4096, per
micro-kernel path: microseconds per product, GOP/s (2 M N K per second) and,
at M = 1, the packed weight bytes streamed per second beside a plain read of
as many bytes from memory (both from the quickest of many single calls).
--quick caps the calls per timing (its M = 1 figures then partly come from
the cache)."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def build(build_dir: Path, exe: Path) -> None:
    objs = sorted(str(p) for p in (build_dir / "obj").rglob("*.o"))
    if not objs:
        sys.exit(f"no objects under {build_dir}/obj: run make -C native BUILD=... first")
    cc = os.environ.get("CC") or shutil.which("cc") or "gcc"
    cmd = [cc, "-std=c11", "-D_GNU_SOURCE", "-O2", f"-I{ROOT}/native/include", f"-I{ROOT}/native/src"]
    cmd += [str(ROOT / "benchmarks" / "qgemm_bench.c"), *objs, "-lm", "-lpthread", "-o", str(exe)]
    subprocess.run(cmd, check=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=str(ROOT / "native" / "build"), help="library build directory")
    parser.add_argument("--runs", type=int, default=5, help="timed runs per figure (best kept)")
    parser.add_argument("--quick", action="store_true", help="fewer calls per timing")
    parser.add_argument("--only", default="", help="only the products whose name contains this (e.g. 'qb4w g32')")
    parser.add_argument("--size", type=int, default=0, help="only K = N = this size")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "qgemm_bench"
        build(Path(args.build), exe)
        env = dict(os.environ, PYEXEC_NUM_THREADS="1")
        cmd = [str(exe), str(args.runs), "quick" if args.quick else "full"]
        if args.only or args.size:
            cmd += [args.only or "qd8", str(args.size)]
        out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env)
    res = json.loads(out.stdout)
    print(f"one thread; memcpy {res['copy_gbs']:.2f} GB/s copied, plain read {res['read_gbs']:.2f} GB/s (256 MiB)")
    print(f"best micro-kernels here: {res['best_path']}")
    print("M = 1: weights GB/s from the quickest call; 'read' a plain read of as many bytes timed the same way")
    hdr = f"{'product':18} {'path':16} {'M':>3} {'N=K':>5} {'us':>10} {'GOP/s':>7}"
    print(f"{hdr} {'weights GB/s':>13} {'read GB/s':>10} {'ratio':>6}")
    for r in res["results"]:
        line = f"{r['kind']:18} {r['path']:16} {r['M']:3d} {r['N']:5d} {r['us']:10.1f} {r['gops']:7.1f}"
        if r["M"] == 1 and r["read_same_gbs"] > 0:
            ratio = r["weight_gbs"] / r["read_same_gbs"]
            line += f" {r['weight_gbs']:13.2f} {r['read_same_gbs']:10.2f} {ratio:6.2f}"
        print(line)


if __name__ == "__main__":
    main()
