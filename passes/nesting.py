"""Nesting analysis: which map binds which axis, and where its devices are; and
which function bodies flattening inlines, how often (`Inlining`).

Walks the call graph from `@main`. Code runs in a scope: the chain of maps
around it, outermost first (`@main` in the empty one, a map's body in the
map's scope plus the map, a `func.call` callee in its caller's). An axis name
resolves to the innermost map of the scope that binds it, so a map that binds
a name again shadows the outer one.

Maps side by side may bind different names and sizes, as in JAX 0.4: the
nest's mesh refines every chain of map sizes, and each map binds one or more
consecutive mesh axes (`pmapc/layout.py`); a smaller sibling's work repeats
over the devices it leaves over.
"""

from __future__ import annotations

import collections
import dataclasses
import math
from collections.abc import Callable

from pmapc import dialect, hlo, ir, layout
from pmapc.errors import Category, Diagnostic, DiagnosticError
from pmapc.layout import Chain
from pmapc.passes import ragged
from pmapc.passes.op_index import INDEXED, Entry


@dataclasses.dataclass
class Contents:
    """What one walk of a function found: its ops with indexed names (op-index
    entries, `op_index.INDEXED`, func.calls included), and among them its
    custom_calls and func.calls, each in pre-order."""

    entries: list[Entry]
    custom_calls: list[ir.Operation]
    calls: list[ir.Operation]


def walk_contents(function: ir.Operation) -> Contents:
    entries = ir.walk_named(function, INDEXED)
    return Contents(
        entries,
        [op for name, op, _ in entries if name == dialect.CUSTOM_CALL],
        [op for name, op, _ in entries if name == "func.call"],
    )


@dataclasses.dataclass
class Nesting:
    """Every chain of maps in the program, and the mesh they share.

    `contents` holds what the analysis walked: each function reached from
    `@main`, by name; `views`, the maps and collectives it read, for the pass
    that reads them again (flatten-maps), which takes them into its run's views
    with `Views.absorb` (whose docstring says why an analysis cannot read with
    the run's views itself).
    """

    chains: list[Chain] = dataclasses.field(default_factory=list)
    factors: tuple[int, ...] = ()
    contents: dict[str, Contents] = dataclasses.field(default_factory=dict)
    views: dialect.Views = dataclasses.field(default_factory=dialect.Views, compare=False)

    @staticmethod
    def resolve(scope: Chain, name: str) -> int | None:
        """The position in `scope` of the map that `name` refers to, or None."""
        for position in range(len(scope) - 1, -1, -1):
            if scope[position][0] == name:
                return position
        return None

    @staticmethod
    def bound_names(scope: Chain) -> list[str]:
        return [name for name, _ in scope]

    def layout(self) -> layout.Layout:
        return layout.layout(self.chains)


# visit(op, scope, nesting, is_map): called for every map and collective, with
# the scope it runs in, the chains found so far and whether it is a map.
Visitor = Callable[[ir.Operation, Chain, Nesting, bool], None]


def analyze(
    module: ir.Module, visit: Visitor | None = None, views: dialect.Views | None = None
) -> Nesting:
    """Find every chain of maps; raise DiagnosticError on structural errors and on a
    module that is not pmapc IR (passes/forms.py): a flattened one (it has
    `pmapc.mesh`) that still holds pmapc ops, or one that names devices (StableHLO
    collectives) before flatten-maps has made the mesh they would be of. A mesh of
    more positions than XLA numbers devices is refused at the map that makes it.

    `views` reads the maps (a pass that reads the ops too passes its own)."""
    functions = ir.functions(module)
    if "main" not in functions:
        raise missing_main(module)
    walker = _Walker(
        functions,
        visit or (lambda op, scope, nesting, is_map: None),
        views or dialect.Views(),
        flattened=dialect.MESH_ATTR in module.operation.attributes,
    )
    walker.visit_function("main", (), None)
    if walker.device_collectives and not walker.flattened:
        raise _names_devices(walker.device_collectives[0])
    return walker.nesting


def missing_main(module: ir.Module) -> DiagnosticError:
    return DiagnosticError(
        Diagnostic(
            "error",
            "the module has no entry function '@main'; name the function that "
            "takes the program's arguments 'main'",
            ir.source_loc(module.operation.location),
        )
    )


def only_declared(where: ir.Operation, name: str) -> DiagnosticError:
    return dialect.error_at(where, f"'@{name}' is only declared; give it a body")


def _names_devices(op: ir.Operation) -> DiagnosticError:
    name = f"'@{dialect.target_of(op)}'" if op.name == dialect.CUSTOM_CALL else f"'{op.name}'"
    return dialect.error_at(
        op,
        f"{name} names devices of a mesh, which pmapc IR has not before flatten-maps; "
        "name the collective by a map's axis instead ('@pmapc.<kind>', docs/ir.md)",
    )


def _flattened_error(op: ir.Operation, target: str | None) -> DiagnosticError:
    return dialect.error_at(
        op,
        f"'{target}' in a flattened module (it has '{dialect.MESH_ATTR}'): verify-axes and "
        "flatten-maps take pmapc IR, before flatten-maps; run the passes after it "
        "(predicate-divergent, ..., lower-collectives) on this module",
    )


class _Walker:
    def __init__(
        self,
        functions: dict[str, ir.Operation],
        visit: Visitor,
        views: dialect.Views,
        flattened: bool,
    ):
        self.functions = functions
        self.visit = visit
        self.views = views
        self.flattened = flattened  # the module has a mesh: no pmapc op may be left
        self.nesting = Nesting(views=views)
        self.path: list[str] = []
        self.seen: set[tuple[str, Chain]] = set()
        # The collectives over devices found (StableHLO's, XLA's ragged op).
        self.device_collectives: list[ir.Operation] = []

    def visit_function(self, name: str, scope: Chain, caller: ir.Operation | None) -> None:
        if name in self.path:
            assert caller is not None, "the entry function is the only one with no caller"
            cycle = " -> ".join(f"@{n}" for n in [*self.path[self.path.index(name) :], name])
            raise dialect.error_at(
                caller, f"recursive call {cycle}; maps and calls must not call themselves"
            )
        if (name, scope) in self.seen:
            return
        function = self.functions[name]
        if not function.regions[0].blocks:
            raise only_declared(caller if caller is not None else function, name)
        self.seen.add((name, scope))
        self.path.append(name)
        contents = self.nesting.contents  # each function walked once, for all its scopes
        if name not in contents:
            contents[name] = walk_contents(function)
            self.device_collectives.extend(
                op for op_name, op, _ in contents[name].entries if op_name in hlo.COLLECTIVE_OPS
            )
        for op in contents[name].custom_calls:
            self.visit_custom_call(op, scope)
        for op in contents[name].calls:
            callee = ir.callee_of(op)
            if callee in self.functions:
                self.visit_function(callee, scope, op)
        self.path.pop()

    def visit_custom_call(self, op: ir.Operation, scope: Chain) -> None:
        target = self.views.target(op)
        if self.flattened and dialect.is_pmapc_target(target):
            raise _flattened_error(op, target)
        if target == dialect.MAP_TARGET:
            self.visit_map(op, scope)
        elif dialect.is_pmapc_target(target):
            self.visit(op, scope, self.nesting, False)
        elif target == ragged.NATIVE_TARGET:
            self.device_collectives.append(op)

    def visit_map(self, op: ir.Operation, scope: Chain) -> None:
        view = self.views.map(op)
        callee = self.functions.get(view.callee)
        if callee is None:
            raise dialect.error_at(
                op, f"'pmapc.map' calls '@{view.callee}', which is not a function in this module"
            )
        chain = (*scope, (view.axis_name, view.axis_size))
        self.add_chain(op, chain)
        self.visit(op, scope, self.nesting, True)
        self.visit_function(view.callee, chain, op)

    def add_chain(self, op: ir.Operation, chain: Chain) -> None:
        sizes = [size for _, size in chain]
        positions = math.prod(sizes)
        if positions > dialect.MAX_DEVICES:
            nest = " x ".join(str(size) for size in sizes)
            raise dialect.error_at(
                op,
                dialect.too_many_devices(f"the nest of maps {nest}", positions),
                Category.UNSUPPORTED,
            )
        factors = layout.refine(self.nesting.factors, sizes)
        if factors is None:
            listed = " x ".join(str(size) for size in sizes)
            others = " x ".join(str(size) for size in self.nesting.factors)
            raise dialect.error_at(
                op,
                f"map over '{chain[-1][0]}' (size {chain[-1][1]}) cannot share the devices "
                f"of the maps beside it: its chain of maps splits them {listed}, the maps "
                f"before it {others}, and no mesh splits them both ways; make the sizes of "
                "sibling maps divide one another",
                Category.AXIS,
            )
        self.nesting.factors = factors
        self.nesting.chains.append(chain)


class Inlining:
    """Which function bodies flattening a nest inlines into @main, and how often.

    A map always inlines its body; a func.call inlines its callee when that holds
    maps or collectives, directly or through calls, and otherwise stays (its
    callee is then `kept_callees`). `counts` says how many times each body is
    inlined: once per map or call of it, times the inlinings of the function that
    holds that map or call. `contents` are the functions as `analyze` walked
    them (others are walked when first needed).
    """

    def __init__(
        self,
        functions: dict[str, ir.Operation],
        contents: dict[str, Contents],
        views: dialect.Views,
    ):
        self.functions = functions
        self.contents = dict(contents)
        self.views = views
        self._inlines: dict[str, bool] = {}
        self._callees: dict[str, list[str]] = {}
        self.kept_callees: set[str] = set()
        self.counts = self._count()

    def contents_of(self, name: str) -> Contents:
        if name not in self.contents:
            self.contents[name] = walk_contents(self.functions[name])
        return self.contents[name]

    def inlines(self, name: str) -> bool:
        """Whether a func.call of function `name` is inlined."""
        if name not in self._inlines:
            self._inlines[name] = False  # a recursive call holds nothing more
            contents = self.contents_of(name) if name in self.functions else None
            self._inlines[name] = contents is not None and (
                any(self.views.is_pmapc_op(op) for op in contents.custom_calls)
                or any(self.inlines(ir.callee_of(op)) for op in contents.calls)
            )
        return self._inlines[name]

    def inlined_callees(self, name: str) -> list[str]:
        """The functions whose bodies the maps and calls in function `name` inline
        (found once: each custom_call's target is read once)."""
        if name not in self._callees:
            contents = self.contents_of(name)
            callees = [
                self.views.map(op).callee for op in contents.custom_calls if self.views.is_map(op)
            ]
            callees.extend(
                callee for callee in map(ir.callee_of, contents.calls) if self.inlines(callee)
            )
            self._callees[name] = callees
        return self._callees[name]

    def _count(self) -> collections.Counter:
        order: list[str] = []  # callers after callees (the call graph is acyclic)
        self._visit("main", set(), order)
        counts = collections.Counter({"main": 1})
        for name in reversed(order):
            for callee in self.inlined_callees(name):
                counts[callee] += counts[name]
        return counts

    def _visit(self, name: str, seen: set[str], order: list[str]) -> None:
        """Append the functions `name` inlines, then `name`, to `order` (a method, not
        a closure of `_count`: a closure that calls itself is a cycle, which only the
        collector frees)."""
        seen.add(name)
        calls = self.contents_of(name).calls
        self.kept_callees.update(
            callee for callee in map(ir.callee_of, calls) if not self.inlines(callee)
        )
        for callee in self.inlined_callees(name):
            if callee not in seen:
                self._visit(callee, seen, order)
        order.append(name)
