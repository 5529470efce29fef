"""Online inference with Ray Serve and pyexec: a deployment whose replicas
each hold one pyexec Method, answering HTTP POST requests with JSON bodies.

    POST /classify   {"features": [[16 numbers], ...]}
    200              {"labels": [int, ...], "logits": [[10 numbers], ...]}
    400              {"error": "what is wrong with the request"}

One machine (starts a local Ray with 2 CPUs and serves on 127.0.0.1:8000
until interrupted; `python examples/ray/client.py` then sends a request):

    python examples/ray/serve_app.py --replicas 2

A cluster (`ray start --head`, pyexec installed on every node): the
replicas are spread over the nodes; the HTTP proxy listens on the head node.

    python examples/ray/serve_app.py --address auto --replicas 8 --host 0.0.0.0

The classifier is batch_inference.py's (exported here when no --model is
given); any .pte taking one [batch, 16] float32 tensor will do.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

import pyexec

ROUTE = "/classify"


class PyexecDeployment:
    """One replica: a Method loaded from the program it is given (which
    arrives by pickle, as its bytes), run on each request's rows. A Method
    runs one call at a time (it holds a lock), so a replica answers its
    requests one after another; more replicas answer more at once. pyexec's
    kernels use `threads` threads in the replica (start() passes the CPUs it
    reserved); None leaves pyexec's setting as it is."""

    def __init__(self, program: pyexec.Program, threads: int | None = None) -> None:
        if threads is not None:
            pyexec.set_num_threads(threads)
        self.method = program.load_method("forward", output_type="numpy")
        inputs = self.method.meta.inputs
        info = inputs[0] if len(inputs) == 1 else None
        if info is None or len(info.sizes) != 2 or info.dtype != "float32":
            raise ValueError(f"the program must take one [rows, features] float32 tensor; it takes {inputs}")
        self.width = info.sizes[1]
        self.max_rows = info.sizes[0]

    def rows(self, body: Any) -> np.ndarray:
        """The request's features as a [rows, width] float32 array, or
        ValueError saying what is wrong with them."""
        if not isinstance(body, dict) or "features" not in body:
            raise ValueError('the body must be a JSON object with a "features" list')
        try:
            x = np.asarray(body["features"], dtype=np.float32)
        except (TypeError, ValueError):
            raise ValueError('"features" must be a list of lists of numbers') from None
        if x.ndim != 2 or x.shape[1] != self.width or not 1 <= x.shape[0] <= self.max_rows:
            raise ValueError(
                f'"features" must be 1 to {self.max_rows} rows of {self.width} numbers, got shape {list(x.shape)}'
            )
        return x

    async def __call__(self, request: Any) -> Any:
        from starlette.responses import JSONResponse

        try:
            x = self.rows(await request.json())
        except ValueError as e:  # a body that is not JSON also lands here (JSONDecodeError)
            return JSONResponse({"error": str(e)}, status_code=400)
        (logits,) = self.method.execute([x])
        return JSONResponse({"labels": logits.argmax(axis=1).tolist(), "logits": logits.tolist()})


def start(
    program: pyexec.Program,
    replicas: int = 1,
    host: str = "127.0.0.1",
    port: int = 8000,
    name: str = "pyexec",
    cpus_per_replica: int = 1,
) -> str:
    """Deploys the program as `replicas` replicas, each reserving
    `cpus_per_replica` CPUs and running pyexec on as many threads, behind
    Serve's HTTP proxy on host:port (in the Ray this process is connected
    to), and returns the URL to POST to. serve.shutdown() takes it down."""
    from ray import serve

    serve.start(http_options={"host": host, "port": port})
    deployment = serve.deployment(
        PyexecDeployment,
        name="PyexecClassifier",
        num_replicas=replicas,
        ray_actor_options={"num_cpus": cpus_per_replica},
    )
    serve.run(deployment.bind(program, threads=cpus_per_replica), name=name, route_prefix=ROUTE)
    return f"http://{host}:{port}{ROUTE}"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicas", type=int, default=1)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--address", help="a running cluster ('auto', or HEAD:6379); default: a local Ray, 2 CPUs")
    parser.add_argument("--model", type=Path, help="a .pte taking [batch, 16] float32; default: export one here")
    args = parser.parse_args(argv)

    import ray
    from ray import serve

    if args.model:
        pte = args.model.read_bytes()
    else:
        from batch_inference import build_model, export_classifier  # beside this file

        pte = export_classifier(build_model())
    if args.address:
        ray.init(address=args.address)
    else:
        ray.init(num_cpus=2, include_dashboard=False)
    url = start(pyexec.load(pte), args.replicas, args.host, args.port)
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
