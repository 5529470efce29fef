"""`pyexec serve` as a Ray Serve deployment: an OpenAI-compatible API
(/v1/models, /v1/chat/completions, /v1/completions) whose replicas each load
the weights once and serve many conversations from them (pyexec's scheduler:
one KV cache per conversation, decode steps interleaved).

One machine (a local Ray with 2 CPUs; serves on 127.0.0.1:8000 until
interrupted):

    python examples/ray/serve_llm.py --model model.pte --tokenizer tokenizer.json --replicas 2
    curl http://127.0.0.1:8000/v1/chat/completions -d '{"messages": [{"role": "user", "content": "Hi"}]}'

A cluster (`ray start --head`, pyexec[serve] installed on every node):

    python examples/ray/serve_llm.py --address auto --model model.pte --tokenizer tokenizer.json \\
        --replicas 4 --host 0.0.0.0

The files travel with the deployment (as bytes, written to a temporary
directory in each replica), so no node needs them on its disk. Without
--model, the tests' tiny random-weight Llama and its tokenizer are exported
here (needs torch and executorch).
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any


class LLMReplica:
    """One replica: the files it is given written to a directory of its own,
    the model loaded once, the FastAPI app of `pyexec serve` over it
    (__serve_build_asgi_app__, which Serve calls after __init__).

    files: {"model": .pte bytes, "tokenizer": bytes, and optionally "data"
    (.ptd), "tokenizer_config" (tokenizer_config.json, whose chat_template is
    used), "chat_template" (Jinja text)}; tokenizer_name: the tokenizer's
    file name (its format is read from its content, but a tokenizer.json is
    best kept under that name)."""

    def __init__(self, files: dict[str, bytes], tokenizer_name: str = "tokenizer.json",
                 model_id: str = "pyexec", max_sessions: int = 4, threads: int | None = None) -> None:
        import pyexec

        if threads is not None:
            pyexec.set_num_threads(threads)
        self.dir = Path(tempfile.mkdtemp(prefix="pyexec-llm-"))
        names = {"model": "model.pte", "data": "model.ptd", "tokenizer": tokenizer_name,
                 "tokenizer_config": "tokenizer_config.json", "chat_template": "chat_template.jinja"}
        for key, data in files.items():
            if key not in names:
                raise ValueError(f"unknown file {key!r}: expected some of {', '.join(names)}")
            (self.dir / names[key]).write_bytes(data)
        self.tokenizer = str(self.dir / names["tokenizer"])
        self.options: dict[str, Any] = {"model_id": model_id, "max_sessions": max_sessions}
        if "data" in files:
            self.options["data_path"] = str(self.dir / "model.ptd")
        if "chat_template" in files:
            self.options["chat_template"] = str(self.dir / "chat_template.jinja")

    def __serve_build_asgi_app__(self) -> Any:
        from pyexec.llm.server import create_app

        return create_app(str(self.dir / "model.pte"), self.tokenizer, **self.options)

    def __del__(self) -> None:
        shutil.rmtree(self.dir, ignore_errors=True)


def start(files: dict[str, bytes], replicas: int = 1, host: str = "127.0.0.1", port: int = 8000,
          tokenizer_name: str = "tokenizer.json", model_id: str = "pyexec", max_sessions: int = 4,
          cpus_per_replica: int = 1, name: str = "pyexec-llm") -> str:
    """Deploys `replicas` replicas behind Serve's HTTP proxy on host:port (in
    the Ray this process is connected to); returns the API's base URL.
    serve.shutdown() takes it down."""
    from ray import serve

    serve.start(http_options={"host": host, "port": port})
    deployment = serve.deployment(
        serve.ingress()(LLMReplica),
        name="PyexecLLM",
        num_replicas=replicas,
        ray_actor_options={"num_cpus": cpus_per_replica},
    )
    serve.run(deployment.bind(files, tokenizer_name, model_id, max_sessions, cpus_per_replica),
              name=name, route_prefix="/")
    return f"http://{host}:{port}/v1"


def tiny_files() -> dict[str, bytes]:
    """The tests' tiny Llama (random weights, 512 cache positions) and its tokenizer."""
    root = Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "tests"))
    from support.llm_runner import llm_program, write_tokenizer

    with tempfile.TemporaryDirectory() as d:
        tok = write_tokenizer(Path(d))
        return {"model": llm_program(max_seq_len=64, max_context_len=512), "tokenizer": tok.read_bytes(),
                "tokenizer_config": (Path(d) / "tokenizer_config.json").read_bytes()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--model", type=Path, help="the .pte (default: export the tests' tiny Llama)")
    parser.add_argument("--data-path", type=Path, help="its .ptd, if its weights are apart")
    parser.add_argument("--tokenizer", type=Path, help="its tokenizer (a tokenizer_config.json beside it is sent "
                        "too, for its chat template)")
    parser.add_argument("--model-id", default="pyexec")
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--max-sessions", type=int, default=4, help="conversations kept per replica")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--address", help="a running cluster ('auto', or HEAD:6379); default: a local Ray, 2 CPUs")
    args = parser.parse_args(argv)
    if (args.model is None) != (args.tokenizer is None):
        parser.error("--model and --tokenizer go together")

    import ray
    from ray import serve

    if args.model is None:
        files, tokenizer_name = tiny_files(), "tokenizer.json"
    else:
        files = {"model": args.model.read_bytes(), "tokenizer": args.tokenizer.read_bytes()}
        tokenizer_name = args.tokenizer.name
        config = args.tokenizer.parent / "tokenizer_config.json"
        if config.is_file():
            files["tokenizer_config"] = config.read_bytes()
        if args.data_path:
            files["data"] = args.data_path.read_bytes()
    if args.address:
        ray.init(address=args.address)
    else:
        ray.init(num_cpus=2, include_dashboard=False)
    url = start(files, args.replicas, args.host, args.port, tokenizer_name, args.model_id, args.max_sessions)
    print(f"serving {args.replicas} replica(s) at {url}; Ctrl-C stops", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass
    finally:
        serve.shutdown()
        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main())
