"""The export_llm family matrix: each base.model_class family ExecuTorch 1.5.1's
export_llm knows, with tiny params (dim 32, 2 layers, vocab 64) and random
weights, exported with each option, then stepped by ExecuTorch's runtime and
by pyexec side by side (a prefill, then single-token decode steps to the last
cache position, both fed the same fixed tokens).

Per file: exported?, does ExecuTorch run it?, does pyexec?, the largest
absolute logit difference over the steps, whether every step's greedy token
(argmax) is the same, and the median decode step time of each runtime (one
thread each).

Run from the repository root with the development venv:

    PYTHONPATH=.:tests python scripts/llm_matrix.py [--only FAMILY[:OPTION]] \
        [--resume] [--json OUT.json]

Exports are cached under tests/_artifacts/llm_matrix (keyed by the versions,
this file and the settings), so a re-run only steps the files. Each file is
stepped in a child process, so a crash of either runtime is a row of the
table, not the end of the run.

Tolerances (never widened to pass; a mismatch is reported): float32 logits
within 1e-4 absolute of ExecuTorch's (different summation orders only);
8da4w within 2e-2 (activations quantized to int8 per token at run time: a
last-bit difference before the quantization can move a value by one int8
step), as tests/integration/test_llm_generate.py compares them."""

from __future__ import annotations

import argparse
import hashlib
import importlib.util
import json
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "tests" / "_artifacts" / "llm_matrix"
MAX_SEQ_LEN = 16
VOCAB = 64
PROMPT = [1, 17, 59, 3, 42]
FED = [(7 + 13 * i) % VOCAB for i in range(MAX_SEQ_LEN)]  # the token fed at each position after the prompt
FLOAT_TOL = 1e-4
Q8DA4W_TOL = 2e-2

_LLAMA = {"dim": 32, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "vocab_size": VOCAB, "multiple_of": 32,
          "norm_eps": 1e-5}
_HF = {"dim": 32, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "hidden_dim": 96, "ffn_dim_multiplier": 1,
       "vocab_size": VOCAB, "use_scaled_rope": False, "use_hf_rope": True}
_LFM2 = {**_HF, "hidden_dim": 64, "norm_eps": 1e-5, "rope_theta": 1000000.0, "use_qk_norm": True,
         "qk_norm_before_rope": True, "layer_types": ["conv", "full_attention"]}

# name: (base.model_class, tiny params.json) — each family's published config
# (examples/models/<family>/config/*.json upstream) cut to dim 32, 2 layers
FAMILIES: dict[str, tuple[str, dict[str, Any]]] = {
    "llama3_2": ("llama3_2", {**_LLAMA, "rope_theta": 500000.0, "use_scaled_rope": True}),
    "qwen2_5": ("qwen2_5_0_5b", {**_HF, "norm_eps": 1e-6, "rope_theta": 1000000.0, "attention_qkv_bias": True}),
    "qwen3": ("qwen3_0_6b", {**_HF, "head_dim": 16, "norm_eps": 1e-6, "rope_theta": 1000000.0,
                             "attention_qkv_bias": False, "use_qk_norm": True, "qk_norm_before_rope": True}),
    "qwen3_5": ("qwen3_5_0_8b", {
        "dim": 32, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "head_dim": 8, "hidden_dim": 64,
        "vocab_size": VOCAB, "norm_eps": 1e-6, "rope_theta": 10000000.0, "use_scaled_rope": False,
        "layer_types": ["linear_attention", "full_attention"], "linear_num_key_heads": 2,
        "linear_num_value_heads": 4, "linear_key_head_dim": 8, "linear_value_head_dim": 8,
        "linear_conv_kernel_dim": 4, "use_q_gate": True, "use_qk_norm": True, "qk_norm_before_rope": True,
        "rms_norm_add_unit_offset": True, "partial_rotary_factor": 0.25, "use_hf_rope": True}),
    "phi_4_mini": ("phi_4_mini", {**_HF, "norm_eps": 1e-5, "rope_theta": 10000.0, "partial_rotary_factor": 0.75,
                                  "attention_qkv_bias": False}),
    "smollm2": ("smollm2", {**_HF, "norm_eps": 1e-5, "rope_theta": 10000.0, "use_hf_rope": False,
                            "attention_qkv_bias": False}),
    "lfm2": ("lfm2_350m", _LFM2),
    "lfm2_5": ("lfm2_5_350m", _LFM2),
}

_XNN = ["backend.xnnpack.enabled=True", "backend.xnnpack.extended_ops=True"]
# name: export_llm settings added to the common ones (use_kv_cache, custom SDPA)
OPTIONS: dict[str, list[str]] = {
    "xnnpack": _XNN,
    "xnnpack-static": [*_XNN, "model.enable_dynamic_shape=False"],
    "xnnpack-8da4w": [*_XNN, "quantization.qmode=8da4w", "quantization.group_size=32"],
    "xnnpack-qkvcache": [*_XNN, "model.quantize_kv_cache=True"],
    "xnnpack-ptd": [*_XNN, "export.foundation_weights_file=model_weights"],
    "portable": [],
    "xnnpack-lora": [*_XNN, "LORA"],  # base.lora_config with a rank-4 adapter on q_proj and v_proj
}
# the adapter file: a .safetensors of PEFT-named LoRA weights (export_llm reads a .pt one with torchtune)
_ADAPTER = "adapter.safetensors, PEFT names"
LORA = {"lora_rank": 4, "lora_alpha": 8, "target_modules": ["q_proj", "v_proj"]}


_WEIGHTS = "N(0, 1/fan_in) matrices, norms 1 + N(0, 0.01), N(0, 1) embedding, seed 0"  # (in the cache key)


def tolerance(option: str) -> float:
    return Q8DA4W_TOL if "8da4w" in option else FLOAT_TOL


def _key(family: str, option: str) -> str:
    import executorch
    import torch

    h = hashlib.sha256()
    h.update(f"{torch.__version__}|{getattr(executorch, '__version__', '?')}".encode())
    h.update(json.dumps([FAMILIES[family], OPTIONS[option], LORA, MAX_SEQ_LEN, _WEIGHTS], sort_keys=True).encode())
    if "LORA" in OPTIONS[option]:
        h.update(_ADAPTER.encode())
    return f"{family}-{option}-{h.hexdigest()[:16]}"


def _checkpoint(params: dict[str, Any], lora: bool) -> dict[str, Any]:
    """Random weights as the tests' exports draw them, with LoRA's A and B
    matrices (named `layers.N.attention.wq.lora_a.weight`...) when `lora`."""
    from support.llm import example

    extra = {"r": LORA["lora_rank"], "lora_alpha": LORA["lora_alpha"], "target_modules": LORA["target_modules"]}
    return example("export_llama").random_checkpoint(params, MAX_SEQ_LEN, 0, **(extra if lora else {}))


def _write_adapter(weights: dict[str, Any], path: Path) -> None:
    """The LoRA matrices of `weights` as a PEFT adapter file
    (`base_model.model.model.layers.N.self_attn.q_proj.lora_A.weight`...),
    the names export_llm's .safetensors reader maps back with its own table."""
    import re

    from executorch.examples.models.llama.convert_weights import _UNSLOTH_TO_META
    from safetensors.torch import save_file

    to_peft = {ours: theirs for theirs, ours in _UNSLOTH_TO_META.items()}
    adapter = {}
    for name, w in weights.items():
        if ".lora_" in name:
            layer = re.search(r"\.(\d+)\.", name)
            template = re.sub(r"\.(\d+)\.", ".{}.", name, count=1)
            if layer is None or template not in to_peft:
                raise RuntimeError(f"no PEFT name for the LoRA weight {name!r} in export_llm's table")
            adapter[to_peft[template].format(layer.group(1))] = w.contiguous()
    if not adapter:
        raise RuntimeError("the model has no LoRA weights (target_modules matched no layer)")
    save_file(adapter, str(path))


def _safetensors_stub() -> None:
    """ExecuTorch's lfm2 package imports safetensors (its Hugging Face
    checkpoint converter's) when the model is built, though a .pth checkpoint
    never calls it: where safetensors is not installed, a stand-in module
    whose load_file says so."""
    import types

    if importlib.util.find_spec("safetensors") is not None:
        return

    def load_file(*args: Any, **kwargs: Any) -> Any:
        raise ImportError("safetensors is not installed (scripts/llm_matrix.py's stand-in)")

    package, torch_module = types.ModuleType("safetensors"), types.ModuleType("safetensors.torch")
    torch_module.load_file = load_file  # type: ignore[attr-defined]
    package.torch = torch_module  # type: ignore[attr-defined]
    sys.modules.update({"safetensors": package, "safetensors.torch": torch_module})


def export(family: str, option: str) -> tuple[Path, Path | None]:
    """The cached .pte (and .ptd) of `family` with `option`, exported by
    export_llm's configuration in this process when not cached. An export
    that failed before raises its recorded error again."""
    key = _key(family, option)
    pte, ptd, err = CACHE / f"{key}.pte", CACHE / f"{key}.ptd", CACHE / f"{key}.error"
    if pte.is_file():
        return pte, (ptd if ptd.is_file() else None)
    if err.is_file():
        raise RuntimeError(err.read_text())
    CACHE.mkdir(parents=True, exist_ok=True)
    model_class, params = FAMILIES[family]
    lora = "LORA" in OPTIONS[option]
    if lora and importlib.util.find_spec("safetensors") is None:
        raise RuntimeError("the xnnpack-lora option needs safetensors (pip install safetensors): "
                           "export_llm reads a .safetensors adapter with it")
    if model_class.startswith("lfm2"):
        _safetensors_stub()
    import torch
    from executorch.examples.models.llama.export_llama_lib import export_llama
    from executorch.extension.llm.export.config.llm_config import LlmConfig
    from omegaconf import OmegaConf

    with tempfile.TemporaryDirectory() as d, warnings.catch_warnings():
        warnings.simplefilter("ignore")
        work = Path(d)
        (work / "params.json").write_text(json.dumps(params))
        weights = _checkpoint(params, lora)
        if lora:  # the base weights in model.pth, the adapter's in adapter.safetensors
            _write_adapter(weights, work / "adapter.safetensors")
            weights = {k: v for k, v in weights.items() if ".lora_" not in k}
        torch.save(weights, work / "model.pth")
        settings = [
            f"base.model_class={model_class}", f"base.params={work / 'params.json'}",
            f"base.checkpoint={work / 'model.pth'}", "model.use_kv_cache=True", "model.use_sdpa_with_kv_cache=True",
            f"export.max_seq_length={MAX_SEQ_LEN}", f"export.max_context_length={MAX_SEQ_LEN}",
            f"export.output_dir={work}", "export.output_name=model",
            *[s for s in OPTIONS[option] if s != "LORA"],
        ]
        if lora:
            settings += [f"base.lora_config.adapter_checkpoint={work / 'adapter.safetensors'}",
                         f"base.lora_config.lora_rank={LORA['lora_rank']}",
                         f"base.lora_config.lora_alpha={LORA['lora_alpha']}",
                         f"base.lora_config.target_modules=[{','.join(LORA['target_modules'])}]"]
        config = OmegaConf.merge(OmegaConf.structured(LlmConfig), OmegaConf.from_dotlist(settings))
        try:
            export_llama(OmegaConf.to_object(config))
            written = sorted(work.glob("*.pte"))
            if len(written) != 1:
                raise RuntimeError(f"export_llm wrote {[f.name for f in written]}, not one .pte")
        except Exception as e:  # recorded, so --resume and re-runs do not export again
            lines = [ln for ln in f"{type(e).__name__}: {e}".splitlines() if ln.strip()]
            err.write_text(lines[0][:300] if lines else type(e).__name__)
            raise RuntimeError(err.read_text()) from e
        ptds = sorted(work.glob("*.ptd"))
        if ptds:
            ptd.write_bytes(ptds[0].read_bytes())
        pte.write_bytes(written[0].read_bytes())  # last: its presence says the files are whole
    return pte, (ptd if ptd.is_file() else None)


def _first_line(e: BaseException) -> str:
    text = f"{type(e).__name__}: {e}".strip().splitlines()
    return text[0][:300] if text else type(e).__name__


def _executorch_method(pte: Path, ptd: Path | None) -> Any:
    import executorch.kernels.quantized  # noqa: F401 (the quantized ops)
    from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401 (the llama ops)
    from executorch.extension.pybindings import portable_lib
    from executorch.runtime import Runtime

    portable_lib._unsafe_reset_threadpool(1)
    runtime = Runtime.get()
    program = runtime.load_program(pte, data_path=ptd) if ptd else runtime.load_program(pte)
    return program.load_method("forward")


def _pyexec_method(pte: Path, ptd: Path | None) -> Any:
    import pyexec

    pyexec.set_num_threads(1)
    return pyexec.load(pte, data_path=ptd).load_method("forward")


def _run(method: Any, inputs: list[tuple[Any, Any]]) -> tuple[list[Any], list[float]]:
    """Every step's logits and each decode step's seconds."""
    outs, times = [], []
    for tokens, pos in inputs:
        t0 = time.perf_counter()
        (logits,) = method.execute([tokens.clone(), pos.clone()])
        dt = time.perf_counter() - t0
        outs.append(logits.clone())
        if tokens.shape[1] == 1:
            times.append(dt)
    return outs, times


def _inputs(pte: Path, ptd: Path | None) -> list[tuple[Any, Any]]:
    """The prompt (as one prefill, or a token at a time where the program's
    tokens input is [1, 1]), then single tokens to the last position."""
    import torch

    import pyexec

    meta = pyexec.load(pte, data_path=ptd).method_meta("forward").inputs[0]
    one_at_a_time = meta is not None and not meta.is_dynamic and tuple(meta.sizes) == (1, 1)
    steps = []
    if one_at_a_time:
        steps += [(torch.tensor([[t]]), torch.tensor([i])) for i, t in enumerate(PROMPT)]
    else:
        steps.append((torch.tensor([PROMPT]), torch.tensor([0])))
    steps += [(torch.tensor([[FED[p]]]), torch.tensor([p])) for p in range(len(PROMPT), MAX_SEQ_LEN)]
    return steps


def step_one(family: str, option: str) -> dict[str, Any]:
    """One row of the table (in the child process)."""
    row: dict[str, Any] = {"family": family, "option": option, "model_class": FAMILIES[family][0],
                           "exported": False, "executorch_runs": None, "pyexec_runs": None,
                           "max_logit_diff": None, "tolerance": tolerance(option), "within_tolerance": None,
                           "same_greedy_tokens": None, "executorch_decode_ms": None, "pyexec_decode_ms": None,
                           "error": None}
    try:
        t0 = time.perf_counter()
        pte, ptd = export(family, option)
        row["export_s"] = round(time.perf_counter() - t0, 1)
    except Exception as e:
        row["error"] = f"export: {_first_line(e)}"
        return row
    row["exported"] = True
    row["files"] = [str(p.relative_to(ROOT)) for p in (pte, ptd) if p is not None]
    try:
        inputs = _inputs(pte, ptd)
    except Exception as e:
        row["pyexec_runs"] = False
        row["error"] = f"pyexec (load): {_first_line(e)}"
        return row
    theirs = ours = None
    errors = []
    try:
        theirs, their_times = _run(_executorch_method(pte, ptd), inputs)
        row["executorch_runs"] = True
        row["executorch_decode_ms"] = round(1e3 * statistics.median(their_times), 3)
    except Exception as e:
        row["executorch_runs"] = False
        errors.append(f"ExecuTorch: {_first_line(e)}")
    try:
        ours, our_times = _run(_pyexec_method(pte, ptd), inputs)
        row["pyexec_runs"] = True
        row["pyexec_decode_ms"] = round(1e3 * statistics.median(our_times), 3)
    except Exception as e:
        row["pyexec_runs"] = False
        errors.append(f"pyexec: {_first_line(e)}")
    if theirs is not None and ours is not None:
        if any(a.shape != b.shape for a, b in zip(ours, theirs, strict=True)):
            errors.append(f"pyexec's logits {tuple(ours[-1].shape)}, ExecuTorch's {tuple(theirs[-1].shape)}")
        else:
            diff = max(float((a.float() - b.float()).abs().max()) for a, b in zip(ours, theirs, strict=True))
            row["max_logit_diff"] = diff
            row["within_tolerance"] = diff <= tolerance(option)
            ours_tokens = [int(a.reshape(-1, a.shape[-1])[-1].argmax()) for a in ours]
            their_tokens = [int(b.reshape(-1, b.shape[-1])[-1].argmax()) for b in theirs]
            row["same_greedy_tokens"] = ours_tokens == their_tokens
            row["greedy_tokens"] = their_tokens
    row["error"] = "; ".join(errors) or None
    return row


def _cell(v: Any) -> str:
    if v is None:
        return "–"
    if v is True:
        return "yes"
    if v is False:
        return "**no**"
    if isinstance(v, float):
        return f"{v:.1e}"
    return str(v)


def _ms(v: float | None) -> str:
    return "–" if v is None else f"{v:.3f}"


def table(rows: list[dict[str, Any]]) -> str:
    head = ["family (model_class)", "option", "exported", "ExecuTorch runs", "pyexec runs", "max logit diff (tol)",
            "same greedy tokens", "decode ms ET / pyexec", "error (first line)"]
    out = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        diff = "–" if r["max_logit_diff"] is None else (
            f"{r['max_logit_diff']:.1e} ({r['tolerance']:.0e})" + ("" if r["within_tolerance"] else " **over**"))
        ms = "–" if r["executorch_decode_ms"] is None and r["pyexec_decode_ms"] is None else (
            f"{_ms(r['executorch_decode_ms'])} / {_ms(r['pyexec_decode_ms'])}")
        err = (r["error"] or "").replace("|", "\\|")
        out.append("| " + " | ".join([f"{r['family']} ({r['model_class']})", r["option"], _cell(r["exported"]),
                                       _cell(r["executorch_runs"]), _cell(r["pyexec_runs"]), diff,
                                       _cell(r["same_greedy_tokens"]), ms, err]) + " |")
    return "\n".join(out)


def _selected(only: list[str] | None) -> list[tuple[str, str]]:
    # XNNPACK float32 for every family first, then every option of a few
    # families of different architectures, then the rest
    core = ["llama3_2", "qwen3", "qwen3_5", "lfm2"]
    pairs = sorted(((f, o) for o in OPTIONS for f in FAMILIES),
                   key=lambda p: (0 if p[1] == "xnnpack" else 1 if p[0] in core else 2,
                                  list(OPTIONS).index(p[1]), list(FAMILIES).index(p[0])))
    if not only:
        return pairs
    keep = []
    for f, o in pairs:
        for sel in only:
            fam, _, opt = sel.partition(":")
            if fam not in FAMILIES and fam != "*":
                raise SystemExit(f"--only: unknown family {fam!r} (one of {', '.join(FAMILIES)}, or *)")
            if opt and opt not in OPTIONS:
                raise SystemExit(f"--only: unknown option {opt!r} (one of {', '.join(OPTIONS)})")
            if fam in (f, "*") and opt in ("", o):
                keep.append((f, o))
                break
    return keep


def _blank(family: str, option: str) -> dict[str, Any]:
    return {"family": family, "option": option, "model_class": FAMILIES[family][0], "exported": None,
            "executorch_runs": None, "pyexec_runs": None, "max_logit_diff": None, "tolerance": tolerance(option),
            "within_tolerance": None, "same_greedy_tokens": None, "executorch_decode_ms": None,
            "pyexec_decode_ms": None, "error": None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", action="append", metavar="FAMILY[:OPTION]",
                        help=f"repeatable; FAMILY one of {', '.join(FAMILIES)} or *; "
                             f"OPTION one of {', '.join(OPTIONS)} (default: every pair)")
    parser.add_argument("--json", type=Path, help="write the rows to this JSON file")
    parser.add_argument("--resume", action="store_true",
                        help="keep the rows already in the --json file and step only the others")
    parser.add_argument("--report", action="store_true",
                        help="print the table of the rows in the --json file, stepping nothing")
    parser.add_argument("--timeout", type=float, default=900, help="seconds for one file's export and steps")
    parser.add_argument("--one", help=argparse.SUPPRESS)  # FAMILY:OPTION in a child process
    args = parser.parse_args()
    if args.one:
        family, _, option = args.one.partition(":")
        try:
            row = step_one(family, option)
        except Exception as e:  # noqa: BLE001 (a row, whatever happened)
            traceback.print_exc()
            row = {"family": family, "option": option, "error": f"matrix: {_first_line(e)}"}
        print("ROW " + json.dumps(row), flush=True)
        return

    if args.report:
        if not args.json or not args.json.is_file():
            raise SystemExit("--report needs --json FILE, a file an earlier run wrote")
        order = {pair: i for i, pair in enumerate(_selected(None))}
        rows = [r for r in json.loads(args.json.read_text())["rows"] if (r["family"], r["option"]) in order]
        seen = {(r["family"], r["option"]) for r in rows}
        rows += [{**_blank(f, o), "error": "not run yet (--resume runs it)"} for f, o in order if (f, o) not in seen]
        print(table(sorted(rows, key=lambda r: (list(FAMILIES).index(r["family"]), list(OPTIONS).index(r["option"])))))
        return
    done: dict[tuple[str, str], dict[str, Any]] = {}
    if args.resume and args.json and args.json.is_file():
        done = {(r["family"], r["option"]): r for r in json.loads(args.json.read_text())["rows"]}
    rows = []
    for family, option in _selected(args.only):
        if (family, option) in done:
            rows.append(done[(family, option)])
            continue
        t0 = time.perf_counter()
        try:
            proc = subprocess.run([sys.executable, __file__, "--one", f"{family}:{option}"], capture_output=True,
                                  text=True, timeout=args.timeout)
            found = [ln for ln in proc.stdout.splitlines() if ln.startswith("ROW ")]
            if found:
                row = json.loads(found[-1][4:])
            else:  # the child died (a crash in a runtime): its last words
                tail = [ln for ln in proc.stderr.splitlines() if ln.strip()][-1:] or [f"exit {proc.returncode}"]
                row = {"error": f"crashed (exit {proc.returncode}): {tail[0][:300]}"}
        except subprocess.TimeoutExpired:
            row = {"error": f"timed out after {args.timeout:.0f} s"}
        row = {**_blank(family, option), **row}
        rows.append(row)
        print(f"{family}:{option} ({time.perf_counter() - t0:.0f} s): "
              + ("ok" if not row["error"] and row["within_tolerance"] and row["same_greedy_tokens"]
                 else row["error"] or "mismatch"), file=sys.stderr, flush=True)
        if args.json:  # after every row: an interrupted run resumes where it stopped
            args.json.write_text(json.dumps({"rows": rows + [r for k, r in done.items()
                                                             if k not in {(x["family"], x["option"]) for x in rows}]},
                                            indent=1))
    print(table(rows))


if __name__ == "__main__":
    main()
