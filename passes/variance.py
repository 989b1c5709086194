"""varying_axes: the mesh axes over which each value of an SPMD module may differ.

pmapc's uniformity analysis (LLVM's divergence analysis, over a mesh rather
than a warp). It reads a module after flatten-maps, where one program runs on
every device of the mesh, and gives each value the set of mesh axes along
which two devices may hold different values of it. The empty set means the
value is the same on every device: a predicate that is uniform along a
collective's axes sends every device of its groups the same way.

The sources of variance are the entry's split arguments (`pmapc.split`: a
dimension split over `data` varies over `data`), `@pmapc.axis_index` over its
axes, and what a device computes alone (host callbacks, `replica_id`,
`partition_id`, stateful `rng`): every axis. Every other op joins its operands'
sets, and those of the values its regions use; a function's results are its
body's for each call's arguments, and a value of its body varies as in any of
its calls (the one piece of code runs in each). Collectives,
branches and loops follow the rules the tracer's analysis of the jaxpr follows
too (pmapc/variance_rules.py): a collective whose result agrees over its group
removes its axes, the others add them; control flow adds its predicate's set to
its results (devices that branch apart return apart); a loop's carries join what
its body yields until they settle.

Why an analysis of the IR rather than of the traced jaxpr: `pmapc opt` runs
it on hand-written modules too, and every transformation JAX applies before
lowering (`grad`'s transposed branches, `vmap`, `jit`) reaches it as IR. The
fold (lowering/fold.py) tracks something finer at trace time, which positions
of a device's block each value varies over, and so keeps its own.
"""

from __future__ import annotations

from collections.abc import Sequence

from pmapc import dialect, hlo, ir
from pmapc import variance_rules as rules
from pmapc.mesh import Mesh
from pmapc.passes import patterns

Axes = frozenset[str]
UNIFORM: Axes = frozenset()


class Variance:
    """The axes each value of a module may vary over (`varying_axes`)."""

    def __init__(self, mesh: Mesh, values: dict[ir.Value, Axes]) -> None:
        self.mesh = mesh
        self._values = values

    def __call__(self, value: ir.Value) -> Axes:
        return self._values.get(value, UNIFORM)

    def in_mesh_order(self, axes: Axes) -> tuple[str, ...]:
        return tuple(name for name in self.mesh.axis_names if name in axes)


def varying_axes(module: ir.Module) -> Variance:
    """The variance of every value of a flattened module (see the module docstring)."""
    analysis = _Analysis(module)
    analysis.run()
    return Variance(analysis.mesh, analysis.values)


def predicate_of(op: ir.Operation) -> ir.Value:
    """The value a branch (`case`'s index, `if`'s predicate) or a `while` (what its
    condition returns) decides by."""
    if op.name == "stablehlo.while":
        return ir.terminator(op.regions[0].blocks[0]).operands[0]
    return op.operands[0]


class _Analysis:
    """One walk of @main, each function a call reaches analysed for that call's
    argument sets (its results per call, as the tracer's analysis has them); a value
    of a function's body gets the union of its calls' sets (the body is one piece of
    code, run in each). Functions no call reaches are analysed with uniform arguments."""

    def __init__(self, module: ir.Module) -> None:
        self.mesh = dialect.mesh_of(module)
        self.every_axis: Axes = frozenset(self.mesh.axis_names)
        self.functions = ir.functions(module)
        self.values: dict[ir.Value, Axes] = {}  # the union over every call
        self.env: dict[ir.Value, Axes] = {}  # the sets of the call being analysed
        # (function, its arguments' sets) -> its results' sets; the calls being analysed
        self.summaries: dict[tuple[str, tuple[Axes, ...]], list[Axes]] = {}
        self.active: set[tuple[str, tuple[Axes, ...]]] = set()

    def _entry_arguments(self, function: ir.Operation) -> list[Axes]:
        splits = patterns.entry_splits(function, "arg")
        return [frozenset(axis for dim in split for axis in dim) for split in splits]

    def run(self) -> None:
        if "main" in self.functions:
            self._function("main", self._entry_arguments(self.functions["main"]))
        reached = {name for name, _ in self.summaries}
        for name, function in self.functions.items():
            if name not in reached:
                self._function(name, [UNIFORM] * len(ir.function_type(function).inputs))

    def _function(self, name: str, arguments: list[Axes]) -> list[Axes]:
        """The sets of what function `name` returns for a call with `arguments`."""
        function = self.functions[name]
        key = (name, tuple(arguments))
        if key in self.summaries:
            return self.summaries[key]
        if key in self.active or not function.regions[0].blocks:
            # a call of itself (or of a declaration): anything
            return [self.every_axis] * len(ir.function_type(function).results)
        self.active.add(key)
        outer, self.env = self.env, {}
        returned = self._block(ir.function_entry_block(function), arguments)
        for value, axes in self.env.items():
            self.values[value] = self.values.get(value, UNIFORM) | axes
        self.env = outer
        self.active.discard(key)
        self.summaries[key] = returned
        return returned

    def _block(self, block: ir.Block, arguments: Sequence[Axes]) -> list[Axes]:
        """Give `block`'s values their sets, its arguments `arguments`; the sets of
        what its terminator returns."""
        for argument, axes in zip(block.arguments, arguments):
            self.env[argument] = axes
        for op in block.operations:
            self._op(op.operation)
        return [self._of(value) for value in ir.terminator(block).operands]

    def _of(self, value: ir.Value) -> Axes:
        return self.env.get(value, UNIFORM)

    def _joined(self, values) -> Axes:
        return frozenset().union(*(self._of(value) for value in values))

    def _op(self, op: ir.Operation) -> None:
        name = op.name
        if name == "stablehlo.while":
            results = self._while(op)
        elif name in hlo.BRANCHES:
            results = self._branches(op)
        elif name == "func.call":
            results = self._call(op)
        else:
            results = [self._one_result(op)] * len(op.results)
        for value, axes in zip(op.results, results):
            self.env[value] = axes

    def _one_result(self, op: ir.Operation) -> Axes:
        operands = self._joined(op.operands)
        if op.name in rules.PER_DEVICE_OPS or dialect.is_host_callback(op):
            return self.every_axis
        if dialect.collective_of(op) is not None:
            return self._collective(op, operands)
        for region in op.regions:  # reduce, sort, scatter...: per element, from operands
            for block in region.blocks:
                returned = self._block(block, [operands] * len(block.arguments))
                operands = operands.union(*returned)
        return operands

    def _collective(self, op: ir.Operation, operands: Axes) -> Axes:
        view = dialect.read_collective(op)
        grouped = view.params.index_groups is not None
        return rules.collective_result(view.collective, grouped, operands, frozenset(view.axes))

    def _branches(self, op: ir.Operation) -> list[Axes]:
        branches = (self._block(region.blocks[0], []) for region in op.regions)
        return rules.branch_results(self._of(op.operands[0]), branches, len(op.results))

    def _while(self, op: ir.Operation) -> list[Axes]:
        condition, body = (region.blocks[0] for region in op.regions)

        def trip(carried: list[Axes]) -> tuple[Axes, list[Axes]]:
            (predicate,) = self._block(condition, carried)
            return predicate, self._block(body, carried)

        carried, _ = rules.loop_fixpoint([self._of(value) for value in op.operands], trip)
        return carried

    def _call(self, op: ir.Operation) -> list[Axes]:
        callee = ir.callee_of(op)
        if callee not in self.functions:
            return [self.every_axis] * len(op.results)
        return self._function(callee, [self._of(value) for value in op.operands])
