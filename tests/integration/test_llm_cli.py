"""`pyexec generate`: the streamed text is what ExecuTorch's TextLLMRunner
generates on the same files (greedy), --chat applies the tokenizer's chat
template, the statistics go to stderr, and bad arguments or a missing
optional dependency end with a clear message."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest
from support.llm_runner import llm_program, write_tokenizer

from pyexec.__main__ import main

pytestmark = pytest.mark.slow  # an export_llm export when not cached

TEMPLATE = ("{% for m in messages %}{{ m['role'][0] }}:{{ m['content'] }}\n{% endfor %}"
            "{% if add_generation_prompt %}a:{% endif %}")  # short: the context is 32 tokens


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    out = tmp_path_factory.mktemp("llm-cli")
    model = out / "model.pte"
    model.write_bytes(llm_program(whole_chars=True))
    return {"model": model, "tokenizer": write_tokenizer(out / "tok", chat_template=TEMPLATE)}


def executorch_text(files: dict[str, Path], prompt: str, n: int) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import executorch.extension.llm.runner as et
        import executorch.kernels.quantized  # noqa: F401
        from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401
    pieces: list[str] = []
    runner = et.TextLLMRunner(str(files["model"]), str(files["tokenizer"]))
    runner.generate(prompt, et.GenerationConfig(echo=False, max_new_tokens=n, temperature=0.0), pieces.append)
    return "".join(p for p in pieces if len(p) != 1 or p.isprintable() or p.isspace())


def generate(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["generate", *args])
    out, err = capsys.readouterr()
    return code, out, err


def test_greedy_text_is_executorchs(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = generate(capsys, str(files["model"]), "--tokenizer", str(files["tokenizer"]), "--prompt",
                              "Hello world", "--temperature", "0", "--max-new-tokens", "12", "-t", "1")
    assert code == 0, err
    assert out == executorch_text(files, "Hello world", 12) + "\n"
    assert "prompt: 7 tokens, first token after" in err and "1 thread" in err
    assert "generated: 11 more tokens in" in err


def test_chat_template_and_echo(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = generate(capsys, str(files["model"]), "--tokenizer", str(files["tokenizer"]), "--prompt",
                              "Hi", "--chat", "--system", "Be.", "--echo", "--temperature", "0",
                              "--max-new-tokens", "4")
    assert code == 0, err
    templated = "s:Be.\nu:Hi\na:"
    assert out.startswith(templated)
    assert out == templated + executorch_text(files, templated, 4) + "\n"


def test_seed_repeats(files: dict[str, Path], capsys: pytest.CaptureFixture[str]) -> None:
    args = [str(files["model"]), "--tokenizer", str(files["tokenizer"]), "--prompt", "Hello", "--temperature",
            "1", "--top-k", "40", "--seed", "11"]
    first = generate(capsys, *args)
    assert first[0] == 0 and generate(capsys, *args)[1] == first[1]


@pytest.mark.parametrize("extra,message", [
    (["--max-new-tokens", "0"], "--max-new-tokens must be at least 1"),
    (["--temperature", "2"], "--temperature must be from 0 to 1"),
    (["--top-p", "0"], "--top-p must be in"),
    (["--system", "x"], "--system needs --chat"),
    (["--threads", "0"], "--threads must be at least 1"),
])
def test_bad_arguments(files: dict[str, Path], capsys: pytest.CaptureFixture[str], extra: list[str],
                       message: str) -> None:
    code, out, err = generate(capsys, str(files["model"]), "--tokenizer", str(files["tokenizer"]), "--prompt",
                              "Hi", *extra)
    assert code == 2 and message in err


def test_unusable_files(files: dict[str, Path], capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, _, err = generate(capsys, str(files["model"]), "--tokenizer", str(tmp_path / "none.json"), "--prompt", "x")
    assert code == 1 and "Failed to load tokenizer from" in err and "none.json" in err
    code, _, err = generate(capsys, str(tmp_path / "none.pte"), "--tokenizer", str(files["tokenizer"]),
                            "--prompt", "x")
    assert code == 1 and "none.pte" in err
    long = " ".join(["The quick brown fox"] * 3)
    code, _, err = generate(capsys, str(files["model"]), "--tokenizer", str(files["tokenizer"]), "--prompt", long)
    assert code == 1 and "max_context_len 32" in err


def test_missing_extra_names_it(files: dict[str, Path], capsys: pytest.CaptureFixture[str],
                                monkeypatch: pytest.MonkeyPatch) -> None:
    for name in [m for m in sys.modules if m.startswith("pytorch_tokenizers")]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "pytorch_tokenizers", None)  # import fails
    code, _, err = generate(capsys, str(files["model"]), "--tokenizer", str(files["tokenizer"]), "--prompt", "x")
    assert code == 2 and "pip install pyexec[llm]" in err and "pytorch-tokenizers" in err
