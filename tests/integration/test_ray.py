"""examples/ray end to end on a local Ray cluster (ray.init(num_cpus=2), one
per test module): the Ray Data batch example over a few thousand rows, every
row checked against a local run (itself checked against torch eager and
ExecuTorch's runtime), and the Serve example answering real HTTP requests on
127.0.0.1, each answer checked likewise."""

from __future__ import annotations

import importlib.util
import os
import socket
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import numpy as np
import pytest
import torch
from support import ROOT
from support.export import assert_close, export_program, run_with_executorch

import pyexec

try:
    import ray
    import ray.data
    from ray import serve
except ImportError as e:  # requirements-test.txt installs ray[data,serve]: CI never skips
    pytest.skip(
        f"ray[data,serve] cannot be imported ({e}); pip install -r requirements-test.txt", allow_module_level=True
    )

# starts a Ray cluster and Serve: about a minute on 2 cores; outside the test command (README)
pytestmark = [pytest.mark.slow, pytest.mark.extended]
EXAMPLES = ROOT / "examples" / "ray"
ROWS = 3000
T = TypeVar("T")


def load_example(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, EXAMPLES / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


batch = load_example("batch_inference")
serve_app = load_example("serve_app")
client = load_example("client")


def within(seconds: float, what: str, fn: Callable[[], T]) -> T:
    """fn() in a daemon thread: fails the test, rather than hanging the
    suite, when Ray does not finish (an actor pool waiting for CPUs it will
    never get, a replica that never starts)."""
    result: list[T] = []
    error: list[BaseException] = []

    def run() -> None:
        try:
            result.append(fn())
        except BaseException as e:  # noqa: B036 - handed to the test's thread
            error.append(e)

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(seconds)
    if t.is_alive():
        pytest.fail(f"{what} did not finish within {seconds:.0f} s")
    if error:
        raise error[0]
    return result[0]


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    """A local Ray: 2 CPUs, no dashboard. The workers import the pyexec this
    process imported; the example modules, loaded here from their files and
    not importable by name, travel by value (cloudpickle)."""
    package_root = str(Path(pyexec.__file__).resolve().parent.parent)
    path = os.pathsep.join(p for p in (package_root, os.environ.get("PYTHONPATH")) if p)
    env = {"PYTHONPATH": path}
    if "PYEXEC_LIBRARY" in os.environ:
        env["PYEXEC_LIBRARY"] = os.environ["PYEXEC_LIBRARY"]
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")  # no report sent out from a test run
    ray.init(
        num_cpus=2,
        include_dashboard=False,
        log_to_driver=False,
        logging_level="warning",
        runtime_env={"env_vars": env},
    )
    try:
        yield
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def model() -> torch.nn.Module:
    return batch.build_model()


@pytest.fixture(scope="module")
def pte(model: torch.nn.Module) -> bytes:
    """The classifier exported as the example exports it (cached)."""
    return export_program(model, batch.example_inputs(), dynamic_shapes=batch.dynamic_shapes(), alloc_graph_input=False)


@pytest.fixture(scope="module")
def local(pte: bytes) -> dict[str, np.ndarray]:
    return batch.classify_locally(pyexec.load(pte), ROWS)


# ---- the local run the distributed ones are compared with -------------------------------------


def test_local_run_matches_torch_eager_and_executorch(
    model: torch.nn.Module, pte: bytes, local: dict[str, np.ndarray]
) -> None:
    assert np.array_equal(local["id"], np.arange(ROWS))
    x = torch.from_numpy(batch.features(local["id"]))
    with torch.no_grad():
        eager = model(x).numpy()
    assert_close(local["logits"], eager, rtol=1e-5, atol=1e-5, what="local pyexec run vs torch eager")
    np.testing.assert_array_equal(local["label"], local["logits"].argmax(axis=1))
    (et,) = run_with_executorch(pte, [x[:256]])
    assert_close(local["logits"][:256], et, rtol=1e-5, atol=1e-5, what="pyexec vs ExecuTorch's runtime")


def test_example_export_gives_the_program_the_tests_run(model: torch.nn.Module, pte: bytes) -> None:
    own = pyexec.load(batch.export_classifier(model)).load_method()
    info = own.meta.inputs[0]
    assert info is not None and info.is_dynamic and not info.is_memory_planned
    assert info.sizes == (batch.MAX_BATCH, batch.FEATURES)
    x = batch.features(np.arange(100))
    np.testing.assert_array_equal(own.execute([x])[0], pyexec.load(pte).load_method().execute([x])[0])


# ---- Ray Data: an actor pool, one Method per actor ----------------------------------------------


@pytest.fixture(scope="module")
def dataset(cluster: None) -> Any:
    """The example's generated rows, materialized in the object store once."""
    return within(120, "generating the dataset", lambda: batch.make_dataset(ROWS))


def test_actor_pool_classifies_every_row_as_the_local_run(
    dataset: Any, pte: bytes, local: dict[str, np.ndarray]
) -> None:
    program = pyexec.load(pte)  # travels to each actor as its bytes

    def run() -> dict[str, np.ndarray]:
        return batch.collect(batch.classify(program, dataset, actors=2))

    got = within(240, "the Ray Data run", run)
    np.testing.assert_array_equal(got["id"], local["id"])  # every row once
    # Ray cuts other batches than the local loop (blocks of ROWS/8 rows):
    # the same rows, so the same values within rounding.
    assert_close(got["logits"], local["logits"], rtol=1e-6, atol=1e-6, what="Ray actors vs local run")
    np.testing.assert_array_equal(got["label"], got["logits"].argmax(axis=1))


def test_actors_read_the_object_store_batches_in_place(dataset: Any) -> None:
    """What the zero-copy claim rests on: map_batches hands the UDF the
    features as read-only, C-contiguous float32 views of the block, which
    pyexec reads where they are for an unplanned input it only reads."""

    def flags(b: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        x = b["features"]
        return {"writeable": np.array([x.flags.writeable]), "contiguous": np.array([x.flags.c_contiguous])}

    def run() -> list[dict[str, Any]]:
        return list(dataset.map_batches(flags, batch_size=batch.BATCH_SIZE, zero_copy_batch=True).take_all())

    seen = within(120, "the flags run", run)
    assert seen and all(not r["writeable"] and r["contiguous"] for r in seen), seen


# ---- Ray Serve: HTTP on 127.0.0.1 -------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def url(cluster: None, pte: bytes) -> Iterator[str]:
    address = within(
        180, "serve.run", lambda: serve_app.start(pyexec.load(pte), replicas=2, host="127.0.0.1", port=free_port())
    )
    try:
        yield address
    finally:
        serve.shutdown()


def test_serve_answers_requests_as_the_local_run(url: str, local: dict[str, np.ndarray]) -> None:
    assert url.startswith("http://127.0.0.1:")
    slices = [
        slice(0, 1),
        slice(1, 9),
        slice(9, 300),
        slice(300, 301),
        *(slice(s, s + 40) for s in range(400, 880, 40)),
    ]

    def ask(rows: slice) -> dict[str, Any]:
        return client.classify(url, batch.features(local["id"][rows]).tolist())

    with ThreadPoolExecutor(4) as pool:  # concurrent requests, spread over the two replicas
        answers = list(pool.map(ask, slices))
    for rows, answer in zip(slices, answers):
        assert_close(
            np.asarray(answer["logits"], np.float32),
            local["logits"][rows],
            rtol=1e-6,
            atol=1e-6,
            what=f"served logits of rows {rows}",
        )
        assert answer["labels"] == np.asarray(answer["logits"], np.float32).argmax(axis=1).tolist()


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([1, 2], 'the body must be a JSON object with a "features" list'),
        ({"rows": []}, 'the body must be a JSON object with a "features" list'),
        ({"features": [[1.0] * 15]}, '"features" must be 1 to 1024 rows of 16 numbers, got shape [1, 15]'),
        ({"features": []}, '"features" must be 1 to 1024 rows of 16 numbers, got shape [0]'),
        ({"features": [[0.0] * 16] * 1025}, "got shape [1025, 16]"),
        ({"features": [["a"] * 16]}, '"features" must be a list of lists of numbers'),
    ],
)
def test_serve_refuses_a_malformed_request_saying_why(url: str, body: Any, message: str) -> None:
    status, answer = client.post(url, body)
    assert status == 400 and message in answer["error"], answer


def test_serve_deployment_refuses_a_program_it_cannot_feed() -> None:
    other = pyexec.load(ROOT / "native" / "tests" / "data" / "add_mul.pte")  # two inputs
    with pytest.raises(ValueError, match=r"must take one \[rows, features\] float32 tensor; it takes \(<pyexec"):
        serve_app.PyexecDeployment(other)
