"""The house's floors, read from the code: every import of every module is parsed (ast; nothing
is imported or run) and held to the direction docs/architecture.md draws.

The project's Django apps stand on a ladder, lowest floor first; a package imports only the
ones below it. `analysis` (the engine: evidence in, typed diagnosis out, pure functions),
`readings` (the diagnosis read for people: names, questions, stories, the rank chart, on top of
analysis' typed diagnosis only), `hangdesk` (the command line and the bundle format and probe it
shares with the console, on top of both) and `lab` (the test cluster) stand apart.
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

LADDER = ("core", "clusters", "incidents", "collectors", "watch", "sharing", "pages", "console")
APART = ("analysis", "readings", "hangdesk", "lab")
# Tools that drive the whole project from outside; held only to the paramiko and cycle rules.
OUTSIDE = ("bench",)

# What each package may import of the project besides itself.
ALLOWED = {
    **{
        package: {*LADDER[:floor], "analysis", "readings", "hangdesk"}
        for floor, package in enumerate(LADDER)
    },
    "analysis": set(),
    "readings": {"analysis"},
    "hangdesk": {"analysis", "readings"},
    # The farm's capture renders the console's own probe (hangdesk/frames.py) to record it.
    "lab": {"hangdesk"},
}
ALLOWED["console"].add("lab")  # the `make run` demo starts a lab
FRAMEWORKS = ("django", "rest_framework", "drf_spectacular", "celery", "kombu", "paramiko")
PARAMIKO_HOME = "collectors.remote"
# What the readings may know of the engine: the typed diagnosis and the records it is made of.
DIAGNOSIS_CONTRACT = {
    "analysis.diagnosis",
    "analysis.records",
    "analysis.verdict",
    "analysis.progress",
    "analysis.fr_records",
    "analysis.stacks",
    "analysis.rankview",  # the per-rank table's overview, stored with the diagnosis
}


@dataclass(frozen=True)
class Import:
    source: str  # the importing module, dotted
    target: str  # the imported module (or package), dotted
    line: int

    def where(self) -> str:
        return f"{self.source} line {self.line} imports {self.target}"


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _is_module(dotted: str) -> bool:
    base = ROOT.joinpath(*dotted.split("."))
    return base.with_suffix(".py").is_file() or (base / "__init__.py").is_file()


def _resolve(source: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    anchor = source.split(".")
    anchor = anchor if is_package else anchor[:-1]
    anchor = anchor[: len(anchor) - (node.level - 1)]
    return ".".join([*anchor, node.module] if node.module else anchor)


def _imports_of(path: Path) -> list[Import]:
    source = _module_name(path)
    is_package = path.name == "__init__.py"
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            found += [Import(source, alias.name, node.lineno) for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(source, is_package, node)
            for alias in node.names:
                # `from package import module` imports the module; `from module import name`
                # the module itself.
                submodule = f"{base}.{alias.name}"
                target = submodule if _is_module(submodule) else base
                found.append(Import(source, target, node.lineno))
    return found


def _project_files(packages: tuple[str, ...]) -> list[Path]:
    return sorted(
        path
        for package in packages
        for path in (ROOT / package).rglob("*.py")
        if "__pycache__" not in path.parts
    )


ALL_IMPORTS = [
    imported for path in _project_files(LADDER + APART + OUTSIDE) for imported in _imports_of(path)
]


def _top(dotted: str) -> str:
    return dotted.split(".", 1)[0]


def test_the_ladder_is_the_order_of_the_installed_apps():
    tree = ast.parse((ROOT / "console/settings/base.py").read_text(encoding="utf-8"))
    assigned = next(
        node.value
        for node in tree.body
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", "") == "INSTALLED_APPS"
    )
    apps = [name for name in ast.literal_eval(assigned) if name in LADDER]
    assert apps == list(LADDER)


def test_every_package_imports_only_the_floors_below_it():
    project = set(LADDER + APART + OUTSIDE)
    upward = [
        imported.where()
        for imported in ALL_IMPORTS
        if _top(imported.source) in ALLOWED
        and _top(imported.target) in project
        and _top(imported.target) != _top(imported.source)
        and _top(imported.target) not in ALLOWED[_top(imported.source)]
    ]
    assert upward == []


def test_incidents_imports_nothing_of_collectors():
    found = [
        imported.where()
        for imported in ALL_IMPORTS
        if _top(imported.source) == "incidents" and _top(imported.target) == "collectors"
    ]
    assert found == []


def test_only_collectors_remote_imports_paramiko():
    importers = {i.source for i in ALL_IMPORTS if _top(i.target) == "paramiko"}
    assert importers == {PARAMIKO_HOME}


def test_analysis_and_the_command_line_import_no_framework():
    found = [
        imported.where()
        for imported in ALL_IMPORTS
        if _top(imported.source) in ("analysis", "readings", "hangdesk")
        and _top(imported.target) in FRAMEWORKS
    ]
    assert found == []


def test_the_readings_read_only_the_typed_diagnosis():
    """Names, questions, stories and the chart come from the diagnosis the engine returned,
    never from the evidence, the facts or the rules behind it."""
    found = [
        imported.where()
        for imported in ALL_IMPORTS
        if _top(imported.source) == "readings"
        and _top(imported.target) == "analysis"
        and imported.target not in DIAGNOSIS_CONTRACT
    ]
    assert found == []


def test_no_module_imports_itself_through_others():
    """No import cycle between modules, counting imports made inside functions too."""
    graph: dict[str, set[str]] = defaultdict(set)
    for imported in ALL_IMPORTS:
        if _is_module(imported.target) and imported.target != imported.source:
            graph[imported.source].add(imported.target)
    assert _cycles(graph) == []


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected groups of more than one module (Tarjan, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.append(member)
                        if member == node:
                            break
                    if len(group) > 1:
                        groups.append(sorted(group))
            elif child not in index:
                index[child] = low[child] = len(index)
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(sorted(graph.get(child, ())))))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return groups


# Modules past this many lines are named, each with its reason, under docs/architecture.md's
# "Sizes" (tests, benchmarks, the lab and migrations are not held to it).
LONG_MODULE_LINES = 500
SIZED = tuple(p for p in LADDER + APART if p != "lab")
_NAMED_MODULE = re.compile(r"^- `([\w/]+\.py)`: \S", re.MULTILINE)


def _modules_said_long(doc: str) -> set[str]:
    sizes = doc.split("\n## Sizes\n", 1)[1].split("\n## ", 1)[0]
    return set(_NAMED_MODULE.findall(sizes))


def test_no_module_is_over_500_lines_without_a_line_saying_why():
    said = _modules_said_long((ROOT / "docs/architecture.md").read_text(encoding="utf-8"))
    long = {
        path.relative_to(ROOT).as_posix(): lines
        for path in _project_files(SIZED)
        if "migrations" not in path.parts
        and (lines := len(path.read_text(encoding="utf-8").splitlines())) > LONG_MODULE_LINES
    }
    unsaid = [f"{path}: {lines} lines" for path, lines in sorted(long.items()) if path not in said]
    assert not unsaid, f"split these, or say why in docs/architecture.md's Sizes: {unsaid}"
    assert all((ROOT / path).is_file() for path in said), f"Sizes names a module gone: {said}"


def test_the_size_check_reads_the_list_it_holds_to():
    doc = "# A\n## Sizes\nintro\n- `a/b.py`: why\n- not a module\n- `c.py`:\n## Next\n- `d.py`: x\n"
    assert _modules_said_long(doc) == {"a/b.py"}


def test_the_checks_see_what_they_forbid():
    """The parser finds a function-level import, a relative one and a cycle: the tests above
    pass because the house is in order, not because they cannot see."""
    sample = ast.parse("def f():\n    from collectors import selectors\n")
    assert isinstance(sample.body[0].body[0], ast.ImportFrom)
    remote_imports = {i.target for i in ALL_IMPORTS if i.source == PARAMIKO_HOME}
    assert "paramiko" in remote_imports  # inside functions and under TYPE_CHECKING
    assert "clusters.sshspec" in remote_imports  # an absolute import of a module
    assert "collectors.outcomes" in remote_imports  # a relative one
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
