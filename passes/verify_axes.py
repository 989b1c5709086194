"""verify-axes: check that every map and collective is well formed and bound.

Reports, at each op's location: a collective axis that no enclosing map binds,
an axis named twice, sibling maps whose sizes share no device layout, and
operand or result types that do not fit `in_axes`, `out_axes`, the axis size
or the collective's parameters. Changes nothing.
"""

from __future__ import annotations

import dataclasses
import math
from typing import ClassVar

from pmapc import collectives, dialect, ir, shapes
from pmapc.errors import Category, DiagnosticError, ShapeError, did_you_mean
from pmapc.layout import Chain
from pmapc.passes.base import Analyses, Analysis, Form
from pmapc.passes.nesting import Nesting, analyze
from pmapc.rewriter import Rewriter


def verified_nesting(module: ir.Module) -> Nesting:
    """The nesting analysis of a module whose maps and collectives pass every check
    (the analysis flatten-maps needs: it runs the checks itself when verify-axes did
    not just run); DiagnosticError with every problem otherwise."""
    errors = []
    views = dialect.Views()
    functions = ir.functions(module)
    checked: set[tuple] = set()

    def visit(op: ir.Operation, scope: Chain, nesting: Nesting, is_map: bool) -> None:
        try:
            if is_map:
                check_map(views.map(op), functions)
            else:
                check_collective(views.collective(op), scope, checked)
        except DiagnosticError as error:
            errors.extend(error.diagnostics)

    nesting = analyze(module, visit, views)
    if errors:
        raise DiagnosticError(errors)
    return nesting


@dataclasses.dataclass(frozen=True)
class VerifyAxesPass:
    """Check that maps and named-axis collectives are well formed and their axes bound."""

    name: ClassVar[str] = "verify-axes"
    accepts: ClassVar[Form] = Form.PMAPC
    # No `keeps`: it changes nothing (`run` returns False), so every analysis survives it.
    reads: ClassVar[tuple[Analysis, ...]] = (verified_nesting,)

    def run(self, module: ir.Module, analyses: Analyses, rewriter: Rewriter) -> bool:
        # The nesting analysis it walks the program for is flatten-maps' too.
        analyses.get(verified_nesting, module)
        return False


def resolve_axes(view: dialect.CollectiveView, scope: Chain) -> list[int]:
    """The positions in `scope` of the maps that a collective's axes refer to; errors
    name the axis and the fix."""
    op, kind = view.op, view.kind
    seen = set()
    levels = []
    for axis in view.axes:
        if axis in seen:
            raise dialect.error_at(
                op, f"'{kind}' names axis '{axis}' twice; name each axis once", Category.AXIS
            )
        seen.add(axis)
        level = Nesting.resolve(scope, axis)
        if level is None:
            raise dialect.error_at(
                op, unbound_axis_message(axis, Nesting.bound_names(scope)), Category.AXIS
            )
        levels.append(level)
    return levels


def shape_error(op, message: str):
    """A diagnostic about a shape that does not fit a map or a collective."""
    return dialect.error_at(op, message, Category.SHAPE)


def unbound_axis_message(axis: str, bound: list[str]) -> str:
    if not bound:
        return (
            f"axis '{axis}' is not bound here: no enclosing map binds an axis; "
            "use named-axis collectives inside a map body"
        )
    names = ", ".join(f"'{name}'" for name in bound)
    return f"axis '{axis}' is not bound here; bound axes are {names}{did_you_mean(axis, bound)}"


def check_collective(
    view: dialect.CollectiveView, scope: Chain, checked: set[tuple] | None = None
) -> None:
    """Check one collective; `checked` remembers what passed, so a collective equal to
    one already checked (kind, config, scope and types) costs one lookup."""
    op = view.op
    key = (
        view.collective,
        view.config,
        scope,
        *(v.type for v in op.operands),
        None,
        *(v.type for v in op.results),
    )
    if checked is not None and key in checked:
        return
    _check_collective(view, scope)
    if checked is not None:
        checked.add(key)


def _check_collective(view: dialect.CollectiveView, scope: Chain) -> None:
    op = view.op
    levels = resolve_axes(view, scope)
    group_size = math.prod(scope[level][1] for level in levels)
    if view.collective is collectives.AXIS_INDEX:
        _check_axis_index(op)
        return
    operands, results = list(op.operands), list(op.results)
    if view.collective.operands:
        _check_fixed_operands(view, operands, results, group_size)
        return
    if not operands or len(operands) != len(results):
        raise shape_error(
            op,
            f"'{view.kind}' needs one result per operand and at least "
            f"one operand, got {len(operands)} operands and "
            f"{len(results)} results",
        )
    if not view.collective.reduction and len(operands) != 1:
        raise shape_error(op, f"'{view.kind}' takes exactly one operand, got {len(operands)}")
    for operand, result in zip(operands, results):
        _check_result_type(view, operand.type, result.type, group_size)


def _check_fixed_operands(view, operands: list, results: list, group_size: int) -> None:
    """A kind of fixed operands and one result (ragged_all_to_all): their count, that
    they are ranked tensors, the integer ones integers, the data ones (the first
    two) of one element type, and the result's type."""
    op, names = view.op, view.collective.operands
    if len(operands) != len(names) or len(results) != 1:
        raise shape_error(
            op,
            f"'{view.kind}' takes {len(names)} operands ({', '.join(names)}) and returns one "
            f"result, got {len(operands)} operands and {len(results)} results",
        )
    types = [operand.type for operand in operands]
    for name, type_ in zip(names, types):
        if not ir.is_ranked_tensor(type_):
            raise shape_error(op, f"'{view.kind}' works on ranked tensors, got {type_} for {name}")
        if name in view.collective.integer_operands and not ir.is_integer_type(
            ir.element_type_of(type_)
        ):
            raise shape_error(op, f"'{view.kind}' needs integer {name}, got {type_}")
    data = ir.element_type_of(types[0])
    if ir.element_type_of(types[1]) != data:
        raise shape_error(
            op,
            f"'{view.kind}' writes {names[0]} {types[0]} into {names[1]} {types[1]}: "
            "give them one element type",
        )
    try:
        (shape,) = view.collective.result_shapes(
            view.params, [ir.shape_of(t) for t in types], view.axes, group_size
        )
    except ShapeError as error:
        raise shape_error(op, str(error)) from None
    expected = ir.tensor_type(shape, data)
    if results[0].type != expected:
        raise shape_error(
            op, f"'{view.kind}' returns {expected}, but the op says {results[0].type}"
        )


def _check_axis_index(op: ir.Operation) -> None:
    expected = ir.tensor_type([], ir.i32_type())
    if len(op.operands) != 0 or len(op.results) != 1 or op.results[0].type != expected:
        raise shape_error(op, f"'axis_index' takes no operand and returns {expected}")


def _check_result_type(view, operand_type, result_type, group_size) -> None:
    op = view.op
    if not ir.is_ranked_tensor(operand_type) or not ir.is_ranked_tensor(result_type):
        raise shape_error(op, f"'{view.kind}' works on ranked tensors, got {operand_type}")
    try:
        shape = view.collective.result_shape(
            view.params, ir.shape_of(operand_type), view.axes, group_size
        )
    except ShapeError as error:
        raise shape_error(op, str(error)) from None
    expected = ir.tensor_type(shape, ir.element_type_of(operand_type))
    if result_type != expected:
        where = shapes.describe_axes(view.axes, group_size)
        raise shape_error(
            op,
            f"'{view.kind}' over {where} of {operand_type} returns "
            f"{expected}, but the op says {result_type}",
        )


def check_map(view: dialect.MapView, functions: dict[str, ir.Operation]) -> None:
    op = view.op
    callee_type = ir.function_type(functions[view.callee])
    body_inputs, body_results = callee_type.inputs, callee_type.results  # each read builds a list
    operands, results = list(op.operands), list(op.results)
    _check_counts(view, "in_axes", "operands", len(view.in_axes), len(operands))
    _check_counts(view, "out_axes", "results", len(view.out_axes), len(results))
    _check_counts(view, "body arguments", "operands", len(body_inputs), len(operands))
    _check_counts(view, "body results", "results", len(body_results), len(results))
    for index, (operand, in_axis) in enumerate(zip(operands, view.in_axes)):
        _check_map_operand(view, index, operand.type, in_axis, body_inputs[index])
    for index, (result, out_axis) in enumerate(zip(results, view.out_axes)):
        _check_map_result(view, index, result.type, out_axis, body_results[index])


def _check_counts(view, what, of, count, expected) -> None:
    if count != expected:
        raise shape_error(
            view.op,
            f"map over '{view.axis_name}' has {count} {what} for "
            f"{expected} {of}; give one per {of[:-1]}",
        )


def _check_map_operand(view, index, operand_type, in_axis, body_type) -> None:
    where = f"operand #{index} of the map over '{view.axis_name}'"
    if not ir.is_ranked_tensor(operand_type):
        raise shape_error(view.op, f"{where} must be a ranked tensor, got {operand_type}")
    try:
        shape = shapes.mapped_operand_shape(
            ir.shape_of(operand_type), in_axis, view.axis_size, view.axis_name
        )
    except ShapeError as error:
        raise shape_error(view.op, f"{where}: {error}") from None
    expected = ir.tensor_type(shape, ir.element_type_of(operand_type))
    if body_type != expected:
        raise shape_error(
            view.op,
            f"{where} is {operand_type}, so its body "
            f"'@{view.callee}' must take {expected}, got {body_type}",
        )


def _check_map_result(view, index, result_type, out_axis, body_type) -> None:
    where = f"result #{index} of the map over '{view.axis_name}'"
    if not ir.is_ranked_tensor(body_type):
        raise shape_error(view.op, f"{where} must be a ranked tensor, got {body_type}")
    try:
        shape = shapes.mapped_result_shape(
            ir.shape_of(body_type), out_axis, view.axis_size, view.axis_name
        )
    except ShapeError as error:
        raise shape_error(view.op, f"{where}: {error}") from None
    expected = ir.tensor_type(shape, ir.element_type_of(body_type))
    if result_type != expected:
        raise shape_error(
            view.op,
            f"{where}: the body '@{view.callee}' returns "
            f"{body_type}, so the map returns {expected}, not {result_type}",
        )
