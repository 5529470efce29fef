#!/usr/bin/env bash
# Installs everything the tests need into .venv, builds the library, and runs
# the C tests, the linters and the Python test suite. Run from anywhere:
#     bash scripts/test.sh
set -euo pipefail
cd "$(dirname "$0")/.."

python3 -m venv .venv
. .venv/bin/activate
python -m pip install -q --upgrade pip
python -m pip install -q -r requirements-test.txt

make -C native -j2
make -C native test
python -m pip install -q --no-deps --force-reinstall .

ruff check .
mypy
# pytest (not `python -m pytest`): the tests import the installed package.
pytest -q -p no:cacheprovider tests
