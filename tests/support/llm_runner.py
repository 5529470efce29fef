"""Files for the LLM runner tests: a byte-level BPE tokenizer trained here on
a few sentences (Hugging Face tokenizers' trainer -> tokenizer.json), and
tiny random-weight Llama / Qwen3 programs whose vocabulary is that
tokenizer's, exported by export_llm's own export API (export_llama) with the
settings each test asks for. Cached like support.llm's exports."""

from __future__ import annotations

import hashlib
import json
import tempfile
import warnings
from pathlib import Path
from typing import Any

import torch

from support.export import _file_digest, cache_dir, cached
from support.llm import example

SENTENCES = [
    "The quick brown fox jumps over the lazy dog.",
    "Hello world, this is a tiny tokenizer for the tests.",
    "Caf\u00e9 cr\u00e8me br\u00fbl\u00e9e \u2014 na\u00efve r\u00e9sum\u00e9 \u00fcber \u65e5\u672c\u8a9e \U0001F600",
    "pyexec runs ExecuTorch programs on CPUs, one token at a time.",
    "Once upon a time there was a small language model.",
]
VOCAB = 300  # 256 byte tokens, 2 special tokens, 42 merges
BOS, EOS = "<|begin_of_text|>", "<|end_of_text|>"

LLAMA: dict[str, Any] = {
    "dim": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "vocab_size": VOCAB, "multiple_of": 32,
    "norm_eps": 1e-5, "rope_theta": 500000.0, "use_scaled_rope": False,
}
QWEN3: dict[str, Any] = {
    "dim": 32, "ffn_dim_multiplier": 1, "hidden_dim": 96, "n_heads": 4, "head_dim": 16, "n_kv_heads": 2,
    "n_layers": 2, "norm_eps": 1e-06, "rope_theta": 1000000.0, "use_scaled_rope": False, "vocab_size": VOCAB,
    "use_hf_rope": True, "attention_qkv_bias": False, "use_qk_norm": True, "qk_norm_before_rope": True,
}


def write_tokenizer(directory: Path, chat_template: str | None = None) -> Path:
    """tokenizer.json (and tokenizer_config.json, with `chat_template` when
    given) in `directory`; returns the tokenizer.json path."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=VOCAB, special_tokens=[BOS, EOS],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(SENTENCES, trainer)
    assert tok.get_vocab_size() == VOCAB, tok.get_vocab_size()
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "tokenizer.json"
    tok.save(str(path))
    config: dict[str, Any] = {"bos_token": BOS, "eos_token": EOS}
    if chat_template is not None:
        config["chat_template"] = chat_template
    (directory / "tokenizer_config.json").write_text(json.dumps(config))
    return path


def partial_utf8_ids() -> list[int]:
    """The ids of the tokenizer's tokens that are not whole UTF-8 (single
    bytes of multi-byte characters)."""
    from tokenizers import decoders

    with tempfile.TemporaryDirectory() as d:
        from tokenizers import Tokenizer

        tok = Tokenizer.from_file(str(write_tokenizer(Path(d))))
    tok.decoder = decoders.ByteLevel()
    return [i for i in range(VOCAB) if "\ufffd" in tok.decode([i])]


def _export(params: dict[str, Any], options: dict[str, Any]) -> bytes:
    from executorch.examples.models.llama.export_llama_lib import export_llama
    from executorch.extension.llm.export.config.llm_config import LlmConfig, ModelType

    with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (Path(d) / "params.json").write_text(json.dumps(params))
        max_seq_len, max_context_len = options["max_seq_len"], options["max_context_len"]
        weights = example("export_llama").random_checkpoint(params, max(max_seq_len, max_context_len), options["seed"])
        if options["model_class"] == "qwen3_0_6b":  # Qwen3-0.6B ties the output to the embedding
            weights["output.weight"] = weights["tok_embeddings.weight"]
        if options["whole_chars"]:  # those tokens' logits 0, below the maximum of the others (tied: embeddings 0)
            weights["output.weight"][partial_utf8_ids()] = 0.0
        torch.save(weights, Path(d) / "model.pth")
        config = LlmConfig()
        config.base.model_class = ModelType(options["model_class"])
        config.base.params = str(Path(d) / "params.json")
        config.base.checkpoint = str(Path(d) / "model.pth")
        config.model.use_kv_cache = options["kv_cache"]
        config.model.use_sdpa_with_kv_cache = options["sdpa"]
        config.model.enable_dynamic_shape = options["dynamic"]
        config.export.max_seq_length = max_seq_len
        config.export.max_context_length = max_context_len
        config.export.output_dir = d
        return Path(export_llama(config)).read_bytes()


def llm_program(
    *,
    model_class: str = "llama3",
    max_seq_len: int = 32,
    max_context_len: int | None = None,
    dynamic: bool = True,
    sdpa: bool = True,
    kv_cache: bool = True,
    seed: int = 0,
    whole_chars: bool = False,
) -> bytes:
    """The .pte export_llm writes for the tiny LLAMA (model_class llama3) or
    QWEN3 (qwen3_0_6b) params with random weights from `seed`. whole_chars:
    the output rows of the tokens that are not whole UTF-8
    characters are zero, so greedy decoding never picks them (ExecuTorch's
    runner binding raises UnicodeDecodeError on such a token)."""
    import executorch

    params = QWEN3 if model_class == "qwen3_0_6b" else LLAMA
    options = {"model_class": model_class, "max_seq_len": max_seq_len,
               "max_context_len": max_context_len or max_seq_len, "dynamic": dynamic, "sdpa": sdpa,
               "kv_cache": kv_cache, "seed": seed, "whole_chars": whole_chars}
    h = hashlib.sha256()
    h.update(f"{torch.__version__}|{getattr(executorch, '__version__', '?')}".encode())
    h.update(_file_digest(__file__).encode())
    h.update(json.dumps([params, options], sort_keys=True).encode())
    where = cache_dir()
    paths = None if where is None else [where / f"llm-runner-{h.hexdigest()[:32]}.pte"]
    (pte,) = cached(paths, lambda: [_export(params, options)])
    assert pte is not None
    return pte
