"""`pyexec generate MODEL --tokenizer FILE --prompt TEXT`: text generation
from the command line with pyexec.llm.TextLLMRunner, the tokens streamed to
stdout as they come, the statistics on stderr at the end."""

from __future__ import annotations

import argparse
import os
import sys
import time
from typing import Any

HELP = "generate text with an LLM program and its tokenizer, streaming the tokens"
DESCRIPTION = (
    "Generate text with an LLM program exported by ExecuTorch (export_llm, optimum-executorch) and its "
    "tokenizer (a Hugging Face tokenizer.json, tiktoken, SentencePiece or Llama 2 .bin file), as ExecuTorch's "
    "TextLLMRunner does: the prompt is prefilled, the first token taken greedily, the rest sampled at "
    "--temperature until an end-of-sequence token or --max-new-tokens. Tokens are printed as they come; the "
    "statistics go to stderr. Needs the optional dependencies: pip install pyexec[llm]."
)


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The `generate` subcommand on the `pyexec` parser's subparsers."""
    g: argparse.ArgumentParser = sub.add_parser("generate", help=HELP, description=DESCRIPTION)
    g.add_argument("model", help="the .pte program")
    g.add_argument("--tokenizer", required=True, metavar="FILE", help="the tokenizer file")
    g.add_argument("--prompt", required=True, help="the prompt text")
    g.add_argument("--chat", action="store_true",
                   help="wrap the prompt in the tokenizer's chat template (chat_template.jinja or the "
                   "chat_template of tokenizer_config.json beside the tokenizer; else 'user: ...' lines)")
    g.add_argument("--system", metavar="TEXT", help="with --chat: a system message before the prompt")
    g.add_argument("--max-new-tokens", type=int, default=-1, metavar="N",
                   help="at most N new tokens (default: until the context is full)")
    g.add_argument("--temperature", type=float, default=0.8,
                   help="0 for greedy decoding, up to 1 (default: %(default)s, as ExecuTorch's runner)")
    g.add_argument("--top-k", type=int, default=0, metavar="K",
                   help="sample among the K most likely tokens only (default: 0, all)")
    g.add_argument("--top-p", type=float, default=0.9, metavar="P",
                   help="sample from the smallest set of tokens whose probability reaches P "
                   "(default: %(default)s, ExecuTorch's sampler's)")
    g.add_argument("--seed", type=int, help="seed of the sampler, for repeatable output (default: a fresh one)")
    g.add_argument("--data-path", metavar="FILE", help="the program's data file (.ptd), if its weights are apart")
    g.add_argument("--echo", action="store_true", help="print the prompt before the generated text")
    g.add_argument("-t", "--threads", type=int, metavar="N",
                   help="threads pyexec's kernels may use (default: PYEXEC_NUM_THREADS, else every CPU "
                   "this process may use)")
    return g


def _fail(message: str, code: int) -> int:
    print(f"pyexec generate: {message}", file=sys.stderr)
    return code


def run(args: argparse.Namespace) -> int:
    """Runs `pyexec generate` with parsed arguments; returns the exit code
    (2 for bad arguments or a missing optional dependency, 1 when the model
    or tokenizer cannot be used or generation fails)."""
    import pyexec

    from . import GenerationConfig, TextLLMRunner, apply_chat_template

    if args.max_new_tokens == 0 or args.max_new_tokens < -1:
        return _fail(f"--max-new-tokens must be at least 1, got {args.max_new_tokens}", 2)
    if not 0.0 <= args.temperature <= 1.0:
        return _fail(f"--temperature must be from 0 to 1, got {args.temperature}", 2)
    if args.top_k < 0:
        return _fail(f"--top-k must be 0 or more, got {args.top_k}", 2)
    if not 0.0 < args.top_p <= 1.0:
        return _fail(f"--top-p must be in (0, 1], got {args.top_p}", 2)
    if args.system is not None and not args.chat:
        return _fail("--system needs --chat", 2)
    if args.threads is not None:
        if args.threads < 1:
            return _fail(f"--threads must be at least 1, got {args.threads}", 2)
        pyexec.set_num_threads(args.threads)
    prompt = args.prompt
    try:
        if args.chat:
            messages = ([{"role": "system", "content": args.system}] if args.system else [])
            messages.append({"role": "user", "content": prompt})
            prompt = apply_chat_template(messages, None, os.path.dirname(os.path.abspath(args.tokenizer)))
        runner = TextLLMRunner(args.model, args.tokenizer, args.data_path)
    except ImportError as exc:
        return _fail(str(exc), 2)
    except (RuntimeError, ValueError, OSError) as exc:
        return _fail(str(exc), 1)
    if not prompt:
        return _fail("--prompt is empty", 2)
    config = GenerationConfig(echo=args.echo, max_new_tokens=args.max_new_tokens, temperature=args.temperature,
                              top_k=args.top_k, top_p=args.top_p, seed=args.seed)
    out = sys.stdout
    stamps: list[float] = []

    def on_token(piece: str) -> None:
        stamps.append(time.perf_counter())
        # as ExecuTorch's runner prints: a lone control character (a raw byte token) is left out
        if len(piece) == 1 and not (piece.isprintable() or piece.isspace()):
            return
        out.write(piece)
        out.flush()

    stats: list[Any] = []
    try:
        _ = runner.session  # the method loaded before the clock starts
        start = time.perf_counter()
        runner.generate(prompt, config, on_token, stats.append)
        end = time.perf_counter()
    except RuntimeError as exc:
        out.write("\n")
        return _fail(str(exc), 1)
    out.write("\n")
    out.flush()
    threads = pyexec.get_num_threads()
    print(f"--- {runner.llm.model_path}: {runner.llm.layout}, context {runner.llm.max_context_len} tokens, "
          f"{threads} thread{'s' if threads != 1 else ''}", file=sys.stderr)
    s = stats[0]
    first = (stamps[1 if args.echo and len(stamps) > 1 else 0] if stamps else end) - start
    decode = end - start - first
    rate = f", {s.num_generated_tokens / decode:.1f} tokens/s" if decode > 0 and s.num_generated_tokens else ""
    print(f"prompt: {s.num_prompt_tokens} tokens, first token after {first * 1e3:.1f} ms "
          f"(prefill {s.num_prompt_tokens / first:.1f} tokens/s)", file=sys.stderr)
    print(f"generated: {s.num_generated_tokens} more tokens in {decode * 1e3:.1f} ms{rate}", file=sys.stderr)
    return 0
