"""Exports the seed corpus of the libFuzzer harness (native/fuzz/): the
reference models of tests/support/models.py (planned and unplanned IO), a few of
the model zoo, and XNNPACK-lowered programs (a delegate payload to mutate:
an MLP with softmax and concatenation, in float32, fp16 and bf16, a partly
delegated convolution network, quantized transposed / grouped / dynamic
convolutions and quint8 values with a requantizing Convert, a delegate call
taking SymInts and one taking channels-last tensors), as real ExecuTorch programs. They go to native/build/fuzz/seeds
(under build/, never committed); the committed fixtures in native/tests/data
are seeds too. Run from anywhere, in the test venv (needs torch and
executorch):

    python scripts/make_fuzz_seeds.py [--out DIR] [--max-bytes N]

Programs with their weights in a data file are seeds as NAME.pxpd, the pair
in one input as the harness splits it: "PXPD", u32 little-endian size of the
.pte, the .pte, then the .ptd (native/fuzz/fuzz_program.c). Those are the
data-file fixture (native/tests/data/add_weight), MLPs exported with
external_constants=True and lowered to XNNPACK with their weights in the
.ptd, and ExecuTorch's llama example as examples/llm/export_llama.py exports
it (the portable program as a .pte, the XNNPACK one with a .ptd as a pair;
the same cached exports tests/integration/test_llm_generate.py runs). One
pair is written on its own with

    python scripts/make_fuzz_seeds.py --pack PTE PTD OUT.pxpd

(native/fuzz/seeds/add_weight.pxpd is the fixture's pair, made so).
"""

from __future__ import annotations

import argparse
import struct
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))

ZOO_SEEDS = ("inverted_residual", "lstm_cell", "transformer_layer", "dynamic_seq", "int_preprocess", "upsampler")


def xnnpack_models() -> dict[str, tuple[object, tuple[object, ...]]]:
    """Small models for XnnpackPartitioner (see tests/delegates)."""
    import torch
    import torch.nn.functional as F

    class Mlp(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = torch.nn.Linear(8, 16)
            self.b = torch.nn.Linear(16, 4)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = torch.relu(self.a(x))
            return torch.cat([torch.softmax(self.b(h), dim=-1), h[:, :4].sigmoid()], dim=1)

    class ConvNet(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
            self.fc = torch.nn.Linear(4, 2)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            h = F.max_pool2d(torch.relu(self.conv(x)), 2)
            h = torch.cumsum(h.mean(dim=(2, 3)), dim=1)  # cumsum: a portable kernel between delegates
            return self.fc(h)

    torch.manual_seed(0)
    return {
        "xnnpack_mlp": (Mlp().eval(), (torch.randn(2, 8),)),
        "xnnpack_convnet": (ConvNet().eval(), (torch.randn(1, 3, 8, 8),)),
        # fp16 / bf16 payloads: half values, half constants kept in their type
        "xnnpack_mlp_fp16": (Mlp().eval().half(), (torch.randn(2, 8).half(),)),
        "xnnpack_mlp_bf16": (Mlp().eval().to(torch.bfloat16), (torch.randn(2, 8).to(torch.bfloat16),)),
    }


def quantized_xnnpack_programs() -> dict[str, bytes]:
    """Quantized XNNPACK payloads (tests/delegates/test_xnnpack_quant.py):
    transposed, grouped and 1x1 convolutions, static per channel and
    dynamic (qd8), and a chain of quint8 values with a requantizing Convert
    (a real payload rewritten so)."""
    from support.quant import deconv_net, export_quantized, qdq_chain

    m, x, calib = deconv_net()
    return {
        "xnnpack_qs8_deconv": export_quantized(
            m, x, {"scheme": "pt2e", "per_channel": True}, calibration=calib, lower=True
        ),
        "xnnpack_qd8_deconv": export_quantized(
            m, x, {"scheme": "pt2e", "per_channel": True, "dynamic": True}, calibration=calib, lower=True
        ),
        "xnnpack_quint8_requant": qdq_chain(quint8=True, requant=True)[0],
    }


def xnnpack_argument_programs() -> dict[str, bytes]:
    """Delegate calls with more than plain row-major tensors (see
    tests/delegates/test_xnnpack_args.py): a linear layer lowered with
    to_edge + to_backend, whose call takes the SymInts of two dynamic batch
    dims before its tensors, and a convolution reading and writing
    channels-last tensors."""
    import torch
    from delegates.test_xnnpack_args import export_to_backend
    from support.xnnpack import export_xnnpack
    from torch.export import Dim

    torch.manual_seed(0)
    linear = torch.nn.Sequential(torch.nn.Linear(8, 4), torch.nn.ReLU()).eval()
    shapes = ({0: Dim("b0", min=1, max=3), 1: Dim("b1", min=1, max=3)},)
    conv = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3, padding=1), torch.nn.ReLU()).eval()
    x = torch.randn(1, 3, 6, 6).to(memory_format=torch.channels_last)
    return {
        "xnnpack_sym_linear": export_to_backend(linear, (torch.randn(2, 2, 8),), shapes),
        "xnnpack_channels_last": export_xnnpack(conv, (x,)),
    }


def pack(pte: bytes, ptd: bytes) -> bytes:
    """A program and its data file as one input of the fuzz harness."""
    return b"PXPD" + struct.pack("<I", len(pte)) + pte + ptd


def data_file_pairs() -> dict[str, tuple[bytes, bytes]]:
    """(.pte, .ptd) pairs: the fixture, an MLP with external constants and one
    lowered to XNNPACK with its weights in the data file, and the llama
    example's XNNPACK program with its .ptd."""
    import torch
    from support.external import export_external
    from support.llm import llama_example

    pairs: dict[str, tuple[bytes, bytes]] = {}
    fixture = ROOT / "native" / "tests" / "data" / "add_weight"
    if fixture.with_suffix(".ptd").is_file():
        pairs["add_weight"] = (fixture.with_suffix(".pte").read_bytes(), fixture.with_suffix(".ptd").read_bytes())

    class Mlp(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.l1, self.l2 = torch.nn.Linear(4, 8), torch.nn.Linear(8, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.l2(torch.relu(self.l1(x)))

    torch.manual_seed(0)
    mlp = Mlp().eval()
    for kind in ("portable", "xnnpack"):
        pairs[f"external_mlp_{kind}"] = export_external(mlp, (torch.randn(2, 4),), kind)
    pte, ptd = llama_example("xnnpack-ptd")
    assert ptd is not None
    pairs["llama_xnnpack_ptd"] = (pte, ptd)
    return pairs


def bundled_seeds() -> dict[str, bytes]:
    """Bundled programs (.bpte, ExecuTorch's BundledProgram: a program with
    test cases), the real one of tests/support/bundled.py and malformed
    variants of it: the program vector's length past the end of the file, the
    program moved off its alignment, a test tensor whose data is shorter than
    its shape, and a test value of an unknown type. Written as they are with
    `--bundled DIR` (native/fuzz/seeds holds them)."""
    import struct

    from support.bundled import make_bundle

    good = make_bundle()

    def field(b: bytes | bytearray, table: int, slot: int) -> int:
        vt = table - struct.unpack_from("<i", b, table)[0]
        return table + struct.unpack_from("<H", b, vt + 4 + 2 * slot)[0]

    def ref(b: bytes | bytearray, p: int) -> int:
        return p + struct.unpack_from("<I", b, p)[0]

    def item(b: bytes | bytearray, table: int, slot: int, i: int) -> int:
        v = ref(b, field(b, table, slot))
        return ref(b, v + 4 + 4 * i)

    root = struct.unpack_from("<I", good, 0)[0]
    out = {"bundled_two_methods.bpte": good}
    b = bytearray(good)
    struct.pack_into("<I", b, ref(b, field(b, root, 2)), len(b))  # BundledProgram.program: length past the file
    out["bundled_program_past_end.bpte"] = bytes(b)
    b = bytearray(good)
    p = field(b, root, 2)
    struct.pack_into("<I", b, p, struct.unpack_from("<I", b, p)[0] + 4)
    out["bundled_program_misaligned.bpte"] = bytes(b)
    case = item(good, item(good, root, 1, 0), 1, 0)  # encode, test case 0
    tensor = ref(good, field(good, item(good, case, 1, 0), 1))  # its expected output 0
    b = bytearray(good)
    data = ref(b, field(b, tensor, 2))
    struct.pack_into("<I", b, data, struct.unpack_from("<I", b, data)[0] - 1)
    out["bundled_data_short.bpte"] = bytes(b)
    b = bytearray(good)
    b[field(b, item(b, case, 0, 1), 0)] = 9  # input 1's value type
    out["bundled_value_type_unknown.bpte"] = bytes(b)
    return out
def llm_operator_programs() -> dict[str, bytes]:
    """Small programs on the newer llama operators (gated_delta_rule with its
    state in a buffer, custom_quantized_sdpa over an int8 cache,
    quantized_moe_ffn over packed experts), exported as
    tests/ops/test_ops_llm_newer.py exports them."""
    import importlib.util
    import warnings

    import torch

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import executorch.kernels.quantized  # noqa: F401
        from executorch.extension.llm.custom_ops import custom_ops  # noqa: F401
    spec = importlib.util.spec_from_file_location("llm_newer", ROOT / "tests" / "ops" / "test_ops_llm_newer.py")
    assert spec is not None and spec.loader is not None
    t = importlib.util.module_from_spec(spec)
    sys.modules["llm_newer"] = t  # (the export cache reads its classes' source)
    spec.loader.exec_module(t)
    from support.export import export_program

    moe, _, _ = t.moe_module(4, 2, 32, 32, 32, 4, "sigmoid", True, seed=0)
    return {
        "llm_gated_delta": t.export_gated_delta(1, 4, 2, 8, 8, True),
        "llm_quantized_sdpa": t.export_quantized_cached(16, 4, 2, 16),
        "llm_moe": export_program(moe, (torch.randn(1, 3, 32),), strict_ir=False),
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=ROOT / "native" / "build" / "fuzz" / "seeds")
    parser.add_argument("--max-bytes", type=int, default=256 * 1024, help="skip programs larger than this")
    parser.add_argument("--pack", nargs=3, type=Path, metavar=("PTE", "PTD", "OUT"), help="write one pair and stop")
    parser.add_argument("--bundled", type=Path, metavar="DIR", help="write only the bundled-program seeds, to DIR")
    args = parser.parse_args()
    if args.bundled:
        for name, data in bundled_seeds().items():
            (args.bundled / name).write_bytes(data)
            print(f"{args.bundled / name}: {len(data)} bytes")
        return
    if args.pack:
        pte, ptd, out = args.pack
        out.write_bytes(pack(pte.read_bytes(), ptd.read_bytes()))
        print(f"{out}: {out.stat().st_size} bytes")
        return

    from support.export import export_program
    from support.models import MODELS, export_spec
    from support.zoo import ZOO

    args.out.mkdir(parents=True, exist_ok=True)
    programs: dict[str, bytes] = {}
    for name, factory in MODELS.items():
        programs[name] = export_spec(factory())
        programs[f"{name}_unplanned"] = export_spec(factory(), alloc_graph_input=False, alloc_graph_output=False)
    for name in ZOO_SEEDS:
        z = ZOO[name]()
        programs[f"zoo_{name}"] = export_program(z.module, z.inputs, dynamic_shapes=z.dynamic_shapes)
    from support.xnnpack import export_xnnpack

    for name, (module, inputs) in xnnpack_models().items():
        options = {"enable_bf16": True} if name.endswith("_bf16") else None
        programs[name] = export_xnnpack(module, inputs, partitioner_options=options)
    programs.update(quantized_xnnpack_programs())
    programs.update(xnnpack_argument_programs())
    demo = ROOT / "pyexec" / "demo" / "decoder.pte"
    if demo.exists():
        programs["demo_decoder"] = demo.read_bytes()
    from support.llm import llama_example

    programs["llama_portable"] = llama_example("portable")[0]
    programs.update(llm_operator_programs())
    inputs = {f"{name}.pte": data for name, data in programs.items()}
    inputs.update({f"{name}.pxpd": pack(pte, ptd) for name, (pte, ptd) in data_file_pairs().items()})
    inputs.update(bundled_seeds())

    written = 0
    for name, data in sorted(inputs.items()):
        if len(data) > args.max_bytes:
            print(f"skip {name}: {len(data)} bytes")
            continue
        (args.out / name).write_bytes(data)
        written += 1
    print(f"{written} seed inputs in {args.out}")


if __name__ == "__main__":
    main()
