"""Exports a Hugging Face decoder the way optimum-executorch does: a tiny
LlamaForCausalLM built from a config with random weights (nothing is
downloaded), saved with save_pretrained, then

    optimum-cli export executorch --model DIR --task text-generation --recipe RECIPE \\
        --use_custom_sdpa --use_custom_kv_cache --max_seq_len N --output_dir OUT

which writes OUT/model.pte: forward(input_ids [1, S], cache_position [S]) ->
logits, its KV caches in mutable buffers updated by llama::update_cache and
attended by llama::custom_sdpa. examples/llm/generate.py runs it with pyexec
and with ExecuTorch's runtime.

optimum-executorch 1.1.0 pins transformers==5.0.0rc1 (and optimum 2.0,
accelerate, huggingface-hub 1.x), so it goes into its own virtual
environment; torch 2.13 and executorch 1.5.1 stay as they are:

    python -m venv hf && hf/bin/pip install torch==2.13.0 executorch==1.5.1 optimum-executorch
    hf/bin/python examples/llm/export_hf.py [--recipe xnnpack]
    hf/bin/python examples/llm/generate.py examples/out/hf/portable/model.pte --prompt 5,17,99,3
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "out" / "hf"


def save_tiny_llama(where: Path, seed: int = 0, vocab_size: int = 128) -> None:
    """A 2-layer Llama (hidden 64, 4 query heads over 2 kv heads, vocab 128 by default),
    weights drawn with a larger spread than the default initializer so that
    random greedy decoding does not settle on one token at once."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=64,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=128,
        tie_word_embeddings=False,
        initializer_range=0.1,
    )
    torch.manual_seed(seed)
    LlamaForCausalLM(config).save_pretrained(where)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="directory for every file (default: examples/out/hf, which git ignores)")
    parser.add_argument("--recipe", choices=("portable", "xnnpack"), action="append", help="default: both")
    parser.add_argument("--max-seq-len", type=int, default=64, help="KV cache positions (default 64)")
    parser.add_argument("--vocab-size", type=int, default=128, help="the model's vocabulary (default 128)")
    args = parser.parse_args()

    model = args.out.resolve() / "tiny_llama"
    save_tiny_llama(model, vocab_size=args.vocab_size)
    cli = Path(sys.executable).with_name("optimum-cli")
    for recipe in args.recipe or ("portable", "xnnpack"):
        out = args.out.resolve() / recipe
        cmd = [str(cli), "export", "executorch", "--model", str(model), "--task", "text-generation",
               "--recipe", recipe, "--use_custom_sdpa", "--use_custom_kv_cache",
               "--max_seq_len", str(args.max_seq_len), "--output_dir", str(out)]  # fmt: skip
        print("$", " ".join(cmd), flush=True)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"optimum-cli failed for {recipe} (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
        pte = out / "model.pte"
        print(f"  {recipe}: {pte} {pte.stat().st_size / 1024:.0f} KiB ({time.perf_counter() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
