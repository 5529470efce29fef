"""Mutation fuzzing of real programs through the Python API: every mutated
file must load, run, or fail with a pyexec.Error, never crash or raise
anything else. Cases run in a child process; a crash leaves the offending
file in --out.

    python scripts/fuzz_programs.py FILE.pte [FILE.pte ...] --cases 2000 --out /tmp/crashes
"""

from __future__ import annotations

import argparse
import os
import random
import struct
import subprocess
import sys
from pathlib import Path

import numpy as np

NUMPY_DTYPES = {
    "float32": np.float32, "float64": np.float64, "float16": np.float16, "int64": np.int64, "int32": np.int32,
    "int16": np.int16, "int8": np.int8, "uint8": np.uint8, "bool": np.bool_,
}


def mutate(data: bytes, rng: random.Random) -> bytes:
    b = bytearray(data)
    for _ in range(rng.choice([1, 1, 2, 4, 8])):
        kind = rng.randrange(5)
        if kind == 0 and len(b) > 8:
            b = b[: rng.randrange(8, len(b))]
        elif len(b) == 0:
            continue
        elif kind == 1:
            b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        elif kind == 2:
            b[rng.randrange(len(b))] = rng.choice([0, 0xFF, 0x7F, 0x80, 1])
        elif len(b) >= 4:
            pos = rng.randrange(len(b) - 3) & ~3
            value = rng.choice([0, 1, 0x7FFFFFFF, 0xFFFFFFFF, 0x80000000, len(b), len(b) - 4, rng.randrange(1 << 32)])
            b[pos : pos + 4] = struct.pack("<I", value)
    return bytes(b)


def run_case(data: bytes, rng: np.random.Generator) -> None:
    import pyexec

    try:
        program = pyexec.load(data)
        for name in program.method_names:
            method = program.load_method(name)
            inputs = []
            for info in method.meta.inputs:
                if info is None:
                    inputs.append(0)
                    continue
                dtype = NUMPY_DTYPES.get(info.dtype, np.float32)
                if int(np.prod(info.sizes)) > 1 << 22:
                    raise pyexec.InvalidArgumentError("input too large for fuzzing")
                inputs.append((rng.standard_normal(info.sizes) * 3).astype(dtype))
            method.execute(inputs)
    except pyexec.Error:
        pass


def child(files: list[str], seed: int, cases: int, out: Path) -> None:
    rng = random.Random(seed)
    nrng = np.random.default_rng(seed)
    originals = [Path(f).read_bytes() for f in files]
    current = out / f"current-{os.getpid()}.pte"
    for _ in range(cases):
        data = mutate(rng.choice(originals), rng)
        current.write_bytes(data)
        run_case(data, nrng)
    current.unlink(missing_ok=True)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("files", nargs="+")
    parser.add_argument("--cases", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=Path("fuzz-crashes"))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.child:
        child(args.files, args.seed, args.cases, args.out)
        return
    crashes = 0
    seed = args.seed
    remaining = args.cases
    while remaining > 0:
        batch = min(remaining, 500)
        proc = subprocess.run([sys.executable, __file__, *args.files, "--cases", str(batch), "--seed", str(seed),
                               "--out", str(args.out), "--child"], capture_output=True, text=True)
        if proc.returncode != 0:
            crashes += 1
            for cur in args.out.glob("current-*.pte"):
                cur.rename(args.out / f"crash-{seed}.pte")
            print(f"batch seed {seed}: exit {proc.returncode}\n{proc.stderr[-2000:]}")
        remaining -= batch
        seed += 1
    print(f"{args.cases} cases, {crashes} crashing batches")
    sys.exit(1 if crashes else 0)


if __name__ == "__main__":
    main()
