"""pyexec.llm's engine (LLMProgram, Session, Sampler) and tokenizer layer on
programs export_llm writes (tiny random-weight Llama and Qwen3, dynamic and
static shapes, a prefill chunk shorter than the cache) and on pyexec's demo
decoder (caller-owned KV caches): every step's logits against ExecuTorch's
runtime stepped the same way on the same file, the tokenizer against
Hugging Face's tokenizers on the same tokenizer.json."""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from support.export import assert_close
from support.llm_runner import SENTENCES, VOCAB, llm_program, write_tokenizer

import pyexec
from pyexec.llm import LLMProgram, Sampler, StreamDecoder, apply_chat_template, load_tokenizer

pytestmark = pytest.mark.slow  # export_llm exports when not cached

PROMPT = [0, 17, 99, 3, 42, 250, 7]
TOL = {"rtol": 0.0, "atol": 1e-4}


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("llm-engine")
    paths = {"tokenizer": write_tokenizer(out / "tok")}
    for name, kw in {
        "dynamic": {},
        "static": {"dynamic": False},
        "qwen3": {"model_class": "qwen3_0_6b"},
        "chunked": {"max_seq_len": 8, "max_context_len": 32},
    }.items():
        paths[name] = out / f"{name}.pte"
        paths[name].write_bytes(llm_program(**kw))
    return paths


def executorch_forward(pte: Path) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import executorch.kernels.quantized  # noqa: F401
        from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401
        from executorch.runtime import Runtime
    return Runtime.get().load_program(pte).load_method("forward")


def executorch_steps(pte: Path, prompt: Sequence[int], chunk: int, steps: int) -> tuple[list[int], list[torch.Tensor]]:
    """Greedy generation in ExecuTorch's runtime: the prompt `chunk` tokens a
    call, then one token a call; each call's last-position logits."""
    method = executorch_forward(pte)
    logits: list[torch.Tensor] = []
    pos = 0
    for i in range(0, len(prompt), chunk):
        part = list(prompt[i:i + chunk])
        (out,) = method.execute([torch.tensor([part]), torch.tensor([pos])])
        pos += len(part)
    logits.append(out.reshape(-1, out.shape[-1])[-1])
    tokens = []
    for _ in range(steps):
        tokens.append(int(logits[-1].argmax()))
        (out,) = method.execute([torch.tensor([[tokens[-1]]]), torch.tensor([pos])])
        pos += 1
        logits.append(out.reshape(-1, out.shape[-1])[-1])
    return tokens, logits


@pytest.mark.parametrize("name,chunk", [("dynamic", 31), ("static", 1), ("qwen3", 31), ("chunked", 7)])
def test_greedy_steps_match_executorch(files: dict[str, Path], name: str, chunk: int) -> None:
    llm = LLMProgram(files[name])
    assert llm.prefill_chunk == chunk  # TextPrefiller's choice: parallel with dynamic shapes, else one a call
    prompt = PROMPT * 2 if name == "chunked" else PROMPT  # 14 tokens: two chunks of 7 (the token bound is 7)
    expected_tokens, expected_logits = executorch_steps(files[name], prompt, chunk, 12)
    session = llm.new_session()
    got = [session.prefill(prompt)]
    tokens = []
    for _ in range(12):
        tokens.append(Sampler().sample(got[-1]))
        got.append(session.decode(tokens[-1]))
    assert tokens == expected_tokens
    for step, (g, e) in enumerate(zip(got, expected_logits)):
        assert g.dtype == np.float32 and g.shape == (VOCAB,)
        assert_close(torch.from_numpy(g), e, what=f"{name}: logits of step {step}", **TOL)
    assert session.position == len(prompt) + 12 and session.tokens == prompt + tokens


def test_metadata_as_executorch_reads_it(files: dict[str, Path]) -> None:
    llm = LLMProgram(files["chunked"])
    assert (llm.max_seq_len, llm.max_context_len, llm.vocab_size) == (8, 32, VOCAB)
    assert llm.use_kv_cache and llm.enable_dynamic_shape and llm.use_sdpa_with_kv_cache
    assert llm.bos_id is None and llm.eos_ids == set()  # export_llm writes neither without a tokenizer config
    static = LLMProgram(files["static"])
    assert not static.enable_dynamic_shape and static.max_tokens_per_call == 1


def test_fork_and_rewind_are_independent(files: dict[str, Path]) -> None:
    llm = LLMProgram(files["dynamic"])
    a = llm.new_session()
    a.prefill(PROMPT)
    b = a.fork()
    la = a.decode(5)
    lb = b.decode(9)
    fresh = llm.new_session()  # the same calls in a session of its own
    fresh.prefill(PROMPT)
    np.testing.assert_array_equal(fresh.decode(9), lb)
    fresh.reset()
    fresh.prefill(PROMPT)
    np.testing.assert_array_equal(fresh.decode(5), la)
    assert not np.array_equal(la, lb)
    a.rewind(len(PROMPT))  # forget token 5, take 9 instead
    np.testing.assert_array_equal(a.decode(9), lb)
    assert a.tokens == b.tokens == PROMPT + [9]
    with pytest.raises(ValueError, match="rewind to position 99"):
        a.rewind(99)


def test_demo_decoder_caller_owned_caches() -> None:
    """pyexec's demo decoder takes its KV caches as inputs: the session owns
    them, fork() copies them, and greedy decoding gives `pyexec demo`'s
    tokens (the same loop written out)."""
    from pyexec.__main__ import DEMO_MODEL

    llm = LLMProgram(DEMO_MODEL)
    assert llm.layout == "caller-owned cache" and len(llm.cache_inputs) == 4
    method = pyexec.load(DEMO_MODEL).load_method("forward", output_type="numpy")
    caches = [np.zeros(i.sizes, np.float32) for i in method.meta.inputs[2:] if i is not None]
    token, expected = 1, []
    for pos in range(10):
        out = method.execute([np.array([[token]]), np.array([pos]), *caches])
        token = int(out[-1].argmax())
        expected.append(token)
    session = llm.new_session()
    logits = session.prefill([1])
    got = []
    for _ in range(10):
        got.append(int(logits.argmax()))
        if len(got) == 5:
            fork = session.fork()
        logits = session.decode(got[-1])
    assert got == expected
    logits = fork.decode(got[4])
    for t in got[5:]:
        assert int(logits.argmax()) == t
        logits = fork.decode(t)


def test_errors_name_what_is_wrong(files: dict[str, Path]) -> None:
    llm = LLMProgram(files["dynamic"])
    s = llm.new_session()
    with pytest.raises(ValueError, match="at least one token"):
        s.prefill([])
    with pytest.raises(ValueError, match=f"token id {VOCAB} is outside the vocabulary"):
        s.prefill([1, VOCAB])
    with pytest.raises(ValueError, match="token id -1"):
        s.prefill([-1])
    with pytest.raises(ValueError, match="33 cache positions.*holds 32"):
        s.prefill(list(range(33)))
    assert s.position == 0  # nothing was fed
    s.prefill(list(range(30)))
    s.decode(1)
    s.decode(2)
    with pytest.raises(ValueError, match="33 cache positions"):
        s.decode(3)
    with pytest.raises(pyexec.FileError, match="missing.pte"):
        LLMProgram(files["dynamic"].with_name("missing.pte"))


def test_sampler() -> None:
    rng = np.random.default_rng(0)
    logits = rng.standard_normal(VOCAB).astype(np.float32)
    assert Sampler().sample(logits) == int(np.argmax(logits))
    ties = np.zeros(5, np.float32)
    ties[[1, 3]] = 2.0
    assert Sampler().sample(ties) == 1  # the lowest id among equal maxima
    a = [Sampler(0.8, top_k=20, top_p=0.9, seed=7).sample(logits) for _ in range(3)]
    s1, s2 = Sampler(0.8, top_k=20, top_p=0.9, seed=7), Sampler(0.8, top_k=20, top_p=0.9, seed=7)
    seq1 = [s1.sample(logits) for _ in range(50)]
    seq2 = [s2.sample(logits) for _ in range(50)]
    assert seq1 == seq2 and a == [seq1[0]] * 3
    assert len(set(seq1)) > 1  # it does sample
    top20 = set(np.argsort(-logits)[:20].tolist())
    assert set(seq1) <= top20
    assert {Sampler(1.0, top_k=1, seed=i).sample(logits) for i in range(10)} == {int(np.argmax(logits))}
    assert {Sampler(1.0, top_p=1e-6, seed=i).sample(logits) for i in range(10)} == {int(np.argmax(logits))}
    for bad in ({"temperature": -1.0}, {"top_k": -1}, {"top_p": 0.0}, {"top_p": 1.5}, {"temperature": float("nan")}):
        with pytest.raises(ValueError):
            Sampler(**bad)


def test_tokenizer_matches_hugging_face(files: dict[str, Path]) -> None:
    from tokenizers import Tokenizer as HF

    hf = HF.from_file(str(files["tokenizer"]))
    tok = load_tokenizer(files["tokenizer"])
    assert tok.kind == "hf" and tok.vocab_size == VOCAB
    for text in SENTENCES + ["unseen words \u00e9\u00e8 \u4e2d"]:
        ids = tok.encode(text)
        assert ids == hf.encode(text).ids
        assert tok.decode(ids) == hf.decode(ids) == text
    # pytorch-tokenizers' HFTokenizer (ExecuTorch's) leaves BOS/EOS to the tokenizer.json's post-processor
    assert tok.encode("Hello", bos=1, eos=1) == hf.encode("Hello").ids
    assert (tok.bos_id, tok.eos_id) == (0, 1)


def test_stream_decoder_holds_split_characters(files: dict[str, Path]) -> None:
    tok = load_tokenizer(files["tokenizer"])
    text = "na\u00efve \u65e5\u672c \U0001F600!"
    ids = tok.encode(text)
    split = [i for i in ids if len(tok.token_bytes(i)) == 1 and tok.token_bytes(i)[0] >= 0x80]
    assert split, "the test needs a character split across byte tokens"
    stream = StreamDecoder(tok)
    pieces = [stream.push(i) for i in ids]
    assert "".join(pieces) + stream.flush() == text
    assert "" in pieces and all("\ufffd" not in p for p in pieces)
    # an unfinished character at the end comes out as U+FFFD on flush
    stream.push(tok.encode("\u65e5")[0])
    assert stream.flush() == "\ufffd"


def test_tokenizer_errors(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="missing.json"):
        load_tokenizer(tmp_path / "missing.json")
    bad = tmp_path / "tokenizer.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not a tokenizer pyexec can read"):
        load_tokenizer(bad)
    tok = load_tokenizer(write_tokenizer(tmp_path / "ok"))
    with pytest.raises(ValueError, match=f"token id {VOCAB}"):
        tok.decode([VOCAB])


def test_chat_template(tmp_path: Path) -> None:
    template = ("{{ bos_token }}{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}</s>{% endfor %}"
                "{% if add_generation_prompt %}<assistant>{% endif %}")
    write_tokenizer(tmp_path, chat_template=template)
    msgs = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Hi"}]
    assert apply_chat_template(msgs, None, tmp_path) == (
        "<|begin_of_text|><system>Be brief.</s><user>Hi</s><assistant>")
    assert apply_chat_template(msgs, None, tmp_path, add_generation_prompt=False).endswith("<user>Hi</s>")
    assert apply_chat_template(msgs, None, None) == "system: Be brief.\nuser: Hi\nassistant: "
    with pytest.raises(ValueError, match="refused the messages: no"):
        apply_chat_template(msgs, "{{ raise_exception('no') }}", None)
    with pytest.raises(ValueError, match="not valid Jinja"):
        apply_chat_template(msgs, "{% for %}", None)
    with pytest.raises(ValueError, match="message 0 needs"):
        apply_chat_template([{"role": "user"}], None, None)


def test_program_without_kv_cache() -> None:
    """export_llm without use_kv_cache: forward(tokens) over the whole
    sequence every call, as ExecuTorch's runner feeds it."""
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        pte = Path(d) / "nokv.pte"
        pte.write_bytes(llm_program(kv_cache=False, sdpa=False))
        llm = LLMProgram(pte)
        assert llm.layout == "no cache" and not llm.use_kv_cache
        method = executorch_forward(pte)
        session = llm.new_session()
        logits = session.prefill(PROMPT)
        tokens = list(PROMPT)
        for step in range(8):
            (expected,) = method.execute([torch.tensor([tokens])])
            assert_close(torch.from_numpy(logits), expected.reshape(-1, VOCAB)[-1], what=f"step {step}", **TOL)
            tokens.append(int(expected.reshape(-1, VOCAB)[-1].argmax()))
            logits = session.decode(tokens[-1])
        assert session.tokens == tokens
        with pytest.raises(ValueError, match="exceed the 31 the program takes in one call"):
            session.prefill(list(range(17)))  # 15 held + 17 = 32, over the token input's 31
