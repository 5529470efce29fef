"""The generation engine under pyexec.llm: one loaded LLM program (LLMProgram)
and any number of independent conversations over it (Session), each holding
its own KV cache.

The layouts ExecuTorch's exporters write, read from the program itself:

* export_llm (``forward(tokens [1, S], input_pos [1])``): the KV caches are
  the program's mutable buffers, so each Session loads its own Method (the
  weights stay shared: they belong to the Program). With
  ``enable_dynamic_shape`` S may vary up to the program's bound; without it
  the prompt is prefilled one token per call, as ExecuTorch's TextPrefiller
  does.
* optimum-executorch (``forward(input_ids [1, S], cache_position [S])``): the
  same, with one position per token.
* caller-owned caches (``forward(tokens, input_pos, *caches)`` where the
  caches are unplanned inputs the program updates in place, as pyexec's demo
  decoder is exported): each Session owns numpy arrays the program writes
  straight into, so fork() is a copy of them.
* no KV cache (``use_kv_cache`` false, ``forward(tokens [1, S])``): every call
  runs the whole sequence.

The metadata methods (get_max_seq_len, get_max_context_len, get_vocab_size,
get_bos_id, get_eos_ids, use_kv_cache, enable_dynamic_shape,
use_sdpa_with_kv_cache) are read as ExecuTorch's runner reads them, with its
defaults."""

from __future__ import annotations

import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Union

import numpy as np

from .._errors import Error
from .._meta import MethodMeta
from .._method import Method
from .._program import Program, load

PathLike = Union[str, Path]

# ExecuTorch's defaults for metadata a program does not carry (llm_runner_helper.cpp)
_DEFAULTS: dict[str, int] = {
    "enable_dynamic_shape": 0,
    "get_max_seq_len": 128,
    "get_max_context_len": 128,
    "use_kv_cache": 1,
    "use_sdpa_with_kv_cache": 0,
}


def _scalar(value: Any) -> int:
    """A constant method's output (an int, a bool or a one-element tensor) as an int."""
    if isinstance(value, (bool, int, np.integer)):
        return int(value)
    if isinstance(value, (float, np.floating)):
        return int(value)
    array = np.asarray(value)
    if array.size != 1:
        raise ValueError(f"expected a single value, got shape {array.shape}")
    return int(array.reshape(-1)[0])


class LLMProgram:
    """One loaded .pte (and optional .ptd) and its metadata; one weight load
    shared by all sessions (new_session()).

    `method`: the decoder method ("forward"; a multimodal program's
    "text_decoder", which takes embeddings rather than token ids).

    Raises ValueError when the program has no such method, or when a
    metadata method returns something that is not a number."""

    def __init__(self, model_path: PathLike, data_path: PathLike | None = None, method: str = "forward") -> None:
        self.model_path = str(model_path)
        self.data_path = None if data_path is None else str(data_path)
        self.program: Program = load(self.model_path, data_path=self.data_path)
        names = self.program.method_names
        if method not in names:
            raise ValueError(f"{self.model_path} has no {method!r} method (methods: {', '.join(sorted(names))})")
        self.method_name = method
        self.method_names: frozenset[str] = frozenset(names)
        self.metadata: dict[str, int] = {}
        """Every metadata method the program carries, by name, with its value."""
        for name in sorted(names):
            if name == method or name == "get_eos_ids":
                continue
            meta = self.program.method_meta(name)
            if meta.inputs:
                continue  # not a constant method
            try:
                outputs = self.program.load_method(name, output_type="numpy").execute([])
            except Error:
                continue
            if len(outputs) == 1:
                try:
                    self.metadata[name] = _scalar(outputs[0])
                except (TypeError, ValueError):
                    continue

        def value(key: str) -> int:
            return self.metadata.get(key, _DEFAULTS[key])

        self.has_max_seq_len: bool = "get_max_seq_len" in self.metadata
        self.max_seq_len: int = value("get_max_seq_len")
        """The most tokens one forward call takes (ExecuTorch's default 128 when absent)."""
        self.max_context_len: int = (
            self.metadata["get_max_context_len"] if "get_max_context_len" in self.metadata else self.max_seq_len
        )
        """The positions the KV cache holds (get_max_seq_len when the program does not say)."""
        self.use_kv_cache: bool = bool(value("use_kv_cache"))
        self.enable_dynamic_shape: bool = bool(value("enable_dynamic_shape"))
        self.use_sdpa_with_kv_cache: bool = bool(value("use_sdpa_with_kv_cache"))
        self.bos_id: int | None = self.metadata.get("get_bos_id")
        self.eos_ids: set[int] = set()
        """The program's get_eos_ids (empty when it has none; the runner then uses the tokenizer's)."""
        if "get_eos_ids" in names:
            for v in self.program.load_method("get_eos_ids", output_type="numpy").execute([]):
                self.eos_ids.update(int(x) for x in np.asarray(v).reshape(-1))

        self.forward_meta: MethodMeta = self.program.method_meta(method)
        self._layout()
        vocab = self.metadata.get("get_vocab_size")
        if vocab is None:
            out = self.forward_meta.outputs[self.logits_index]
            vocab = out.sizes[-1] if out is not None and out.sizes else None
        self.vocab_size: int | None = vocab

    # ---- what the forward method looks like ----------------------------------

    def _layout(self) -> None:
        inputs = self.forward_meta.inputs
        name = self.method_name
        if not inputs or inputs[0] is None:
            raise ValueError(f"{self.model_path}: {name}'s first input must be the token tensor")
        tokens = inputs[0]
        self.token_dtype: str = tokens.dtype
        self.takes_embeddings: bool = tokens.dtype not in ("int64", "int32")
        if self.takes_embeddings and name == "forward":
            raise ValueError(f"{self.model_path}: forward's token input is {tokens.dtype}, not an integer tensor")
        # tokens [1, S]: how many a call may take (the upper bound when dynamic)
        self.max_tokens_per_call: int = tokens.sizes[-1] if tokens.sizes else 1
        self.tokens_dynamic: bool = tokens.is_dynamic
        # ExecuTorch's TextDecoderRunner: a KV cache exactly when forward has more than one input
        self.has_position_input: bool = len(inputs) > 1
        self.position_dtype: str = "int64"
        self.per_token_positions: bool = False
        if self.has_position_input:
            pos = inputs[1]
            if pos is None or pos.dtype not in ("int64", "int32"):
                raise ValueError(f"{self.model_path}: {name}'s second input must be an integer position tensor")
            self.position_dtype = pos.dtype
            # util.h populate_start_pos_or_cache_position: more than one element = one position per token
            self.per_token_positions = bool(pos.sizes) and pos.sizes[0] > 1
        self.cache_inputs: list[int] = []
        for j, info in enumerate(inputs[2:], start=2):
            if info is None or not info.is_mutated or info.is_memory_planned:
                raise ValueError(
                    f"{self.model_path}: {name}'s input {j} is not a KV cache the caller can own "
                    "(an unplanned input the program updates in place); pyexec.llm cannot drive it"
                )
            self.cache_inputs.append(j)
        self.inputs_unplanned: bool = all(i is not None and not i.is_memory_planned for i in inputs[:2])
        # the logits: the output that is no input's new value (the last such)
        loaded = self.program.load_method(name)
        try:
            free = [i for i in range(len(self.forward_meta.outputs)) if loaded.output_aliases_input(i) is None]
        finally:
            loaded.close()
        if not free:
            raise ValueError(f"{self.model_path}: {name} has no logits output")
        self.logits_index: int = free[-1]
        self.prefill_chunk: int = self._prefill_chunk()

    def _prefill_chunk(self) -> int:
        """Tokens per prefill call: ExecuTorch's TextPrefiller sends max_seq_len
        at a time when it prefills in parallel (enable_dynamic_shape, or no KV
        cache), one otherwise; never more than the token input takes."""
        if self.use_kv_cache and not self.enable_dynamic_shape:
            return 1
        if not self.tokens_dynamic:
            return self.max_tokens_per_call
        return max(1, min(self.max_seq_len, self.max_tokens_per_call))

    @property
    def layout(self) -> str:
        """"caller-owned cache", "program-owned cache" or "no cache"."""
        if self.cache_inputs:
            return "caller-owned cache"
        return "program-owned cache" if self.has_position_input else "no cache"

    def new_session(self) -> Session:
        """A conversation with an empty cache, independent of every other session."""
        return Session(self)

    def check_token(self, token: int) -> None:
        if isinstance(token, bool) or not isinstance(token, (int, np.integer)):
            raise TypeError(f"token ids must be ints, got {type(token).__name__}")
        if token < 0 or (self.vocab_size is not None and token >= self.vocab_size):
            raise ValueError(f"token id {int(token)} is outside the vocabulary (0 to {self.vocab_size})")

    def __repr__(self) -> str:
        return (f"<pyexec.llm.LLMProgram {self.model_path!r} {self.layout} max_seq_len={self.max_seq_len} "
                f"max_context_len={self.max_context_len} vocab_size={self.vocab_size}>")


class Session:
    """One conversation's cache state. Sessions of one LLMProgram are
    independent: each has its own KV caches (caller-owned arrays where the
    program takes the cache as an input, else a Method of its own). A Session
    is not thread-safe; use one per thread."""

    def __init__(self, llm: LLMProgram) -> None:
        self.llm = llm
        self.method: Method = llm.program.load_method(llm.method_name, output_type="numpy")
        self.tokens: list[int] = []
        """The tokens held in the cache, in order."""
        self.caches: list[np.ndarray] = []
        meta = llm.forward_meta
        for j in llm.cache_inputs:
            info = meta.inputs[j]
            assert info is not None
            self.caches.append(np.zeros(info.sizes, dtype=np.dtype(info.dtype)))
        self._decode_tokens = np.zeros((1, 1), dtype=np.dtype(llm.token_dtype))
        self._decode_pos = np.zeros((1,), dtype=np.dtype(llm.position_dtype))
        self._decode_installed = False
        self._lock = threading.Lock()

    @property
    def position(self) -> int:
        """Tokens held in the cache (the position the next token is written at)."""
        return len(self.tokens)

    # ---- running the program -------------------------------------------------

    def _logits(self, outputs: list[Any]) -> np.ndarray:
        out = np.asarray(outputs[self.llm.logits_index])
        vocab = out.shape[-1] if out.ndim else 1
        # [vocab], [1, vocab] or [1, S, vocab]: the last position's row
        return np.array(out.reshape(-1, vocab)[-1], dtype=np.float32)

    def _positions(self, start: int, n: int) -> np.ndarray:
        dtype = np.dtype(self.llm.position_dtype)
        if self.llm.per_token_positions:
            return np.arange(start, start + n, dtype=dtype)
        return np.array([start], dtype=dtype)

    def _run(self, chunk: Sequence[int], start: int) -> np.ndarray:
        llm = self.llm
        tokens = np.array([list(chunk)], dtype=np.dtype(llm.token_dtype))
        inputs: list[Any] = [tokens]
        if llm.has_position_input:
            inputs.append(self._positions(start, len(chunk)))
        inputs.extend(self.caches)
        self._decode_installed = False
        return self._logits(self.method.execute(inputs, clone_outputs=False))

    def _step(self, token: int, start: int) -> np.ndarray:
        """One token at `start`: its inputs installed once and rewritten in
        place when the program reads them where they lie."""
        llm = self.llm
        if not llm.has_position_input:
            return self._run([token], start)
        self._decode_tokens[0, 0] = token
        self._decode_pos[0] = start
        inputs = [self._decode_tokens, self._decode_pos, *self.caches]
        if not llm.inputs_unplanned:
            return self._logits(self.method.execute(inputs, clone_outputs=False))
        if not self._decode_installed:
            self.method.set_inputs(inputs)
            self._decode_installed = True
        return self._logits(self.method.execute(None, clone_outputs=False))

    def _check_room(self, n: int) -> None:
        if self.position + n > self.llm.max_context_len:
            raise ValueError(
                f"{n} tokens at position {self.position} need {self.position + n} cache positions; "
                f"the program's context holds {self.llm.max_context_len} (get_max_context_len)"
            )

    # ---- the interface ---------------------------------------------------------

    def prefill(self, tokens: Sequence[int]) -> np.ndarray:
        """Feeds `tokens` after those already held; returns the float32 logits
        of the last one. Chunks as ExecuTorch's TextPrefiller does: in
        parallel, up to max_seq_len tokens a call, when the program has
        dynamic shapes (or no KV cache), else one token a call.

        Raises ValueError for no tokens, a token id outside the vocabulary, or
        more tokens than the context has room for (naming the lengths)."""
        tokens = list(tokens)
        if not tokens:
            raise ValueError("prefill needs at least one token")
        for t in tokens:
            self.llm.check_token(t)
        self._check_room(len(tokens))
        with self._lock:
            llm = self.llm
            if not llm.has_position_input:  # no KV cache: the whole sequence every call
                if self.position + len(tokens) > llm.max_tokens_per_call:
                    raise ValueError(
                        f"{self.position + len(tokens)} tokens exceed the {llm.max_tokens_per_call} "
                        "the program takes in one call (it has no KV cache)"
                    )
                whole = self._run(self.tokens + tokens, 0)
                self.tokens.extend(tokens)
                return whole
            chunk = llm.prefill_chunk
            logits: np.ndarray | None = None
            for i in range(0, len(tokens), chunk):
                part = tokens[i:i + chunk]
                if len(part) == 1:
                    logits = self._step(part[0], self.position)
                else:
                    logits = self._run(part, self.position)
                self.tokens.extend(part)
            assert logits is not None
            return logits

    def decode(self, token: int) -> np.ndarray:
        """Feeds one token; returns the float32 logits of the next."""
        return self.prefill([token])

    def rewind(self, position: int) -> None:
        """Forgets the cache positions from `position` on (the attention reads
        only positions before the current one, so the old entries are simply
        overwritten later): keeps a shared prefix and continues from there."""
        if isinstance(position, bool) or not isinstance(position, int):
            raise TypeError(f"position must be an int, got {type(position).__name__}")
        if not 0 <= position <= self.position:
            raise ValueError(f"cannot rewind to position {position}: the session holds {self.position} tokens")
        del self.tokens[position:]

    def fork(self) -> Session:
        """An independent copy of this session's state. Caller-owned caches
        are copied; a program-owned cache (a Method's mutable buffers, which
        cannot be read out) is rebuilt by prefilling the held tokens in the
        new session."""
        other = Session(self.llm)
        if self.caches:
            for mine, theirs in zip(self.caches, other.caches):
                np.copyto(theirs, mine)
            other.tokens = list(self.tokens)
        elif self.tokens:
            other.prefill(self.tokens)
        return other

    def reset(self) -> None:
        """Empties the cache (position 0), as ExecuTorch's runner reset() does."""
        self.tokens.clear()
        for c in self.caches:
            c.fill(0)

    def close(self) -> None:
        self.method.close()

    def __repr__(self) -> str:
        return f"<pyexec.llm.Session position={self.position} {self.llm.layout}>"
