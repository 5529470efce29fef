"""Load-time fusion of float32 XNNPACK graphs into fewer, cache-friendlier
nodes: a Hardswish runs inside the convolution or Linear that makes its
input, and an inverted-residual chain (1x1 expansion, depthwise
convolution, 1x1 projection, residual Add; MobileNet's block) runs as one
node a band of rows at a time, its wide intermediate maps never written
whole. Each fused program must give the bits of the same graph run node by
node (PYEXEC_FUSE=0) at any thread count, and ExecuTorch's and torch's
results within float rounding."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import torch
import torch.nn.functional as F
from support.export import assert_close, run_with_executorch
from support.xnnpack import export_xnnpack

import pyexec


class Block(torch.nn.Module):
    """An inverted-residual block: [1x1 expansion + ReLU6] -> k x k depthwise
    (stride, dilation, depth multiplier) + an activation -> 1x1 projection
    [+ the input, on either side of the add]."""

    def __init__(self, cin: int, hidden: int, cout: int, *, k: int = 3, stride: int = 1, dilation: int = 1,
                 multiplier: int = 1, expand: bool = True, act: str = "relu6", residual: str = "") -> None:
        super().__init__()
        if not expand:
            hidden = cin
        self.expand = torch.nn.Conv2d(cin, hidden, 1) if expand else None
        pad = dilation * (k - 1) // 2
        self.dw = torch.nn.Conv2d(hidden, hidden * multiplier, k, stride, pad, dilation=dilation, groups=hidden)
        self.project = torch.nn.Conv2d(hidden * multiplier, cout, 1)
        self.act = act
        self.residual = residual
        with torch.no_grad():  # outputs of a few units, so that float rounding shows in every bit
            for m in (self.expand, self.dw, self.project):
                if m is not None:
                    m.bias.uniform_(-0.5, 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.relu6(self.expand(x)) if self.expand is not None else x
        h = self.dw(h)
        h = {"relu6": F.relu6, "hardswish": F.hardswish, "silu": F.silu}[self.act](h)
        y = self.project(h)
        if self.residual == "x+y":
            return x + y
        if self.residual == "y+x":
            return y + x
        return y


def _run(pte: bytes, x: torch.Tensor) -> tuple[torch.Tensor, list[str]]:
    method = pyexec.load(pte).load_method("forward")
    with method.profile() as p:
        (out,) = method.execute([x])
    return torch.as_tensor(out), [e.name for e in p.events]


@pytest.fixture
def threads() -> Iterator[None]:
    before = pyexec.get_num_threads()
    yield
    pyexec.set_num_threads(before)


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.int32)


# (model, input, the fused node's profile name)
BLOCKS = {
    "mobile block, hardswish, x + y": (
        lambda: Block(32, 128, 32, act="hardswish", residual="x+y"),
        (1, 32, 40, 37),
        "InvertedResidual [Conv2d, DepthwiseConv2d, Hardswish, Conv2d, Add]",
    ),
    "stride 2, 5x5, two images": (
        lambda: Block(16, 96, 24, k=5, stride=2),
        (2, 16, 33, 47),
        "InvertedResidual [Conv2d, DepthwiseConv2d, Conv2d]",
    ),
    "no expansion": (
        lambda: Block(32, 32, 16, expand=False),
        (1, 32, 66, 64),
        "InvertedResidual [DepthwiseConv2d, Conv2d]",
    ),
    "a 10 x 10 map, one band a thread": (
        lambda: Block(64, 768, 64, residual="x+y"),
        (1, 64, 10, 10),
        "InvertedResidual [Conv2d, DepthwiseConv2d, Conv2d, Add]",
    ),
    "multiplier 2, dilation 2, silu, y + x": (
        lambda: Block(24, 72, 24, dilation=2, multiplier=2, act="silu", residual="y+x"),
        (1, 24, 41, 40),
        "InvertedResidual [Conv2d, DepthwiseConv2d, SiLU, Conv2d, Add]",
    ),
}


@pytest.mark.parametrize("case", list(BLOCKS))
def test_an_inverted_residual_block_runs_as_one_node_with_the_bits_of_its_nodes(
    case: str, threads: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The chain runs as one node (its profile row names the nodes it stands
    for, and nothing else but the layout transposes runs), and its output
    equals the graph's run node by node bit for bit at one, two and three
    threads; ExecuTorch's and torch's within float rounding."""
    make, shape, name = BLOCKS[case]
    torch.manual_seed(3)
    model = make().eval()
    x = torch.randn(*shape)
    pte = export_xnnpack(model, (x,))
    torch.manual_seed(4)
    x2 = 2 * torch.randn(*shape)
    for n in (1, 2, 3):
        pyexec.set_num_threads(n)
        fused, events = _run(pte, x2)
        assert [e for e in events if e not in ("delegate:XnnpackBackend", "StaticTranspose")] == [name], events
        with monkeypatch.context() as env:
            env.setenv("PYEXEC_FUSE", "0")
            plain, plain_events = _run(pte, x2)
        assert not any(e.startswith("InvertedResidual") for e in plain_events), plain_events
        assert torch.equal(_bits(fused), _bits(plain)), (n, (fused - plain).abs().max())
    (et,) = run_with_executorch(pte, [x2])
    assert_close(fused, et, rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        assert_close(fused, model(x2), rtol=1e-4, atol=1e-4)


def test_a_block_whose_maps_stay_in_cache_runs_node_by_node() -> None:
    """An 8 x 8 map of 64 channels (16 KB) is left to the nodes: banding it
    would only cut its products short."""
    torch.manual_seed(5)
    model = Block(16, 64, 16, residual="x+y").eval()
    x = torch.randn(1, 16, 8, 8)
    pte = export_xnnpack(model, (x,))
    out, events = _run(pte, x)
    assert not any(e.startswith("InvertedResidual") for e in events), events
    assert "DepthwiseConv2d" in events and events.count("Conv2d [direct]") == 2, events
    with torch.no_grad():
        assert_close(out, model(x), rtol=1e-4, atol=1e-4)


class ReadTwice(torch.nn.Module):
    """A block whose expanded map is read again after the projection: that
    map must exist whole, so the expansion runs as its own node and the
    block starts at the depthwise layer."""

    def __init__(self) -> None:
        super().__init__()
        self.block = Block(16, 64, 16)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        e = F.relu6(self.block.expand(x))
        y = self.block.project(F.relu6(self.block.dw(e)))
        return y, e.mean((2, 3))


def test_an_expanded_map_with_another_reader_stays_out_of_the_block(monkeypatch: pytest.MonkeyPatch) -> None:
    torch.manual_seed(6)
    model = ReadTwice().eval()
    x = torch.randn(1, 16, 48, 48)
    pte = export_xnnpack(model, (x,))

    def run() -> tuple[list[torch.Tensor], list[str]]:
        method = pyexec.load(pte).load_method("forward")
        with method.profile() as p:
            got = method.execute([x])
        return [torch.as_tensor(g) for g in got], [e.name for e in p.events]

    got, events = run()
    assert "InvertedResidual [DepthwiseConv2d, Conv2d]" in events and "Conv2d [direct]" in events, events
    with monkeypatch.context() as env:
        env.setenv("PYEXEC_FUSE", "0")
        plain, _ = run()
    with torch.no_grad():
        for g, p, w in zip(got, plain, model(x)):
            assert torch.equal(_bits(g), _bits(p))
            assert_close(g, w, rtol=1e-4, atol=1e-4)


class Hardswishes(torch.nn.Module):
    """A hardswish after a convolution (direct and Winograd), a depthwise
    convolution and a Linear (each made for the hardswish alone), and one
    after an add."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.dw = torch.nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.wino = torch.nn.Conv2d(16, 16, 3, padding=1)
        self.fc = torch.nn.Linear(16, 8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.hardswish(self.dw(F.hardswish(self.conv(x))))
        h = F.hardswish(self.wino(h))
        h = F.hardswish(h + 0.5)
        return F.hardswish(self.fc(h.mean((2, 3))))


def test_a_hardswish_runs_in_the_node_that_makes_its_input(threads: None, monkeypatch: pytest.MonkeyPatch) -> None:
    """The profile shows "Conv2d [direct, Hardswish]", "Conv2d [winograd
    F(2x2,3x3), Hardswish]", "DepthwiseConv2d [Hardswish]" and
    "FullyConnected [Hardswish]", the hardswish after the add as its own
    node; the outputs are the node-by-node graph's bits at one and three
    threads. Inputs cover both clamp ends of the hardswish."""
    torch.manual_seed(7)
    model = Hardswishes().eval()
    x = 4 * torch.randn(2, 3, 21, 19)
    pte = export_xnnpack(model, (x,))
    for n in (1, 3):
        pyexec.set_num_threads(n)
        fused, events = _run(pte, x)
        for fused_name in ("Conv2d [direct, Hardswish]", "Conv2d [winograd F(2x2,3x3), Hardswish]",
                           "DepthwiseConv2d [Hardswish]", "FullyConnected [Hardswish]"):
            assert events.count(fused_name) == 1, events
        assert events.count("Hardswish") == 1, events
        with monkeypatch.context() as env:
            env.setenv("PYEXEC_FUSE", "0")
            plain, plain_events = _run(pte, x)
        assert plain_events.count("Hardswish") == 5, plain_events
        assert torch.equal(_bits(fused), _bits(plain))
    (et,) = run_with_executorch(pte, [x])
    assert_close(fused, et, rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        assert_close(fused, model(x), rtol=1e-4, atol=1e-4)
