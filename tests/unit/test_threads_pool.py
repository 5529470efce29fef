"""The library's thread pool as Python sees it: set_num_threads /
get_num_threads, the default count (affinity mask, cgroup quota),
PYEXEC_NUM_THREADS, bad values, many Python threads running Methods while the
count changes, and a fork after a parallel run.

Runs that must split the small fixture models over the pool happen in a
subprocess started with PYEXEC_PARALLEL_MIN_COST=1 (the library reads it once,
at its first split), so that every kernel is split however small."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from pathlib import Path

import pytest
from support import ROOT

import pyexec

MODELS = ROOT / "native" / "tests" / "data" / "models"


def run_python(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """Runs `code` in a fresh interpreter with the environment plus `env`
    (PYEXEC_NUM_THREADS and PYEXEC_PARALLEL_MIN_COST removed unless given)."""
    full = {k: v for k, v in os.environ.items() if k not in ("PYEXEC_NUM_THREADS", "PYEXEC_PARALLEL_MIN_COST")}
    full.update(env)
    full["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT / "tests"), full.get("PYTHONPATH", "")]))
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=full, timeout=300
    )


def expected_default() -> int:
    """The CPUs this process may run on, worked out here independently of the
    library: the affinity mask, capped by a cgroup v2 cpu.max or v1
    cfs_quota_us / cfs_period_us quota at the process's cgroup."""
    n = len(os.sched_getaffinity(0))
    quota = 0
    lines = Path("/proc/self/cgroup").read_text().splitlines() if Path("/proc/self/cgroup").exists() else []
    for line in lines:
        hid, ctrls, path = line.split(":", 2)
        if hid == "0" and ctrls == "":
            f = Path("/sys/fs/cgroup" + path.rstrip("/")) / "cpu.max"
            if f.exists():
                q, p = f.read_text().split()
                if q != "max":
                    quota = -(-int(q) // int(p))
        elif "cpu" in ctrls.split(","):
            for mount in ("/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpu"):
                for where in (mount + path.rstrip("/"), mount):
                    fq, fp = Path(where, "cpu.cfs_quota_us"), Path(where, "cpu.cfs_period_us")
                    if fq.exists() and fp.exists() and not quota:
                        q2, p2 = int(fq.read_text()), int(fp.read_text())
                        if q2 > 0 and p2 > 0:
                            quota = -(-q2 // p2)
    return min(n, quota) if quota else n


@pytest.fixture
def restore_count() -> Iterator[None]:
    before = pyexec.get_num_threads()
    yield
    pyexec.set_num_threads(before)


# ---- the API ------------------------------------------------------------------


def test_set_and_get_round_trip(restore_count: None) -> None:
    for n in (1, 2, 3, 7, 1024):
        pyexec.set_num_threads(n)
        assert pyexec.get_num_threads() == n


@pytest.mark.parametrize("bad", [0, -1, 1025, 10**12])
def test_out_of_range_counts_are_refused_and_change_nothing(restore_count: None, bad: int) -> None:
    pyexec.set_num_threads(2)
    with pytest.raises(pyexec.InvalidArgumentError, match=rf"num_threads must be from 1 to 1024, got {bad}"):
        pyexec.set_num_threads(bad)
    assert pyexec.get_num_threads() == 2


@pytest.mark.parametrize("bad", [2.0, "2", True, None])
def test_non_int_counts_are_a_type_error(restore_count: None, bad: object) -> None:
    with pytest.raises(TypeError, match="set_num_threads"):
        pyexec.set_num_threads(bad)  # type: ignore[arg-type]


def test_the_c_function_refuses_too() -> None:
    from pyexec._ffi import ffi, lib

    assert lib.pyexec_set_num_threads(0) == lib.PYEXEC_ERR_INVALID_ARGUMENT
    assert b"got 0" in ffi.string(lib.pyexec_last_error())


# ---- the default count and the environment variable ------------------------------


def test_default_is_the_cpus_the_process_may_run_on() -> None:
    r = run_python("import pyexec; print(pyexec.get_num_threads())")
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) == expected_default()


def test_default_follows_the_affinity_mask() -> None:
    cpu = min(os.sched_getaffinity(0))
    r = run_python(f"import os; os.sched_setaffinity(0, {{{cpu}}}); import pyexec; print(pyexec.get_num_threads())")
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) == 1


@pytest.mark.parametrize("value", ["1", "3", " 5 ", "64"])
def test_environment_variable_sets_the_count(value: str) -> None:
    r = run_python("import pyexec; print(pyexec.get_num_threads())", PYEXEC_NUM_THREADS=value)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) == int(value)
    assert r.stderr == ""


@pytest.mark.parametrize("value", ["abc", "0", "-2", "1025", "2.5", "3x"])
def test_bad_environment_variable_is_reported_and_ignored(value: str) -> None:
    r = run_python("import pyexec; print(pyexec.get_num_threads())", PYEXEC_NUM_THREADS=value)
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) == expected_default()
    assert f"PYEXEC_NUM_THREADS='{value}' is not a thread count (a whole number from 1 to 1024)" in r.stderr


def test_set_num_threads_overrides_the_environment() -> None:
    r = run_python("import pyexec; pyexec.set_num_threads(2); print(pyexec.get_num_threads())", PYEXEC_NUM_THREADS="5")
    assert r.returncode == 0, r.stderr
    assert int(r.stdout) == 2


# ---- Methods on the pool: concurrency and fork --------------------------------------

# Loads the fixture models, makes fixed inputs and runs each once at one
# thread (the reference bits).
_PRELUDE = f"""
import hashlib, json, os, sys, threading
import numpy as np
import pyexec
MODELS = {str(MODELS)!r}
rng = np.random.default_rng(0)
progs, inputs = {{}}, {{}}
for name in ("cnn", "transformer"):
    progs[name] = pyexec.load(os.path.join(MODELS, name + ".pte"))
    meta = progs[name].method_meta("forward")
    inputs[name] = [rng.standard_normal(i.sizes).astype(np.float32) for i in meta.inputs]
def digest(name, method):
    outs = method.execute([x.copy() for x in inputs[name]])
    return hashlib.sha256(b"".join(np.ascontiguousarray(o).tobytes() for o in outs)).hexdigest()
pyexec.set_num_threads(1)
want = {{n: digest(n, progs[n].load_method("forward", output_type="numpy")) for n in progs}}
"""


def test_many_python_threads_share_the_pool_while_the_count_changes() -> None:
    code = (
        _PRELUDE
        + """
pyexec.set_num_threads(2)
stop = threading.Event()
bad, errors = [], []
def changer():
    k = 0
    while not stop.is_set():
        pyexec.set_num_threads(1 + k % 3)
        k += 1
def runner(i):
    try:
        name = ("cnn", "transformer")[i % 2]
        m = progs[name].load_method("forward", output_type="numpy")
        for _ in range(15):
            if digest(name, m) != want[name]:
                bad.append(i)
    except BaseException as e:
        errors.append(repr(e))
ch = threading.Thread(target=changer)
ch.start()
ts = [threading.Thread(target=runner, args=(i,)) for i in range(6)]
for t in ts: t.start()
for t in ts: t.join()
stop.set(); ch.join()
print(json.dumps({"bad": bad, "errors": errors, "threads": threading.active_count()}))
"""
    )
    r = run_python(code, PYEXEC_PARALLEL_MIN_COST="1")
    assert r.returncode == 0, r.stderr
    result = json.loads(r.stdout.splitlines()[-1])
    assert result["errors"] == []
    assert result["bad"] == []


def test_one_method_shared_by_threads_gives_the_serial_bits() -> None:
    code = (
        _PRELUDE
        + """
pyexec.set_num_threads(3)
m = progs["transformer"].load_method("forward", output_type="numpy")
got = []
def runner():
    for _ in range(10):
        got.append(digest("transformer", m))
ts = [threading.Thread(target=runner) for _ in range(4)]
for t in ts: t.start()
for t in ts: t.join()
print(json.dumps(sorted(set(got)) == [want["transformer"]]))
"""
    )
    r = run_python(code, PYEXEC_PARALLEL_MIN_COST="1")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.splitlines()[-1]) is True


def test_fork_after_a_parallel_run() -> None:
    code = (
        _PRELUDE
        + """
pyexec.set_num_threads(2)
m = progs["cnn"].load_method("forward", output_type="numpy")
assert digest("cnn", m) == want["cnn"]   # the pool is up, its workers running
pid = os.fork()
if pid == 0:
    # the child: no workers were copied; the pool comes back on demand
    ok = all(digest("cnn", m) == want["cnn"] for _ in range(3))
    ok = ok and digest("transformer", progs["transformer"].load_method("forward")) == want["transformer"]
    ok = ok and pyexec.get_num_threads() == 2
    os._exit(0 if ok else 3)
_, status = os.waitpid(pid, 0)
print(json.dumps({"child": os.waitstatus_to_exitcode(status), "parent": digest("cnn", m) == want["cnn"]}))
"""
    )
    r = run_python(code, PYEXEC_PARALLEL_MIN_COST="1")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout.splitlines()[-1]) == {"child": 0, "parent": True}
