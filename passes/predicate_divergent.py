"""predicate-divergent: control flow that would part a collective's devices runs on all.

A `stablehlo.case`/`if` whose predicate differs between the devices of a
collective inside it would send them into different collectives, and a
`stablehlo.while` whose condition does would have some of them leave the loop
while others wait in it: XLA's collectives then pair the wrong ops or wait
forever. Nested `jax.vmap`, which defines what a map's named axes mean, runs
such a branch for every position and selects, and such a loop until every
position is done, masking the finished ones. This pass does the same, after
flatten-maps, where `varying_axes` (passes/variance.py) says what differs
between devices:

    case(i) {A} {B}          ->  A; B; select(i == 0, A's results, B's results)
    while(c) cond {p(c)} do {f(c)}
                             ->  while(c) cond {pmax(p(c)) over the axes}
                                 do {select(p(c), f(c), c)}

A branch or loop is converted when its predicate varies over an axis along
which the devices of a collective in it (directly, in a nested region or in a
function it calls) must meet: the collective's axes, or every axis for one XLA
runs over the whole mesh at once (`Collective.spans_mesh`: a collective_permute
has no replica groups). The loop's condition becomes "any device of the group
continues" (a `pmax` of the predicate over those axes), so the trip count is
uniform along them; each device keeps its carries once its own condition
fails. Everything else keeps its control flow: uniform predicates, and
branches whose collectives act along axes the predicate does not vary over.

A converted branch runs the other branches too, so a host callback or any op
with a side effect in one would run on devices that did not take it: such a
program is refused at the op (`jax.vmap` refuses the same, an IO effect in a
batched `cond`). Each conversion is recorded in `pmapc.predicated` on the
module, with its source line and axes, for the plan.

A traced program reaches this pass already converted: the tracer converts before
JAX differentiates (lowering/divergence.py says why), and notes each conversion
with an `@pmapc_predicated` op, an identity of the converted values, which this
pass records and drops.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import ClassVar

from pmapc import dialect, hlo, ir
from pmapc import variance_rules as rules
from pmapc.collectives import ReductionParams
from pmapc.errors import Category, Diagnostic, DiagnosticError
from pmapc.passes.base import Analyses, Analysis, Form
from pmapc.passes.op_index import index_of, op_index
from pmapc.passes.variance import Axes, Variance, predicate_of, varying_axes
from pmapc.rewriter import Builder, Rewriter

SIDE_EFFECT_ATTR = "has_side_effect"


@dataclasses.dataclass(frozen=True)
class PredicateDivergentPass:
    """Run branches and loops whose predicate splits a collective's group on every device."""

    name: ClassVar[str] = "predicate-divergent"
    accepts: ClassVar[Form] = Form.FLATTENED
    reads: ClassVar[tuple[Analysis, ...]] = (op_index,)

    def run(self, module: ir.Module, analyses: Analyses, rewriter: Rewriter) -> bool:
        index = index_of(module, analyses)
        notes = [op for op in index.ops(dialect.CUSTOM_CALL) if dialect.is_predicated_note(op)]
        control_flow = index.ops(hlo.CONTROL_FLOW)
        changed = _record_notes(notes, module, rewriter)
        if not control_flow:
            return changed  # no branch or loop: nothing can diverge
        functions = ir.functions(module)
        every_axis = frozenset(analyses.views.mesh_of(module).axis_names)
        if not _talking(control_flow, every_axis, functions):
            return changed  # no collective under control flow: nothing can diverge
        while True:
            variance = varying_axes(module)
            control_flow = ir.walk(module.operation, hlo.CONTROL_FLOW)
            found = _first_divergent(_talking(control_flow, every_axis, functions), variance)
            if found is None:
                return changed
            op, axes = found
            _refuse_side_effects(op, axes, functions)
            kind = "while" if op.name == "stablehlo.while" else "cond"
            record = dialect.Predicated(kind, axes, ir.source_loc(op.location))
            dialect.add_predicated(module, record)
            if kind == "while":
                _predicate_loop(op, axes, rewriter)
            else:
                _predicate_branches(op, rewriter)
            changed = True


def _record_notes(notes: list[ir.Operation], module: ir.Module, rewriter: Rewriter) -> bool:
    """Record the control flow the tracer ran on every device, from its `notes`
    (`@pmapc_predicated`, lowering/divergence.py), and drop them."""
    for note in notes:
        dialect.add_predicated(module, dialect.read_predicated_note(note))
        rewriter.replace(note, list(note.operands))
    return bool(notes)


def _talking(
    control_flow: list[ir.Operation], every_axis: frozenset[str], functions
) -> list[tuple[ir.Operation, Axes]]:
    """Each of the branches and loops `control_flow` (in pre-order), with the axes along
    which the devices of its collectives must meet (those with none left out), of the
    mesh's `every_axis`."""
    found = []
    for op in control_flow:
        axes = _meeting_axes(op, functions, set(), every_axis)
        if axes:
            found.append((op, axes))
    return found


def _meeting_axes(op: ir.Operation, functions, visited: set[str], every_axis: Axes) -> Axes:
    """The axes along which the devices of the collectives in `op` and the functions it
    calls must all reach them: a collective's axes, or every axis for one XLA runs over
    the whole mesh at once (`Collective.spans_mesh`)."""
    axes: set[str] = set()
    for nested in ir.walk(op, {dialect.CUSTOM_CALL, "func.call"}):
        if nested.name == "func.call":
            callee = ir.callee_of(nested)
            if callee in functions and callee not in visited:
                visited.add(callee)
                axes |= _meeting_axes(functions[callee], functions, visited, every_axis)
            continue
        collective = dialect.collective_of(nested)
        if collective is not None and collective.communicates:
            named = frozenset(dialect.read_collective(nested).axes)
            axes |= rules.meeting_axes(collective, named, every_axis)
    return frozenset(axes)


def _first_divergent(
    candidates: list[tuple[ir.Operation, Axes]], variance: Variance
) -> tuple[ir.Operation, tuple[str, ...]] | None:
    """The first branch or loop whose predicate varies over axes its collectives meet
    along, and those axes (in mesh order)."""
    for op, meeting in candidates:
        if op.name == "stablehlo.case" and len(op.regions) == 1:
            continue  # one branch: every device takes it
        diverging = rules.diverging(variance(predicate_of(op)), meeting)
        if diverging:
            return op, variance.in_mesh_order(diverging)
    return None


def _refuse_side_effects(op: ir.Operation, axes: Sequence[str], functions) -> None:
    """A located error if converting `op` would run an op with a side effect (a host
    callback) where it was not taken, or would select values that are not tensors."""
    for nested in _ops_reached(op, functions):
        if dialect.is_host_callback(nested) or _has_side_effect(nested):
            problem = "a host callback" if dialect.is_host_callback(nested) else f"'{nested.name}'"
            raise _refusal(problem, nested, op, axes)
    if not all(ir.is_ranked_tensor(value.type) for value in op.results):
        raise _refusal("a value that is not a tensor", op, op, axes)


def _refusal(
    problem: str, at: ir.Operation, op: ir.Operation, axes: Sequence[str]
) -> DiagnosticError:
    what = "loop" if op.name == "stablehlo.while" else "branch"
    where = ", ".join(f"'{axis}'" for axis in axes)
    message = (
        f"{problem} in a {what} whose predicate differs between the devices of {where}, "
        f"around a collective over {where}: every device must run such a {what} (as "
        f"jax.vmap runs a batched one), which would run it where it was not taken; move "
        f"it out of the {what}, or make the predicate the same on every device of {where}"
    )
    note = Diagnostic("note", f"the {what} is here", ir.source_loc(op.location))
    return DiagnosticError(
        Diagnostic("error", message, ir.source_loc(at.location), (note,), Category.UNSUPPORTED)
    )


def _ops_reached(op: ir.Operation, functions) -> list[ir.Operation]:
    """The ops nested in `op` and in the functions it calls, transitively."""
    reached, visited, stack = [], set(), [op]
    while stack:
        for nested in ir.walk(stack.pop()):
            reached.append(nested)
            if nested.name == "func.call":
                callee = ir.callee_of(nested)
                if callee in functions and callee not in visited:
                    visited.add(callee)
                    stack.append(functions[callee])
    return reached


def _has_side_effect(op: ir.Operation) -> bool:
    attr = op.attributes[SIDE_EFFECT_ATTR] if SIDE_EFFECT_ATTR in op.attributes else None
    return attr is not None and bool(ir.as_bool(attr))


def _predicate_branches(op: ir.Operation, rewriter: Rewriter) -> None:
    """Every branch's ops before `op`, then its results selected by the predicate."""
    branches = [rewriter.inline(region.blocks[0], op, []) for region in op.regions]
    b = rewriter.before(op)
    predicate = op.operands[0]
    if op.name == "stablehlo.if":
        results = [hlo.select(b, predicate, t, f) for t, f in zip(*branches)]
    else:
        results = branches[-1]  # stablehlo.case: an index out of range takes the last
        for index in reversed(range(len(branches) - 1)):
            taken = hlo.compare(b, "EQ", predicate, hlo.i32_scalar(b, index))
            results = [hlo.select(b, taken, t, f) for t, f in zip(branches[index], results)]
    rewriter.replace(op, results)


def _predicate_loop(op: ir.Operation, axes: Sequence[str], rewriter: Rewriter) -> None:
    """`op`'s condition: any device of the group over `axes` continues; its body:
    each device's carries advance only while its own condition holds."""
    condition, body = (region.blocks[0] for region in op.regions)
    first = body.operations[0].operation
    (still,) = _clone_before(rewriter.before(first, op.location), condition, body.arguments)
    yields = ir.terminator(body)
    b = rewriter.before(yields)
    for index, (carried, advanced) in enumerate(zip(body.arguments, list(yields.operands))):
        rewriter.set_operand(yields, index, hlo.select(b, still, advanced, carried))

    continues = ir.terminator(condition)
    own = continues.operands[0]
    b = rewriter.before(continues)
    anyone = dialect.create_collective(b, "pmax", [own], [own.type], axes, ReductionParams())
    rewriter.set_operand(continues, 0, anyone.results[0])


def _clone_before(b: Builder, block: ir.Block, arguments: Sequence[ir.Value]) -> list[ir.Value]:
    """Copies of `block`'s ops at `b`, reading `arguments` for its arguments (and the
    copies' results for the originals', inside nested regions too); the values its
    terminator returns, as copied."""
    copied: dict[ir.Value, ir.Value] = dict(zip(block.arguments, arguments))
    *body, terminator = [op.operation for op in block.operations]
    for original in body:
        copy = b.clone(original)
        for nested in [copy, *ir.walk(copy)]:
            for index, operand in enumerate(list(nested.operands)):
                if operand in copied:
                    b.rewriter.set_operand(nested, index, copied[operand])
        copied.update(zip(original.results, copy.results))
    return [copied.get(value, value) for value in terminator.operands]
