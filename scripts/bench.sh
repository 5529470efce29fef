#!/usr/bin/env bash
# The speed benchmarks (README, "Benchmarks"): installs what they need into
# .venv, builds the library and prints each table with its ratios against
# ExecuTorch 1.5.1 (and ONNX Runtime, torch eager) measured in the same run.
#     bash scripts/bench.sh [--quick]
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q -r requirements-test.txt -r requirements-bench.txt
make -C native -j2
python -m pip install -q --no-deps --force-reinstall .

python benchmarks/bench_io.py "$@"
python benchmarks/bench_zoo.py "$@"
python benchmarks/bench_load.py "$@"
python benchmarks/bench_xnnpack.py "$@"
python benchmarks/bench_quant.py "$@"
python benchmarks/bench_llm.py "$@"
python benchmarks/bench_ray.py "$@"
