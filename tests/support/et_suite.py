"""A pytest plugin that runs ExecuTorch's own shipped tests with pyexec as the
runtime, changing nothing but the runtime. From the repository's root:

    pytest -p support.et_suite $(python tests/support/et_suite.py all)

(`xnnpack-ops` or `runtime` in place of `all` for one part; `ci` for the fixed
part the test command runs). It swaps pyexec in at the two places ExecuTorch's
tests reach a runtime:

- `Serialize.run_artifact` (executorch/backends/test/harness/stages/
  serialize.py), through which every XNNPACK operator test runs its `.pte`:
  the same buffer and the same flattened inputs, `forward` executed, the
  outputs returned as a list of torch tensors, as ExecuTorch's version does;
- `executorch.runtime.Runtime`, which the runtime API tests and a few operator
  tests import, replaced before any test module is imported;
- `executorch.extension.pybindings.portable_lib` (the Module API, which its own
  tests and the bundled-program test import), replaced by pyexec.portable_lib
  the same way.

Export, partitioning, quantization, the eager references and the tolerances
are ExecuTorch's, untouched (the other changes are for speed only: torch.export's
walk over the operators it may keep whole runs once per state of the
dispatcher, support/cia_memo.py, giving the answer torch computes, and the
Callable aliases torch's py_impl builds are made once per argument tuple,
support/alias_memo.py). The run fails when tests ran but no program went
through pyexec, so a harness that stopped swapping cannot pass unnoticed."""

from __future__ import annotations

import copy
import sys
from pathlib import Path
from typing import Any

import pytest

# The shipped tests, relative to the executorch package.
XNNPACK_OPS = "backends/xnnpack/test/ops"
RUNTIME = ["runtime/test/test_runtime.py", "runtime/test/test_runtime_xnnpack.py"]
# The Module API's tests (executorch.extension.pybindings.portable_lib), with
# pyexec.portable_lib in its place, and the bundled-program test that runs one.
PYBINDINGS = ["extension/pybindings/test/test_pybindings.py", "extension/pybindings/test/test_backend_pybinding.py",
              "devtools/bundled_program/test/test_end2end.py"]
LLM_RUNNER = ["extension/llm/runner/test/test_runner_pybindings.py"]  # against pyexec.llm (et_llm_runner.py)
# The LLM custom-operator tests that run a program through executorch.runtime
# (the others in that folder run the ops eagerly only).
LLM_CUSTOM_OPS = ["extension/llm/custom_ops/test_gated_delta.py"]

# The fixed part the test command runs (the whole set takes about 20 minutes
# of one core, mostly exporting and lowering): every XNNPACK operator file but
# the fourteen slowest, which together take 90% of that time (the full
# command above runs them too), and the runtime tests.
CI_EXCLUDED = ["test_linear.py", "test_conv2d.py", "test_maxpool2d.py", "test_cat.py", "test_lstm.py",
               "test_check_quant_params.py", "test_conv1d.py", "test_add.py", "test_multiply.py",
               "test_hardtanh.py", "test_static_constant_pad.py", "test_slice_copy.py", "test_batch_norm.py",
               "test_permute.py"]


def executorch_root() -> Path:
    import importlib.util

    spec = importlib.util.find_spec("executorch")  # a namespace package: no __file__
    if spec is None or not spec.submodule_search_locations:
        raise SystemExit("executorch is not installed (pip install -r requirements-test.txt)")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def suite_paths(name: str) -> list[str]:
    """The shipped test paths of a suite: all, xnnpack-ops, runtime, pybindings, llm-runner, llm-custom-ops or ci."""
    root = executorch_root()
    ops = root / XNNPACK_OPS
    runtime = [str(root / p) for p in RUNTIME]
    pybindings = [str(root / p) for p in PYBINDINGS]
    llm_runner = [str(root / p) for p in LLM_RUNNER]
    if name == "xnnpack-ops":
        return [str(ops)]
    custom_ops = [str(root / p) for p in LLM_CUSTOM_OPS]
    if name == "llm-custom-ops":
        return custom_ops
    if name == "runtime":
        return runtime
    if name == "pybindings":
        return pybindings
    if name == "llm-runner":
        return llm_runner
    if name == "all":
        return [str(ops), *runtime, *pybindings, *llm_runner, *custom_ops]
    if name == "ci":
        files = sorted(p.name for p in ops.glob("test_*.py") if p.name not in CI_EXCLUDED)
        return [str(ops / f) for f in files] + runtime + pybindings + llm_runner + custom_ops
    raise SystemExit(f"unknown suite {name!r}: all, xnnpack-ops, runtime, pybindings, llm-runner, llm-custom-ops or ci")


_runs = {"programs": 0, "tests": 0}


def _run_artifact(self: Any, inputs: Any) -> list[Any]:
    """Serialize.run_artifact with pyexec in place of ExecuTorch's runtime."""
    from torch.utils._pytree import tree_flatten

    import pyexec

    inputs_flattened, _ = tree_flatten(inputs)
    method = pyexec.load(self.buffer).load_method("forward", output_type="torch")
    _runs["programs"] += 1
    return copy.deepcopy(method.execute(tuple(inputs_flattened)))


class _Runtime:
    """`executorch.runtime.Runtime` as the tests call it, over pyexec.Runtime
    (which takes ExecuTorch's keyword arguments)."""

    _one: _Counted | None = None

    @staticmethod
    def get() -> Any:
        """One wrapper, as pyexec.Runtime.get() is one Runtime (the tests
        check `Runtime.get() is Runtime.get()`)."""
        import pyexec

        if _Runtime._one is None:
            _Runtime._one = _Counted(pyexec.Runtime.get())
        return _Runtime._one


class _Counted:
    def __init__(self, runtime: Any) -> None:
        self._runtime = runtime

    def __getattr__(self, name: str) -> Any:
        return getattr(self._runtime, name)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Counted) and other._runtime is self._runtime

    def __hash__(self) -> int:
        return hash(self._runtime)

    def load_program(self, *args: Any, **kwargs: Any) -> Any:
        _runs["programs"] += 1
        return self._runtime.load_program(*args, **kwargs)


def _counted(load: Any) -> Any:
    """A pyexec.portable_lib loader that counts the programs it loads."""

    def wrapped(*args: Any, **kwargs: Any) -> Any:
        _runs["programs"] += 1
        return load(*args, **kwargs)

    wrapped.__name__ = load.__name__
    wrapped.__doc__ = load.__doc__
    return wrapped


def _swap_portable_lib() -> None:
    """executorch.extension.pybindings.portable_lib becomes pyexec's (its
    loaders counted), before any test module imports it."""
    import types

    import executorch.extension.pybindings

    import pyexec.portable_lib as compat

    swapped = types.ModuleType("executorch.extension.pybindings.portable_lib", compat.__doc__)
    for name in compat.__all__:
        value = getattr(compat, name)
        swapped.__dict__[name] = _counted(value) if name.startswith(("_load_for", "_load_program", "_load_bundled")) \
            else value
    sys.modules["executorch.extension.pybindings.portable_lib"] = swapped
    executorch.extension.pybindings.portable_lib = swapped  # type: ignore[attr-defined]


def pytest_configure(config: pytest.Config) -> None:
    import executorch.runtime
    from executorch.backends.test.harness.stages import serialize

    # The shipped tests live inside the virtual environment, which pytest
    # otherwise skips when it collects.
    config.option.collect_in_virtualenv = True
    serialize.Serialize.run_artifact = _run_artifact  # type: ignore[method-assign]
    executorch.runtime.Runtime = _Runtime  # type: ignore[misc,assignment]
    _swap_portable_lib()
    # ExecuTorch's LLM runner package is pyexec.llm for the runner's own tests (and their check)
    from support import et_llm_runner

    et_llm_runner.install()
    if not config.pluginmanager.is_registered(et_llm_runner):
        config.pluginmanager.register(et_llm_runner)
    # Speed only: torch.export's operator walk once per dispatcher state (the
    # same answer torch computes; support/cia_memo.py), and the Callable
    # aliases torch's py_impl builds, once per argument tuple
    # (support/alias_memo.py).
    from support import alias_memo, cia_memo

    cia_memo.install()
    alias_memo.install()


# Shipped tests that fail with ExecuTorch's own runtime too, before any
# runtime runs: their export stops ("Missing out variants" for the
# quantized_decomposed operators, which only `import executorch.kernels.quantized`
# would register, and the tests do not import it). Deselected, and counted in
# the summary, so that the suite's result is about the runtime.
FAIL_ON_EXECUTORCH = {
    "test_pybindings.py::PybindingsTest::test_quantized_ops",
    "test_pybindings.py::PybindingsTest::test_method_quantized_ops",
}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    keep, drop = [], []
    for item in items:
        (drop if any(item.nodeid.endswith(k) for k in FAIL_ON_EXECUTORCH) else keep).append(item)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep


def pytest_runtest_call(item: pytest.Item) -> None:
    if "extension/llm/runner" in str(item.fspath):
        return  # the runner API tests run no program (support/et_llm_runner.py checks their swap)
    _runs["tests"] += 1


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: report to the controller
        workeroutput["pyexec_runs"] = dict(_runs)


def pytest_testnodedown(node: Any, error: Any) -> None:  # xdist's controller
    for key, n in getattr(node, "workeroutput", {}).get("pyexec_runs", {}).items():
        _runs[key] += n


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    terminalreporter.write_line(f"pyexec ran {_runs['programs']} programs in {_runs['tests']} ExecuTorch tests")
    if _runs["tests"] and not _runs["programs"]:
        terminalreporter.write_line("pyexec ran no program: the runtime was not swapped in", red=True)
        terminalreporter._session.exitstatus = pytest.ExitCode.TESTS_FAILED


if __name__ == "__main__":
    print(" ".join(suite_paths(sys.argv[1] if len(sys.argv) > 1 else "all")))
