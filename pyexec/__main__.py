"""Command line: `python -m pyexec demo | inspect FILE.pte`."""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from . import Error, TensorInfo, load

DEMO_MODEL = Path(__file__).resolve().parent / "demo" / "decoder.pte"


def _fmt_info(info: TensorInfo | None) -> str:
    if info is None:
        return "non-tensor value"
    flags = ["planned" if info.is_memory_planned else "unplanned"]
    if info.is_dynamic:
        flags.append("dynamic (sizes are upper bounds)")
    if info.is_mutated:
        flags.append("written by the program")
    return f"{info.dtype}{list(info.sizes)} " + ", ".join(flags)


def inspect(path: str) -> int:
    program = load(path)
    for name in program.method_names:
        meta = program.method_meta(name)
        print(f"method {name!r}")
        for j, info in enumerate(meta.inputs):
            print(f"  input {j}: {_fmt_info(info)}")
        method = None
        try:
            method = program.load_method(name)
        except Error:
            pass
        for i, info in enumerate(meta.outputs):
            alias = method.output_aliases_input(i) if method is not None else None
            note = f" (is input {alias})" if alias is not None else ""
            print(f"  output {i}: {_fmt_info(info)}{note}")
        ops, missing = program.operators(name)
        print(f"  operators ({len(ops)}): {', '.join(ops)}")
        if missing:
            print(f"  MISSING kernels ({len(missing)}): {', '.join(missing)}")
    return 0


def demo(steps: int) -> int:
    """Greedy decoding with the shipped decoder: the KV caches are caller-owned
    numpy arrays that the program updates in place, and the logits output is
    bound to a caller buffer; nothing is copied in or out per step."""
    program = load(DEMO_MODEL)
    method = program.load_method("forward", output_type="numpy")
    meta = method.meta
    cache_infos = [i for i in meta.inputs[2:] if i is not None]
    caches = [np.zeros(i.sizes, dtype=np.float32) for i in cache_infos]
    last = len(meta.outputs) - 1
    logits_info = meta.outputs[last]
    assert logits_info is not None
    logits = np.empty(logits_info.sizes, dtype=np.float32)
    method.set_output(logits, last)
    aliases = {i: method.output_aliases_input(i) for i in range(len(meta.outputs))}
    max_steps = cache_infos[0].sizes[2]
    steps = min(steps, max_steps)

    token = 1
    tokens: list[int] = []
    times: list[float] = []
    for pos in range(steps):
        t0 = time.perf_counter()
        out = method.execute([np.array([[token]]), np.array([pos]), *caches], clone_outputs=False)
        times.append(time.perf_counter() - t0)
        assert out[last] is logits
        token = int(logits.argmax())
        tokens.append(token)

    # What a runtime that copies the caches in and out every step would add.
    scratch = [np.empty_like(c) for c in caches]
    copy_times = []
    for _ in range(20):
        t0 = time.perf_counter()
        for c, s in zip(caches, scratch):
            np.copyto(s, c)
            np.copyto(c, s)
        copy_times.append(time.perf_counter() - t0)
    cache_bytes = sum(c.nbytes for c in caches)
    step_us = statistics.median(times) * 1e6
    copy_us = statistics.median(copy_times) * 1e6
    print(f"decoder: {DEMO_MODEL.name}, {len(caches)} KV caches of {list(cache_infos[0].sizes)} float32 "
          f"({cache_bytes / 1024:.0f} KiB), owned by the caller and updated in place")
    pairs = [f"output {i} = input {j}" for i, j in aliases.items() if j is not None]
    print("outputs that are inputs: " + ", ".join(pairs))
    print(f"generated {steps} tokens: {' '.join(map(str, tokens))}")
    print(f"per step (median): {step_us:.1f} us; copying the caches in and out instead would add "
          f"{copy_us:.1f} us per step, and grows with the cache")
    # Positions (axis 2 of [batch, heads, positions, head_dim]) the program wrote in the caller's arrays.
    written = sum(int(np.count_nonzero(c.any(axis=(0, 1, 3)))) for c in caches)
    print(f"cache rows written in place: {written} (= {len(caches)} caches x {steps} steps)")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pyexec", description="Run ExecuTorch programs with pyexec.")
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="generate tokens with the shipped decoder and a caller-owned KV cache")
    d.add_argument("--steps", type=int, default=32)
    i = sub.add_parser("inspect", help="describe a .pte file: methods, inputs, outputs, operators")
    i.add_argument("file")
    args = parser.parse_args(argv)
    try:
        if args.command == "demo":
            return demo(args.steps)
        return inspect(args.file)
    except Error as exc:
        print(f"pyexec: {exc}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
