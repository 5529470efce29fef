"""Greedy generation with an LLM program exported by ExecuTorch's export_llm
(examples/llm/export_llama.py writes some), once with pyexec and once with
ExecuTorch's runtime on the same file(s), printing both token sequences:

    python examples/llm/generate.py examples/out/llm/llama_portable.pte --prompt 1,17,29,3 --steps 20
    cd examples/out/llm && python ../../llm/generate.py llama_xnnpack_ptd.pte --data llama_xnnpack_ptd_weights.ptd

Token ids in and out (no tokenizer). The program is forward(tokens [1, S],
input_pos [1]) -> logits [1, vocab] of the last position; its KV caches are
mutable buffers the program updates in place, so a step passes only the new
tokens and where they start. The pyexec loop:

  * prefill: the whole prompt at position 0, one call;
  * decode: export_llm plans no memory for the inputs (they are read where
    they lie), so a [1, 1] token tensor and a [1] position tensor are
    installed once with set_inputs and each step only writes their values;
  * logits: export_llm memory-plans the output, so it cannot be bound to a
    caller buffer (set_output refuses planned outputs; the loop tries and
    says so); execute(clone_outputs=False) returns a view of the method's
    memory instead, read (argmax) before the next step overwrites it. A
    program exported with unplanned outputs gets its logits written straight
    into the caller's buffer.

Programs exported by optimum-executorch (examples/llm/export_hf.py) take
cache_position, one position per token, return [1, S, vocab] and plan memory
for their inputs (so each step passes them, copied in); both loops read which
convention a program follows from its metadata."""

from __future__ import annotations

import argparse
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

import pyexec

OnLogits = Callable[[int, torch.Tensor], None]
"""Called with (position of the step's first token, that step's logits)."""


def _check_lengths(prompt: Sequence[int], steps: int, max_seq_len: int) -> None:
    if not prompt:
        raise ValueError("the prompt needs at least one token")
    if len(prompt) + steps > max_seq_len:
        raise ValueError(f"{len(prompt)} prompt tokens + {steps} steps exceed the cache's {max_seq_len} positions")


def _max_seq_len(run_constant: Callable[[str], Any]) -> int:
    """export_llm stores the cache length as a constant method."""
    return int(run_constant("get_max_seq_len")[0])


def _positions(per_token: bool, start: int, n: int) -> torch.Tensor:
    """export_llm's input_pos is [start]; optimum-executorch's cache_position
    is one position per token."""
    return torch.arange(start, start + n) if per_token else torch.tensor([start])


def _last(logits: torch.Tensor) -> torch.Tensor:
    """The last position's logits: export_llm returns [1, vocab], optimum's
    exports [1, S, vocab]."""
    return logits[0, -1] if logits.dim() == 3 else logits[0]


def pyexec_generate(
    pte: str | Path,
    data: str | Path | None,
    prompt: Sequence[int],
    steps: int,
    on_logits: OnLogits | None = None,
    method: pyexec.Method | None = None,
) -> list[int]:
    """Greedy decoding with pyexec: the prompt, then `steps` tokens, each the
    argmax of the previous step's logits. Returns the generated tokens.
    `method`: a loaded forward to reuse (its caches are simply overwritten
    from position 0). `on_logits` sees a view of the method's memory: copy
    what you keep."""
    if method is None:
        program = pyexec.load(pte, data_path=data)
        _check_lengths(prompt, steps, _max_seq_len(lambda name: program.load_method(name).execute([])))
        method = program.load_method("forward")
    meta = method.meta
    per_token = meta.inputs[1] is not None and meta.inputs[1].is_dynamic
    in_place = not any(info is not None and info.is_memory_planned for info in meta.inputs)
    out_info = meta.outputs[0]
    assert out_info is not None
    try:  # written in place, when the export left the output unplanned
        method.set_output(torch.empty(out_info.sizes), 0)
    except pyexec.InvalidArgumentError:
        pass  # memory-planned: read the method's own memory through a view

    (logits,) = method.execute(
        [torch.tensor([list(prompt)]), _positions(per_token, 0, len(prompt))], clone_outputs=False
    )
    if on_logits:
        on_logits(0, logits)
    token, pos = torch.zeros(1, 1, dtype=torch.int64), torch.zeros(1, dtype=torch.int64)
    if in_place:
        method.set_inputs([token, pos])  # unplanned inputs: read where they lie on every execute
    out = []
    for step in range(steps):
        out.append(int(_last(logits).argmax()))
        if step == steps - 1:
            break
        token[0, 0] = out[-1]
        pos[0] = len(prompt) + step
        (logits,) = method.execute(None if in_place else [token, pos], clone_outputs=False)
        if on_logits:
            on_logits(len(prompt) + step, logits)
    return out


def executorch_runtime() -> Any:
    """ExecuTorch's runtime, with the llama custom operators and the
    quantized kernels registered (importing them takes seconds)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import executorch.kernels.quantized  # noqa: F401
        from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401
        from executorch.runtime import Runtime

    return Runtime.get()


def executorch_method(pte: str | Path, data: str | Path | None, name: str = "forward") -> Any:
    """`name` of the program loaded by ExecuTorch's runtime."""
    runtime = executorch_runtime()
    program = runtime.load_program(Path(pte), data_path=Path(data)) if data else runtime.load_program(Path(pte))
    return program.load_method(name)


def executorch_generate(
    pte: str | Path,
    data: str | Path | None,
    prompt: Sequence[int],
    steps: int,
    on_logits: OnLogits | None = None,
    method: Any = None,
    per_token: bool | None = None,
) -> list[int]:
    """The same greedy loop through ExecuTorch's runtime. `per_token`: the
    program takes one position per token (optimum-executorch's
    cache_position) rather than export_llm's [start]; None reads it from the
    program's metadata."""
    if per_token is None:
        info = pyexec.load(pte, data_path=data).method_meta("forward").inputs[1]
        per_token = info is not None and info.is_dynamic
    if method is None:
        _check_lengths(prompt, steps, _max_seq_len(lambda name: executorch_method(pte, data, name).execute([])))
        method = executorch_method(pte, data)
    (logits,) = method.execute([torch.tensor([list(prompt)]), _positions(per_token, 0, len(prompt))])
    if on_logits:
        on_logits(0, logits)
    out = []
    for step in range(steps):
        out.append(int(_last(logits).argmax()))
        if step == steps - 1:
            break
        (logits,) = method.execute([torch.tensor([[out[-1]]]), _positions(per_token, len(prompt) + step, 1)])
        if on_logits:
            on_logits(len(prompt) + step, logits)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("program", type=Path, help="the .pte export_llm wrote")
    parser.add_argument("--data", type=Path, help="its .ptd, if the weights are kept apart")
    parser.add_argument("--prompt", default="1,17,29,3,42", help="comma-separated token ids (default 1,17,29,3,42)")
    parser.add_argument("--steps", type=int, default=20, help="tokens to generate (default 20)")
    args = parser.parse_args()

    prompt = [int(t) for t in args.prompt.split(",")]
    executorch_runtime()  # its imports, outside the timings
    results = {}
    for name, generate in (("pyexec", pyexec_generate), ("ExecuTorch", executorch_generate)):
        t0 = time.perf_counter()
        results[name] = generate(args.program, args.data, prompt, args.steps)
        print(f"{name:>10}: {results[name]}  ({time.perf_counter() - t0:.3f} s, loading included)")
    same = results["pyexec"] == results["ExecuTorch"]
    print("same tokens" if same else "the sequences differ")
    raise SystemExit(0 if same else 1)


if __name__ == "__main__":
    main()
