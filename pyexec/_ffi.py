"""The cffi binding (ABI mode) to libpyexec.

The cdef is generated from the library's public header at import time, so the
two cannot drift; the library and its header are found together: the copy
bundled in the package first, then ``$PYEXEC_LIBRARY`` (with the header beside
it or in ``../include``), then a development build in ``native/build``.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

import cffi

_HERE = Path(__file__).resolve().parent


def cdef_from_header(text: str) -> str:
    """Turns pyexec.h into declarations cffi's cdef accepts: comments,
    preprocessor lines (except integer #defines) and C++ guards removed."""
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    text = re.sub(r"//[^\n]*", "", text)
    text = re.sub(r"\\\n", " ", text)
    out: list[str] = []
    skip = 0
    for line in text.splitlines():
        stripped = line.strip()
        if stripped.startswith("#ifdef __cplusplus"):
            skip += 1
            continue
        if skip:
            if stripped.startswith("#endif"):
                skip -= 1
            continue
        if stripped.startswith("#"):
            m = re.match(r"#\s*define\s+(PYEXEC_[A-Z_]+)\s+(\d+)\s*$", stripped)
            if m:
                out.append(f"#define {m.group(1)} {m.group(2)}")
            continue
        out.append(line.replace("PYEXEC_API", ""))
    return "\n".join(out)


def _candidates() -> list[tuple[Path, Path]]:
    found: list[tuple[Path, Path]] = [(_HERE / "_lib" / "libpyexec.so", _HERE / "_lib" / "pyexec.h")]
    env = os.environ.get("PYEXEC_LIBRARY")
    if env:
        lib = Path(env)
        for header in (lib.parent / "pyexec.h", lib.parent.parent / "include" / "pyexec.h"):
            found.append((lib, header))
    native = _HERE.parent / "native"
    found.append((native / "build" / "libpyexec.so", native / "include" / "pyexec.h"))
    found.append((native / "build" / "dist" / "libpyexec.so", native / "include" / "pyexec.h"))
    return found


def _load() -> tuple[cffi.FFI, Any]:
    tried: list[str] = []
    for lib_path, header in _candidates():
        if not lib_path.is_file() or not header.is_file():
            missing = lib_path if not lib_path.is_file() else header
            tried.append(f"{lib_path}: {missing.name} not found")
            continue
        ffi = cffi.FFI()
        ffi.cdef(cdef_from_header(header.read_text()))
        try:
            lib = ffi.dlopen(str(lib_path))
        except OSError as exc:
            tried.append(f"{lib_path}: {exc}")
            continue
        return ffi, lib
    raise ImportError(
        "pyexec cannot find its native library libpyexec.so; tried:\n  "
        + "\n  ".join(tried)
        + "\nReinstall the package, build it with `make -C native`, or set PYEXEC_LIBRARY."
    )


ffi, lib = _load()
