"""optimum-executorch on pyexec, compared with ExecuTorch's runtime.

For each case of a corpus this builds a tiny random-weight Hugging Face model
from a config (no Hub; a word-level tokenizer trained on a few sentences),
saves it with save_pretrained, exports it with optimum-executorch's own CLI
command (`optimum-cli export executorch ...`, run in-process), then runs
optimum-executorch's model class on the .pte twice, in two processes that never
share a runtime: once on ExecuTorch's runtime, once after the one line

    import pyexec.portable_lib; pyexec.portable_lib.install()

It compares the greedy token ids (generate) and the logits of fixed inputs
(tolerances per dtype from ExecuTorch's XNNPACK tests), and times one call.

Run it with the optimum venv's python (scripts/setup_optimum_venv.sh):

    .venv-optimum/bin/python scripts/optimum_corpus.py              # the whole corpus
    .venv-optimum/bin/python scripts/optimum_corpus.py --cases llama-xnnpack,bert-xnnpack
    .venv-optimum/bin/python scripts/optimum_corpus.py --list

It prints a table and writes JSON (--json). Exit status 1 when any case that
ExecuTorch runs differs on pyexec or fails there.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent

SENTENCES = [
    "the quick brown fox jumps over the lazy dog",
    "a small model runs on the cpu with a tiny runtime",
    "hello world this is a test of the tokenizer",
    "speech and images and text go in and tokens come out",
]
PROMPT = "the quick brown fox"
VOCAB = 96

# Tolerances for logits, by dtype, as ExecuTorch's XNNPACK operator tests
# compare them (backends/xnnpack/test: the tester's default atol/rtol 1e-3 for
# float32; test_linear's 1e-2 for float16 and 8e-2 for bfloat16; 5e-2 for
# dynamically quantized activations, _test_dqlinear).
TOLERANCES = {
    "float32": (1e-3, 1e-3),
    "float16": (1e-2, 1e-3),
    "bfloat16": (8e-2, 1e-3),
    "dynamic-quant": (5e-2, 1e-3),
}


@dataclass
class Case:
    name: str
    family: str
    task: str
    recipe: str = "xnnpack"
    options: list[str] = field(default_factory=list)

    @property
    def dtype(self) -> str:
        if "--dtype" in self.options:
            return self.options[self.options.index("--dtype") + 1]
        return "float32"

    def tolerance(self) -> tuple[float, float]:
        if self.dtype != "float32":
            return TOLERANCES[self.dtype]
        q = self.options[self.options.index("--qlinear") + 1] if "--qlinear" in self.options else ""
        return TOLERANCES["dynamic-quant" if q.startswith("8da") else "float32"]


LM = "text-generation"
MLM = "fill-mask"
IMG = "image-classification"
ASR = "automatic-speech-recognition"
S2S = "text2text-generation"
SDPA_KV = ["--use_custom_sdpa", "--use_custom_kv_cache"]
# A 64-token cache (the exporter's default is 2048) keeps exports and calls small.
S64 = ["--max_seq_len", "64"]

CORPUS: list[Case] = [
    Case("llama-xnnpack", "llama", LM),
    Case("llama-xnnpack-sdpa-kv", "llama", LM, options=S64 + SDPA_KV),
    Case("llama-portable", "llama", LM, recipe="portable", options=S64),
    Case("llama-8da4w", "llama", LM, options=S64 + SDPA_KV + ["--qlinear", "8da4w"]),
    Case("llama-8da8w", "llama", LM, options=S64 + SDPA_KV + ["--qlinear", "8da8w"]),
    Case("llama-4w", "llama", LM, options=S64 + ["--qlinear", "4w"]),
    Case("llama-8w", "llama", LM, options=S64 + ["--qlinear", "8w"]),
    Case("llama-qemb4w", "llama", LM, options=S64 + SDPA_KV + ["--qembedding", "4w"]),
    Case("llama-qemb8w", "llama", LM, options=S64 + SDPA_KV + ["--qembedding", "8w"]),
    Case("llama-fp16", "llama", LM, options=S64 + ["--dtype", "float16"]),
    Case("llama-bf16", "llama", LM, options=S64 + SDPA_KV + ["--dtype", "bfloat16"]),
    Case("llama-maxseq32", "llama", LM, options=SDPA_KV + ["--max_seq_len", "32"]),
    Case("qwen3-xnnpack", "qwen3", LM, options=S64 + SDPA_KV),
    Case("qwen3-8da4w", "qwen3", LM, options=S64 + SDPA_KV + ["--qlinear", "8da4w", "--qembedding", "8w"]),
    Case("gemma3-xnnpack", "gemma3", LM, options=S64 + SDPA_KV),
    Case("smollm3-xnnpack", "smollm3", LM, options=S64 + SDPA_KV),
    Case("phi3-xnnpack", "phi3", LM, options=S64 + SDPA_KV),
    Case("phi3-portable", "phi3", LM, recipe="portable", options=S64),
    Case("bert-xnnpack", "bert", MLM),
    Case("bert-portable", "bert", MLM, recipe="portable"),
    Case("bert-8da4w", "bert", MLM, options=["--qlinear", "8da4w"]),
    Case("distilbert-xnnpack", "distilbert", MLM),
    Case("roberta-xnnpack", "roberta", MLM),
    Case("vit-xnnpack", "vit", IMG),
    Case("vit-portable", "vit", IMG, recipe="portable"),
    Case("convnext-xnnpack", "convnext", IMG),
    Case("resnet-xnnpack", "resnet", IMG),
    Case("resnet-fp16", "resnet", IMG, options=["--dtype", "float16"]),
    Case("whisper-xnnpack", "whisper", ASR, options=S64),
    Case("whisper-portable", "whisper", ASR, recipe="portable", options=S64),
    Case("whisper-8da4w", "whisper", ASR, options=S64 + ["--qlinear", "8da4w"]),
    Case("t5-xnnpack", "t5", S2S, options=S64),
]
BY_NAME = {c.name: c for c in CORPUS}

# The fixed small part run by tests/integration/test_optimum.py.
QUICK = ["llama-xnnpack-sdpa-kv", "qwen3-8da4w", "bert-xnnpack", "vit-xnnpack", "whisper-xnnpack", "llama-fp16"]


# ---------------------------------------------------------------- models


def _tokenizer(path: Path) -> Any:
    """A word-level tokenizer trained on SENTENCES, saved as PreTrainedTokenizerFast."""
    from tokenizers import Tokenizer, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    specials = ["<pad>", "<s>", "</s>", "<unk>", "<mask>"]
    tok = Tokenizer(models.WordLevel(unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.Whitespace()
    tok.train_from_iterator(SENTENCES, trainers.WordLevelTrainer(special_tokens=specials, vocab_size=VOCAB))
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, pad_token="<pad>", bos_token="<s>", eos_token="</s>",
                                   unk_token="<unk>", mask_token="<mask>")
    fast.save_pretrained(path)
    return fast


def _config(family: str) -> Any:
    import transformers as tf

    ids = {"pad_token_id": 0, "bos_token_id": 1, "eos_token_id": 2}
    dec = {"vocab_size": VOCAB, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
           "num_attention_heads": 4, "num_key_value_heads": 2, "max_position_embeddings": 64, **ids}
    enc = {"vocab_size": VOCAB, "hidden_size": 64, "intermediate_size": 128, "num_hidden_layers": 2,
           "num_attention_heads": 4, "max_position_embeddings": 34, "pad_token_id": 0}
    if family == "llama":
        return tf.LlamaConfig(**dec)
    if family == "qwen3":
        return tf.Qwen3Config(head_dim=16, **dec)
    if family == "gemma3":
        return tf.Gemma3TextConfig(head_dim=16, sliding_window=16, **dec)
    if family == "smollm3":
        return tf.SmolLM3Config(**dec)
    if family == "phi3":
        return tf.Phi3Config(**dec)
    if family == "bert":
        return tf.BertConfig(**enc)
    if family == "distilbert":
        return tf.DistilBertConfig(vocab_size=VOCAB, dim=64, hidden_dim=128, n_layers=2, n_heads=4,
                                   max_position_embeddings=34, pad_token_id=0)
    if family == "roberta":
        return tf.RobertaConfig(**{**enc, "pad_token_id": 0, "max_position_embeddings": 36})
    if family == "vit":
        return tf.ViTConfig(image_size=32, patch_size=8, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
                            intermediate_size=128, num_labels=10)
    if family == "convnext":
        cfg = tf.ConvNextConfig(num_stages=2, hidden_sizes=[16, 32], depths=[1, 1], num_labels=10)
        cfg.image_size = 32
        return cfg
    if family == "resnet":
        cfg = tf.ResNetConfig(embedding_size=16, hidden_sizes=[16, 32], depths=[1, 1], layer_type="basic",
                              num_labels=10)
        cfg.image_size = 32
        return cfg
    if family == "whisper":
        return tf.WhisperConfig(vocab_size=VOCAB, num_mel_bins=16, d_model=64, encoder_layers=2, decoder_layers=2,
                                encoder_attention_heads=4, decoder_attention_heads=4, encoder_ffn_dim=128,
                                decoder_ffn_dim=128, max_source_positions=50, max_target_positions=64,
                                decoder_start_token_id=1, **ids, begin_suppress_tokens=None, suppress_tokens=None)
    if family == "t5":
        return tf.T5Config(vocab_size=VOCAB, d_model=64, d_kv=16, d_ff=128, num_layers=2, num_heads=4,
                           decoder_start_token_id=0, pad_token_id=0, eos_token_id=2)
    raise ValueError(f"unknown model family {family!r}")


def build_model(family: str, task: str, path: Path) -> None:
    """A random-weight model of `family` for `task`, saved in `path`."""
    import torch
    import transformers as tf

    torch.manual_seed(0)
    config = _config(family)
    auto = {LM: tf.AutoModelForCausalLM, MLM: tf.AutoModelForMaskedLM, IMG: tf.AutoModelForImageClassification,
            ASR: tf.AutoModelForSpeechSeq2Seq, S2S: tf.AutoModelForSeq2SeqLM}[task]
    model = auto.from_config(config).eval()
    model.save_pretrained(path)
    if task in (LM, MLM, S2S, ASR):
        _tokenizer(path)
    if task == ASR:  # the exporter reads the input shape from the feature extractor
        tf.WhisperFeatureExtractor(feature_size=config.num_mel_bins, chunk_length=1).save_pretrained(path)


def export(case: Case, model_dir: Path, out_dir: Path) -> None:
    """Exports with optimum-executorch's CLI command (`optimum-cli export
    executorch --model DIR --task T --recipe R --output_dir OUT OPTIONS...`),
    run in this process to pay transformers' import once."""
    import argparse as ap

    from optimum.commands.export.executorch import ExecuTorchExportCommand, parse_args_executorch

    parser = ap.ArgumentParser(prog="optimum-cli export executorch")
    parse_args_executorch(parser)
    args = parser.parse_args(["--model", str(model_dir), "--task", case.task, "--recipe", case.recipe,
                              "--output_dir", str(out_dir), *case.options])
    ExecuTorchExportCommand(None, args=args, from_defaults_factory=True, parser=parser).run()
    if not list(out_dir.glob("*.pte")):
        raise RuntimeError(f"the export wrote no .pte file in {out_dir}")


def _last_error(text: str) -> str:
    """The exception line of a traceback (the last line naming an error)."""
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    for ln in reversed(lines):
        head = ln.split(":", 1)[0]
        if head.endswith(("Error", "Exception", "Unsupported", "Failure")) or "Error:" in ln:
            return ln[:400]
    return lines[-1][:400] if lines else ""


# ---------------------------------------------------------------- worker

_DTYPES = {5: "float16", 6: "float32", 15: "bfloat16"}


def _timed(fn: Any, reps: int = 5) -> float:
    fn()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    times.sort()
    return times[len(times) // 2]


def setup_runtime(runtime: str) -> None:
    """The process's runtime for optimum-executorch, before optimum is imported."""
    if runtime == "pyexec":
        import pyexec.portable_lib

        pyexec.portable_lib.install()
    else:
        # ExecuTorch's runtime needs its llama and quantized operators registered.
        import executorch.kernels.quantized  # noqa: F401
        from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401


def worker(runtime: str, case: Case, model_dir: Path, pte_dir: Path, result_path: Path) -> None:
    """Runs optimum-executorch's class for `case` on `runtime` ("executorch"
    or "pyexec"); writes tokens, logits and the time of one call."""
    import optimum.executorch as oe
    import torch
    from transformers import PreTrainedTokenizerFast

    out: dict[str, Any] = {"runtime": runtime}
    logits: list[Any] = []
    torch.manual_seed(0)
    if case.task == LM:
        tok = PreTrainedTokenizerFast.from_pretrained(model_dir)
        prompt = tok(PROMPT)["input_ids"]
        m = oe.ExecuTorchModelForCausalLM.from_pretrained(pte_dir)
        out["loader"] = type(m.model).__module__
        n = len(prompt) + 12
        out["tokens"] = m.generate(prompt_tokens=list(prompt), max_seq_len=n)
        out["text"] = oe.ExecuTorchModelForCausalLM.from_pretrained(pte_dir).text_generation(
            tok, PROMPT, max_seq_len=n)
        m = oe.ExecuTorchModelForCausalLM.from_pretrained(pte_dir)
        seq = m.model.method_meta("forward").input_tensor_meta(1).sizes()[0]
        ids = torch.tensor([prompt], dtype=torch.long)
        if seq > 1:
            logits.append(m.forward(ids, torch.arange(ids.shape[1], dtype=torch.long)))
        else:
            for i in range(ids.shape[1]):
                logits.append(m.forward(ids[:, i:i + 1], torch.tensor([i], dtype=torch.long)))
        pos = torch.tensor([ids.shape[1]], dtype=torch.long)
        logits.append(m.forward(torch.tensor([[5]], dtype=torch.long), pos))
        out["seconds"] = _timed(lambda: m.forward(torch.tensor([[5]], dtype=torch.long), pos))
        out["timed"] = "forward, 1 token"
    elif case.task == MLM:
        tok = PreTrainedTokenizerFast.from_pretrained(model_dir)
        enc = tok("the quick <mask> fox jumps over the lazy dog", return_tensors="pt")
        m = oe.ExecuTorchModelForMaskedLM.from_pretrained(pte_dir)
        out["loader"] = type(m.model).__module__
        ids, mask = enc["input_ids"], enc["attention_mask"]
        logits.append(m.forward(ids, mask))
        out["tokens"] = logits[0].argmax(-1)[0].tolist()
        out["seconds"] = _timed(lambda: m.forward(ids, mask))
        out["timed"] = f"forward, {ids.shape[1]} tokens"
    elif case.task == IMG:
        m = oe.ExecuTorchModelForImageClassification.from_pretrained(pte_dir)
        out["loader"] = type(m.model).__module__
        meta = m.model.method_meta("forward").input_tensor_meta(0)
        dtype = getattr(torch, _DTYPES[meta.dtype()])
        pixels = torch.rand(meta.sizes(), dtype=torch.float32).to(dtype)
        logits.append(m.forward(pixels))
        out["tokens"] = logits[0].argmax(-1).tolist()
        out["seconds"] = _timed(lambda: m.forward(pixels))
        out["timed"] = "forward, 1 image"
    elif case.task in (ASR, S2S):
        cls = oe.ExecuTorchModelForSpeechSeq2Seq if case.task == ASR else oe.ExecuTorchModelForSeq2SeqLM
        m = cls.from_pretrained(pte_dir)
        out["loader"] = type(m.model).__module__
        if case.task == ASR:
            meta = m.model.method_meta("encoder").input_tensor_meta(0)
            x = torch.randn(meta.sizes(), dtype=torch.float32).to(getattr(torch, _DTYPES[meta.dtype()]))
            out["tokens"] = m.generate(input_features=x, max_seq_len=12)
        else:
            tok = PreTrainedTokenizerFast.from_pretrained(model_dir)
            x = tok(PROMPT, return_tensors="pt")["input_ids"]
            out["tokens"] = m.generate(input_ids=x, max_seq_len=12)
        m = cls.from_pretrained(pte_dir)
        start = torch.tensor([[m.decoder_start_token_id]], dtype=torch.long)
        step, enc_out = m.forward(x, start, torch.tensor([0], dtype=torch.long))
        logits += [enc_out, step]
        step2, _ = m.forward(x, torch.tensor([[5]], dtype=torch.long), torch.tensor([1], dtype=torch.long), enc_out)
        logits.append(step2)
        one = torch.tensor([1], dtype=torch.long)
        out["seconds"] = _timed(lambda: m.forward(x, torch.tensor([[5]], dtype=torch.long), one, enc_out))
        out["timed"] = "text_decoder, 1 token"
    else:
        raise ValueError(f"unknown task {case.task}")
    torch.save([t.detach().clone() for t in logits], result_path.with_suffix(".pt"))
    result_path.write_text(json.dumps(out))


# ---------------------------------------------------------------- driver


@dataclass
class Row:
    case: str
    task: str
    recipe: str
    options: str
    exported: bool = False
    export_error: str = ""
    et_runs: bool = False
    et_error: str = ""
    pyexec_runs: bool = False
    pyexec_error: str = ""
    pyexec_loader: str = ""
    same_tokens: bool | None = None
    tokens_et: list[Any] = field(default_factory=list)
    tokens_pyexec: list[Any] = field(default_factory=list)
    max_logit_diff: float | None = None
    atol: float = 0.0
    rtol: float = 0.0
    logits_close: bool | None = None
    seconds_et: float | None = None
    seconds_pyexec: float | None = None
    timed: str = ""

    @property
    def ok(self) -> bool:
        """pyexec matches ExecuTorch (or ExecuTorch itself cannot run the file)."""
        if not self.exported or not self.et_runs:
            return True
        return self.pyexec_runs and bool(self.same_tokens) and bool(self.logits_close)


def _env() -> dict[str, str]:
    path = os.pathsep.join([str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p])
    return dict(os.environ, HF_HUB_OFFLINE="1", TRANSFORMERS_OFFLINE="1", TOKENIZERS_PARALLELISM="false",
                PYTHONPATH=path)


def _stage(stage: str, names: list[str], base: Path, timeout: float, resume: bool = False) -> None:
    """Runs `stage` (export, executorch, pyexec) for the cases in one process,
    then each case it left without a result in a process of its own (a crash
    or a timeout costs that case only); failures end up in <case>/<stage>.error."""
    def done(n: str) -> bool:
        return (base / n / f"{stage}.json").exists() or (base / n / f"{stage}.error").exists()

    def run(todo: list[str]) -> str:
        cmd = [sys.executable, os.path.abspath(__file__), "--worker", stage, "--work-dir", str(base),
               "--cases", ",".join(todo)]
        try:
            r = subprocess.run(cmd, env=_env(), capture_output=True, text=True, timeout=timeout * len(todo))
        except subprocess.TimeoutExpired:
            return f"timed out after {timeout * len(todo):.0f} s"
        return _last_error(r.stderr + r.stdout) or f"the process exited with status {r.returncode}"

    if not resume:
        for n in names:
            for suffix in (".json", ".error", ".pt"):
                (base / n / f"{stage}{suffix}").unlink(missing_ok=True)
    todo = [n for n in names if not done(n)]
    if todo:
        run(todo)
    for n in [n for n in names if not done(n)]:
        err = run([n])
        if not done(n):
            (base / n).mkdir(parents=True, exist_ok=True)
            (base / n / f"{stage}.error").write_text(err)


def _worker_main(stage: str, names: list[str], base: Path) -> None:
    if stage != "export":
        setup_runtime(stage)
    for n in names:
        case, work = BY_NAME[n], base / n
        work.mkdir(parents=True, exist_ok=True)
        try:
            if stage == "export":
                t = time.perf_counter()
                build_model(case.family, case.task, work / "model")
                export(case, work / "model", work / "pte")
                (work / "export.json").write_text(json.dumps({"seconds": time.perf_counter() - t}))
            else:
                worker(stage, case, work / "model", work / "pte", work / f"{stage}.json")
        except Exception as e:
            traceback.print_exc()
            (work / f"{stage}.error").write_text(f"{type(e).__name__}: {e}".strip()[:600])
        print(f"{n}: {stage} done", file=sys.stderr, flush=True)


def _result(work: Path, stage: str) -> tuple[dict[str, Any] | None, list[Any] | None, str]:
    import torch

    if (work / f"{stage}.json").exists():
        return json.loads((work / f"{stage}.json").read_text()), torch.load(work / f"{stage}.pt"), ""
    err = work / f"{stage}.error"
    return None, None, err.read_text() if err.exists() else "no result"


def compare(case: Case, work: Path) -> Row:
    import torch

    row = Row(case.name, case.task, case.recipe, " ".join(case.options))
    row.atol, row.rtol = case.tolerance()
    row.exported = (work / "export.json").exists()
    if not row.exported:
        row.export_error = _result(work, "export")[2] if (work / "export.error").exists() else "not run"
        return row
    et, et_logits, row.et_error = _result(work, "executorch")
    px, px_logits, row.pyexec_error = _result(work, "pyexec")
    row.et_runs, row.pyexec_runs = et is not None, px is not None
    if px is not None:
        row.pyexec_loader = px.get("loader", "")
        if row.pyexec_loader != "pyexec.portable_lib":
            row.pyexec_runs = False
            row.pyexec_error = f"the module was loaded by {row.pyexec_loader}, not pyexec.portable_lib"
        row.seconds_pyexec, row.tokens_pyexec = px["seconds"], px["tokens"]
        row.timed = px["timed"]
    if et is not None:
        row.seconds_et, row.tokens_et = et["seconds"], et["tokens"]
        row.timed = et["timed"]
    if et is not None and px is not None and et_logits is not None and px_logits is not None:
        row.same_tokens = et["tokens"] == px["tokens"] and et.get("text") == px.get("text")
        diff, close = 0.0, len(et_logits) == len(px_logits)
        for a, e in zip(px_logits, et_logits):
            if a.shape != e.shape or a.dtype != e.dtype:
                close = False
                continue
            a64, e64 = a.double(), e.double()
            diff = max(diff, float((a64 - e64).abs().max()) if a.numel() else 0.0)
            close = close and bool(torch.allclose(a64, e64, atol=row.atol, rtol=row.rtol, equal_nan=True))
        row.max_logit_diff, row.logits_close = diff, close
    return row


def _fmt_s(s: float | None) -> str:
    return "-" if s is None else f"{s * 1e3:.2f} ms"


def table(rows: list[Row]) -> str:
    head = ["file", "options", "ExecuTorch runs?", "pyexec runs?", "same tokens?", "max logit diff (atol)",
            "time/call ET", "time/call pyexec"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    notes = []
    for r in rows:
        opts = f"{r.recipe} {r.options}".strip()
        if r.export_error == "not run":
            lines.append(f"| {r.case} | {opts} | not run | - | - | - | - | - |")
            continue
        if not r.exported:
            lines.append(f"| {r.case} | {opts} | export failed [{len(notes) + 1}] | - | - | - | - | - |")
            notes.append(f"{r.case}: {r.export_error}")
            continue
        et = "yes" if r.et_runs else f"no [{len(notes) + 1}]"
        if not r.et_runs:
            notes.append(f"{r.case} (ExecuTorch): {r.et_error}")
        px = "yes" if r.pyexec_runs else f"no [{len(notes) + 1}]"
        if not r.pyexec_runs:
            notes.append(f"{r.case} (pyexec): {r.pyexec_error}")
        same = "-" if r.same_tokens is None else ("yes" if r.same_tokens else "NO")
        diff = "-" if r.max_logit_diff is None else (
            f"{r.max_logit_diff:.2e} ({r.atol:g})" + ("" if r.logits_close else " OVER"))
        lines.append(f"| {r.case} | {opts} | {et} | {px} | {same} | {diff} | {_fmt_s(r.seconds_et)} | "
                     f"{_fmt_s(r.seconds_pyexec)} |")
    if notes:
        lines.append("")
        lines += [f"[{i + 1}] " + " ".join(n.split()) for i, n in enumerate(notes)]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--cases", help="comma-separated case names (default: the whole corpus); 'quick' for the "
                                   "test's small part")
    p.add_argument("--list", action="store_true", help="list the cases and exit")
    p.add_argument("--json", type=Path, help="write the results as JSON here")
    p.add_argument("--work-dir", type=Path, help="keep models and .pte files here (default: a temporary folder)")
    p.add_argument("--resume", action="store_true", help="keep the results already in --work-dir and run only "
                                                          "what is missing")
    p.add_argument("--report", action="store_true", help="only tabulate the results already in --work-dir")
    p.add_argument("--timeout", type=float, default=600, help="seconds per export and per run (default 600)")
    p.add_argument("--worker", choices=["export", "executorch", "pyexec"], help=argparse.SUPPRESS)
    args = p.parse_args(argv)

    if args.worker:
        _worker_main(args.worker, args.cases.split(","), args.work_dir)
        return 0
    if args.list:
        for c in CORPUS:
            print(f"{c.name:24} {c.task:30} {c.recipe:9} {' '.join(c.options)}")
        return 0
    names = [c.name for c in CORPUS] if not args.cases else (
        QUICK if args.cases == "quick" else [n.strip() for n in args.cases.split(",") if n.strip()])
    unknown = [n for n in names if n not in BY_NAME]
    if unknown:
        p.error(f"unknown cases: {', '.join(unknown)} (see --list)")

    with tempfile.TemporaryDirectory(prefix="optimum_corpus_") as tmp:
        base = (args.work_dir or Path(tmp)).resolve()
        for stage in () if args.report else ("export", "executorch", "pyexec"):
            t = time.perf_counter()
            todo = names if stage == "export" else [n for n in names if (base / n / "export.json").exists()]
            _stage(stage, todo, base, args.timeout, args.resume)
            print(f"{stage}: {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
        rows = [compare(BY_NAME[n], base / n) for n in names]
    print(table(rows))
    if args.json:
        args.json.write_text(json.dumps([{**asdict(r), "ok": r.ok} for r in rows], indent=1))
    return 0 if all(r.ok for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
