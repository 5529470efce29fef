"""`pyexec serve MODEL.pte --tokenizer FILE`: an OpenAI-compatible HTTP
server (/v1/models, /v1/chat/completions, /v1/completions, streamed or not)
over one weight load shared by every conversation.

FastAPI and uvicorn (`pip install pyexec[serve]`) are imported only when serving.
The model runs on one scheduler thread (pyexec/llm/_scheduler.py) that steps
the active requests round-robin, each in its own session (KV cache), reusing
a cached session when a request extends its tokens."""

from __future__ import annotations

import argparse
import os
import socket
import sys
from collections.abc import Sequence
from typing import Any

from ._backend import Backend

DEFAULT_PORT = 8000


def create_app(model_path: str, tokenizer_path: str, **options: Any) -> Any:
    """The FastAPI application `pyexec serve` runs, for embedding it
    elsewhere (a Ray Serve replica, another ASGI server): the model loaded
    once, its scheduler thread started. `options`: data_path, model_id,
    chat_template (a file), max_sessions, max_queue, prefill_chunk.
    `app.state.backend.close()` stops the scheduler."""
    from ._app import build_app

    backend = Backend(model_path, tokenizer_path, **options)
    app = build_app(backend)
    app.state.backend = backend
    return app


# ---- the command line ------------------------------------------------------------


def add_parser(sub: Any) -> argparse.ArgumentParser:
    """The `serve` subcommand of `python -m pyexec`."""
    s: argparse.ArgumentParser = sub.add_parser(
        "serve", help="serve an LLM over an OpenAI-compatible HTTP API (needs pyexec[serve])",
        description="Serve an LLM program (.pte) over an OpenAI-compatible HTTP API: /v1/models, "
        "/v1/chat/completions and /v1/completions, streamed (server-sent events) or not. Many clients share "
        "one weight load; each conversation has its own KV cache, and a request that extends an earlier one "
        "reuses its cache.")
    s.add_argument("model", help="the LLM program (.pte), exported with a KV cache")
    s.add_argument("--tokenizer", required=True, metavar="FILE",
                   help="tokenizer.json (Hugging Face), a tiktoken or SentencePiece model, or a Llama 2 .bin")
    s.add_argument("--data-path", metavar="FILE", help="the program's data file (.ptd), if its weights are apart")
    s.add_argument("--host", default="127.0.0.1", help="address to listen on (default: %(default)s)")
    s.add_argument("--port", type=int, default=DEFAULT_PORT, help="port (0: any free one) (default: %(default)s)")
    s.add_argument("--model-id", help="the model's name on /v1/models and in requests (default: the file's stem)")
    s.add_argument("--chat-template", metavar="FILE",
                   help="a Jinja chat template (Hugging Face style) (default: the chat_template of "
                   "tokenizer_config.json beside the tokenizer, else a plain 'role: content' template)")
    s.add_argument("--max-sessions", type=int, default=4, metavar="N",
                   help="conversations (KV caches) kept in memory; at most N requests generate at once, "
                   "interleaved (default: %(default)s)")
    s.add_argument("--max-queue", type=int, default=64, metavar="N",
                   help="requests waiting for a session beyond those; more are refused with 429 "
                   "(default: %(default)s)")
    s.add_argument("--prefill-chunk", type=int, default=128, metavar="N",
                   help="prompt tokens prefilled per scheduler turn, so a long prompt does not stall "
                   "other streams (default: %(default)s)")
    s.add_argument("-t", "--threads", type=int, metavar="N",
                   help="threads pyexec's kernels may use (default: PYEXEC_NUM_THREADS, else every CPU)")
    s.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"),
                   help="uvicorn's log level (default: %(default)s)")
    return s


def serve(args: argparse.Namespace) -> int:
    try:
        import uvicorn
    except ImportError:
        print("pyexec serve: needs FastAPI and uvicorn: pip install 'pyexec[serve]'", file=sys.stderr)
        return 2
    for name in ("max_sessions", "prefill_chunk"):
        if getattr(args, name) < 1:
            print(f"pyexec serve: --{name.replace('_', '-')} must be at least 1", file=sys.stderr)
            return 2
    if args.max_queue < 0:
        print("pyexec serve: --max-queue must be 0 or more", file=sys.stderr)
        return 2
    for what, path in (("model", args.model), ("tokenizer", args.tokenizer), ("data file", args.data_path),
                       ("chat template", args.chat_template)):
        if path is not None and not os.path.isfile(path):
            print(f"pyexec serve: no such {what} file: {path}", file=sys.stderr)
            return 2
    if args.threads is not None:
        from .. import set_num_threads
        set_num_threads(args.threads)
    from .. import Error

    try:
        backend = Backend(args.model, args.tokenizer, data_path=args.data_path, model_id=args.model_id,
                          chat_template=args.chat_template, max_sessions=args.max_sessions,
                          max_queue=args.max_queue, prefill_chunk=args.prefill_chunk)
    except Error as exc:
        print(f"pyexec serve: {args.model}: {exc}", file=sys.stderr)
        return 1
    except (OSError, ValueError, ImportError) as exc:
        print(f"pyexec serve: {exc}", file=sys.stderr)
        return 1
    from ._app import build_app

    app = build_app(backend)
    family = socket.AF_INET6 if ":" in args.host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((args.host, args.port))
        sock.listen(2048)    # connections wait in the backlog from here on, before uvicorn starts
    except OSError as exc:
        print(f"pyexec serve: cannot listen on {args.host}:{args.port}: {exc.strerror}", file=sys.stderr)
        backend.close()
        return 1
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level=args.log_level, timeout_graceful_shutdown=5))
    host = f"[{args.host}]" if family == socket.AF_INET6 else args.host
    print(f"pyexec serve: {backend.model.model_id} (context {backend.model.max_context} tokens, "
          f"{args.max_sessions} sessions) on http://{host}:{port}/v1", file=sys.stderr, flush=True)
    try:
        server.run(sockets=[sock])
    finally:
        backend.close()
        sock.close()
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="pyexec")
    sub = parser.add_subparsers(dest="command", required=True)
    add_parser(sub)
    return serve(parser.parse_args(argv))


if __name__ == "__main__":
    sys.exit(main(["serve", *sys.argv[1:]]))
