#!/usr/bin/env bash
# Builds the aarch64 Linux wheel on an x86-64 (or any) Linux host with the
# Debian cross toolchain (gcc-aarch64-linux-gnu, libc6-dev-arm64-cross):
#     bash scripts/build_wheel_aarch64.sh [OUT_DIR]   (default dist/aarch64)
#
# pip builds a py3-none-linux_aarch64 wheel from a clean copy of the checkout
# (files git tracks plus new, not ignored ones) with PYEXEC_CROSS set, so
# setup.py runs `make CROSS=aarch64-linux-gnu- dist`; auditwheel checks the
# library's symbol versions and retags it manylinux_2_17_aarch64 (with the
# manylinux2014 alias). `--plat auto`: auditwheel 6 accepts only the host's
# architecture by name, while auto takes the wheel's and its oldest policy.
# Prints the repaired wheel's path.
set -euo pipefail
cd "$(dirname "$0")/.."
out=$(realpath -m "${1:-dist/aarch64}")
python=${PYTHON:-python3}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir "$tmp/src"
git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done |
  tar --null -T - -cf - | tar -xf - -C "$tmp/src"

PYEXEC_CROSS=aarch64-linux-gnu- "$python" -m pip wheel -q --no-deps -w "$tmp/built" "$tmp/src" >&2
"$python" -m auditwheel repair --plat auto -w "$out" "$tmp"/built/pyexec-*-py3-none-linux_aarch64.whl >&2
ls "$out"/pyexec-*-py3-none-*manylinux_2_17_aarch64.whl
