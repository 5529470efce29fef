"""A pytest plugin that runs ExecuTorch's own LLM runner tests
(extension/llm/runner/test/test_runner_pybindings.py) against pyexec.llm:
`executorch.extension.llm.runner` is pyexec.llm in sys.modules before any
test module imports it, so the tests' `from executorch.extension.llm.runner
import ...` gets pyexec's classes. From the repository's root:

    pytest -p support.et_llm_runner $(python tests/support/et_suite.py llm-runner)

(support.et_suite installs the same swap, so its `ci` suite runs these tests
against pyexec too). The run fails when tests ran but none used pyexec.llm."""

from __future__ import annotations

import sys
from typing import Any

import pytest

MODULE = "executorch.extension.llm.runner"
_used = {"tests": 0, "pyexec": 0}


def install() -> None:
    """pyexec.llm in place of ExecuTorch's runner package and of its compiled
    module (pytest may run the package's __init__.py itself when it collects
    the tests inside it; that file then re-exports pyexec.llm's classes)."""
    import pyexec.llm

    sys.modules[MODULE] = pyexec.llm
    sys.modules[MODULE + "._llm_runner"] = pyexec.llm


def pytest_configure(config: pytest.Config) -> None:
    config.option.collect_in_virtualenv = True
    install()


def pytest_runtest_call(item: pytest.Item) -> None:
    module = getattr(item, "module", None)
    if module is not None and "runner" in getattr(module, "__name__", "") and "llm" in str(item.fspath):
        _used["tests"] += 1
        if getattr(module, "GenerationConfig", None) is not None:
            if module.GenerationConfig.__module__.startswith("pyexec."):
                _used["pyexec"] += 1


def pytest_sessionfinish(session: pytest.Session) -> None:
    workeroutput = getattr(session.config, "workeroutput", None)
    if workeroutput is not None:  # an xdist worker: report to the controller
        workeroutput["pyexec_llm_runner"] = dict(_used)


def pytest_testnodedown(node: Any, error: Any) -> None:  # xdist's controller
    for key, n in getattr(node, "workeroutput", {}).get("pyexec_llm_runner", {}).items():
        _used[key] += n


def pytest_terminal_summary(terminalreporter: Any, exitstatus: int, config: pytest.Config) -> None:
    if not _used["tests"]:
        return
    terminalreporter.write_line(f"pyexec.llm stood in for {MODULE} in {_used['pyexec']} of {_used['tests']} tests")
    if _used["pyexec"] < _used["tests"]:
        terminalreporter.write_line(f"some tests imported ExecuTorch's own {MODULE}", red=True)
        terminalreporter._session.exitstatus = pytest.ExitCode.TESTS_FAILED
