"""XNNPACK delegate, spatial nodes (float32, NHWC): Conv2d, DepthwiseConv2d,
ConvTranspose2d, Avg/Max/GlobalAvgPooling2d, StaticResizeBilinear2D and
PReLU, in programs lowered by ExecuTorch's own XnnpackPartitioner, and
ArgMaxPooling2d, which that partitioner never emits, in a payload written
with ExecuTorch's own serializer.

Every model runs three ways on the same inputs: pyexec on the .pte,
ExecuTorch's runtime (with its XNNPACK delegate) on the same .pte, and torch
eager. Each test first checks that the payload holds the node type it is
meant to cover, so that it fails if the partitioner stops emitting it.

Tolerances. XNNPACK's float kernels are not bit-exact with pyexec's or
ATen's: convolutions sum in a different order (im2col GEMM panels against
XNNPACK's indirect GEMM, with fused multiply-adds), and average pooling
multiplies by a reciprocal. A sum of K products of values around 1 then
differs by a few ulps times sqrt(K): about 1e-6 for the single layers here,
so rtol 1e-4 / atol 1e-5 (the repository's default) leaves two orders of
margin. Max pooling, ArgMaxPooling2d (values and indices), PReLU and the
resize (the same source coordinates and lerp order as XNNPACK) move or
scale single values: exact against ExecuTorch. Stacks of ten or more layers
compound the rounding of every layer (and amplify it through the next
layers' weights): rtol 1e-3 / atol 1e-4.
"""

from __future__ import annotations

import pytest
import torch
from support.export import assert_close, run_with_executorch
from support.xnnpack import export_xnnpack, node_types

import pyexec

# XNodeUnion type codes (schema.fbs, declaration order)
CONV2D, RESIZE, AVG_POOL, DEPTHWISE, MAX_POOL, GLOBAL_AVG, PRELU, CONV_T = 7, 9, 11, 13, 14, 19, 31, 39

EXACT = dict(rtol=0.0, atol=0.0)
LAYER = dict(rtol=1e-4, atol=1e-5)
STACK = dict(rtol=1e-3, atol=1e-4)


def check(
    module: torch.nn.Module,
    inputs: tuple[torch.Tensor, ...],
    nodes: tuple[int, ...],
    *,
    vs_executorch: dict[str, float],
    vs_eager: dict[str, float] | None,
    dynamic_shapes=None,
    run_inputs=None,
) -> bytes:
    """Lowers `module`, asserts the payload holds every type in `nodes`, and
    compares pyexec with ExecuTorch and (unless vs_eager is None) with eager
    on `inputs` and every tuple of `run_inputs`."""
    torch.manual_seed(0)
    module = module.eval()
    pte = export_xnnpack(module, inputs, dynamic_shapes=dynamic_shapes)
    types = node_types(pte)
    for code in nodes:
        assert code in types, f"the partitioner no longer emits node type {code}: {types}"
    method = pyexec.load(pte).load_method("forward")
    for args in run_inputs or [inputs]:
        got = method.execute([x.clone() for x in args])
        reference = run_with_executorch(pte, args)
        assert len(got) == len(reference)
        for k, (g, e) in enumerate(zip(got, reference)):
            assert_close(g, e, **vs_executorch, what=f"output {k} vs ExecuTorch")
        if vs_eager is not None:
            with torch.no_grad():
                out = module(*[x.clone() for x in args])
            out = list(out) if isinstance(out, (tuple, list)) else [out]
            for k, (g, e) in enumerate(zip(got, out)):
                assert_close(g, e, **vs_eager, what=f"output {k} vs eager")
    return pte


def randn(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


# ======================================================================== #
# convolutions                                                              #
# ======================================================================== #


@pytest.mark.parametrize(
    "conv, act, shape",
    [
        (dict(in_channels=3, out_channels=16, kernel_size=3, padding=1), torch.nn.ReLU(), (2, 3, 17, 15)),
        (
            dict(
                in_channels=8,
                out_channels=24,
                kernel_size=(3, 5),
                stride=(2, 1),
                padding=(1, 2),
                dilation=(2, 1),
                groups=2,
            ),
            torch.nn.Hardtanh(-0.5, 0.75),
            (2, 8, 13, 11),
        ),
        (
            dict(in_channels=12, out_channels=12, kernel_size=3, stride=2, groups=3, bias=False),
            torch.nn.Identity(),
            (1, 12, 10, 9),
        ),
        (dict(in_channels=16, out_channels=40, kernel_size=1), torch.nn.ReLU6(), (2, 16, 7, 7)),
        (dict(in_channels=16, out_channels=8, kernel_size=1, stride=2), torch.nn.Identity(), (1, 16, 9, 9)),
        (dict(in_channels=64, out_channels=80, kernel_size=3, padding=2, dilation=2), torch.nn.ReLU(), (1, 64, 12, 12)),
    ],
    ids=["3x3-relu", "stride-dilation-groups-hardtanh", "groups-nobias", "1x1-relu6", "1x1-stride2", "deep-dilated"],
)
def test_conv2d(conv, act, shape):
    torch.manual_seed(1)
    module = torch.nn.Sequential(torch.nn.Conv2d(**conv), act)
    check(module, (randn(*shape),), (CONV2D,), vs_executorch=LAYER, vs_eager=LAYER)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize(
    "conv, act, shape",
    [
        # depth 96 x 9 = 864, cut into depth blocks that start inside a tap
        (dict(in_channels=96, out_channels=40, kernel_size=3, padding=1), torch.nn.ReLU(), (1, 96, 9, 11)),
        (
            dict(
                in_channels=16,
                out_channels=48,
                kernel_size=(3, 2),
                stride=(2, 3),
                padding=(2, 1),
                dilation=(2, 1),
                groups=2,
            ),
            torch.nn.Hardtanh(-0.25, 0.5),
            (2, 16, 13, 17),
        ),
        # 1600 output pixels: more than one row tile on one thread; 16 output channels
        (dict(in_channels=8, out_channels=16, kernel_size=3, padding=1, bias=False), torch.nn.ReLU6(), (1, 8, 40, 40)),
        (dict(in_channels=12, out_channels=70, kernel_size=5, stride=2), torch.nn.Identity(), (1, 12, 21, 23)),
        # three channels: each kernel row's 7 taps one contiguous run of 21 floats
        (dict(in_channels=3, out_channels=64, kernel_size=7, stride=2, padding=3), torch.nn.ReLU(), (2, 3, 37, 35)),
    ],
    ids=["deep-3x3", "groups-of-8-strided-dilated", "many-rows-no-bias", "5x5-stride2-70-out", "7x7-rgb-stem"],
)
def test_conv2d_reading_the_input_through_tap_pointers(conv, act, shape, threads):
    """Convolutions with 8 or more input channels per group, which AVX-512
    machines run by indirect GEMM (the input read in place under each tap,
    bias and clamp applied in the micro-kernel's registers); other machines
    run the same cases through packed im2col rows."""
    before = pyexec.get_num_threads()
    pyexec.set_num_threads(threads)
    try:
        torch.manual_seed(2)
        module = torch.nn.Sequential(torch.nn.Conv2d(**conv), act)
        check(module, (randn(*shape),), (CONV2D,), vs_executorch=LAYER, vs_eager=LAYER)
    finally:
        pyexec.set_num_threads(before)


@pytest.mark.parametrize(
    "channels, mult, kernel, stride, padding, dilation",
    [
        (24, 1, 3, 1, 1, 1),
        (8, 3, 3, 2, 1, 1),
        (5, 2, (5, 3), (1, 2), (2, 0), (1, 2)),
        (40, 1, 5, 2, 2, 1),
        (72, 1, 7, 1, 3, 1),
        (16, 1, 3, 1, 2, 2),
        # one input channel: runs as a plain convolution through the GEMM
        (1, 24, 3, 1, 1, 1),
        (1, 40, (8, 1), (4, 1), 0, 1),
        (1, 6, 2, 1, 0, 1),
    ],
    ids=["3x3", "multiplier3-stride2", "multiplier2-odd", "5x5-stride2", "7x7", "3x3-dilated",
         "one-channel-3x3", "one-channel-strided-column", "one-channel-2x2"],
)
def test_depthwise_conv2d(channels, mult, kernel, stride, padding, dilation):
    torch.manual_seed(2)
    module = torch.nn.Sequential(
        torch.nn.Conv2d(channels, channels * mult, kernel, stride, padding, dilation, groups=channels),
        torch.nn.ReLU(),
    )
    check(module, (randn(2, channels, 11, 12),), (DEPTHWISE,), vs_executorch=LAYER, vs_eager=LAYER)


@pytest.mark.parametrize(
    "channels, kernel, stride, side",
    [(576, 5, 1, 7), (20, 5, 1, 7), (240, 5, 1, 14), (36, 3, 2, 5), (50, 7, 1, 6)],
    ids=["5x5-7x7-576", "5x5-7x7-partial-block", "5x5-14x14", "3x3-stride2-5x5", "7x7-over-6x6"],
)
def test_depthwise_conv2d_on_small_maps(channels, kernel, stride, side):
    """mobilenet_v3's 5x5 layers over 7x7 and 14x14 maps: most output
    columns have taps in the padding, and the engine reads the map from a
    copy with zero columns on both sides. The same bits at one thread and
    at three, ExecuTorch's and eager's results within float rounding."""
    torch.manual_seed(3)
    module = torch.nn.Sequential(
        torch.nn.Conv2d(channels, channels, kernel, stride, kernel // 2, groups=channels), torch.nn.Hardswish()
    )
    x = randn(1, channels, side, side)
    pte = check(module, (x,), (DEPTHWISE,), vs_executorch=LAYER, vs_eager=LAYER)
    outs = []
    before = pyexec.get_num_threads()
    try:
        for threads in (1, 3):
            pyexec.set_num_threads(threads)
            outs.append(torch.as_tensor(pyexec.load(pte).load_method("forward").execute([x])[0]))
    finally:
        pyexec.set_num_threads(before)
    assert torch.equal(outs[0], outs[1])


@pytest.mark.parametrize(
    "conv, shape",
    [
        (
            dict(in_channels=4, out_channels=6, kernel_size=3, stride=2, padding=1, output_padding=1, groups=2),
            (1, 4, 5, 6),
        ),
        (dict(in_channels=16, out_channels=8, kernel_size=4, stride=2, padding=1), (2, 16, 7, 7)),
        (
            dict(
                in_channels=6,
                out_channels=9,
                kernel_size=(3, 2),
                stride=(3, 2),
                padding=(0, 1),
                output_padding=(2, 1),
                dilation=1,
                groups=3,
                bias=False,
            ),
            (1, 6, 4, 5),
        ),
        (dict(in_channels=8, out_channels=8, kernel_size=3, stride=1, padding=2, dilation=2), (1, 8, 6, 6)),
    ],
    ids=["output-padding-groups", "4x4-stride2", "asymmetric-groups-nobias", "dilated"],
)
def test_conv_transpose2d(conv, shape):
    torch.manual_seed(3)
    check(torch.nn.ConvTranspose2d(**conv), (randn(*shape),), (CONV_T,), vs_executorch=LAYER, vs_eager=LAYER)


class DynamicBatchConv(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Conv2d(3, 8, 3, padding=1)
        self.b = torch.nn.Conv2d(8, 8, 3, stride=2, groups=8)

    def forward(self, x):
        return torch.relu(self.b(torch.relu(self.a(x))))


def test_conv_with_dynamic_batch_runs_each_batch_below_the_bound():
    torch.manual_seed(4)
    batch = torch.export.Dim("batch", min=1, max=4)
    check(
        DynamicBatchConv(),
        (randn(4, 3, 9, 9),),
        (CONV2D, DEPTHWISE),
        vs_executorch=LAYER,
        vs_eager=LAYER,
        dynamic_shapes={"x": {0: batch}},
        run_inputs=[(randn(1, 3, 9, 9, seed=1),), (randn(3, 3, 9, 9, seed=2),), (randn(4, 3, 9, 9, seed=3),)],
    )


# ======================================================================== #
# pooling, resize, PReLU                                                    #
# ======================================================================== #


@pytest.mark.parametrize(
    "pool, shape",
    [
        (torch.nn.MaxPool2d(3, 2, padding=1), (2, 5, 10, 9)),
        (torch.nn.MaxPool2d(3, 2, padding=1, dilation=2), (1, 3, 11, 11)),
        (torch.nn.MaxPool2d((2, 3), (2, 1), ceil_mode=True), (1, 4, 9, 8)),
        (torch.nn.MaxPool2d(3, 2, padding=1, ceil_mode=True), (1, 3, 10, 10)),
        (torch.nn.MaxPool2d(3, 2, padding=1), (2, 37, 13, 11)),
        (torch.nn.MaxPool2d(2, 2), (1, 64, 8, 6)),
    ],
    ids=["3x3-pad", "dilated-pad", "ceil", "ceil-pad", "37-channels", "64-channels"],
)
def test_max_pooling2d(pool, shape):
    check(pool, (randn(*shape),), (MAX_POOL,), vs_executorch=EXACT, vs_eager=EXACT)


class MaxPoolClamped(torch.nn.Module):
    """A max pool whose output the partitioner clamps (the hardtanh goes into
    the node's output bounds)."""

    def forward(self, x):
        return torch.nn.functional.hardtanh(torch.nn.functional.max_pool2d(x, 3, 2, padding=1), -0.5, 1.5)


@pytest.mark.parametrize("channels", [5, 24, 37])
def test_max_pooling2d_propagates_nan_and_clamps_like_torch(channels):
    """NaNs, infinities and values beyond the clamp in every lane of the
    vector loops (16 and 8 channels at a time) and the tail: a window
    holding a NaN gives NaN, as torch's max pooling, and the output bounds
    clamp the rest."""
    x = 3 * randn(1, channels, 9, 10, seed=4)
    x[0, ::3, 1, 2] = float("nan")
    x[0, 1::4, 4, 4] = float("inf")
    x[0, 2::5, 6, 7] = -float("inf")
    pte = export_xnnpack(MaxPoolClamped().eval(), (randn(1, channels, 9, 10),))
    assert MAX_POOL in node_types(pte)
    (got,) = pyexec.load(pte).load_method("forward").execute([x.clone()])
    want = MaxPoolClamped()(x)
    assert torch.equal(torch.isnan(got), torch.isnan(want))
    assert_close(got, want, rtol=0.0, atol=0.0)


class MaxOverDim(torch.nn.Module):
    def __init__(self, dim: int) -> None:
        super().__init__()
        self.dim = dim

    def forward(self, x):
        return torch.max(x, self.dim, keepdim=True)[0]


@pytest.mark.parametrize("dim", [2, 3])
def test_max_over_one_spatial_dim_is_a_full_window_max_pooling(dim):
    # XNNPACK's ArgMaxPooling2d is for max.dim with its indices; the 1.5.1
    # partitioner only takes max.dim when the indices are unused, and writes
    # it (values only) as a full-height or full-width MaxPooling2d.
    check(MaxOverDim(dim), (randn(2, 3, 5, 6),), (MAX_POOL,), vs_executorch=EXACT, vs_eager=EXACT)


# ---- ArgMaxPooling2d ------------------------------------------------------
# The 1.5.1 partitioner never emits it (MaxDimConfig refuses a max.dim whose
# indices are used), so these programs carry a payload written here with
# executorch's own XNNGraph serializer, lowered through the XnnpackBackend id
# (its preprocess patched for the export): ExecuTorch's runtime runs it with
# the real XNNPACK, the reference for the index order and the padding.


class WindowArgMax(torch.nn.Module):
    """Max and argmax over (ph, pw) windows taken with stride (ph, pw) from an
    NHWC input, padded with -inf; the index of a window element is
    kj * ph + ki (down each column first), XNNPACK's order. The whole graph
    is delegated, so the delegate's input is x itself."""

    def __init__(self, window: tuple[int, int], padding: tuple[int, int, int, int]) -> None:
        super().__init__()
        self.window, self.padding = window, padding

    def forward(self, x):
        (ph, pw), (top, right, bottom, left) = self.window, self.padding
        x = torch.nn.functional.pad(x, (0, 0, left, right, top, bottom), value=float("-inf"))
        n, h, w, c = x.shape
        windows = x.reshape(n, h // ph, ph, w // pw, pw, c).permute(0, 1, 3, 5, 4, 2)
        values, indices = torch.max(windows.reshape(n, h // ph, w // pw, c, ph * pw), -1)
        return values, indices


def _argmax_payload(program, window, padding) -> bytes:
    """One ArgMaxPooling2d node from the delegate's input (NHWC, external 0)
    to its two outputs (values fp32, indices int32; externals 1 and 2 in the
    order the delegate returns them)."""
    from executorch.backends.xnnpack.serialization import xnnpack_graph_schema as xs
    from executorch.backends.xnnpack.serialization.xnnpack_graph_serialize import serialize_xnnpack_binary

    x = next(n for n in program.graph.nodes if n.op == "placeholder")
    outs = next(n for n in program.graph.nodes if n.op == "output").args[0]
    fp32, int32 = xs.XNNDatatype.xnn_datatype_fp32, xs.XNNDatatype(12)

    def value(vid, datatype, dims, flags):
        return xs.XValue(xs.XNNTensorValue(datatype, len(dims), list(dims), 0, vid, flags, vid))

    values, ids = [value(0, fp32, x.meta["val"].shape, 1)], {}
    for k, out in enumerate(outs):
        which = out.args[1]  # getitem 0: values, 1: indices
        ids[which] = 1 + k
        values.append(value(1 + k, fp32 if which == 0 else int32, out.meta["val"].shape, 2))
    top, right, bottom, left = padding
    node = xs.XNode(xs.XNNArgMaxPooling2d(top, right, bottom, left, *window, 0, ids[0], ids[1], 0), 0)
    graph = xs.XNNGraph("0", [node], values, 3, [0], [1, 2], [xs.ConstantDataOffset(0, 0)])
    return serialize_xnnpack_binary(graph, bytearray())


def _lower_argmax(module: WindowArgMax, x: torch.Tensor) -> bytes:
    import warnings
    from unittest import mock

    from executorch.backends.xnnpack.xnnpack_preprocess import XnnpackBackend
    from executorch.exir import to_edge_transform_and_lower
    from executorch.exir.backend.backend_details import PreprocessResult
    from executorch.exir.backend.partitioner import DelegationSpec, Partitioner, PartitionResult

    class Everything(Partitioner):
        def __init__(self) -> None:
            super().__init__()
            self.delegation = DelegationSpec("XnnpackBackend", [])

        def partition(self, ep):
            for n in ep.graph_module.graph.nodes:
                if n.op == "call_function":
                    n.meta["delegation_tag"] = "all"
            return PartitionResult(tagged_exported_program=ep, partition_tags={"all": self.delegation})

    def preprocess(program, compile_specs):
        return PreprocessResult(_argmax_payload(program, module.window, module.padding))

    with warnings.catch_warnings(), mock.patch.object(XnnpackBackend, "preprocess", staticmethod(preprocess)):
        warnings.simplefilter("ignore")
        ep = torch.export.export(module, (x,), strict=False)
        return bytes(to_edge_transform_and_lower(ep, partitioner=[Everything()]).to_executorch().buffer)


@pytest.mark.parametrize(
    "window, padding, shape",
    [
        ((5, 1), (0, 0, 0, 0), (2, 5, 4, 3)),
        ((1, 4), (0, 0, 0, 0), (2, 5, 4, 3)),
        ((2, 3), (0, 0, 0, 0), (1, 4, 6, 5)),
        ((2, 2), (1, 0, 1, 1), (1, 4, 5, 3)),
    ],
    ids=["full-height", "full-width", "2x3-windows", "padded"],
)
def test_argmax_pooling2d(window, padding, shape):
    module = WindowArgMax(window, padding)
    x = randn(*shape)
    pte = _lower_argmax(module, x)
    assert 21 in node_types(pte)
    got = pyexec.load(pte).load_method("forward").execute([x.clone()])
    reference = run_with_executorch(pte, [x])
    for k in range(2):  # values and int64 indices: exact
        assert_close(got[k], reference[k], **EXACT, what=f"output {k} vs ExecuTorch")
    expected = module(x)
    assert_close(got[0], expected[0], **EXACT, what="values vs eager")
    if not any(padding):
        assert_close(got[1], expected[1], **EXACT, what="indices vs eager")
    else:
        # XNNPACK reads the nearest input pixel for a tap in the padding: it
        # ties with that pixel and, coming first, may give its own index. The
        # index still names a window element holding the maximum.
        ph, pw = window
        n, h, w, c = x.shape
        padded = torch.nn.functional.pad(x, (0, 0, padding[3], padding[1], padding[0], padding[2]), mode="replicate")
        windows = padded.reshape(n, -1, ph, padded.shape[2] // pw, pw, c).permute(0, 1, 3, 5, 4, 2)
        windows = windows.reshape(*got[0].shape, ph * pw)
        picked = torch.gather(windows, -1, torch.as_tensor(got[1]).unsqueeze(-1)).squeeze(-1)
        assert_close(picked, expected[0], **EXACT, what="the value at each index")


@pytest.mark.parametrize(
    "pool, shape",
    [
        (torch.nn.AvgPool2d(3, 2, padding=1, count_include_pad=False), (2, 6, 9, 10)),
        (torch.nn.AvgPool2d((2, 4), (2, 3)), (1, 5, 8, 11)),
        (torch.nn.AvgPool2d(5, 1, padding=2, count_include_pad=False), (1, 3, 6, 7)),
        # Inception's pools: 3x3, stride 1, over channel counts past every vector step
        (torch.nn.AvgPool2d(3, 1, padding=1, count_include_pad=False), (1, 1027, 9, 8)),
        (torch.nn.AvgPool2d(3, 1, padding=1, count_include_pad=False), (2, 21, 5, 6)),
        # 16 taps: two passes of XNNPACK's nine
        (torch.nn.AvgPool2d(4, 2, padding=1, count_include_pad=False), (1, 35, 9, 9)),
    ],
    ids=["3x3-pad-excluded", "no-pad", "5x5-pad-excluded", "3x3-1027-channels", "3x3-21-channels", "4x4-two-passes"],
)
def test_avg_pooling2d_leaves_padding_out_of_the_divisor(pool, shape):
    """Sums XNNPACK's way (its taps column by column, in passes of nine
    added as its kernel's tree), so the bits equal ExecuTorch's."""
    check(pool, (randn(*shape),), (AVG_POOL,), vs_executorch=EXACT, vs_eager=LAYER)


class Mean23(torch.nn.Module):
    def forward(self, x):
        return x.mean((2, 3), keepdim=True) * 2.0


@pytest.mark.parametrize("shape", [(3, 7, 9, 11), (2, 150, 5, 6)], ids=["7-channels", "150-channels"])
@pytest.mark.parametrize("module", [torch.nn.AdaptiveAvgPool2d(1), Mean23()], ids=["adaptive", "mean"])
def test_global_avg_pooling2d(module, shape):
    """150 channels: blocks of 64 over the pool, 16-wide sums and a tail."""
    check(module, (randn(*shape),), (GLOBAL_AVG,), vs_executorch=LAYER, vs_eager=LAYER)


class Resize(torch.nn.Module):
    def __init__(self, align_corners: bool, **how) -> None:
        super().__init__()
        self.align_corners, self.how = align_corners, how

    def forward(self, x):
        return torch.nn.functional.interpolate(x, mode="bilinear", align_corners=self.align_corners, **self.how)


@pytest.mark.parametrize("align_corners", [True, False], ids=["align-corners", "half-pixel"])
@pytest.mark.parametrize(
    "how",
    [dict(size=(13, 7)), dict(scale_factor=2), dict(size=(3, 2)), dict(size=(1, 1))],
    ids=["up", "x2", "down", "to-1x1"],
)
def test_resize_bilinear2d(align_corners, how):
    # The same source coordinates as XNNPACK (dst*scale + offset, clamped to
    # the input) and its lerp order: exact against ExecuTorch. Eager computes
    # (dst + 0.5)*scale - 0.5: a few ulps apart.
    check(Resize(align_corners, **how), (randn(2, 3, 5, 6),), (RESIZE,), vs_executorch=EXACT, vs_eager=LAYER)


def test_resize_bilinear2d_with_a_fractional_scale_factor_follows_xnnpack():
    # Eager interpolates with scale 1/2.5 when given scale_factor=2.5;
    # XNNPACK (and so ExecuTorch's delegate) always uses in/out = 5/12. pyexec
    # runs the delegate's program: it must agree with ExecuTorch.
    check(Resize(False, scale_factor=2.5), (randn(1, 3, 5, 6),), (RESIZE,), vs_executorch=EXACT, vs_eager=None)


@pytest.mark.parametrize("slopes", [1, 6], ids=["one-slope", "per-channel"])
def test_prelu(slopes):
    torch.manual_seed(5)
    module = torch.nn.PReLU(slopes)
    with torch.no_grad():
        module.weight.uniform_(-0.5, 0.5)
    check(module, (randn(2, 6, 5, 4),), (PRELU,), vs_executorch=EXACT, vs_eager=EXACT)


# ======================================================================== #
# architectures (random weights; torchvision's blocks rebuilt by hand)      #
# ======================================================================== #


class BasicBlock(torch.nn.Module):
    """ResNet's basic block: two 3x3 convolutions, batch norms folded into
    them by the exporter, a strided 1x1 projection when the shape changes."""

    def __init__(self, cin: int, cout: int, stride: int) -> None:
        super().__init__()
        self.c1 = torch.nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.b1 = torch.nn.BatchNorm2d(cout)
        self.c2 = torch.nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.b2 = torch.nn.BatchNorm2d(cout)
        self.down = None
        if stride != 1 or cin != cout:
            self.down = torch.nn.Sequential(
                torch.nn.Conv2d(cin, cout, 1, stride, bias=False), torch.nn.BatchNorm2d(cout)
            )

    def forward(self, x):
        y = torch.relu(self.b1(self.c1(x)))
        y = self.b2(self.c2(y))
        return torch.relu(y + (x if self.down is None else self.down(x)))


class ResNetStack(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 7, 2, 3, bias=False),
            torch.nn.BatchNorm2d(16),
            torch.nn.ReLU(),
            torch.nn.MaxPool2d(3, 2, 1),
        )
        self.blocks = torch.nn.Sequential(
            BasicBlock(16, 16, 1), BasicBlock(16, 32, 2), BasicBlock(32, 32, 1), BasicBlock(32, 64, 2)
        )
        self.fc = torch.nn.Linear(64, 10)

    def forward(self, x):
        y = self.blocks(self.stem(x))
        return self.fc(torch.flatten(torch.nn.functional.adaptive_avg_pool2d(y, 1), 1))


class InvertedResidual(torch.nn.Module):
    """MobileNetV2's block: 1x1 expansion, 3x3 depthwise, 1x1 linear
    projection, a residual when the shape is kept."""

    def __init__(self, cin: int, cout: int, stride: int, expand: int, act: type[torch.nn.Module]) -> None:
        super().__init__()
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        self.body = torch.nn.Sequential(
            torch.nn.Conv2d(cin, hidden, 1, bias=False),
            torch.nn.BatchNorm2d(hidden),
            act(),
            torch.nn.Conv2d(hidden, hidden, 3, stride, 1, groups=hidden, bias=False),
            torch.nn.BatchNorm2d(hidden),
            act(),
            torch.nn.Conv2d(hidden, cout, 1, bias=False),
            torch.nn.BatchNorm2d(cout),
        )

    def forward(self, x):
        y = self.body(x)
        return x + y if self.use_res else y


class MobileNetV2Stack(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, 2, 1, bias=False), torch.nn.BatchNorm2d(16), torch.nn.ReLU6()
        )
        self.blocks = torch.nn.Sequential(
            InvertedResidual(16, 16, 1, 1, torch.nn.ReLU6),
            InvertedResidual(16, 24, 2, 6, torch.nn.ReLU6),
            InvertedResidual(24, 24, 1, 6, torch.nn.ReLU6),
            InvertedResidual(24, 32, 2, 6, torch.nn.Hardswish),
            InvertedResidual(32, 32, 1, 6, torch.nn.Hardswish),
        )
        self.head = torch.nn.Sequential(torch.nn.Conv2d(32, 64, 1), torch.nn.Hardswish())

    def forward(self, x):
        return self.head(self.blocks(self.stem(x))).mean((2, 3), keepdim=True)


class SqueezeExcite(torch.nn.Module):
    def __init__(self, channels: int, squeezed: int) -> None:
        super().__init__()
        self.fc1 = torch.nn.Conv2d(channels, squeezed, 1)
        self.fc2 = torch.nn.Conv2d(squeezed, channels, 1)

    def forward(self, x):
        s = x.mean((2, 3), keepdim=True)
        return x * torch.sigmoid(self.fc2(torch.nn.functional.silu(self.fc1(s))))


class MBConv(torch.nn.Module):
    """EfficientNet's block: expansion, depthwise, squeeze-excite (global
    average pool, two FCs as 1x1 convolutions, sigmoid, multiply), projection."""

    def __init__(self, cin: int, cout: int, kernel: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        self.use_res = stride == 1 and cin == cout
        self.expand = torch.nn.Sequential(
            torch.nn.Conv2d(cin, hidden, 1, bias=False), torch.nn.BatchNorm2d(hidden), torch.nn.SiLU()
        )
        self.dw = torch.nn.Sequential(
            torch.nn.Conv2d(hidden, hidden, kernel, stride, kernel // 2, groups=hidden, bias=False),
            torch.nn.BatchNorm2d(hidden),
            torch.nn.SiLU(),
        )
        self.se = SqueezeExcite(hidden, max(1, cin // 4))
        self.project = torch.nn.Sequential(torch.nn.Conv2d(hidden, cout, 1, bias=False), torch.nn.BatchNorm2d(cout))

    def forward(self, x):
        y = self.project(self.se(self.dw(self.expand(x))))
        return x + y if self.use_res else y


class EfficientNetStack(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, 2, 1, bias=False), torch.nn.BatchNorm2d(16), torch.nn.SiLU()
        )
        self.blocks = torch.nn.Sequential(
            MBConv(16, 16, 3, 1, 1), MBConv(16, 24, 3, 2, 4), MBConv(24, 24, 5, 1, 4), MBConv(24, 40, 5, 2, 4)
        )
        self.fc = torch.nn.Linear(40, 10)

    def forward(self, x):
        return self.fc(torch.flatten(self.blocks(self.stem(x)).mean((2, 3), keepdim=True), 1))


def randomized(module: torch.nn.Module) -> torch.nn.Module:
    """Random batch-norm statistics, so that the folded weights are not the
    identity."""
    g = torch.Generator().manual_seed(6)
    for m in module.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.copy_(torch.randn(m.num_features, generator=g) * 0.1)
            m.running_var.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.weight.data.copy_(torch.rand(m.num_features, generator=g) + 0.5)
            m.bias.data.copy_(torch.randn(m.num_features, generator=g) * 0.1)
    return module.eval()


@pytest.mark.parametrize(
    "make, nodes",
    [
        (ResNetStack, (CONV2D, MAX_POOL, GLOBAL_AVG)),
        (MobileNetV2Stack, (CONV2D, DEPTHWISE, GLOBAL_AVG)),
        (EfficientNetStack, (CONV2D, DEPTHWISE, GLOBAL_AVG)),
    ],
    ids=["resnet", "mobilenetv2", "efficientnet"],
)
def test_architecture(make, nodes):
    torch.manual_seed(7)
    check(randomized(make()), (randn(2, 3, 64, 64),), nodes, vs_executorch=STACK, vs_eager=STACK)


# ======================================================================== #
# hostile payloads                                                          #
# ======================================================================== #

from support import xnnpack as _xnn  # noqa: E402


def _node_field(pte: bytes, types: tuple[int, ...], slot: int) -> int:
    """Byte position in `pte` of field `slot` of the first node of one of
    `types` (_XNNNodeConv: 4 paddings, kernel, stride, dilation, group counts,
    adjustment, ids, flags; _XNNPooling2D: 4 paddings, size, stride,
    dilation, ids, flags; XNNStaticResizeBilinear2D: new_height, new_width,
    ids, flags)."""
    for p in _xnn.payloads(pte):
        for node in p.graph(pte).tables(1):
            if node.scalar(0, "B") in types:
                body = node.table(1)
                pos = body.field(slot)
                assert pos is not None, f"slot {slot} is absent (its default)"
                return pos
    raise AssertionError(f"no node of type {types}")


def _conv_field(pte: bytes, slot: int) -> int:
    return _node_field(pte, (CONV2D, DEPTHWISE, CONV_T), slot)


def _with_u32(pte: bytes, pos: int, value: int) -> bytes:
    data = bytearray(pte)
    data[pos : pos + 4] = value.to_bytes(4, "little")
    return bytes(data)


@pytest.mark.parametrize(
    "slot, value, message",
    [
        (6, 0, "stride .* must be positive"),  # subsampling_height
        (8, 0, "dilation .* must be positive"),  # dilation_height
        (12, 3, "filter must have dims"),  # groups: 3 does not divide the filter
        (10, 5, "filter must have dims"),  # group_input_channels disagrees with the filter
        (4, 1 << 30, "exceeds"),  # kernel_height
        (4, 40, "filter must have dims"),  # kernel_height disagrees with the filter
    ],
    ids=["zero-stride", "zero-dilation", "groups", "channels", "huge-kernel", "kernel"],
)
def test_a_hostile_conv_parameter_fails_at_load_naming_it(slot, value, message):
    torch.manual_seed(8)
    module = torch.nn.Conv2d(4, 6, 3, stride=2, padding=1, dilation=1, groups=2).eval()
    pte = export_xnnpack(module, (randn(1, 4, 9, 9),))
    bad = _with_u32(pte, _conv_field(pte, slot), value)
    with pytest.raises(pyexec.Error, match=message):
        pyexec.load(bad).load_method("forward").execute([randn(1, 4, 9, 9)])


def test_a_padding_that_leaves_no_output_fails_cleanly():
    torch.manual_seed(9)
    module = torch.nn.Conv2d(4, 6, 5).eval()  # 5x5 kernel on a 5x5 input, no padding: 1x1 output
    pte = export_xnnpack(module, (randn(1, 4, 5, 5),))
    # dilation 2 makes the kernel 9 wide: no output for a 5-wide input
    bad = _with_u32(pte, _conv_field(pte, 9), 2)
    with pytest.raises(pyexec.Error, match="gives no output|does not fit"):
        pyexec.load(bad).load_method("forward").execute([randn(1, 4, 5, 5)])


@pytest.mark.parametrize(
    "slot, value, message",
    [(6, 0, "must be positive"), (4, 50, "does not fit"), (5, 1 << 30, "exceeds")],
    ids=["zero-stride", "window-larger-than-input", "huge-window"],
)
def test_a_hostile_pooling_parameter_fails_cleanly(slot, value, message):
    module = torch.nn.MaxPool2d(3, 2).eval()
    pte = export_xnnpack(module, (randn(1, 3, 9, 9),))
    bad = _with_u32(pte, _node_field(pte, (MAX_POOL,), slot), value)
    with pytest.raises(pyexec.Error, match=message):
        pyexec.load(bad).load_method("forward").execute([randn(1, 3, 9, 9)])


def test_a_resize_beyond_its_output_bound_fails_cleanly():
    pte = export_xnnpack(Resize(False, size=(7, 8)), (randn(1, 2, 4, 4),))
    bad = _with_u32(pte, _node_field(pte, (RESIZE,), 0), 70)  # new_height 7 -> 70
    with pytest.raises(pyexec.Error, match="above its bound|exceed|bound"):
        pyexec.load(bad).load_method("forward").execute([randn(1, 2, 4, 4)])
