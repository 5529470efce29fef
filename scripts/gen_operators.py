"""Writes the supported-operator list into docs/supported.md from the kernel
registry (tests/integration/test_docs.py fails when the two differ).

    python scripts/gen_operators.py
"""

from __future__ import annotations

import re
import sys
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BEGIN, END = "<!-- operators:begin -->", "<!-- operators:end -->"


def operator_block(names: list[str]) -> str:
    by_ns: dict[str, list[str]] = defaultdict(list)
    for n in names:
        ns, op = n.split("::", 1)
        by_ns[ns].append(op)
    lines = [BEGIN, f"{len(names)} kernels, generated from the registry by `scripts/gen_operators.py`:", ""]
    for ns in sorted(by_ns):
        lines.append(f"- `{ns}` ({len(by_ns[ns])}): " + ", ".join(f"`{op}`" for op in by_ns[ns]))
    lines.append(END)
    return "\n".join(lines)


def main() -> None:
    sys.path.insert(0, str(ROOT))
    import pyexec

    page = ROOT / "docs" / "supported.md"
    text = page.read_text()
    block = operator_block(pyexec.kernels())
    if BEGIN not in text:
        raise SystemExit(f"{page} has no {BEGIN} ... {END} block to fill")
    page.write_text(re.sub(re.escape(BEGIN) + ".*?" + re.escape(END), lambda _: block, text, flags=re.S))


if __name__ == "__main__":
    main()
