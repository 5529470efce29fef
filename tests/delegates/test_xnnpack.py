"""XNNPACK-lowered programs (XnnpackPartitioner, float32) run by pyexec's own
XnnpackBackend: a zoo of small models covering every non-spatial node type,
programs only partly delegated, dynamic shapes, IO binding on a delegated
method, and the node types the zoo's payloads use against the schema's union.
Each result is compared with torch eager and with ExecuTorch's runtime
running the same file."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from support.export import assert_close, export_program, run_with_executorch
from support.xnnpack import export_xnnpack, node_types, payloads, union_names
from torch.export import Dim

import pyexec

# ---- the zoo ------------------------------------------------------------------------


class Lambda(torch.nn.Module):
    """A parameter-free model from a function (its source keys the export cache)."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, *args: torch.Tensor) -> Any:
        return self.fn(*args)


class Mlp(torch.nn.Module):
    """FullyConnected with and without bias, fused relu / hardtanh clamps."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(16, 32)
        self.b = torch.nn.Linear(32, 8, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.hardtanh(self.b(torch.relu(self.a(x))), -0.5, 0.5)


class MmAddmm(torch.nn.Module):
    """mm and addmm: FullyConnected with transposed ([IC, OC]) weights."""

    def __init__(self) -> None:
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(12, 7))
        self.v = torch.nn.Parameter(torch.randn(7, 5))
        self.c = torch.nn.Parameter(torch.randn(5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.addmm(self.c, torch.mm(x, self.w), self.v)


class Attention(torch.nn.Module):
    """bmm, softmax, transpose, reshape: one attention head, 3-D leading dims kept by linear."""

    def __init__(self) -> None:
        super().__init__()
        self.qkv = torch.nn.Linear(16, 48)
        self.out = torch.nn.Linear(16, 16)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.qkv(x).split(16, dim=-1)
        att = torch.softmax(torch.bmm(q, k.transpose(1, 2)) * 0.25, dim=-1)
        y = torch.bmm(att, v)
        return self.out(y.reshape(-1, 16)).reshape(x.shape)


def _binary(a: torch.Tensor, b: torch.Tensor) -> Any:
    return (a + b, a - b, a * b, a / (b.abs() + 0.5), torch.minimum(a, b), torch.maximum(a, b), torch.relu(a + b))


def _unary(x: torch.Tensor) -> Any:
    return (
        torch.sigmoid(x),
        torch.tanh(x),
        torch.exp(x),
        torch.log(x.abs() + 0.1),
        torch.abs(x) - torch.neg(x),
        torch.pow(x, 2),
        torch.sqrt(x.abs()),
        torch.rsqrt(x.abs() + 0.1),
        torch.floor(x * 3) + torch.ceil(x * 3),
        torch.sin(x) + torch.cos(x),
        F.gelu(x),
        F.hardswish(x),
        F.elu(x, alpha=0.7),
        F.leaky_relu(x, 0.2),
        torch.clamp(x, -0.3, 0.6),
    )


def _shapes(x: torch.Tensor, y: torch.Tensor) -> Any:
    p = x.permute(0, 2, 1) + 1.0
    s = x[:, 1:3, 2:] * 2.0
    pad = F.pad(x, (1, 2, 0, 1), value=0.5) * 1.0
    cats = (
        torch.cat([x, y], dim=1) + 0,
        torch.cat([x, y, x], dim=2) * 1,
        torch.cat([x, y, x, y], dim=0) - 0,
        torch.cat([x, y, x, y, x], dim=1) + 1,
    )
    r = (x * 2).reshape(2, -1)
    return (p, s, pad, r, *cats)


ZOO: dict[str, tuple[Callable[[], torch.nn.Module], Callable[[torch.Generator], tuple[torch.Tensor, ...]], float]] = {
    # name: (model, inputs, tolerance against ExecuTorch; torch eager gets the same)
    "mlp": (Mlp, lambda g: (torch.randn(5, 16, generator=g),), 1e-5),
    "mm_addmm": (MmAddmm, lambda g: (torch.randn(4, 12, generator=g),), 1e-4),
    "attention": (Attention, lambda g: (torch.randn(2, 6, 16, generator=g),), 1e-5),
    "binary": (
        lambda: Lambda(_binary),
        lambda g: (torch.randn(3, 1, 5, generator=g), torch.randn(4, 5, generator=g)),
        1e-6,
    ),
    "unary": (lambda: Lambda(_unary), lambda g: (torch.randn(4, 33, generator=g),), 1e-5),
    "shapes": (
        lambda: Lambda(_shapes),
        lambda g: (torch.randn(2, 4, 5, generator=g), torch.randn(2, 4, 5, generator=g)),
        0.0,
    ),
}


@pytest.fixture(scope="module", params=sorted(ZOO))
def zoo_case(request: pytest.FixtureRequest) -> tuple[str, torch.nn.Module, tuple[torch.Tensor, ...], bytes, float]:
    make, inputs, tol = ZOO[request.param]
    torch.manual_seed(0)
    model = make().eval()
    args = inputs(torch.Generator().manual_seed(1))
    return request.param, model, args, export_xnnpack(model, args), tol


def _flat(x: Any) -> list[torch.Tensor]:
    return list(x) if isinstance(x, (tuple, list)) else [x]


def test_zoo_matches_torch_and_executorch(zoo_case: Any) -> None:
    name, model, args, pte, tol = zoo_case
    assert payloads(pte), f"{name}: nothing was delegated"
    got = pyexec.load(pte).load_method("forward").execute(list(args))
    with torch.no_grad():
        eager = _flat(model(*[a.clone() for a in args]))
    et = run_with_executorch(pte, list(args))
    assert len(got) == len(eager) == len(et)
    for k, (g, e, r) in enumerate(zip(got, eager, et)):
        assert_close(g, r, rtol=tol, atol=tol, what=f"{name} output {k} vs ExecuTorch")
        assert_close(g, e, rtol=max(tol, 1e-5), atol=max(tol, 1e-5), what=f"{name} output {k} vs eager")


def test_zoo_runs_repeatedly_with_new_inputs(zoo_case: Any) -> None:
    name, model, args, pte, tol = zoo_case
    method = pyexec.load(pte).load_method("forward")
    for seed in range(2, 4):
        new = ZOO[name][1](torch.Generator().manual_seed(seed))
        got = method.execute(list(new))
        for k, (g, r) in enumerate(zip(got, run_with_executorch(pte, list(new)))):
            assert_close(g, r, rtol=tol, atol=tol, what=f"{name} seed {seed} output {k}")


# ---- node types covered -------------------------------------------------------------

SPATIAL = {
    "Conv2d",
    "DepthwiseConv2d",
    "ConvTranspose2d",
    "AvgPooling2d",
    "MaxPooling2d",
    "GlobalAvgPooling2d",
    "ArgMaxPooling2d",
    "StaticResizeBilinear2D",
    "PReLU",
}
# Never emitted for float32 models by the 1.5.1 partitioner: Convert (fp16
# and quantized graphs), ScaledDotProductAttention (no runtime handler
# either), Copy (clone is removed before lowering), ELU (its EluConfig is
# commented out in partition/config/__init__.py; test_elu_node below makes
# one from a LeakyReLU node).
NOT_EMITTED = {"Convert", "ScaledDotProductAttention", "Copy", "ELU"}


def test_zoo_covers_every_non_spatial_node_type() -> None:
    names = union_names()
    assert len(names) == 47 and names[1] == "Add" and names[47] == "Cos"
    used: set[str] = set()
    for make, inputs, _ in ZOO.values():
        torch.manual_seed(0)
        model = make().eval()
        args = inputs(torch.Generator().manual_seed(1))
        used |= {names[t] for t in node_types(export_xnnpack(model, args))}
    missing = set(names.values()) - used - SPATIAL - NOT_EMITTED
    assert not missing, f"the zoo covers {sorted(used)}; no model uses {sorted(missing)}"


def test_elu_node_made_from_a_leaky_relu_node() -> None:
    """ELU (29) has LeakyReLU's (25) table layout (alpha in the slope's slot):
    retyping the node gives an ELU graph, run by both runtimes."""
    import struct

    pte = bytearray(export_xnnpack(Lambda(lambda x: F.leaky_relu(x, 0.3) * 2.0), (torch.randn(3, 7),)))
    (p,) = payloads(bytes(pte))
    (leaky,) = [n for n in p.graph(bytes(pte)).tables(1) if n.scalar(0, "B") == 25]
    pos = leaky.field(0)
    assert pos is not None
    struct.pack_into("<B", pte, pos, 29)
    x = torch.randn(3, 7)
    (got,) = pyexec.load(bytes(pte)).load_method("forward").execute([x])
    (et,) = run_with_executorch(bytes(pte), [x])
    assert_close(got, et, rtol=1e-5, atol=1e-6)
    assert_close(got, F.elu(x, alpha=0.3) * 2.0, rtol=1e-5, atol=1e-6)


def test_inline_payload_runs_like_a_segment() -> None:
    """extract_delegate_segments=False: the payload lives in
    Program.backend_delegate_data instead of a segment."""
    torch.manual_seed(0)
    model = Mlp().eval()
    x = torch.randn(5, 16)
    inline = export_xnnpack(model, (x,), extract_delegate_segments=False)
    segment = export_xnnpack(model, (x,))
    (p,) = payloads(inline)
    assert p.size and p.offset < len(inline)
    a = pyexec.load(inline).load_method("forward").execute([x])
    b = pyexec.load(segment).load_method("forward").execute([x])
    assert_close(a[0], b[0], rtol=0, atol=0)
    assert_close(a[0], run_with_executorch(inline, [x])[0], rtol=1e-5, atol=1e-5)


# ---- partly delegated, dynamic shapes --------------------------------------------------


class Mixed(torch.nn.Module):
    """Delegated linear layers around ops XNNPACK does not take (cumsum,
    argmax): three delegate calls and portable kernels between them."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(6, 6)
        self.b = torch.nn.Linear(6, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.cumsum(torch.tanh(self.a(x)), dim=1)
        y = self.b(h * 2.0)
        return y, torch.argmax(y, dim=1)


def test_partly_delegated_program_matches_torch_and_executorch() -> None:
    model = Mixed().eval()
    x = torch.randn(4, 6)
    pte = export_xnnpack(model, (x,))
    assert len(payloads(pte)) >= 2
    for seed in range(3):
        x = torch.randn(4, 6, generator=torch.Generator().manual_seed(seed))
        got = pyexec.load(pte).load_method("forward").execute([x])
        with torch.no_grad():
            eager = model(x)
        for g, e, r in zip(got, eager, run_with_executorch(pte, [x])):
            assert_close(g, r, rtol=1e-5, atol=1e-5)
            assert_close(g, e, rtol=1e-5, atol=1e-5)


class Dynamic(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l = torch.nn.Linear(8, 8)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = torch.softmax(self.l(x) + x, dim=-1)
        return h[:, 2:6] * 2.0, torch.cat([h, x], dim=1).reshape(-1, 4, 4)


def test_dynamic_batch_resizes_delegate_outputs() -> None:
    model = Dynamic().eval()
    pte = export_xnnpack(model, (torch.randn(6, 8),), dynamic_shapes={"x": {0: Dim("n", min=1, max=10)}})
    method = pyexec.load(pte).load_method("forward")
    for n in (6, 1, 10, 3):
        x = torch.randn(n, 8, generator=torch.Generator().manual_seed(n))
        got = method.execute([x])
        with torch.no_grad():
            eager = model(x)
        assert got[0].shape == (n, 4) and got[1].shape == (n, 4, 4)
        for g, e, r in zip(got, eager, run_with_executorch(pte, [x])):
            assert_close(g, r, rtol=1e-5, atol=1e-6)
            assert_close(g, e, rtol=1e-5, atol=1e-6)
    with pytest.raises(pyexec.InvalidArgumentError, match="above its bound"):
        method.execute([torch.randn(11, 8)])


# ---- binding on a delegated method ----------------------------------------------------------


class Affine(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.l = torch.nn.Linear(5, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.l(x))


@pytest.fixture(scope="module")
def unplanned() -> bytes:
    torch.manual_seed(0)
    return export_xnnpack(Affine().eval(), (torch.randn(4, 5),), alloc_graph_input=False, alloc_graph_output=False)


def test_program_io_is_unplanned(unplanned: bytes) -> None:
    meta = pyexec.load(unplanned).method_meta("forward")
    assert meta.inputs[0] is not None and not meta.inputs[0].is_memory_planned
    assert meta.outputs[0] is not None and not meta.outputs[0].is_memory_planned


def test_delegate_writes_a_bound_unplanned_output_in_place(unplanned: bytes) -> None:
    torch.manual_seed(0)
    model = Affine().eval()
    method = pyexec.load(unplanned).load_method("forward")
    out = torch.empty(4, 3)
    ptr = out.data_ptr()
    method.set_output(out, 0)
    for seed in range(3):
        x = torch.randn(4, 5, generator=torch.Generator().manual_seed(seed))
        (got,) = method.execute([x])
        assert got is out and out.data_ptr() == ptr
        with torch.no_grad():
            assert_close(out, model(x), rtol=1e-5, atol=1e-6)


def test_delegate_reads_an_unplanned_input_in_place(unplanned: bytes) -> None:
    torch.manual_seed(0)
    model = Affine().eval()
    method = pyexec.load(unplanned).load_method("forward")
    x = torch.randn(4, 5)
    method.set_inputs([x])
    x[...] = 0.25  # changed after set_inputs: the delegate reads the caller's memory
    (got,) = method.execute()
    with torch.no_grad():
        assert_close(got, model(x), rtol=1e-5, atol=1e-6)


class EdgeReshapes(torch.nn.Module):
    """StaticReshapes at the graph's edges: one reads the delegate's input,
    two write its outputs (one of them read again outside the delegate)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(8, 8)
        self.b = torch.nn.Linear(8, 6)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        y = self.a(x.reshape(24, 8)).reshape(4, 6, 8)
        return y, torch.tanh(self.b(x)).reshape(4, 36), y.sum(-1)


@pytest.mark.parametrize("planned", [True, False], ids=["planned", "unplanned"])
def test_reshapes_at_the_edges_move_no_bytes_and_change_no_result(planned: bool) -> None:
    """An edge reshape's value lives in the caller's tensor (its node moves
    nothing): results stay ExecuTorch's and eager's call after call, with
    outputs bound to the caller's tensors and an input read in place."""
    torch.manual_seed(0)
    model = EdgeReshapes().eval()
    pte = export_xnnpack(model, (torch.randn(4, 6, 8),), alloc_graph_input=planned, alloc_graph_output=planned)
    method = pyexec.load(pte).load_method("forward")
    with method.profile() as p:
        method.execute([torch.zeros(4, 6, 8)])
    assert [e.name for e in p.events].count("StaticReshape") == 3
    bound = [torch.full((4, 6, 8), float("nan")), torch.full((4, 36), float("nan"))]
    if not planned:
        for i, t in enumerate(bound):
            method.set_output(t, i)
    for seed in range(3):
        x = torch.randn(4, 6, 8, generator=torch.Generator().manual_seed(seed))
        method.set_inputs([x.clone() if planned else x])
        if not planned:
            x.mul_(-0.5)  # read in place: the run sees the change
        got = method.execute()
        with torch.no_grad():
            eager = model(x)
        for g, e, r in zip(got, eager, run_with_executorch(pte, [x])):
            assert_close(g, r, rtol=1e-5, atol=1e-6)
            assert_close(g, e, rtol=1e-5, atol=1e-6)
        if not planned:
            assert got[0] is bound[0] and got[1] is bound[1]


# ---- SiLU: the exporter's Sigmoid and Multiply, fused at load --------------------------------


class SiluConvs(torch.nn.Module):
    """SiLU after a convolution, a depthwise convolution, a Linear and an Add
    (EfficientNet's activation, which the exporter lowers as a Sigmoid and a
    Multiply), and a squeeze-excitation gate (a Sigmoid whose result
    multiplies another value: not a SiLU)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Conv2d(3, 16, 3, padding=1)
        self.dw = torch.nn.Conv2d(16, 16, 3, padding=1, groups=16)
        self.b = torch.nn.Conv2d(16, 16, 3, padding=1)
        self.fc = torch.nn.Linear(16, 24)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.silu(self.dw(F.silu(self.a(x))))
        gate = torch.sigmoid(h.mean((2, 3), keepdim=True))
        h = F.silu(F.silu(self.b(h * gate)) + 1.0)
        return F.silu(self.fc(h.permute(0, 2, 3, 1)))


def _events(pte: bytes, x: torch.Tensor) -> tuple[torch.Tensor, list[str]]:
    method = pyexec.load(pte).load_method("forward")
    with method.profile() as p:
        (out,) = method.execute([x])
    return out, [e.name for e in p.events]


def test_silu_runs_in_the_node_before_it_or_as_one_node_with_the_bits_of_its_two(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each x * sigmoid(x) whose x a convolution, depthwise convolution or
    Linear makes runs inside that node ("Conv2d [..., SiLU]",
    "DepthwiseConv2d [SiLU]", "FullyConnected [SiLU]" in the profile); the one
    after an Add as one node ("SiLU [Sigmoid, Multiply]"); the gate's Sigmoid
    and Multiply as they are. The outputs equal those of the graph run node
    by node (PYEXEC_FUSE=0), bit for bit, at one thread and at three, and
    ExecuTorch's and torch's within float rounding. Inputs reach the
    sigmoid's saturation both ways."""
    torch.manual_seed(5)
    m = SiluConvs().eval()
    x = 4 * torch.randn(2, 3, 37, 29)
    pte = export_xnnpack(m, (x,))
    names = [union_names()[t] for t in node_types(pte)]
    assert names.count("Sigmoid") == 6 and names.count("Multiply") == 6, names
    torch.manual_seed(6)
    x2 = 4 * torch.randn_like(x)
    before = pyexec.get_num_threads()
    try:
        for threads in (1, 3):
            pyexec.set_num_threads(threads)
            fused, events = _events(pte, x2)
            convs = [e for e in events if e.startswith("Conv2d [")]
            assert len(convs) == 2 and all(e.endswith(", SiLU]") for e in convs), events
            assert events.count("DepthwiseConv2d [SiLU]") == 1, events
            assert events.count("FullyConnected [SiLU]") == 1, events
            assert events.count("SiLU [Sigmoid, Multiply]") == 1, events
            assert events.count("Sigmoid") == 1 and events.count("Multiply") == 1, events
            with monkeypatch.context() as env:
                env.setenv("PYEXEC_FUSE", "0")
                plain, plain_events = _events(pte, x2)
            assert not any("SiLU" in e for e in plain_events), plain_events
            assert plain_events.count("Sigmoid") == 6, plain_events
            assert torch.equal(torch.as_tensor(fused), torch.as_tensor(plain))
    finally:
        pyexec.set_num_threads(before)
    (et,) = run_with_executorch(pte, [x2])
    assert_close(fused, et, rtol=1e-5, atol=1e-5)
    with torch.no_grad():
        assert_close(fused, m(x2), rtol=1e-4, atol=1e-4)


def _silu_plus_sigmoid(x: torch.Tensor) -> torch.Tensor:
    s = torch.sigmoid(x)
    return x * s + s


def test_a_sigmoid_read_twice_is_not_fused() -> None:
    """s = sigmoid(x); x * s + s: the sigmoid's result has a second reader,
    so both nodes run as exported."""
    m = Lambda(_silu_plus_sigmoid)
    x = 3 * torch.randn(4, 33)
    pte = export_xnnpack(m, (x,))
    got, events = _events(pte, x)
    assert "SiLU [Sigmoid, Multiply]" not in events and "Sigmoid" in events and "Multiply" in events, events
    (et,) = run_with_executorch(pte, [x])
    assert_close(got, et, rtol=1e-5, atol=1e-6)
    assert_close(got, x * torch.sigmoid(x) + torch.sigmoid(x), rtol=1e-5, atol=1e-6)


def _hardswish(x: torch.Tensor) -> torch.Tensor:
    return F.hardswish(x)


def _mul(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return x * y


def _bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(torch.int32)


def _relu_sum_and_clamped_product(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.relu(a + b), torch.clamp(a * b, -1.0, 1.0)


def test_output_bounds_keep_executorchs_signed_zeros_and_nans() -> None:
    """An Add with a ReLU folded into its output bounds, and a Clamp node:
    XNNPACK takes the maximum with the lower bound, then the minimum with
    the upper, so a -0.0 sum stays -0.0 (it is not below 0) and a NaN stays a
    NaN. pyexec's bits must be ExecuTorch's, sign bits included, on every
    lane (the vector body and the tail)."""
    special = [float("nan"), -0.0, 0.0, 2.0, -3.0, float("inf"), -float("inf"), 0.5]
    a = torch.tensor(special * 5 + [-0.0, 0.0, float("nan")])
    b = torch.tensor([1.0, -0.0, -0.0, 1.0, 1.0, 1.0, 1.0, float("nan")] * 5 + [-0.0, -0.0, 2.0])
    pte = export_xnnpack(Lambda(_relu_sum_and_clamped_product), (a, b))
    got = pyexec.load(pte).load_method("forward").execute([a, b])
    for g, r in zip(got, run_with_executorch(pte, [a, b])):
        assert torch.equal(_bits(g), _bits(r)), (g, r)
    assert torch.signbit(got[0][1]) and got[0][0].isnan()  # -0.0 + -0.0 through the ReLU bound


def test_delegate_runs_with_denormals_off_as_executorch_and_only_there() -> None:
    """XNNPACK runs its operators with denormals off (a result below the
    smallest normal float is zero, and so is such an input): ExecuTorch's
    x * y of 1e-38 * 4 and of 2e-38 / 4 is 0 from the lowered program, and
    pyexec's must be too, on the pool's threads as well. Outside the delegate
    nothing changes: the portable program's products stay nonzero, as in
    ExecuTorch, after the lowered one ran at the same thread count, and so
    does a product this thread computes afterwards."""
    n = 1 << 20  # enough work for the multiply to split over three threads
    x, y = torch.full((n,), 1e-38), torch.full((n,), 4.0)
    x[1::2], y[1::2] = 2e-38, 0.25
    lowered, portable = export_xnnpack(Lambda(_mul), (x, y)), export_program(Lambda(_mul), (x, y))
    (et_lowered,) = run_with_executorch(lowered, [x, y])
    (et_portable,) = run_with_executorch(portable, [x, y])
    assert bool((et_lowered == 0).all()) and bool((et_portable != 0).all())
    before = pyexec.get_num_threads()
    try:
        for threads in (1, 3):
            pyexec.set_num_threads(threads)
            got = pyexec.load(lowered).load_method("forward").execute([x, y])[0]
            assert torch.equal(_bits(got), _bits(et_lowered)), f"{threads} threads"
            plain = pyexec.load(portable).load_method("forward").execute([x, y])[0]
            assert torch.equal(_bits(plain), _bits(et_portable)), f"{threads} threads"
    finally:
        pyexec.set_num_threads(before)
    assert float(torch.tensor(1e-38) * 4.0) != 0.0


def test_hardswish_gives_executorchs_bits_on_every_kind_of_float() -> None:
    """XNNPACK's Hardswish, x * clamp(x / 6 + 1/2, 0, 1), against ExecuTorch's
    runtime bit for bit: a float of every 65537th bit pattern (every sign and
    exponent, subnormals and NaNs among them), the values around the clamp's
    corners at -3 and 3, zeros, infinities and NaNs, in a length that leaves
    a tail past the last whole vector."""
    step = torch.arange(0, 1 << 32, 65537, dtype=torch.int64)
    grid = (step - (1 << 32) * (step >= (1 << 31))).to(torch.int32).view(torch.float32)
    corners = torch.tensor([-3.0, 3.0, 0.0, -0.0, float("inf"), -float("inf"), float("nan"), -float("nan")])
    near = torch.cat([torch.nextafter(corners[:2], torch.tensor(v)) for v in (-1e9, 1e9)])
    x = torch.cat([grid, corners, near, torch.linspace(-4, 4, 1001)])
    assert x.numel() % 8 != 0
    pte = export_xnnpack(Lambda(_hardswish), (x,))
    assert union_names()[node_types(pte)[0]] == "Hardswish"
    got = pyexec.load(pte).load_method("forward").execute([x])[0]
    (et,) = run_with_executorch(pte, [x])
    same = got.view(torch.int32) == et.view(torch.int32)
    assert bool(same.all()), f"{int((~same).sum())} of {x.numel()} differ, e.g. x = {x[~same][:4].tolist()}"


# ---- a per-channel vector over an NHWC map ---------------------------------------------------


class ChannelGates(torch.nn.Module):
    """Squeeze-excitation as mobilenet_v3 has it, then the gate on either side
    of a Subtract and a Divide: inside the delegate each is a [1, 1, 1, C]
    vector against a [N, H, W, C] map, which the backend runs as runs of many
    rows against the vector repeated."""

    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, c, 3, padding=1)
        self.fc1 = torch.nn.Conv2d(c, 8, 1)
        self.fc2 = torch.nn.Conv2d(8, c, 1)
        self.out = torch.nn.Conv2d(c, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = F.hardswish(self.conv(x))
        gate = F.hardsigmoid(self.fc2(F.relu(self.fc1(h.mean((2, 3), keepdim=True)))))
        h = h * gate
        h = (gate - h) / (gate + 0.5)
        return self.out(torch.clamp(h, -1.0, 1.0))


@pytest.mark.parametrize("c, shape", [(16, (1, 3, 23, 19)), (200, (1, 3, 9, 7)), (300, (1, 3, 5, 6)),
                                      (16, (2, 3, 11, 13))], ids=["c16", "c200", "c300-rows", "batch2-rows"])
def test_a_channel_vector_against_an_nhwc_map(c: int, shape: tuple[int, ...]) -> None:
    """Multiply, Subtract and Divide of the gate and the map give ExecuTorch's
    result at one thread and at three with the same bits. C up to 255 with
    one image takes the repeated-vector runs; 300 channels and a batch of two
    keep the row-by-row loop."""
    torch.manual_seed(11)
    m = ChannelGates(c).eval()
    x = 3 * torch.randn(*shape)
    pte = export_xnnpack(m, (x,))
    names = [union_names()[t] for t in node_types(pte)]
    assert {"Multiply", "Subtract", "Div"} <= set(names), names
    outs = []
    before = pyexec.get_num_threads()
    try:
        for threads in (1, 3):
            pyexec.set_num_threads(threads)
            method = pyexec.load(pte).load_method("forward")
            with method.profile() as p:
                (out,) = method.execute([x])
            outs.append(torch.as_tensor(out))
            gated = [e.shapes for e in p.events if e.name in ("Multiply", "Subtract", "Div")]
            n, _, h, w = shape
            vec, full = f"[{n},1,1,{c}]", f"[{n},{h},{w},{c}]"
            assert f"{full} {vec}" in gated and f"{vec} {full}" in gated, gated  # both sides
    finally:
        pyexec.set_num_threads(before)
    assert torch.equal(outs[0], outs[1])
    with torch.no_grad():
        eager = m(x)
    assert_close(outs[0], run_with_executorch(pte, [x])[0], rtol=1e-5, atol=1e-5, what="vs ExecuTorch")
    assert_close(outs[0], eager, rtol=1e-4, atol=1e-4, what="vs eager")
