"""pyexec.llm's TextLLMRunner against ExecuTorch's TextLLMRunner
(executorch.extension.llm.runner) on the same files: tiny random-weight
Llama and Qwen3 programs exported by export_llm, a byte-level BPE tokenizer
trained here on a few sentences. Greedy generation gives the same token
texts, counts and conversation state; stop(), the errors and the
max_new_tokens rules behave alike; seeded sampling repeats; a UTF-8
character split across byte-level tokens reaches the callback whole.

The Llama programs for the comparisons have the output rows of the
tokenizer's partial-UTF-8 byte tokens zeroed (support.llm_runner,
whole_chars): ExecuTorch's binding raises UnicodeDecodeError when such a
token reaches a Python callback, so greedy decoding must not pick one."""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest
from support.llm_runner import VOCAB, llm_program, partial_utf8_ids, write_tokenizer

import pyexec.llm as px
from pyexec.llm import load_tokenizer

pytestmark = pytest.mark.slow  # export_llm exports when not cached

PROMPTS = ["Hello world", "The quick brown fox", "pyexec runs"]


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("llm-runner")
    paths = {"tokenizer": write_tokenizer(out / "tok")}
    for name, kw in {
        "dynamic": {"whole_chars": True},
        "static": {"whole_chars": True, "dynamic": False},
        "qwen3": {"model_class": "qwen3_0_6b", "whole_chars": True},
        "bytes": {},  # every token may come out, byte tokens too
    }.items():
        paths[name] = out / f"{name}.pte"
        paths[name].write_bytes(llm_program(**kw))
    return paths


def et() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import executorch.extension.llm.runner as runner
        import executorch.kernels.quantized  # noqa: F401
        from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401
    return runner


def run(module: Any, runner: Any, prompt: str, **config: Any) -> tuple[list[str], Any]:
    pieces: list[str] = []
    stats: list[Any] = []
    runner.generate(prompt, module.GenerationConfig(**config), pieces.append, stats.append)
    return pieces, stats[0]


def conversation(module: Any, files: dict[str, Path], name: str) -> list[Any]:
    """Three turns (the last one up to the end of the 32-position context),
    a prefill and a generate(""), a reset and a fresh turn: each turn's
    pieces and (prompt, generated) counts."""
    runner = module.TextLLMRunner(str(files[name]), str(files["tokenizer"]))
    out: list[Any] = []
    for i, (prompt, n) in enumerate(((PROMPTS[0], 3), (PROMPTS[2], 3), (PROMPTS[0], 50))):  # 7, 8, 7 tokens
        pieces, stats = run(module, runner, prompt, max_new_tokens=n, temperature=0.0, echo=i != 1)
        out.append((pieces, stats.num_prompt_tokens, stats.num_generated_tokens))
    runner.reset()
    runner.prefill(PROMPTS[1], module.GenerationConfig(temperature=0.0))
    pieces, stats = run(module, runner, "", max_new_tokens=5, temperature=0.0)
    out.append((pieces, stats.num_prompt_tokens, stats.num_generated_tokens))
    runner.reset()
    pieces, stats = run(module, runner, PROMPTS[2], seq_len=20, temperature=0.0)
    out.append((pieces, stats.num_prompt_tokens, stats.num_generated_tokens))
    return out


@pytest.mark.parametrize("name", ["dynamic", "static", "qwen3"])
def test_greedy_conversation_matches_executorch(files: dict[str, Path], name: str) -> None:
    expected = conversation(et(), files, name)
    got = conversation(px, files, name)
    assert got == expected
    generated = [p for turn in expected for p in turn[0][1:]]
    assert len(set(generated)) > 2 or name == "qwen3"  # the comparison sees varied tokens


def test_greedy_token_ids(files: dict[str, Path]) -> None:
    """The token ids behind the texts: the session holds the prompt's ids as
    the tokenizer encodes them, then the generated ids, each the argmax of
    ExecuTorch's runtime stepped on the same file."""
    runner = px.TextLLMRunner(str(files["dynamic"]), str(files["tokenizer"]))
    pieces, stats = run(px, runner, PROMPTS[0], max_new_tokens=10, temperature=0.0, echo=False)
    tok = load_tokenizer(files["tokenizer"])
    prompt_ids = tok.encode(PROMPTS[0])
    held = runner.session.tokens
    assert held[:len(prompt_ids)] == prompt_ids and stats.num_generated_tokens == 9
    generated = held[len(prompt_ids):]
    assert "".join(tok.decode([t]) for t in generated) == "".join(pieces[:-1])
    import torch

    et()  # the custom operators registered
    from executorch.runtime import Runtime

    method = Runtime.get().load_program(files["dynamic"]).load_method("forward")
    (logits,) = method.execute([torch.tensor([prompt_ids]), torch.tensor([0])])
    pos, ids = len(prompt_ids), []
    for _ in range(10):
        ids.append(int(logits.argmax()))
        (logits,) = method.execute([torch.tensor([[ids[-1]]]), torch.tensor([pos])])
        pos += 1
    assert generated == ids[:-1]  # the last generated token is not fed, as in ExecuTorch
    assert tok.decode(ids) == "".join(pieces)


def test_stop_from_the_callback(files: dict[str, Path]) -> None:
    def stopping(module: Any) -> tuple[list[str], int]:
        runner = module.TextLLMRunner(str(files["dynamic"]), str(files["tokenizer"]))
        pieces: list[str] = []

        def on_token(piece: str) -> None:
            pieces.append(piece)
            if len(pieces) == 4:
                runner.stop()

        stats: list[Any] = []
        runner.generate(PROMPTS[1], module.GenerationConfig(echo=False, temperature=0.0), on_token, stats.append)
        return pieces, stats[0].num_generated_tokens

    got = stopping(px)
    assert got == stopping(et())
    assert len(got[0]) == 4 and got[1] == 3  # the first token comes from the prefill


def test_errors_like_executorch(files: dict[str, Path], tmp_path: Path) -> None:
    for module in (et(), px):
        with pytest.raises(RuntimeError, match="Failed to load tokenizer from"):
            module.TextLLMRunner(str(files["dynamic"]), str(tmp_path / "missing.json"))
        bad = tmp_path / "bad.json"
        bad.write_text('{"model": 5')
        with pytest.raises(RuntimeError, match="Failed to load tokenizer from"):
            module.TextLLMRunner(str(files["dynamic"]), str(bad))
        runner = module.TextLLMRunner(str(files["dynamic"]), str(files["tokenizer"]))
        long_prompt = " ".join(["The quick brown fox"] * 3)  # 47 tokens, 32 positions
        with pytest.raises(RuntimeError, match="Generation failed"):
            runner.generate(long_prompt, module.GenerationConfig(temperature=0.0))
        with pytest.raises(RuntimeError, match="Generation failed"):
            runner.generate(PROMPTS[0], module.GenerationConfig(temperature=1.5))
        with pytest.raises(RuntimeError, match="Generation failed"):
            runner.generate("", module.GenerationConfig(temperature=0.0))  # no prefill before
    runner = px.TextLLMRunner(str(files["dynamic"]), str(files["tokenizer"]))
    with pytest.raises(RuntimeError, match=r"pos_ 0 \+ num_prompt_tokens \d+ >= max_context_len 32"):
        runner.generate(" ".join(["The quick brown fox"] * 3), px.GenerationConfig())
    with pytest.raises(RuntimeError, match=r"Temperature must be in \[0, 1\]"):
        runner.generate(PROMPTS[0], px.GenerationConfig(temperature=1.5))
    with pytest.raises(RuntimeError, match="Empty prompt requires a prior prefill"):
        runner.generate("", px.GenerationConfig())
    with pytest.raises(RuntimeError, match="Failed to create text llm runner with model: .*x.pte"):
        px.TextLLMRunner(str(files["tokenizer"].with_name("x.pte")), str(files["tokenizer"]))
    assert runner.get_vocab_size() == VOCAB


def test_seeded_sampling_repeats(files: dict[str, Path]) -> None:
    def sample(seed: int | None) -> list[str]:
        runner = px.TextLLMRunner(str(files["bytes"]), str(files["tokenizer"]))
        pieces, stats = run(px, runner, PROMPTS[0], temperature=1.0, top_k=50, top_p=0.95, seed=seed, echo=False)
        assert stats.num_generated_tokens > 0
        return pieces

    a, b, c = sample(3), sample(3), sample(4)
    assert a == b and a != c
    greedy = px.TextLLMRunner(str(files["bytes"]), str(files["tokenizer"]))
    assert run(px, greedy, PROMPTS[0], temperature=0.0, echo=False)[0] != a  # it did sample


def test_utf8_split_across_tokens(files: dict[str, Path]) -> None:
    """The byte-level tokens a random model emits: the callback's pieces
    join to the UTF-8 decoding of all the generated bytes and never end
    inside a character; ExecuTorch's binding raises UnicodeDecodeError on
    the first such token."""
    tok = load_tokenizer(files["tokenizer"])
    runner = px.TextLLMRunner(str(files["bytes"]), str(files["tokenizer"]))
    pieces, stats = run(px, runner, PROMPTS[0], temperature=0.0, echo=False)
    session = runner.session
    fed = session.tokens[len(tok.encode(PROMPTS[0])):]
    session.rewind(session.position - 1)  # the last step again: its argmax is the token not fed
    generated = fed + [int(session.decode(fed[-1]).argmax())]
    assert len(generated) == stats.num_generated_tokens + 1
    assert set(partial_utf8_ids()) & set(generated), "the test needs byte tokens among the generated ones"
    assert "".join(pieces) == b"".join(tok.token_bytes(t) for t in generated).decode("utf-8", "replace")
    with pytest.raises(UnicodeDecodeError):
        et_runner = et().TextLLMRunner(str(files["bytes"]), str(files["tokenizer"]))
        run(et(), et_runner, PROMPTS[0], temperature=0.0, echo=False)


def test_generation_config_and_stats() -> None:
    ref = et()
    for kwargs in ({}, {"echo": False, "max_new_tokens": 7, "seq_len": 20, "temperature": 0.3, "num_bos": 1}):
        assert repr(px.GenerationConfig(**kwargs)) == repr(ref.GenerationConfig(**kwargs))
    for seq_len in (-1, 10, 50):
        for max_new in (-1, 5, 100):
            for occupied in (0, 12, 40):
                a = px.GenerationConfig(seq_len=seq_len, max_new_tokens=max_new)
                b = ref.GenerationConfig(seq_len=seq_len, max_new_tokens=max_new)
                assert a.resolve_max_new_tokens(32, occupied) == b.resolve_max_new_tokens(32, occupied)
    with pytest.raises(TypeError):
        px.GenerationConfig(1)  # type: ignore[misc]


def test_weights_in_a_ptd_file(tmp_path: Path) -> None:
    """export_llm's XNNPACK program with its weights in a .ptd
    (examples/llm/export_llama.py's xnnpack-ptd, vocabulary 64: ids the test
    tokenizer decodes to whole ASCII characters): TextLLMRunner(model,
    tokenizer, data_path) generates the text of ExecuTorch's runtime stepped
    greedily on the same files, and without the .ptd the program is refused.
    (ExecuTorch 1.5.1's own TextLLMRunner fails on this program: after the
    prefill, its first decode step feeds a token id outside the 64-token
    vocabulary, which the embedding refuses.)"""
    import torch
    from support.llm import llama_example

    ascii_prompt = "1+2=3,(A*B)/C"  # single characters, ids under 64
    tokenizer = write_tokenizer(tmp_path / "tok")
    prompt_ids = load_tokenizer(tokenizer).encode(ascii_prompt)
    assert max(prompt_ids) < 64
    pte, ptd = llama_example("xnnpack-ptd", max_seq_len=32)
    assert ptd is not None
    (tmp_path / "model.pte").write_bytes(pte)
    (tmp_path / "weights.ptd").write_bytes(ptd)
    runner = px.TextLLMRunner(str(tmp_path / "model.pte"), str(tokenizer), str(tmp_path / "weights.ptd"))
    pieces, stats = run(px, runner, ascii_prompt, max_new_tokens=12, temperature=0.0, echo=False)

    et()  # the custom operators registered
    from executorch.runtime import Runtime

    method = Runtime.get().load_program(tmp_path / "model.pte", data_path=tmp_path / "weights.ptd").load_method(
        "forward")
    (logits,) = method.execute([torch.tensor([prompt_ids]), torch.tensor([0])])
    pos, ids = len(prompt_ids), []
    for _ in range(stats.num_generated_tokens + 1):
        ids.append(int(logits.argmax()))
        (logits,) = method.execute([torch.tensor([[ids[-1]]]), torch.tensor([pos])])
        pos += 1
    assert "".join(pieces) == load_tokenizer(tokenizer).decode(ids) and len(set(ids)) > 2
    with pytest.raises(RuntimeError, match="Failed to create text llm runner.*tok_embeddings.weight.*data file"):
        px.TextLLMRunner(str(tmp_path / "model.pte"), str(tokenizer))
