"""Every pyexec exception carries the library's status: `code` (a
pyexec_status value) and `status_name` (the library's name for it), whether
the library reported the failure or Python found it before calling."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest
from support import ROOT

import pyexec
from pyexec._ffi import ffi, lib

ADD_MUL = ROOT / "native" / "tests" / "data" / "add_mul.pte"


def status_name(code: int) -> str:
    return str(ffi.string(lib.pyexec_status_name(code)).decode())


@pytest.mark.parametrize(("cls", "status"), [
    (pyexec.InvalidArgumentError, lib.PYEXEC_ERR_INVALID_ARGUMENT),
    (pyexec.InvalidProgramError, lib.PYEXEC_ERR_INVALID_PROGRAM),
    (pyexec.UnsupportedError, lib.PYEXEC_ERR_UNSUPPORTED),
    (pyexec.ExecutionError, lib.PYEXEC_ERR_EXECUTION),
    (pyexec.OutOfMemoryError, lib.PYEXEC_ERR_OUT_OF_MEMORY),
    (pyexec.FileError, lib.PYEXEC_ERR_IO),
])
def test_each_error_class_has_its_status(cls: type[pyexec.Error], status: int) -> None:
    exc = cls("message")
    assert exc.code == status and cls.code == status
    assert exc.status_name == status_name(status) != "unknown status"
    assert str(exc) == "message"


def test_an_error_the_library_reports_has_its_status() -> None:
    with pytest.raises(pyexec.InvalidProgramError) as info:
        pyexec.load(b"not a program at all")
    assert info.value.code == lib.PYEXEC_ERR_INVALID_PROGRAM
    assert info.value.status_name == "invalid program"


def test_a_file_error_has_the_io_status(tmp_path: Path) -> None:
    with pytest.raises(pyexec.FileError) as info:
        pyexec.load(tmp_path / "missing.pte")
    assert info.value.code == lib.PYEXEC_ERR_IO and info.value.errno is None


def test_an_error_python_finds_before_the_library_has_its_status() -> None:
    m = pyexec.load(ADD_MUL).load_method()
    with pytest.raises(pyexec.InvalidArgumentError, match="takes 2 inputs") as info:
        m.execute([np.zeros((2, 3), np.float32)])
    assert info.value.code == lib.PYEXEC_ERR_INVALID_ARGUMENT
    assert info.value.status_name == "invalid argument"


def test_the_status_survives_pickling() -> None:
    with pytest.raises(pyexec.InvalidProgramError) as info:
        pyexec.load(b"xx")
    again = pickle.loads(pickle.dumps(info.value))
    assert type(again) is pyexec.InvalidProgramError and again.code == info.value.code
    assert str(again) == str(info.value)


def test_a_bare_error_has_no_status() -> None:
    exc = pyexec.Error("made by the caller")
    assert exc.code is None and exc.status_name == ""
