"""Checks that the code keeps its floors (the lint stage runs it):

1. C includes never climb: a file under native/src/<floor>/ includes only
   headers of its own floor or of floors below it, in the order
       core < loader < kernels < backends < runtime < api
   (api.c lies at native/src/ itself and is the top floor).
2. No circle between object files: of the objects a build made
   (native/build/obj by default, `--objects DIR`), none uses, directly or
   through others, a symbol defined by an object that uses one of its own
   (read with `nm`), and no object calls into a floor above its own.
3. No import circle in the Python package: `from .x import ...` and
   `from . import x` anywhere in pyexec/ (inside functions and
   `if TYPE_CHECKING:` blocks too) never lead back to the importing module.

    python scripts/check_layers.py [--objects native/build/obj] [--no-objects]

Prints each fault and exits 1 if there is one."""

from __future__ import annotations

import argparse
import ast
import re
import subprocess
import sys
from collections import defaultdict
from collections.abc import Iterable
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SRC = ROOT / "native" / "src"
FLOORS = ["core", "loader", "kernels", "backends", "runtime", "api"]


def floor_of(path: Path) -> str:
    """The floor of a source path relative to native/src ("api" for api.c)."""
    parts = path.parts
    return parts[0] if len(parts) > 1 else "api"


def rank(floor: str) -> int:
    return FLOORS.index(floor) if floor in FLOORS else -1


# ---- 1. includes ------------------------------------------------------------------------

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def include_faults() -> list[str]:
    faults = []
    for f in sorted(SRC.rglob("*.[ch]")):
        rel = f.relative_to(SRC)
        mine = floor_of(rel)
        if rank(mine) < 0:
            faults.append(f"native/src/{rel}: lies in no floor ({', '.join(FLOORS[:-1])})")
            continue
        for inc in INCLUDE.findall(f.read_text()):
            target = Path(inc)
            if len(target.parts) == 1:
                continue  # "pyexec.h" (the public header, below everything) or a file beside it
            theirs = floor_of(target)
            if rank(theirs) > rank(mine):
                faults.append(f"native/src/{rel} ({mine}) includes {inc} ({theirs}): a floor above its own")
    return faults


# ---- 2. object files ---------------------------------------------------------------------


def symbols(obj: Path) -> tuple[set[str], set[str]]:
    """(defined global symbols, undefined symbols) of an object file."""
    out = subprocess.run(["nm", "-P", str(obj)], check=True, capture_output=True, text=True).stdout
    defined, undefined = set(), set()
    for line in out.splitlines():
        fields = line.split()
        if len(fields) < 2:
            continue
        name, kind = fields[0], fields[1]
        if kind == "U":
            undefined.add(name)
        elif kind.isupper():
            defined.add(name)
    return defined, undefined


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Tarjan's algorithm: the components with more than one node."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def object_faults(objdir: Path) -> list[str]:
    # Only the objects of today's sources (a build directory may hold stale ones).
    objs = sorted(o for o in objdir.rglob("*.o") if (SRC / o.relative_to(objdir).with_suffix(".c")).is_file())
    if not objs:
        return [f"{objdir}: no object files (build the library first: make -C native)"]
    defined_by: dict[str, str] = {}
    uses: dict[str, set[str]] = {}
    for o in objs:
        name = str(o.relative_to(objdir).with_suffix(".c"))
        d, u = symbols(o)
        for s in d:
            defined_by[s] = name
        uses[name] = u
    graph: dict[str, set[str]] = defaultdict(set)
    via: dict[tuple[str, str], str] = {}
    for name, undefined in uses.items():
        for s in sorted(undefined):
            other = defined_by.get(s)
            if other and other != name:
                graph[name].add(other)
                via.setdefault((name, other), s)
    faults = []
    for comp in strongly_connected(graph):
        edges = [f"{a} -> {b} ({via[(a, b)]})" for a in comp for b in sorted(graph[a]) if b in comp]
        faults.append("object files in a circle: " + "; ".join(edges))
    for a in sorted(graph):
        for b in sorted(graph[a]):
            if rank(floor_of(Path(b))) > rank(floor_of(Path(a))):
                faults.append(f"{a} ({floor_of(Path(a))}) calls {via[(a, b)]} of {b} ({floor_of(Path(b))})")
    return faults


# ---- 3. Python imports ---------------------------------------------------------------------


def package_imports(package: Path) -> dict[str, set[str]]:
    """module -> the package's modules it imports (relative imports, anywhere in the file)."""
    modules = {p.stem for p in package.glob("*.py")}
    graph: dict[str, set[str]] = {}
    for p in sorted(package.glob("*.py")):
        deps: set[str] = set()
        for node in ast.walk(ast.parse(p.read_text(), str(p))):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                if node.module:
                    deps.add(node.module.split(".")[0])
                else:
                    deps.update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                head, _, rest = node.module.partition(".")
                if head == package.name and rest:
                    deps.add(rest.split(".")[0])
        deps.discard(p.stem)
        graph[p.stem] = {d for d in deps if d in modules}
    return graph


def python_faults(package: Path) -> list[str]:
    graph = package_imports(package)
    # __init__ re-exports everything: nothing may import the package root back.
    faults = [f"{package.name}/{m}.py imports the package root (__init__)" for m, d in graph.items()
              if "__init__" in d and m != "__main__"]
    for comp in strongly_connected({m: d - {"__init__"} for m, d in graph.items()}):
        edges = [f"{a} -> {b}" for a in comp for b in sorted(graph[a]) if b in comp]
        faults.append(f"{package.name}/ modules in an import circle: " + ", ".join(edges))
    return faults


def report(title: str, faults: Iterable[str]) -> int:
    faults = list(faults)
    print(f"{title}: {'ok' if not faults else f'{len(faults)} fault(s)'}")
    for f in faults:
        print(f"  {f}")
    return len(faults)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--objects", type=Path, default=ROOT / "native" / "build" / "obj",
                    help="the object files of a build (default native/build/obj)")
    ap.add_argument("--no-objects", action="store_true", help="skip the object-file check")
    args = ap.parse_args()
    n = report("C includes never climb a floor", include_faults())
    if not args.no_objects:
        n += report("no circle between object files, no call up a floor", object_faults(args.objects))
    n += report("no import circle in pyexec/", python_faults(ROOT / "pyexec"))
    return 1 if n else 0


if __name__ == "__main__":
    sys.exit(main())
