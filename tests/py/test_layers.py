"""pmapc's imports run one way, down its layers (docs/ir.md, "From a call to a run").

From the bottom: the core (`pmapc/*.py` but the face) <- `passes/` and `lowering/`,
peers that never import each other <- `compiler/` <- the face (`pmapc/api.py`,
`pmapc/stages.py`, `pmapc/__init__.py`) <- `tools/`. A module imports its own layer
and the layers below. Every import statement counts, wherever it stands: at module
level, inside a function (a lazy import), under `if TYPE_CHECKING:`.
"""

from __future__ import annotations

import ast
import pathlib

ROOT = pathlib.Path(__file__).parents[2]

# pmapc's subpackages, each in the repository folder of its name (pyproject.toml's
# package-dir); the core and the face are the files of pmapc/.
SUBPACKAGES = ("passes", "lowering", "compiler", "tools")
FOLDERS = ("pmapc", *SUBPACKAGES)
FACE = {"pmapc", "pmapc.api", "pmapc.stages"}
# A layer's rank: a module may import its own layer and the layers of lower rank.
# `passes` and `lowering` share a rank, so neither imports the other.
RANKS = {"core": 0, "passes": 1, "lowering": 1, "compiler": 2, "face": 3, "tools": 4}


def module_name(path: pathlib.Path, root: pathlib.Path) -> str:
    """The dotted name `path` (a file of one of FOLDERS) installs as."""
    folder, *rest = path.relative_to(root).with_suffix("").parts
    if rest[-1] == "__init__":
        rest.pop()
    return ".".join(["pmapc", *([] if folder == "pmapc" else [folder]), *rest])


def package_files(root: pathlib.Path) -> list[pathlib.Path]:
    """Every .py file of the package."""
    return sorted(path for folder in FOLDERS for path in (root / folder).rglob("*.py"))


def layer(module: str) -> str | None:
    """The layer of the dotted pmapc module `module`; None outside pmapc."""
    parts = module.split(".")
    if parts[0] != "pmapc":
        return None
    if module in FACE:
        return "face"
    if len(parts) > 1 and parts[1] in SUBPACKAGES:
        return parts[1]
    return "core"


def is_module(module: str, root: pathlib.Path) -> bool:
    """Whether the dotted pmapc name `module` is a module or package of the
    repository (rather than a name a module defines, as `pmapc.__version__`)."""
    parts = module.split(".")
    if len(parts) > 1 and parts[1] in SUBPACKAGES:
        path = root.joinpath(*parts[1:])
    else:
        path = root.joinpath("pmapc", *parts[1:])
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def imported_modules(
    tree: ast.Module, module: str, is_package: bool, root: pathlib.Path
) -> list[tuple[int, str, str]]:
    """(line, pmapc module imported, the statement) for every import in `tree`, the
    source of `module`, at any depth: import statements, and `importlib.import_module`
    or `__import__` of a literal name. `from pmapc.x import y` imports `pmapc.x.y`
    where that is a module, else `pmapc.x`."""
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = module.split(".")
                anchor = anchor[: len(anchor) - node.level + (1 if is_package else 0)]
                base = ".".join(part for part in [*anchor, base] if part)
            targets = []
            for alias in node.names:
                submodule = f"{base}.{alias.name}"
                targets.append(submodule if is_module(submodule, root) else base)
        elif isinstance(node, ast.Call) and _dynamic_import(node):
            targets = [node.args[0].value]  # pyright: ignore[reportAttributeAccessIssue]
        else:
            continue
        statement = ast.unparse(node)
        found.extend(
            (node.lineno, target, statement) for target in targets if layer(target) is not None
        )
    return sorted(found)


def _dynamic_import(call: ast.Call) -> bool:
    """Whether `call` imports a module named by a literal string."""
    function = call.func
    name = function.attr if isinstance(function, ast.Attribute) else getattr(function, "id", "")
    return (
        name in ("import_module", "__import__")
        and bool(call.args)
        and isinstance(call.args[0], ast.Constant)
        and isinstance(call.args[0].value, str)
    )


def allowed(importer: str, imported: str) -> bool:
    """Whether layer `importer` may import layer `imported`."""
    return importer == imported or RANKS[importer] > RANKS[imported]


def violations(root: pathlib.Path) -> list[str]:
    """`file:line: import (importer layer -> imported layer)` for every import in the
    package against the layers."""
    found = []
    for path in package_files(root):
        module = module_name(path, root)
        importer = layer(module)
        assert importer is not None
        tree = ast.parse(path.read_text(), filename=str(path))
        is_package = path.name == "__init__.py"
        for line, target, statement in imported_modules(tree, module, is_package, root):
            imported = layer(target)
            assert imported is not None
            if not allowed(importer, imported):
                where = f"{path.relative_to(root)}:{line}"
                found.append(f"{where}: {statement} ({importer} imports {imported})")
    return found


def test_no_import_runs_against_the_layers():
    found = violations(ROOT)
    assert not found, "imports against the layers:\n" + "\n".join(found)


def test_every_package_file_has_a_layer():
    files = package_files(ROOT)
    assert len(files) > 40
    layers = {layer(module_name(path, ROOT)) for path in files}
    assert layers == set(RANKS)


def test_the_check_sees_every_kind_of_import(tmp_path):
    """Lazy, TYPE_CHECKING, `from pmapc import x`, relative, plain and dynamic
    imports are all checked; a name from the face (`from pmapc import __version__`)
    is the face, a module of the core (`from pmapc import ir`) the core."""
    for folder in FOLDERS:
        (tmp_path / folder).mkdir()
        (tmp_path / folder / "__init__.py").write_text("")
    (tmp_path / "pmapc" / "ir.py").write_text("")
    (tmp_path / "compiler" / "runtime.py").write_text("")
    (tmp_path / "tools" / "opt.py").write_text("")
    (tmp_path / "passes" / "base.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "from pmapc import ir\n"
        "if TYPE_CHECKING:\n"
        "    from pmapc.lowering import trace\n"
        "def f():\n"
        "    from pmapc.compiler import runtime\n"
        "    import pmapc.tools.opt\n"
        "from . import base\n"
        "from pmapc import __version__\n"
        "importlib.import_module('pmapc.compiler.runtime')\n"
    )
    (tmp_path / "lowering" / "trace.py").write_text("from ..passes import base\n")
    assert violations(tmp_path) == [
        "lowering/trace.py:1: from ..passes import base (lowering imports passes)",
        "passes/base.py:4: from pmapc.lowering import trace (passes imports lowering)",
        "passes/base.py:6: from pmapc.compiler import runtime (passes imports compiler)",
        "passes/base.py:7: import pmapc.tools.opt (passes imports tools)",
        "passes/base.py:9: from pmapc import __version__ (passes imports face)",
        "passes/base.py:10: importlib.import_module('pmapc.compiler.runtime') "
        "(passes imports compiler)",
    ]


def import_graph(root: pathlib.Path) -> dict[str, set[str]]:
    """pmapc module -> the pmapc modules it imports (every kind of import)."""
    graph: dict[str, set[str]] = {}
    for path in package_files(root):
        module = module_name(path, root)
        tree = ast.parse(path.read_text(), filename=str(path))
        is_package = path.name == "__init__.py"
        imported = {target for _, target, _ in imported_modules(tree, module, is_package, root)}
        graph[module] = imported - {module}
    return graph


def reachable(graph: dict[str, set[str]], start: str) -> set[str]:
    """The modules `start` imports, directly or through others."""
    seen: set[str] = set()
    stack = [start]
    while stack:
        for imported in graph.get(stack.pop(), ()):
            if imported not in seen:
                seen.add(imported)
                stack.append(imported)
    return seen


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The import circles of `graph`: each set of modules that all reach each other
    (more than one: a module never imports itself here), sorted."""
    reach = {module: reachable(graph, module) for module in graph}
    found = {
        tuple(sorted(other for other in reach[module] if module in reach.get(other, ())))
        for module in graph
        if module in reach[module]
    }
    return sorted(list(circle) for circle in found)


def test_no_import_circles():
    """No module imports, however indirectly, one that imports it back (a circle under
    `if TYPE_CHECKING:` counts: its modules cannot be read one after the other)."""
    found = circles(import_graph(ROOT))
    assert not found, "import circles:\n" + "\n".join(" <-> ".join(c) for c in found)


def test_the_circle_check_finds_a_circle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": set()}
    assert circles(graph) == [["a", "b", "c"]]


MAX_LINES = 700  # no package file above it, the adapters included


def test_no_package_file_is_too_long():
    found = []
    for path in package_files(ROOT):
        name = str(path.relative_to(ROOT))
        lines = len(path.read_text().splitlines())
        if lines > MAX_LINES:
            found.append(f"{name}: {lines} lines (at most {MAX_LINES})")
    assert not found, "split these files by concept:\n" + "\n".join(found)
