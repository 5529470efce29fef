"""The OpenAI API's request checks and response shapes (chat completions,
completions, models), without the web framework: pyexec/llm/server.py binds
them to FastAPI. Every bad request becomes a ServeError that names the
parameter, in OpenAI's error body."""

from __future__ import annotations

import math
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Callable

from ._scheduler import DoneEvent, ServeError

ROLES = ("system", "developer", "user", "assistant", "tool")
MAX_STOPS = 4


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _type_error(name: str, expected: str, value: Any) -> ServeError:
    return ServeError(400, f"Invalid type for '{name}': expected {expected}, but got {_kind(value)} instead.",
                      param=name, code="invalid_type")


def _value_error(name: str, message: str, code: str = "invalid_value") -> ServeError:
    return ServeError(400, f"Invalid '{name}': {message}", param=name, code=code)


def _opt_bool(body: dict[str, Any], name: str, default: bool = False) -> bool:
    v = body.get(name)
    if v is None:
        return default
    if not isinstance(v, bool):
        raise _type_error(name, "a boolean", v)
    return v


def _opt_int(body: dict[str, Any], name: str) -> int | None:
    v = body.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, int):
        if isinstance(v, float) and v.is_integer():
            return int(v)
        raise _type_error(name, "an integer", v)
    return v


def _opt_number(body: dict[str, Any], name: str, lo: float, hi: float, *, lo_open: bool = False) -> float | None:
    v = body.get(name)
    if v is None:
        return None
    if isinstance(v, bool) or not isinstance(v, (int, float)):
        raise _type_error(name, "a number", v)
    v = float(v)
    if not math.isfinite(v) or v > hi or v < lo or (lo_open and v == lo):
        bound = f"greater than {lo:g}" if lo_open else f"at least {lo:g}"
        raise _value_error(name, f"expected a number {bound} and at most {hi:g}, but got {v:g} instead.")
    return v


@dataclass
class Prepared:
    """A checked request, ready for the scheduler."""
    kind: str                       # "chat" or "text"
    prompt: list[int]
    max_tokens: int
    temperature: float
    top_p: float
    top_k: int
    seed: int | None
    stop: list[str]
    stream: bool
    include_usage: bool
    echo: str = ""
    created: int = field(default_factory=lambda: int(time.time()))


@dataclass
class ServeModel:
    """What the OpenAI surface needs of the model: its id, context length,
    tokenizer and chat template."""
    model_id: str
    max_context: int
    vocab_size: int | None
    encode: Callable[[str], list[int]]          # text -> ids (no BOS added)
    decode: Callable[[Sequence[int]], str]
    render_chat: Callable[[list[dict[str, Any]]], str]
    bos_id: int | None = None

    # ---- shared parameters -------------------------------------------------

    def _check_model(self, body: dict[str, Any]) -> None:
        model = body.get("model")
        if model is None:
            return
        if not isinstance(model, str):
            raise _type_error("model", "a string", model)
        if model != self.model_id:
            raise ServeError(404, f"The model '{model}' does not exist. This server serves '{self.model_id}'.",
                             param="model", code="model_not_found")

    def _common(self, body: dict[str, Any], prompt: list[int], default_max: int | None, kind: str) -> Prepared:
        n = _opt_int(body, "n")
        if n is not None and n != 1:
            raise _value_error("n", f"this server generates one choice per request (n=1), got n={n}.",
                               code="unsupported_value")
        best_of = _opt_int(body, "best_of")
        if best_of is not None and best_of != 1:
            raise _value_error("best_of", f"only best_of=1 is supported, got {best_of}.", code="unsupported_value")
        for name in ("frequency_penalty", "presence_penalty"):
            v = _opt_number(body, name, -2.0, 2.0)
            if v:
                raise _value_error(name, f"penalties are not supported by this server (only 0), got {v:g}.",
                                   code="unsupported_value")
        if body.get("logit_bias"):
            raise ServeError(400, "'logit_bias' is not supported by this server.", param="logit_bias",
                             code="unsupported_parameter")
        lp = body.get("logprobs")
        if lp not in (None, False, 0):
            raise ServeError(400, "'logprobs' are not supported by this server.", param="logprobs",
                             code="unsupported_parameter")
        if body.get("top_logprobs") is not None:
            raise ServeError(400, "'top_logprobs' is not supported by this server.", param="top_logprobs",
                             code="unsupported_parameter")
        temperature = _opt_number(body, "temperature", 0.0, 2.0)
        top_p = _opt_number(body, "top_p", 0.0, 1.0, lo_open=True)
        top_k = _opt_int(body, "top_k")
        if top_k is not None and top_k < 0:
            raise _value_error("top_k", f"expected a value >= 0, but got {top_k} instead.")
        seed = _opt_int(body, "seed")
        stream = _opt_bool(body, "stream")
        include_usage = False
        so = body.get("stream_options")
        if so is not None:
            if not isinstance(so, dict):
                raise _type_error("stream_options", "an object", so)
            if not stream:
                raise _value_error("stream_options", "only allowed when 'stream' is true.")
            include_usage = _opt_bool(so, "include_usage")
        stop = self._stop(body.get("stop"))
        max_tokens = None
        for name in ("max_completion_tokens", "max_tokens"):
            v = _opt_int(body, name)
            if v is not None:
                if v < 1:
                    raise _value_error(name, f"integer below minimum value. Expected a value >= 1, but got {v} "
                                       "instead.", code="integer_below_min_value")
                max_tokens = v
                break
        if len(prompt) >= self.max_context:
            raise ServeError(400, f"This model's maximum context length is {self.max_context} tokens, but the "
                             f"prompt has {len(prompt)} tokens. Please shorten the prompt.",
                             param="messages" if kind == "chat" else "prompt", code="context_length_exceeded")
        room = self.max_context - len(prompt)
        if max_tokens is not None and max_tokens > room:
            raise ServeError(400, f"This model's maximum context length is {self.max_context} tokens. However, you "
                             f"requested {len(prompt) + max_tokens} tokens ({len(prompt)} in the prompt, {max_tokens} "
                             "in the completion). Please reduce the length of the prompt or completion.",
                             param="max_tokens", code="context_length_exceeded")
        if max_tokens is None:
            max_tokens = room if default_max is None else min(default_max, room)
        return Prepared(kind, prompt, max_tokens, 1.0 if temperature is None else temperature,
                        1.0 if top_p is None else top_p, top_k or 0, seed, stop, stream, include_usage)

    @staticmethod
    def _stop(value: Any) -> list[str]:
        if value is None:
            return []
        if isinstance(value, str):
            return [value] if value else []
        if not isinstance(value, list):
            raise _type_error("stop", "a string or an array of strings", value)
        if len(value) > MAX_STOPS:
            raise _value_error("stop", f"at most {MAX_STOPS} stop sequences, got {len(value)}.")
        for s in value:
            if not isinstance(s, str):
                raise _type_error("stop", "a string or an array of strings", s)
        return [s for s in value if s]

    def with_bos(self, ids: list[int]) -> list[int]:
        """The prompt's ids with the model's BOS first, unless the text (a
        chat template that writes it) already starts with it."""
        if self.bos_id is not None and (not ids or ids[0] != self.bos_id):
            return [self.bos_id, *ids]
        return ids

    # ---- /v1/chat/completions ----------------------------------------------

    def chat(self, body: Any) -> Prepared:
        if not isinstance(body, dict):
            raise ServeError(400, f"The request body must be a JSON object, got {_kind(body)}.")
        self._check_model(body)
        messages = body.get("messages")
        if messages is None:
            raise ServeError(400, "Missing required parameter: 'messages'.", param="messages",
                             code="missing_required_parameter")
        if not isinstance(messages, list):
            raise _type_error("messages", "an array", messages)
        if not messages:
            raise _value_error("messages", "expected an array with at least one message, but got an empty array.",
                               code="empty_array")
        plain: list[dict[str, Any]] = []
        for i, m in enumerate(messages):
            where = f"messages[{i}]"
            if not isinstance(m, dict):
                raise _type_error(where, "an object", m)
            role = m.get("role")
            if not isinstance(role, str):
                raise _type_error(f"{where}.role", "a string", role)
            if role not in ROLES:
                raise _value_error(f"{where}.role", f"expected one of {', '.join(ROLES)}, but got '{role}' instead.")
            plain.append({"role": role, "content": self._content(m.get("content"), f"{where}.content")})
        tools = body.get("tools")
        if tools and body.get("tool_choice") != "none":
            raise ServeError(400, "'tools' are not supported by this server (send tool_choice 'none' or no tools).",
                             param="tools", code="unsupported_parameter")
        rf = body.get("response_format")
        if rf is not None and not (isinstance(rf, dict) and rf.get("type") == "text"):
            raise ServeError(400, "'response_format' other than {\"type\": \"text\"} is not supported by this server.",
                             param="response_format", code="unsupported_parameter")
        try:
            text = self.render_chat(plain)
        except Exception as exc:  # noqa: BLE001 - a template error is the request's
            raise ServeError(400, f"The chat template failed on these messages: {exc}", param="messages",
                             code="invalid_chat_template_input") from None
        prompt = self.with_bos(self.encode(text))
        return self._common(body, prompt, None, "chat")

    @staticmethod
    def _content(content: Any, where: str) -> str:
        if content is None:
            return ""
        if isinstance(content, str):
            return content
        if isinstance(content, list):
            parts = []
            for j, part in enumerate(content):
                if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                    raise _value_error(f"{where}[{j}]", "only text parts ({\"type\": \"text\", \"text\": ...}) are "
                                       "supported.")
                parts.append(part["text"])
            return "".join(parts)
        raise _type_error(where, "a string or an array of content parts", content)

    # ---- /v1/completions ---------------------------------------------------------

    def completion(self, body: Any) -> Prepared:
        if not isinstance(body, dict):
            raise ServeError(400, f"The request body must be a JSON object, got {_kind(body)}.")
        self._check_model(body)
        if "prompt" not in body:
            raise ServeError(400, "Missing required parameter: 'prompt'.", param="prompt",
                             code="missing_required_parameter")
        p = body["prompt"]
        if isinstance(p, list) and len(p) == 1 and isinstance(p[0], (str, list)):
            p = p[0]                               # a batch of one
        if isinstance(p, str):
            prompt = self.with_bos(self.encode(p))
            echo_text = p
        elif isinstance(p, list) and p and all(isinstance(t, int) and not isinstance(t, bool) for t in p):
            bad = [t for t in p if t < 0 or (self.vocab_size is not None and t >= self.vocab_size)]
            if bad:
                raise _value_error("prompt", f"token id {bad[0]} is outside the vocabulary (0 to "
                                   f"{(self.vocab_size or 0) - 1}).")
            prompt = list(p)                       # token ids are taken as given
            echo_text = self.decode(prompt)
        elif isinstance(p, list) and len(p) > 1:
            raise _value_error("prompt", f"this server completes one prompt per request, got {len(p)}.",
                               code="unsupported_value")
        else:
            raise _type_error("prompt", "a string or an array of token ids", p)
        if body.get("suffix"):
            raise ServeError(400, "'suffix' is not supported by this server.", param="suffix",
                             code="unsupported_parameter")
        prepared = self._common(body, prompt, 16, "text")
        if _opt_bool(body, "echo"):
            prepared.echo = echo_text
        return prepared

    # ---- responses -------------------------------------------------------------

    def models(self) -> dict[str, Any]:
        return {"object": "list", "data": [self.model_card()]}

    def model_card(self) -> dict[str, Any]:
        return {"id": self.model_id, "object": "model", "created": 0, "owned_by": "pyexec"}


def usage(done: DoneEvent) -> dict[str, Any]:
    return {"prompt_tokens": done.prompt_tokens, "completion_tokens": done.completion_tokens,
            "total_tokens": done.prompt_tokens + done.completion_tokens,
            "prompt_tokens_details": {"cached_tokens": done.cached_tokens}}


def response(p: Prepared, rid: str, model: str, text: str, done: DoneEvent) -> dict[str, Any]:
    if p.kind == "chat":
        choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": text, "refusal": None},
                                  "logprobs": None, "finish_reason": done.finish_reason}
        obj = "chat.completion"
    else:
        choice = {"index": 0, "text": p.echo + text, "logprobs": None, "finish_reason": done.finish_reason}
        obj = "text_completion"
    return {"id": rid, "object": obj, "created": p.created, "model": model, "system_fingerprint": None,
            "choices": [choice], "usage": usage(done)}


def chunk(p: Prepared, rid: str, model: str, text: str | None, finish: str | None, *, role: bool = False,
          usage_of: DoneEvent | None = None) -> dict[str, Any]:
    """One streamed chunk: a text delta (or the role, or the finish reason),
    or with usage_of, the usage chunk (no choices)."""
    obj = "chat.completion.chunk" if p.kind == "chat" else "text_completion"
    out: dict[str, Any] = {"id": rid, "object": obj, "created": p.created, "model": model,
                           "system_fingerprint": None}
    if usage_of is not None:
        out["choices"] = []
        out["usage"] = usage(usage_of)
        return out
    if p.kind == "chat":
        delta: dict[str, Any] = {}
        if role:
            delta["role"] = "assistant"
            delta["content"] = ""
        if text is not None:
            delta["content"] = text
        out["choices"] = [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]
    else:
        out["choices"] = [{"index": 0, "text": text or "", "logprobs": None, "finish_reason": finish}]
    if p.include_usage:
        out["usage"] = None
    return out
