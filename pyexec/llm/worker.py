"""`python -m pyexec.llm.worker --model_path M.pte --tokenizer_path T`: a
model worker speaking the JSONL protocol of ExecuTorch's LLM server
(executorch/examples/llm_server, its python/worker_client.py), so that
server runs unchanged with pyexec as its engine:

    python -m executorch.examples.llm_server.python.server --worker-bin pyexec-llm-worker \\
        --model-path model.pte --tokenizer-path tokenizer.json --allow-chatml-fallback

The protocol, one JSON object a line: the worker prints
{"ready": true, "max_named_sessions": N, "supports_cancel": true}, then for
each request line answers:
  {"op": "open"|"close"|"reset", "session_id": S} -> {"opened"|"closed"|"reset": true, "session_id": S}
  a generation {"prompt": TEXT | "prompt_segments": [{"text": T} | {"ids": [...]}], "max_new_tokens",
    "temperature", "top_p", "top_k", "seed", "stop", "session_id"?, "cancel_request_id"?}
    -> {"token": TEXT} lines, then {"done": true, "prompt_tokens", "completion_tokens", "finish_reason",
       "reused_prompt_tokens", "prefilled_prompt_tokens", "session_reset_reason", timings,
       "generated_token_ids", "cancelled"}
  failures -> {"error": MESSAGE, "code"?: "capacity_exhausted" | "context_length_exceeded" | ...}
Cancellation: 8-byte little-endian request ids on the descriptor named by
EXECUTORCH_LLM_WORKER_CONTROL_FD. Only protocol lines go to stdout; logs go
to stderr."""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
from collections.abc import Sequence
from typing import Any, TextIO

from ._scheduler import DoneEvent, ErrorEvent, Event, Request, ServeError, TextEvent

CONTROL_FD_ENV = "EXECUTORCH_LLM_WORKER_CONTROL_FD"


class Worker:
    def __init__(self, backend: Any, out: TextIO, control_fd: int | None = None) -> None:
        self.backend = backend
        self.out = out
        self._lock = threading.Lock()
        self._control_fd = control_fd
        self._frame = b""
        self._cancelled: list[int] = []          # request ids cancelled before their request began
        self._current: tuple[int | None, Request] | None = None

    def send(self, obj: dict[str, Any]) -> None:
        with self._lock:
            self.out.write(json.dumps(obj, ensure_ascii=False) + "\n")
            self.out.flush()

    # ---- cancellation ---------------------------------------------------------

    def poll_cancels(self) -> None:
        """Reads the cancellation frames waiting on the control descriptor
        (non-blocking): the request running stops at its next step; an id
        not begun yet is remembered, so a cancellation sent before its
        request is honoured when the request comes. Called as a generation
        begins and at each of its tokens."""
        fd = self._control_fd
        if fd is None:
            return
        while True:
            try:
                data = os.read(fd, 8 - len(self._frame))
            except BlockingIOError:
                return
            except OSError:
                self._control_fd = None
                return
            if not data:          # the server closed its end
                self._control_fd = None
                return
            self._frame += data
            if len(self._frame) < 8:
                continue
            rid = int.from_bytes(self._frame, "little")
            self._frame = b""
            current = self._current
            if current is not None and current[0] == rid:
                current[1].cancel()
            else:
                self._cancelled = [*self._cancelled[-63:], rid]

    # ---- requests --------------------------------------------------------------------

    def handle(self, line: str) -> None:
        try:
            msg = json.loads(line)
        except ValueError as exc:
            self.send({"error": f"the request line is not valid JSON ({exc})", "code": "invalid_request"})
            return
        if not isinstance(msg, dict):
            self.send({"error": "the request line must be a JSON object", "code": "invalid_request"})
            return
        try:
            if "op" in msg:
                self.op(msg)
            else:
                self.generate(msg)
        except ServeError as exc:
            self.send({"error": exc.message, "code": exc.code})
        except (TypeError, ValueError) as exc:
            self.send({"error": str(exc), "code": "invalid_request"})

    def op(self, msg: dict[str, Any]) -> None:
        op, sid = msg.get("op"), msg.get("session_id")
        if not isinstance(sid, str) or not sid:
            raise ServeError(400, f"op {op!r} needs a session_id string", code="invalid_request")
        sched = self.backend.scheduler
        if op == "open":
            sched.call(lambda: sched.named_slot(sid))
            self.send({"opened": True, "session_id": sid})
        elif op == "close":
            sched.call(lambda: sched.close_named(sid))
            self.send({"closed": True, "session_id": sid})
        elif op == "reset":
            sched.call(lambda: sched.reset_named(sid))
            self.send({"reset": True, "session_id": sid})
        else:
            raise ServeError(400, f"unknown op {op!r} (open, close, reset)", code="invalid_request")

    def _prompt(self, msg: dict[str, Any]) -> list[int]:
        model = self.backend.model
        segments = msg.get("prompt_segments")
        if segments is not None:
            if not isinstance(segments, list) or not segments:
                raise ValueError("prompt_segments must be a non-empty array")
            ids: list[int] = []
            for seg in segments:
                if isinstance(seg, dict) and isinstance(seg.get("text"), str):
                    ids += model.encode(seg["text"])
                elif isinstance(seg, dict) and isinstance(seg.get("ids"), list):
                    ids += [int(t) for t in seg["ids"]]
                else:
                    raise ValueError(f"a prompt segment is {{'text': str}} or {{'ids': [int]}}, got {seg!r}")
        else:
            prompt = msg.get("prompt")
            if not isinstance(prompt, str):
                raise ValueError("a generation request needs 'prompt' (a string) or 'prompt_segments'")
            ids = model.encode(prompt)
        ids = model.with_bos(ids)
        vocab = model.vocab_size
        bad = [t for t in ids if t < 0 or (vocab is not None and t >= vocab)]
        if bad:
            raise ValueError(f"token id {bad[0]} is outside the vocabulary (0 to {(vocab or 0) - 1})")
        return ids

    def generate(self, msg: dict[str, Any]) -> None:
        t0 = time.perf_counter()
        model = self.backend.model
        prompt = self._prompt(msg)
        if len(prompt) >= model.max_context:
            raise ServeError(400, f"the prompt has {len(prompt)} tokens; the model's context holds "
                             f"{model.max_context}", code="context_length_exceeded")
        room = model.max_context - len(prompt)
        max_new = int(msg.get("max_new_tokens", -1))
        max_new = room if max_new < 0 else min(max_new, room)
        if max_new == 0:
            raise ServeError(400, "max_new_tokens must be at least 1", code="invalid_request")
        stop = [s for s in msg.get("stop") or [] if isinstance(s, str) and s]
        temperature = float(msg.get("temperature", 0.0))
        top_p = float(msg.get("top_p", 1.0)) or 1.0
        top_k = int(msg.get("top_k", 0))
        seed = msg.get("seed")
        sampler = self.backend._sampler_cls(temperature=temperature, top_k=top_k, top_p=top_p,
                                            seed=None if seed is None else int(seed))
        done = threading.Event()
        result: list[Event] = []

        def emit(event: Event) -> None:
            if isinstance(event, TextEvent):
                self.send({"token": event.text})
                self.poll_cancels()
                return
            result.append(event)
            done.set()

        sid = msg.get("session_id")
        req = Request(prompt, max_new, sampler, emit, stop=stop, session_id=sid if isinstance(sid, str) else None)
        rid = msg.get("cancel_request_id")
        self._current = (rid if isinstance(rid, int) else None, req)
        self.poll_cancels()
        if rid in self._cancelled:
            req.cancel()
        try:
            self.backend.scheduler.submit(req)
            done.wait()
        finally:
            self._current = None
        event = result[0]
        if isinstance(event, ErrorEvent):
            self.send({"error": event.error.message, "code": event.error.code})
            return
        assert isinstance(event, DoneEvent)
        total = time.perf_counter() - t0
        prefilled = event.prompt_tokens - event.cached_tokens
        self.send({
            "done": True,
            "prompt_tokens": event.prompt_tokens,
            "completion_tokens": event.completion_tokens,
            "finish_reason": event.finish_reason,
            "reused_prompt_tokens": event.cached_tokens,
            "prefilled_prompt_tokens": prefilled,
            "session_reset_reason": event.reuse,
            "prefill_ms": event.prefill_s * 1e3,
            "decode_ms": event.decode_s * 1e3,
            "total_ms": total * 1e3,
            "prefill_tok_s": prefilled / event.prefill_s if event.prefill_s > 0 else 0.0,
            "decode_tok_s": event.completion_tokens / event.decode_s if event.decode_s > 0 else 0.0,
            # the exact ids the session holds after this turn; none when a stop
            # string trimmed the text or the client cancelled (the text no longer matches them)
            "generated_token_ids": [] if event.stopped_by_string or event.cancelled else event.generated_ids,
            "cancelled": event.cancelled,
        })


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m pyexec.llm.worker",
                                description="A model worker for ExecuTorch's LLM server (JSONL on stdin/stdout).")
    p.add_argument("--model_path", "--model-path", required=True, help="the LLM program (.pte)")
    p.add_argument("--tokenizer_path", "--tokenizer-path", required=True, help="the tokenizer file")
    p.add_argument("--data_path", "--data-path", help="the program's data file (.ptd)")
    p.add_argument("--max_sessions", "--max-sessions", type=int, default=4,
                   help="sessions (KV caches) kept; one is kept for anonymous requests (default: %(default)s)")
    p.add_argument("--threads", type=int, help="threads pyexec's kernels may use")
    args = p.parse_args(argv)
    # stdout carries protocol lines only: anything else that writes to file
    # descriptor 1 (a library's print, a C printf) goes to stderr.
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    if args.max_sessions < 1:
        print("pyexec worker: --max_sessions must be at least 1", file=sys.stderr)
        return 2
    if args.threads is not None:
        from .. import set_num_threads
        set_num_threads(args.threads)
    from ._backend import Backend

    try:
        backend = Backend(args.model_path, args.tokenizer_path, data_path=args.data_path,
                          max_sessions=args.max_sessions, max_queue=1, max_named=max(1, args.max_sessions - 1))
    except Exception as exc:  # noqa: BLE001 - reported to the server, which shows it
        out.write(json.dumps({"ready": False, "error": f"cannot load the model: {exc}"}) + "\n")
        out.flush()
        print(f"pyexec worker: cannot load the model: {exc}", file=sys.stderr)
        return 1
    fd_text = os.environ.get(CONTROL_FD_ENV)
    control_fd = None
    if fd_text and fd_text.isdigit():
        try:
            os.set_blocking(int(fd_text), False)
            control_fd = int(fd_text)
        except OSError:
            print(f"pyexec worker: {CONTROL_FD_ENV}={fd_text} is no open descriptor; no cancellation",
                  file=sys.stderr)
    worker = Worker(backend, out, control_fd)
    worker.send({"ready": True, "max_named_sessions": backend.scheduler.max_named,
                 "supports_cancel": control_fd is not None})
    for line in sys.stdin:
        if line.strip():
            worker.handle(line)
    backend.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
