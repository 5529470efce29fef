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


class AddMul(torch.nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return x + y, x * y


class CacheUpdate(torch.nn.Module):
    def forward(self, cache: torch.Tensor, idx: torch.Tensor, val: torch.Tensor) -> torch.Tensor:
        cache.index_copy_(0, idx, val)
        return cache.sum(0, keepdim=True)


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
    for f in sorted(out.glob("*.pte")):
        print(f"{f.relative_to(ROOT)}: {f.stat().st_size} bytes")


if __name__ == "__main__":
    main()
