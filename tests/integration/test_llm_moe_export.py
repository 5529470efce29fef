"""A tiny Qwen 3.5 with mixture-of-experts feed-forwards, exported by
export_llm's configuration with model.use_moe_quantized_op=True: each
layer's experts quantized to int4 (groups of 32) and packed into the blobs
llama::quantized_moe_ffn reads, the router left in float32.

export_llm packs each expert with torchao's `_pack_8bit_act_4bit_weight`
op, which only torchao's CPU kernel library registers (built from source
with its CPU kernels; the x86-64 wheel on PyPI has none). Where that op is
missing, the export packs with tests/ops/test_ops_llm_newer.py's
pack_torchao_blob instead: the same layout, which ExecuTorch's runtime
unpacks in the comparison below, so a wrong blob would not pass.

pyexec and ExecuTorch's runtime are stepped in lock step on the same file
(a prefill, then single-token decode steps to the last position): every
step's logits within 1e-4 of ExecuTorch's with the same argmax. The steps
also match torch eager: the example's Transformer with the same weights,
each expert's matrices replaced by their int4 quantize-dequantize (the
values the op unpacks), no caches, the whole sequence at once."""

from __future__ import annotations

import hashlib
import json
import tempfile
import warnings
from contextlib import ExitStack
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import torch
from integration.test_llm_newer_families import FED, MAX_SEQ_LEN, PROMPT, TINY_QWEN3_5, ops_in
from ops.test_ops_llm_newer import pack_torchao_blob
from support.export import _file_digest, cache_dir, cached
from support.llm import assert_steps_match_eager, example, lock_step

export_llama = example("export_llama")

# one export_llm export (~40 s) when not cached; outside the test command (README)
pytestmark = [pytest.mark.slow, pytest.mark.extended]

GROUP = 32
TINY_QWEN3_5_MOE: dict[str, Any] = {**TINY_QWEN3_5, "moe": True, "num_experts": 4, "num_activated_experts": 2,
                                    "moe_hidden_dim": 32}
SETTINGS = ["backend.xnnpack.enabled=True", "backend.xnnpack.extended_ops=True", "model.use_moe_quantized_op=True"]
FLOAT_TOL = {"rtol": 0.0, "atol": 1e-4}


def torchao_packs() -> bool:
    return hasattr(torch.ops.torchao, "_pack_8bit_act_4bit_weight")


def _pack_int4(w: torch.Tensor, group_size: int, target: str = "universal") -> torch.Tensor:
    from executorch.examples.models.llama.source_transformation.moe import _symmetric_quantize_per_group

    q, scales = _symmetric_quantize_per_group(w, group_size, n_bit=4)
    return pack_torchao_blob(q, scales, group_size, 4)


def exported() -> bytes:
    import executorch
    from ops import test_ops_llm_newer

    h = hashlib.sha256()
    h.update(f"{torch.__version__}|{getattr(executorch, '__version__', '?')}|{torchao_packs()}".encode())
    for f in (__file__, test_ops_llm_newer.__file__, export_llama.__file__):
        h.update(_file_digest(str(f)).encode())
    h.update(json.dumps([TINY_QWEN3_5_MOE, SETTINGS, MAX_SEQ_LEN], sort_keys=True).encode())
    where = cache_dir()

    def make() -> list[bytes | None]:
        from executorch.examples.models.llama.export_llama_lib import export_llama as run_export
        from executorch.examples.models.llama.source_transformation import moe
        from executorch.extension.llm.export.config.llm_config import LlmConfig
        from omegaconf import OmegaConf

        with tempfile.TemporaryDirectory() as d, warnings.catch_warnings(), ExitStack() as patches:
            warnings.simplefilter("ignore")
            if not torchao_packs():
                patches.enter_context(mock.patch.object(moe, "_torchao_pack_int4_weight", _pack_int4))
            workdir = Path(d)
            export_llama.write_model(workdir, TINY_QWEN3_5_MOE, MAX_SEQ_LEN, 0)
            settings = export_llama.overrides("portable", workdir, MAX_SEQ_LEN, model_class="qwen3_5_0_8b") + SETTINGS
            config = OmegaConf.merge(OmegaConf.structured(LlmConfig), OmegaConf.from_dotlist(settings))
            run_export(OmegaConf.to_object(config))
            pte, _ = export_llama.file_names("portable")
            return [(workdir / pte).read_bytes()]

    (pte,) = cached(None if where is None else [where / f"llm-qwen3_5-moe-{h.hexdigest()[:24]}.pte"], make)
    assert pte is not None
    return pte


@pytest.fixture(scope="module")
def pte(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("moe") / "qwen3_5_moe.pte"
    path.write_bytes(exported())
    return path


def _qdq(w: torch.Tensor) -> torch.Tensor:
    """[N, K] through the export's int4 quantization (groups along K) and back."""
    from executorch.examples.models.llama.source_transformation.moe import _symmetric_quantize_per_group

    q, scales = _symmetric_quantize_per_group(w, GROUP, n_bit=4)
    return (q.float().reshape(w.shape[0], -1, GROUP) * scales.reshape(w.shape[0], -1, 1)).reshape(w.shape)


def test_moe_steps_match_executorch_and_eager(pte: Path) -> None:
    from executorch.examples.models.llama.llama_transformer import construct_transformer
    from executorch.examples.models.llama.model_args import ModelArgs
    from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401 (the gated delta op, eager)

    assert {"llama::quantized_moe_ffn.out", "llama::gated_delta_rule.out"} <= ops_in(pte.read_bytes())
    sequence = PROMPT + FED
    steps, argmaxes = lock_step(pte, None, PROMPT, MAX_SEQ_LEN, 64, FLOAT_TOL, lambda pos, logits: sequence[pos],
                                "qwen3_5 moe")
    assert len(set(argmaxes)) > 3  # the steps' predictions differ: each step is its own check

    args = ModelArgs(max_seq_len=MAX_SEQ_LEN, max_context_len=MAX_SEQ_LEN, generate_full_logits=True,
                     **TINY_QWEN3_5_MOE)
    model = construct_transformer(args)
    weights = export_llama.random_checkpoint(TINY_QWEN3_5_MOE, MAX_SEQ_LEN, seed=0)
    for name, w in weights.items():  # the experts as the op sees them: w1, w3 [E, F, D]; w2 packed as [E, D, F]
        if ".cond_ffn.w1" in name or ".cond_ffn.w3" in name:
            weights[name] = torch.stack([_qdq(e) for e in w])
        elif ".cond_ffn.w2" in name:
            weights[name] = torch.stack([_qdq(e.T.contiguous()).T for e in w])
    assert sum(".cond_ffn." in k for k in weights) == 3 * TINY_QWEN3_5_MOE["n_layers"]
    missing, unexpected = model.load_state_dict(weights, strict=False)
    assert not unexpected and not [k for k in missing if "weight" in k], (missing, unexpected)
    assert_steps_match_eager(model.eval(), sequence[:MAX_SEQ_LEN], steps, FLOAT_TOL, "qwen3_5 moe")
