"""LLM serving benchmarks. Part 1, the runner: what pyexec.llm adds per token
over a bare Method.execute loop, and time to first token and decode speed of
pyexec.llm.TextLLMRunner against ExecuTorch's TextLLMRunner on the same file,
tokenizer, prompt and thread count.

    python benchmarks/bench_serve.py                      # a tiny export_llm Llama (exported once, cached)
    python benchmarks/bench_serve.py --model M.pte --tokenizer tokenizer.json [--data-path W.ptd]
    python benchmarks/bench_serve.py --threads 1 2 --json out.json

The default model is the test suite's tiny Llama (dim 64, 2 layers, 128
cache positions, vocabulary 300) with the test tokenizer: a step costs tens
of microseconds, so the runner's own per-token cost shows. Both runners
decode greedily from the same prompt for the same number of tokens; the
rows say whether their texts were the same. Each variant keeps its best of
--rounds interleaved rounds (the machines are shared and noisy)."""

from __future__ import annotations

import argparse
import os
import tempfile
import time
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import numpy as np
from _common import add_json_option, fmt_us, interleaved_us, print_table, write_json

import pyexec
import pyexec.llm as px

PROMPT = "The quick brown fox jumps over the lazy dog. Once upon a time"


def default_files(where: Path) -> tuple[Path, Path]:
    from support.llm_runner import llm_program, write_tokenizer

    tokenizer = write_tokenizer(where / "tok")
    model = where / "llama.pte"
    model.write_bytes(llm_program(max_seq_len=128, whole_chars=True))
    return model, tokenizer


def executorch_runner_module() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import executorch.extension.llm.runner as et
        import executorch.kernels.quantized  # noqa: F401
        from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401
    return et


def set_threads(n: int) -> tuple[int, int]:
    """pyexec's and ExecuTorch's thread counts set to n; what each reports."""
    from executorch.extension.pybindings.portable_lib import _threadpool_get_thread_count, _unsafe_reset_threadpool

    pyexec.set_num_threads(n)
    _unsafe_reset_threadpool(n)
    return pyexec.get_num_threads(), int(_threadpool_get_thread_count())


@contextmanager
def quiet_stdout() -> Any:
    """ExecuTorch's runner prints every token and a report to the C stdout:
    sent to /dev/null while timing (for both runners alike)."""
    import sys

    sys.stdout.flush()
    saved = os.dup(1)
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(null)
        os.close(saved)


# ---- part 1a: per-token overhead ------------------------------------------------------


def overhead(model: Path, data: Path | None, tokenizer: Path, budget_s: float, rounds: int) -> None:
    llm = px.LLMProgram(model, data)
    prompt = px.load_tokenizer(tokenizer).encode(PROMPT)
    room = llm.max_context_len - len(prompt) - 1

    # a bare loop: the forward Method, inputs installed once and written in place, argmax
    method = llm.program.load_method("forward", output_type="numpy")
    tok = np.zeros((1, 1), np.int64)
    pos = np.zeros((1,), np.int64)
    method.execute([np.array([prompt]), np.array([0])])
    method.set_inputs([tok, pos])
    state = {"pos": len(prompt), "tok": 0}

    def bare() -> None:
        if state["pos"] >= llm.max_context_len:
            state["pos"] = len(prompt)
        tok[0, 0] = state["tok"]
        pos[0] = state["pos"]
        (logits,) = method.execute(None, clone_outputs=False)
        state["tok"] = int(np.argmax(logits))
        state["pos"] += 1

    session = llm.new_session()
    session.prefill(prompt)
    sampler = px.Sampler()
    last = {"tok": 0}

    def engine() -> None:
        if session.position >= llm.max_context_len:
            session.rewind(len(prompt))
        last["tok"] = sampler.sample(session.decode(last["tok"]))

    runner = px.TextLLMRunner(str(model), str(tokenizer), None if data is None else str(data))
    config = px.GenerationConfig(echo=False, max_new_tokens=room, temperature=0.0)
    pieces: list[str] = []

    def generate() -> None:
        runner.reset()
        runner.generate(PROMPT, config, pieces.append)

    # the runner's figure per token: a whole generate() minus its prefill, over its decode steps
    def prefill_only() -> None:
        runner.reset()
        runner.prefill(PROMPT, config)

    bare_us, engine_us, gen_us, pre_us = interleaved_us([bare, engine, generate, prefill_only],
                                                        budget_s=budget_s, rounds=rounds)
    steps = room - 1
    runner_us = (gen_us - pre_us) / steps
    rows = [
        ["Method.execute loop (inputs in place, argmax)", fmt_us(bare_us), "-"],
        ["Session.decode + Sampler (greedy)", fmt_us(engine_us), fmt_us(engine_us - bare_us)],
        [f"TextLLMRunner.generate, per decode step ({steps} steps)", fmt_us(runner_us), fmt_us(runner_us - bare_us)],
    ]
    print_table(f"Per-token cost, {pyexec.get_num_threads()} thread(s): {model.name}", ["loop", "per token",
                "over the bare loop"], rows,
                [{"bare_us": bare_us, "engine_us": engine_us, "runner_us": runner_us, "steps": steps}])


# ---- part 1b: TTFT and decode speed against ExecuTorch's runner -------------------------


def timed_generation(module: Any, runner: Any, max_new: int) -> tuple[float, float, str, int]:
    """(time to first token s, decode tokens/s, text, generated tokens) of one greedy generation."""
    stamps: list[float] = []
    pieces: list[str] = []

    def on_token(piece: str) -> None:
        stamps.append(time.perf_counter())
        pieces.append(piece)

    runner.reset()
    config = module.GenerationConfig(echo=False, max_new_tokens=max_new, temperature=0.0)
    with quiet_stdout():
        t0 = time.perf_counter()
        runner.generate(PROMPT, config, on_token)
    ttft = stamps[0] - t0
    decode = (len(stamps) - 1) / (stamps[-1] - stamps[0]) if len(stamps) > 1 and stamps[-1] > stamps[0] else 0.0
    return ttft, decode, "".join(pieces), len(stamps)


def versus_executorch(model: Path, data: Path | None, tokenizer: Path, threads: int, rounds: int) -> None:
    et = executorch_runner_module()
    ours_threads, theirs_threads = set_threads(threads)
    d = None if data is None else str(data)
    runners: dict[str, tuple[Any, Any]] = {
        "pyexec.llm": (px, px.TextLLMRunner(str(model), str(tokenizer), d)),
        "ExecuTorch": (et, et.TextLLMRunner(str(model), str(tokenizer), d)),
    }
    llm = px.LLMProgram(model, data)
    max_new = llm.max_context_len - len(px.load_tokenizer(tokenizer).encode(PROMPT)) - 1
    best: dict[str, list[float]] = {k: [float("inf"), 0.0] for k in runners}
    texts: dict[str, str] = {}
    counts: dict[str, int] = {}
    for _ in range(rounds):
        for name, (module, runner) in runners.items():
            ttft, decode, text, n = timed_generation(module, runner, max_new)
            best[name][0] = min(best[name][0], ttft)
            best[name][1] = max(best[name][1], decode)
            texts[name], counts[name] = text, n
    same = texts["pyexec.llm"] == texts["ExecuTorch"]
    rows, values = [], []
    for name in runners:
        ttft, decode = best[name]
        rows.append([name, f"{ttft * 1e3:.2f} ms", f"{decode:.0f}", str(counts[name]),
                     "yes" if same else "NO"])
        values.append({"runner": name, "ttft_s": ttft, "decode_tokens_per_s": decode, "tokens": counts[name]})
    speedup = best["pyexec.llm"][1] / best["ExecuTorch"][1] if best["ExecuTorch"][1] else float("nan")
    print_table(f"TextLLMRunner, greedy, {threads} thread(s) (pyexec {ours_threads}, ExecuTorch {theirs_threads}): "
                f"{model.name}, decode {speedup:.2f}x ExecuTorch's",
                ["runner", "time to first token", "decode tokens/s", "tokens", "same text"], rows, values)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="a .pte (default: the tests' tiny Llama, exported once)")
    parser.add_argument("--tokenizer", type=Path, help="its tokenizer (needed with --model)")
    parser.add_argument("--data-path", type=Path, help="the model's .ptd, if any")
    parser.add_argument("--threads", type=int, nargs="+", default=[1], help="thread counts to run (default: 1)")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds, best kept (default: 5)")
    parser.add_argument("--budget", type=float, default=0.2, help="seconds per variant and round (default: 0.2)")
    parser.add_argument("--no-executorch", action="store_true", help="only the per-token cost table")
    add_json_option(parser)
    args = parser.parse_args()
    if (args.model is None) != (args.tokenizer is None):
        parser.error("--model and --tokenizer go together")
    with tempfile.TemporaryDirectory() as d:
        model, tokenizer = (args.model, args.tokenizer) if args.model else default_files(Path(d))
        if not args.no_executorch:
            executorch_runner_module()  # its imports (seconds) before any timing
        for n in args.threads:
            if args.no_executorch:
                pyexec.set_num_threads(n)
            else:
                set_threads(n)
            overhead(model, args.data_path, tokenizer, args.budget, args.rounds)
            if not args.no_executorch:
                versus_executorch(model, args.data_path, tokenizer, n, args.rounds)
    write_json(args.json, "serve", {"threads": args.threads, "rounds": args.rounds, "prompt": PROMPT})



if __name__ == "__main__":
    main()
