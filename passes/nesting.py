"""Nesting analysis: which map binds which axis at which depth.

Walks the call graph from `@main`. A function body runs at a depth: `@main`
at 0, the body of a map found at depth d at d + 1, a `func.call` callee at its
caller's depth. All maps at one depth must bind the same axis name and size
(they become one mesh axis); an axis name resolves to the innermost depth that
binds it, so an inner map that binds a name again shadows the outer one.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from pmapc import dialect, ir
from pmapc.errors import Category, Diagnostic, DiagnosticError
from pmapc.mesh import Mesh


@dataclasses.dataclass
class Level:
    """The axis bound by every map whose body runs at one depth."""

    name: str
    size: int


@dataclasses.dataclass
class Nesting:
    levels: list[Level] = dataclasses.field(default_factory=list)

    def resolve(self, name: str, depth: int) -> int | None:
        """The 0-based level that `name` refers to in code running at `depth`."""
        for level in range(depth - 1, -1, -1):
            if self.levels[level].name == name:
                return level
        return None

    def bound_names(self, depth: int) -> list[str]:
        return [level.name for level in self.levels[:depth]]

    def mesh(self) -> Mesh:
        """The device mesh: one axis per level, outermost first, names made unique."""
        names: list[str] = []
        for level in self.levels:
            name = level.name
            suffix = 1
            while name in names:
                name = f"{level.name}_{suffix}"
                suffix += 1
            names.append(name)
        return Mesh(tuple(names), tuple(level.size for level in self.levels))


# visit(op, depth, nesting): called for every map and collective, with the
# depth it runs at and the levels bound so far.
Visitor = Callable[[ir.Operation, int, Nesting], None]


def analyze(module: ir.Module, visit: Visitor | None = None) -> Nesting:
    """Build the nesting levels; raise DiagnosticError on structural errors."""
    functions = ir.functions(module)
    if "main" not in functions:
        raise DiagnosticError(
            Diagnostic(
                "error",
                "the module has no entry function '@main'; name the function that "
                "takes the program's arguments 'main'",
                ir.source_loc(module.operation.location),
            )
        )
    walker = _Walker(functions, visit or (lambda op, depth, nesting: None))
    walker.visit_function("main", 0, None)
    return walker.nesting


class _Walker:
    def __init__(self, functions: dict[str, ir.Operation], visit: Visitor):
        self.functions = functions
        self.visit = visit
        self.nesting = Nesting()
        self.path: list[str] = []
        self.seen: set[tuple[str, int]] = set()

    def visit_function(self, name: str, depth: int, caller: ir.Operation | None) -> None:
        if name in self.path:
            cycle = " -> ".join(f"@{n}" for n in [*self.path[self.path.index(name) :], name])
            raise dialect.error_at(caller, f"recursive call {cycle}; maps and calls "
                                   "must not call themselves")
        if (name, depth) in self.seen:
            return
        function = self.functions[name]
        if not function.regions[0].blocks:
            where = caller if caller is not None else function
            raise dialect.error_at(where, f"'@{name}' is only declared; give it a body")
        self.seen.add((name, depth))
        self.path.append(name)
        custom_calls, calls = ir.walk_custom_calls_and_calls(function)
        for op in custom_calls:
            self.visit_custom_call(op, depth)
        for op in calls:
            callee = ir.callee_of(op)
            if callee in self.functions:
                self.visit_function(callee, depth, op)
        self.path.pop()

    def visit_custom_call(self, op: ir.Operation, depth: int) -> None:
        if dialect.is_map(op):
            self.visit_map(op, depth)
        elif dialect.is_collective(op):
            self.visit(op, depth, self.nesting)

    def visit_map(self, op: ir.Operation, depth: int) -> None:
        view = dialect.read_map(op)
        callee = self.functions.get(view.callee)
        if callee is None:
            raise dialect.error_at(
                op, f"'pmapc.map' calls '@{view.callee}', which is not a function in this module"
            )
        self.bind_level(op, depth, view)
        self.visit(op, depth, self.nesting)
        self.visit_function(view.callee, depth + 1, op)

    def bind_level(self, op: ir.Operation, depth: int, view: dialect.MapView) -> None:
        levels = self.nesting.levels
        if depth == len(levels):
            levels.append(Level(view.axis_name, view.axis_size))
            return
        level = levels[depth]
        if (level.name, level.size) != (view.axis_name, view.axis_size):
            raise dialect.error_at(
                op,
                f"map over '{view.axis_name}' (size {view.axis_size}) at nesting depth "
                f"{depth + 1} disagrees with a sibling map over '{level.name}' (size "
                f"{level.size}); maps at one depth must bind the same axis name and size",
                Category.AXIS,
            )
