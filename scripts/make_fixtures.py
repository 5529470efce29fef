"""Regenerates the small .pte fixtures committed for the C tests
(native/tests/data). Run from the repository root:

    python scripts/make_fixtures.py
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

from support.export import export_program  # noqa: E402
from support.external import export_external  # noqa: E402


class AddMul(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x + y, x * y


class CacheUpdate(torch.nn.Module):
    def forward(self, cache: torch.Tensor, idx: torch.Tensor, val: torch.Tensor) -> torch.Tensor:
        cache.index_copy_(0, idx, val)
        return cache.sum(0, keepdim=True)


class AddWeight(torch.nn.Module):
    """x + w with w = [0.5, 1.5, 2.5, 3.5, 4.5, 5.5] kept in a data file."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.arange(6.0).reshape(2, 3) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.w


def main() -> None:
    out = ROOT / "native" / "tests" / "data"
    out.mkdir(parents=True, exist_ok=True)
    xy = (torch.randn(2, 3), torch.randn(2, 3))
    (out / "add_mul.pte").write_bytes(export_program(AddMul(), xy))
    (out / "add_mul_unplanned.pte").write_bytes(
        export_program(AddMul(), xy, alloc_graph_input=False, alloc_graph_output=False)
    )
    cache = (torch.zeros(8, 4), torch.tensor([0]), torch.randn(1, 4))
    (out / "cache_update_unplanned.pte").write_bytes(
        export_program(CacheUpdate(), cache, alloc_graph_input=False, alloc_graph_output=False, reinplace=True)
    )
    pte, ptd = export_external(AddWeight(), (torch.randn(2, 3),))
    (out / "add_weight.pte").write_bytes(pte)
    (out / "add_weight.ptd").write_bytes(ptd)
    for f in sorted([*out.glob("*.pte"), *out.glob("*.ptd")]):
        print(f"{f.relative_to(ROOT)}: {f.stat().st_size} bytes")


if __name__ == "__main__":
    main()
