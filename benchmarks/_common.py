"""Timing helpers shared by the benchmarks.

The machines these run on are shared and noisy, so variants of one benchmark
are measured interleaved (A B C, A B C, ...) and each keeps its best round:
a burst of noise then hits every variant alike instead of one of them."""

from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT / "tests") not in sys.path:
    sys.path.insert(0, str(ROOT / "tests"))  # the exporter helpers the tests use
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def calibrate(fn: Callable[[], object], budget_s: float) -> int:
    """How many calls of `fn` fit in about `budget_s` seconds (at least 1)."""
    fn()
    n = 1
    while True:
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        dt = time.perf_counter() - t0
        if dt >= budget_s / 4 or n >= 1 << 20:
            return max(1, int(n * budget_s / max(dt, 1e-9)))
        n *= 4


def interleaved_us(fns: Sequence[Callable[[], object]], *, budget_s: float = 0.2, rounds: int = 7) -> list[float]:
    """Best-of-`rounds` mean time per call of each function, in µs, measured
    round-robin. Each round spends about `budget_s` per function."""
    numbers = [calibrate(fn, budget_s) for fn in fns]
    best = [float("inf")] * len(fns)
    for _ in range(rounds):
        for i, (fn, n) in enumerate(zip(fns, numbers)):
            t0 = time.perf_counter()
            for _ in range(n):
                fn()
            best[i] = min(best[i], (time.perf_counter() - t0) / n * 1e6)
    return best


# Every table a benchmark printed in this process, with its raw figures, for
# `--json PATH` (write_json); scripts/plot_benchmarks.py draws them.
TABLES: list[dict[str, Any]] = []


def machine() -> dict[str, Any]:
    """What the figures were measured on and with."""
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    versions: dict[str, str] = {}
    try:  # the pyexec that runs (a source tree's, not an older installed one's)
        import pyexec

        versions["pyexec"] = pyexec.__version__
    except Exception:  # noqa: BLE001 - listed below from the metadata instead
        pass
    for name in ("pyexec", "torch", "executorch"):
        if name in versions:
            continue
        try:
            from importlib.metadata import version

            versions[name] = version(name)
        except Exception:  # noqa: BLE001 - a missing package is just not listed
            pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    return {"cpu": cpu, "cores": os.cpu_count(), "load_average": load, "versions": versions,
            "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")}


def add_json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", metavar="PATH", help="also write every table, with its raw figures, as JSON")


def write_json(path: str | None, bench: str, settings: Mapping[str, Any] | None = None) -> None:
    """Writes the tables printed so far (and what they ran on) to `path`."""
    if not path:
        return
    out = {"bench": bench, "machine": machine(), "settings": dict(settings or {}), "tables": TABLES}
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    Path(path).write_text(json.dumps(out, indent=1) + "\n")
    print(f"\nwrote {path}")


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[str]],
                values: Sequence[Mapping[str, Any]] | None = None) -> None:
    """Prints a Markdown table; `values` (one mapping per row, raw numbers:
    seconds, ratios, counts) goes with it into the JSON report."""
    TABLES.append({"title": title, "header": list(header), "rows": [list(r) for r in rows],
                   "values": [dict(v) for v in values] if values is not None else None})
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    print(f"\n## {title}\n")
    print("| " + " | ".join(h.ljust(w) for h, w in zip(header, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for r in rows:
        print("| " + " | ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths))) + " |")
    sys.stdout.flush()


def fmt_us(us: float) -> str:
    if us >= 1e6:
        return f"{us / 1e6:.2f} s"
    if us >= 1e3:
        return f"{us / 1e3:.2f} ms"
    return f"{us:.2f} µs"
