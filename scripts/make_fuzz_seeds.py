"""Exports the seed corpus of the libFuzzer harness (native/fuzz/): the
reference models of tests/support/models.py (planned and unplanned IO) and a few of
the model zoo, as real ExecuTorch programs. They go to native/build/fuzz/seeds
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
