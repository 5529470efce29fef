"""`pyexec serve` over real HTTP on 127.0.0.1 (an ephemeral port), started as
a subprocess and killed at teardown, with a tiny random-weight Llama
exported by export_llm's API (512 cache positions) and a byte-level BPE
tokenizer trained here on a few sentences (support.llm_runner).

Expected outputs come from the engine run directly in this process
(pyexec.llm's LLMProgram: one session, the prompt prefilled, then greedy
decoding), never from the server: each greedy answer, alone or among
concurrent streams, after a disconnect or through a reused cache, is those
tokens' text."""

from __future__ import annotations

import json
import os
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest
from support import ROOT

httpx = pytest.importorskip("httpx")
openai = pytest.importorskip("openai")
pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

pytestmark = pytest.mark.slow  # export_llm exports the model when not cached; servers started as subprocesses

CONTEXT = 512
MODEL_ID = "tiny-llama"
STARTUP_S = 60


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    from support.llm_runner import llm_program, write_tokenizer

    d = tmp_path_factory.mktemp("serve")
    (d / "model.pte").write_bytes(llm_program(max_seq_len=64, max_context_len=CONTEXT))
    return {"model": d / "model.pte", "tokenizer": write_tokenizer(d / "tok"), "dir": d}


class Server:
    def __init__(self, proc: subprocess.Popen[str], url: str, log: list[str]) -> None:
        self.proc, self.url, self.log = proc, url, log
        self.client = httpx.Client(base_url=url.rsplit("/v1", 1)[0], timeout=60)

    def metrics(self) -> dict[str, Any]:
        r = httpx.get(self.url.rsplit("/v1", 1)[0] + "/metrics", timeout=10)
        r.raise_for_status()
        data: dict[str, Any] = r.json()
        return data

    def post(self, path: str, body: Any) -> Any:
        return self.client.post(path, json=body)


def _drain(stream: Any, sink: list[str]) -> None:
    for line in stream:
        sink.append(line)


def start_server(files: dict[str, Path], *extra: str) -> Iterator[Server]:
    cmd = [sys.executable, "-m", "pyexec", "serve", str(files["model"]), "--tokenizer", str(files["tokenizer"]),
           "--port", "0", "--model-id", MODEL_ID, "--log-level", "warning", *extra]
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen(cmd, stderr=subprocess.PIPE, stdout=subprocess.DEVNULL, text=True, env=env)
    assert proc.stderr is not None
    log: list[str] = []
    url = None
    deadline = time.monotonic() + STARTUP_S
    while url is None and time.monotonic() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        log.append(line)
        m = re.search(r"on (http://127\.0\.0\.1:\d+/v1)", line)
        if m:
            url = m.group(1)
    if url is None:
        proc.kill()
        raise AssertionError("pyexec serve did not start:\n" + "".join(log))
    threading.Thread(target=_drain, args=(proc.stderr, log), daemon=True).start()
    server = Server(proc, url, log)
    try:
        yield server
    finally:
        server.client.close()
        proc.kill()
        proc.wait(timeout=10)


@pytest.fixture(scope="module")
def server(files: dict[str, Path]) -> Iterator[Server]:
    yield from start_server(files, "--max-sessions", "4", "--max-queue", "16")


@pytest.fixture(scope="module")
def engine(files: dict[str, Path]) -> Any:
    from pyexec.llm._engine import LLMProgram
    from pyexec.llm._tokenizer import load_tokenizer

    program = LLMProgram(str(files["model"]))
    tok = load_tokenizer(str(files["tokenizer"]))
    eos = {e for e in program.eos_ids if program.vocab_size is None or e < program.vocab_size}
    eos.add(tok.eos_id)
    return program, tok, eos


def greedy(engine: Any, prompt: list[int], max_tokens: int) -> list[int]:
    """The engine alone: one fresh session, the prompt prefilled at once, then argmax steps."""
    program, _, eos = engine
    session = program.new_session()
    logits = session.prefill(prompt)
    out: list[int] = []
    while len(out) < max_tokens:
        t = int(logits.argmax())
        if t in eos:
            break
        out.append(t)
        if len(out) < max_tokens:
            logits = session.decode(t)
    return out


def chat_prompt(engine: Any, files: dict[str, Path], messages: list[dict[str, str]]) -> list[int]:
    """The chat prompt as the docs state it: BOS, then the rendered template's ids."""
    from pyexec.llm._tokenizer import apply_chat_template

    program, tok, _ = engine
    text = apply_chat_template(messages, None, str(files["tokenizer"].parent))
    ids = tok.encode(text)
    bos = next(b for b in (program.bos_id, tok.bos_id) if b is not None and 0 <= b < (program.vocab_size or 1 << 30))
    return ids if ids[:1] == [bos] else [bos, *ids]


def sse(lines: Iterator[str]) -> list[Any]:
    """The data payloads of a server-sent event stream, up to [DONE] (which must come)."""
    out: list[Any] = []
    for line in lines:
        if not line.startswith("data: "):
            assert line == "", f"unexpected line in the stream: {line!r}"
            continue
        payload = line[len("data: "):]
        if payload == "[DONE]":
            return out
        out.append(json.loads(payload))
    raise AssertionError("the stream ended without data: [DONE]")


PROMPTS = [[5 + 7 * i + j for j in range(3 + i)] for i in range(8)]


# ---- the OpenAI client -----------------------------------------------------------


def test_openai_client_chat_and_stream(server: Server, engine: Any, files: dict[str, Path]) -> None:
    client = openai.OpenAI(base_url=server.url, api_key="unused", max_retries=0)
    assert [m.id for m in client.models.list().data] == [MODEL_ID]
    messages = [{"role": "user", "content": "Hello world, this is a tiny test."}]
    prompt = chat_prompt(engine, files, messages)
    expected = engine[1].decode(greedy(engine, prompt, 24))

    r = client.chat.completions.create(model=MODEL_ID, messages=messages, max_tokens=24, temperature=0)  # type: ignore[arg-type]
    assert r.object == "chat.completion" and r.model == MODEL_ID
    assert r.choices[0].message.role == "assistant"
    assert r.choices[0].message.content == expected
    assert r.usage is not None and r.usage.prompt_tokens == len(prompt)
    assert r.usage.completion_tokens == len(greedy(engine, prompt, 24))
    assert r.choices[0].finish_reason == ("length" if r.usage.completion_tokens == 24 else "stop")

    stream = client.chat.completions.create(model=MODEL_ID, messages=messages, max_completion_tokens=24,  # type: ignore[arg-type]
                                            temperature=0, stream=True, stream_options={"include_usage": True})
    pieces, finish, usage = [], None, None
    for c in stream:
        if c.usage is not None:
            usage = c.usage
        for ch in c.choices:
            pieces.append(ch.delta.content or "")
            finish = ch.finish_reason or finish
    assert "".join(pieces) == expected
    assert finish == r.choices[0].finish_reason
    assert usage is not None and usage.completion_tokens == r.usage.completion_tokens
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_completions_greedy_match_the_engine(server: Server, engine: Any) -> None:
    for prompt in PROMPTS[:3]:
        expected = greedy(engine, prompt, 20)
        r = server.post("/v1/completions", {"model": MODEL_ID, "prompt": prompt, "max_tokens": 20,
                                            "temperature": 0})
        assert r.status_code == 200, r.text
        body = r.json()
        assert body["object"] == "text_completion"
        assert body["choices"][0]["text"] == engine[1].decode(expected)
        assert body["usage"]["completion_tokens"] == len(expected)
        assert body["usage"]["prompt_tokens"] == len(prompt)


def test_sampling_follows_the_seed(server: Server, engine: Any) -> None:
    """temperature, top_p, top_k and seed reach the engine's Sampler: the
    tokens are those of the engine sampling with the same settings."""
    from pyexec.llm import Sampler

    program, tok, eos = engine
    prompt = PROMPTS[4]
    for seed in (7, 8):
        sampler = Sampler(temperature=0.9, top_k=50, top_p=0.95, seed=seed)
        session = program.new_session()
        logits = session.prefill(prompt)
        want: list[int] = []
        while len(want) < 20:
            t = sampler.sample(logits)
            if t in eos:
                break
            want.append(t)
            logits = session.decode(t)
        r = server.post("/v1/completions", {"prompt": prompt, "max_tokens": 20, "temperature": 0.9, "top_p": 0.95,
                                            "top_k": 50, "seed": seed})
        assert r.status_code == 200, r.text
        assert r.json()["choices"][0]["text"] == tok.decode(want), f"seed {seed}"


def test_stop_strings(server: Server, engine: Any) -> None:
    """A stop string cuts the text before it, streamed (held back while it
    may still be forming) or not, and the finish reason is "stop"."""
    prompt = PROMPTS[3]
    text = engine[1].decode(greedy(engine, prompt, 40))
    k = len(text) // 2
    stop = text[k:k + 3]
    cut = text.find(stop)
    assert 0 < cut <= k
    body = {"model": MODEL_ID, "prompt": prompt, "max_tokens": 40, "temperature": 0, "stop": [stop, "never-seen"]}
    r = server.post("/v1/completions", body)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["text"] == text[:cut]
    assert r.json()["choices"][0]["finish_reason"] == "stop"
    with server.client.stream("POST", "/v1/completions", json={**body, "stream": True}) as s:
        chunks = sse(s.iter_lines())
    assert "".join(c["choices"][0]["text"] for c in chunks) == text[:cut]
    assert chunks[-1]["choices"][0]["finish_reason"] == "stop"
    assert all(stop not in c["choices"][0]["text"] for c in chunks)


# ---- errors --------------------------------------------------------------------------


def _error(r: Any, status: int, code: str | None = None, param: str | None = None) -> dict[str, Any]:
    assert r.status_code == status, r.text
    err: dict[str, Any] = r.json()["error"]
    assert set(err) == {"message", "type", "param", "code"}
    assert err["message"] and err["type"]
    if code is not None:
        assert err["code"] == code, err
    if param is not None:
        assert err["param"] == param, err
    return err


def test_errors(server: Server) -> None:
    msgs = [{"role": "user", "content": "hi"}]
    r = server.client.post("/v1/chat/completions", content=b"{not json", headers={"Content-Type": "application/json"})
    _error(r, 400, "invalid_json")
    _error(server.post("/v1/chat/completions", {"messages": "hi"}), 400, "invalid_type", "messages")
    _error(server.post("/v1/chat/completions", {"messages": msgs, "temperature": "hot"}), 400, "invalid_type",
           "temperature")
    _error(server.post("/v1/chat/completions", {"messages": msgs, "max_tokens": "5"}), 400, "invalid_type",
           "max_tokens")
    _error(server.post("/v1/chat/completions", {"messages": [{"role": "robot", "content": "x"}]}), 400,
           "invalid_value", "messages[0].role")
    err = _error(server.post("/v1/chat/completions", {"model": "gpt-4", "messages": msgs}), 404, "model_not_found")
    assert "gpt-4" in err["message"]
    _error(server.client.get("/v1/models/gpt-4"), 404, "model_not_found")
    err = _error(server.post("/v1/chat/completions", {"messages": msgs, "max_tokens": -3}), 400,
                 "integer_below_min_value", "max_tokens")
    assert "-3" in err["message"]
    _error(server.post("/v1/chat/completions", {"messages": msgs, "n": 2}), 400, "unsupported_value", "n")
    _error(server.post("/v1/chat/completions", {"messages": msgs, "temperature": 3}), 400, "invalid_value",
           "temperature")
    _error(server.post("/v1/completions", {"prompt": [1, 2, 300000]}), 400, "invalid_value", "prompt")
    err = _error(server.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "word " * 2000}]}),
                 400, "context_length_exceeded")
    assert str(CONTEXT) in err["message"]
    err = _error(server.post("/v1/completions", {"prompt": [5] * 500, "max_tokens": 100}), 400,
                 "context_length_exceeded", "max_tokens")
    assert "600" in err["message"]
    # streamed requests are refused before the stream starts
    _error(server.post("/v1/chat/completions", {"messages": msgs, "stream": True, "max_tokens": 0}), 400,
           "integer_below_min_value")
    # the server still answers
    assert server.post("/v1/completions", {"prompt": [5, 6], "max_tokens": 2, "temperature": 0}).status_code == 200


# ---- many clients ----------------------------------------------------------------------


def _stream_completion(url: str, prompt: list[int], max_tokens: int, started: threading.Event | None = None
                       ) -> tuple[str, dict[str, Any], float, float]:
    """(text, usage, time of the first text chunk, time of the last); sets
    `started` at the first text chunk."""
    body = {"model": MODEL_ID, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "stream": True,
            "stream_options": {"include_usage": True}}
    first = last = 0.0
    pieces: list[str] = []
    usage: dict[str, Any] = {}
    with httpx.Client(base_url=url, timeout=120) as c, c.stream("POST", "/completions", json=body) as s:
        assert s.status_code == 200, s.read()
        for chunk in sse(s.iter_lines()):
            if chunk.get("usage"):
                usage = chunk["usage"]
            for ch in chunk["choices"]:
                if ch["text"]:
                    last = time.monotonic()
                    first = first or last
                    if started is not None:
                        started.set()
                pieces.append(ch["text"])
    return "".join(pieces), usage, first, last


def test_concurrent_streams_equal_solo(server: Server, engine: Any) -> None:
    """8 clients streaming at once (4 sessions: some wait for one): each gets
    exactly its solo greedy answer, every token."""
    n = 48
    expected = [greedy(engine, p, n) for p in PROMPTS]
    with ThreadPoolExecutor(len(PROMPTS)) as pool:
        results = list(pool.map(lambda p: _stream_completion(server.url, p, n), PROMPTS))
    for p, want, (text, usage, _, _) in zip(PROMPTS, expected, results):
        assert text == engine[1].decode(want), f"prompt {p}"
        assert usage["completion_tokens"] == len(want)
    assert server.metrics()["sessions"] == 4    # the LRU holds --max-sessions caches, no more


def test_short_request_not_blocked_by_long(engine: Any) -> None:
    """The scheduler (in this process, no HTTP: the tiny model decodes a token
    in tens of microseconds, too fast to time over sockets) steps its active
    requests round-robin: a 3-token request admitted together with a
    400-token one ends first, the long one's text arriving before and after;
    both are their solo greedy answers."""
    from pyexec.llm._sampling import Sampler
    from pyexec.llm._scheduler import DoneEvent, Request, Scheduler, TextEvent
    from pyexec.llm._tokenizer import StreamDecoder

    program, tok, eos = engine
    sched = Scheduler(program, tok, lambda: StreamDecoder(tok), eos_ids=eos, max_sessions=2, max_queue=0)
    log: list[tuple[str, Any]] = []
    done = threading.Semaphore(0)

    def emit(name: str) -> Any:
        def f(event: Any) -> None:
            log.append((name, event))
            if not isinstance(event, TextEvent):
                done.release()
        return f

    try:
        with sched._cond:      # both queued before the scheduler thread admits either
            sched.submit(Request(PROMPTS[0], 400, Sampler(), emit("long")))
            sched.submit(Request(PROMPTS[1], 3, Sampler(), emit("short")))
        assert done.acquire(timeout=60) and done.acquire(timeout=60)
    finally:
        sched.close()
    ends = [name for name, e in log if isinstance(e, DoneEvent)]
    assert ends == ["short", "long"], log[-3:]
    short_end = next(i for i, (name, e) in enumerate(log) if name == "short" and isinstance(e, DoneEvent))
    assert any(name == "long" for name, _ in log[:short_end]), "the long request did not start before"
    for name, prompt, n in (("long", PROMPTS[0], 400), ("short", PROMPTS[1], 3)):
        text = "".join(e.text for who, e in log if who == name and isinstance(e, TextEvent))
        assert text == tok.decode(greedy(engine, prompt, n)), name


def test_chat_template_file(files: dict[str, Path], engine: Any, tmp_path: Path) -> None:
    """--chat-template FILE renders the messages (Jinja, Hugging Face style)."""
    from pyexec.llm import apply_chat_template

    template = "{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}<assistant>"
    (tmp_path / "t.jinja").write_text(template)
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "The quick brown fox"}]
    program, tok, _ = engine
    ids = tok.encode(apply_chat_template(messages, template, None))
    bos = next(b for b in (program.bos_id, tok.bos_id) if b is not None and 0 <= b < tok.vocab_size)
    prompt = ids if ids[:1] == [bos] else [bos, *ids]
    assert prompt != chat_prompt(engine, files, messages)   # not the default template's
    for srv in start_server(files, "--chat-template", str(tmp_path / "t.jinja")):
        r = srv.post("/v1/chat/completions", {"messages": messages, "max_tokens": 10, "temperature": 0}).json()
        assert r["usage"]["prompt_tokens"] == len(prompt)
        assert r["choices"][0]["message"]["content"] == tok.decode(greedy(engine, prompt, 10))


def test_full_queue_is_429(files: dict[str, Path], engine: Any) -> None:
    """One session, one waiting place: a burst of long requests gets 429s
    (OpenAI's error body, Retry-After); those admitted complete in full.
    Each client has its connection open before the burst, and all send at
    once (a barrier), so that the requests overlap however fast a
    generation is: sent one by one, each could finish before the next
    arrives."""
    for srv in start_server(files, "--max-sessions", "1", "--max-queue", "1"):
        body = {"model": MODEL_ID, "prompt": PROMPTS[2], "max_tokens": 400, "temperature": 0}
        clients = [httpx.Client(base_url=srv.url, timeout=120) for _ in range(10)]
        for c in clients:
            assert c.get("/models").status_code == 200  # the connection, kept alive
        barrier = threading.Barrier(len(clients))

        def burst(c: httpx.Client, barrier: threading.Barrier = barrier, body: dict = body) -> httpx.Response:
            barrier.wait(timeout=30)
            return c.post("/completions", json=body)

        try:
            with ThreadPoolExecutor(len(clients)) as pool:
                responses = list(pool.map(burst, clients))
        finally:
            for c in clients:
                c.close()
        codes = sorted(r.status_code for r in responses)
        assert 429 in codes and 200 in codes, codes
        assert set(codes) <= {200, 429}, codes
        want = engine[1].decode(greedy(engine, PROMPTS[2], 400))
        for r in responses:
            if r.status_code == 429:
                _error(r, 429, "queue_full")
                assert r.headers.get("retry-after")
            else:
                assert r.json()["choices"][0]["text"] == want
        assert srv.metrics()["rejected"] == codes.count(429)


def test_disconnect_stops_generation_and_session_continues(server: Server, engine: Any) -> None:
    """A client that leaves after the first chunk (as three other long streams
    start, which share the steps and so slow the rest of its generation)
    stops its generation; the others finish with their solo answers, and its
    session, reused by the same prompt, gives the solo answer."""
    prompt = PROMPTS[5]
    before = server.metrics()
    with ThreadPoolExecutor(3) as pool:
        body = {"model": MODEL_ID, "prompt": prompt, "max_tokens": 480, "temperature": 0, "stream": True}
        with httpx.Client(base_url=server.url, timeout=60) as c, c.stream("POST", "/completions", json=body) as s:
            first = next(line for line in s.iter_lines() if line.startswith("data: "))
            assert json.loads(first[6:])["choices"][0]["text"]
            # the other streams start as this client leaves
            others = [pool.submit(_stream_completion, server.url, p, 480) for p in PROMPTS[:3]]
        results = [f.result(timeout=120) for f in others]
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        m = server.metrics()
        if m["cancelled"] > before["cancelled"] and m["active"] == 0:
            break
        time.sleep(0.02)
    assert m["cancelled"] == before["cancelled"] + 1, m
    for p, (text, _, _, _) in zip(PROMPTS[:3], results):
        assert text == engine[1].decode(greedy(engine, p, 480))
    others_n = sum(usage["completion_tokens"] for _, usage, _, _ in results)
    generated = m["generated_tokens"] - before["generated_tokens"] - others_n
    assert generated < len(greedy(engine, prompt, 480)), "the generation ran to its end after the client left"
    # the session stays usable: the same prompt again reuses its cache and gives the solo answer
    r = server.post("/v1/completions", {"model": MODEL_ID, "prompt": prompt, "max_tokens": 30, "temperature": 0})
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["text"] == engine[1].decode(greedy(engine, prompt, 30))
    assert r.json()["usage"]["prompt_tokens_details"]["cached_tokens"] == len(prompt) - 1


def test_prefix_reuse(server: Server, engine: Any, files: dict[str, Path]) -> None:
    """A second chat turn (the first turn's prompt and reply, then a new user
    message) prefills only what the cached session lacks; its answer is the
    engine's for the whole prompt."""
    turn1 = [{"role": "user", "content": "Once upon a time there was a fox."}]
    r1 = server.post("/v1/chat/completions", {"messages": turn1, "max_tokens": 16, "temperature": 0}).json()
    reply = r1["choices"][0]["message"]["content"]
    turn2 = [*turn1, {"role": "assistant", "content": reply}, {"role": "user", "content": "And then?"}]
    prompt2 = chat_prompt(engine, files, turn2)
    before = server.metrics()
    r2 = server.post("/v1/chat/completions", {"messages": turn2, "max_tokens": 16, "temperature": 0}).json()
    after = server.metrics()
    usage = r2["usage"]
    assert usage["prompt_tokens"] == len(prompt2)
    cached = usage["prompt_tokens_details"]["cached_tokens"]
    # the first turn's prompt (up to where the reply's text re-tokenizes differently) came from the cache
    assert cached >= r1["usage"]["prompt_tokens"] - 2, (cached, r1["usage"])
    assert after["prefilled_tokens"] - before["prefilled_tokens"] == len(prompt2) - cached
    assert after["cached_tokens"] - before["cached_tokens"] == cached
    assert r2["choices"][0]["message"]["content"] == engine[1].decode(greedy(engine, prompt2, 16))


# ---- ExecuTorch's conformance suite, and ExecuTorch's server with the pyexec worker -----------

ET_SERVER = "executorch.examples.llm_server"


def _conformance(url: str, deselect: str, tmp: Path) -> dict[str, str]:
    import importlib.util

    spec = importlib.util.find_spec(ET_SERVER)
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("executorch's examples/llm_server is not installed")
    test = Path(next(iter(spec.submodule_search_locations))) / "conformance" / "test_openai_contract.py"
    report = tmp / "report.txt"
    env = dict(os.environ, OPENAI_BASE_URL=url, OPENAI_MODEL=MODEL_ID)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-rA", str(test),
                           "-k", deselect, "--rootdir", str(tmp)], env=env, capture_output=True, text=True,
                          timeout=300, cwd=tmp)
    report.write_text(proc.stdout + proc.stderr)
    return {m.group(2): m.group(1)
            for m in re.finditer(r"^(PASSED|FAILED|SKIPPED|ERROR) \S*::(\w+)", proc.stdout, re.M)}


CONFORMANCE = ["test_models_listing", "test_chat_completion_nonstreaming", "test_chat_completion_streaming",
               "test_multibyte_streaming_integrity", "test_usage_chunk_in_stream", "test_error_body_shape"]


def test_executorch_conformance_against_pyexec_serve(server: Server, tmp_path: Path) -> None:
    """ExecuTorch's language-neutral OpenAI contract tests, all but the tool
    call (a random-weight model calls no tools; this server refuses tools)."""
    outcomes = _conformance(server.url, "not tool_call", tmp_path)
    assert outcomes == {name: "PASSED" for name in CONFORMANCE}, (tmp_path / "report.txt").read_text()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_executorch_server_with_pyexec_worker(files: dict[str, Path], engine: Any, tmp_path: Path) -> None:
    """ExecuTorch's own FastAPI server, unchanged, driving `python -m
    pyexec.llm.worker` over its JSONL protocol: its conformance tests but the
    tool call, and a greedy answer equal to the engine's."""
    pytest.importorskip(ET_SERVER + ".python.server")
    worker = tmp_path / "pyexec-llm-worker"
    worker.write_text(f"#!/bin/sh\nexec {sys.executable} -m pyexec.llm.worker \"$@\"\n")
    worker.chmod(0o755)
    port = _free_port()
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    proc = subprocess.Popen([sys.executable, "-m", ET_SERVER + ".python.server", "--worker-bin", str(worker),
                             "--model-path", str(files["model"]), "--tokenizer-path", str(files["tokenizer"]),
                             "--allow-chatml-fallback", "--model-id", MODEL_ID, "--host", "127.0.0.1",
                             "--port", str(port)], env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    log: list[str] = []
    assert proc.stderr is not None
    threading.Thread(target=_drain, args=(proc.stderr, log), daemon=True).start()
    url = f"http://127.0.0.1:{port}/v1"
    try:
        deadline = time.monotonic() + STARTUP_S
        while time.monotonic() < deadline:
            try:
                if httpx.get(url + "/models", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        else:
            raise AssertionError("ExecuTorch's server did not start:\n" + "".join(log))
        # its context check needs a Hugging Face tokenizer (transformers), so an
        # over-long prompt is the worker's error, which the server reports as a 500
        outcomes = _conformance(url, "not tool_call and not error_body_shape", tmp_path)
        want = {name: "PASSED" for name in CONFORMANCE if name != "test_error_body_shape"}
        assert outcomes == want, (tmp_path / "report.txt").read_text() + "".join(log[-30:])

        messages = [{"role": "user", "content": "Hello world"}]
        text = "<|im_start|>user\nHello world<|im_end|>\n<|im_start|>assistant\n"   # its ChatML fallback
        prompt = engine[1].encode(text)
        bos = engine[0].bos_id if engine[0].bos_id is not None and engine[0].bos_id < 300 else engine[1].bos_id
        prompt = prompt if prompt[:1] == [bos] else [bos, *prompt]
        r = httpx.post(url + "/chat/completions", json={"model": MODEL_ID, "messages": messages, "max_tokens": 12,
                                                        "temperature": 0}, timeout=60)
        assert r.status_code == 200, r.text
        want_text = engine[1].decode(greedy(engine, prompt, 12))
        got = r.json()["choices"][0]["message"]["content"]
        assert got == (want_text or None)
        assert r.json()["usage"]["prompt_tokens"] == len(prompt)
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


def test_worker_protocol_with_executorch_client(files: dict[str, Path], engine: Any, tmp_path: Path) -> None:
    """`python -m pyexec.llm.worker` driven by ExecuTorch's own WorkerClient:
    readiness, named sessions (open/reset/close, capacity), warm resume of a
    session's tokens, token-id prompt segments, structured errors, and
    cancellation through the control pipe."""
    wc = pytest.importorskip(ET_SERVER + ".python.worker_client")
    from dataclasses import dataclass, field

    @dataclass
    class Config:
        max_new_tokens: int = 12
        temperature: float = 0.0
        top_p: float = 1.0
        top_k: int = 0
        seed: int = 0
        stop: list[str] = field(default_factory=list)
        session_id: str | None = None
        prompt_segments: list[Any] | None = None

    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    worker = wc.spawn_worker([sys.executable, "-m", "pyexec.llm.worker", "--model_path", str(files["model"]),
                              "--tokenizer_path", str(files["tokenizer"]), "--max_sessions", "3"], env=env)
    _, tok, _ = engine

    def run(prompt: str | None, config: Config) -> tuple[str, Any]:
        out: list[str] = []
        stats: list[Any] = []
        worker.generate(prompt, config, out.append, stats.append)
        return "".join(out), stats[0]

    try:
        assert worker.max_named_sessions == 2 and worker.supports_cancel
        worker.open_session("a")
        worker.open_session("a")      # idempotent
        worker.open_session("b")
        with pytest.raises(wc.WorkerError) as e:
            worker.open_session("c")
        assert e.value.code == "capacity_exhausted"

        # the worker puts the model's BOS first, as for a rendered prompt
        bos = next(b for b in (engine[0].bos_id, tok.bos_id) if b is not None and 0 <= b < tok.vocab_size)
        ids = PROMPTS[6]
        text, s1 = run(None, Config(session_id="a", prompt_segments=[{"ids": ids}]))
        want = greedy(engine, [bos, *ids], 12)
        assert text == tok.decode(want) and s1.generated_token_ids == want
        assert (s1.num_prompt_tokens, s1.reused_prompt_tokens, s1.session_reset_reason) == (len(ids) + 1, 0, "new")
        # the next turn: the session's tokens (prompt and reply) and more
        turn2 = [*ids, *want, 40, 41]
        text2, s2 = run(None, Config(session_id="a", prompt_segments=[{"ids": ids + want}, {"ids": [40, 41]}]))
        assert text2 == tok.decode(greedy(engine, [bos, *turn2], 12))
        assert s2.session_reset_reason == "exact_prefix"
        assert s2.reused_prompt_tokens == len(ids) + len(want)   # BOS, the prompt, the reply but its last token
        assert s2.prefilled_prompt_tokens == 3
        worker.reset_session("a")
        _, s3 = run(None, Config(session_id="a", prompt_segments=[{"ids": turn2}]))
        assert s3.reused_prompt_tokens == 0
        worker.close_session("b")
        worker.open_session("c")       # b's place is free again

        with pytest.raises(wc.WorkerError) as e:
            run(None, Config(prompt_segments=[{"ids": [5] * CONTEXT}]))
        assert e.value.code == "context_length_exceeded"
        with pytest.raises(wc.WorkerError) as e:
            run(None, Config(prompt_segments=[{"ids": [5, 9999]}]))
        assert "9999" in str(e.value)

        # a stop string ends the text before it; no ids reported for the trimmed turn
        full = tok.decode(greedy(engine, [bos, *PROMPTS[7]], 30))
        stop = full[len(full) // 2:len(full) // 2 + 2]
        text, s = run(None, Config(max_new_tokens=30, stop=[stop], prompt_segments=[{"ids": PROMPTS[7]}]))
        assert text == full[:full.find(stop)] and s.finish_reason == "stop" and s.generated_token_ids == []

        # cancellation through the control pipe, sent before the request: it
        # ends at once (one sent during a generation is read at its next token)
        rid = worker.reserve_request()
        assert worker.stop()
        result: list[Any] = []
        worker.generate(None, Config(max_new_tokens=400, prompt_segments=[{"ids": PROMPTS[4]}]), None,
                        result.append, request_id=rid)
        assert result[0].cancelled and result[0].num_generated_tokens == 0
        assert worker.healthy
        text, _ = run(None, Config(prompt_segments=[{"ids": PROMPTS[2]}]))
        assert text == tok.decode(greedy(engine, [bos, *PROMPTS[2]], 12))
    finally:
        worker.close()
