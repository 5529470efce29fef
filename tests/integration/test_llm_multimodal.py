"""pyexec.llm.MultimodalRunner against ExecuTorch's MultimodalRunner on the
same file: a tiny program in ExecuTorch's multimodal layout (token_embedding,
vision_encoder, text_decoder with its KV cache in mutable buffers, the
metadata methods; support/multimodal.py) exported from one module with
several methods, and the test tokenizer. Greedy generation over text, image
and text inputs, generate_text, prefill then generate, reset: the same
texts and counts. The input helpers accept and refuse what ExecuTorch's do,
with its messages."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from support.llm_runner import VOCAB, write_tokenizer
from support.multimodal import multimodal_program

import pyexec.llm as px

pytestmark = pytest.mark.slow  # an export of three methods


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("multimodal")
    model = out / "model.pte"
    model.write_bytes(multimodal_program())
    return {"model": model, "tokenizer": write_tokenizer(out / "tok")}


def et() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import executorch.extension.llm.runner as runner
    return runner


IMAGE = (torch.arange(3 * 8 * 8, dtype=torch.float32).reshape(3, 8, 8) / 100.0).sin()


def session(module: Any, files: dict[str, Path]) -> list[Any]:
    runner = module.MultimodalRunner(str(files["model"]), str(files["tokenizer"]))
    greedy = {"temperature": 0.0}
    out: list[Any] = []
    pieces: list[str] = []
    stats: list[Any] = []
    inputs = [module.make_text_input("Hello"), module.make_image_input(IMAGE), module.make_text_input(" world")]
    runner.generate(inputs, module.GenerationConfig(max_new_tokens=10, **greedy), pieces.append, stats.append)
    out.append((pieces, stats[0].num_prompt_tokens, stats[0].num_generated_tokens))
    out.append(runner.generate_text([module.make_text_input(" again")],
                                    module.GenerationConfig(max_new_tokens=5, **greedy)))
    runner.reset()
    runner.prefill([module.make_image_input(IMAGE * 0.5)])
    out.append(runner.generate_text([module.make_token_input([5, 77, 120])],
                                    module.GenerationConfig(max_new_tokens=6, echo=False, **greedy)))
    return out


def test_generation_matches_executorch(files: dict[str, Path]) -> None:
    expected = session(et(), files)
    assert session(px, files) == expected
    tok = px.load_tokenizer(files["tokenizer"])
    assert expected[0][1] == len(tok.encode("Hello")) + 4 + len(tok.encode(" world"))  # the image: 4 patches
    assert len(set(expected[0][0][1:])) > 3


def test_errors(files: dict[str, Path]) -> None:
    runner = px.MultimodalRunner(str(files["model"]), str(files["tokenizer"]))
    config = px.GenerationConfig(temperature=0.0)
    uint8 = px.make_image_input(torch.zeros(3, 8, 8, dtype=torch.uint8))
    with pytest.raises(RuntimeError, match="Model expects float image data, but image has uint8_t data"):
        runner.generate([uint8], config)
    with pytest.raises(RuntimeError, match=f"token id {VOCAB} is outside the vocabulary"):
        runner.generate([px.make_token_input([1, VOCAB])], config)
    with pytest.raises(RuntimeError, match="MultimodalInput vector cannot be empty"):
        runner.generate([], config)
    with pytest.raises(RuntimeError, match="no audio_encoder method"):
        runner.generate([px.make_audio_input(torch.zeros(1, 2, 3))], config)
    for module in (et(), px):
        with pytest.raises(RuntimeError, match="Failed to create multimodal runner"):
            module.MultimodalRunner(str(files["model"].with_name("none.pte")), str(files["tokenizer"]))


@pytest.mark.parametrize("shape,dtype,layout", [
    ((3, 5, 6), torch.uint8, "chw"), ((1, 4, 5, 6), torch.float32, "chw"), ((3, 5, 6), torch.float32, "hwc"),
    ((100,), torch.uint8, "chw"), ((5, 6, 3), torch.uint8, "chw"), ((2, 3, 5, 6), torch.uint8, "chw"),
    ((3, 5, 6), torch.int32, "chw"), ((3, 5, 6), torch.float32, "odd"),
])
def test_make_image_input_like_executorch(shape: tuple[int, ...], dtype: torch.dtype, layout: str) -> None:
    t = (torch.arange(int(np.prod(shape))) % 251).to(dtype).reshape(shape)
    if layout == "hwc":  # a (C, H, W) view of channels-last memory: refused
        t = t.permute(1, 2, 0).contiguous().permute(2, 0, 1)
    elif layout == "odd":
        t = t.transpose(1, 2).contiguous().transpose(1, 2)

    def outcome(module: Any) -> Any:
        try:
            image = module.make_image_input(t).get_image()
        except RuntimeError as exc:
            return str(exc)
        data = image.float_data if image.is_float() else image.uint8_data
        return repr(image), data

    assert outcome(px) == outcome(et())


def test_inputs_like_executorch() -> None:
    ref = et()
    for module in (px, ref):
        text = module.MultimodalInput("a" * 60)
        assert text.is_text() and not text.is_image() and text.get_image() is None
    assert repr(px.MultimodalInput("a" * 60)) == repr(ref.MultimodalInput("a" * 60))
    assert repr(px.Image([1, 2, 3], 1, 1, 3)) == repr(ref.Image([1, 2, 3], 1, 1, 3))
    assert px.Image([0.5, 1.0, 2.0], 1, 1, 3).float_data == ref.Image([0.5, 1.0, 2.0], 1, 1, 3).float_data
    for make in ("make_audio_input", "make_raw_audio_input"):
        for t in (torch.ones(1, 2, 3), torch.ones(2, 3), torch.ones(1, 2, 3, dtype=torch.uint8),
                  torch.ones(1, 2, 3, dtype=torch.int16)):
            got, expected = [], []
            for module, out in ((px, got), (ref, expected)):
                try:
                    x = getattr(module, make)(t)
                    out.append((repr(x), repr(x.get_audio()), repr(x.get_raw_audio())))
                except RuntimeError as exc:
                    out.append(str(exc))
            assert got == expected, (make, t.shape, t.dtype)
    assert px.make_token_input([1, 2]).get_tokens() == ref.make_token_input([1, 2]).get_tokens() == [1, 2]


def test_generate_hf_splits_around_the_image_tokens(files: dict[str, Path]) -> None:
    """generate_hf on a processor-style dict: input_ids split around the run
    of image_token_id, the image in its place; the same text as the inputs
    given one by one (which ExecuTorch's MultimodalRunner generates)."""
    image_token = 250
    ids = [34, 35, 36] + [image_token] * 4 + [37, 38]
    expected = et().MultimodalRunner(str(files["model"]), str(files["tokenizer"])).generate_text(
        [et().make_token_input(ids[:3]), et().make_image_input(IMAGE), et().make_token_input(ids[7:])],
        et().GenerationConfig(max_new_tokens=6, temperature=0.0))
    runner = px.MultimodalRunner(str(files["model"]), str(files["tokenizer"]))
    pieces: list[str] = []
    batch = {"input_ids": torch.tensor([ids]), "pixel_values": IMAGE.unsqueeze(0)}
    runner.generate_hf(batch, px.GenerationConfig(max_new_tokens=6, temperature=0.0), image_token, pieces.append)
    assert "".join(pieces) == expected
    with pytest.raises(RuntimeError, match="missing 'image_token_id'"):
        runner.generate_hf(batch, px.GenerationConfig())
