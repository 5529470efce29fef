"""Bundled programs (.bpte) made with ExecuTorch's own API (BundledProgram,
serialize_from_bundled_program_to_flatbuffer) for the tests, the fixtures
and the fuzz seeds: a program with two methods, one with a dynamic batch
dim and a specialized int input, the other on int32 tensors, each with
several test cases whose expected outputs come from torch eager."""

from __future__ import annotations

import warnings
from typing import Any

import torch

DEFAULT_A = 3  # the int input `forward` is exported with (torch.export specializes it)


class TwoMethods(torch.nn.Module):
    """forward(x, a) on a dynamic batch; encode(x, q) on int32 tensors."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("w", torch.arange(12, dtype=torch.float32).reshape(3, 4) / 8)

    def forward(self, x: torch.Tensor, a: int) -> tuple[torch.Tensor, torch.Tensor]:
        y = x * self.w + a
        return y, y.reshape(x.shape[0], 12).sum(dim=1)

    def encode(self, x: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        return x * q + 1


class _Encode(torch.nn.Module):
    def __init__(self, m: TwoMethods) -> None:
        super().__init__()
        self.m = m

    def forward(self, x: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
        return self.m.encode(x, q)


def forward_cases() -> list[tuple[Any, ...]]:
    """Inputs of forward's test cases: batches of 2 (the example), 1 and 4."""
    g = torch.Generator().manual_seed(7)
    return [(torch.randn(b, 3, 4, generator=g), DEFAULT_A) for b in (2, 1, 4)]


def encode_cases() -> list[tuple[Any, ...]]:
    g = torch.Generator().manual_seed(8)
    return [
        (torch.randint(-50, 50, (2, 2), generator=g, dtype=torch.int32),
         torch.randint(-50, 50, (2, 2), generator=g, dtype=torch.int32))
        for _ in range(2)
    ]


def manager() -> Any:
    """The two methods exported with ExecuTorch (forward's batch dim dynamic, up to 4)."""
    from executorch.exir import to_edge

    m = TwoMethods().eval()
    batch = torch.export.Dim("batch", min=1, max=4)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")
        fwd = torch.export.export(m, forward_cases()[0], dynamic_shapes=({0: batch}, None), strict=False)
        enc = torch.export.export(_Encode(m), encode_cases()[0], strict=False)
        return to_edge({"forward": fwd, "encode": enc}).to_executorch()


def suites(wrong: tuple[str, int, int] | None = None) -> list[Any]:
    """MethodTestSuites for both methods, expected outputs from torch eager.
    `wrong` = (method, test case, output): that expected output is changed
    (one element off by 1e-2, well above the default tolerances)."""
    from executorch.devtools.bundled_program.config import MethodTestCase, MethodTestSuite

    m = TwoMethods().eval()
    out = []
    for name, cases, fn in (("forward", forward_cases(), m.forward), ("encode", encode_cases(), m.encode)):
        tcs = []
        for i, inputs in enumerate(cases):
            with torch.no_grad():
                expected = fn(*inputs)
            expected = [t.clone() for t in (expected if isinstance(expected, tuple) else (expected,))]
            if wrong is not None and wrong[:2] == (name, i):
                expected[wrong[2]].view(-1)[0] += 1e-2 if expected[wrong[2]].is_floating_point() else 1
            tcs.append(MethodTestCase(inputs=list(inputs), expected_outputs=expected))
        out.append(MethodTestSuite(method_name=name, test_cases=tcs))
    return out


def make_bundle(wrong: tuple[str, int, int] | None = None, program: Any = None) -> bytes:
    """The .bpte bytes, written by serialize_from_bundled_program_to_flatbuffer."""
    from executorch.devtools.bundled_program.core import BundledProgram
    from executorch.devtools.bundled_program.serialize import serialize_from_bundled_program_to_flatbuffer

    bp = BundledProgram(program if program is not None else manager(), suites(wrong))
    return bytes(serialize_from_bundled_program_to_flatbuffer(bp))
