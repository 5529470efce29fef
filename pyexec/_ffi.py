"""The cffi binding (ABI mode) to libpyexec.

The declarations come from the library's public header, so the two cannot
drift: precompiled (pyexec/_ffi_types.py, written by scripts/gen_ffi.py with
the header's SHA-256) when the header found is the one they were generated
from, so that import runs no C parser and no call parses the C type it names;
otherwise parsed from the header at import. The library and its header are
found together:
``$PYEXEC_LIBRARY`` first (with the header beside it, in ``../include`` or in
``../../include``), so that it overrides the copy bundled in the package, then
that bundled copy, then a development build in ``native/build``. An explicit
``$PYEXEC_LIBRARY`` that cannot be used is an error, never silently replaced
by another copy.

At import, the loaded library's version must equal the version of the header
the binding was generated from: a header and a library of different versions
disagree about the very declarations cffi calls through.
"""

from __future__ import annotations

import hashlib
import os
import re
from pathlib import Path
from typing import Any

_HERE = Path(__file__).resolve().parent

# The C API this package's Python code is written against (major, minor): a
# library of another 0.x minor lacks or changes entry points it calls. Tests
# check it against the header's version and pyproject's.
API_VERSION = (0, 3)


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


def _env_candidates(env: str) -> list[tuple[Path, Path]]:
    lib = Path(env)
    return [
        (lib, header)
        for header in (
            lib.parent / "pyexec.h",
            lib.parent.parent / "include" / "pyexec.h",
            lib.parent.parent.parent / "include" / "pyexec.h",  # native/build/asan/ -> native/include/
        )
    ]


def _default_candidates() -> list[tuple[Path, Path]]:
    native = _HERE.parent / "native"
    return [
        (_HERE / "_lib" / "libpyexec.so", _HERE / "_lib" / "pyexec.h"),
        (native / "build" / "libpyexec.so", native / "include" / "pyexec.h"),
        (native / "build" / "dist" / "libpyexec.so", native / "include" / "pyexec.h"),
    ]


def check_version(lib: Any, ffi: Any, lib_path: Path, header: Path) -> None:
    """Raises ImportError naming both versions when the library at `lib_path`
    is not the version of `header` (whose declarations `lib` was opened with),
    or not the major.minor this package is written against."""
    major, minor = lib.PYEXEC_VERSION_MAJOR, lib.PYEXEC_VERSION_MINOR
    declared = f"{major}.{minor}.{lib.PYEXEC_VERSION_PATCH}"
    found = ffi.string(lib.pyexec_version()).decode("ascii", "replace")
    if found != declared:
        raise ImportError(
            f"pyexec: the native library {lib_path} is version {found}, but the header {header} "
            f"(which the binding is generated from) is version {declared}; rebuild the library "
            f"(`make -C native`), reinstall the package, or point PYEXEC_LIBRARY at a matching pair"
        )
    if (major, minor) != API_VERSION:
        wanted = ".".join(map(str, API_VERSION))
        raise ImportError(
            f"pyexec: this Python package needs native library version {wanted}.x, but {lib_path} is "
            f"version {found}; install the package and library of one release together"
        )


def _declarations(header: Path) -> Any:
    """An FFI declaring `header`: the precompiled one when it was generated
    from these very bytes, else one parsed from them now."""
    text = header.read_bytes()
    try:
        from pyexec import _ffi_types
    except ImportError:  # a cffi too old for the precompiled format
        _ffi_types = None  # type: ignore[assignment]
    if _ffi_types is not None and _ffi_types.HEADER_SHA256 == hashlib.sha256(text).hexdigest():
        return _ffi_types.ffi
    import cffi

    ffi = cffi.FFI()
    ffi.cdef(cdef_from_header(text.decode("utf-8")))
    return ffi


def _open(lib_path: Path, header: Path) -> tuple[Any, Any]:
    """The binding over one library and header; OSError when dlopen fails."""
    ffi = _declarations(header)
    lib = ffi.dlopen(str(lib_path))
    check_version(lib, ffi, lib_path, header)
    return ffi, lib


def _load() -> tuple[Any, Any]:
    env = os.environ.get("PYEXEC_LIBRARY")
    candidates = _env_candidates(env) if env else _default_candidates()
    tried: list[str] = []
    for lib_path, header in candidates:
        if not lib_path.is_file() or not header.is_file():
            missing = lib_path if not lib_path.is_file() else header
            tried.append(f"{lib_path}: {missing} not found")
            continue
        try:
            return _open(lib_path, header)
        except OSError as exc:
            tried.append(f"{lib_path}: {exc}")
    if env:
        raise ImportError(
            f"pyexec cannot use PYEXEC_LIBRARY={env}; tried:\n  " + "\n  ".join(tried)
            + "\nPoint it at a libpyexec.so with its pyexec.h beside it or in ../include, or unset it."
        )
    raise ImportError(
        "pyexec cannot find its native library libpyexec.so; tried:\n  "
        + "\n  ".join(tried)
        + "\nReinstall the package, build it with `make -C native`, or set PYEXEC_LIBRARY."
    )


ffi, lib = _load()
