#!/usr/bin/env bash
# Builds the aarch64 Linux wheel on an x86-64 (or any) Linux host with the
# Debian cross toolchain (gcc-aarch64-linux-gnu, libc6-dev-arm64-cross):
#     bash scripts/build_wheel_aarch64.sh [OUT_DIR]   (default dist/aarch64)
# scripts/build_wheel.sh with the aarch64-linux-gnu- toolchain; prints the
# repaired wheel's path.
set -euo pipefail
exec bash "$(dirname "$0")/build_wheel.sh" --cross aarch64-linux-gnu- "${1:-dist/aarch64}"
