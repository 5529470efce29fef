"""examples/ray/serve_llm.py: `pyexec serve`'s app as a Ray Serve deployment
(a local Ray, two replicas each loading the tiny Llama once), answering the
OpenAI client over real HTTP on 127.0.0.1 with the engine's greedy tokens."""

from __future__ import annotations

import importlib.util
import socket
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from support import ROOT

try:
    import ray
    from ray import serve
except ImportError as e:  # requirements-test.txt installs ray[serve]
    pytest.skip(f"ray[serve] cannot be imported ({e})", allow_module_level=True)
openai = pytest.importorskip("openai")
pytest.importorskip("fastapi")

# a Ray cluster and two Serve replicas: about a minute on 2 cores; outside the test command (README)
pytestmark = [pytest.mark.slow, pytest.mark.extended]


def _example() -> Any:
    spec = importlib.util.spec_from_file_location("serve_llm", ROOT / "examples" / "ray" / "serve_llm.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def deployed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    serve_llm = _example()
    files = serve_llm.tiny_files()
    d = tmp_path_factory.mktemp("ray-llm")
    (d / "model.pte").write_bytes(files["model"])
    (d / "tokenizer.json").write_bytes(files["tokenizer"])
    (d / "tokenizer_config.json").write_bytes(files["tokenizer_config"])
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    ray.init(num_cpus=2, include_dashboard=False, runtime_env={"env_vars": {"PYTHONPATH": str(ROOT)}})
    try:
        url = serve_llm.start(files, replicas=2, host="127.0.0.1", port=port, model_id="tiny")
        yield url, d
    finally:
        serve.shutdown()
        ray.shutdown()


def test_replicas_answer_with_the_engine_tokens(deployed: tuple[str, Path]) -> None:
    from pyexec.llm import LLMProgram, apply_chat_template, load_tokenizer

    url, d = deployed
    program = LLMProgram(str(d / "model.pte"))
    tok = load_tokenizer(str(d / "tokenizer.json"))
    client = openai.OpenAI(base_url=url, api_key="unused", max_retries=0)
    assert [m.id for m in client.models.list().data] == ["tiny"]
    for k in range(4):   # spread over both replicas
        messages = [{"role": "user", "content": f"Once upon a time {k}"}]
        ids = tok.encode(apply_chat_template(messages, None, str(d)))
        bos = program.bos_id if program.bos_id is not None and program.bos_id < 300 else tok.bos_id
        prompt = ids if ids[:1] == [bos] else [bos, *ids]
        session = program.new_session()
        logits = session.prefill(prompt)
        want: list[int] = []
        while len(want) < 12:
            t = int(logits.argmax())
            if t == tok.eos_id or t in program.eos_ids:
                break
            want.append(t)
            logits = session.decode(t)
        r = client.chat.completions.create(model="tiny", messages=messages, max_tokens=12,  # type: ignore[arg-type]
                                           temperature=0)
        assert r.choices[0].message.content == tok.decode(want)
        assert r.usage is not None and r.usage.prompt_tokens == len(prompt)
