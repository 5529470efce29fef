"""Exports ExecuTorch's llama example with ExecuTorch's own LLM tooling
(`python -m executorch.extension.llm.export.export_llm`), as a user without a
checkpoint to download would: a tiny params.json and random weights.

Three programs, each a KV-cache decoder forward(tokens [1, S], input_pos [1])
-> logits of the last position [1, vocab], its caches held in the program's
mutable buffers and written in place by llama::update_cache, its attention
llama::custom_sdpa:

  portable        llama_portable.pte: portable operators only
  xnnpack-8da4w   llama_xnnpack_8da4w.pte: linear layers lowered to XNNPACK
                  with 8-bit dynamic activations and 4-bit grouped weights
  xnnpack-ptd     llama_xnnpack_ptd.pte + llama_xnnpack_ptd_weights.ptd:
                  float32 XNNPACK with its weights in a separate data file
                  (export.foundation_weights_file; export_llm writes a .ptd
                  only with XNNPACK)

Run from anywhere, in a venv with torch and executorch:

    python examples/llm/export_llama.py [--out DIR] [--variant NAME ...]   # DIR: examples/out/llm

then examples/llm/generate.py runs them. Each export is the command line this
prints (in a subprocess); `export_in_process` runs the same configuration in
the calling process (what the tests do: faster, no second interpreter)."""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# dim 32, 2 layers, 4 query heads sharing 2 kv heads (head_dim 8), vocab 64:
# about 30,000 parameters, small enough for the programs to be fuzz seeds too
TINY_PARAMS: dict[str, Any] = {
    "dim": 32,
    "n_layers": 2,
    "n_heads": 4,
    "n_kv_heads": 2,
    "vocab_size": 64,
    "multiple_of": 32,
    "norm_eps": 1e-5,
    "rope_theta": 500000.0,
    "use_scaled_rope": False,
}

VARIANTS = ("portable", "xnnpack-8da4w", "xnnpack-ptd")

DEFAULT_OUT = Path(__file__).resolve().parents[1] / "out" / "llm"


def file_names(variant: str) -> tuple[str, str | None]:
    """The program's and the data file's names (None: no data file)."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {VARIANTS}, got {variant!r}")
    stem = "llama_" + variant.replace("-", "_")
    return f"{stem}.pte", (f"{stem}_weights.ptd" if variant == "xnnpack-ptd" else None)


def random_checkpoint(
    params: dict[str, Any], max_seq_len: int, seed: int, *, tied_embedding: bool = False, **model_args: Any
) -> dict[str, Any]:
    """A state dict for the example's Transformer: N(0, 1/fan_in) matrices (so
    activations stay O(1) and the logits are far from ties), norm weights near
    1, an N(0, 1) embedding. export_llm without base.checkpoint would leave
    the weights uninitialised (NaN logits).

    With `tied_embedding` (Qwen3-0.6B's checkpoints) the output projection is
    the embedding itself, as the model's own weight converter writes it: both
    N(0, 1/dim), so the logits stay O(1) too. The model is built on the meta
    device: only the state dict takes memory (a 1B model's 6 GB, not twice).
    `model_args` go to ModelArgs as they are (LoRA's `r`, `lora_alpha` and
    `target_modules` add its A and B matrices)."""
    import torch
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs

    with torch.device("meta"):
        model = construct_transformer(ModelArgs(max_seq_len=max_seq_len, max_context_len=max_seq_len,
                                                **params, **model_args))
    g = torch.Generator().manual_seed(seed)
    weights = {}
    for name, p in model.named_parameters():
        if name == "tok_embeddings.weight":
            w = torch.randn(p.shape, generator=g)
            if tied_embedding:
                w /= p.shape[1] ** 0.5
        elif name == "output.weight" and tied_embedding:
            continue
        elif p.dim() == 1:
            w = 1.0 + 0.1 * torch.randn(p.shape, generator=g)
        else:
            w = torch.randn(p.shape, generator=g) / p.shape[1] ** 0.5
        weights[name] = w
    if tied_embedding:
        weights["output.weight"] = weights["tok_embeddings.weight"]
    return weights


def write_model(
    workdir: Path, params: dict[str, Any], max_seq_len: int, seed: int, *, tied_embedding: bool = False
) -> tuple[Path, Path]:
    """params.json and model.pth (random weights) in `workdir`."""
    import torch

    workdir.mkdir(parents=True, exist_ok=True)
    params_path, checkpoint = workdir / "params.json", workdir / "model.pth"
    params_path.write_text(json.dumps(params, indent=1))
    torch.save(random_checkpoint(params, max_seq_len, seed, tied_embedding=tied_embedding), checkpoint)
    return params_path, checkpoint


def overrides(
    variant: str, workdir: Path, max_seq_len: int, group_size: int = 32, model_class: str = "llama3"
) -> list[str]:
    """export_llm's settings (LlmConfig fields, as key=value) for `variant`,
    reading params.json and model.pth from `workdir` and writing there.
    `model_class`: export_llm's base.model_class (llama3, qwen3_0_6b, ...)."""
    pte, ptd = file_names(variant)
    args = [
        f"base.model_class={model_class}",
        f"base.params={workdir / 'params.json'}",
        f"base.checkpoint={workdir / 'model.pth'}",
        "model.use_kv_cache=True",
        "model.use_sdpa_with_kv_cache=True",
        f"export.max_seq_length={max_seq_len}",
        f"export.max_context_length={max_seq_len}",
        f"export.output_dir={workdir}",
        f"export.output_name={pte.removesuffix('.pte')}",  # no .pte: the file (and any .ptd) go to output_dir
    ]
    if variant == "xnnpack-8da4w":
        args += ["backend.xnnpack.enabled=True", "quantization.qmode=8da4w", f"quantization.group_size={group_size}"]
    elif variant == "xnnpack-ptd":
        assert ptd is not None
        args += ["backend.xnnpack.enabled=True", f"export.foundation_weights_file={ptd.removesuffix('.ptd')}"]
    return args


def export_command(
    variant: str, workdir: Path, max_seq_len: int, group_size: int = 32, model_class: str = "llama3"
) -> list[str]:
    """The export_llm command line for `variant` (hydra's own run directory
    and log kept inside `workdir`)."""
    return [
        sys.executable,
        "-m",
        "executorch.extension.llm.export.export_llm",
        *overrides(variant, workdir, max_seq_len, group_size, model_class),
        f"hydra.run.dir={workdir / 'hydra'}",
    ]


def export_in_process(
    variant: str, workdir: Path, max_seq_len: int, group_size: int = 32, model_class: str = "llama3"
) -> tuple[Path, Path | None]:
    """What export_llm's main does with the same settings, in this process:
    the LlmConfig from the key=value list, then export_llama. params.json and
    model.pth must be in `workdir` (write_model). Returns the written files."""
    from executorch.examples.models.llama.export_llama_lib import export_llama
    from executorch.extension.llm.export.config.llm_config import LlmConfig
    from omegaconf import OmegaConf

    merged = OmegaConf.merge(
        OmegaConf.structured(LlmConfig),
        OmegaConf.from_dotlist(overrides(variant, workdir, max_seq_len, group_size, model_class)),
    )
    export_llama(OmegaConf.to_object(merged))
    return _written(variant, workdir)


def _written(variant: str, workdir: Path) -> tuple[Path, Path | None]:
    pte, ptd = file_names(variant)
    files = (workdir / pte, workdir / ptd if ptd else None)
    for f in files:
        if f is not None and not f.is_file():
            raise RuntimeError(f"export_llm did not write {f}")
    return files


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT,
                        help="directory for every file (default: examples/out/llm, which git ignores)")
    parser.add_argument("--variant", choices=VARIANTS, action="append", help="repeat for several (default: all)")
    parser.add_argument("--max-seq-len", type=int, default=64, help="KV cache positions (default 64)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the random weights")
    parser.add_argument("--params", type=Path, help="a params.json to use instead of the tiny one")
    args = parser.parse_args()

    params = json.loads(args.params.read_text()) if args.params else TINY_PARAMS
    workdir = args.out.resolve()
    write_model(workdir, params, args.max_seq_len, args.seed)
    for variant in args.variant or VARIANTS:
        cmd = export_command(variant, workdir, args.max_seq_len)
        print("$", " ".join(cmd[1:]), flush=True)
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            sys.exit(f"export_llm failed for {variant} (exit {proc.returncode}):\n{proc.stderr[-4000:]}")
        pte, ptd = _written(variant, workdir)
        sizes = ", ".join(f"{f.name} {f.stat().st_size / 1024:.0f} KiB" for f in (pte, ptd) if f is not None)
        print(f"  {variant}: {sizes} ({time.perf_counter() - t0:.0f} s)", flush=True)


if __name__ == "__main__":
    main()
