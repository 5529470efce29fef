"""Loading programs: sources, metadata, and the errors for bad files, missing
kernels and bad inputs."""

from __future__ import annotations

import io
import re
import sys
from pathlib import Path
from typing import Any, Callable

import numpy as np
import pytest
import torch
from support.export import export_manager, export_program

import pyexec


class AddMul(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x + y, x * y


@pytest.fixture(scope="module")
def add_mul() -> bytes:
    return export_program(AddMul(), (torch.randn(2, 3), torch.randn(2, 3)))


# ---- sources ---------------------------------------------------------------


def test_load_from_path_bytes_and_memoryview_agree(add_mul: bytes, tmp_path: Path) -> None:
    path = tmp_path / "m.pte"
    path.write_bytes(add_mul)
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    for source in (str(path), path, add_mul, bytearray(add_mul), memoryview(add_mul)):
        s, p = pyexec.load(source).load_method("forward").execute([x, y])
        torch.testing.assert_close(s, x + y)
        torch.testing.assert_close(p, x * y)


def test_metadata_without_loading_the_method(add_mul: bytes) -> None:
    program = pyexec.load(add_mul)
    assert program.method_names == {"forward"} and list(program.method_names) == ["forward"]
    meta = program.method_meta("forward")
    assert meta.name == "forward"
    assert len(meta.inputs) == 2 and len(meta.outputs) == 2
    info = meta.inputs[0]
    assert info is not None
    assert info.sizes == (2, 3) and info.dtype == "float32" and info.dim_order == (0, 1)
    assert info.nbytes == 24 and info.is_memory_planned and not info.is_dynamic


@pytest.mark.parametrize("reinplace", [False, True], ids=["copy", "reinplaced"])
@pytest.mark.parametrize("planned", [True, False], ids=["planned", "unplanned"])
def test_is_mutated_marks_the_inputs_the_export_records_as_mutated(reinplace: bool, planned: bool) -> None:
    """A decode step that writes its two KV-cache arguments in place (an
    index_put_ with reinplace, index_put + copy_ without). The reference is the
    exporter's graph signature: its user-input mutations give the mutated
    inputs, and the output each one's new value comes back as."""
    from support.models import decode_step

    spec = decode_step()
    manager = export_manager(spec.module, spec.inputs, reinplace=reinplace, alloc_graph_input=planned)
    signature = manager.exported_program().graph_signature
    names = list(signature.user_inputs)
    mutated = {names.index(n) for n in signature.user_inputs_to_mutate.values()}
    write_backs = {i: names.index(o.target) for i, o in enumerate(signature.output_specs)
                   if o.kind.name == "USER_INPUT_MUTATION"}
    assert mutated == {2, 3} and sorted(write_backs.values()) == [2, 3]  # the model is what this test assumes

    method = pyexec.load(bytes(manager.buffer)).load_method("forward")
    meta = method.meta
    assert {j for j, info in enumerate(meta.inputs) if info is not None and info.is_mutated} == mutated
    assert not any(info is not None and info.is_mutated for info in meta.outputs)
    assert {i: method.output_aliases_input(i) for i in write_backs} == write_backs

    # What the flag promises: the program writes those inputs, and no other
    # (an unplanned one in the caller's memory), as torch eager does.
    inputs = [x.clone() for x in spec.inputs]
    eager = [x.clone() for x in spec.inputs]
    with torch.no_grad():
        spec.module(*eager)
    outputs = method.execute(inputs)
    for j, (x, before, after) in enumerate(zip(inputs, spec.inputs, eager)):
        if planned or j not in mutated:
            assert torch.equal(x, before), f"input {j} changed"
        else:
            torch.testing.assert_close(x, after)
    if planned and reinplace:
        # The exporter's plan lets later values reuse a planned input that
        # index_put_ updates: ExecuTorch's own runtime returns non-values there
        # too, so only the metadata above is checked.
        return
    for i, j in write_backs.items():
        torch.testing.assert_close(outputs[i], eager[j])


def test_unknown_method_is_named(add_mul: bytes) -> None:
    with pytest.raises(pyexec.InvalidArgumentError, match="no method 'backward'"):
        pyexec.load(add_mul).load_method("backward")


def test_unknown_method_message_is_the_same_from_every_call(add_mul: bytes) -> None:
    """One message, the library's, whichever call meets the name first (the
    CLI's is tested in test_cli_run.py)."""
    program = pyexec.load(add_mul)
    calls = (program.load_method, program.method_meta, program.operators)
    messages = set()
    for call in calls:
        with pytest.raises(pyexec.InvalidArgumentError) as info:
            call("backward")
        messages.add(str(info.value))
    assert messages == {"program has no method 'backward' (methods: 'forward')"}


def test_missing_file_is_a_file_error(tmp_path: Path) -> None:
    with pytest.raises(pyexec.FileError, match="missing.pte"):
        pyexec.load(tmp_path / "missing.pte")


def test_wrong_source_type_is_refused() -> None:
    with pytest.raises(pyexec.InvalidArgumentError, match="int"):
        pyexec.load(42)  # type: ignore[arg-type]


# ---- ExecuTorch's spellings ------------------------------------------------


def executorch_user_code(runtime: Any, source: Any, inputs: list[torch.Tensor]) -> tuple[set[str], list[Any]]:
    """What a user of executorch.runtime writes, run unchanged on either runtime."""
    program = runtime.load_program(source)
    assert program.metadata("forward") is not None
    method = program.load_method("forward")
    assert method.metadata is not None
    return program.method_names, list(method.execute(inputs))


def test_executorch_spellings_run_executorch_code_unchanged(add_mul: bytes, tmp_path: Path) -> None:
    from executorch.runtime import Runtime

    path = tmp_path / "m.pte"
    path.write_bytes(add_mul)
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    sources: list[Callable[[], Any]] = [
        lambda: path,
        lambda: str(path),
        lambda: add_mul,
        lambda: bytearray(add_mul),
        lambda: io.BytesIO(add_mul),
    ]
    for source in sources:
        names, expected = executorch_user_code(Runtime.get(), source(), [x, y])
        got_names, got = executorch_user_code(pyexec.Runtime.get(), source(), [x, y])
        assert got_names == names and names == {"forward"}
        for g, e in zip(got, expected):
            torch.testing.assert_close(g, e)


def test_executorch_spellings_are_the_pyexec_calls(add_mul: bytes, tmp_path: Path) -> None:
    runtime = pyexec.Runtime.get()
    assert runtime is pyexec.Runtime.get() and repr(runtime) == "<pyexec.Runtime>"
    path = tmp_path / "m.pte"
    path.write_bytes(add_mul)
    program = runtime.load_program(path)
    assert isinstance(program, pyexec.Program) and repr(program) == repr(pyexec.load(path))
    assert program.metadata("forward") == program.method_meta("forward")
    method = program.load_method("forward")
    assert method.metadata is method.meta
    with pytest.raises(pyexec.InvalidArgumentError, match=r"^program has no method 'backward'"):
        program.metadata("backward")
    with pytest.raises(pyexec.FileError, match="missing.pte"):
        runtime.load_program(tmp_path / "missing.pte")


def test_executorch_runtime_keywords_and_registries(add_mul: bytes) -> None:
    from executorch.runtime import Runtime, Verification

    runtime = pyexec.Runtime.get()
    for verification in (Verification.Minimal, Verification.InternalConsistency):
        program = runtime.load_program(add_mul, verification=verification)
        assert program.method_names == {"forward"}
    with pytest.raises(pyexec.InvalidArgumentError, match=r"debug_buffer_size must be an int >= 0"):
        runtime.load_program(add_mul, enable_etdump=True, debug_buffer_size=-1)
    names = runtime.operator_registry.operator_names
    assert isinstance(names, set) and names == set(pyexec.kernels()) and "aten::add.out" in names
    assert runtime.backend_registry.registered_backend_names == ["XnnpackBackend"]
    assert runtime.backend_registry.is_available("XnnpackBackend")
    assert not runtime.backend_registry.is_available("VulkanBackend")
    # ExecuTorch's runtime has the same backend under the same id.
    assert Runtime.get().backend_registry.is_available("XnnpackBackend")


def test_load_takes_file_like_objects(add_mul: bytes, tmp_path: Path) -> None:
    path = tmp_path / "m.pte"
    path.write_bytes(add_mul)
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    expected = pyexec.load(add_mul).load_method().execute([x, y])
    with open(path, "rb") as f:
        from_file = pyexec.load(f)
    for program in (from_file, pyexec.load(io.BytesIO(add_mul))):
        torch.testing.assert_close(program.load_method().execute([x, y]), expected)
    with pytest.raises(pyexec.InvalidArgumentError, match=r"read\(\) must return bytes, got str"):
        pyexec.load(io.StringIO("a text stream"))


def test_method_names_is_a_set_in_file_order() -> None:
    names = pyexec._meta.MethodNames(("forward", "decode", "prefill"))
    assert names == {"prefill", "forward", "decode"} and names == frozenset(names)
    assert names != {"forward"} and names != ("forward", "decode", "prefill")
    assert list(names) == ["forward", "decode", "prefill"] and len(names) == 3
    assert "decode" in names and "backward" not in names
    assert hash(names) == hash(frozenset(names)) and repr(names) == "{'forward', 'decode', 'prefill'}"


# ---- arguments -------------------------------------------------------------


@pytest.mark.parametrize("bad", ["tensor", "Torch", None, 3, ["numpy"]])
def test_output_type_must_be_one_of_the_three_names(add_mul: bytes, bad: object) -> None:
    program = pyexec.load(add_mul)
    with pytest.raises(pyexec.InvalidArgumentError, match=r"output_type must be 'auto', 'torch' or 'numpy', got "):
        program.load_method("forward", output_type=bad)  # type: ignore[arg-type]


def test_output_type_torch_without_torch_is_refused_at_load(add_mul: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    """As if torch were not installed (None in sys.modules makes `import torch`
    fail): a pyexec error naming the argument, not a bare ModuleNotFoundError
    at the first execute; numpy outputs still work."""
    program = pyexec.load(add_mul)
    monkeypatch.setitem(sys.modules, "torch", None)
    with pytest.raises(pyexec.InvalidArgumentError, match=r"output_type='torch' needs torch, which is not installed"):
        program.load_method("forward", output_type="torch")
    x, y = np.ones((2, 3), np.float32), np.full((2, 3), 2, np.float32)
    for output_type in ("numpy", "auto"):
        s, p = program.load_method("forward", output_type=output_type).execute([x, y])
        assert isinstance(s, np.ndarray)
        np.testing.assert_array_equal(s, x + y)
        np.testing.assert_array_equal(p, x * y)


@pytest.mark.parametrize("bad", ["no", "False", 0, 1, None, np.True_])
def test_clone_outputs_must_be_a_bool(add_mul: bytes, bad: object) -> None:
    method = pyexec.load(add_mul).load_method("forward")
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    with pytest.raises(pyexec.InvalidArgumentError, match=r"clone_outputs must be True or False, got "):
        method.execute([x, y], clone_outputs=bad)  # type: ignore[arg-type]
    method.execute([x, y])
    with pytest.raises(pyexec.InvalidArgumentError, match=r"clone_outputs must be True or False, got "):
        method.get_outputs(clone_outputs=bad)  # type: ignore[arg-type]


@pytest.mark.parametrize("bad", [3, b"forward", ["forward"], None, "forward\0"])
def test_method_name_must_be_a_str(add_mul: bytes, bad: object) -> None:
    program = pyexec.load(add_mul)
    for call in (program.load_method, program.method_meta, program.operators):
        with pytest.raises(pyexec.InvalidArgumentError, match="method name must"):
            call(bad)  # type: ignore[operator]


@pytest.mark.parametrize("bad", ["0", 0.0, True, None, np.int64(0)])
def test_output_index_must_be_an_int(add_mul: bytes, bad: object) -> None:
    method = pyexec.load(add_mul).load_method("forward")
    with pytest.raises(pyexec.InvalidArgumentError, match="output index must be an int"):
        method.set_output(None, bad)  # type: ignore[arg-type]
    with pytest.raises(pyexec.InvalidArgumentError, match="output index must be an int"):
        method.output_aliases_input(bad)  # type: ignore[arg-type]


def test_method_needs_a_program(add_mul: bytes) -> None:
    with pytest.raises(pyexec.InvalidArgumentError, match="program must be a pyexec.Program, got bytes"):
        pyexec.Method(add_mul, "forward")  # type: ignore[arg-type]


def test_path_with_a_nul_is_refused() -> None:
    with pytest.raises(pyexec.InvalidArgumentError, match="NUL"):
        pyexec.load("model.pte\0.txt")


# ---- reprs and docstrings ----------------------------------------------------


def test_reprs_say_what_each_object_is(add_mul: bytes, tmp_path: Path) -> None:
    path = tmp_path / "m.pte"
    path.write_bytes(add_mul)
    program = pyexec.load(path)
    assert repr(program) == f"<pyexec.Program methods=['forward'] source={str(path)!r}>"
    from_bytes = pyexec.load(add_mul)
    assert repr(from_bytes) == f"<pyexec.Program methods=['forward'] source=<bytes, {len(add_mul)} bytes>>"
    method = program.load_method("forward", output_type="numpy")
    assert repr(method) == "<pyexec.Method 'forward' inputs=2 outputs=2 output_type='numpy'>"
    assert repr(method.meta.inputs[0]) == "<pyexec.TensorInfo float32[2, 3] planned nbytes=24>"
    assert repr(method.meta) == (
        "<pyexec.MethodMeta 'forward' inputs=[float32[2, 3] planned, float32[2, 3] planned] "
        "outputs=[float32[2, 3] planned, float32[2, 3] planned]>"
    )
    method.close()
    program.close()
    assert repr(method).endswith("output_type='numpy' closed>")
    assert repr(program).endswith(" closed>")


def test_tensor_info_repr_shows_what_is_not_plain() -> None:
    info = pyexec.TensorInfo(sizes=(1, 3, 8, 8), dtype="float32", dim_order=(0, 2, 3, 1), nbytes=768,
                             is_memory_planned=False, is_dynamic=True, is_mutated=True)
    assert repr(info) == "<pyexec.TensorInfo float32[1, 3, 8, 8] unplanned dynamic mutated dim_order=(0, 2, 3, 1) " \
        "nbytes=768>"


PUBLIC_CALLS = [
    pyexec.load, pyexec.Program.method_meta, pyexec.Program.operators, pyexec.Program.load_method,
    pyexec.Method.set_inputs, pyexec.Method.execute, pyexec.Method.get_outputs, pyexec.Method.set_output,
    pyexec.Method.output_aliases_input,
]


@pytest.mark.parametrize("call", PUBLIC_CALLS, ids=lambda c: c.__qualname__)
def test_public_calls_name_the_errors_they_raise(call: object) -> None:
    doc = call.__doc__ or ""
    assert "Raises:" in doc, f"{call} does not say what it raises"
    raised = re.findall(r"^\s+(\w+Error):", doc.split("Raises:")[1], re.M)
    assert raised and all(isinstance(getattr(pyexec, name, None), type) for name in raised), raised


def test_output_type_is_documented_where_it_is_given() -> None:
    doc = pyexec.Program.load_method.__doc__ or ""
    assert all(f'"{kind}"' in doc for kind in ("numpy", "torch", "auto")), doc


# ---- malformed files -------------------------------------------------------


@pytest.mark.parametrize("cut", [0, 7, 8, 40, 100, 500, -300, -1])
def test_truncated_file_is_an_invalid_program(add_mul: bytes, cut: int) -> None:
    with pytest.raises(pyexec.InvalidProgramError):
        program = pyexec.load(add_mul[:cut])
        program.load_method("forward")


def test_wrong_file_identifier(add_mul: bytes) -> None:
    bad = add_mul[:4] + b"NOPE" + add_mul[8:]
    with pytest.raises(pyexec.InvalidProgramError, match="ET12"):
        pyexec.load(bad)


def test_not_a_program_at_all(tmp_path: Path) -> None:
    path = tmp_path / "text.pte"
    path.write_text("this is not a program, just some text")
    with pytest.raises(pyexec.InvalidProgramError):
        pyexec.load(path)


# ---- missing kernels -------------------------------------------------------


class Unsupported(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.special.bessel_j0(x) + torch.special.erfcx(x)


def test_missing_operators_are_all_listed_at_load() -> None:
    pte = export_program(Unsupported(), (torch.randn(4),), strict_ir=False)
    program = pyexec.load(pte)
    ops, missing = program.operators("forward")
    assert "aten::special_bessel_j0.out" in missing and "aten::special_erfcx.out" in missing
    with pytest.raises(pyexec.UnsupportedError) as info:
        program.load_method("forward")
    message = str(info.value)
    assert "aten::special_bessel_j0.out" in message and "aten::special_erfcx.out" in message
    assert isinstance(info.value, NotImplementedError)


# ---- bad inputs ------------------------------------------------------------


def test_wrong_input_count(add_mul: bytes) -> None:
    method = pyexec.load(add_mul).load_method("forward")
    with pytest.raises(pyexec.InvalidArgumentError, match="takes 2 inputs, got 1"):
        method.execute([torch.randn(2, 3)])


def test_wrong_input_dtype_names_both_sides(add_mul: bytes) -> None:
    method = pyexec.load(add_mul).load_method("forward")
    with pytest.raises(pyexec.InvalidArgumentError, match="input 1 has dtype float32, tensor has float64"):
        method.execute([torch.randn(2, 3), torch.randn(2, 3, dtype=torch.float64)])


def test_wrong_input_shape_names_both_sides(add_mul: bytes) -> None:
    method = pyexec.load(add_mul).load_method("forward")
    with pytest.raises(pyexec.InvalidArgumentError, match=r"input 0 has shape \[2, 3\], tensor has shape \[3, 2\]"):
        method.execute([torch.randn(3, 2), torch.randn(2, 3)])


def test_wrong_input_rank(add_mul: bytes) -> None:
    method = pyexec.load(add_mul).load_method("forward")
    with pytest.raises(pyexec.InvalidArgumentError, match="input 0 has rank 2, tensor has rank 1"):
        method.execute([torch.randn(6), torch.randn(2, 3)])


def test_unsupported_python_type(add_mul: bytes) -> None:
    method = pyexec.load(add_mul).load_method("forward")
    with pytest.raises(pyexec.InvalidArgumentError, match="input 0"):
        method.execute(["hello", torch.randn(2, 3)])


def test_execute_before_inputs(add_mul: bytes) -> None:
    method = pyexec.load(add_mul).load_method("forward")
    with pytest.raises(pyexec.InvalidArgumentError, match="input 0 has not been set"):
        method.execute()


def test_non_contiguous_planned_input_is_staged(add_mul: bytes) -> None:
    method = pyexec.load(add_mul).load_method("forward")
    x = torch.randn(3, 2).t()
    y = torch.randn(2, 3)
    s, _ = method.execute([x, y])
    torch.testing.assert_close(s, x + y)


def test_kernels_are_listed() -> None:
    names = pyexec.kernels()
    assert "aten::add.out" in names and names == sorted(names)


# ---- legacy inline constants -------------------------------------------------


class Affine(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(5, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x)


def test_legacy_inline_constant_buffer() -> None:
    """Constants in the deprecated inline `constant_buffer` (no constant
    segment, no extended header), serialized by executorch's own flatbuffer
    writer from the deserialized program. (ExecuTorch 1.5.1's runtime refuses
    this file at load, error 0x23, so torch eager is the only reference.)"""
    from executorch.exir._serialize import _program as serializer

    torch.manual_seed(0)
    model = Affine().eval()
    x = torch.randn(2, 5)
    program = serializer.deserialize_pte_binary(export_program(model, (x,))).program
    assert len(program.constant_buffer) > 1 and not program.constant_segment.offsets
    legacy = bytes(serializer._program_to_flatbuffer(program).data)
    assert legacy[8:12] != b"eh00"
    (got,) = pyexec.load(legacy).load_method("forward").execute([x])
    with torch.no_grad():
        torch.testing.assert_close(got, model(x))


def test_xnnpack_program_runs_and_an_unknown_backend_is_refused_naming_it() -> None:
    from executorch.backends.xnnpack.partition.xnnpack_partitioner import XnnpackPartitioner
    from executorch.exir import to_edge_transform_and_lower

    x = torch.randn(2, 5)
    model = Affine().eval()
    ep = torch.export.export(model, (x,))
    pte = bytes(to_edge_transform_and_lower(ep, partitioner=[XnnpackPartitioner()]).to_executorch().buffer)
    (got,) = pyexec.load(pte).load_method("forward").execute([x])
    with torch.no_grad():
        torch.testing.assert_close(got, model(x))
    # The same program naming a backend this library does not have.
    assert pte.count(b"XnnpackBackend") == 1
    program = pyexec.load(pte.replace(b"XnnpackBackend", b"NoSuchBackend!"))
    with pytest.raises(pyexec.UnsupportedError, match="delegate 'NoSuchBackend!'"):
        program.load_method("forward")


class BigWeight(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4096, 2048))  # 32 MiB

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.w.index_select(0, idx).sum(-1)


def test_constants_of_a_path_loaded_program_are_mapped_not_copied(tmp_path: Path) -> None:
    """Loading from a path maps the file: resident memory does not grow by the
    weights' size until they are touched (measured in a fresh process)."""
    import subprocess
    import sys

    model = BigWeight().eval()
    path = tmp_path / "big.pte"
    path.write_bytes(export_program(model, (torch.tensor([1, 2]),)))
    script = (
        "import resource, sys, numpy as np, pyexec\n"
        "def rss(): return int(open('/proc/self/statm').read().split()[1]) * resource.getpagesize()\n"
        "base = rss()\n"
        "m = pyexec.load(sys.argv[1]).load_method('forward')\n"
        "loaded = rss()\n"
        "(out,) = m.execute([np.array([5, 4000])])\n"
        "print(loaded - base, float(out[0]), float(out[1]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script, str(path)], capture_output=True, text=True, check=True)
    growth, a, b = proc.stdout.split()
    assert int(growth) < 8 * 2**20, f"loading grew resident memory by {int(growth) / 2**20:.1f} MiB"
    with torch.no_grad():
        expected = model(torch.tensor([5, 4000]))
    assert abs(float(a) - float(expected[0])) < 1e-2 and abs(float(b) - float(expected[1])) < 1e-2


def test_the_same_input_tensors_changed_between_calls_are_read_again(add_mul: bytes) -> None:
    method = pyexec.load(add_mul).load_method("forward")
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    method.execute([x, y])
    x.add_(1.0)  # same object, same storage, new values
    s, _ = method.execute([x, y])
    torch.testing.assert_close(s, x + y)
    x.set_(torch.randn(2, 3))  # same object, new storage
    y.data = y.data.to(torch.float64)  # same object, new dtype: refused, not misread
    with pytest.raises(pyexec.InvalidArgumentError, match="input 1 has dtype float32, tensor has float64"):
        method.execute([x, y])
    y.data = y.data.to(torch.float32)
    s, p = method.execute([x, y])
    torch.testing.assert_close(s, x + y)
    torch.testing.assert_close(p, x * y)


# ---- closing ---------------------------------------------------------------


def test_closing_twice_is_harmless_and_later_calls_say_closed(add_mul: bytes) -> None:
    x, y = torch.randn(2, 3), torch.randn(2, 3)
    program = pyexec.load(add_mul)
    method = program.load_method("forward")
    (kept, _) = method.execute([x, y], clone_outputs=False)
    program.close()
    program.close()
    with pytest.raises(pyexec.InvalidArgumentError, match="program is closed"):
        program.load_method("forward")
    s, _ = method.execute([x, y])  # a loaded Method keeps its program alive
    torch.testing.assert_close(s, x + y)
    method.close()
    method.close()
    for call in (lambda: method.execute([x, y]), method.get_outputs, lambda: method.set_inputs([x, y]),
                 lambda: method.set_output(None, 0), lambda: method.output_aliases_input(0)):
        with pytest.raises(pyexec.InvalidArgumentError, match="method 'forward' is closed"):
            call()
    torch.testing.assert_close(kept, x + y)  # uncloned outputs outlive the closed Method


def test_context_managers_close(add_mul: bytes) -> None:
    with pyexec.load(add_mul) as program, program.load_method("forward") as method:
        (s, _) = method.execute([torch.ones(2, 3), torch.ones(2, 3)])
    torch.testing.assert_close(s, torch.full((2, 3), 2.0))
    with pytest.raises(pyexec.InvalidArgumentError, match="closed"):
        method.execute()
