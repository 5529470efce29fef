"""The LLM programs bench_llm.py times at users' sizes, exported once with
ExecuTorch's export_llm (examples/llm/export_llama.py's configuration, run in
a subprocess so that the exporter's memory is returned when it ends) and kept
in a cache directory: an export of a 1B model takes about 20 minutes and 10-20
GB of memory.

    python benchmarks/llm_models.py --size 1b [--variant xnnpack-8da4w] [--cache-dir DIR]

exports without timing anything (bench_llm.py --size does the same first).

Random weights drawn from a seed are written to a checkpoint (model.pth) that
export_llm reads: the programs both runtimes run are the same files, and the
same seed gives the same model on every machine. The checkpoint is removed
once every variant of a size is exported (it is as large as the float32
program and can be drawn again)."""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
_EXAMPLE = ROOT / "examples" / "llm" / "export_llama.py"

# Llama-3.2-1B's params.json (dim 2048, 16 layers, 32 query heads over 8 kv heads, vocab 128256)
LLAMA_3_2_1B: dict[str, Any] = {
    "dim": 2048,
    "ffn_dim_multiplier": 1.5,
    "multiple_of": 256,
    "n_heads": 32,
    "n_kv_heads": 8,
    "n_layers": 16,
    "norm_eps": 1e-5,
    "rope_theta": 500000.0,
    "use_scaled_rope": True,
    "vocab_size": 128256,
}

# ExecuTorch's examples/models/qwen3/config/0_6b_config.json (the executorch
# wheel does not ship it): 28 layers, head_dim 128, QK-norm before the
# Hugging Face rope, embeddings tied to the output projection
QWEN3_0_6B: dict[str, Any] = {
    "dim": 1024,
    "ffn_dim_multiplier": 1,
    "hidden_dim": 3072,
    "n_heads": 16,
    "head_dim": 128,
    "n_kv_heads": 8,
    "n_layers": 28,
    "norm_eps": 1e-06,
    "rope_theta": 1000000.0,
    "use_scaled_rope": False,
    "vocab_size": 151936,
    "use_hf_rope": True,
    "attention_qkv_bias": False,
    "use_qk_norm": True,
    "qk_norm_before_rope": True,
}


@dataclass(frozen=True)
class Model:
    params: dict[str, Any]
    model_class: str  # export_llm's base.model_class
    tied_embedding: bool
    # 1024 positions: export_llm's prompt dimension goes to max_seq_len - 1,
    # and the benchmark prefills 512 tokens
    max_seq_len: int = 1024
    group_size: int = 128  # 8da4w weight groups
    variants: tuple[str, ...] = field(default=("xnnpack-8da4w", "xnnpack-ptd"))


# The same architectures at a few hundred thousand parameters (exported in
# under a minute): for trying the benchmark itself, and the tiny Qwen3 the
# tests compare with ExecuTorch
TINY_LLAMA3: dict[str, Any] = {**LLAMA_3_2_1B, "dim": 64, "n_heads": 4, "n_kv_heads": 2, "n_layers": 2,
                               "vocab_size": 512, "multiple_of": 32}
TINY_QWEN3: dict[str, Any] = {**QWEN3_0_6B, "dim": 64, "hidden_dim": 192, "n_heads": 4, "head_dim": 32,
                              "n_kv_heads": 2, "n_layers": 2, "vocab_size": 512}

MODELS: dict[str, Model] = {
    "1b": Model(LLAMA_3_2_1B, "llama3", tied_embedding=False),
    "qwen3-0.6b": Model(QWEN3_0_6B, "qwen3_0_6b", tied_embedding=True),
    "tiny-llama3": Model(TINY_LLAMA3, "llama3", tied_embedding=False, group_size=32),
    "tiny-qwen3": Model(TINY_QWEN3, "qwen3_0_6b", tied_embedding=True, group_size=32),
}

SEED = 0
FORMAT = 1  # bump when what an export writes changes


def default_cache_dir() -> Path:
    env = os.environ.get("PYEXEC_BENCH_CACHE")
    if env:
        return Path(env)
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "pyexec-bench"


def _example() -> Any:
    spec = importlib.util.spec_from_file_location("pyexec_example_export_llama", _EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def model_dir(size: str, cache_dir: Path) -> Path:
    """One directory per model, keyed by everything its exports depend on."""
    import executorch
    import torch

    m = MODELS[size]
    key = {
        "format": FORMAT,
        "params": m.params,
        "model_class": m.model_class,
        "tied": m.tied_embedding,
        "max_seq_len": m.max_seq_len,
        "group_size": m.group_size,
        "seed": SEED,
        "versions": [torch.__version__, getattr(executorch, "__version__", "?")],
    }
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:16]
    return cache_dir / f"{size}-{digest}"


def files(size: str, variant: str, cache_dir: Path) -> tuple[Path, Path | None]:
    example = _example()
    pte, ptd = example.file_names(variant)
    d = model_dir(size, cache_dir)
    return d / pte, (d / ptd if ptd else None)


def free_gib() -> float:
    with open("/proc/meminfo") as f:
        info = {k: int(v.split()[0]) for k, v in (line.split(":", 1) for line in f)}
    return info["MemAvailable"] / 2**20


def export(size: str, variant: str, cache_dir: Path, *, log: Any = sys.stderr) -> tuple[Path, Path | None]:
    """The variant's files, exported first when the cache lacks them."""
    m = MODELS[size]
    pte, ptd = files(size, variant, cache_dir)
    done = pte.parent / f"{variant}.done"
    if done.is_file() and pte.is_file():
        return pte, ptd
    example = _example()
    d = pte.parent
    d.mkdir(parents=True, exist_ok=True)
    if not (d / "model.pth").is_file():
        t0 = time.perf_counter()
        example.write_model(d, m.params, m.max_seq_len, SEED, tied_embedding=m.tied_embedding)
        print(f"{size}: random checkpoint written ({time.perf_counter() - t0:.0f} s)", file=log, flush=True)
    cmd = example.export_command(variant, d, m.max_seq_len, m.group_size, m.model_class)
    print(f"{size} {variant}: exporting ({free_gib():.1f} GiB available); $ {' '.join(cmd[1:])}", file=log, flush=True)
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode != 0:
        (d / f"{variant}.log").write_text(proc.stdout + proc.stderr)
        raise RuntimeError(f"export_llm failed for {size} {variant} (exit {proc.returncode}), log in {d}")
    shutil.rmtree(d / "hydra", ignore_errors=True)
    done.write_text(json.dumps({"seconds": time.perf_counter() - t0}))
    print(f"{size} {variant}: exported in {time.perf_counter() - t0:.0f} s", file=log, flush=True)
    if all((d / f"{v}.done").is_file() for v in m.variants):
        (d / "model.pth").unlink(missing_ok=True)
    return pte, ptd


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--size", choices=list(MODELS), action="append", required=True)
    parser.add_argument("--variant", action="append", help="default: every variant of the size")
    parser.add_argument("--cache-dir", type=Path, default=default_cache_dir())
    args = parser.parse_args()
    for size in args.size:
        for variant in args.variant or MODELS[size].variants:
            pte, ptd = export(size, variant, args.cache_dir)
            print(pte, ptd or "")


if __name__ == "__main__":
    main()
