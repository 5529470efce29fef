"""Command line: `python -m pyexec demo | inspect FILE.pte | run FILE.pte | bench FILE.pte | generate | serve`."""

from __future__ import annotations

import argparse
import math
import os
import statistics
import sys
import time
import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Callable

import numpy as np

from . import (
    Error,
    InvalidArgumentError,
    InvalidProgramError,
    Method,
    Program,
    TensorInfo,
    _cli_bundled,
    _dtypes,
    get_num_threads,
    load,
    set_num_threads,
)

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


def inspect(path: str, data: str | None = None) -> int:
    program = _load_program(path, data)
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
            note = ""
            if alias is not None:
                source = meta.inputs[alias]
                in_place = source is not None and source.is_mutated
                note = f" (is input {alias}, updated in place)" if in_place else f" (is input {alias})"
            print(f"  output {i}: {_fmt_info(info)}{note}")
        ops, missing = program.operators(name)
        print(f"  operators ({len(ops)}): {', '.join(ops)}")
        if missing:
            print(f"  MISSING kernels ({len(missing)}): {', '.join(missing)}")
        _print_delegates(program, name)
    if program.is_bundled:
        _cli_bundled.print_test_suites(program)
    return 0


def _print_delegates(program: Program, name: str) -> None:
    """One line per delegate the method calls: its backend and node types,
    then what pyexec lacks to run it; a malformed payload is described by
    its error, and the other methods still are."""
    try:
        delegates = program.delegates(name)
    except InvalidProgramError as exc:
        print(f"  delegates: MALFORMED: {exc}")
        return
    for k, d in enumerate(delegates):
        if not d.supported:
            print(f"  delegate {k}: {d.backend}: MISSING backend (pyexec has none with this id)")
            continue
        print(f"  delegate {k}: {d.backend}, node types ({len(d.node_types)}): {', '.join(d.node_types)}")
        if d.unsupported:
            print(f"  MISSING in delegate {k}, node types pyexec does not run ({len(d.unsupported)}): "
                  f"{', '.join(d.unsupported)}")


def demo(steps: int) -> int:
    """Greedy decoding with the shipped decoder: the KV caches are caller-owned
    numpy arrays that the program updates in place, and the logits output is
    bound to a caller buffer; nothing is copied in or out per step."""
    if steps < 1:
        raise UsageError(f"--steps must be at least 1, got {steps}")
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
    if steps > max_steps:
        _note(f"demo: --steps {steps} capped at {max_steps}: the decoder's KV caches hold {max_steps} positions")
        steps = max_steps

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


class UsageError(Exception):
    """A mistake on the command line (exit status 2)."""


def _note(message: str) -> None:
    """A line on stderr about what the command is doing (stdout holds its results)."""
    print(f"pyexec {message}", file=sys.stderr, flush=True)


def _load_program(path: str, data: str | None = None) -> Program:
    """The program at `path`, with the data file `data` (.ptd) when given;
    an invalid file's message starts with the program's path."""
    try:
        return load(path, data_path=data)
    except InvalidProgramError as exc:
        raise InvalidProgramError(f"{path}: {exc}") from None


def _describe_slot(info: TensorInfo | None) -> str:
    return "a non-tensor value" if info is None else f"{info.dtype}{list(info.sizes)}"


def _slot_index(name: str, meta_inputs: Sequence[TensorInfo | None], method: str) -> int:
    """`input3` or `3` -> 3."""
    digits = name[len("input"):] if name.startswith("input") else name
    n = len(meta_inputs)
    if digits.isdigit() and int(digits) < n:
        return int(digits)
    names = ", ".join(f"input{j}" for j in range(n)) or "none"
    raise UsageError(f"unknown input {name!r}: method {method!r} has inputs {names} (or by index 0..{n - 1})"
                     if n else f"unknown input {name!r}: method {method!r} takes no inputs")


def _literal(text: str) -> Any:
    low = text.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    if low == "none":
        return None
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return _NOT_A_LITERAL


_NOT_A_LITERAL = object()


def _input_value(j: int, text: str, info: TensorInfo | None) -> Any:
    """A .npy file (loaded) or a literal (int, float, true/false, none)."""
    value = _literal(text)
    if value is _NOT_A_LITERAL:
        path = Path(text)
        if not path.is_file():
            if text.endswith(".npy") or os.sep in text:
                raise UsageError(f"input {j}: no such file {text!r}")
            raise UsageError(f"input {j}: {text!r} is neither a .npy file nor a literal (int, float, true/false, none)")
        with path.open("rb") as f:
            if f.read(6) != b"\x93NUMPY":
                raise UsageError(f"input {j}: {text!r} is not a .npy file")
        try:
            return np.load(path, allow_pickle=False)
        except (OSError, ValueError) as exc:
            raise UsageError(f"input {j}: cannot read {text!r} ({exc})") from None
    if info is None:
        return value
    if len(info.sizes) == 0 and value is not None and _dtypes.NUMPY_STORAGE.get(_dtypes.CODE_BY_NAME[info.dtype]):
        return np.array(value, dtype=_dtypes.NUMPY_STORAGE[_dtypes.CODE_BY_NAME[info.dtype]])
    raise UsageError(f"input {j} is a tensor {_describe_slot(info)}: give a .npy file (a literal fits only "
                     "a 0-dim tensor)")


def _parse_inputs(specs: Sequence[str], program: Program, method: str) -> dict[int, Any]:
    meta = program.method_meta(method)
    given: dict[int, Any] = {}
    for spec in specs:
        name, sep, text = spec.partition("=")
        if not sep or not name or not text:
            raise UsageError(
                f"--input {spec!r}: expected NAME=FILE.npy or NAME=VALUE (NAME: input0, input1, ... or 0, 1, ...)"
            )
        j = _slot_index(name.strip(), meta.inputs, method)
        if j in given:
            raise UsageError(f"input {j} is given twice")
        given[j] = _input_value(j, text, meta.inputs[j])
    return given


def _check_method(program: Program, method: str) -> None:
    """A name the program lacks is a usage error, with the library's message."""
    try:
        program.method_meta(method)
    except InvalidArgumentError as exc:
        raise UsageError(str(exc)) from None


def _format_value(value: Any) -> str:
    if isinstance(value, np.ndarray):
        with np.printoptions(threshold=24, edgeitems=3, precision=6, linewidth=100):
            body = np.array2string(value, separator=", ")
        code = _dtypes.CODE_BY_NUMPY.get(value.dtype)
        name = _dtypes.NAMES[code] if code is not None else str(value.dtype)
        return f"{name}{list(value.shape)}\n    " + body.replace("\n", "\n    ")
    if value is None:
        return "None"
    return f"{type(value).__name__} {value!r}"


def run(path: str, method_name: str, specs: Sequence[str], output_dir: str | None, data: str | None = None,
        threads: int | None = None) -> int:
    """Runs `method_name` once with the given inputs; writes or prints the outputs."""
    _set_threads(threads)
    program = _load_program(path, data)
    _check_method(program, method_name)
    given = _parse_inputs(specs, program, method_name)
    meta = program.method_meta(method_name)
    missing = [j for j in range(len(meta.inputs)) if j not in given]
    if missing:
        lines = [f"input{j} ({_describe_slot(meta.inputs[j])})" for j in missing]
        raise UsageError(f"missing input{'s' if len(missing) > 1 else ''}: {', '.join(lines)}; give "
                         f"{'each' if len(missing) > 1 else 'it'} with --input input{missing[0]}=FILE.npy "
                         f"(or {missing[0]}=VALUE for a scalar)")
    method = program.load_method(method_name, output_type="numpy")
    outputs = method.execute([given[j] for j in range(len(meta.inputs))])
    notes = [f" (is input {j}, updated in place)" if (j := method.output_aliases_input(i)) is not None else ""
             for i in range(len(outputs))]
    if output_dir is None:
        for i, value in enumerate(outputs):
            head, _, body = _format_value(value).partition("\n")
            print(f"output {i}: {head}{notes[i]}" + (f"\n{body}" if body else ""))
        return 0
    out = Path(output_dir)
    out.mkdir(parents=True, exist_ok=True)
    for i, value in enumerate(outputs):
        if value is None:
            print(f"output {i}: None (not written)")
            continue
        array = np.asarray(value)
        target = out / f"output{i}.npy"
        np.save(target, array)
        print(f"output {i}: {_format_value(array).splitlines()[0]}{notes[i]} -> {target}")
    return 0


def verify(path: str, method_name: str | None, specs: Sequence[str], rtol: float, atol: float,
           data: str | None = None, threads: int | None = None) -> int:
    """`run --verify`: every test case of a bundled program, PASS or FAIL each."""
    if specs:
        raise UsageError("--verify runs the bundled test cases' own inputs; drop --input")
    if not (rtol >= 0 and atol >= 0):
        raise UsageError(f"--rtol and --atol must be at least 0, got {rtol} and {atol}")
    _set_threads(threads)
    program = _load_program(path, data)
    if not program.is_bundled:
        raise UsageError(f"{path} is not a bundled program (.bpte): it holds no test cases to verify")
    suites = program.bundled_test_suites
    if method_name is not None and method_name not in suites:
        tested = ", ".join(repr(n) for n in suites) or "none"
        raise UsageError(f"the bundled program has no test cases for method {method_name!r} (tested: {tested})")
    return _cli_bundled.verify(program, method_name, rtol, atol)


# ---- bench -----------------------------------------------------------------


def _random_input(j: int, info: TensorInfo | None, rng: np.random.Generator) -> Any:
    """An input matching the metadata (upper-bound sizes for a dynamic slot):
    standard normal floats, integers in [0, 4) (small enough for indices and
    positions), random booleans."""
    if info is None:
        raise UsageError(f"input {j} is a non-tensor value, which a program only accepts with the value it was "
                         f"exported with: give it with --input {j}=VALUE")
    code = _dtypes.CODE_BY_NAME[info.dtype]
    if code in _dtypes.NOT_IN_NUMPY:
        if "torch" not in sys.modules:
            _note(f"bench: importing torch for {info.dtype} input {j} ...")
        torch = _import_torch()
        if torch is None:
            raise UsageError(f"input {j} is {info.dtype}, which needs torch (or give it with --input {j}=FILE.npy)")
        return torch.randn(info.sizes, dtype=getattr(torch, info.dtype))
    dtype = _dtypes.NUMPY_STORAGE[code]
    if dtype.kind == "f":
        return rng.standard_normal(info.sizes).astype(dtype)
    if dtype.kind == "b":
        return rng.integers(0, 2, info.sizes).astype(bool)
    return rng.integers(0, 4, info.sizes).astype(dtype)


def _import_torch() -> Any:
    try:
        import torch
    except ImportError:
        return None
    return torch


class _Progress:
    """A one-line textual progress bar on stderr. mode "auto": shown only when
    the runs are expected to take longer than `after` seconds; "on", "off"."""

    def __init__(self, label: str, total: int, expected_s: float, mode: str, after: float = 1.0) -> None:
        self.label, self.total = label, total
        self.on = mode == "on" or (mode == "auto" and expected_s > after)
        self.last = 0.0

    def update(self, done: int) -> None:
        if not self.on:
            return
        now = time.perf_counter()
        if done < self.total and now - self.last < 0.1:
            return
        self.last = now
        width = 30
        fill = width * done // self.total
        sys.stderr.write(f"\r{self.label:<11} [{'#' * fill}{'.' * (width - fill)}] {done}/{self.total}")
        if done == self.total:
            sys.stderr.write("\n")
        sys.stderr.flush()


def _time_runs(label: str, call: Callable[[], object], runs: int, warmup: int, progress: str) -> list[float]:
    t0 = time.perf_counter()
    for _ in range(warmup):
        call()
    per_run = (time.perf_counter() - t0) / warmup if warmup else 0.0
    bar = _Progress(label, runs, per_run * runs, progress)
    times: list[float] = []
    for k in range(runs):
        t = time.perf_counter()
        call()
        times.append(time.perf_counter() - t)
        bar.update(k + 1)
    return times


def _percentile(sorted_times: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    pos = (len(sorted_times) - 1) * q
    lo = math.floor(pos)
    hi = min(lo + 1, len(sorted_times) - 1)
    return sorted_times[lo] + (sorted_times[hi] - sorted_times[lo]) * (pos - lo)


_STATS = ("min", "median", "p90", "p99", "max")


def _stats(times: Sequence[float]) -> dict[str, float]:
    t = sorted(times)
    return {"min": t[0], "median": _percentile(t, 0.5), "p90": _percentile(t, 0.9), "p99": _percentile(t, 0.99),
            "max": t[-1]}


def _fmt_row(label: str, stats: dict[str, float], unit: float) -> str:
    return f"{label:<11}" + "".join(f"{stats[k] / unit:>11.1f}" for k in _STATS)


class _QuietStderr:
    """Silences file descriptor 2 (what C++ libraries and Python warnings print
    while executorch and torch import and load)."""

    def __enter__(self) -> None:
        sys.stderr.flush()
        self.saved = os.dup(2)
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, 2)
        os.close(devnull)

    def __exit__(self, *exc: object) -> None:
        sys.stderr.flush()
        os.dup2(self.saved, 2)
        os.close(self.saved)


def _executorch_runner(path: str, method_name: str, inputs: list[Any],
                       data: str | None = None) -> tuple[Callable[[], object] | None, str]:
    """A zero-argument callable running the program once with ExecuTorch's
    runtime, or None and the reason it cannot."""
    if "executorch.runtime" not in sys.modules:  # seconds of silence otherwise
        _note("bench: importing torch and ExecuTorch's runtime to compare with (--no-executorch skips this) ...")
    try:
        with _QuietStderr(), warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from executorch.runtime import Runtime  # type: ignore[import-not-found, import-untyped, unused-ignore]
    except ImportError:
        return None, "not installed (pip install executorch to compare)"
    torch = _import_torch()
    if torch is None:
        return None, "needs torch, which is not installed"
    try:
        et_inputs = [torch.from_numpy(np.array(x)) if isinstance(x, np.ndarray) else x for x in inputs]
        with _QuietStderr():
            runtime = Runtime.get()
            et_program = (runtime.load_program(Path(path)) if data is None
                          else runtime.load_program(Path(path), data_path=data))
            et_method = et_program.load_method(method_name)
            if et_method is None:
                return None, f"has no method {method_name!r}"
            et_method.execute(et_inputs)
    except Exception as exc:  # noqa: BLE001 - any failure of the other runtime only skips the comparison
        return None, f"could not run the program: {type(exc).__name__}: {exc}".splitlines()[0]

    def call() -> object:
        return et_method.execute(et_inputs)

    return call, ""


def _timing_inputs(program: Program, method_name: str, specs: Sequence[str], seed: int) -> list[Any]:
    """The inputs `bench` and `profile` run on: random ones made from the
    method's metadata, each --input replacing one."""
    _check_method(program, method_name)
    given = _parse_inputs(specs, program, method_name)
    meta = program.method_meta(method_name)
    rng = np.random.default_rng(seed)
    return [given[j] if j in given else _random_input(j, info, rng) for j, info in enumerate(meta.inputs)]


def profile(path: str, method_name: str, specs: Sequence[str], runs: int, warmup: int, seed: int,
            data: str | None = None, trace: str | None = None, etdump: str | None = None,
            threads: int | None = None) -> int:
    """Times every instruction over `runs` executes (after `warmup` untimed
    ones) and prints the table; writes a Chrome trace and an ETDump file
    when asked."""
    if runs < 1 or warmup < 0:
        raise UsageError("--runs must be at least 1 and --warmup at least 0")
    nthreads = _set_threads(threads)
    program = _load_program(path, data)
    inputs = _timing_inputs(program, method_name, specs, seed)
    method: Method = program.load_method(method_name, output_type="numpy")
    for _ in range(warmup):
        method.execute(inputs)
    with method.profile() as p:
        for _ in range(runs):
            method.execute(inputs)
    print(f"{path}: method {method_name!r}, {runs} profiled runs after {warmup} warm-up, {nthreads} thread(s)")
    print(p.table())
    if trace is not None:
        p.chrome_trace(trace)
        print(f"trace: {trace} (open it in https://ui.perfetto.dev or chrome://tracing)")
    if etdump is not None:
        p.write_etdump(etdump)
        print(f"etdump: {etdump} (open it with executorch.devtools.Inspector(etdump_path=...))")
    return 0


def bench(path: str, method_name: str, specs: Sequence[str], runs: int, warmup: int, seed: int,
          compare: bool, progress: str, data: str | None = None, threads: int | None = None) -> int:
    """Latency distribution of `runs` executes with random inputs, and the same
    with ExecuTorch's runtime when it is importable, both at one thread count."""
    if runs < 1 or warmup < 0:
        raise UsageError("--runs must be at least 1 and --warmup at least 0")
    nthreads = _set_threads(threads)
    program = _load_program(path, data)
    inputs = _timing_inputs(program, method_name, specs, seed)
    method: Method = program.load_method(method_name, output_type="numpy")
    method.execute(inputs)  # fails here, with its message, before any timing

    def call() -> object:
        return method.execute(inputs)

    shapes = ", ".join(_format_value(x).splitlines()[0] if isinstance(x, np.ndarray) else repr(x) for x in inputs)
    print(f"{path}: method {method_name!r}, {runs} runs after {warmup} warm-up, inputs: {shapes or 'none'}")
    print(f"threads: {nthreads}" + (" (each runtime)" if compare else ""))
    results = {"pyexec": _stats(_time_runs("pyexec", call, runs, warmup, progress))}
    note = ""
    if compare:
        et_call, reason = _executorch_runner(path, method_name, inputs, data)
        if et_call is not None:
            threads_note = _executorch_threads(nthreads)
            if threads_note:
                print(threads_note)
            results["executorch"] = _stats(_time_runs("executorch", et_call, runs, warmup, progress))
        else:
            note = f"executorch: {reason}"
    unit = 1e-6
    print(f"{'latency us':<11}" + "".join(f"{k:>11}" for k in _STATS))
    for label, stats in results.items():
        print(_fmt_row(label, stats, unit))
    if "executorch" in results:
        print(verdict(results["pyexec"]["median"], results["executorch"]["median"]))
    elif note:
        print(note)
    return 0


def _fmt_time(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("\u00b5s", 1e-6)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds / 1e-9:.3g} ns"


def verdict(pyexec_s: float, executorch_s: float) -> str:
    """Which runtime was faster, by how much, in words: "pyexec 1.6x faster
    than ExecuTorch (median time 38 µs vs 62 µs)"."""
    times = f"(median time {_fmt_time(pyexec_s)} for pyexec, {_fmt_time(executorch_s)} for ExecuTorch)"
    if pyexec_s <= 0 or executorch_s <= 0 or math.isclose(pyexec_s, executorch_s, rel_tol=0.005):
        return f"pyexec and ExecuTorch took the same time {times}"
    if pyexec_s < executorch_s:
        return f"pyexec {executorch_s / pyexec_s:.2f}x faster than ExecuTorch {times}"
    return f"ExecuTorch {pyexec_s / executorch_s:.2f}x faster than pyexec {times}"


def _set_threads(threads: int | None) -> int:
    """--threads N: pyexec's thread count from here on (else its default);
    returns the count the command runs with."""
    if threads is not None:
        if not 1 <= threads <= 1024:
            raise UsageError(f"--threads must be from 1 to 1024, got {threads}")
        set_num_threads(threads)
    return get_num_threads()


def _executorch_threads(threads: int) -> str:
    """Sets ExecuTorch's thread pool to `threads`; the note to print if it cannot."""
    try:
        from executorch.extension.pybindings.portable_lib import (  # type: ignore[import-not-found, import-untyped, unused-ignore]
            _threadpool_get_thread_count,
            _unsafe_reset_threadpool,
        )
    except ImportError:
        return "executorch: its thread count cannot be set in this build"
    _unsafe_reset_threadpool(threads)
    n = int(_threadpool_get_thread_count())
    return "" if n == threads else f"executorch: runs {n} threads (asked for {threads})"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pyexec", description="Run ExecuTorch programs with pyexec.")
    sub = parser.add_subparsers(dest="command", required=True)
    d = sub.add_parser("demo", help="generate tokens with the shipped decoder and a caller-owned KV cache",
                       description="Greedy decoding with the decoder shipped in the package: its KV caches are "
                       "numpy arrays the program updates in place, its logits a bound output.")
    d.add_argument("--steps", type=int, default=32,
                   help="tokens to generate, from 1 up to the decoder's cache length (default: %(default)s)")
    i = sub.add_parser("inspect", help="describe a .pte file: methods, inputs, outputs, operators, delegates",
                       description="Describe a .pte file: each method's inputs and outputs (dtype, sizes, "
                       "memory planning, in-place updates), the operators it uses and the delegates it calls "
                       "(backend, node types), with what pyexec lacks to run them.")
    i.add_argument("file", help="the .pte program")
    data_help = "the program's data file (.ptd), for a program exported with its weights kept apart"
    i.add_argument("--data", metavar="FILE", help=data_help)
    threads_default = "(default: PYEXEC_NUM_THREADS, else every CPU this process may use)"
    input_help = ("an input: NAME=FILE.npy or NAME=VALUE (a literal int, float, true/false or none for a scalar); "
                  "NAME is input0, input1, ... or the index 0, 1, ...; repeat or list several")
    r = sub.add_parser("run", help="run a method once with inputs from .npy files; write or print the outputs",
                       description="Run a method once. Inputs come from .npy files (or literals for scalars); "
                       "outputs are written as output0.npy, output1.npy, ... or printed.")
    r.add_argument("file", help="the .pte program")
    r.add_argument("-i", "--input", action="extend", nargs="+", default=[], metavar="NAME=VALUE", help=input_help)
    r.add_argument("-o", "--output-dir", help="write the outputs here as output0.npy, ... (default: print them)")
    r.add_argument("-m", "--method",
                   help="the method to run (default: forward); with --verify, the one method to verify "
                   "(else every tested method)")
    r.add_argument("--data", metavar="FILE", help=data_help)
    r.add_argument("--verify", action="store_true",
                   help="a bundled program (.bpte): run every test case it holds and compare the outputs with "
                   "the expected ones; exit status 1 when one differs")
    r.add_argument("--rtol", type=float, default=1e-5, help="with --verify: relative tolerance (default: %(default)s)")
    r.add_argument("--atol", type=float, default=1e-8, help="with --verify: absolute tolerance (default: %(default)s)")
    r.add_argument("-t", "--threads", type=int, metavar="N",
                   help="threads pyexec's kernels may use " + threads_default)
    b = sub.add_parser("bench", help="latency distribution over many runs with random inputs, and ExecuTorch's",
                       description="Time a method over many runs with random inputs made from its metadata "
                       "(--input overrides one), and the same with ExecuTorch's runtime when it is importable.")
    b.add_argument("file", help="the .pte program")
    b.add_argument("-n", "--runs", type=int, default=200, help="timed runs, at least 1 (default: %(default)s)")
    b.add_argument("--warmup", type=int, default=10, help="untimed runs before them (default: %(default)s)")
    b.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default: %(default)s)")
    b.add_argument("-i", "--input", action="extend", nargs="+", default=[], metavar="NAME=VALUE", help=input_help)
    b.add_argument("-m", "--method", default="forward", help="the method to time (default: %(default)s)")
    b.add_argument("--data", metavar="FILE", help=data_help)
    b.add_argument("-t", "--threads", type=int, metavar="N",
                   help="threads for pyexec and for ExecuTorch's runtime alike " + threads_default)
    b.add_argument("--no-executorch", action="store_true",
                   help="do not compare with ExecuTorch's runtime (whose import takes seconds)")
    b.add_argument("--progress", choices=("auto", "on", "off"), default="auto",
                   help="progress bar on stderr (auto: when the runs take more than a second) (default: %(default)s)")
    f = sub.add_parser("profile", help="time every instruction (operator, delegate node) over a few runs",
                       description="Run a method with random inputs made from its metadata (--input overrides "
                       "one) and print where the time goes: one row per operator (and per node type inside "
                       "a delegate), sorted by total time; --trace also writes a Chrome trace.")
    f.add_argument("file", help="the .pte program")
    f.add_argument("-m", "--method", default="forward", help="the method to profile (default: %(default)s)")
    f.add_argument("-n", "--runs", type=int, default=10, help="profiled runs, at least 1 (default: %(default)s)")
    f.add_argument("--warmup", type=int, default=2, help="unprofiled runs before them (default: %(default)s)")
    f.add_argument("--seed", type=int, default=0, help="seed of the random inputs (default: %(default)s)")
    f.add_argument("-i", "--input", action="extend", nargs="+", default=[], metavar="NAME=VALUE", help=input_help)
    f.add_argument("--data", metavar="FILE", help=data_help)
    f.add_argument("-t", "--threads", type=int, metavar="N",
                   help="threads pyexec's kernels may use " + threads_default)
    f.add_argument("--trace", metavar="OUT.json", help="write Chrome trace-event JSON (Perfetto, chrome://tracing)")
    f.add_argument("--etdump", metavar="OUT.etdp",
                   help="write an ETDump file (ExecuTorch's format) for executorch.devtools.Inspector")
    from .llm import cli as llm_cli  # `pyexec generate` (pyexec.llm; tokenizers are the [llm] extra)

    llm_cli.add_parser(sub)
    from .llm.server import add_parser as add_serve_parser  # `pyexec serve` (FastAPI: the [serve] extra)

    add_serve_parser(sub)
    args = parser.parse_args(argv)
    if args.command == "serve":
        from .llm.server import serve

        return serve(args)
    try:
        if args.command == "generate":
            return llm_cli.run(args)
        if args.command == "demo":
            return demo(args.steps)
        if args.command == "run" and args.verify:
            return verify(args.file, args.method, args.input, args.rtol, args.atol, args.data, args.threads)
        if args.command == "run":
            return run(args.file, args.method or "forward", args.input, args.output_dir, args.data, args.threads)
        if args.command == "profile":
            return profile(args.file, args.method, args.input, args.runs, args.warmup, args.seed, args.data,
                           args.trace, args.etdump, args.threads)
        if args.command == "bench":
            return bench(args.file, args.method, args.input, args.runs, args.warmup, args.seed,
                         not args.no_executorch, args.progress, args.data, args.threads)
        return inspect(args.file, args.data)
    except Error as exc:
        print(f"pyexec: {exc}", file=sys.stderr)
        return 1
    except UsageError as exc:
        print(f"pyexec {args.command}: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("pyexec: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # stdout closed early (`pyexec run ... | head`)
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1


if __name__ == "__main__":
    sys.exit(main())
