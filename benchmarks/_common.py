"""Timing helpers shared by the benchmarks.

The machines these run on are shared and noisy, so variants of one benchmark
are measured interleaved (A B C, A B C, ...) and each keeps its best round:
a burst of noise then hits every variant alike instead of one of them."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

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


def print_table(title: str, header: Sequence[str], rows: Sequence[Sequence[str]]) -> None:
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
