"""Many conversations on one weight load: a scheduler thread that runs the
model, stepping the active requests round-robin (a prefill chunk or one
decode step each per turn, so a long generation does not hold up a short
one), over a pool of sessions (each its own KV cache) kept as an LRU: a
request whose tokens extend a cached session's tokens (its earlier prompt and
reply) rewinds that session to the common prefix and prefills only the rest.

Used by the HTTP server (pyexec/llm/server.py) and by the JSONL worker
(pyexec/llm/worker.py); it imports neither FastAPI nor anything else
optional. The engine (pyexec.llm._engine, _sampling, _tokenizer) is reached
through the small protocols below."""

from __future__ import annotations

import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, Union

import numpy as np


class SessionLike(Protocol):
    position: int
    tokens: list[int]

    def prefill(self, tokens: Sequence[int]) -> np.ndarray: ...
    def decode(self, token: int) -> np.ndarray: ...
    def rewind(self, position: int) -> None: ...
    def reset(self) -> None: ...


class ProgramLike(Protocol):
    max_context_len: int
    eos_ids: set[int]

    def new_session(self) -> Any: ...


class TokenizerLike(Protocol):
    def decode(self, ids: Sequence[int]) -> str: ...


class SamplerLike(Protocol):
    def sample(self, logits: np.ndarray) -> int: ...


class ServeError(Exception):
    """An error a client sees: an HTTP status and OpenAI's error body
    {"error": {"message", "type", "param", "code"}}."""

    def __init__(self, status: int, message: str, type: str = "invalid_request_error", param: str | None = None,
                 code: str | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.type, self.param, self.code = status, message, type, param, code

    def body(self) -> dict[str, Any]:
        return {"error": {"message": self.message, "type": self.type, "param": self.param, "code": self.code}}


class QueueFull(ServeError):
    def __init__(self, waiting: int) -> None:
        super().__init__(429, f"The server is busy: {waiting} requests are already waiting for a session "
                         "(--max-queue). Retry later.", type="rate_limit_error", code="queue_full")


@dataclass
class TextEvent:
    """Newly completed text (never a partial UTF-8 character, never the
    start of a stop string that may still be forming)."""
    text: str


@dataclass
class DoneEvent:
    finish_reason: str            # "stop" (EOS or a stop string) or "length"
    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int            # prompt tokens served from a session's cache
    generated_ids: list[int]      # ids generated (EOS excluded)
    stopped_by_string: bool
    cancelled: bool
    reuse: str                    # "new", "exact_prefix", "equal", "mismatch"
    prefill_s: float
    decode_s: float


@dataclass
class ErrorEvent:
    error: ServeError


Event = Union[TextEvent, DoneEvent, ErrorEvent]


@dataclass
class Request:
    """One generation. `emit` is called on the scheduler thread, in order:
    TextEvents, then one DoneEvent or ErrorEvent."""
    prompt: list[int]
    max_tokens: int
    sampler: SamplerLike
    emit: Callable[[Event], None]
    stop: list[str] = field(default_factory=list)
    session_id: str | None = None   # a named session (the worker protocol); None: the LRU picks
    max_ahead: int | None = None    # pause while this many TextEvents are not consumed() (None: never)
    cancelled: threading.Event = field(default_factory=threading.Event)
    ahead: int = 0
    _wake: Callable[[], None] | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def cancel(self) -> None:
        self.cancelled.set()
        if self._wake is not None:
            self._wake()

    def consumed(self) -> None:
        """The consumer has taken one TextEvent (with max_ahead, generation
        runs at most that many events ahead of its consumer: a client that
        reads slowly, or has gone, does not let its generation run on)."""
        with self._lock:
            self.ahead -= 1
        if self._wake is not None:
            self._wake()

    def paused(self) -> bool:
        return self.max_ahead is not None and self.ahead >= self.max_ahead and not self.cancelled.is_set()


@dataclass
class _Slot:
    session: Any
    name: str | None = None
    busy: bool = False


@dataclass
class _Active:
    req: Request
    slot: _Slot
    pending: list[int]
    cached: int
    reuse: str
    decoder: Any
    held: str = ""
    generated: list[int] = field(default_factory=list)
    last: int = -1
    prefill_s: float = 0.0
    decode_s: float = 0.0


def common_prefix(a: Sequence[int], b: Sequence[int]) -> int:
    n = min(len(a), len(b))
    i = 0
    while i < n and a[i] == b[i]:
        i += 1
    return i


def _stop_cut(text: str, stops: Sequence[str]) -> int | None:
    best: int | None = None
    for s in stops:
        i = text.find(s)
        if i != -1 and (best is None or i < best):
            best = i
    return best


def _partial_stop_len(text: str, stops: Sequence[str]) -> int:
    """Length of the longest tail of `text` that is a proper prefix of a stop
    string (text that must be held back: the stop may still be forming)."""
    keep = 0
    for s in stops:
        for k in range(min(len(s) - 1, len(text)), keep, -1):
            if text.endswith(s[:k]):
                keep = k
                break
    return keep


class Scheduler:
    """Owns the sessions and the thread that runs the model.

    max_sessions: sessions (KV caches) kept, running or idle; at most that
    many requests run at once. max_queue: requests waiting for a session
    beyond those; one more is refused with QueueFull (HTTP 429)."""

    def __init__(self, program: ProgramLike, tokenizer: TokenizerLike,
                 make_decoder: Callable[[], Any], *, eos_ids: set[int] | None = None, max_sessions: int = 4,
                 max_queue: int = 64, prefill_chunk: int = 128, max_named: int | None = None) -> None:
        if max_sessions < 1:
            raise ValueError(f"max_sessions must be at least 1, got {max_sessions}")
        if max_queue < 0:
            raise ValueError(f"max_queue must be 0 or more, got {max_queue}")
        self.program, self.tokenizer = program, tokenizer
        self.max_sessions, self.max_queue, self.prefill_chunk = max_sessions, max_queue, max(1, prefill_chunk)
        self.max_context = int(program.max_context_len)
        self.eos_ids = set(program.eos_ids if eos_ids is None else eos_ids)
        self.max_named = max_sessions if max_named is None else max_named
        self._make_decoder = make_decoder
        self._slots: OrderedDict[int, _Slot] = OrderedDict()   # LRU order: least recently used first
        self._next_slot = 0
        self._waiting: deque[Request] = deque()
        self._active: list[_Active] = []
        self._commands: deque[tuple[Callable[[], Any], list[Any], threading.Event]] = deque()
        self._cond = threading.Condition()
        self._closed = False
        self.counters = {"requests": 0, "completed": 0, "cancelled": 0, "failed": 0, "rejected": 0,
                         "prompt_tokens": 0, "cached_tokens": 0, "prefilled_tokens": 0, "generated_tokens": 0}
        self._thread = threading.Thread(target=self._run, name="pyexec-llm-scheduler", daemon=True)
        self._thread.start()

    # ---- called from other threads ------------------------------------------

    def submit(self, req: Request) -> None:
        """Queues `req`; raises QueueFull when max_queue requests already wait."""
        with self._cond:
            if self._closed:
                raise ServeError(503, "The server is shutting down.", type="server_error", code="shutting_down")
            if len(self._active) + len(self._waiting) >= self.max_sessions + self.max_queue:
                self.counters["rejected"] += 1
                raise QueueFull(len(self._waiting))
            self.counters["requests"] += 1
            req._wake = self._wake
            self._waiting.append(req)
            self._cond.notify()

    def _wake(self) -> None:
        with self._cond:
            self._cond.notify()

    def call(self, fn: Callable[[], Any], timeout: float | None = None) -> Any:
        """Runs fn() on the scheduler thread between steps (session
        operations) and returns its result or raises its exception."""
        done = threading.Event()
        box: list[Any] = []
        with self._cond:
            self._commands.append((fn, box, done))
            self._cond.notify()
        if not done.wait(timeout):
            raise TimeoutError("the scheduler did not run the command in time")
        if box and isinstance(box[0], BaseException):
            raise box[0]
        return box[0] if box else None

    def stats(self) -> dict[str, Any]:
        with self._cond:
            out: dict[str, Any] = dict(self.counters)
            out.update(active=len(self._active), waiting=len(self._waiting), sessions=len(self._slots),
                       max_sessions=self.max_sessions, max_queue=self.max_queue, max_context=self.max_context)
            return out

    @property
    def alive(self) -> bool:
        """Whether the scheduler thread runs (it stops only at close())."""
        return self._thread.is_alive()

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify()
        self._thread.join(timeout=10)

    # ---- named sessions (run through call()) ----------------------------------

    def named_slot(self, name: str, create: bool = True) -> _Slot | None:
        for slot in self._slots.values():
            if slot.name == name:
                return slot
        if not create:
            return None
        named = sum(1 for s in self._slots.values() if s.name is not None)
        free = self._free_slot(allow_named=False) if named < self.max_named else None
        if free is None:
            raise ServeError(429, "Session capacity exhausted; close a session or retry later.",
                             type="rate_limit_error", code="capacity_exhausted")
        free.name = name
        return free

    def close_named(self, name: str) -> None:
        for key, slot in list(self._slots.items()):
            if slot.name == name:
                if slot.busy:
                    raise ServeError(409, f"session {name!r} is generating", code="session_busy")
                slot.session.reset()
                del self._slots[key]

    def reset_named(self, name: str) -> None:
        slot = self.named_slot(name, create=False)
        if slot is not None:
            if slot.busy:
                raise ServeError(409, f"session {name!r} is generating", code="session_busy")
            slot.session.reset()

    # ---- the scheduler thread -----------------------------------------------------

    def _free_slot(self, allow_named: bool) -> _Slot | None:
        """A new session while under max_sessions, else the least recently
        used idle anonymous one (its cache forgotten); None when none is idle."""
        if len(self._slots) < self.max_sessions:
            slot = _Slot(self.program.new_session())
            self._slots[self._next_slot] = slot
            self._next_slot += 1
            return slot
        for key, slot in self._slots.items():
            if not slot.busy and (slot.name is None or allow_named):
                self._slots.move_to_end(key)
                slot.session.reset()
                return slot
        return None

    def _touch(self, slot: _Slot) -> None:
        for key, s in self._slots.items():
            if s is slot:
                self._slots.move_to_end(key)
                return

    def _pick(self, req: Request) -> tuple[_Slot, int] | None:
        """The session for `req` and the prompt tokens already in its cache."""
        if req.session_id is not None:
            slot = self.named_slot(req.session_id)
            if slot is None or slot.busy:
                return None
            return slot, common_prefix(slot.session.tokens, req.prompt)
        # a session whose tokens the prompt extends loses nothing: the longest such
        best: _Slot | None = None
        best_n = 0
        partial: _Slot | None = None
        partial_n = 0
        empty: _Slot | None = None
        for slot in self._slots.values():
            if slot.busy or slot.name is not None:
                continue
            if not slot.session.tokens:
                empty = slot        # as good as a new one
                continue
            n = common_prefix(slot.session.tokens, req.prompt)
            if n == len(slot.session.tokens) and n > best_n:
                best, best_n = slot, n
            elif n > partial_n:
                partial, partial_n = slot, n
        if best is not None and best_n > 0:
            return best, best_n
        # else a new session while there is room (sparing the others' caches),
        # else the idle session sharing the longest prefix, else the least recently used
        if empty is not None:
            return empty, 0
        if partial is not None and partial_n > 0 and len(self._slots) >= self.max_sessions:
            return partial, partial_n
        slot = self._free_slot(allow_named=False)
        return None if slot is None else (slot, 0)

    def _admit(self) -> None:
        still: deque[Request] = deque()
        while self._waiting:
            req = self._waiting.popleft()
            if req.cancelled.is_set():
                req.emit(DoneEvent("stop", len(req.prompt), 0, 0, [], False, True, "new", 0.0, 0.0))
                self.counters["cancelled"] += 1
                continue
            try:
                picked = self._pick(req)
            except ServeError as exc:
                self.counters["failed"] += 1
                req.emit(ErrorEvent(exc))
                continue
            except Exception as exc:  # noqa: BLE001 - e.g. no memory for a new session: this request fails
                self.counters["failed"] += 1
                req.emit(ErrorEvent(ServeError(503, f"No session could be made for the request: {exc}",
                                               type="server_error", code="session_unavailable")))
                continue
            if picked is None:
                still.append(req)
                continue
            slot, reused = picked
            held = len(slot.session.tokens)
            if reused == len(req.prompt):
                reused -= 1          # the last prompt token is fed again: its logits choose the first token
            reason = ("new" if held == 0 else "equal" if reused == len(req.prompt) - 1 and held == len(req.prompt)
                      else "exact_prefix" if reused == held else "mismatch")
            slot.busy = True
            self._touch(slot)
            try:
                slot.session.rewind(reused)
            except Exception:  # noqa: BLE001 - a session that cannot rewind starts over
                slot.session.reset()
                reused = 0
            self.counters["prompt_tokens"] += len(req.prompt)
            self.counters["cached_tokens"] += reused
            self._active.append(_Active(req, slot, list(req.prompt[reused:]), reused, reason, self._make_decoder()))
        self._waiting = still

    def _run(self) -> None:
        turn = 0
        while True:
            with self._cond:
                while not self._closed and not self._commands and not self._active and not self._waiting:
                    self._cond.wait()
                if self._closed:
                    for a in self._active:
                        a.req.emit(ErrorEvent(ServeError(503, "The server is shutting down.", type="server_error")))
                    for r in self._waiting:
                        r.emit(ErrorEvent(ServeError(503, "The server is shutting down.", type="server_error")))
                    return
                commands = list(self._commands)
                self._commands.clear()
                if self._waiting:
                    self._admit()
                active = list(self._active)
            for fn, box, done in commands:
                try:
                    box.append(fn())
                except BaseException as exc:  # noqa: BLE001 - handed to the caller
                    box.append(exc)
                done.set()
            if not active:
                continue
            runnable = [a for a in active if not a.req.paused()]
            if not runnable:          # every client is behind: wait for one to read (or leave)
                with self._cond:
                    if not self._commands and not self._waiting and all(a.req.paused() for a in active):
                        self._cond.wait(0.05)
                continue
            # one step for each runnable request, starting one further along each turn
            turn += 1
            for k in range(len(runnable)):
                a = runnable[(turn + k) % len(runnable)]
                finished = self._step(a)
                if finished:
                    with self._cond:
                        self._active.remove(a)
                        a.slot.busy = False

    def _step(self, a: _Active) -> bool:
        """One prefill chunk or one decode step of `a`; True once it has ended
        (its DoneEvent or ErrorEvent emitted)."""
        req = a.req
        if req.cancelled.is_set():
            self._finish(a, "stop", cancelled=True)
            return True
        try:
            t0 = time.perf_counter()
            if a.pending:
                chunk, a.pending = a.pending[:self.prefill_chunk], a.pending[self.prefill_chunk:]
                logits = a.slot.session.prefill(chunk)
                self.counters["prefilled_tokens"] += len(chunk)
                a.prefill_s += time.perf_counter() - t0
                if a.pending:
                    return False
            else:
                logits = a.slot.session.decode(a.last)
                a.decode_s += time.perf_counter() - t0
            token = int(req.sampler.sample(logits))
        except ServeError as exc:
            return self._fail(a, exc)
        except ValueError as exc:
            return self._fail(a, ServeError(400, str(exc)))
        except Exception as exc:  # noqa: BLE001 - the request fails, the server goes on
            return self._fail(a, ServeError(500, f"Generation failed: {exc}", type="server_error"))
        if token in self.eos_ids:
            self._flush(a)
            self._finish(a, "stop")
            return True
        a.generated.append(token)
        a.last = token
        self.counters["generated_tokens"] += 1
        a.held += a.decoder.push(token)
        if req.stop:
            cut = _stop_cut(a.held, req.stop)
            if cut is not None:
                if cut:
                    self._emit_text(req, a.held[:cut])
                a.held = ""
                self._finish(a, "stop", by_string=True)
                return True
            keep = _partial_stop_len(a.held, req.stop)
            ready, a.held = (a.held[:len(a.held) - keep], a.held[len(a.held) - keep:]) if keep else (a.held, "")
        else:
            ready, a.held = a.held, ""
        if ready:
            self._emit_text(req, ready)
        # the next step would feed `token` at the session's position
        if len(a.generated) >= req.max_tokens or a.slot.session.position >= self.max_context:
            self._flush(a)
            self._finish(a, "length")
            return True
        return False

    def _flush(self, a: _Active) -> None:
        a.held += a.decoder.flush()
        if a.held and a.req.stop:
            cut = _stop_cut(a.held, a.req.stop)
            if cut is not None:
                a.held = a.held[:cut]
        if a.held:
            self._emit_text(a.req, a.held)
        a.held = ""

    @staticmethod
    def _emit_text(req: Request, text: str) -> None:
        if req.max_ahead is not None:
            with req._lock:
                req.ahead += 1
        req.emit(TextEvent(text))

    def _finish(self, a: _Active, reason: str, *, cancelled: bool = False, by_string: bool = False) -> None:
        self.counters["cancelled" if cancelled else "completed"] += 1
        a.req.emit(DoneEvent(reason, len(a.req.prompt), len(a.generated), a.cached, list(a.generated), by_string,
                             cancelled, a.reuse, a.prefill_s, a.decode_s))

    def _fail(self, a: _Active, error: ServeError) -> bool:
        self.counters["failed"] += 1
        try:
            a.slot.session.reset()
        except Exception:  # noqa: BLE001 - the slot is dropped below if it cannot even reset
            for key, s in list(self._slots.items()):
                if s is a.slot:
                    del self._slots[key]
        a.req.emit(ErrorEvent(error))
        return True
