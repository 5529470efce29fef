"""Tokenizers for pyexec.llm: the C++ tokenizers of pytorch-tokenizers, the
ones ExecuTorch's LLM runner links, tried in the runner's order (a Hugging
Face tokenizer.json, a tiktoken file, a SentencePiece model, a Llama 2 .bin),
so text encodes to the same ids as in ExecuTorch. Also an incremental
detokenizer and chat templates.

Needs the optional dependencies: `pip install pyexec[llm]`."""

from __future__ import annotations

import codecs
import json
import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

EXTRA_HINT = "install the optional LLM dependencies: pip install pyexec[llm]"


def _cpp() -> Any:
    try:
        import pytorch_tokenizers.pytorch_tokenizers_cpp as cpp
    except ImportError as exc:
        raise ImportError(f"pyexec.llm needs the pytorch-tokenizers package to read tokenizers ({EXTRA_HINT})") from exc
    return cpp


class Tokenizer:
    """A loaded tokenizer (see load_tokenizer)."""

    def __init__(self, impl: Any, kind: str, path: str) -> None:
        self._impl = impl
        self.kind = kind
        """"hf", "tiktoken", "sentencepiece" or "llama2c"."""
        self.path = path
        self.bos_id: int | None = int(impl.bos_tok())
        self.eos_id: int | None = int(impl.eos_tok())
        self.vocab_size: int = int(impl.vocab_size())
        self._bytes: dict[int, bytes] = {}

    def encode(self, text: str, bos: int = 0, eos: int = 0) -> list[int]:
        """The ids of `text`, after `bos` BOS ids and before `eos` EOS ids."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        try:
            return [int(t) for t in self._impl.encode(text, int(bos), int(eos))]
        except RuntimeError as exc:
            raise ValueError(f"the tokenizer could not encode the text: {exc}") from exc

    def token_bytes(self, token: int) -> bytes:
        """The bytes token `token` stands for (part of a UTF-8 character for
        byte-level tokens). Raises ValueError for an id the tokenizer does not
        have."""
        cached: bytes | None = self._bytes.get(token)
        if cached is not None:
            return cached
        if isinstance(token, bool) or not isinstance(token, int) or not 0 <= token < self.vocab_size:
            raise ValueError(f"token id {token!r} is outside the tokenizer's vocabulary (0 to {self.vocab_size})")
        try:
            text: str = self._impl.decode(token)
            piece = text.encode("utf-8", "surrogateescape")
        except UnicodeDecodeError as exc:  # a piece that is not whole UTF-8: the bytes themselves
            piece = bytes(exc.object)
        except RuntimeError as exc:
            raise ValueError(f"the tokenizer cannot decode token id {token}: {exc}") from exc
        self._bytes[token] = piece
        return piece

    def decode(self, ids: Sequence[int]) -> str:
        """The text of `ids` (bytes that do not form UTF-8 become U+FFFD)."""
        return b"".join(self.token_bytes(int(t)) for t in ids).decode("utf-8", "replace")

    def __repr__(self) -> str:
        return f"<pyexec.llm.Tokenizer {self.kind} {self.path!r} vocab_size={self.vocab_size}>"


def load_tokenizer(path: str | os.PathLike[str]) -> Tokenizer:
    """Loads a tokenizer file the way ExecuTorch's runner does: a Hugging Face
    tokenizer.json (or a directory holding one), else a tiktoken file, a
    SentencePiece .model, a Llama 2 tokenizer.bin.

    Raises FileNotFoundError for a missing path, ValueError for a file none
    of them reads, ImportError (naming `pip install pyexec[llm]`) without
    pytorch-tokenizers."""
    p = str(path)
    if not os.path.exists(p):
        raise FileNotFoundError(f"tokenizer file not found: {p}")
    cpp = _cpp()
    for kind, cls in (("hf", cpp.HFTokenizer), ("tiktoken", cpp.Tiktoken), ("sentencepiece", cpp.SPTokenizer),
                      ("llama2c", cpp.Llama2cTokenizer)):
        impl = cls()
        try:
            impl.load(p)
        except RuntimeError:
            continue
        if impl.is_loaded():
            return Tokenizer(impl, kind, p)
    raise ValueError(
        f"{p} is not a tokenizer pyexec can read (tried a Hugging Face tokenizer.json, tiktoken, "
        "SentencePiece and Llama 2 .bin formats)"
    )


class StreamDecoder:
    """Incremental detokenizer: push() one token at a time and get the text
    it completes. A UTF-8 character split across byte-level tokens is held
    back until its last byte arrives; bytes that can never form one come out
    as U+FFFD."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer
        self._decoder = codecs.getincrementaldecoder("utf-8")("replace")

    def push(self, token: int) -> str:
        return str(self._decoder.decode(self.tokenizer.token_bytes(int(token))))

    def flush(self) -> str:
        """What is still held back (an unfinished character, as U+FFFD), and a fresh start."""
        text = str(self._decoder.decode(b"", final=True))
        self._decoder.reset()
        return text


# ---- chat templates ------------------------------------------------------------

PLAIN_TEMPLATE = (
    "{% for message in messages %}"
    "{{ message['role'] }}: {{ message['content'] }}\n"
    "{% endfor %}"
    "{% if add_generation_prompt %}assistant: {% endif %}"
)
"""The template used when a tokenizer has none: `role: content` lines, then
`assistant: ` when a generation prompt is asked for."""


def find_chat_template(tokenizer_dir: str | os.PathLike[str] | None) -> str | None:
    """The chat template kept beside a tokenizer: chat_template.jinja, else
    the chat_template of tokenizer_config.json (the "default" one when it
    holds several). None when there is neither."""
    if tokenizer_dir is None:
        return None
    d = Path(tokenizer_dir)
    if (d / "chat_template.jinja").is_file():
        return (d / "chat_template.jinja").read_text(encoding="utf-8")
    config = d / "tokenizer_config.json"
    if not config.is_file():
        return None
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise ValueError(f"{config} is not valid JSON: {exc}") from exc
    template = data.get("chat_template") if isinstance(data, dict) else None
    if isinstance(template, list):
        named = {t.get("name"): t.get("template") for t in template if isinstance(t, dict)}
        template = named.get("default", next(iter(named.values()), None))
    return template if isinstance(template, str) else None


def _special_tokens(tokenizer_dir: str | os.PathLike[str] | None) -> dict[str, Any]:
    """bos_token and eos_token of tokenizer_config.json, for templates that use them."""
    out: dict[str, Any] = {}
    if tokenizer_dir is None:
        return out
    config = Path(tokenizer_dir) / "tokenizer_config.json"
    try:
        data = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return out
    if not isinstance(data, dict):
        return out
    for key in ("bos_token", "eos_token", "unk_token", "pad_token"):
        value = data.get(key)
        if isinstance(value, dict):
            value = value.get("content")
        if isinstance(value, str):
            out[key] = value
    return out


def apply_chat_template(
    messages: list[dict[str, Any]],
    template: str | None,
    tokenizer_dir: str | os.PathLike[str] | None,
    add_generation_prompt: bool = True,
) -> str:
    """Renders `messages` ([{"role": ..., "content": ...}, ...]) into a prompt.

    `template`: Jinja text in Hugging Face's style (rendered as transformers
    renders it: a sandboxed environment, trim_blocks and lstrip_blocks,
    `raise_exception`, the tokenizer config's bos_token/eos_token); None uses
    the template beside the tokenizer (find_chat_template), else
    PLAIN_TEMPLATE. Needs jinja2 (pip install pyexec[llm])."""
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise TypeError("messages must be a list of dicts with 'role' and 'content'")
    for i, m in enumerate(messages):
        if "role" not in m or "content" not in m:
            raise ValueError(f"message {i} needs a 'role' and a 'content'")
    try:
        import jinja2
        from jinja2.sandbox import ImmutableSandboxedEnvironment
    except ImportError as exc:
        raise ImportError(f"chat templates need jinja2 ({EXTRA_HINT})") from exc
    if template is None:
        template = find_chat_template(tokenizer_dir)
    if template is None:
        template = PLAIN_TEMPLATE

    def raise_exception(message: str) -> None:
        raise ValueError(f"the chat template refused the messages: {message}")

    def tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None,
               sort_keys: bool = False) -> str:
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt: str) -> str:
        import datetime

        return datetime.datetime.now().strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols"])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    try:
        compiled = env.from_string(template)
    except jinja2.TemplateSyntaxError as exc:
        raise ValueError(f"the chat template is not valid Jinja: {exc}") from exc
    return str(compiled.render(messages=messages, add_generation_prompt=add_generation_prompt,
                               **_special_tokens(tokenizer_dir)))
