"""Programs whose weights live in a separate data file (.ptd): exported with
ExecutorchBackendConfig(external_constants=True) (portable operators) and
lowered to XNNPACK with the weights routed to the data file, run by pyexec
and by ExecuTorch's runtime from the same two files and compared with torch
eager; a missing or wrong data file is refused at method load naming the
tensor; malformed data files (truncated, fields patched, bits flipped) are an
InvalidProgramError, never a crash (checked in a child process)."""

from __future__ import annotations

import json
import os
import random
import re
import struct
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from support.export import assert_close
from support.external import FlatTensor, export_external

import pyexec
from pyexec._errors import check
from pyexec._ffi import ffi, lib


class MLP(torch.nn.Module):
    def __init__(self, hidden: int = 8) -> None:
        super().__init__()
        self.l1 = torch.nn.Linear(4, hidden)
        self.l2 = torch.nn.Linear(hidden, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.l2(torch.relu(self.l1(x)))


class ConvNet(torch.nn.Module):
    """A conv weight (rank 4) and a constant buffer beside the parameters."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.register_buffer("shift", torch.linspace(-1.0, 1.0, 4).reshape(1, 4, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.tanh(self.conv(x)) + self.shift


def _model(cls: type[torch.nn.Module], *args: Any) -> torch.nn.Module:
    torch.manual_seed(0)
    return cls(*args).eval()


X = torch.linspace(-2.0, 2.0, 8).reshape(2, 4)
IMAGE = torch.linspace(-1.0, 1.0, 2 * 3 * 5 * 5).reshape(2, 3, 5, 5)


@pytest.fixture(scope="module")
def mlp() -> tuple[torch.nn.Module, bytes, bytes]:
    m = _model(MLP)
    return (m, *export_external(m, (X,), "portable"))


@pytest.fixture(scope="module")
def wide_mlp() -> tuple[torch.nn.Module, bytes, bytes]:
    m = _model(MLP, 16)
    return (m, *export_external(m, (X,), "portable"))


@pytest.fixture(scope="module")
def convnet() -> tuple[torch.nn.Module, bytes, bytes]:
    m = _model(ConvNet)
    return (m, *export_external(m, (IMAGE,), "portable"))


@pytest.fixture(scope="module")
def xnn_mlp() -> tuple[torch.nn.Module, bytes, bytes]:
    m = _model(MLP)
    return (m, *export_external(m, (X,), "xnnpack"))


def _files(tmp_path: Path, pte: bytes, ptd: bytes, name: str = "model") -> tuple[Path, Path]:
    pte_path, ptd_path = tmp_path / f"{name}.pte", tmp_path / f"{name}.ptd"
    pte_path.write_bytes(pte)
    ptd_path.write_bytes(ptd)
    return pte_path, ptd_path


def _executorch(pte_path: Path, ptd_path: Path, inputs: list[torch.Tensor]) -> list[Any]:
    from executorch.runtime import Runtime

    program = Runtime.get().load_program(pte_path, data_path=str(ptd_path))
    return list(program.load_method("forward").execute([x.clone() for x in inputs]))


def _check_against_executorch_and_eager(model: torch.nn.Module, pte: bytes, ptd: bytes, inputs: list[torch.Tensor],
                                        tmp_path: Path) -> None:
    pte_path, ptd_path = _files(tmp_path, pte, ptd)
    got = pyexec.load(pte_path, data_path=ptd_path).load_method().execute(inputs)
    with torch.no_grad():
        eager = model(*inputs)
    (et,) = _executorch(pte_path, ptd_path, inputs)
    assert_close(got[0], et, what="pyexec vs ExecuTorch")
    assert_close(got[0], eager, what="pyexec vs eager")


# ---- portable programs with external constants ---------------------------------


def test_the_export_keeps_the_weights_in_the_data_file(mlp: Any) -> None:
    model, pte, ptd = mlp
    entries = {e.key: e for e in FlatTensor(ptd).entries()}
    assert set(entries) == {name for name, _ in model.named_parameters()}
    assert all(e.sizes_at is not None for e in entries.values()), "named constants carry a tensor layout"
    weight = model.l1.weight.detach().numpy().tobytes()
    assert weight in ptd and weight not in pte


def test_external_constants_run_like_executorch_and_eager(mlp: Any, tmp_path: Path) -> None:
    model, pte, ptd = mlp
    _check_against_executorch_and_eager(model, pte, ptd, [X], tmp_path)


def test_a_conv_weight_and_a_buffer_from_the_data_file_run_like_executorch(convnet: Any, tmp_path: Path) -> None:
    model, pte, ptd = convnet
    assert {"conv.weight", "conv.bias"} <= {e.key for e in FlatTensor(ptd).entries()}
    _check_against_executorch_and_eager(model, pte, ptd, [IMAGE], tmp_path)


@pytest.mark.parametrize("kind", [bytes, bytearray, memoryview])
def test_the_data_file_may_be_given_as_bytes(mlp: Any, kind: type) -> None:
    model, pte, ptd = mlp
    program = pyexec.Runtime.get().load_program(kind(pte), data_path=kind(ptd))
    assert "data=<" in repr(program)
    with torch.no_grad():
        assert_close(program.load_method().execute([X])[0], model(X))


def test_one_data_file_serves_several_methods_and_outlives_the_program_object(mlp: Any, tmp_path: Path) -> None:
    model, pte, ptd = mlp
    pte_path, ptd_path = _files(tmp_path, pte, ptd)
    program = pyexec.load(pte_path, data_path=ptd_path)
    first, second = program.load_method(), program.load_method()
    program.close()
    del program
    with torch.no_grad():
        expected = model(X)
    assert_close(first.execute([X])[0], expected)
    assert_close(second.execute([X])[0], expected)


def test_without_a_data_file_method_load_says_one_is_needed(mlp: Any) -> None:
    _, pte, _ = mlp
    program = pyexec.load(pte)
    assert program.method_meta("forward").inputs[0] is not None  # metadata needs no data file
    with pytest.raises(pyexec.InvalidProgramError, match=r"tensor 'l1\.weight' is stored in a separate data file"):
        program.load_method()


def test_another_models_data_file_is_a_layout_mismatch_naming_the_tensor(mlp: Any, wide_mlp: Any) -> None:
    _, pte, _ = mlp
    _, _, wide_ptd = wide_mlp
    with pytest.raises(pyexec.InvalidProgramError) as err:
        pyexec.load(pte, data_path=wide_ptd).load_method()
    message = str(err.value)
    assert "tensor 'l1.weight' layout mismatch" in message
    assert "the program expects float32[8, 4], the data file holds float32[16, 4]" in message


def test_a_data_file_without_a_tensor_names_the_first_missing_key(convnet: Any, mlp: Any) -> None:
    _, pte, _ = convnet
    _, _, mlp_ptd = mlp
    with pytest.raises(pyexec.InvalidProgramError, match=r"tensor '(conv\.weight|conv\.bias|shift)' is not in "
                       r"the data file \(4 entries\)"):
        pyexec.load(pte, data_path=mlp_ptd).load_method()


def test_a_program_takes_one_data_file(mlp: Any) -> None:
    _, pte, ptd = mlp
    program = pyexec.load(pte, data_path=ptd)
    with pytest.raises(pyexec.InvalidArgumentError, match="already has a data file"):
        check(lib.pyexec_program_attach_data_buffer(program._ptr(), ffi.from_buffer(ptd), len(ptd)))
    program.load_method()  # unchanged by the refused attach


def test_a_data_file_that_cannot_be_opened_is_a_file_error(mlp: Any, tmp_path: Path) -> None:
    _, pte, _ = mlp
    with pytest.raises(pyexec.FileError, match="cannot open data file"):
        pyexec.load(pte, data_path=tmp_path / "absent.ptd")
    with pytest.raises(pyexec.FileError, match="not a regular file"):
        pyexec.load(pte, data_path=tmp_path)


def test_a_bad_data_path_type_is_an_invalid_argument(mlp: Any) -> None:
    _, pte, _ = mlp
    with pytest.raises(pyexec.InvalidArgumentError, match="data_path must be a path, bytes"):
        pyexec.load(pte, data_path=3)  # type: ignore[arg-type]
    with pytest.raises(pyexec.InvalidArgumentError, match="NUL"):
        pyexec.load(pte, data_path="a\0b")


def test_a_program_file_given_as_data_is_invalid(mlp: Any) -> None:
    _, pte, _ = mlp
    with pytest.raises(pyexec.InvalidProgramError, match="no 'FH01' header at byte 8"):
        pyexec.load(pte, data_path=pte)


# ---- XNNPACK weights in the data file ----------------------------------------------


def test_xnnpack_weights_in_the_data_file_run_like_executorch_and_eager(xnn_mlp: Any, tmp_path: Path) -> None:
    model, pte, ptd = xnn_mlp
    entries = FlatTensor(ptd).entries()
    assert entries and all(e.sizes_at is None for e in entries), "backend blobs carry no tensor layout"
    assert all(re.fullmatch(r"[0-9a-f]{64}", e.key) for e in entries), [e.key for e in entries]
    assert pyexec.load(pte).delegates()[0].runnable
    _check_against_executorch_and_eager(model, pte, ptd, [X], tmp_path)


def test_xnnpack_without_its_data_file_names_the_key_and_asks_for_the_file(xnn_mlp: Any) -> None:
    _, pte, ptd = xnn_mlp
    keys = "|".join(e.key for e in FlatTensor(ptd).entries())
    with pytest.raises(pyexec.InvalidProgramError, match=rf"named data '({keys})' is not in the program "
                       r"\(0 entries\), and no data file \(\.ptd\) is attached"):
        pyexec.load(pte).load_method()


def test_xnnpack_with_another_data_file_names_the_key(xnn_mlp: Any, mlp: Any) -> None:
    _, pte, _ = xnn_mlp
    _, _, portable_ptd = mlp
    with pytest.raises(pyexec.InvalidProgramError, match=r"is in neither the data file \(4 entries\) nor the "
                       r"program \(0 entries\)"):
        pyexec.load(pte, data_path=portable_ptd).load_method()


# ---- the command line --------------------------------------------------------------


def test_cli_runs_and_inspects_with_data(mlp: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pyexec.__main__ import main

    model, pte, ptd = mlp
    pte_path, ptd_path = _files(tmp_path, pte, ptd)
    np.save(tmp_path / "x.npy", X.numpy())
    out = tmp_path / "out"
    assert main(["run", str(pte_path), "--data", str(ptd_path), "-i", f"0={tmp_path / 'x.npy'}", "-o", str(out)]) == 0
    with torch.no_grad():
        assert_close(np.load(out / "output0.npy"), model(X))
    assert main(["inspect", str(pte_path), "--data", str(ptd_path)]) == 0
    assert main(["bench", str(pte_path), "--data", str(ptd_path), "-n", "2", "--warmup", "0", "--no-executorch",
                 "--progress", "off"]) == 0
    capsys.readouterr()
    assert main(["run", str(pte_path), "-i", f"0={tmp_path / 'x.npy'}"]) == 1
    assert "is stored in a separate data file" in capsys.readouterr().err


# ---- hostile data files (in a child process) ------------------------------------

CHILD = textwrap.dedent(
    """
    import json, sys
    from pathlib import Path
    import numpy as np
    import pyexec
    here = Path(sys.argv[1])
    x = np.linspace(-2.0, 2.0, 8, dtype=np.float32).reshape(2, 4)
    for case in sorted(here.glob("*.ptd")):
        result = {"case": case.stem, "error": None, "message": ""}
        try:
            program = pyexec.load(here / case.stem.split("@")[0] / "model.pte", data_path=case)
            program.load_method().execute([x])
        except pyexec.Error as exc:
            result["error"], result["message"] = type(exc).__name__, str(exc)
        except Exception as exc:  # anything else is a bug
            result["error"], result["message"] = "other:" + type(exc).__name__, str(exc)
        print(json.dumps(result), flush=True)
    """
)


def _run_cases(tmp_path: Path, programs: dict[str, bytes], cases: dict[str, bytes]) -> dict[str, dict[str, Any]]:
    """Runs each case (named "<program>@<what>") in one child process: load
    the program with the case as its data file, load the method, execute."""
    for name, pte in programs.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "model.pte").write_bytes(pte)
    for name, data in cases.items():
        (tmp_path / f"{name}.ptd").write_bytes(data)
    env = dict(os.environ)
    here = str(Path(pyexec.__file__).parent.parent)  # the child imports the same pyexec
    env["PYTHONPATH"] = os.pathsep.join(p for p in (here, env.get("PYTHONPATH")) if p)
    proc = subprocess.run([sys.executable, "-c", CHILD, str(tmp_path)], capture_output=True, text=True, env=env,
                          timeout=600)
    results = {}
    for line in proc.stdout.splitlines():
        r = json.loads(line)
        results[r.pop("case")] = r
    assert proc.returncode == 0, f"child exited {proc.returncode} after {len(results)} cases:\n{proc.stderr[-4000:]}"
    assert set(results) == set(cases)
    return results


def _patched(data: bytes, at: int | None, fmt: str, *values: Any) -> bytes:
    assert at is not None
    b = bytearray(data)
    struct.pack_into(fmt, b, at, *values)
    return bytes(b)


def _field_cases(ptd: bytes) -> dict[str, tuple[bytes, str]]:
    """Single fields of a valid portable .ptd made invalid, each with what its
    error message must say."""
    ft = FlatTensor(ptd)
    fb_end = ft.fb_offset + ft.fb_size
    size = len(ptd)
    entries = ft.entries()
    l1b = next(e for e in entries if e.key == "l1.bias")
    l2b = next(e for e in entries if e.key == "l2.bias")
    w = next(e for e in entries if e.key == "l1.weight")
    seg_offset_at, seg_size_at = ft.segments()[l1b.segment_index]
    cases = {
        "header_magic": (_patched(ptd, 8, "4s", b"FH02"), "no 'FH01' header"),
        "identifier": (_patched(ptd, 4, "4s", b"FT02"), "file identifier is not 'FT01'"),
        "header_length_short": (_patched(ptd, 12, "<I", 39), "header length 39 is invalid"),
        "header_length_huge": (_patched(ptd, 12, "<I", 0xFFFFFFFF), "header length 4294967295 is invalid"),
        "fb_offset_huge": (_patched(ptd, 16, "<Q", 2**64 - 1), "flatbuffer_offset"),
        "fb_size_huge": (_patched(ptd, 24, "<Q", 2**64 - 48), "flatbuffer_offset"),
        "fb_size_past_file": (_patched(ptd, 24, "<Q", size), "exceed the"),
        "fb_inside_header": (_patched(ptd, 16, "<2Q", 8, 16), "end inside the header"),
        "segment_base_in_flatbuffer": (_patched(ptd, 32, "<Q", fb_end - 8), "segment_base_offset"),
        "segment_base_past_file": (_patched(ptd, 32, "<Q", size + 1), "segment_base_offset"),
        "segment_base_huge": (_patched(ptd, 32, "<Q", 2**64 - 1), "segment_base_offset"),
        "segment_size_past_file": (_patched(ptd, 40, "<Q", size - ft.segment_base + 1), "file is truncated"),
        "segment_size_huge": (_patched(ptd, 40, "<Q", 2**64 - 1), "file is truncated"),
        "root_offset_huge": (_patched(ptd, 0, "<I", 0xFFFFFFF0), "root table is out of bounds"),
        "segment_offset_huge": (_patched(ptd, seg_offset_at, "<Q", 2**64 - 1), "lies outside the"),
        "segment_size_past_data": (_patched(ptd, seg_size_at, "<Q", ft.segment_size + 1), "lies outside the"),
        "segment_index": (_patched(ptd, l1b.segment_index_at, "<I", 99), ".segment_index 99 is out of range"),
        "layout_negative_size": (_patched(ptd, w.sizes_at, "<i", -1), ".tensor_layout.sizes[0] is negative"),
        "layout_dim_order": (_patched(ptd, w.dim_order_at, "<B", 5), ".tensor_layout.dim_order is not a permutation"),
        "layout_dim_order_repeated": (_patched(ptd, w.dim_order_at, "<B", 1), "dim_order is not a permutation"),
        "layout_scalar_type": (_patched(ptd, w.scalar_type_at, "<b", 3), "tensor 'l1.weight' layout mismatch"),
        "layout_size_changed": (_patched(ptd, w.sizes_at, "<i", 7), "tensor 'l1.weight' layout mismatch"),
        "key_not_utf8": (_patched(ptd, w.key_at, "<B", 0xFF), ".key is not valid UTF-8"),
        "key_twice": (_patched(ptd, l2b.key_at, "7s", b"l1.bias"), "named_data key 'l1.bias' appears more than once"),
        "key_renamed": (_patched(ptd, w.key_at, "<B", ord("x")), "tensor 'l1.weight' is not in the data file"),
    }
    return {f"mlp@{k}": v for k, v in cases.items()}


def test_malformed_data_file_fields_are_invalid_program_errors_naming_them(mlp: Any, tmp_path: Path) -> None:
    _, pte, ptd = mlp
    cases = _field_cases(ptd)
    results = _run_cases(tmp_path, {"mlp": pte}, {k: v[0] for k, v in cases.items()})
    for name, (_, expected) in cases.items():
        r = results[name]
        assert r["error"] == "InvalidProgramError", (name, r)
        assert expected in r["message"], (name, r["message"])


def test_truncated_and_bit_flipped_data_files_never_crash(mlp: Any, xnn_mlp: Any, tmp_path: Path) -> None:
    """Every truncation and many bit flips, of a portable and an XNNPACK data
    file: each is refused with a pyexec.Error or, where the flip leaves a valid
    file (a weight's bits, padding), runs; the child never crashes."""
    rng = random.Random(15)
    cases: dict[str, bytes] = {}
    for name, (_, _, ptd) in {"mlp": mlp, "xnn": xnn_mlp}.items():
        ft = FlatTensor(ptd)
        for n in sorted({*range(0, len(ptd), 5), ft.fb_offset + ft.fb_size, ft.segment_base, len(ptd) - 1}):
            if n < len(ptd):
                cases[f"{name}@cut{n:05d}"] = ptd[:n]
        flips = [(i, bit) for i in range(64) for bit in range(8)]  # the whole header
        flips += [(rng.randrange(len(ptd)), rng.randrange(8)) for _ in range(300)]
        for i, bit in flips:
            b = bytearray(ptd)
            b[i] ^= 1 << bit
            cases[f"{name}@flip{i:05d}.{bit}"] = bytes(b)
    results = _run_cases(tmp_path, {"mlp": mlp[1], "xnn": xnn_mlp[1]}, cases)
    others = {k: r for k, r in results.items() if r["error"] is not None and r["error"].startswith("other:")}
    assert not others, list(others.items())[:5]
    for name, r in results.items():
        if "@cut" in name:
            assert r["error"] == "InvalidProgramError", (name, r)
    refused = sum(r["error"] is not None for r in results.values())
    assert refused > len(results) // 2, "most damage is noticed"
