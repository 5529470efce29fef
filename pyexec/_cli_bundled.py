"""The command line's part for bundled programs (.bpte): the test sets
`pyexec inspect` shows, and `pyexec run FILE.bpte --verify`."""

from __future__ import annotations

from typing import Any

from ._bundled import run_bundled
from ._program import Program


def _describe(value: Any) -> str:
    if hasattr(value, "shape"):
        dtype = str(value.dtype).removeprefix("torch.")
        return f"{dtype}{[int(s) for s in value.shape]}"
    return f"{type(value).__name__} {value!r}"


def print_test_suites(program: Program) -> None:
    """Per tested method: how many test cases, and each one's inputs and
    expected outputs (dtype and shape, or the scalar)."""
    suites = program.bundled_test_suites
    print(f"bundled test suites ({len(suites)})")
    for name, suite in suites.items():
        print(f"  method {name!r}: {len(suite.test_cases)} test case{'s' if len(suite.test_cases) != 1 else ''}")
        for i, case in enumerate(suite.test_cases):
            ins = ", ".join(_describe(v) for v in case.inputs) or "none"
            outs = ", ".join(_describe(v) for v in case.expected_outputs) or "none"
            print(f"    test case {i}: inputs {ins} -> expected {outs}")


def verify(program: Program, method_name: str | None, rtol: float, atol: float) -> int:
    """Runs every test case (of `method_name` alone when given), prints PASS
    or FAIL per case and a summary; 0 when all passed, 1 otherwise."""
    results = run_bundled(program, method_name, rtol, atol)
    for r in results:
        verdict = "PASS" if r.passed else f"FAIL: {r.mismatch}"
        print(f"method {r.method_name!r}, test case {r.test_case}: {verdict}")
    failed = sum(not r.passed for r in results)
    print(f"{len(results)} test cases: {len(results) - failed} passed, {failed} failed (rtol={rtol}, atol={atol})")
    return 1 if failed else 0
