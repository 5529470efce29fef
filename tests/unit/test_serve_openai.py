"""The OpenAI surface of `pyexec serve` without a model or a server: request
checks (each bad parameter named, in OpenAI's error body), the response and
chunk shapes, and the scheduler's stop-string hold-back, on a stand-in
tokenizer (one character a token)."""

from __future__ import annotations

from typing import Any

import pytest

from pyexec.llm._openai import ServeModel, chunk, response
from pyexec.llm._scheduler import DoneEvent, ServeError, _partial_stop_len, _stop_cut, common_prefix

CONTEXT = 64


def model(bos: int | None = 1) -> ServeModel:
    return ServeModel(model_id="m", max_context=CONTEXT, vocab_size=300,
                      encode=lambda text: [ord(c) % 300 for c in text],
                      decode=lambda ids: "".join(chr(i) for i in ids),
                      render_chat=lambda msgs: "".join(f"{m['role']}: {m['content']}\n" for m in msgs) + "assistant: ",
                      bos_id=bos)


MSGS = [{"role": "user", "content": "hi"}]


def refused(body: Any, *, kind: str = "chat") -> ServeError:
    with pytest.raises(ServeError) as e:
        model().chat(body) if kind == "chat" else model().completion(body)
    err = e.value.body()["error"]
    assert set(err) == {"message", "type", "param", "code"} and err["message"]
    return e.value


def test_chat_prompt_and_defaults() -> None:
    p = model().chat({"messages": MSGS})
    text = "user: hi\nassistant: "
    assert p.prompt == [1, *[ord(c) for c in text]]
    assert (p.max_tokens, p.temperature, p.top_p, p.top_k, p.seed, p.stream) == (CONTEXT - len(p.prompt), 1.0, 1.0,
                                                                                   0, None, False)
    assert model(bos=None).chat({"messages": MSGS}).prompt == [ord(c) for c in text]
    p = model().chat({"model": "m", "messages": [{"role": "user", "content": [{"type": "text", "text": "a"},
                                                                            {"type": "text", "text": "b"}]}],
                      "max_completion_tokens": 5, "temperature": 0, "stop": "x", "seed": 3, "stream": True,
                      "stream_options": {"include_usage": True}})
    assert p.prompt[-len("user: ab\nassistant: "):] == [ord(c) for c in "user: ab\nassistant: "]
    assert (p.max_tokens, p.temperature, p.stop, p.seed, p.include_usage) == (5, 0.0, ["x"], 3, True)


def test_completion_prompts() -> None:
    assert model().completion({"prompt": "ab"}).prompt == [1, 97, 98]
    assert model().completion({"prompt": [5, 6]}).prompt == [5, 6]            # ids as given
    assert model().completion({"prompt": [[5, 6]]}).prompt == [5, 6]          # a batch of one
    assert model().completion({"prompt": "ab"}).max_tokens == 16               # OpenAI's default
    assert model().completion({"prompt": "ab", "echo": True}).echo == "ab"


@pytest.mark.parametrize("body, param, code", [
    ({"messages": "hi"}, "messages", "invalid_type"),
    ({}, "messages", "missing_required_parameter"),
    ({"messages": []}, "messages", "empty_array"),
    ({"messages": [{"role": "robot", "content": "x"}]}, "messages[0].role", "invalid_value"),
    ({"messages": [{"role": "user", "content": 3}]}, "messages[0].content", "invalid_type"),
    ({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]}, "messages[0].content[0]", "invalid_value"),
    ({"messages": MSGS, "temperature": "hot"}, "temperature", "invalid_type"),
    ({"messages": MSGS, "temperature": 2.5}, "temperature", "invalid_value"),
    ({"messages": MSGS, "top_p": 0}, "top_p", "invalid_value"),
    ({"messages": MSGS, "top_k": -1}, "top_k", "invalid_value"),
    ({"messages": MSGS, "max_tokens": "5"}, "max_tokens", "invalid_type"),
    ({"messages": MSGS, "max_tokens": 0}, "max_tokens", "integer_below_min_value"),
    ({"messages": MSGS, "max_completion_tokens": -2}, "max_completion_tokens", "integer_below_min_value"),
    ({"messages": MSGS, "max_tokens": 60}, "max_tokens", "context_length_exceeded"),
    ({"messages": [{"role": "user", "content": "x" * 70}]}, "messages", "context_length_exceeded"),
    ({"messages": MSGS, "n": 2}, "n", "unsupported_value"),
    ({"messages": MSGS, "stop": 3}, "stop", "invalid_type"),
    ({"messages": MSGS, "stop": ["a", "b", "c", "d", "e"]}, "stop", "invalid_value"),
    ({"messages": MSGS, "stream": "yes"}, "stream", "invalid_type"),
    ({"messages": MSGS, "stream_options": {"include_usage": True}}, "stream_options", "invalid_value"),
    ({"messages": MSGS, "presence_penalty": 0.5}, "presence_penalty", "unsupported_value"),
    ({"messages": MSGS, "logprobs": True}, "logprobs", "unsupported_parameter"),
    ({"messages": MSGS, "tools": [{"type": "function"}]}, "tools", "unsupported_parameter"),
    ({"messages": MSGS, "response_format": {"type": "json_object"}}, "response_format", "unsupported_parameter"),
])
def test_chat_refusals_name_the_parameter(body: dict[str, Any], param: str, code: str) -> None:
    e = refused(body)
    assert (e.status, e.param, e.code) == (400, param, code), e.message


def test_other_refusals() -> None:
    e = refused({"model": "gpt-4", "messages": MSGS})
    assert (e.status, e.code, e.param) == (404, "model_not_found", "model") and "gpt-4" in e.message
    assert refused([1, 2]).status == 400
    assert refused({"prompt": [1, 300]}, kind="text").param == "prompt"
    assert refused({"prompt": ["a", "b"]}, kind="text").code == "unsupported_value"
    assert refused({"prompt": 3}, kind="text").code == "invalid_type"
    assert refused({}, kind="text").code == "missing_required_parameter"
    e = refused({"prompt": [5] * 40, "max_tokens": 30}, kind="text")
    assert e.code == "context_length_exceeded" and "70 tokens (40 in the prompt, 30 in the completion)" in e.message
    # what a model's template raises is the request's fault, named
    bad = model()
    bad.render_chat = lambda msgs: (_ for _ in ()).throw(ValueError("no system role"))
    with pytest.raises(ServeError) as exc:
        bad.chat({"messages": MSGS})
    assert exc.value.code == "invalid_chat_template_input" and "no system role" in exc.value.message


def test_response_and_chunk_shapes() -> None:
    done = DoneEvent("length", 5, 3, 2, [7, 8, 9], False, False, "exact_prefix", 0.0, 0.0)
    p = model().chat({"messages": MSGS, "stream": True, "stream_options": {"include_usage": True}})
    r = response(p, "chatcmpl-1", "m", "abc", done)
    assert r["object"] == "chat.completion" and r["choices"][0]["message"] == {"role": "assistant", "content": "abc",
                                                                                "refusal": None}
    assert r["usage"] == {"prompt_tokens": 5, "completion_tokens": 3, "total_tokens": 8,
                          "prompt_tokens_details": {"cached_tokens": 2}}
    first = chunk(p, "c", "m", None, None, role=True)
    assert first["choices"][0]["delta"] == {"role": "assistant", "content": ""} and first["usage"] is None
    last = chunk(p, "c", "m", None, "length")
    assert last["choices"][0]["delta"] == {} and last["choices"][0]["finish_reason"] == "length"
    u = chunk(p, "c", "m", None, None, usage_of=done)
    assert u["choices"] == [] and u["usage"]["total_tokens"] == 8
    t = model().completion({"prompt": "ab", "echo": True})
    assert response(t, "cmpl-1", "m", "cd", done)["choices"][0]["text"] == "abcd"
    assert chunk(t, "c", "m", "x", None)["object"] == "text_completion"


def test_stop_holdback() -> None:
    assert _partial_stop_len("hello wo", ["world"]) == 2      # "wo" may become "world"
    assert _partial_stop_len("hello", ["world"]) == 0
    assert _partial_stop_len("abcab", ["abx", "bca"]) == 2     # the longest tail that starts a stop
    assert _partial_stop_len("x</", ["</s>"]) == 2
    assert _stop_cut("one two three", ["three", "two"]) == 4
    assert _stop_cut("one", ["two"]) is None
    assert common_prefix([1, 2, 3], [1, 2, 4, 5]) == 2 and common_prefix([], [1]) == 0
