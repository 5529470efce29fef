"""Draws the documentation's benchmark figures from the benchmarks' JSON
reports (written with --json), and writes each report's tables into the
pages that show them, so that the pages show what a run measured:

    python scripts/plot_benchmarks.py [--results docs/benchmarks] [--out docs/img]

A page shows a report's tables between `<!-- report: NAME.json -->` and
`<!-- end report -->` (every page under docs/ is searched).

Each report in --results is read by its "bench" field:
- bench_xnnpack, bench_quant: per model, ExecuTorch + XNNPACK's time /
  pyexec's time on the same lowered file (above 1: pyexec is faster), one bar
  per thread count;
- bench_llm: decode tokens/s of ExecuTorch and pyexec beside the
  streaming-read limit, per program and thread count.
Each figure names the machine, the date and the thread count the report
records. Reports of other benchmarks are listed and skipped."""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def rows_of(report: Mapping[str, Any], title_start: str) -> list[dict[str, Any]]:
    """The raw rows of the first table whose title starts with title_start."""
    for table in report["tables"]:
        if table["title"].startswith(title_start) and table.get("values"):
            return [v for v in table["values"] if v]
    return []


def caption(reports: Sequence[Mapping[str, Any]]) -> str:
    m = reports[0]["machine"]
    versions = ", ".join(f"{k} {v}" for k, v in sorted(m.get("versions", {}).items()))
    load = m.get("load_average")
    busy = f", load average {load:.1f}" if load is not None else ""
    return f"{m['cpu']}, {m['cores']} cores{busy}; {m['date']}; {versions}"


def markdown(report: Mapping[str, Any]) -> str:
    """A report's tables as Markdown, with what they ran on."""
    m = report["machine"]
    load = m.get("load_average")
    lines = [f"Measured {m['date']} on {m['cpu']} ({m['cores']} cores"
             + (f", load average {load:.2f} at the end" if load is not None else "") + "); "
             + ", ".join(f"{k} {v}" for k, v in sorted(m.get("versions", {}).items())) + "."]
    for table in report["tables"]:
        header, rows = table["header"], table["rows"]
        lines += ["", f"**{table['title']}**", "", "| " + " | ".join(header) + " |",
                  "|" + "|".join("---" for _ in header) + "|"]
        lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


REPORT = re.compile(r"(<!-- report: (?P<name>[\w.-]+\.json) -->\n).*?(<!-- end report -->)", re.S)


def fill_pages(results: Path, docs: Path) -> list[Path]:
    """Replaces each report block in the pages with the report's tables."""
    changed = []
    for page in sorted(docs.rglob("*.md")):
        text = page.read_text()

        def fill(m: re.Match[str], page: Path = page) -> str:
            path = results / m.group("name")
            if not path.is_file():
                print(f"{page}: no report {path}; its block is left as it was")
                return m.group(0)
            return m.group(1) + markdown(json.loads(path.read_text())) + "\n" + m.group(3)

        new = REPORT.sub(fill, text)
        if new != text:
            page.write_text(new)
            changed.append(page)
    return changed


def plot_speedups(reports: Sequence[Mapping[str, Any]], out: Path, table: str, name: str,
                  title: str) -> Path | None:
    """ExecuTorch + XNNPACK's time / pyexec's per model, a bar per thread count."""
    import matplotlib.pyplot as plt

    series: dict[int, dict[str, float]] = {}
    for r in reports:
        for v in rows_of(r, table):
            if "et_xnnpack_us" not in v:  # ExecuTorch's result was wrong: nothing to compare
                continue
            series.setdefault(int(v["threads"]), {})[v["model"]] = v["et_xnnpack_us"] / v["pyexec_lowered_us"]
    if not series:
        return None
    models = list(dict.fromkeys(m for s in series.values() for m in s))
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(models) + 1.6))
    height = 0.8 / len(series)
    for k, (threads, speedups) in enumerate(sorted(series.items())):
        ys = [i + k * height for i in range(len(models))]
        xs = [speedups.get(m, 0.0) for m in models]
        bars = ax.barh(ys, xs, height=height, label=f"{threads} thread{'s' if threads > 1 else ''}")
        ax.bar_label(bars, labels=[f"{x:.2f}x" if x else "" for x in xs], padding=3, fontsize=8)
    ax.axvline(1.0, color="black", linewidth=0.8)
    ax.set_yticks([i + height * (len(series) - 1) / 2 for i in range(len(models))], models)
    ax.invert_yaxis()
    ax.set_xlabel("ExecuTorch + XNNPACK time / pyexec time (above 1: pyexec is faster)")
    ax.set_title(title, fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    fig.text(0.01, 0.005, caption(reports), fontsize=7, color="gray")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    path = out / name
    fig.savefig(path, metadata={"Date": None})  # no timestamp: the same report draws the same file
    plt.close(fig)
    return path


def plot_llm(reports: Sequence[Mapping[str, Any]], out: Path) -> Path | None:
    import matplotlib.pyplot as plt

    rows = [v for r in reports for v in rows_of(r, "Prefill and decode")]
    if not rows:
        return None
    labels = [f"{v['program']}\n{v['threads']} thread{'s' if v['threads'] > 1 else ''}" for v in rows]
    fig, ax = plt.subplots(figsize=(8, 0.8 * len(rows) + 1.6))
    height = 0.27
    for k, (key, name) in enumerate([("decode_et_tok_s", "ExecuTorch"), ("decode_pyexec_tok_s", "pyexec"),
                                     ("decode_limit_tok_s", "streaming-read limit")]):
        xs = [v[key] for v in rows]
        bars = ax.barh([i + k * height for i in range(len(rows))], xs, height=height, label=name)
        ax.bar_label(bars, labels=[f"{x:.1f}" for x in xs], padding=3, fontsize=8)
    ax.set_yticks([i + height for i in range(len(rows))], labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("decode, tokens/s")
    ax.set_title("LLM decode against the memory-bandwidth limit", fontsize=10)
    ax.legend(loc="lower right", fontsize=8)
    fig.text(0.01, 0.005, caption(reports), fontsize=7, color="gray")
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    path = out / "bench_llm.svg"
    fig.savefig(path, metadata={"Date": None})  # no timestamp: the same report draws the same file
    plt.close(fig)
    return path


PLOTS: dict[str, Callable[[Sequence[Mapping[str, Any]], Path], Path | None]] = {
    "bench_xnnpack": lambda r, out: plot_speedups(r, out, "XNNPACK-lowered programs", "bench_xnnpack.svg",
                                                  "XNNPACK-lowered programs, the same file in both runtimes"),
    "bench_quant": lambda r, out: plot_speedups(r, out, "Quantized programs", "bench_quant.svg",
                                                "Quantized programs lowered to XNNPACK, the same file in both"),
    "bench_llm": plot_llm,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", type=Path, default=ROOT / "docs" / "benchmarks",
                        help="directory of JSON reports (default docs/benchmarks)")
    parser.add_argument("--out", type=Path, default=ROOT / "docs" / "img", help="where the SVGs go (default docs/img)")
    args = parser.parse_args()
    import matplotlib

    matplotlib.use("Agg")
    matplotlib.rcParams["svg.hashsalt"] = "pyexec"  # the same report draws the same file
    matplotlib.rcParams["svg.fonttype"] = "none"
    reports: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(args.results.glob("*.json")):
        report = json.loads(path.read_text())
        reports.setdefault(report.get("bench", "?"), []).append(report)
    if not reports:
        raise SystemExit(f"no JSON reports in {args.results}")
    args.out.mkdir(parents=True, exist_ok=True)
    for bench, group in reports.items():
        plot = PLOTS.get(bench)
        if plot is None:
            print(f"{bench}: no figure for this benchmark, skipped")
            continue
        made = plot(group, args.out)
        print(f"{bench}: {made if made else 'no rows to draw'}")
    for page in fill_pages(args.results, args.out.parent):
        print(f"tables written into {page}")


if __name__ == "__main__":
    main()
