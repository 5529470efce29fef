"""The model zoo: ten families exported by executorch 1.5.1, each run by
pyexec and compared with torch eager (and the dynamic one at several sizes)."""

from __future__ import annotations

import pytest
from support.export import check_module
from support.zoo import ZOO


@pytest.mark.parametrize("name", sorted(ZOO))
def test_zoo_model_matches_torch_eager(name: str) -> None:
    z = ZOO[name]()
    check_module(
        z.module, z.inputs, dynamic_shapes=z.dynamic_shapes, rtol=z.rtol, atol=z.atol,
        run_inputs=[z.inputs, *z.more_inputs],
    )
