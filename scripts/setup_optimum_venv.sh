#!/usr/bin/env bash
# Builds .venv-optimum: a venv for optimum-executorch 1.1.0 (which pins
# transformers 5.0.0rc1) that shares torch, executorch and the rest of the main
# venv through a .pth file, so only optimum-executorch's own packages are
# installed into it.
#
#   scripts/setup_optimum_venv.sh [MAIN_VENV] [TARGET]
#
# MAIN_VENV defaults to $VIRTUAL_ENV, else .venv in the repository root; TARGET
# to .venv-optimum in the repository root. Run it again at any time: it only
# adds what is missing, and checks that torch is still the main venv's.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
MAIN="${1:-${VIRTUAL_ENV:-$ROOT/.venv}}"
TARGET="${2:-$ROOT/.venv-optimum}"
OPTIMUM_EXECUTORCH="optimum-executorch==1.1.0"

die() { echo "setup_optimum_venv: error: $*" >&2; exit 1; }
say() { echo "setup_optimum_venv: $*"; }

[ -x "$MAIN/bin/python" ] || die "no python in the main venv $MAIN (give its path as the first argument)"
MAIN_SITE="$("$MAIN/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
MAIN_TORCH="$("$MAIN/bin/python" -c 'import torch; print(torch.__version__)')" \
    || die "torch is not importable in the main venv $MAIN"
"$MAIN/bin/python" -c 'import executorch' || die "executorch is not importable in the main venv $MAIN"
say "main venv $MAIN (site-packages $MAIN_SITE, torch $MAIN_TORCH)"

# The same interpreter as the main venv, so that its compiled packages load.
BASE_PY="$("$MAIN/bin/python" -c 'import sys; print(sys._base_executable)')"
if [ -x "$TARGET/bin/python" ]; then
    say "venv $TARGET exists: reusing it"
else
    say "creating venv $TARGET with $BASE_PY"
    "$BASE_PY" -m venv "$TARGET"
fi
SITE="$("$TARGET/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
PTH="$SITE/pyexec-main-venv.pth"
if [ "$(cat "$PTH" 2>/dev/null || true)" != "$MAIN_SITE" ]; then
    echo "$MAIN_SITE" > "$PTH"
    say "wrote $PTH -> $MAIN_SITE"
else
    say "$PTH already points at $MAIN_SITE"
fi

# Packages installed here go into $SITE, ahead of the main venv's on sys.path;
# pip never uninstalls the main venv's copies (they are outside this venv).
# torch is pinned to the main venv's version so nothing replaces it.
if "$TARGET/bin/python" -c "import importlib.metadata as m; print(m.version('optimum-executorch'))" 2>/dev/null \
   | grep -qx '1.1.0'; then
    say "optimum-executorch 1.1.0 already installed"
else
    say "installing $OPTIMUM_EXECUTORCH (only what the main venv lacks)"
    "$TARGET/bin/python" -m pip install --disable-pip-version-check "$OPTIMUM_EXECUTORCH" "torch==$MAIN_TORCH"
fi

TORCH="$("$TARGET/bin/python" -c 'import torch; print(torch.__version__)')" || die "torch does not import in $TARGET"
[ "$TORCH" = "$MAIN_TORCH" ] || die "torch in $TARGET is $TORCH, the main venv has $MAIN_TORCH"
TORCH_FILE="$("$TARGET/bin/python" -c 'import torch; print(torch.__file__)')"
case "$TORCH_FILE" in
    "$MAIN_SITE"/*) ;;
    *) die "torch in $TARGET is loaded from $TORCH_FILE, not from the main venv" ;;
esac
"$TARGET/bin/python" - <<'PY' || die "optimum-executorch does not import in the venv"
import importlib.metadata as m
import executorch.extension.pybindings.portable_lib  # noqa: F401  (ExecuTorch's runtime)
import optimum.executorch  # noqa: F401
import transformers
for name in ("optimum-executorch", "optimum", "transformers", "torch", "executorch", "tokenizers"):
    print(f"setup_optimum_venv:   {name} {m.version(name)}")
PY
say "ready: $TARGET/bin/python (torch $TORCH from the main venv)"
