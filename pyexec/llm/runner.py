"""ExecuTorch's LLM runner API (executorch.extension.llm.runner) over
pyexec: GenerationConfig, Stats and TextLLMRunner with the same names,
arguments, defaults, return values and exceptions, so code written for
ExecuTorch's runner runs with its import changed to pyexec.llm.

What ExecuTorch's TextLLMRunner does, step by step, and so this one:
generate(prompt) encodes the prompt (config.num_bos / num_eos passed to the
tokenizer), feeds it after what the runner already holds (a conversation
continues until reset()), takes the first new token greedily from the
prompt's logits, then decodes up to max_new_tokens - 1 more (sampled at
config.temperature), calling token_callback with each token's text and
stopping at an end-of-sequence id (the program's get_eos_ids, else the
tokenizer's EOS) or at stop(). prefill(prompt) feeds a prompt without
generating; a following generate("") continues from it.

pyexec's differences, each documented in docs/llm.md: temperature sampling
takes GenerationConfig's top_k, top_p (ExecuTorch's fixed 0.9 by default)
and seed (reproducible; ExecuTorch seeds from the clock); the token callback
gets whole UTF-8 characters (a character split across byte-level tokens is
held back until complete, where ExecuTorch's binding raises
UnicodeDecodeError); nothing is printed to stdout; get_vocab_size() returns
the program's vocabulary size (ExecuTorch's binding returns -1); errors say
what failed after "Generation failed: ", "Prefill failed: ", ..."""

from __future__ import annotations

import copy
import math
import os
import threading
import time
from collections.abc import Callable
from typing import Any, Optional

import numpy as np

from .._errors import Error
from ._engine import LLMProgram, Session
from ._sampling import Sampler
from ._tokenizer import StreamDecoder, Tokenizer, load_tokenizer

TokenCallback = Optional[Callable[[str], None]]
StatsCallback = Optional[Callable[["Stats"], None]]


def time_in_ms() -> int:
    """Wall-clock milliseconds, as ExecuTorch's runner stamps its Stats."""
    return time.time_ns() // 1_000_000


def _f32(x: float) -> float:
    """`x` rounded to float32, as ExecuTorch's GenerationConfig stores its temperature."""
    return float(np.float32(x))


class GenerationConfig:
    """Settings of one generate() call (ExecuTorch's GenerationConfig, all
    keyword arguments). pyexec adds top_k, top_p and seed, used when
    temperature > 0."""

    def __init__(
        self,
        *,
        echo: bool = True,
        max_new_tokens: int = -1,
        warming: bool = False,
        seq_len: int = -1,
        temperature: float = 0.8,
        num_bos: int = 0,
        num_eos: int = 0,
        top_k: int = 0,
        top_p: float = 0.9,
        seed: int | None = None,
    ) -> None:
        self.echo = bool(echo)
        """Pass the prompt to the token callback first."""
        self.max_new_tokens = int(max_new_tokens)
        """At most this many new tokens (-1: as many as the context holds)."""
        self.warming = bool(warming)
        """A warm-up run (ExecuTorch logs less; nothing else changes)."""
        self.seq_len = int(seq_len)
        """At most this many tokens in the context, prompt included (-1: the program's)."""
        self.temperature = _f32(temperature)
        """0: greedy; up to 1: softmax(logits / temperature) sampling."""
        self.num_bos = int(num_bos)
        self.num_eos = int(num_eos)
        self.top_k = int(top_k)
        """pyexec: sample among the k most likely tokens only (0: all)."""
        self.top_p = float(top_p)
        """pyexec: sample from the smallest set whose probability reaches top_p (ExecuTorch's sampler: 0.9)."""
        self.seed = seed
        """pyexec: the sampler's seed (None: a fresh one per generate call)."""

    def resolve_max_new_tokens(self, max_context_len: int, num_tokens_occupied: int) -> int:
        """How many tokens a generation may add: ExecuTorch's rule over
        seq_len, max_new_tokens, the context length and the positions already
        taken (never negative)."""
        max_context_len, occupied = int(max_context_len), int(num_tokens_occupied)
        if self.seq_len == -1 and self.max_new_tokens == -1:
            result = max_context_len - occupied
        elif self.seq_len == -1:
            result = min(self.max_new_tokens, max_context_len - occupied)
        elif self.max_new_tokens == -1:
            result = min(self.seq_len, max_context_len) - occupied
        else:
            result = min(min(self.seq_len, max_context_len) - occupied, self.max_new_tokens)
        return max(0, result)

    def __repr__(self) -> str:
        return (f"<GenerationConfig max_new_tokens={self.max_new_tokens} seq_len={self.seq_len} "
                f"temperature={self.temperature:f} echo={self.echo} warming={self.warming}>")


class Stats:
    """Timings and counts of the last generate() (ExecuTorch's Stats): wall-
    clock milliseconds (SCALING_FACTOR_UNITS_PER_SECOND per second) stamped
    at the same points as ExecuTorch's runner stamps them:

    - model_load_start_ms / model_load_end_ms: loading the method, at the first generate or prefill
    - inference_start_ms: generate() begins (before the prompt is encoded)
    - prompt_eval_end_ms, first_token_ms: the prompt is prefilled and the first token chosen
    - inference_end_ms: the last token is out
    - model_execution_start_ms / _end_ms: the last forward call;
      aggregate_model_execution_time_ms: all of them
    - aggregate_sampling_time_ms: time spent choosing tokens after the first
    - num_prompt_tokens; num_generated_tokens: the tokens decoded after the
      first (the first comes from the prefill, as ExecuTorch counts)."""

    SCALING_FACTOR_UNITS_PER_SECOND: int = 1000

    def __init__(self) -> None:
        self.model_load_start_ms = 0
        self.model_load_end_ms = 0
        self.reset(all_stats=True)

    def on_sampling_begin(self) -> None:
        self._sampling_start = time_in_ms()

    def on_sampling_end(self) -> None:
        self.aggregate_sampling_time_ms += time_in_ms() - self._sampling_start
        self._sampling_start = 0

    def on_model_execution_begin(self) -> None:
        self.model_execution_start_ms = time_in_ms()

    def on_model_execution_end(self) -> None:
        self.model_execution_end_ms = time_in_ms()
        self.aggregate_model_execution_time_ms += self.model_execution_end_ms - self.model_execution_start_ms

    def reset(self, all_stats: bool = False) -> None:
        """Zeroes everything but the model load times (those too with all_stats)."""
        if all_stats:
            self.model_load_start_ms = 0
            self.model_load_end_ms = 0
        self.inference_start_ms = 0
        self.token_encode_end_ms = 0
        self.model_execution_start_ms = 0
        self.model_execution_end_ms = 0
        self.prompt_eval_end_ms = 0
        self.first_token_ms = 0
        self.inference_end_ms = 0
        self.aggregate_sampling_time_ms = 0
        self.aggregate_model_execution_time_ms = 0
        self.num_prompt_tokens = 0
        self.num_generated_tokens = 0
        self._sampling_start = 0

    def to_json_string(self) -> str:
        """The JSON ExecuTorch's runner reports ("PyTorchObserver ..." lines):
        the same keys, order and number format (rates with 6 significant digits)."""
        parts: list[str] = []
        scale = self.SCALING_FACTOR_UNITS_PER_SECOND
        prefill_ms = self.prompt_eval_end_ms - self.inference_start_ms
        if prefill_ms > 0:
            parts.append(f'"prefill_token_per_sec":{self.num_prompt_tokens / prefill_ms * scale:g}')
        decode_ms = self.inference_end_ms - self.prompt_eval_end_ms
        if decode_ms > 0:
            parts.append(f'"decode_token_per_sec":{self.num_generated_tokens / decode_ms * scale:g}')
        for key, value in (
            ("prompt_tokens", self.num_prompt_tokens),
            ("generated_tokens", self.num_generated_tokens),
            ("model_load_start_ms", self.model_load_start_ms),
            ("model_load_end_ms", self.model_load_end_ms),
            ("inference_start_ms", self.inference_start_ms),
            ("inference_end_ms", self.inference_end_ms),
            ("model_execution_start_ms", self.model_execution_start_ms),
            ("model_execution_end_ms", self.model_execution_end_ms),
            ("prompt_eval_end_ms", self.prompt_eval_end_ms),
            ("first_token_ms", self.first_token_ms),
            ("aggregate_sampling_time_ms", self.aggregate_sampling_time_ms),
            ("aggregate_model_execution_time_ms", self.aggregate_model_execution_time_ms),
            ("SCALING_FACTOR_UNITS_PER_SECOND", scale),
        ):
            parts.append(f'"{key}":{int(value)}')
        return "{" + ",".join(parts) + "}"

    def report(self) -> str:
        """The summary ExecuTorch's runner logs after a generation, as text lines."""
        scale = self.SCALING_FACTOR_UNITS_PER_SECOND

        def rate(n: int, ms: int) -> float:
            return n / ms * scale if ms > 0 else 0.0

        total = self.inference_end_ms - self.inference_start_ms
        prompt = self.prompt_eval_end_ms - self.inference_start_ms
        decode = self.inference_end_ms - self.prompt_eval_end_ms
        lines = [
            f"Prompt tokens: {self.num_prompt_tokens}    Generated tokens: {self.num_generated_tokens}",
            f"Model load time: {(self.model_load_end_ms - self.model_load_start_ms) / scale:.3f} s",
            f"Total inference time: {total / scale:.3f} s, {rate(self.num_generated_tokens, total):.2f} tokens/s",
            f"  Prompt evaluation: {prompt / scale:.3f} s, {rate(self.num_prompt_tokens, prompt):.2f} tokens/s",
            f"  Generated {self.num_generated_tokens} tokens: {decode / scale:.3f} s, "
            f"{rate(self.num_generated_tokens, decode):.2f} tokens/s",
            f"Time to first generated token: {(self.first_token_ms - self.inference_start_ms) / scale:.3f} s",
            f"Sampling time over {self.num_prompt_tokens + self.num_generated_tokens} tokens: "
            f"{self.aggregate_sampling_time_ms / scale:.3f} s",
        ]
        return "\n".join(lines)

    def __repr__(self) -> str:
        tps = 0.0
        if self.inference_end_ms > self.inference_start_ms:
            tps = self.num_generated_tokens * self.SCALING_FACTOR_UNITS_PER_SECOND / (
                self.inference_end_ms - self.inference_start_ms)
        return (f"<Stats num_prompt_tokens={self.num_prompt_tokens} num_generated_tokens="
                f"{self.num_generated_tokens} tokens_per_second={tps:f}>")


def _check_path(what: str, path: Any) -> str:
    if not isinstance(path, (str, os.PathLike)):
        raise TypeError(f"{what} must be a str path, got {type(path).__name__}")
    return os.fspath(path)


class _Runner:
    """What TextLLMRunner and MultimodalRunner share: the program and its
    metadata, the tokenizer, one session (the conversation), the decode
    loop, stop() and reset()."""

    _kind = "runner"
    _forward = "forward"

    def __init__(self, model_path: str, tokenizer_path: str, data_path: str | None = None) -> None:
        model_path = _check_path("model_path", model_path)
        tokenizer_path = _check_path("tokenizer_path", tokenizer_path)
        if data_path is not None:
            data_path = _check_path("data_path", data_path)
        try:
            self.tokenizer: Tokenizer = load_tokenizer(tokenizer_path)
        except ImportError:
            raise
        except (OSError, ValueError) as exc:
            raise RuntimeError(f"Failed to load tokenizer from: {tokenizer_path} ({exc})") from exc
        try:
            self.llm = LLMProgram(model_path, data_path, method=self._forward)
        except (Error, OSError, ValueError) as exc:
            raise RuntimeError(f"Failed to create {self._kind} with model: {model_path} ({exc})") from exc
        if not self.llm.has_max_seq_len:
            raise RuntimeError(f"Failed to create {self._kind} with model: {model_path} (the program has no "
                               "get_max_seq_len method, which the runner needs)")
        # ExecuTorch: the program's get_eos_ids replace the tokenizer's EOS
        self.eos_ids: set[int] = set(self.llm.eos_ids) if self.llm.eos_ids else {int(self.tokenizer.eos_id or 0)}
        self.stats = Stats()
        self._session: Session | None = None
        self._stop = threading.Event()
        self._pending: int | None = None  # the token a prefill() chose, for a generate("") to start from

    # ---- pieces ------------------------------------------------------------------

    @property
    def session(self) -> Session:
        """The conversation's session (its tokens are what the cache holds);
        the method is loaded on first use, stamped in Stats' model load times."""
        if self._session is None:
            self.stats.model_load_start_ms = time_in_ms()
            self._session = self.llm.new_session()
            self.stats.model_load_end_ms = time_in_ms()
        return self._session

    def _feed(self, tokens: list[int]) -> np.ndarray:
        session = self.session
        self.stats.on_model_execution_begin()
        try:
            return session.prefill(tokens)
        finally:
            self.stats.on_model_execution_end()

    def _encode(self, text: str, num_bos: int, num_eos: int) -> list[int]:
        if not isinstance(text, str):
            raise TypeError(f"the prompt must be a str, got {type(text).__name__}")
        return self.tokenizer.encode(text, bos=num_bos, eos=num_eos)

    def _sampler(self, config: GenerationConfig) -> Sampler:
        t = config.temperature
        if not (0.0 <= t <= 1.0) or math.isnan(t):
            raise ValueError(f"Temperature must be in [0, 1], got {t:f}")
        return Sampler(t, top_k=config.top_k, top_p=config.top_p, seed=config.seed)

    def _decode_loop(self, first: int, config: GenerationConfig, emit: Callable[[str], None],
                     stream: StreamDecoder, stats_callback: StatsCallback, num_prompt_tokens: int | None) -> None:
        """From the token the prompt chose: ExecuTorch's TextLLMRunner after
        its prefill. num_prompt_tokens None: the position reached at the end
        (ExecuTorch's count after a prefill() and an empty prompt)."""
        stats, llm = self.stats, self.llm
        # sliding-window programs (max_seq_len < max_context_len) get the whole budget, as ExecuTorch
        effective = 0 if llm.max_seq_len < llm.max_context_len else self.session.position
        max_new = config.resolve_max_new_tokens(llm.max_context_len, effective)
        if max_new <= 0:
            raise ValueError(f"Max new tokens {max_new} is less than or equal to 0 (position {self.session.position}"
                             f" of a {llm.max_context_len}-token context)")
        sampler = self._sampler(config)
        stats.first_token_ms = stats.prompt_eval_end_ms = time_in_ms()
        emit(stream.push(first))
        cur, generated = first, 0
        self._stop.clear()
        while generated < max_new - 1:
            if self.session.position >= llm.max_context_len:
                break  # the cache is full (a sliding-window budget can ask for more)
            logits = self._feed([cur])
            stats.on_sampling_begin()
            cur = sampler.sample(logits)
            stats.on_sampling_end()
            generated += 1
            emit(stream.push(cur))
            if self._stop.is_set():
                break
            if cur in self.eos_ids:
                break
        tail = stream.flush()
        if tail:
            emit(tail)
        stats.inference_end_ms = time_in_ms()
        stats.num_prompt_tokens = self.session.position if num_prompt_tokens is None else num_prompt_tokens
        stats.num_generated_tokens = generated
        if stats_callback is not None:
            stats_callback(copy.copy(stats))  # a snapshot, as ExecuTorch's binding passes

    # ---- ExecuTorch's API ------------------------------------------------------------

    def stop(self) -> None:
        """Stops the generation in progress after the token being emitted (call
        it from the token callback or another thread)."""
        self._stop.set()

    def reset(self) -> None:
        """Forgets the conversation (the cache starts over at position 0) and
        zeroes the stats but the load times."""
        self.stats.reset()
        if self._session is not None:
            self._session.reset()
        self._pending = None

    def get_vocab_size(self) -> int:
        """The program's vocabulary size (get_vocab_size, else the logits'
        width), -1 when neither says."""
        return -1 if self.llm.vocab_size is None else int(self.llm.vocab_size)


class TextLLMRunner(_Runner):
    """Generates text with an LLM program and its tokenizer (ExecuTorch's
    TextLLMRunner). The tokenizer is read as ExecuTorch's runner reads it (a
    Hugging Face tokenizer.json, tiktoken, SentencePiece or Llama 2 .bin, via
    pytorch-tokenizers: `pip install pyexec[llm]`).

    Raises RuntimeError ("Failed to load tokenizer from: ...", "Failed to
    create text llm runner with model: ...", each with the reason) when a
    file cannot be used."""

    _kind = "text llm runner"

    def generate(
        self,
        prompt: str,
        config: GenerationConfig,
        token_callback: TokenCallback = None,
        stats_callback: StatsCallback = None,
    ) -> None:
        """Generates after `prompt` (see the module's description).

        Raises RuntimeError("Generation failed: ...") when the prompt does not
        fit in the context, the temperature is outside [0, 1], no new token
        fits, an empty prompt follows no prefill(), or the program fails;
        exceptions raised by the callbacks propagate unchanged."""
        if not isinstance(config, GenerationConfig):
            raise TypeError(f"config must be a GenerationConfig, got {type(config).__name__}")
        try:
            self._generate(prompt, config, token_callback, stats_callback)
        except (ValueError, Error) as exc:
            raise RuntimeError(f"Generation failed: {exc}") from exc

    def _generate(self, prompt: str, config: GenerationConfig, token_callback: TokenCallback,
                  stats_callback: StatsCallback) -> None:
        session = self.session
        stats, llm = self.stats, self.llm

        def emit(text: str) -> None:
            if text and token_callback is not None:
                token_callback(text)

        stats.inference_start_ms = time_in_ms()
        stats.model_execution_start_ms = stats.model_execution_end_ms = 0
        self._sampler(config)  # the temperature checked before any work
        if prompt:
            tokens = self._encode(prompt, config.num_bos, config.num_eos)
            stats.token_encode_end_ms = time_in_ms()
            if not tokens:
                raise ValueError("Expected at least 1 prompt token")
            n = len(tokens)
            if llm.max_seq_len >= llm.max_context_len:
                if session.position + n >= llm.max_context_len:
                    raise ValueError(
                        f"pos_ {session.position} + num_prompt_tokens {n} >= max_context_len "
                        f"{llm.max_context_len}: the prompt does not fit in the program's context")
            elif n >= llm.max_context_len:
                raise ValueError(f"num_prompt_tokens {n} >= max_context_len {llm.max_context_len}: "
                                 "the prompt does not fit in the program's KV cache")
            if config.echo:
                emit(prompt)
            logits = self._feed(tokens)
            first = int(np.argmax(logits))  # ExecuTorch's prefill chooses greedily
            self._pending = None
            num_prompt: int | None = n
        else:
            if self._pending is None:
                raise ValueError("Empty prompt requires a prior prefill() call")
            first, self._pending = self._pending, None
            num_prompt = None
        self._decode_loop(first, config, emit, StreamDecoder(self.tokenizer), stats_callback, num_prompt)

    def prefill(self, prompt: str, config: GenerationConfig) -> None:
        """Feeds `prompt` (encoded with config.num_bos / num_eos) after what
        the runner holds, without generating: rebuild a chat history, then
        generate the reply with generate("", config) or a further prompt.

        Raises RuntimeError("Prefill failed: ...") for a prompt that does not
        fit or encodes to nothing."""
        if not isinstance(config, GenerationConfig):
            raise TypeError(f"config must be a GenerationConfig, got {type(config).__name__}")
        try:
            tokens = self._encode(prompt, config.num_bos, config.num_eos)
            if not tokens:
                raise ValueError("the prompt encodes to no tokens")
            self._pending = int(np.argmax(self._feed(tokens)))
        except (ValueError, Error) as exc:
            raise RuntimeError(f"Prefill failed: {exc}") from exc

    def __repr__(self) -> str:
        return "<TextLLMRunner>"
