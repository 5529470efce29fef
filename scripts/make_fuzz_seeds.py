"""Exports the seed corpus of the libFuzzer harness (native/fuzz/): the
reference models of tests/support/models.py (planned and unplanned IO), a few of
the model zoo, and XNNPACK-lowered programs (a delegate payload to mutate:
an MLP with softmax and concatenation, and a partly delegated convolution
network), as real ExecuTorch programs. They go to native/build/fuzz/seeds
(under build/, never committed); the committed fixtures in native/tests/data
are seeds too. Run from anywhere, in the test venv (needs torch and
executorch):

    python scripts/make_fuzz_seeds.py [--out DIR] [--max-bytes N]
"""

from __future__ import annotations

import argparse
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
    }


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--out", type=Path, default=ROOT / "native" / "build" / "fuzz" / "seeds")
    parser.add_argument("--max-bytes", type=int, default=256 * 1024, help="skip programs larger than this")
    args = parser.parse_args()

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
        programs[name] = export_xnnpack(module, inputs)
    demo = ROOT / "pyexec" / "demo" / "decoder.pte"
    if demo.exists():
        programs["demo_decoder"] = demo.read_bytes()

    written = 0
    for name, data in sorted(programs.items()):
        if len(data) > args.max_bytes:
            print(f"skip {name}: {len(data)} bytes")
            continue
        (args.out / f"{name}.pte").write_bytes(data)
        written += 1
    print(f"{written} seed programs in {args.out}")


if __name__ == "__main__":
    main()
