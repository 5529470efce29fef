"""dtype codes (ExecuTorch ScalarType) and their numpy / torch counterparts."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

# code -> (name, numpy dtype or None for bfloat16)
_TABLE: dict[int, tuple[str, Any]] = {
    0: ("uint8", np.dtype(np.uint8)),
    1: ("int8", np.dtype(np.int8)),
    2: ("int16", np.dtype(np.int16)),
    3: ("int32", np.dtype(np.int32)),
    4: ("int64", np.dtype(np.int64)),
    5: ("float16", np.dtype(np.float16)),
    6: ("float32", np.dtype(np.float32)),
    7: ("float64", np.dtype(np.float64)),
    11: ("bool", np.dtype(np.bool_)),
    15: ("bfloat16", None),
}

NAMES: dict[int, str] = {code: name for code, (name, _) in _TABLE.items()}
CODE_BY_NAME: dict[str, int] = {name: code for code, name in NAMES.items()}
CODE_BY_NUMPY: dict[np.dtype[Any], int] = {dt: code for code, (_, dt) in _TABLE.items() if dt is not None}
# Storage dtype for numpy views (bfloat16 is carried as uint16 bits).
NUMPY_STORAGE: dict[int, np.dtype[Any]] = {
    code: (dt if dt is not None else np.dtype(np.uint16)) for code, (_, dt) in _TABLE.items()
}

_torch_maps: tuple[dict[Any, int], dict[int, Any]] | None = None


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


def torch_maps() -> tuple[dict[Any, int], dict[int, Any]]:
    global _torch_maps
    if _torch_maps is None:
        import torch

        by_code = {
            0: torch.uint8,
            1: torch.int8,
            2: torch.int16,
            3: torch.int32,
            4: torch.int64,
            5: torch.float16,
            6: torch.float32,
            7: torch.float64,
            11: torch.bool,
            15: torch.bfloat16,
        }
        _torch_maps = ({dt: code for code, dt in by_code.items()}, by_code)
    return _torch_maps


def name_of_numpy(dt: np.dtype[Any]) -> str:
    code = CODE_BY_NUMPY.get(dt)
    return NAMES[code] if code is not None else str(dt)


def name_of_torch(dt: Any) -> str:
    code = torch_maps()[0].get(dt)
    return NAMES[code] if code is not None else str(dt).replace("torch.", "")
