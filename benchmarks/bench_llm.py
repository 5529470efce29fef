"""LLM decoding, one thread: ExecuTorch's llama example exported with its own
export_llm (examples/llm/export_llama.py: random weights, the portable
program, float32 XNNPACK with its weights in a .ptd, XNNPACK 8da4w) run by
pyexec and by ExecuTorch 1.5.1's runtime (thread pool reset to one thread) on
the same files.

    python benchmarks/bench_llm.py [--quick] [--only SIZE ...] [--no-memory]

Per program: prefill tokens/s (one call with the whole prompt at position 0)
and decode tokens/s (single-token steps after the prompt, each fed the
previous step's greedy token), each runtime used the way its API is cheapest:
pyexec installs its two input tensors once and writes them in place,
execute(clone_outputs=False); ExecuTorch's Method.execute gets fresh tensors
each step. Before timing, both runtimes are stepped on ExecuTorch's greedy tokens
and every step's logits checked against ExecuTorch's (float32: within 1e-4 of
their largest magnitude; 8da4w: 5e-2, see QUANTIZED_TOL); a wrong result is
not timed. Ratios are
tokens/s, pyexec's over ExecuTorch's: above 1, pyexec is faster.

The memory table loads each program in a fresh process per runtime, runs a
prefill and the decode, and reports the resident memory that added: all of it
and, in brackets, the anonymous part (the rest is file pages of the mapped
.pte/.ptd, which the page cache shares)."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("PYEXEC_NUM_THREADS", "1")  # before the library is loaded

import torch  # noqa: E402
from _common import interleaved_us, print_table  # noqa: E402
from support.llm import llama_example  # noqa: E402  (tests/, put on the path by _common)

# name -> (params.json, max_seq_len, prompt length, decode steps)
SIZES: dict[str, tuple[dict[str, Any], int, int, int]] = {
    # the tests' model: dim 64, 2 layers, vocab 256 (about 0.2 M parameters)
    "tiny": (
        {
            "dim": 64,
            "n_layers": 2,
            "n_heads": 4,
            "n_kv_heads": 2,
            "vocab_size": 256,
            "multiple_of": 32,
            "norm_eps": 1e-5,
            "rope_theta": 500000.0,
            "use_scaled_rope": False,
        },
        64,
        16,
        32,
    ),
    # dim 512, 4 layers, 8 query heads over 2 kv heads, vocab 4096 (about 16 M parameters, 64 MB in float32)
    "small": (
        {
            "dim": 512,
            "n_layers": 4,
            "n_heads": 8,
            "n_kv_heads": 2,
            "vocab_size": 4096,
            "multiple_of": 256,
            "norm_eps": 1e-5,
            "rope_theta": 500000.0,
            "use_scaled_rope": False,
        },
        256,
        64,
        64,
    ),
}
VARIANTS = ("portable", "xnnpack-ptd", "xnnpack-8da4w")


def files(size: str, variant: str, where: Path) -> tuple[Path, Path | None]:
    params, max_seq_len, _, _ = SIZES[size]
    pte, ptd = llama_example(variant, params, max_seq_len=max_seq_len)
    pte_path = where / f"{size}_{variant}.pte"
    pte_path.write_bytes(pte)
    ptd_path = None
    if ptd is not None:
        ptd_path = where / f"{size}_{variant}.ptd"
        ptd_path.write_bytes(ptd)
    return pte_path, ptd_path


def set_et_threads(n: int) -> None:
    from executorch.extension.pybindings.portable_lib import _threadpool_get_thread_count, _unsafe_reset_threadpool

    _unsafe_reset_threadpool(n)
    assert _threadpool_get_thread_count() == n


def executorch_method(pte: Path, ptd: Path | None) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import executorch.kernels.quantized  # noqa: F401
        from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401
        from executorch.runtime import Runtime

    runtime = Runtime.get()
    program = runtime.load_program(pte, data_path=ptd) if ptd else runtime.load_program(pte)
    return program.load_method("forward")


def prompt_tokens(n: int, vocab: int) -> torch.Tensor:
    return torch.randint(0, vocab, (1, n), generator=torch.Generator().manual_seed(1))


class PyexecLoop:
    """pyexec, cheapest use: decode inputs installed once, written in place."""

    def __init__(self, pte: Path, ptd: Path | None) -> None:
        import pyexec

        self.method = pyexec.load(pte, data_path=ptd).load_method("forward")
        self.token, self.pos = torch.zeros(1, 1, dtype=torch.int64), torch.zeros(1, dtype=torch.int64)

    def prefill(self, prompt: torch.Tensor) -> int:
        (logits,) = self.method.execute([prompt, torch.tensor([0])], clone_outputs=False)
        return int(logits.argmax())

    def decode(self, first: int, start: int, steps: int) -> list[int]:
        out, token = [], first
        self.method.set_inputs([self.token, self.pos])
        for step in range(steps):
            self.token[0, 0] = token
            self.pos[0] = start + step
            (logits,) = self.method.execute(clone_outputs=False)
            token = int(logits.argmax())
            out.append(token)
        return out


class ExecuTorchLoop:
    def __init__(self, pte: Path, ptd: Path | None) -> None:
        self.method = executorch_method(pte, ptd)

    def prefill(self, prompt: torch.Tensor) -> int:
        (logits,) = self.method.execute([prompt, torch.tensor([0])])
        return int(logits.argmax())

    def decode(self, first: int, start: int, steps: int) -> list[int]:
        out, token = [], first
        for step in range(steps):
            (logits,) = self.method.execute([torch.tensor([[token]]), torch.tensor([start + step])])
            token = int(logits.argmax())
            out.append(token)
        return out


# Logits must be within this fraction of their largest magnitude of
# ExecuTorch's. Float32: summation order only. 8da4w: activations are quantized
# to int8 per token at run time, so a last-bit difference before a quantization
# moves a value by a whole int8 step, and four layers amplify that: on the
# small model pyexec's own AVX2 and portable GEMM paths differ by ~0.06 on
# logits of ~3.5, and so may greedy tokens at near ties.
FLOAT_TOL, QUANTIZED_TOL = 1e-4, 5e-2


def check_logits(ours: PyexecLoop, theirs: ExecuTorchLoop, prompt: torch.Tensor, steps: int, tol: float) -> str:
    """Prefill and decode both on ExecuTorch's greedy tokens; '' when every
    step's logits are within tol * max|logits| of ExecuTorch's."""
    pos, tokens = 0, prompt
    for step in range(steps + 1):
        (got,) = ours.method.execute([tokens, torch.tensor([pos])])
        (want,) = theirs.method.execute([tokens, torch.tensor([pos])])
        scale = float(want.abs().max())
        diff = float((got - want).abs().max())
        if not diff <= tol * scale:  # also catches nan
            return f"step {step}: logits differ by {diff:.3g} (max |logit| {scale:.3g})"
        pos += tokens.shape[1]
        tokens = torch.tensor([[int(want.argmax())]])
    return ""


def bench_program(size: str, pte: Path, ptd: Path | None, budget_s: float, rounds: int) -> list[str]:
    """[prefill tok/s ET, pyexec, ratio, decode tok/s ET, pyexec, ratio], or
    one cell saying why it was not timed."""
    import pyexec

    params, _, n_prompt, steps = SIZES[size]
    prompt = prompt_tokens(n_prompt, params["vocab_size"])
    try:
        ours = PyexecLoop(pte, ptd)
    except pyexec.Error as e:
        print(f"  pyexec cannot run {pte.name}: {e}", file=sys.stderr)
        return [f"not run by pyexec: {type(e).__name__} (see stderr)"]
    theirs = ExecuTorchLoop(pte, ptd)
    wrong = check_logits(ours, theirs, prompt, steps, QUANTIZED_TOL if "8da4w" in pte.name else FLOAT_TOL)
    if wrong:
        return [f"wrong result: {wrong}"]
    first = theirs.prefill(prompt)

    loops = (theirs, ours)
    prefill_fns: list[Callable[[], object]] = [lambda loop=loop: loop.prefill(prompt) for loop in loops]
    decode_fns: list[Callable[[], object]] = [lambda loop=loop: loop.decode(first, n_prompt, steps) for loop in loops]
    pre_us = interleaved_us(prefill_fns, budget_s=budget_s, rounds=rounds)
    dec_us = interleaved_us(decode_fns, budget_s=budget_s, rounds=rounds)
    pre = [n_prompt / (t * 1e-6) for t in pre_us]
    dec = [steps / (t * 1e-6) for t in dec_us]
    return [
        f"{pre[0]:.0f}",
        f"{pre[1]:.0f}",
        f"{pre[1] / pre[0]:.2f}x",
        f"{dec[0]:.0f}",
        f"{dec[1]:.0f}",
        f"{dec[1] / dec[0]:.2f}x",
    ]


# ---- resident memory, in a fresh process per runtime ------------------------------


def rss_mib() -> tuple[float, float]:
    with open("/proc/self/status") as f:
        kib = {k: int(v.split()[0]) for k, v in (line.split(":", 1) for line in f) if k in ("VmRSS", "RssAnon")}
    return kib["VmRSS"] / 1024, kib["RssAnon"] / 1024


def child(runtime: str, size: str, pte: str, ptd: str) -> None:
    """Load, prefill and decode; print the resident memory each stage added."""
    params, _, n_prompt, steps = SIZES[size]
    prompt = prompt_tokens(n_prompt, params["vocab_size"])
    data = Path(ptd) if ptd else None
    if runtime == "pyexec":
        import pyexec  # noqa: F401  (the library loaded before the baseline)

        make: Callable[[], Any] = lambda: PyexecLoop(Path(pte), data)  # noqa: E731
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import executorch.kernels.quantized  # noqa: F401
            from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401
            from executorch.runtime import Runtime  # noqa: F401
        set_et_threads(1)
        make = lambda: ExecuTorchLoop(Path(pte), data)  # noqa: E731
    base = rss_mib()
    loop = make()
    loaded = rss_mib()
    first = loop.prefill(prompt)
    loop.decode(first, n_prompt, steps)
    ran = rss_mib()
    print(json.dumps({"loaded": [loaded[i] - base[i] for i in (0, 1)], "ran": [ran[i] - base[i] for i in (0, 1)]}))


def measure_memory(runtime: str, size: str, pte: Path, ptd: Path | None) -> dict[str, list[float]] | str:
    pte.read_bytes()  # into the page cache
    proc = subprocess.run(
        [sys.executable, __file__, "--child", runtime, size, str(pte), str(ptd or "")],
        capture_output=True,
        text=True,
    )
    if proc.returncode != 0:
        return proc.stderr.strip().splitlines()[-1][:100]
    result: dict[str, list[float]] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="shorter measurements")
    parser.add_argument("--only", nargs="*", choices=list(SIZES), help="model sizes to run")
    parser.add_argument("--no-memory", action="store_true", help="skip the resident memory table")
    parser.add_argument("--child", nargs=4, metavar=("RUNTIME", "SIZE", "PTE", "PTD"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    torch.set_num_threads(1)
    set_et_threads(1)
    import pyexec

    if hasattr(pyexec, "set_num_threads"):
        pyexec.set_num_threads(1)
    budget, rounds = (0.3, 3) if args.quick else (1.0, 5)
    rows, mem_rows = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for size in SIZES:
            if args.only and size not in args.only:
                continue
            params, max_seq_len, n_prompt, steps = SIZES[size]
            for variant in VARIANTS:
                t0 = time.perf_counter()
                pte, ptd = files(size, variant, Path(tmp))
                mb = (pte.stat().st_size + (ptd.stat().st_size if ptd else 0)) / 1e6
                print(f"{size} {variant}: {mb:.1f} MB, export/cache {time.perf_counter() - t0:.0f} s", file=sys.stderr)
                label = f"{size} {variant} ({mb:.1f} MB)"
                cells = bench_program(size, pte, ptd, budget, rounds)
                rows.append([label, *cells] + [""] * (6 - len(cells)))
                print(f"  {cells}", file=sys.stderr)
                if args.no_memory or len(cells) == 1:
                    continue
                for runtime in ("pyexec", "ExecuTorch"):
                    m = measure_memory(runtime, size, pte, ptd)
                    if isinstance(m, str):
                        mem_rows.append([label, runtime, m, ""])
                    else:
                        mem_rows.append(
                            [
                                label,
                                runtime,
                                "{:.1f} MiB ({:.1f})".format(*m["loaded"]),
                                "{:.1f} MiB ({:.1f})".format(*m["ran"]),
                            ]
                        )
    print_table(
        "LLM prefill and decode, one thread, tokens/s (ratios: pyexec / ExecuTorch, above 1 pyexec is faster)",
        ["program", "prefill ET", "prefill pyexec", "ratio", "decode ET", "decode pyexec", "ratio"],
        rows,
    )
    print("\nprompt / decode tokens: " + ", ".join(f"{s} {v[2]} / {v[3]}" for s, v in SIZES.items()))
    if mem_rows:
        print_table(
            "Resident memory added by loading, then by a prefill and the decode (anonymous in brackets)",
            ["program", "runtime", "after load", "after generating"],
            mem_rows,
        )


if __name__ == "__main__":
    main()
