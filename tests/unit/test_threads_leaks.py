"""Threads and leaks: Methods running in parallel threads give exactly the
serial results, one Method shared by several threads never interleaves two
calls, and thousands of load / bind / execute / free cycles keep resident
memory flat."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from support import ROOT

import pyexec
from pyexec._ffi import ffi, lib

DATA = ROOT / "native" / "tests" / "data"
SEEDS = ROOT / "native" / "fuzz" / "seeds"
SANITIZED = "asan" in os.environ.get("LD_PRELOAD", "")
THREADS = 8


def run_threads(n: int, target: Callable[[int], Any]) -> list[Any]:
    """Runs target(0..n-1) in n threads started together; re-raises the first
    exception; returns the results in order."""
    results: list[Any] = [None] * n
    errors: list[BaseException] = []
    barrier = threading.Barrier(n)

    def body(i: int) -> None:
        try:
            barrier.wait()
            results[i] = target(i)
        except BaseException as e:  # noqa: B036 - reported in the main thread
            errors.append(e)

    threads = [threading.Thread(target=body, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        raise errors[0]
    return results


def mlp_inputs(seed: int, count: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((4, 16)).astype(np.float32) for _ in range(count)]


def dynamic_inputs(seed: int, count: int) -> list[np.ndarray]:
    rng = np.random.default_rng(seed)
    return [rng.standard_normal((int(rng.integers(1, 9)), 3)).astype(np.float32) for _ in range(count)]


MODELS: dict[str, tuple[Path, Callable[[int, int], list[np.ndarray]]]] = {
    "mlp": (SEEDS / "mlp.pte", mlp_inputs),
    "cat_cumsum_dynamic": (SEEDS / "cat_cumsum_dynamic.pte", dynamic_inputs),
}


def as_arrays(outputs: list[Any]) -> list[np.ndarray]:
    return [np.array(o, copy=True) for o in outputs]


@pytest.mark.parametrize("model", sorted(MODELS))
def test_parallel_methods_match_serial(model: str) -> None:
    path, make_inputs = MODELS[model]
    data = path.read_bytes()
    per_thread = 10 if SANITIZED else 40
    inputs = [make_inputs(t, per_thread) for t in range(THREADS)]
    reference_method = pyexec.load(data).load_method("forward", output_type="numpy")
    expected = [[as_arrays(reference_method.execute([x])) for x in xs] for xs in inputs]
    shared = pyexec.load(data)

    def work(t: int) -> list[list[np.ndarray]]:
        # Half the threads share one Program, half load their own; each loads
        # its own Method, concurrently with the others.
        program = shared if t % 2 else pyexec.load(data)
        method = program.load_method("forward", output_type="numpy")
        return [as_arrays(method.execute([x])) for x in inputs[t]]

    got = run_threads(THREADS, work)
    for t in range(THREADS):
        for k in range(per_thread):
            for a, e in zip(got[t][k], expected[t][k]):
                assert a.shape == e.shape and np.array_equal(a, e), f"thread {t} call {k}: differs from serial"


def test_parallel_caches_updated_in_place_stay_separate() -> None:
    """Each thread's Method updates its own caller-owned cache in place."""
    data = (DATA / "cache_update_unplanned.pte").read_bytes()
    program = pyexec.load(data)
    steps = 8

    def work(t: int) -> np.ndarray:
        method = program.load_method("forward", output_type="numpy")
        cache = np.zeros((8, 4), np.float32)
        for s in range(steps):
            method.execute([cache, np.array([s], np.int64), np.full((1, 4), t * 100 + s, np.float32)])
        return cache

    caches = run_threads(THREADS, work)
    for t, cache in enumerate(caches):
        np.testing.assert_array_equal(cache, (t * 100 + np.arange(8, dtype=np.float32))[:, None].repeat(4, 1))


def test_one_method_hammered_from_threads_never_interleaves() -> None:
    """execute(inputs) installs, runs and reads back as one step: a thread
    always gets the result of its own inputs, never another thread's."""
    data = (SEEDS / "mlp.pte").read_bytes()
    per_thread = 15 if SANITIZED else 60
    inputs = [mlp_inputs(100 + t, per_thread) for t in range(THREADS)]
    method = pyexec.load(data).load_method("forward", output_type="numpy")
    expected = [[as_arrays(method.execute([x]))[0] for x in xs] for xs in inputs]

    def work(t: int) -> list[np.ndarray]:
        return [as_arrays(method.execute([x]))[0] for x in inputs[t]]

    got = run_threads(THREADS, work)
    for t in range(THREADS):
        for k in range(per_thread):
            assert np.array_equal(got[t][k], expected[t][k]), f"thread {t} call {k} got another call's result"


def test_concurrent_c_calls_on_one_method_are_serialised() -> None:
    """The C library's own lock: many threads calling pyexec_method_execute on
    one method at once (cffi releases the GIL for the call) all succeed and
    leave the same result as one call."""
    method = pyexec.load((SEEDS / "mlp.pte").read_bytes()).load_method("forward", output_type="numpy")
    x = mlp_inputs(7, 1)[0]
    expected = as_arrays(method.execute([x]))[0]
    handle = method._m  # the pyexec_method * (private; the lock under test is the C one)
    calls = 20 if SANITIZED else 200

    def work(_: int) -> list[int]:
        return [lib.pyexec_method_execute(handle) for _ in range(calls)]

    statuses = run_threads(THREADS, work)
    assert all(s == 0 for st in statuses for s in st)
    np.testing.assert_array_equal(as_arrays(method.get_outputs())[0], expected)


def test_freeing_null_handles_is_harmless() -> None:
    lib.pyexec_method_free(ffi.NULL)
    lib.pyexec_program_free(ffi.NULL)
    lib.pyexec_method_free(ffi.NULL)
    lib.pyexec_program_free(ffi.NULL)


# ---- leaks --------------------------------------------------------------------

LEAK_CHILD = textwrap.dedent(
    """
    import gc, json, os, sys
    import numpy as np
    import pyexec

    PAGE = os.sysconf("SC_PAGE_SIZE")
    planned_path, unplanned_path, cycles = sys.argv[1], sys.argv[2], int(sys.argv[3])
    unplanned = open(unplanned_path, "rb").read()
    x = np.ones((4, 16), np.float32)
    a = np.arange(6, dtype=np.float32).reshape(2, 3)
    b = np.full((2, 3), 2.0, np.float32)

    def rss_kb():
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * PAGE // 1024

    def cycle():
        # A planned program, memory-mapped from its path: load, method, execute, free.
        method = pyexec.load(planned_path).load_method("forward")
        method.execute([x])
        del method
        # An unplanned one from bytes: both outputs bound to caller arrays.
        method = pyexec.load(unplanned).load_method("forward", output_type="numpy")
        s, p = np.empty((2, 3), np.float32), np.empty((2, 3), np.float32)
        method.set_output(s, 0)
        method.set_output(p, 1)
        out = method.execute([a, b])
        assert out[0] is s and np.array_equal(p, a * b)
        del method, out

    for _ in range(cycles // 10):  # warm up: first-use allocations, caches, free lists
        cycle()
    gc.collect()
    before = rss_kb()
    for _ in range(cycles):
        cycle()
    gc.collect()
    print(json.dumps({"before_kb": before, "after_kb": rss_kb()}))
    """
)


def test_load_bind_execute_free_cycles_keep_rss_flat() -> None:
    """10,000 cycles (each: two programs loaded, two methods, two executes,
    two bound outputs, everything freed) grow resident memory by < 4 MiB."""
    cycles = 500 if SANITIZED else 10_000
    env = dict(os.environ)
    here = str(Path(pyexec.__file__).parent.parent)  # the child imports the same pyexec
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    proc = subprocess.run(
        [sys.executable, "-c", LEAK_CHILD, str(SEEDS / "mlp.pte"), str(DATA / "add_mul_unplanned.pte"), str(cycles)],
        capture_output=True, text=True, env=env, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    r = json.loads(proc.stdout.strip().splitlines()[-1])
    growth = r["after_kb"] - r["before_kb"]
    print(f"{cycles} cycles: RSS {r['before_kb']} KiB -> {r['after_kb']} KiB ({growth:+d} KiB)")
    if SANITIZED:
        return  # ASan's quarantine holds freed memory; leaks are LeakSanitizer's job (C tests, fuzzer)
    assert growth < 4096, f"resident memory grew by {growth} KiB over {cycles} cycles"
