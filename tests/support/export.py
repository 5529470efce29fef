"""Export helpers shared by the tests: real ExecuTorch programs, compared with
torch eager and with ExecuTorch's own runtime."""

from __future__ import annotations

import fcntl
import functools
import hashlib
import inspect
import os
import tempfile
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch

from support import alias_memo, cia_memo

# Speed only, for every export in a test process: torch's operator walk once
# per dispatcher state, and the Callable aliases torch's py_impl builds once.
cia_memo.install()
alias_memo.install()

_HERE = Path(__file__).resolve().parent
_CACHE = _HERE.parent / "_artifacts" / "exports"


def cache_dir() -> Path | None:
    """Where exports are kept (tests/_artifacts/exports, or
    $PYEXEC_TEST_EXPORT_CACHE), or None when that variable is "off"."""
    where = os.environ.get("PYEXEC_TEST_EXPORT_CACHE", str(_CACHE))
    return None if where == "off" else Path(where)


def _write_atomically(path: Path, data: bytes) -> None:
    fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
    with os.fdopen(fd, "wb") as f:
        f.write(data)
    os.replace(tmp, path)  # atomic: a parallel run never reads half a file


def cached(paths: Sequence[Path] | None, make: Callable[[], Sequence[bytes | None]]) -> list[bytes | None]:
    """The files `paths` as made by make() (one bytes, or None for a file it
    does not write, per path), from the cache when they are there; `paths`
    None (the cache is off): make()'s output. The last path is written last,
    so its presence says the others were written (a missing one was None).
    While one process (a pytest-xdist worker) makes a key's files, another
    that wants them waits for them instead of making them too."""
    if paths is None:
        return list(make())
    *rest, last = paths
    last.parent.mkdir(parents=True, exist_ok=True)
    with open(last.with_name(last.name + ".lock"), "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        if last.is_file():
            return [p.read_bytes() if p.is_file() else None for p in rest] + [last.read_bytes()]
        data = list(make())
        if len(data) != len(paths) or data[-1] is None:
            raise ValueError(f"make() gave {len(data)} files for {len(paths)} paths, the last one required")
        for path, d in zip(paths, data):
            if d is not None:
                _write_atomically(path, d)
        return data


def export_manager(
    module: torch.nn.Module,
    inputs: tuple[Any, ...],
    *,
    dynamic_shapes: Any = None,
    alloc_graph_input: bool = True,
    alloc_graph_output: bool = True,
    reinplace: bool = False,
    strict_ir: bool = True,
    preserve: Sequence[Any] = (),
    skip_dim_order: bool = False,
    passes: list[Any] | None = None,
) -> Any:
    """Exports `module` with executorch's exporter (on copies of `inputs`) and
    returns the ExecutorchProgramManager. `preserve`: ops to_edge must not
    decompose, so that their own kernels run."""
    from executorch.exir import EdgeCompileConfig, ExecutorchBackendConfig, to_edge
    from executorch.exir.passes import MemoryPlanningPass

    args = tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in inputs)
    # no_grad: to_executorch re-traces in-place updates of user inputs on fake
    # tensors, which autograd refuses when parameters require grad.
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        ep = torch.export.export(module, args, dynamic_shapes=dynamic_shapes, strict=False)
        edge = to_edge(
            ep,
            compile_config=EdgeCompileConfig(
                _check_ir_validity=strict_ir, preserve_ops=list(preserve), _skip_dim_order=skip_dim_order
            ),
        )
        config = ExecutorchBackendConfig(
            memory_planning_pass=MemoryPlanningPass(
                alloc_graph_input=alloc_graph_input, alloc_graph_output=alloc_graph_output
            ),
            run_reinplace_pass=reinplace,
            passes=list(passes or []),
        )
        return edge.to_executorch(config)


def export_program(module: torch.nn.Module, inputs: tuple[Any, ...], **kwargs: Any) -> bytes:
    """Exports `module` (see export_manager) and returns the .pte bytes, from
    the on-disk cache when the same export was made before.

    The cache (tests/_artifacts/exports, or $PYEXEC_TEST_EXPORT_CACHE; "off"
    disables it) is keyed by everything an export depends on: the torch and
    executorch versions, this file, the source files of every module class in
    the tree (and of the shared model files), the modules' plain attributes,
    the values their methods and function attributes close over, their
    parameters and buffers, the inputs' dtypes and shapes (exports trace
    shapes, not values) and the export options. Exports with custom
    passes are not cached."""
    where = None if kwargs.get("passes") else cache_dir()
    paths = None if where is None else [where / f"{_export_key(module, inputs, kwargs)}.pte"]
    (pte,) = cached(paths, lambda: [bytes(export_manager(module, inputs, **kwargs).buffer)])
    assert pte is not None
    return pte


@functools.cache
def _file_digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _feed(h: Any, value: Any, *, values: bool = True, depth: int = 0) -> None:
    """Adds `value` to the hash: tensors by dtype and shape (and bytes when
    `values`: exports trace shapes, but parameters are baked in), containers
    element by element, functions by their source file, name, defaults and
    closure, anything else by repr."""
    if depth > 8:
        h.update(b"<deep>")
    elif isinstance(value, torch.Tensor):
        t = value.detach().contiguous().cpu()
        h.update(f"T{t.dtype}{tuple(t.shape)}".encode())
        if values and t.numel():
            h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes())
    elif isinstance(value, (list, tuple)):
        h.update(f"{type(value).__name__}{len(value)}(".encode())
        for v in value:
            _feed(h, v, values=values, depth=depth + 1)
        h.update(b")")
    elif isinstance(value, dict):
        h.update(b"{")
        for k in sorted(value, key=repr):
            h.update(repr(k).encode())
            _feed(h, value[k], values=values, depth=depth + 1)
        h.update(b"}")
    elif inspect.isfunction(value) or inspect.ismethod(value):
        fn = getattr(value, "__func__", value)
        h.update(f"F{fn.__module__}.{fn.__qualname__}".encode())
        source = inspect.getsourcefile(fn)
        if source:
            h.update(_file_digest(source).encode())
        _feed(h, fn.__defaults__, depth=depth + 1)
        for cell in fn.__closure__ or ():
            try:
                _feed(h, cell.cell_contents, depth=depth + 1)
            except ValueError:  # an empty cell
                h.update(b"<empty>")
    else:
        h.update(repr(value).encode())


def _export_key(module: torch.nn.Module, inputs: tuple[Any, ...], options: dict[str, Any]) -> str:
    import executorch

    h = hashlib.sha256()
    h.update(f"{torch.__version__}|{getattr(executorch, '__version__', '?')}".encode())
    for shared in ("export.py", "models.py", "zoo.py"):
        if (_HERE / shared).is_file():
            h.update(_file_digest(str(_HERE / shared)).encode())
    for name, m in module.named_modules():
        cls = type(m)
        h.update(f"{name}:{cls.__module__}.{cls.__qualname__}:{m.training}".encode())
        source = inspect.getsourcefile(cls)
        if source:
            h.update(_file_digest(source).encode())
        _feed(h, {k: v for k, v in vars(m).items() if not k.startswith("_") and k != "training"})
        # a class defined in a test function may close over its arguments
        _feed(h, [v for v in vars(cls).values() if inspect.isfunction(v)])
    _feed(h, dict(module.state_dict(keep_vars=False)))
    _feed(h, list(inputs), values=False)
    _feed(h, {k: v for k, v in options.items()})
    return h.hexdigest()[:32]


def run_with_executorch(pte: bytes, inputs: Sequence[Any]) -> list[Any]:
    """Runs the program's forward with ExecuTorch's own runtime."""
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(pte)
    method = program.load_method("forward")
    return list(method.execute([x.clone() if isinstance(x, torch.Tensor) else x for x in inputs]))


def as_numpy(x: Any) -> np.ndarray:
    if isinstance(x, torch.Tensor):
        if x.dtype == torch.bfloat16:  # numpy has no bfloat16: compare exactly as float32
            x = x.float()
        return x.detach().cpu().numpy()
    return np.asarray(x)


def assert_close(actual: Any, expected: Any, *, rtol: float = 1e-4, atol: float = 1e-5, what: str = "") -> None:
    """Floating values within rtol/atol (nan == nan); integers and bools exactly."""
    a = as_numpy(actual)
    e = as_numpy(expected)
    assert a.shape == e.shape, f"{what}: shape {a.shape} != expected {e.shape}"
    assert a.dtype == e.dtype, f"{what}: dtype {a.dtype} != expected {e.dtype}"
    if np.issubdtype(e.dtype, np.floating) or e.dtype == np.float16:
        np.testing.assert_allclose(
            a.astype(np.float64), e.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True, err_msg=what
        )
    else:
        np.testing.assert_array_equal(a, e, err_msg=what)


def eager_reference(module: torch.nn.Module, args: Sequence[Any], pointwise_at: Sequence[int] = ()) -> list[Any]:
    """torch eager's outputs for `args` (run on copies), as a list.

    `pointwise_at` lists flat positions whose reference is taken from ATen's
    scalar loop instead of its vector loop: at each position the module is run
    again on one-element slices of every tensor input, and each output of the
    inputs' shape takes that element. ATen's vectorised CPU loops only handle
    blocks of two or more vectors and leave the tail to the scalar loop, so a
    one-element tensor never reaches SIMD code, whatever the CPU (AVX2,
    AVX-512, NEON, or none). Use it for non-finite inputs to transcendental
    ops: there the vector path's polynomial approximations are specified by
    nothing and differ between CPUs (torch 2.13 on AVX-512 gives
    gelu(+inf) = nan), while the scalar loop evaluates the op's defining
    formula in IEEE arithmetic, as ExecuTorch's portable kernels and pyexec
    do. Every tensor input must have the same shape (pointwise ops)."""
    with torch.no_grad():
        out = module(*[x.clone() if isinstance(x, torch.Tensor) else x for x in args])
    expected = list(out) if isinstance(out, (tuple, list)) else [out]
    if not pointwise_at:
        return expected
    tensors = [x for x in args if isinstance(x, torch.Tensor)]
    shape = tensors[0].shape
    assert all(x.shape == shape for x in tensors), "pointwise_at needs inputs of one shape"
    ones = [1] * len(shape)
    # outputs may alias inputs or each other: write into copies
    expected = [e.clone() if isinstance(e, torch.Tensor) else e for e in expected]
    for k in pointwise_at:
        one = [x.reshape(-1)[k : k + 1].reshape(ones).clone() if isinstance(x, torch.Tensor) else x for x in args]
        with torch.no_grad():
            single = module(*one)
        single = list(single) if isinstance(single, (tuple, list)) else [single]
        for j, e in enumerate(expected):
            if isinstance(e, torch.Tensor) and e.shape == shape:
                e.view(-1)[k] = single[j].reshape(-1)[0]
    return expected


def check_module(
    module: torch.nn.Module,
    inputs: tuple[Any, ...],
    *,
    rtol: float = 1e-4,
    atol: float = 1e-5,
    dynamic_shapes: Any = None,
    run_inputs: Sequence[tuple[Any, ...]] | None = None,
    pointwise_at: Sequence[int] = (),
    **export_kwargs: Any,
) -> bytes:
    """Exports `module`, runs it with pyexec on `inputs` (and on every tuple in
    `run_inputs`), and compares each output with torch eager on fresh copies
    of the same inputs (`pointwise_at`: see eager_reference). Returns the
    program bytes."""
    import pyexec

    pte = export_program(module, inputs, dynamic_shapes=dynamic_shapes, **export_kwargs)
    method = pyexec.load(pte).load_method("forward")
    for args in run_inputs or [inputs]:
        ours_args = [x.clone() if isinstance(x, torch.Tensor) else x for x in args]
        expected = eager_reference(module, args, pointwise_at)
        got = method.execute(ours_args)
        assert len(got) == len(expected), f"{len(got)} outputs, torch gives {len(expected)}"
        for k, (g, e) in enumerate(zip(got, expected)):
            assert_close(g, e, rtol=rtol, atol=atol, what=f"output {k}")
    return pte
