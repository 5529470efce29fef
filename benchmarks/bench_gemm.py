"""The machine's single-core float32 FMA peak and the GEMM engine against it.

    python benchmarks/bench_gemm.py [--build native/build] [--runs 5]

Builds benchmarks/gemm_peak.c against the library objects of a build
directory (make -C native first; BUILD=... for another one), runs it with
one thread (PYEXEC_NUM_THREADS=1) and prints the 512-bit and 256-bit FMA peaks
and, per product shape the model zoo uses (a pre-packed constant B, as
convolution and linear weights are packed at load), GFLOP/s and the
percentage of the higher peak."""

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
    cmd += [str(ROOT / "benchmarks" / "gemm_peak.c"), *objs, "-lm", "-lpthread", "-o", str(exe)]
    subprocess.run(cmd, check=True)


def measure_peaks(runs: int = 20) -> dict[str, float]:
    """The single-core peaks gemm_peak.c measures when built with -DPEAK_ONLY
    (no library): float32 FMA GFLOP/s with 512-bit and 256-bit vectors
    ("peak_avx512_gflops", "peak_avx2_gflops") and int8 GOP/s of AVX-512
    VNNI's vpdpbusd ("peak_vnni_int8_gops"); 0 where the CPU lacks them."""
    cc = os.environ.get("CC") or shutil.which("cc") or "gcc"
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "peak"
        src = str(ROOT / "benchmarks" / "gemm_peak.c")
        subprocess.run([cc, "-std=c11", "-D_GNU_SOURCE", "-O2", "-DPEAK_ONLY", src, "-o", str(exe)], check=True)
        out = subprocess.run([str(exe), str(runs)], check=True, capture_output=True, text=True)
    return {k: float(v) for k, v in json.loads(out.stdout).items()}


def measure_peak(runs: int = 20) -> float:
    """The single-core float32 FMA peak in GFLOP/s (the higher of the 512-bit
    and 256-bit loops)."""
    res = measure_peaks(runs)
    return max(res["peak_avx512_gflops"], res["peak_avx2_gflops"])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--build", default=str(ROOT / "native" / "build"), help="library build directory")
    parser.add_argument("--runs", type=int, default=20, help="timed runs per figure (best kept)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        exe = Path(tmp) / "gemm_peak"
        build(Path(args.build), exe)
        env = dict(os.environ, PYEXEC_NUM_THREADS="1")
        out = subprocess.run([str(exe), str(args.runs)], check=True, capture_output=True, text=True, env=env)
    res = json.loads(out.stdout)
    peak = max(res["peak_avx512_gflops"], res["peak_avx2_gflops"])
    print(f"single-core FMA peak: AVX-512 {res['peak_avx512_gflops']:.1f} GFLOP/s, AVX2 {res['peak_avx2_gflops']:.1f}")
    print(f"{'product':36} {'M':>5} {'N':>5} {'K':>5} {'GFLOP/s':>8} {'% peak':>7}")
    for g in res["gemm"]:
        pct = 100.0 * g["gflops"] / peak if peak else float("nan")
        print(f"{g['name']:36} {g['M']:5d} {g['N']:5d} {g['K']:5d} {g['gflops']:8.1f} {pct:6.1f}%")


if __name__ == "__main__":
    main()
