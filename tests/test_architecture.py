"""The house's rules, checked: one namespace, arrows that only run down, no cycle.

``store`` imports neither ``trainer`` nor ``server``; each of those imports ``store`` only;
the facade ``bnserve`` (the bnserve/ folder: estimator, client, publish and load) imports
any of them, and none of them imports it, but for its BASE modules: those import nothing of
the project (the standard library only), and every package may import them;
inside each package a module imports only from its own room or the rooms below it (the
LAYERS lists, bottom first); no two modules import each other, however indirectly. The
arrows are every ``import`` of the project's own modules, also those inside functions
(not those under ``if TYPE_CHECKING:``, which only annotations read).
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = {"store": "bnserve.store", "trainer": "bnserve.trainer", "server": "bnserve.server"}
FACADE = "bnserve"
FOLDERS = {**PACKAGES, FACADE: FACADE}
GENERATED = ("bnserve.server.api",)
BASE = {
    "bnserve.argtypes",
    "bnserve.lazy",
    "bnserve.process_exit",
}  # below the three packages: the argument types both command lines share, lazy package names,
# how the command lines end their process

# Rooms of each package, bottom first: a module may import from its own room and the ones before it.
LAYERS = {
    "bnserve.store": [
        ["errors", "version", "timeouts", "signing"],
        ["model"],
        ["predictor", "db"],
    ],
    "bnserve.trainer": [
        ["progress", "blas", "cores"],
        ["io", "stats"],
        ["data"],
        ["learners"],
        ["fit", "formats"],
        ["evaluation", "scoring"],
        ["binning"],
        ["auto"],
        ["plan"],
        ["cli"],
    ],
    "bnserve.server": [
        ["api", "limits", "metrics", "security", "catalogue", "aliases"],
        ["admission", "config", "requests", "responses", "on_demand", "client", "served"],
        ["tensors", "loading"],
        ["snapshot"],
        ["repository", "poller"],
        ["dataplane"],
        ["servicers", "interceptors"],
        ["app"],
        ["workers"],
        ["cli"],
    ],
}


def modules() -> dict[str, Path]:
    """Every module of the three packages, by its import name."""
    found = {}
    for folder, package in FOLDERS.items():
        for path in (ROOT / folder).rglob("*.py"):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            if "migrations" in parts:
                continue
            found[".".join((package, *parts))] = path
    return found


def arrows() -> set[tuple[str, str]]:
    """(importer, imported) for every import of one project module by another."""
    known = modules()
    edges = set()
    for name, path in known.items():
        is_package = path.name == "__init__.py"
        for node in _runtime_nodes(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = name.split(".") if is_package else name.split(".")[:-1]
                    base = base[: len(base) - node.level + 1]
                    module = ".".join(base + ([node.module] if node.module else []))
                else:
                    module = node.module or ""
                submodules = [f"{module}.{a.name}" for a in node.names if f"{module}.{a.name}" in known]
                targets = submodules if len(submodules) == len(node.names) else [module, *submodules]
            else:
                continue
            for target in targets:
                while target and target not in known:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    edges.add((name, target))
    return edges


def _runtime_nodes(tree: ast.AST):
    """Every node but those under ``if TYPE_CHECKING:`` (imports for annotations only, never run)."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and getattr(node.test, "id", getattr(node.test, "attr", None)) == "TYPE_CHECKING":
            stack.extend(node.orelse)
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))


def package_of(module: str) -> str:
    """``bnserve.store``, ``bnserve.trainer``, ``bnserve.server``, or the facade ``bnserve``."""
    top = ".".join(module.split(".")[:2])
    return top if top in PACKAGES.values() else FACADE


def room(module: str) -> tuple[str, int] | None:
    """(package, layer index) of a module; None for the package itself and generated code."""
    for package, layers in LAYERS.items():
        if module.startswith(package + "."):
            first = module[len(package) + 1 :].split(".")[0]
            for i, names in enumerate(layers):
                if first in names:
                    return package, i
            raise AssertionError(f"{module} is in no room of {package}: add it to LAYERS in {__file__}")
    return None


def test_every_module_has_a_room():
    for module in modules():
        if module not in FOLDERS.values():
            room(module)


def test_packages_import_only_downwards():
    allowed = {
        "bnserve.store": {"bnserve.store"},
        "bnserve.trainer": {"bnserve.trainer", "bnserve.store"},
        "bnserve.server": {"bnserve.server", "bnserve.store"},
    }
    wrong = []
    for importer, imported in sorted(arrows()):
        top, target = (package_of(module) for module in (importer, imported))
        if top == FACADE:
            continue  # the facade may import every package
        if target not in allowed[top] and imported not in BASE:
            wrong.append(f"{importer} -> {imported}")
    assert wrong == []


def test_the_base_imports_nothing_of_the_project():
    assert sorted(f"{a} -> {b}" for a, b in arrows() if a in BASE) == []


def test_inside_a_package_modules_import_only_their_room_and_the_rooms_below():
    wrong = []
    for importer, imported in sorted(arrows()):
        a, b = room(importer), room(imported)
        if a is None or b is None or a[0] != b[0] or importer.startswith(GENERATED):
            continue
        if b[1] > a[1]:
            wrong.append(f"{importer} (room {a[1]}) -> {imported} (room {b[1]})")
    assert wrong == []


def test_no_import_cycle():
    graph: dict[str, set[str]] = {}
    for a, b in arrows():
        graph.setdefault(a, set()).add(b)
    state: dict[str, int] = {}
    cycle: list[str] = []

    def visit(node: str, path: list[str]) -> bool:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                cycle.extend(path[path.index(nxt) :] + [node, nxt] if nxt in path else [node, nxt])
                return True
            if state.get(nxt) is None and visit(nxt, path + [node]):
                return True
        state[node] = 2
        return False

    for node in sorted(graph):
        if state.get(node) is None and visit(node, []):
            break
    assert cycle == []


def test_every_folder_of_modules_is_a_package():
    """A folder of modules without an __init__.py imports from a checkout (a namespace
    package), but setuptools leaves it out of an installed copy."""
    loose = [
        str(folder.relative_to(ROOT))
        for top in FOLDERS
        for folder in [ROOT / top, *(p for p in (ROOT / top).rglob("*") if p.is_dir())]
        if "__pycache__" not in folder.parts
        and "migrations" not in folder.parts
        and any(folder.glob("*.py"))
        and not (folder / "__init__.py").exists()
    ]
    assert loose == []


def test_pyproject_lists_every_package_folder():
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    folders = dict(setuptools["package-dir"].items())
    assert folders == {package: folder for folder, package in FOLDERS.items()}
    expected = sorted(
        ".".join((package, *init.parent.relative_to(ROOT / folder).parts))
        for package, folder in folders.items()
        for init in (ROOT / folder).rglob("__init__.py")
    )
    assert sorted(setuptools["packages"]) == expected


@pytest.mark.parametrize("folder", sorted(PACKAGES))
def test_a_folder_cannot_be_imported_by_its_bare_name(folder):
    import subprocess
    import sys

    result = subprocess.run([sys.executable, "-c", f"import {folder}"], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode != 0 and f"import bnserve.{folder}, not {folder}" in result.stderr
