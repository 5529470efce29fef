#!/usr/bin/env bash
# Builds the wheel as shipped, from a clean copy of the checkout (the files
# git tracks plus new, not ignored ones: no build outputs):
#     bash scripts/build_wheel.sh [--cross PREFIX] [OUT_DIR]   (default dist)
#
# pip builds a py3-none-linux_<arch> wheel (setup.py runs `make dist`, with
# CROSS=PREFIX for a cross toolchain such as aarch64-linux-gnu-); auditwheel
# checks the library's symbol versions and retags it manylinux_2_17_<arch>
# (`--plat auto`: auditwheel 6 accepts only the host's architecture by name,
# while auto takes the wheel's and its oldest policy). The build backend's
# output is kept in OUT_DIR/build-<arch>.log. Prints the repaired wheel's
# path.
set -euo pipefail
cross=""
if [ "${1:-}" = "--cross" ]; then
  cross=$2
  shift 2
fi
out=$(realpath -m "${1:-dist}")  # before the cd: relative to the caller's directory
python=${PYTHON:-python3}
cd "$(dirname "$0")/.."
arch=${cross%%-*}
arch=${arch:-$(uname -m)}

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/src" "$out"
git ls-files -z --cached --others --exclude-standard |
  while IFS= read -r -d '' f; do [ -f "$f" ] && printf '%s\0' "$f"; done |
  tar --null -T - -cf - | tar -xf - -C "$tmp/src"

# -v: pip shows the backend's output (setuptools' warnings among it).
PYEXEC_CROSS=$cross "$python" -m pip wheel -v --no-deps -w "$tmp/built" "$tmp/src" >"$out/build-$arch.log" 2>&1 ||
  { cat "$out/build-$arch.log" >&2; exit 1; }
"$python" -m auditwheel repair --plat auto -w "$out" "$tmp"/built/pyexec-*-py3-none-linux_"$arch".whl >"$tmp/repair.log" 2>&1 ||
  { cat "$tmp/repair.log" >&2; exit 1; }
ls "$out"/pyexec-*-py3-none-*manylinux_2_17_"$arch".whl
