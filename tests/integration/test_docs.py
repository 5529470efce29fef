"""The README and the documentation site (docs/): every `python` and `c` block
runs as written, the operator list is the registry's (regenerate it with
scripts/gen_operators.py), every relative link points at a file that exists,
and the site builds with `mkdocs build --strict` (no warning: broken links,
pages missing from the navigation, API references that do not resolve).

Each Python snippet runs as `python snippet.py` would, in its own process
(forked from an interpreter that has imported torch and the exporter once:
support/warm.py), in a directory holding the programs
examples/python/export_models.py exports (add_mul.pte, kv_cache.pte,
dynamic.pte). A `text` block right after a snippet is what the snippet prints,
compared exactly. `sh` blocks are commands for a reader (installs, builds,
long runs) and `text` blocks output: neither is run here. Every fence must name
one of these languages, so that no snippet escapes this test by accident."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from support import ROOT
from support.warm import WarmPython

import pyexec

README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.rglob("*.md"))]
NATIVE = ROOT / "native"
RUN = ("python", "c")
NOT_RUN = ("sh", "text")
PROGRAMS = ("add_mul.pte", "kv_cache.pte", "dynamic.pte")


def test_supported_page_lists_exactly_the_registered_operators() -> None:
    spec = importlib.util.spec_from_file_location("gen_operators", ROOT / "scripts" / "gen_operators.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    expected = gen.operator_block(pyexec.kernels())
    assert expected in (DOCS / "supported.md").read_text(), "operator list is stale: run scripts/gen_operators.py"


# ---- the fenced blocks -------------------------------------------------------------------


@dataclass(frozen=True)
class Block:
    lang: str
    code: str
    line: int  # of the opening fence, 1-based
    prints: str | None  # the text block right after it, if any
    page: str = ""  # the file, relative to the repository

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def fenced_blocks(text: str, page: str = "") -> list[Block]:
    """Every fenced block, in order, with the `text` block that follows a
    snippet (only blank lines between) as its expected output."""
    fence = re.compile(r"^```([^\n`]*)\n(.*?)^```[ \t]*$", re.M | re.S)
    matches = list(fence.finditer(text))
    blocks = []
    for k, m in enumerate(matches):
        prints = None
        nxt = matches[k + 1] if k + 1 < len(matches) else None
        if nxt is not None and nxt.group(1).strip() == "text" and not text[m.end() : nxt.start()].strip():
            prints = nxt.group(2)
        blocks.append(Block(m.group(1).strip(), m.group(2), text.count("\n", 0, m.start()) + 1, prints, page))
    return blocks


BLOCKS = [b for p in PAGES for b in fenced_blocks(p.read_text(), str(p.relative_to(ROOT)))]
SNIPPETS = [b for b in BLOCKS if b.lang in RUN]


def test_block_parser_pairs_a_snippet_with_the_output_after_it() -> None:
    text = "a\n```python\nprint(1)\n```\n\n```text\n1\n```\n```sh\nls\n```\n```c\nint x;\n```\ntext\n"
    blocks = fenced_blocks(text)
    assert [(b.lang, b.code, b.line, b.prints) for b in blocks] == [
        ("python", "print(1)\n", 2, "1\n"),
        ("text", "1\n", 6, None),
        ("sh", "ls\n", 9, None),
        ("c", "int x;\n", 12, None),
    ]


def test_every_fence_names_a_known_language() -> None:
    unknown = [(b.where, b.lang) for b in BLOCKS if b.lang not in RUN + NOT_RUN]
    assert not unknown, f"fences (page:line, language) that are neither run nor marked not to be: {unknown}"
    assert {b.lang for b in SNIPPETS} == set(RUN)


LINK = re.compile(r"\]\(([^)\s]+)\)")


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_at_files_that_exist(page: Path) -> None:
    text = re.sub(r"^```.*?^```", "", page.read_text(), flags=re.M | re.S)
    broken = []
    for target in LINK.findall(text):
        if re.match(r"^[a-z]+:", target) or target.startswith("#"):
            continue
        path = target.split("#")[0]
        if path and not (page.parent / path).exists():
            broken.append(target)
    assert not broken, f"{page.relative_to(ROOT)} links to missing files: {broken}"


def test_site_builds_without_warnings(tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert (tmp_path / "site" / "index.html").is_file() and (tmp_path / "site" / "api" / "index.html").is_file()


# What the snippets import, imported once: each snippet runs in a child
# forked from this interpreter (its own process and namespace, as
# `python snippet.py`), not paying torch's and the exporter's imports again.
PRELOAD = ["numpy", "torch", "pyexec", "executorch.exir", "executorch.runtime",
           "executorch.backends.xnnpack.partition.xnnpack_partitioner",
           "executorch.backends.xnnpack.quantizer.xnnpack_quantizer", "torchao.quantization.pt2e.quantize_pt2e"]


@pytest.fixture(scope="module")
def python() -> Iterator[WarmPython]:
    pytest.importorskip("executorch")
    with WarmPython(PRELOAD, python_env()) as warm:
        yield warm


def run_python(python: WarmPython, script: Path, cwd: Path, args: list[str] | None = None) -> str:
    proc = python.run(script, cwd, args)
    assert proc.returncode == 0, f"python {script} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


@pytest.fixture(scope="module")
def programs(tmp_path_factory: pytest.TempPathFactory, python: WarmPython) -> Path:
    """The programs the snippets use, exported by examples/python/export_models.py."""
    out = tmp_path_factory.mktemp("programs")
    run_python(python, ROOT / "examples" / "python" / "export_models.py", out, [str(out)])
    for name in PROGRAMS:
        assert (out / name).is_file(), name
    return out


@pytest.fixture(scope="module")
def library() -> Path:
    """native/build/libpyexec.so, built if it is not there yet."""
    lib = NATIVE / "build" / "libpyexec.so"
    if not lib.is_file():
        if shutil.which("make") is None:
            pytest.skip("make is not installed")
        run(["make", "-C", str(NATIVE), "-j2"], cwd=ROOT)
    return lib


def python_env() -> dict[str, str]:
    """The environment under which a child Python imports the pyexec this test
    process imported (the source tree or the installed package)."""
    package_root = str(Path(pyexec.__file__).resolve().parent.parent)
    path = os.environ.get("PYTHONPATH")
    return {**os.environ, "PYTHONPATH": package_root + (os.pathsep + path if path else "")}


def run(cmd: list[str], cwd: Path) -> str:
    proc = subprocess.run(cmd, capture_output=True, text=True, cwd=cwd, env=python_env(), timeout=600)
    assert proc.returncode == 0, f"{' '.join(cmd)} exited {proc.returncode}:\n{proc.stdout}\n{proc.stderr}"
    return proc.stdout


def workdir(programs: Path, tmp_path: Path) -> Path:
    """A fresh directory holding copies of the programs (a snippet may write)."""
    for name in PROGRAMS:
        shutil.copyfile(programs / name, tmp_path / name)
    return tmp_path


def check_prints(block: Block, out: str) -> None:
    if block.prints is not None:
        assert out == block.prints, f"{block.where} printed\n{out}\nwhere the page says\n{block.prints}"


@pytest.mark.parametrize("block", [b for b in SNIPPETS if b.lang == "python"], ids=lambda b: b.where)
def test_python_snippet_runs(block: Block, programs: Path, python: WarmPython, tmp_path: Path) -> None:
    cwd = workdir(programs, tmp_path)
    (cwd / "snippet.py").write_text(block.code)
    check_prints(block, run_python(python, cwd / "snippet.py", cwd))


@pytest.mark.parametrize("block", [b for b in SNIPPETS if b.lang == "c"], ids=lambda b: b.where)
def test_c_snippet_compiles_and_runs(block: Block, programs: Path, library: Path, tmp_path: Path) -> None:
    if shutil.which("cc") is None:
        pytest.skip("cc is not installed")
    cwd = workdir(programs, tmp_path)
    (cwd / "app.c").write_text(block.code)
    run(["cc", "-std=c11", "-Wall", "-Wextra", "-Werror", "-pedantic", "-I", str(NATIVE / "include"), "app.c",
         "-L", str(library.parent), "-lpyexec", f"-Wl,-rpath,{library.parent}", "-o", "app"], cwd=cwd)
    check_prints(block, run([str(cwd / "app")], cwd=cwd))


def test_benchmark_pages_show_the_committed_reports() -> None:
    """Each `<!-- report: NAME.json -->` block holds the tables of
    docs/benchmarks/NAME.json as scripts/plot_benchmarks.py writes them, and
    the figures it draws from them are there."""
    spec = importlib.util.spec_from_file_location("plot_benchmarks", ROOT / "scripts" / "plot_benchmarks.py")
    assert spec is not None and spec.loader is not None
    plots = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(plots)
    blocks = [(page, m) for page in sorted(DOCS.rglob("*.md")) for m in plots.REPORT.finditer(page.read_text())]
    assert blocks, "no report blocks in docs/"
    for page, m in blocks:
        report = DOCS / "benchmarks" / m.group("name")
        assert report.is_file(), f"{page.name} shows {m.group('name')}, which is not in docs/benchmarks/"
        want = m.group(1) + plots.markdown(json.loads(report.read_text())) + "\n" + m.group(3)
        assert m.group(0) == want, f"{page.name}: the tables of {report.name} are stale: run scripts/plot_benchmarks.py"
    for page in sorted(DOCS.rglob("*.md")):
        for figure in re.findall(r"\]\((img/[^)]+\.svg)\)", page.read_text()):
            assert (DOCS / figure).is_file(), f"{page.name} shows {figure}: run scripts/plot_benchmarks.py"
