"""The import graph of attnprof follows the documented flow: no cycles, no arrow against it.

The graph is read from the source (ast, nothing is imported): every `import` and `from ... import`
of an attnprof module, at module level, inside a function (a lazy import is a dependency all
the same) and under `if TYPE_CHECKING:` (types only: never run), each recorded with its kind.
The allowed flow is the table in docs/architecture.md, read here: the page and the check cannot
disagree. The checker functions are tested on small packages written here, so the test can fail.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "src" / "attnprof"
FLOW_DOC = ROOT / "docs" / "architecture.md"

# what an entry of the table's "may import" column allows, by the kind of the import
ALLOWS = {"": {"module", "lazy", "types"}, "lazy": {"lazy", "types"}, "types": {"types"}}
# the "torch" column: which kinds of torch import a package may hold
TORCH = {"yes": {"module", "lazy", "types"}, "lazy": {"lazy", "types"}, "no": {"types"}}


@dataclass(frozen=True)
class Edge:
    src: str  # importing module, dotted (attnprof.analysis.pipeline)
    dst: str  # imported attnprof module, or the top-level name of a third-party one (torch)
    kind: str  # "module" (runs on import), "lazy" (inside a function), "types" (TYPE_CHECKING)
    line: int


@dataclass(frozen=True)
class Flow:
    may_import: dict[str, dict[str, str]]  # package -> {package it may import: "" | "lazy" | "types"}
    torch: dict[str, str]  # package -> "yes" | "lazy" | "no"


def modules(root: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every .py file of the package at `root`."""
    out = {}
    for p in sorted(root.rglob("*.py")):
        parts = [root.name, *p.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = p
    return out


def _is_type_checking(test: ast.expr) -> bool:
    return isinstance(test, ast.Name | ast.Attribute) and ast.unparse(test).endswith("TYPE_CHECKING")


def _imports(tree: ast.Module) -> Iterable[tuple[ast.Import | ast.ImportFrom, str]]:
    """Every import statement of a module, with its kind."""

    def walk(node: ast.AST, kind: str) -> Iterable[tuple[ast.Import | ast.ImportFrom, str]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.Import | ast.ImportFrom):
                yield child, kind
            elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
                yield from walk(child, "types" if kind == "types" else "lazy")
            elif isinstance(child, ast.If) and _is_type_checking(child.test):
                for stmt in child.body:
                    yield from walk(ast.Module(body=[stmt], type_ignores=[]), "types")
                for stmt in child.orelse:
                    yield from walk(ast.Module(body=[stmt], type_ignores=[]), kind)
            else:
                yield from walk(child, kind)

    return walk(tree, "module")


def import_graph(root: Path) -> list[Edge]:
    """The edges out of every module of the package at `root` (attnprof modules, and torch)."""
    mods = modules(root)
    top = root.name

    def owner(name: str) -> str | None:  # the module a dotted name lives in
        while name and name not in mods:
            name = name.rpartition(".")[0]
        return name or None

    edges = []
    for name, path in mods.items():
        package = name if path.name == "__init__.py" else name.rpartition(".")[0]
        for node, kind in _imports(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:
                    anchor = package
                    for _ in range(node.level - 1):
                        anchor = anchor.rpartition(".")[0]
                    base = f"{anchor}.{base}" if base else anchor
                # `from pkg import mod` imports the module pkg.mod; `from mod import name` imports mod
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base for a in node.names]
            for t in targets:
                if t.split(".")[0] == top:
                    dst = owner(t)
                    if dst and dst != name:
                        edges.append(Edge(name, dst, kind, node.lineno))
                elif t.split(".")[0] == "torch":
                    edges.append(Edge(name, "torch", kind, node.lineno))
    return sorted(set(edges), key=lambda e: (e.src, e.dst, e.kind, e.line))


def package_of(module: str, nested: Iterable[str] = ()) -> str:
    """The row of a flow table a module belongs to: its subpackage or top-level module
    (attnprof.analysis.pipeline -> analysis, attnprof.units -> units, attnprof -> attnprof), or
    the nested row of a layered package (attnprof.analysis.perf.op_model -> analysis.perf when
    `nested` names analysis.perf)."""
    parts = module.split(".")
    if len(parts) > 2 and ".".join(parts[1:3]) in nested:
        return ".".join(parts[1:3])
    return parts[1] if len(parts) > 1 else parts[0]


def nested_rows(flow: Flow) -> set[str]:
    """The rows of the nested tables (analysis.records, ...)."""
    return {p for p in flow.may_import if "." in p}


def sub_packages(root: Path, flow: Flow) -> set[str]:
    """The sub-packages on disk of every package the flow table layers (analysis -> analysis.perf)."""
    layered = {p.split(".")[0] for p in nested_rows(flow)}
    return {
        f"{p}.{d.name}"
        for p in layered
        if (root / p).is_dir()
        for d in sorted((root / p).iterdir())
        if (d / "__init__.py").is_file()
    }


def parse_flow(markdown: str) -> Flow:
    """The table between <!-- import-flow --> and <!-- /import-flow --> of docs/architecture.md,
    and each nested one (<!-- analysis-flow -->: rows `analysis.records`, ...): columns
    `package`, `may import` (comma list; `x (lazy)`: only inside functions, `x (types)`: only
    under TYPE_CHECKING; `—`: nothing) and `torch` (yes, lazy or no)."""
    m = re.search(r"<!-- import-flow -->(.*?)<!-- /import-flow -->", markdown, re.S)
    assert m, "docs/architecture.md has no <!-- import-flow --> table"
    tables = [m.group(1)] + [
        t.group(2)
        for t in re.finditer(r"<!-- (\w+)-flow -->(.*?)<!-- /\1-flow -->", markdown, re.S)
        if t.group(1) != "import"
    ]
    rows = [
        [c.strip().replace("`", "") for c in ln.strip().strip("|").split("|")]
        for table in tables
        for ln in table.splitlines()
        if ln.strip().startswith("|")
    ]
    header = [h.lower() for h in rows[0]]
    body = [r for r in rows if any(r) and r != rows[0] and not set("".join(r)) <= set("-")]
    col = {h: i for i, h in enumerate(header)}
    may: dict[str, dict[str, str]] = {}
    torch: dict[str, str] = {}
    for r in body:
        pkg = r[col["package"]]
        assert pkg not in may, f"{pkg} has two rows in the flow table"
        allowed: dict[str, str] = {}
        for entry in r[col["may import"]].split(","):
            e = re.fullmatch(r"\s*([\w.]+)\s*(?:\((lazy|types)\))?\s*", entry)
            if e:
                allowed[e.group(1)] = e.group(2) or ""
            else:
                assert entry.strip() in ("", "—", "-"), f"{pkg}: cannot read {entry!r} in the flow table"
        may[pkg] = allowed
        torch[pkg] = r[col["torch"]].strip()
        assert torch[pkg] in TORCH, f"{pkg}: torch column says {torch[pkg]!r}, not yes, lazy or no"
    return Flow(may, torch)


def violations(edges: Iterable[Edge], flow: Flow) -> list[str]:
    """Arrows the tables do not allow, and modules of packages the tables do not name. A nested
    package (analysis.perf) has its outer package's arrows to other packages, and its own row's
    arrows to its siblings; the outer package's top-level modules may import its nested ones."""
    nested = nested_rows(flow)
    out = []
    for e in edges:
        src = package_of(e.src, nested)
        if src not in flow.may_import:
            line = f"{e.src}: package {src!r} is not in the flow table"
            if line not in out:
                out.append(line)
            continue
        if e.dst == "torch":
            if e.kind not in TORCH[flow.torch[src]]:
                out.append(
                    f"{e.src}:{e.line} imports torch ({e.kind}); {src} may not (torch: {flow.torch[src]})"
                )
            continue
        dst = package_of(e.dst, nested)
        if dst == src:
            continue
        outer, dst_outer = src.split(".")[0], dst.split(".")[0]
        if outer != dst_outer:
            allowed = flow.may_import.get(outer, {}).get(dst_outer)
        elif src == outer:  # analysis/pipeline.py -> analysis.perf: down into its own layers
            continue
        else:
            allowed = flow.may_import[src].get(dst)
        if allowed is None or e.kind not in ALLOWS[allowed]:
            how = "may not import it" if allowed is None else f"may import it {allowed} only"
            out.append(f"{e.src}:{e.line} -> {e.dst} ({e.kind}): {src} {how}")
    return out


def cycles(edges: Iterable[Edge]) -> list[list[str]]:
    """Groups of modules that import each other, directly or around a loop (Tarjan's strongly
    connected components). Type-only imports never run, so they close no loop."""
    graph: dict[str, set[str]] = {}
    for e in edges:
        if e.kind != "types" and e.dst != "torch":
            graph.setdefault(e.src, set()).add(e.dst)
            graph.setdefault(e.dst, set())
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


# -- attnprof itself ---------------------------------------------------------------------------------


def test_no_import_cycles() -> None:
    assert cycles(import_graph(PACKAGE)) == []


def test_no_cycle_even_through_type_only_imports() -> None:
    # a type-only import never runs, but a loop through one still ties two modules together
    # (models/analyse.py took models/harness.py's _Prepared while harness imported analyse)
    as_run = [Edge(e.src, e.dst, "module", e.line) for e in import_graph(PACKAGE)]
    assert cycles(as_run) == []


def test_every_arrow_follows_the_documented_flow() -> None:
    assert violations(import_graph(PACKAGE), parse_flow(FLOW_DOC.read_text(encoding="utf-8"))) == []


def test_the_table_names_every_package_and_only_those() -> None:
    flow = parse_flow(FLOW_DOC.read_text(encoding="utf-8"))
    nested = sub_packages(PACKAGE, flow)
    assert nested == nested_rows(flow), nested ^ nested_rows(flow)
    present = {package_of(m, nested) for m in modules(PACKAGE)}
    assert set(flow.may_import) == present
    named = {p for allowed in flow.may_import.values() for p in allowed}
    assert named <= present, named - present


# -- the checker can fail ----------------------------------------------------------------------------

FLOW = """
<!-- import-flow -->
| package | may import | torch |
|---|---|---|
| `errors` | — | no |
| `trace` | errors | no |
| `analysis` | trace, errors, report (types) | no |
| `harness` | analysis, errors | yes |
| `report` | analysis, harness (lazy) | no |
<!-- /import-flow -->
"""


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    """A package named attnprof with these files; errors.py and every folder's __init__.py are
    empty unless given."""
    root = tmp_path / "attnprof"
    for rel in list(files):
        for parent in Path(rel).parents:
            files.setdefault(str(parent / "__init__.py").removeprefix("./"), "")
    for rel, text in {"errors.py": "", **files}.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    return root


def test_a_clean_package_passes(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "trace/__init__.py": "from . import load\n",
            "trace/load.py": "from attnprof.errors import *\n",
            "analysis/pipeline.py": (
                "from typing import TYPE_CHECKING\nfrom attnprof.trace import load\n"
                "if TYPE_CHECKING:\n    from attnprof.report.view import View\n"
            ),
            "harness/__init__.py": "import torch\nfrom ..analysis import pipeline\n",
            "report/view.py": (
                "from attnprof.analysis.pipeline import x\ndef f():\n    from attnprof.harness import run\n"
            ),
        },
    )
    edges = import_graph(root)
    assert Edge("attnprof.trace", "attnprof.trace.load", "module", 1) in edges  # relative import
    assert Edge("attnprof.harness", "attnprof.analysis.pipeline", "module", 2) in edges
    assert Edge("attnprof.report.view", "attnprof.harness", "lazy", 3) in edges
    assert Edge("attnprof.analysis.pipeline", "attnprof.report.view", "types", 4) in edges
    # report.view -> analysis.pipeline -> (types) report.view: type-only, so no cycle
    assert cycles(edges) == []
    assert violations(edges, parse_flow(FLOW)) == []


def test_a_cycle_is_caught(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "analysis/findings.py": "from attnprof.analysis.pipeline import Context\n",
            # a lazy import closes the loop all the same
            "analysis/pipeline.py": "def run():\n    from attnprof.analysis import findings\n",
            "analysis/result.py": "from attnprof.analysis import findings\n",
        },
    )
    assert cycles(import_graph(root)) == [["attnprof.analysis.findings", "attnprof.analysis.pipeline"]]


def test_a_wrong_arrow_is_caught(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "analysis/__init__.py": "import torch\n",  # analysis: torch no
            "analysis/a.py": "from attnprof.harness import run\n",  # analysis may not import harness
            "harness/run.py": "",
            "report/__init__.py": "from attnprof.harness import run\n",  # report: harness (lazy) only
            "sweep/__init__.py": "from attnprof import errors\n",  # a package the table does not name
        },
    )
    found = violations(import_graph(root), parse_flow(FLOW))
    assert found == [
        "attnprof.analysis:1 imports torch (module); analysis may not (torch: no)",
        "attnprof.analysis.a:1 -> attnprof.harness.run (module): analysis may not import it",
        "attnprof.report:1 -> attnprof.harness.run (module): report may import it lazy only",
        "attnprof.sweep: package 'sweep' is not in the flow table",
    ]


def test_an_unreadable_table_is_an_error() -> None:
    with pytest.raises(AssertionError, match="cannot read"):
        parse_flow(FLOW.replace("trace, errors, report (types)", "trace, errors, report (maybe)"))
    with pytest.raises(AssertionError, match="no <!-- import-flow --> table"):
        parse_flow("# nothing here")


NESTED_FLOW = (
    FLOW
    + """
<!-- analysis-flow -->
| package | may import | torch |
|---|---|---|
| `analysis.records` | — | no |
| `analysis.perf` | analysis.records | no |
<!-- /analysis-flow -->
"""
)


def test_a_nested_layer_is_checked(tmp_path: Path) -> None:
    root = _package(
        tmp_path,
        {
            "analysis/pipeline.py": "from attnprof.analysis.perf import model\n",  # down: allowed
            "analysis/perf/model.py": "from attnprof.analysis.records import result\nfrom attnprof.trace import x\n",
            "analysis/records/result.py": "from attnprof.analysis.perf import model\n",  # up: refused
            "analysis/extra/thing.py": "from attnprof.harness import run\n",  # a layer with no row
            "harness/run.py": "",
            "trace/x.py": "",
            "report/view.py": "from attnprof.analysis.perf.model import f\n",  # outer arrow to analysis
        },
    )
    flow = parse_flow(NESTED_FLOW)
    assert sub_packages(root, flow) == {"analysis.records", "analysis.perf", "analysis.extra"}
    assert nested_rows(flow) == {"analysis.records", "analysis.perf"}
    found = violations(import_graph(root), flow)
    # analysis.extra has no row, so it is read as analysis itself: the outer row refuses harness
    assert found == [
        "attnprof.analysis.extra.thing:1 -> attnprof.harness.run (module): analysis may not import it",
        "attnprof.analysis.records.result:1 -> attnprof.analysis.perf.model (module):"
        " analysis.records may not import it",
    ]
