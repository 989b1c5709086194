"""Builders for the handful of StableHLO ops the passes create.

Each takes an insertion point and a location and returns the new op's result.
Ops are created generically by name through `pmapc.ir`, so these survive
changes in the generated Python op classes. Each checks its operands' types
before building: an op that would not fit is a `BuildError` (the pass that
asked is named by the driver, `compiler/pipeline.py`), never IR that only
fails later, far from its cause.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pmapc import ir


def constant_op(attr: ir.Attribute, type_: ir.Type, *, loc, ip) -> ir.Operation:
    return ir.create_op("stablehlo.constant", [], [type_], {"value": attr}, loc=loc, ip=ip)


def constant(attr: ir.Attribute, type_: ir.Type, *, loc, ip) -> ir.Value:
    return constant_op(attr, type_, loc=loc, ip=ip).result


def i32_scalar(value: int, *, loc, ip) -> ir.Value:
    return constant(ir.scalar_i32_attr(value), ir.tensor_type([], ir.i32_type()), loc=loc, ip=ip)


def zeros(type_: ir.Type, *, loc, ip) -> ir.Value:
    return constant(ir.zero_attr(type_), type_, loc=loc, ip=ip)


class BuildError(ValueError):
    """A builder was asked for an op whose operand types do not fit (a pmapc bug)."""


def _check(fits: bool, message: str) -> None:
    if not fits:
        raise BuildError(message)


def reshape(value: ir.Value, shape: Sequence[int], *, loc, ip) -> ir.Value:
    have = ir.shape_of(value.type)
    if have == tuple(shape):
        return value
    _check(int(np.prod(have)) == int(np.prod(shape)),
           f"reshape of {value.type} to {list(shape)}: the element counts differ")
    result_type = ir.tensor_type(shape, ir.element_type_of(value.type))
    return ir.create_op("stablehlo.reshape", [value], [result_type], loc=loc, ip=ip).result


def insert_unit_dim(value: ir.Value, dim: int, *, loc, ip) -> ir.Value:
    shape = list(ir.shape_of(value.type))
    shape.insert(dim, 1)
    return reshape(value, shape, loc=loc, ip=ip)


def drop_dim(value: ir.Value, dim: int, *, loc, ip) -> ir.Value:
    shape = list(ir.shape_of(value.type))
    _check(0 <= dim < len(shape) and shape[dim] == 1,
           f"dropping dimension {dim} of {value.type}: it is not a unit dimension")
    del shape[dim]
    return reshape(value, shape, loc=loc, ip=ip)


def dynamic_slice(
    value: ir.Value, starts: Sequence[ir.Value], sizes: Sequence[int], *, loc, ip
) -> ir.Value:
    shape = ir.shape_of(value.type)
    _check(len(starts) == len(shape) == len(sizes)
           and all(0 <= size <= dim for size, dim in zip(sizes, shape)),
           f"dynamic_slice of {value.type} with {len(starts)} start(s) and sizes "
           f"{list(sizes)}: one start and a size within each dimension are needed")
    result_type = ir.tensor_type(sizes, ir.element_type_of(value.type))
    attributes = {"slice_sizes": ir.dense_i64_array_attr(sizes)}
    op = ir.create_op(
        "stablehlo.dynamic_slice", [value, *starts], [result_type], attributes, loc=loc, ip=ip
    )
    return op.result


def convert(value: ir.Value, element_type: ir.Type, *, loc, ip) -> ir.Value:
    result_type = ir.tensor_type(ir.shape_of(value.type), element_type)
    return ir.create_op("stablehlo.convert", [value], [result_type], loc=loc, ip=ip).result


def binary(name: str, lhs: ir.Value, rhs: ir.Value, *, loc, ip) -> ir.Value:
    """stablehlo.{add, multiply, divide, remainder, ...} of two same-typed values."""
    _check(lhs.type == rhs.type, f"stablehlo.{name} of {lhs.type} and {rhs.type}: the "
           "operand types differ")
    return ir.create_op(f"stablehlo.{name}", [lhs, rhs], [lhs.type], loc=loc, ip=ip).result


def replica_id(*, loc, ip) -> ir.Value:
    ui32 = ir.tensor_type([], ir.ui32_type())
    return ir.create_op("stablehlo.replica_id", [], [ui32], loc=loc, ip=ip).result


def build_reducer(region: ir.Region, element_type: ir.Type, reducer: str, *, loc) -> None:
    """Fill an all_reduce/reduce_scatter region with the scalar op `reducer`.

    `reducer` is a collective's (pmapc/collectives.py): stablehlo.add, maximum
    or minimum, defined on floats, integers and booleans (on i1 they are or,
    or and and).
    """
    scalar = ir.tensor_type([], element_type)
    block = ir.add_block(region, [scalar, scalar])
    ip = ir.InsertionPoint(block)
    lhs, rhs = block.arguments
    combined = ir.create_op(reducer, [lhs, rhs], [scalar], loc=loc, ip=ip).result
    ir.create_op("stablehlo.return", [combined], [], loc=loc, ip=ip)


def groups_attr(groups: np.ndarray) -> ir.Attribute:
    return ir.dense_i64_attr(groups)


def reduction_identity(element_type: ir.Type, reducer: str) -> ir.Attribute:
    """The scalar identity of `reducer` (stablehlo.add, maximum or minimum) on `element_type`."""
    scalar = ir.tensor_type([], element_type)
    if ir.is_complex_type(element_type):  # complex numbers are only added
        return ir.zero_attr(scalar)
    if ir.is_float_type(element_type):
        float_identities = {
            "stablehlo.add": 0.0,
            "stablehlo.maximum": float("-inf"),
            "stablehlo.minimum": float("inf"),
        }
        return ir.float_splat_attr(scalar, float_identities[reducer])
    low, high = ir.integer_range(element_type)
    integer_identities = {"stablehlo.add": 0, "stablehlo.maximum": low, "stablehlo.minimum": high}
    return ir.integer_splat_attr(scalar, integer_identities[reducer])


def reduce_dims(value: ir.Value, dims: Sequence[int], reducer: str, *, loc, ip) -> ir.Value:
    """Reduce `value` over array dimensions `dims` locally with `reducer` (see build_reducer)."""
    element_type = ir.element_type_of(value.type)
    init = constant(reduction_identity(element_type, reducer), ir.tensor_type([], element_type),
                    loc=loc, ip=ip)
    shape = [size for dim, size in enumerate(ir.shape_of(value.type)) if dim not in dims]
    op = ir.create_op("stablehlo.reduce", [value, init], [ir.tensor_type(shape, element_type)],
                      {"dimensions": ir.dense_i64_array_attr(sorted(dims))},
                      loc=loc, ip=ip, regions=1)
    build_reducer(op.regions[0], element_type, reducer, loc=loc)
    return op.result


def broadcast_scalar(scalar: ir.Value, result_type: ir.Type, *, loc, ip) -> ir.Value:
    attributes = {"broadcast_dimensions": ir.dense_i64_array_attr([])}
    return ir.create_op("stablehlo.broadcast_in_dim", [scalar], [result_type], attributes,
                        loc=loc, ip=ip).result
