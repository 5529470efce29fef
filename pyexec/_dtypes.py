"""dtypes: the library's codes, names and sizes, read from the library (its
header's `pyexec_dtype` enum, pyexec_dtype_name and pyexec_dtype_size) and
never copied here, and their numpy / torch counterparts, which are Python's
own knowledge, keyed by the library's names."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from ._ffi import ffi, lib


def _library_dtypes() -> dict[int, str]:
    """code -> name of every dtype the header declares and the library supports."""
    codes = sorted(ffi.typeof("pyexec_dtype").relements.values())
    return {code: ffi.string(lib.pyexec_dtype_name(code)).decode() for code in codes if lib.pyexec_dtype_size(code)}


NAMES: dict[int, str] = _library_dtypes()
CODE_BY_NAME: dict[str, int] = {name: code for code, name in NAMES.items()}
SIZES: dict[int, int] = {code: int(lib.pyexec_dtype_size(code)) for code in NAMES}
MAX_DIM: int = lib.PYEXEC_MAX_DIM
"""The largest rank the library handles."""

# numpy's counterparts by the library's name; numpy has no bfloat16.
_NUMPY_BY_NAME: dict[str, Any] = {
    "uint8": np.uint8,
    "int8": np.int8,
    "int16": np.int16,
    "int32": np.int32,
    "int64": np.int64,
    "float16": np.float16,
    "float32": np.float32,
    "float64": np.float64,
    "bool": np.bool_,
}

NUMPY: dict[int, np.dtype[Any]] = {
    code: np.dtype(_NUMPY_BY_NAME[name]) for code, name in NAMES.items() if name in _NUMPY_BY_NAME
}
"""code -> numpy dtype, for the dtypes numpy has."""
CODE_BY_NUMPY: dict[np.dtype[Any], int] = {dt: code for code, dt in NUMPY.items()}
NUMPY_STORAGE: dict[int, np.dtype[Any]] = {
    code: NUMPY.get(code, np.dtype(f"uint{8 * SIZES[code]}")) for code in NAMES
}
"""code -> the numpy dtype that holds its elements: the dtype itself, or
unsigned integers of its size carrying the bits (bfloat16 as uint16)."""
NOT_IN_NUMPY: frozenset[int] = frozenset(NAMES.keys() - NUMPY.keys())
"""Codes numpy cannot represent (bfloat16): torch only."""


def torch_module() -> Any:
    """torch if it is already imported (pyexec never imports it itself)."""
    return sys.modules.get("torch")


_tensor_class: Any = None


def torch_tensor_class() -> Any:
    """torch.Tensor if torch is already imported, else None."""
    global _tensor_class
    if _tensor_class is None:
        _tensor_class = getattr(sys.modules.get("torch"), "Tensor", None)
    return _tensor_class


_torch_maps: tuple[dict[Any, int], dict[int, Any]] | None = None


def torch_maps() -> tuple[dict[Any, int], dict[int, Any]]:
    """(torch dtype -> code, code -> torch dtype): torch spells every dtype
    as the library names it (torch.float32, torch.bfloat16, torch.bool)."""
    global _torch_maps
    if _torch_maps is None:
        import torch

        by_code = {code: getattr(torch, name) for code, name in NAMES.items() if hasattr(torch, name)}
        _torch_maps = ({dt: code for code, dt in by_code.items()}, by_code)
    return _torch_maps

