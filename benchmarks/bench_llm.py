"""LLM decoding, one thread: ExecuTorch's llama example exported with its own
export_llm (examples/llm/export_llama.py: random weights, the portable
program, float32 XNNPACK with its weights in a .ptd, XNNPACK 8da4w) run by
pyexec and by ExecuTorch 1.5.1's runtime (thread pool reset to one thread) on
the same files.

    python benchmarks/bench_llm.py [--quick] [--only SIZE ...] [--no-memory]
    python benchmarks/bench_llm.py --size 1b [--size qwen3-0.6b] [--threads 1 2] [--json PATH]
    python benchmarks/bench_llm.py --sweep [--sweep-threads N] [--quick] [--json PATH]

The first form times the small models (exported in seconds, kept in the
tests' export cache). The second times the models users run on CPUs, at
their real sizes (benchmarks/llm_models.py: Llama-3.2-1B's and Qwen3-0.6B's
architectures, random seeded weights, XNNPACK 8da4w with groups of 128 and
float32 XNNPACK), exported once into --cache-dir (about 20 minutes and
10-20 GB of memory each; see big_main's docstring for what it prints). The
third times one decode step at 128, 1,024 and 4,096 filled cache positions,
float32 and int8 KV caches, on Llama-3.2-1B's and Qwen3.5-0.8B's attention
shapes at a few layers (SWEEP_MODELS; exported in about a minute each, kept
in the tests' export cache), at N threads in both runtimes (default 1).

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
from _common import add_json_option, interleaved_us, print_table, write_json  # noqa: E402
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
# At users' sizes (--size) the same amplification runs through 16-28
# layers: on Llama-3.2-1B's 8da4w program two correct runtimes differ by
# ~4.5% of the largest logit (RMS ~4.5% of the logits' spread) at every
# step; pyexec before and after a kernel change that moved only last bits
# differed as much. A wrong kernel moves them by their whole size.
QUANTIZED_TOL_BIG = 0.15


def check_logits(ours: PyexecLoop, theirs: ExecuTorchLoop, prompt: torch.Tensor, steps: int, tol: float,
                 worst: list[float] | None = None) -> str:
    """Prefill and decode both on ExecuTorch's greedy tokens; '' when every
    step's logits are within tol * max|logits| of ExecuTorch's (the largest
    such ratio appended to `worst`)."""
    pos, tokens = 0, prompt
    largest = 0.0
    for step in range(steps + 1):
        (got,) = ours.method.execute([tokens, torch.tensor([pos])])
        (want,) = theirs.method.execute([tokens, torch.tensor([pos])])
        scale = float(want.abs().max())
        diff = float((got - want).abs().max())
        largest = max(largest, diff / scale if scale else diff)
        if worst is not None and step == steps:
            worst.append(largest)
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


def memory_mib() -> dict[str, float]:
    """This process's resident memory (VmRSS, RssAnon, RssFile of
    /proc/self/status) and proportional set size (Pss, Pss_Anon, Pss_File of
    /proc/self/smaps_rollup: file pages shared with other processes counted
    in proportion), MiB."""
    out: dict[str, float] = {}
    with open("/proc/self/status") as f:
        for line in f:
            k, v = line.split(":", 1)
            if k in ("VmRSS", "RssAnon", "RssFile"):
                out[k] = int(v.split()[0]) / 1024
    try:
        with open("/proc/self/smaps_rollup") as f:
            for line in f:
                k, _, v = line.partition(":")
                if k in ("Pss", "Pss_Anon", "Pss_File"):
                    out[k] = int(v.split()[0]) / 1024
    except OSError:  # no smaps_rollup (kernels before 4.14): PSS not reported
        pass
    return out


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



# ---- users' sizes (--size): benchmarks/llm_models.py's exports -----------------------

BIG_PROMPTS = (128, 512)  # prefill lengths timed; decode starts after the first
BIG_STEPS = 32  # decode steps timed per call
STREAM_MIB = 1024  # the streaming-read buffer: 32 times a 32 MiB last-level cache


class StreamRead:
    """benchmarks/stream_read.c built as a shared library and called through
    ctypes: a plain streaming read of STREAM_MIB MiB, the decode's bound."""

    def __init__(self, where: Path) -> None:
        import ctypes
        import shutil

        cc = os.environ.get("CC") or shutil.which("cc") or "gcc"
        lib = where / "libstream_read.so"
        src = Path(__file__).resolve().parent / "stream_read.c"
        subprocess.run([cc, "-O2", "-shared", "-fPIC", "-pthread", str(src), "-o", str(lib)], check=True)
        self.lib = ctypes.CDLL(str(lib))
        self.lib.stream_read_gbps.restype = ctypes.c_double
        self.lib.stream_read_gbps.argtypes = [ctypes.c_size_t, ctypes.c_int, ctypes.c_int]

    def gbps(self, threads: int, runs: int = 1) -> float:
        return float(self.lib.stream_read_gbps(STREAM_MIB, threads, runs))


def set_threads(n: int) -> tuple[int, int]:
    """Both runtimes' thread counts set to n; returns what each reports."""
    from executorch.extension.pybindings.portable_lib import _threadpool_get_thread_count

    import pyexec

    set_et_threads(n)
    pyexec.set_num_threads(n)
    return pyexec.get_num_threads(), int(_threadpool_get_thread_count())


def decode_bytes(size: str, pte: Path, ptd: Path | None, start: int, steps: int) -> float:
    """Bytes a decode step reads, on average over steps [start, start +
    steps): every weight once (the program's files less the embedding table,
    of which one row is read, and less nothing else: the rest of the files is
    the weights), plus the KV cache up to the step's position (float32, K
    and V of every layer)."""
    from llm_models import MODELS

    p = MODELS[size].params
    files = pte.stat().st_size + (ptd.stat().st_size if ptd else 0)
    embedding = p["vocab_size"] * p["dim"] * 4  # float32 in every variant here (embedding_quantize unset)
    head_dim = p.get("head_dim") or p["dim"] // p["n_heads"]
    kv_row = 2 * p["n_layers"] * p["n_kv_heads"] * head_dim * 4
    mean_pos = start + (steps - 1) / 2 + 1
    return files - embedding + p["dim"] * 4 + kv_row * mean_pos


def _fc_ops(shapes: str) -> float:
    """2 M N K of a FullyConnected node from its profile shapes ("[1,128,2048]
    [2048,8192] ..."): input first, then the filter [N, K] (or [K, N])."""
    dims = [[int(d) for d in part.strip("[]").split(",") if d] for part in shapes.split()]
    x, w = dims[0], dims[1]
    k = x[-1]
    m = 1
    for d in x[:-1]:
        m *= d
    n = w[0] if w[1] == k else w[1]
    return 2.0 * m * n * k


def gemm_throughput(loop: PyexecLoop, prompt: torch.Tensor) -> tuple[float, float, float]:
    """(GOP/s of the FullyConnected nodes, their share of the prefill's time,
    the prefill's seconds) from one profiled prefill of `prompt`."""
    method = loop.method
    method.execute([prompt, torch.tensor([0])], clone_outputs=False)  # warm
    with method.profile() as p:
        method.execute([prompt, torch.tensor([0])], clone_outputs=False)
    fc = [e for e in p.events if e.depth == 1 and e.name == "FullyConnected"]
    ops = sum(_fc_ops(e.shapes) for e in fc)
    ns = sum(e.duration_ns for e in fc)
    total = sum(e.duration_ns for e in p.events if e.depth == 0)
    return (ops / ns if ns else 0.0), (ns / total if total else 0.0), total * 1e-9


def greedy_agreement(ours: PyexecLoop, theirs: ExecuTorchLoop, prompt: torch.Tensor, steps: int) -> tuple[int, int]:
    """Each runtime generates `steps` greedy tokens from `prompt` on its own;
    (how many leading tokens agree, steps)."""
    mine = [ours.prefill(prompt)]
    mine += ours.decode(mine[0], prompt.shape[1], steps - 1)
    want = [theirs.prefill(prompt)]
    want += theirs.decode(want[0], prompt.shape[1], steps - 1)
    same = 0
    for a, b in zip(mine, want):
        if a != b:
            break
        same += 1
    return same, steps


def time_rounds(fns: dict[str, Callable[[], object]], rounds: int) -> dict[str, float]:
    """Seconds per call of each function, best of `rounds` interleaved rounds
    (one call each per round, after one warm-up call each): a burst of noise
    then hits every function alike instead of one of them."""
    for fn in fns.values():
        fn()
    best = {k: float("inf") for k in fns}
    for _ in range(rounds):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            best[k] = min(best[k], time.perf_counter() - t0)
    return best


def big_child(runtime: str, size: str, pte: str, ptd: str) -> None:
    """Load, prefill BIG_PROMPTS[0] tokens and decode BIG_STEPS; print the
    load time and the memory (memory_mib) before, after loading and after
    generating, as JSON."""
    from llm_models import MODELS

    vocab = MODELS[size].params["vocab_size"]
    prompt = prompt_tokens(BIG_PROMPTS[0], vocab)
    data = Path(ptd) if ptd else None
    if runtime == "pyexec":
        import pyexec

        pyexec.set_num_threads(1)
        make: Callable[[], Any] = lambda: PyexecLoop(Path(pte), data)  # noqa: E731
    else:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            import executorch.kernels.quantized  # noqa: F401
            from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401
            from executorch.runtime import Runtime  # noqa: F401
        set_et_threads(1)
        make = lambda: ExecuTorchLoop(Path(pte), data)  # noqa: E731
    base = memory_mib()
    t0 = time.perf_counter()
    loop = make()
    load_s = time.perf_counter() - t0
    loaded = memory_mib()
    first = loop.prefill(prompt)
    loop.decode(first, BIG_PROMPTS[0], BIG_STEPS)
    ran = memory_mib()
    print(json.dumps({"load_s": load_s, "base": base, "loaded": loaded, "ran": ran}))


def big_memory(runtime: str, size: str, pte: Path, ptd: Path | None,
               env: dict[str, str] | None = None) -> dict[str, Any] | str:
    for f in (pte, ptd):
        if f is not None:  # into the page cache: load times are not disk reads
            with open(f, "rb") as fh:
                while fh.read(1 << 24):
                    pass
    proc = subprocess.run(
        [sys.executable, __file__, "--big-child", runtime, size, str(pte), str(ptd or "")],
        capture_output=True,
        text=True,
        env={**os.environ, **(env or {})},
    )
    if proc.returncode != 0:
        return (proc.stderr.strip().splitlines() or ["failed"])[-1][:120]
    result: dict[str, Any] = json.loads(proc.stdout.strip().splitlines()[-1])
    return result


def speed_big(label: str, size: str, variant: str, pte: Path, ptd: Path | None, threads: list[int], rounds: int,
              stream: StreamRead, peaks: dict[str, float], out: dict[str, list[Any]]) -> None:
    """Checks, then times, one program at every thread count (rows into
    `out`); both runtimes' copies are gone when it returns."""
    import gc

    from llm_models import MODELS

    import pyexec

    vocab = MODELS[size].params["vocab_size"]
    quant = "8da4w" in variant
    prompts = {n: prompt_tokens(n, vocab) for n in BIG_PROMPTS}
    p0 = BIG_PROMPTS[0]
    set_threads(1)
    try:
        ours = PyexecLoop(pte, ptd)
    except pyexec.Error as e:
        print(f"  pyexec cannot run {pte.name}: {e}", file=sys.stderr)
        out["check"].append(([label, f"not run by pyexec: {type(e).__name__}", "", "", ""],
                             {"program": label, "error": str(e)}))
        return
    theirs = ExecuTorchLoop(pte, ptd)
    worst: list[float] = []
    tol = QUANTIZED_TOL_BIG if quant else FLOAT_TOL
    wrong = check_logits(ours, theirs, prompts[p0], 4, tol, worst)
    same, steps = greedy_agreement(ours, theirs, prompts[p0], 16)
    diff = f"{worst[0]:.2g}" if worst else "-"
    out["check"].append(([label, "ok" if not wrong else wrong, diff, f"{tol:g}", f"{same} / {steps}"],
                         {"program": label, "logits": wrong or "ok", "max_rel_diff": worst[0] if worst else None,
                          "tolerance": tol, "greedy_same": same, "greedy_steps": steps}))
    print(f"  {label}: logits {'ok' if not wrong else wrong}; greedy tokens equal for {same} of {steps}",
          file=sys.stderr)
    if wrong:
        return
    first = theirs.prefill(prompts[p0])
    nbytes = decode_bytes(size, pte, ptd, p0, BIG_STEPS)
    peak_1 = peaks["peak_vnni_int8_gops" if quant else "peak_avx512_gflops"] or peaks["peak_avx2_gflops"]
    current = 1
    for t in threads:
        if t != current:
            # ExecuTorch's XNNPACK delegate keeps the thread pool it was
            # loaded with: resetting the pool under a loaded program crashes
            # its next call, so the program is loaded again after the reset
            del theirs
            gc.collect()
            set_threads(t)
            theirs = ExecuTorchLoop(pte, ptd)
            current = t
        got = set_threads(t)
        print(f"  threads: pyexec {got[0]}, ExecuTorch {got[1]}", file=sys.stderr)
        fns: dict[str, Callable[[], object]] = {}
        for n in BIG_PROMPTS:
            fns[f"ET prefill {n}"] = lambda n=n, et=theirs: et.prefill(prompts[n])
            fns[f"pyexec prefill {n}"] = lambda n=n: ours.prefill(prompts[n])
        fns["ET decode"] = lambda et=theirs: et.decode(first, p0, BIG_STEPS)
        fns["pyexec decode"] = lambda: ours.decode(first, p0, BIG_STEPS)
        fns["stream"] = lambda t=t: stream.gbps(t)
        sec = time_rounds(fns, rounds)
        del fns
        bw = STREAM_MIB * 2**20 / sec["stream"] / 1e9  # the same read, timed here
        limit = bw * 1e9 / nbytes
        v: dict[str, Any] = {"program": label, "threads": t, "pyexec_threads": got[0], "executorch_threads": got[1],
                             "stream_gbps": bw, "decode_bytes": nbytes, "decode_limit_tok_s": limit}
        cells = [label, str(t)]
        for n in BIG_PROMPTS:
            et, px = n / sec[f"ET prefill {n}"], n / sec[f"pyexec prefill {n}"]
            v[f"prefill{n}_et_tok_s"], v[f"prefill{n}_pyexec_tok_s"] = et, px
            cells += [f"{et:.1f}", f"{px:.1f}", f"{px / et:.2f}x"]
        et, px = BIG_STEPS / sec["ET decode"], BIG_STEPS / sec["pyexec decode"]
        v["decode_et_tok_s"], v["decode_pyexec_tok_s"] = et, px
        cells += [f"{et:.2f}", f"{px:.2f}", f"{px / et:.2f}x", f"{bw:.1f}", f"{limit:.2f}",
                  f"{100 * et / limit:.0f}%", f"{100 * px / limit:.0f}%"]
        out["speed"].append((cells, v))
        print(f"  {cells}", file=sys.stderr)
        for n in BIG_PROMPTS:
            gops, share, secs = gemm_throughput(ours, prompts[n])
            peak = peak_1 * t
            out["gemm"].append(([label, str(n), str(t), f"{gops:.0f}", f"{100 * share:.0f}%", f"{peak:.0f}",
                                 f"{100 * gops / peak:.0f}%" if peak else "-"],
                                {"program": label, "tokens": n, "threads": t, "gemm_gops": gops, "gemm_share": share,
                                 "prefill_s": secs, "peak_gops": peak,
                                 "peak_kind": "int8 vpdpbusd" if quant else "float32 FMA"}))
    set_threads(1)


def bench_big(size: str, variant: str, pte: Path, ptd: Path | None, threads: list[int], rounds: int,
              stream: StreamRead, peaks: dict[str, float], memory: bool, out: dict[str, list[Any]]) -> None:
    """One program: speed_big, then (memory) big_memory per runtime; rows
    into `out`."""
    import gc

    mb = (pte.stat().st_size + (ptd.stat().st_size if ptd else 0)) / 1e6
    label = f"{size} {variant} ({mb / 1e3:.2f} GB)" if mb >= 1000 else f"{size} {variant} ({mb:.1f} MB)"
    speed_big(label, size, variant, pte, ptd, threads, rounds, stream, peaks, out)
    gc.collect()  # both runtimes' copies released before the memory children load theirs
    if not memory:
        return
    import tempfile

    # pyexec three times: without the packed-weight cache, writing it into an
    # empty directory, and mapping the file that wrote
    cache = tempfile.TemporaryDirectory()
    runs = [("ExecuTorch", "ExecuTorch", None), ("pyexec", "pyexec, no cache", {"PYEXEC_CACHE": "0"}),
            ("pyexec", "pyexec, cache written", {"PYEXEC_CACHE": "1", "PYEXEC_CACHE_DIR": cache.name}),
            ("pyexec", "pyexec, cache mapped", {"PYEXEC_CACHE": "1", "PYEXEC_CACHE_DIR": cache.name})]
    for engine, runtime, env in runs:
        r = big_memory(engine, size, pte, ptd, env)
        if isinstance(r, str):
            out["memory"].append(([label, runtime, r, "", "", "", "", ""],
                                  {"program": label, "runtime": runtime, "error": r}))
            continue
        b, lo, ra = r["base"], r["loaded"], r["ran"]

        def add(after: dict[str, float], key: str, b: dict[str, float] = b) -> str:
            return f"{after.get(key, float('nan')) - b.get(key, 0.0):.0f}"

        out["memory"].append((
            [label, runtime, f"{r['load_s']:.2f} s", add(lo, "VmRSS"), add(lo, "Pss"), add(ra, "VmRSS"),
             add(ra, "RssAnon"), add(ra, "Pss")],
            {"program": label, "runtime": runtime, "load_s": r["load_s"], "base": b, "loaded": lo, "ran": ra},
        ))
    cache.cleanup()


def big_main(args: argparse.Namespace) -> None:
    """Every --size's variants at every --threads count: the greedy tokens
    and logits checked against ExecuTorch's runtime first; prefill of 128
    and 512 tokens and decode tokens/s of both runtimes, and the
    streaming-read bandwidth (stream_read.c) timed in the same interleaved
    rounds, with the decode limit it gives (bandwidth / bytes a step reads)
    and each runtime's decode as a share of it; pyexec's GEMM throughput in
    the prefill (its FullyConnected nodes, from the profiler) against the
    core's measured peak (bench_gemm.measure_peaks: float32 FMA, int8
    vpdpbusd) times the thread count; and, in a fresh process per runtime at
    one thread, the load time and the resident (RSS) and proportional (PSS)
    memory added by loading and then by generating."""
    import tempfile

    from bench_gemm import measure_peaks
    from llm_models import MODELS, export, free_gib

    peaks = measure_peaks(10)
    print(f"peaks (one core): {peaks}", file=sys.stderr)
    out: dict[str, list[Any]] = {"speed": [], "check": [], "gemm": [], "memory": []}
    rounds = 1 if args.quick else args.rounds
    with tempfile.TemporaryDirectory() as tmp:
        stream = StreamRead(Path(tmp))
        for size in args.size:
            for variant in args.variant or MODELS[size].variants:
                print(f"{size} {variant}: {free_gib():.1f} GiB of memory available", file=sys.stderr)
                pte, ptd = export(size, variant, args.cache_dir)
                bench_big(size, variant, pte, ptd, args.threads, rounds, stream, peaks, not args.no_memory, out)
    n0, n1 = BIG_PROMPTS
    print_table(
        "Results against ExecuTorch's runtime: a prefill and 4 decode steps on ExecuTorch's greedy tokens, "
        "the largest |logit difference| / max |logit| against the tolerance; and the leading greedy tokens "
        "that agree when each runtime generates 16 alone (8da4w: near ties may part them)",
        ["program", "logits", "largest difference", "tolerance", "greedy tokens equal"],
        [c for c, _ in out["check"]], values=[v for _, v in out["check"]],
    )
    print_table(
        "Prefill and decode, tokens/s (ratios pyexec / ExecuTorch: above 1 pyexec is faster); decode limit = "
        "streaming-read GB/s (measured in the same rounds) / bytes a decode step reads",
        ["program", "threads", f"prefill {n0} ET", "pyexec", "ratio", f"prefill {n1} ET", "pyexec", "ratio",
         "decode ET", "pyexec", "ratio", "read GB/s", "decode limit", "ET % of limit", "pyexec % of limit"],
        [c for c, _ in out["speed"]], values=[v for _, v in out["speed"]],
    )
    print_table(
        "pyexec's prefill GEMMs (FullyConnected nodes): GOP/s (2 M N K per second), their share of the "
        "prefill, against the measured peak of one core times the threads (int8 vpdpbusd for 8da4w, "
        "float32 FMA for float32)",
        ["program", "tokens", "threads", "GOP/s", "share of prefill", "peak GOP/s", "% of peak"],
        [c for c, _ in out["gemm"]], values=[v for _, v in out["gemm"]],
    )
    if out["memory"]:
        print_table(
            f"Load time and memory added (MiB), one thread, a fresh process per runtime: after loading, then "
            f"after a {n0}-token prefill and {BIG_STEPS} decode steps (PSS counts shared file pages in "
            f"proportion; anon: memory not backed by the files)",
            ["program", "runtime", "load", "RSS loaded", "PSS loaded", "RSS after", "anon after", "PSS after"],
            [c for c, _ in out["memory"]], values=[v for _, v in out["memory"]],
        )
    write_json(args.json, "bench_llm", {"sizes": args.size, "threads": args.threads, "rounds": rounds,
                                        "prompts": list(BIG_PROMPTS), "decode_steps": BIG_STEPS,
                                        "stream_mib": STREAM_MIB, "peaks": peaks})


# ---- context-length sweep (--sweep) ---------------------------------------------------

# Decode step time against the filled KV cache: attention at the shapes of
# real models, few layers, a narrow feed-forward and a small vocabulary, so
# that the attention over the cache is a large share of a step and the
# exports take a minute. Exported by export_llm's configuration (the one
# examples/llm/export_llama.py writes, XNNPACK for the linear layers, custom
# SDPA over the KV cache), random weights.
SWEEP_POSITIONS = (128, 1024, 4096)
SWEEP_MAX_SEQ_LEN = 4096 + 128  # room for a decode step at position 4096
SWEEP_PROMPT = 8  # the short prefill before the steps
SWEEP_VOCAB = 512
SWEEP_FFN = 1024  # the feed-forward's hidden width (Llama-3.2-1B: 8192, Qwen3.5-0.8B: 3584)

# name -> (export_llm's base.model_class, params.json, what it is)
SWEEP_MODELS: dict[str, tuple[str, dict[str, Any], str]] = {
    # Llama-3.2-1B's attention: dim 2048, 32 query heads over 8 kv heads of 64; one layer
    "llama3.2-1b-attn": (
        "llama3",
        {
            "dim": 2048,
            "hidden_dim": SWEEP_FFN,
            "n_heads": 32,
            "n_kv_heads": 8,
            "n_layers": 1,
            "norm_eps": 1e-5,
            "rope_theta": 500000.0,
            "use_scaled_rope": True,
            "vocab_size": SWEEP_VOCAB,
        },
        "Llama-3.2-1B attention (dim 2048, 32 heads, 8 kv heads, head_dim 64), 1 layer",
    ),
    # Qwen3.5-0.8B (ExecuTorch's examples/models/qwen3_5/config/0_8b_config.json)
    # at its real widths, one layer of each kind: Gated DeltaNet linear
    # attention (16 key and 16 value heads of 128, a recurrent state whose size
    # does not grow with the context) and full attention (8 query heads over 2
    # kv heads of 256, gated queries, QK-norm, quarter-width rope)
    "qwen3.5-0.8b-hybrid": (
        "qwen3_5_0_8b",
        {
            "dim": 1024,
            "hidden_dim": SWEEP_FFN,
            "n_heads": 8,
            "head_dim": 256,
            "n_kv_heads": 2,
            "n_layers": 2,
            "norm_eps": 1e-6,
            "rope_theta": 10000000.0,
            "use_scaled_rope": False,
            "vocab_size": SWEEP_VOCAB,
            "use_hf_rope": True,
            "partial_rotary_factor": 0.25,
            "attention_qkv_bias": False,
            "use_qk_norm": True,
            "qk_norm_before_rope": True,
            "use_q_gate": True,
            "rms_norm_add_unit_offset": True,
            "linear_conv_kernel_dim": 4,
            "linear_key_head_dim": 128,
            "linear_value_head_dim": 128,
            "linear_num_key_heads": 16,
            "linear_num_value_heads": 16,
            "layer_types": ["linear_attention", "full_attention"],
        },
        "Qwen3.5-0.8B widths, 1 Gated DeltaNet layer + 1 full-attention layer (8 heads, 2 kv heads, head_dim 256)",
    ),
}
SWEEP_CACHES = ("float32", "int8")  # int8: model.quantize_kv_cache=True (llama::custom_quantized_sdpa)
SWEEP_FLOAT_ATOL = 1e-4  # float32 cache: logits within 1e-4 of ExecuTorch's (summation order only)


def sweep_export(name: str, cache: str) -> bytes:
    """The .pte of SWEEP_MODELS[name] with a `cache` KV cache, exported by
    export_llm's configuration in this process, kept in the tests' export
    cache (keyed by the versions, this file's settings and the example)."""
    import hashlib

    import executorch
    from support.export import _file_digest, cache_dir, cached
    from support.llm import example

    export_llama = example("export_llama")
    model_class, params, _ = SWEEP_MODELS[name]
    extra = ["backend.xnnpack.enabled=True", "backend.xnnpack.extended_ops=True"]
    if cache == "int8":
        extra.append("model.quantize_kv_cache=True")
    key = [name, model_class, params, extra, SWEEP_MAX_SEQ_LEN]
    h = hashlib.sha256()
    h.update(f"{torch.__version__}|{getattr(executorch, '__version__', '?')}".encode())
    h.update(_file_digest(str(Path(export_llama.__file__))).encode())
    h.update(json.dumps(key, sort_keys=True).encode())
    where = cache_dir()

    def make() -> list[bytes | None]:
        from executorch.examples.models.llama.export_llama_lib import export_llama as run_export
        from executorch.extension.llm.export.config.llm_config import LlmConfig
        from omegaconf import OmegaConf

        with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
            warnings.simplefilter("ignore")
            workdir = Path(d)
            export_llama.write_model(workdir, params, SWEEP_MAX_SEQ_LEN, 0)
            settings = export_llama.overrides("portable", workdir, SWEEP_MAX_SEQ_LEN, model_class=model_class)
            config = OmegaConf.merge(OmegaConf.structured(LlmConfig), OmegaConf.from_dotlist(settings + extra))
            run_export(OmegaConf.to_object(config))
            pte, _ = export_llama.file_names("portable")
            return [(workdir / pte).read_bytes()]

    (pte,) = cached(None if where is None else [where / f"sweep-{name}-{cache}-{h.hexdigest()[:24]}.pte"], make)
    assert pte is not None
    return pte


def program_ops(pte: bytes) -> set[str]:
    """The operator names (without overloads) a program's first plan holds."""
    from executorch.exir._serialize._program import deserialize_pte_binary

    p = deserialize_pte_binary(pte)
    p = getattr(p, "program", p)
    return {op.name for op in p.execution_plan[0].operators}


class SweepStep:
    """One runtime's method after a short prefill, stepped at one position:
    each call is a single-token decode at input_pos `pos` (the cache holds
    `pos` entries; every call rewrites the same slot, so every call attends
    over the same pos + 1 positions)."""

    def __init__(self, runtime: str, pte: Path, prompt: torch.Tensor) -> None:
        self.runtime = runtime
        if runtime == "pyexec":
            import pyexec

            self.method = pyexec.load(pte).load_method("forward")
        else:
            self.method = executorch_method(pte, None)
        self.prefill_logits = self.call(prompt, 0)
        self.token, self.pos = torch.zeros(1, 1, dtype=torch.int64), torch.zeros(1, dtype=torch.int64)

    def call(self, tokens: torch.Tensor, pos: int) -> torch.Tensor:
        (logits,) = self.method.execute([tokens.clone(), torch.tensor([pos])])
        return torch.as_tensor(logits).clone()

    def at(self, token: int, pos: int) -> Callable[[], object]:
        """The timed step: pyexec with its inputs installed once and written in
        place, execute(clone_outputs=False); ExecuTorch's Method.execute with
        fresh tensors (each runtime's cheapest use, as the decode table)."""
        if self.runtime == "pyexec":
            self.token[0, 0], self.pos[0] = token, pos
            self.method.set_inputs([self.token, self.pos])
            return lambda: self.method.execute(clone_outputs=False)
        return lambda: self.method.execute([torch.tensor([[token]]), torch.tensor([pos])])


def sweep_point(pte: Path, cache: str, pos: int, vocab: int, budget_s: float, rounds: int) -> dict[str, Any]:
    """Both runtimes loaded afresh, the same prefill and one step at `pos`
    checked against ExecuTorch's logits, then that step timed interleaved."""
    prompt = prompt_tokens(SWEEP_PROMPT, vocab)
    theirs = SweepStep("ExecuTorch", pte, prompt)
    ours = SweepStep("pyexec", pte, prompt)
    token = int(theirs.prefill_logits.argmax())
    checks = [("prefill", ours.prefill_logits, theirs.prefill_logits)]
    step = torch.tensor([[token]])
    checks.append((f"step at {pos}", ours.call(step, pos), theirs.call(step, pos)))
    result: dict[str, Any] = {"argmax_equal": True, "error": ""}
    for (what, got, want), key in zip(checks, ("prefill_diff", "step_diff")):
        diff = float((got - want).abs().max())
        result[key] = diff
        same = int(got.argmax()) == int(want.argmax())
        result["argmax_equal"] &= same
        if cache == "float32" and not diff <= SWEEP_FLOAT_ATOL:  # also catches nan
            result["error"] = f"{what}: logits differ by {diff:.3g} (tolerance {SWEEP_FLOAT_ATOL})"
        elif not same:
            result["error"] = f"{what}: greedy token {int(got.argmax())}, ExecuTorch's {int(want.argmax())}"
        if result["error"]:
            return result
    et_us, py_us = interleaved_us([theirs.at(token, pos), ours.at(token, pos)], budget_s=budget_s, rounds=rounds)
    result.update(et_ms=et_us / 1e3, pyexec_ms=py_us / 1e3)
    method = ours.method  # where the time goes in pyexec's step: each operator's share (top five), in the JSON
    with method.profile() as p:
        for _ in range(3):
            method.execute(clone_outputs=False)
    per_op: dict[str, int] = {}
    for e in p.events:
        if e.depth == 0:
            per_op[e.name] = per_op.get(e.name, 0) + e.duration_ns
    total = sum(per_op.values()) or 1
    result["pyexec_profile"] = {k: round(v / total, 3) for k, v in sorted(per_op.items(), key=lambda kv: -kv[1])[:5]}
    return result


def sweep_main(args: argparse.Namespace) -> None:
    """Decode step time at 128, 1k and 4k filled cache positions, float32 and
    int8 KV caches, ExecuTorch's runtime beside pyexec on the same file at the
    same thread count."""
    import pyexec

    n = args.sweep_threads
    torch.set_num_threads(n)
    set_et_threads(n)
    pyexec.set_num_threads(n)
    print(f"threads: {n} (pyexec {pyexec.get_num_threads()}, ExecuTorch {n})", file=sys.stderr)
    budget, rounds = (0.2, 2) if args.quick else (0.5, 3)
    rows, values = [], []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (_, params, _) in SWEEP_MODELS.items():
            for cache in SWEEP_CACHES:
                t0 = time.perf_counter()
                try:
                    data = sweep_export(name, cache)
                except Exception as e:  # noqa: BLE001 - an export the exporter refuses is reported, not fatal
                    print(f"{name} {cache}: export failed: {type(e).__name__}: {e}", file=sys.stderr)
                    rows.append([name, cache, "-", f"export failed: {type(e).__name__}", "", ""])
                    values.append({"model": name, "cache": cache, "error": f"export: {e}"})
                    continue
                pte = Path(tmp) / f"{name}-{cache}.pte"
                pte.write_bytes(data)
                sdpa = "llama::custom_quantized_sdpa" if cache == "int8" else "llama::custom_sdpa"
                if sdpa not in program_ops(data):
                    raise RuntimeError(f"{name} {cache}: the export holds no {sdpa}")
                print(f"{name} {cache}: {len(data) / 1e6:.1f} MB, export/cache {time.perf_counter() - t0:.0f} s",
                      file=sys.stderr)
                for pos in SWEEP_POSITIONS:
                    r = sweep_point(pte, cache, pos, params["vocab_size"], budget, rounds)
                    print(f"  {pos}: {r}", file=sys.stderr)
                    values.append({"model": name, "cache": cache, "positions": pos, "threads": n, **r})
                    if r["error"]:
                        rows.append([name, cache, str(pos), f"wrong result: {r['error']}", "", ""])
                        continue
                    check = f"max diff {r['step_diff']:.2g} (prefill {r['prefill_diff']:.2g})"
                    if cache == "int8":
                        check = "argmax equal, " + check
                    rows.append([name, cache, str(pos), f"{r['et_ms']:.2f}", f"{r['pyexec_ms']:.2f}",
                                 f"{r['et_ms'] / r['pyexec_ms']:.2f}x", check])
    print_table(
        f"Decode step at a filled KV cache, {n} thread(s), ms/step (speed-up: ExecuTorch's time / pyexec's, "
        "above 1 pyexec is faster)",
        ["model", "KV cache", "filled positions", "ExecuTorch ms/step", "pyexec ms/step", "speed-up",
         "logits vs ExecuTorch"],
        [r + [""] * (7 - len(r)) for r in rows], values=values,
    )
    print("\n" + "\n".join(f"{k}: {v[2]}" for k, v in SWEEP_MODELS.items()))
    print(f"feed-forward width {SWEEP_FFN}, vocabulary {SWEEP_VOCAB}, max_seq_len {SWEEP_MAX_SEQ_LEN}, "
          f"a {SWEEP_PROMPT}-token prefill, then steps at the position "
          "(logits: the largest |difference| from ExecuTorch's at the timed step, and at the prefill)")
    write_json(args.json, "bench_llm_sweep", {"threads": n, "positions": list(SWEEP_POSITIONS),
                                              "budget_s": budget, "rounds": rounds})


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--quick", action="store_true", help="shorter measurements")
    parser.add_argument("--only", nargs="*", choices=list(SIZES), help="model sizes to run")
    parser.add_argument("--no-memory", action="store_true", help="skip the resident memory table")
    parser.add_argument("--child", nargs=4, metavar=("RUNTIME", "SIZE", "PTE", "PTD"), help=argparse.SUPPRESS)
    parser.add_argument("--big-child", nargs=4, metavar=("RUNTIME", "SIZE", "PTE", "PTD"), help=argparse.SUPPRESS)
    from llm_models import MODELS, default_cache_dir

    parser.add_argument("--size", action="append", choices=list(MODELS),
                        help="a user-sized model (repeat for several): exported once into --cache-dir, then timed")
    parser.add_argument("--variant", action="append", help="with --size: xnnpack-8da4w, xnnpack-ptd (default both)")
    parser.add_argument("--threads", type=int, nargs="+", default=[1, 2], help="with --size: thread counts")
    parser.add_argument("--rounds", type=int, default=3, help="with --size: interleaved rounds, best kept")
    parser.add_argument("--cache-dir", type=Path, default=default_cache_dir(),
                        help="with --size: where the exports are kept (default ~/.cache/pyexec-bench)")
    parser.add_argument("--sweep", action="store_true",
                        help="decode step time at 128, 1k and 4k filled cache positions, float32 and int8 KV caches")
    parser.add_argument("--sweep-threads", type=int, default=1, metavar="N", help="with --sweep: threads (default 1)")
    add_json_option(parser)
    args = parser.parse_args()
    if args.child:
        child(*args.child)
        return
    if args.big_child:
        big_child(*args.big_child)
        return
    if args.size:
        big_main(args)
        return
    if args.sweep:
        sweep_main(args)
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
