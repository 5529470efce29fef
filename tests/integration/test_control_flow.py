"""torch.cond programs: JumpFalseCall and MoveCall instructions, both branches
taken, compared with torch eager and ExecuTorch's runtime."""

from __future__ import annotations

import pytest
import torch
from support.export import assert_close, export_program, run_with_executorch

import pyexec


class Branchy(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        def positive(y: torch.Tensor) -> torch.Tensor:
            return y * 2 + 1

        def negative(y: torch.Tensor) -> torch.Tensor:
            return torch.tanh(y) - 3

        return torch.cond(x.sum() > 0, positive, negative, (x,))


@pytest.fixture(scope="module")
def cond_program() -> bytes:
    return export_program(Branchy(), (torch.ones(3, 4),))


def test_program_uses_jump_and_move_instructions(cond_program: bytes) -> None:
    from executorch.exir._serialize._program import deserialize_pte_binary
    from executorch.exir.schema import JumpFalseCall, MoveCall

    plan = deserialize_pte_binary(cond_program).program.execution_plan[0]
    kinds = {type(i.instr_args) for c in plan.chains for i in c.instructions}
    assert JumpFalseCall in kinds and MoveCall in kinds


@pytest.mark.parametrize("sign", [1.0, -1.0])
def test_both_branches_match_eager_and_executorch(cond_program: bytes, sign: float) -> None:
    method = pyexec.load(cond_program).load_method("forward")
    x = torch.rand(3, 4) * sign
    (got,) = method.execute([x])
    assert_close(got, Branchy()(x))
    assert_close(got, run_with_executorch(cond_program, [x])[0])


def test_alternating_branches_on_one_method(cond_program: bytes) -> None:
    method = pyexec.load(cond_program).load_method("forward")
    for step in range(6):
        x = torch.rand(3, 4) * (1 if step % 2 else -1)
        (got,) = method.execute([x])
        assert_close(got, Branchy()(x), what=f"step {step}")
