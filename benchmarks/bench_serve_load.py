"""`pyexec serve` under many concurrent streaming clients.

    python benchmarks/bench_serve_load.py                      # 1, 4 and 16 concurrent sessions
    python benchmarks/bench_serve_load.py --load               # + 32 clients streaming for 60 s
    python benchmarks/bench_serve_load.py --model M.pte --tokenizer tokenizer.json [--threads 1]

Starts the server as a subprocess on 127.0.0.1 (an ephemeral port) with as
many sessions as the largest concurrency, then:

- concurrency rows: C clients stream greedy completions at once, each
  request after the last, for --seconds: aggregate tokens/s (completion
  tokens of every request over the wall time) and the inter-token latency a
  client sees (time between successive streamed chunks, p50 and p99 over
  every stream; with the tiny model, which decodes a token in tens of
  microseconds, several chunks often arrive in one read, so the p50 is
  near 0 and the p99 is what the interleaving costs);
- --load: 32 clients stream for --load-seconds (60 by default); every
  request must succeed and its text equal the same request's answer run
  alone (each prompt's answer taken first, sequentially, from the same
  server), token counts included: a lost request or token is a failure
  (exit status 1).

Without --model, the tiny random-weight Llama of the tests (dim 64, two
layers, 512 cache positions; a byte-level BPE tokenizer trained on a few
sentences) is exported into the tests' export cache. Client and server
share the machine: on a 2-core machine the numbers are noisy and the
clients' own cost is part of them."""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from _common import ROOT, add_json_option, print_table, write_json

PROMPTS = [[5 + 7 * i + j for j in range(3 + i % 9)] for i in range(40)]


def tiny_model(directory: Path) -> tuple[Path, Path]:
    from support.llm_runner import llm_program, write_tokenizer

    pte = directory / "model.pte"
    pte.write_bytes(llm_program(max_seq_len=64, max_context_len=512))
    return pte, write_tokenizer(directory / "tok")


@contextmanager
def server(model: Path, tokenizer: Path, sessions: int, threads: int | None) -> Iterator[str]:
    cmd = [sys.executable, "-m", "pyexec", "serve", str(model), "--tokenizer", str(tokenizer), "--port", "0",
           "--max-sessions", str(sessions), "--max-queue", "256", "--log-level", "warning"]
    if threads is not None:
        cmd += ["--threads", str(threads)]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
    assert proc.stderr is not None
    url = None
    log = []
    deadline = time.monotonic() + 120
    while url is None and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        log.append(line)
        m = re.search(r"on (http://127\.0\.0\.1:\d+)/v1", line)
        url = m.group(1) if m else None
    if url is None:
        proc.kill()
        raise SystemExit("the server did not start:\n" + "".join(log))
    threading.Thread(target=lambda: [None for _ in proc.stderr or []], daemon=True).start()
    try:
        yield url
    finally:
        proc.kill()
        proc.wait()


def stream(client: Any, prompt: list[int], max_tokens: int) -> tuple[str, int, list[float]]:
    """(text, completion tokens, gaps between successive chunks in seconds)."""
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    pieces: list[str] = []
    stamps: list[float] = []
    tokens = -1
    with client.stream("POST", "/v1/completions", json=body) as r:
        if r.status_code != 200:
            raise RuntimeError(f"HTTP {r.status_code}: {r.read().decode()}")
        done = False
        for line in r.iter_lines():
            if not line.startswith("data: "):
                continue
            data = line[6:]
            if data == "[DONE]":
                done = True
                break
            chunk = json.loads(data)
            if "error" in chunk:
                raise RuntimeError(f"error in the stream: {chunk['error']}")
            if chunk.get("usage"):
                tokens = chunk["usage"]["completion_tokens"]
            for ch in chunk["choices"]:
                if ch["text"]:
                    stamps.append(time.perf_counter())
                    pieces.append(ch["text"])
        if not done:
            raise RuntimeError("the stream ended without [DONE]")
    return "".join(pieces), tokens, [b - a for a, b in zip(stamps, stamps[1:])]


def concurrency_row(url: str, clients: int, seconds: float, max_tokens: int) -> list[str]:
    import httpx

    gaps: list[float] = []
    tokens = [0] * clients
    requests = [0] * clients
    stop_at = time.perf_counter() + seconds

    def client(k: int) -> None:
        with httpx.Client(base_url=url, timeout=300) as c:
            i = k
            while time.perf_counter() < stop_at:
                _, n, g = stream(c, PROMPTS[i % len(PROMPTS)], max_tokens)
                tokens[k] += n
                requests[k] += 1
                gaps.extend(g)
                i += clients

    t0 = time.perf_counter()
    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(client, range(clients)))
    wall = time.perf_counter() - t0
    q = statistics.quantiles(gaps, n=100) if len(gaps) >= 2 else [float("nan")] * 99
    return [str(clients), str(sum(requests)), f"{sum(tokens) / wall:.0f}", f"{q[49] * 1e3:.2f}", f"{q[98] * 1e3:.2f}"]


def load_test(url: str, clients: int, seconds: float, max_tokens: int) -> tuple[int, int, list[str]]:
    """(requests, tokens, failures): every answer checked against the solo one."""
    import httpx

    solo: dict[int, tuple[str, int]] = {}
    with httpx.Client(base_url=url, timeout=300) as c:
        for i, p in enumerate(PROMPTS):
            text, n, _ = stream(c, p, max_tokens)
            solo[i] = (text, n)
    failures: list[str] = []
    counts = [0] * clients
    tokens = [0] * clients
    stop_at = time.perf_counter() + seconds

    def client(k: int) -> None:
        with httpx.Client(base_url=url, timeout=300) as c:
            i = k
            while time.perf_counter() < stop_at:
                j = i % len(PROMPTS)
                try:
                    text, n, _ = stream(c, PROMPTS[j], max_tokens)
                except Exception as exc:  # noqa: BLE001 - counted as a lost request
                    failures.append(f"client {k}, prompt {j}: {exc}")
                else:
                    if (text, n) != solo[j]:
                        failures.append(f"client {k}, prompt {j}: {n} tokens {text!r}, alone {solo[j][1]} "
                                        f"tokens {solo[j][0]!r}")
                    counts[k] += 1
                    tokens[k] += n
                i += clients

    with ThreadPoolExecutor(clients) as pool:
        list(pool.map(client, range(clients)))
    return sum(counts), sum(tokens), failures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="the .pte (default: the tests' tiny Llama)")
    parser.add_argument("--tokenizer", type=Path, help="its tokenizer (with --model)")
    parser.add_argument("--threads", type=int, help="the server's kernel threads")
    parser.add_argument("--concurrency", type=int, nargs="+", default=[1, 4, 16])
    parser.add_argument("--seconds", type=float, default=10.0, help="per concurrency row (default: %(default)s)")
    parser.add_argument("--max-tokens", type=int, default=64, help="per request (default: %(default)s)")
    parser.add_argument("--load", action="store_true", help="also the load test: many clients, outputs checked")
    parser.add_argument("--load-clients", type=int, default=32)
    parser.add_argument("--load-seconds", type=float, default=60.0)
    add_json_option(parser)
    args = parser.parse_args()
    if (args.model is None) != (args.tokenizer is None):
        parser.error("--model and --tokenizer go together")
    with tempfile.TemporaryDirectory() as d:
        model, tokenizer = (args.model, args.tokenizer) if args.model else tiny_model(Path(d))
        sessions = max([*args.concurrency, args.load_clients if args.load else 1])
        status = 0
        with server(model, tokenizer, sessions, args.threads) as url:
            rows = [concurrency_row(url, c, args.seconds, args.max_tokens) for c in args.concurrency]
            print_table(f"pyexec serve, {model.name}: streaming greedy completions of {args.max_tokens} tokens "
                        f"for {args.seconds:g} s per row", ["sessions", "requests", "tokens/s",
                                                            "inter-token p50 ms", "p99 ms"], rows)
            if args.load:
                n, tokens, failures = load_test(url, args.load_clients, args.load_seconds, args.max_tokens)
                print(f"load: {args.load_clients} clients for {args.load_seconds:g} s: {n} requests, {tokens} "
                      f"tokens, {len(failures)} lost or different")
                for f in failures[:10]:
                    print("  " + f)
                status = 1 if failures or n == 0 else 0
        write_json(args.json, "serve_load", {"model": str(model), "max_tokens": args.max_tokens})
        return status


if __name__ == "__main__":
    sys.exit(main())
