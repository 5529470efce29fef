"""Bundled programs (.bpte): the test sets ExecuTorch's BundledProgram wraps
around a program, and `verify_bundled`, which runs them and compares the
outputs as ExecuTorch's `verify_result_with_bundled_expected_output` does.

`pyexec.load` accepts a .bpte like a .pte (the library finds the program
inside); `Program.is_bundled` and `Program.bundled_test_suites` read the
test sets."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from ._errors import Error, InvalidArgumentError, InvalidProgramError
from ._meta import MethodMeta, TensorInfo


@dataclass(frozen=True)
class BundledTestCase:
    """One test case: inputs for a method and the outputs expected from them."""

    inputs: tuple[Any, ...]
    """numpy arrays for tensors (torch tensors for bfloat16, which numpy
    lacks); int, float or bool for scalars."""
    expected_outputs: tuple[Any, ...]
    """numpy arrays (torch tensors for bfloat16), one per method output."""


@dataclass(frozen=True)
class BundledTestSuite:
    """The test cases a bundled program holds for one method."""

    method_name: str
    test_cases: tuple[BundledTestCase, ...]


class _Method(Protocol):
    def execute(self, inputs: Sequence[Any] | None = None, clone_outputs: bool = True) -> list[Any]: ...


class BundledProgramLike(Protocol):
    """What verify_bundled needs of a Program."""

    @property
    def bundled_test_suites(self) -> dict[str, BundledTestSuite]: ...

    @property
    def method_names(self) -> Any: ...

    def method_meta(self, name: str) -> MethodMeta: ...

    def load_method(self, name: str = "forward", output_type: str = "auto") -> Any: ...


class VerificationError(Error, RuntimeError):
    """An output of a bundled test case differs from the expected one (beyond
    the tolerances), or a test case has no expected outputs to compare with:
    what ExecuTorch reports as a RuntimeError. `method_name`, `test_case` and
    `output` (None for a test case without expected outputs) locate it."""

    def __init__(self, message: str, method_name: str, test_case: int, output: int | None) -> None:
        super().__init__(message)
        self.method_name = method_name
        self.test_case = test_case
        self.output = output


@dataclass(frozen=True)
class BundledResult:
    """The outcome of one test case: its outputs, and what failed (None
    when every output matched): "output K: why" for the first output that
    differs (`mismatch_output` is then K), or that the test case holds no
    expected outputs (ExecuTorch refuses to verify those too)."""

    method_name: str
    test_case: int
    outputs: tuple[Any, ...]
    mismatch: str | None = None
    mismatch_output: int | None = None

    @property
    def passed(self) -> bool:
        return self.mismatch is None


def _as_numpy(value: Any) -> Any:
    """A tensor (numpy array or torch tensor) as a numpy array, or a scalar as is."""
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "detach") and hasattr(value, "numpy"):  # torch.Tensor
        t = value.detach().cpu()
        if str(t.dtype) == "torch.bfloat16":
            return t.float().numpy()  # exact: compared bitwise below, on the bf16 bits
        return t.numpy()
    return value


def _dtype_name(value: Any) -> str:
    if hasattr(value, "dtype"):
        name = str(value.dtype)
        return name.removeprefix("torch.")
    return type(value).__name__


def _shape(value: Any) -> tuple[int, ...]:
    return tuple(int(s) for s in getattr(value, "shape", ()))


def _bits(value: Any) -> bytes:
    """The bytes of a tensor's elements in row-major order."""
    if hasattr(value, "detach"):  # torch.Tensor (bfloat16 included)
        import torch

        t = value.detach().cpu().contiguous()
        return bytes(t.view(torch.uint8).numpy().tobytes()) if t.numel() else b""
    return np.ascontiguousarray(value).tobytes()


def compare(expected: Any, actual: Any, rtol: float, atol: float) -> str | None:
    """ExecuTorch's tensors_are_close, with the reason when they are not:
    dtypes and shapes must be equal; float16/32/64 elements match when both
    are NaN, both infinite of the same sign, or |actual - expected| <= atol +
    |rtol * actual| (exactly equal when rtol and atol are both 0), the
    difference taken in the tensor's dtype (float16 in float64, as
    ExecuTorch does); every other dtype is compared bit for bit."""
    if _dtype_name(expected) != _dtype_name(actual):
        return f"dtype {_dtype_name(actual)}, expected {_dtype_name(expected)}"
    if _shape(expected) != _shape(actual):
        return f"shape {list(_shape(actual))}, expected {list(_shape(expected))}"
    dtype = _dtype_name(expected)
    if dtype not in ("float16", "float32", "float64"):
        if _bits(expected) != _bits(actual):
            return f"{dtype} values differ"
        return None
    a = np.asarray(_as_numpy(expected))
    b = np.asarray(_as_numpy(actual))
    if dtype == "float16":
        a, b = a.astype(np.float64), b.astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        both_nan = np.isnan(a) & np.isnan(b)
        both_inf = ~np.isfinite(a) & ~np.isfinite(b) & ((a > 0) == (b > 0))
        if rtol == 0 and atol == 0:
            close = a == b
        else:
            err = np.abs(a - b).astype(np.float64)  # in the tensor's dtype, as ExecuTorch
            allowed = atol + np.abs(rtol * b.astype(np.float64))
            close = np.isfinite(err) & (err <= allowed)
    ok = both_nan | both_inf | close
    if bool(ok.all()):
        return None
    bad = np.argwhere(~ok)
    first = tuple(int(i) for i in bad[0])
    return (
        f"{len(bad)} of {ok.size} elements differ (rtol={rtol}, atol={atol}); first at {list(first)}: "
        f"got {b[first].item()!r}, expected {a[first].item()!r}"
    )


def mismatch(case: BundledTestCase, outputs: Sequence[Any], rtol: float, atol: float) -> tuple[str | None, int | None]:
    """How a call's `outputs` fail test case `case` (see `compare`): ("output
    K: why", K) for the first output that differs, (why, None) when the case
    holds no expected outputs or another count of them, (None, None) when
    every output matches."""
    expected = case.expected_outputs
    if not expected:
        return "no expected outputs to compare with", None
    if len(expected) != len(outputs):
        return f"the method returned {len(outputs)} outputs, the test case expects {len(expected)}", None
    for k, (want, got) in enumerate(zip(expected, outputs)):
        why = compare(want, got, rtol, atol)
        if why is not None:
            return f"output {k}: {why}", k
    return None, None


def _check_fits(meta: MethodMeta, case: BundledTestCase, where: str) -> None:
    """InvalidProgramError when a test case cannot be a call of the method:
    input or output count, a tensor where a scalar is expected or the
    reverse, dtype, rank, or a size that the input's exported shape rules
    out (equal when static, at most the bound when dynamic)."""
    if len(case.inputs) != len(meta.inputs):
        raise InvalidProgramError(
            f"{where}: has {len(case.inputs)} inputs, method '{meta.name}' takes {len(meta.inputs)}"
        )
    if case.expected_outputs and len(case.expected_outputs) != len(meta.outputs):
        raise InvalidProgramError(
            f"{where}: has {len(case.expected_outputs)} expected outputs, method '{meta.name}' returns "
            f"{len(meta.outputs)}"
        )
    for kind, values, infos in (("input", case.inputs, meta.inputs), ("expected output", case.expected_outputs,
                                                                       meta.outputs)):
        for j, (value, info) in enumerate(zip(values, infos)):
            _check_value(f"{where}: {kind} {j}", value, info)


def _check_value(where: str, value: Any, info: TensorInfo | None) -> None:
    is_tensor = hasattr(value, "shape")
    if info is None:
        if is_tensor:
            raise InvalidProgramError(f"{where} is a tensor, the method's slot holds no tensor")
        return
    if not is_tensor:
        raise InvalidProgramError(f"{where} is {type(value).__name__} {value!r}, the method's slot is a tensor")
    dtype, shape = _dtype_name(value), _shape(value)
    if dtype != info.dtype:
        raise InvalidProgramError(f"{where} has dtype {dtype}, the method's has {info.dtype}")
    if len(shape) != len(info.sizes):
        raise InvalidProgramError(f"{where} has rank {len(shape)}, the method's has rank {len(info.sizes)}")
    for d, (got, bound) in enumerate(zip(shape, info.sizes)):
        if got > bound if info.is_dynamic else got != bound:
            rule = f"at most {list(info.sizes)}" if info.is_dynamic else f"{list(info.sizes)}"
            raise InvalidProgramError(f"{where} has shape {list(shape)}, the method's is {rule} (dim {d})")


def _fresh(value: Any) -> Any:
    """A writable copy of a tensor (a method may write an input in place)."""
    if isinstance(value, np.ndarray):
        return value.copy()
    if hasattr(value, "clone"):
        return value.clone()
    return value


def run_bundled(
    program: BundledProgramLike,
    method_name: str | None = None,
    rtol: float = 1e-5,
    atol: float = 1e-8,
) -> list[BundledResult]:
    """Runs every test case (of `method_name`, or of every tested method in
    the bundle's order) on a fresh Method per suite and compares its outputs
    with the expected ones (see `compare`); a mismatch is recorded, not
    raised.

    Raises:
        InvalidArgumentError: the program holds no test suites (a plain
            .pte), no test suite tests `method_name`, or a tolerance is
            negative or NaN.
        InvalidProgramError: a test suite names a method the program lacks,
            or a test case does not fit its method (input or output count,
            dtype, rank, shape), naming the method, the test case and the
            value.
        Error: what loading the method or running it raises (missing
            kernels, a kernel failure), with the method and test case named.
    """
    for name, tol in (("rtol", rtol), ("atol", atol)):
        if not isinstance(tol, (int, float)) or isinstance(tol, bool) or not tol >= 0:
            raise InvalidArgumentError(f"{name} must be a number >= 0, got {tol!r}")
    suites = program.bundled_test_suites
    if not suites:
        raise InvalidArgumentError("the program holds no bundled test suites (it is not a bundled program)")
    if method_name is not None:
        if method_name not in suites:
            raise InvalidArgumentError(
                f"the bundled program has no test suite for method '{method_name}' "
                f"(tested methods: {', '.join(repr(n) for n in suites)})"
            )
        suites = {method_name: suites[method_name]}
    results: list[BundledResult] = []
    for name, suite in suites.items():
        if name not in program.method_names:
            raise InvalidProgramError(
                f"bundled test suite for method '{name}': the program has no such method "
                f"(methods: {', '.join(repr(n) for n in program.method_names)})"
            )
        meta = program.method_meta(name)
        for i, case in enumerate(suite.test_cases):
            _check_fits(meta, case, f"method '{name}', test case {i}")
        # numpy has no bfloat16: such outputs come back as torch tensors
        half = any(info is not None and info.dtype == "bfloat16" for info in meta.outputs)
        method = program.load_method(name, output_type="torch" if half else "numpy")
        for i, case in enumerate(suite.test_cases):
            try:
                outputs = method.execute([_fresh(x) for x in case.inputs])
            except Error as exc:
                raise type(exc)(f"method '{name}', test case {i}: {exc}") from exc
            results.append(BundledResult(name, i, tuple(outputs), *mismatch(case, outputs, rtol, atol)))
    return results


def verify_bundled(
    program: BundledProgramLike,
    method_name: str | None = None,
    rtol: float = 1e-5,
    atol: float = 1e-8,
) -> list[BundledResult]:
    """Runs every test case of a bundled program (those of `method_name`
    only, when given) and checks each output against the expected one as
    ExecuTorch's verify_result_with_bundled_expected_output does (same
    defaults, rtol=1e-5 and atol=1e-8; see `compare`). Returns the results,
    all passed.

    Raises:
        VerificationError: the first output that does not match, naming the
            method, the test case index and the output index, and how it
            differs; or a test case without expected outputs.
        InvalidArgumentError: as run_bundled (no test suites, no suite for
            `method_name`, a negative tolerance).
        InvalidProgramError: as run_bundled (a test case that does not fit
            its method, a suite for a method the program lacks).
        Error: what loading or running the method raises, with the method
            and test case named.
    """
    results = run_bundled(program, method_name, rtol, atol)
    for r in results:
        if r.mismatch is not None:
            raise VerificationError(f"method '{r.method_name}', test case {r.test_case}: {r.mismatch}",
                                    r.method_name, r.test_case, r.mismatch_output)
    return results
