"""Builders for the handful of StableHLO ops the passes create.

Each takes a `Builder` (pmapc/rewriter.py: where, at which location, through
which rewriter) and returns the new op's result. Ops are created generically by
name, so these survive changes in the generated Python op classes. Each checks its operands' types
before building: an op that would not fit is a `BuildError` (the pass that
asked is named by the driver, `compiler/pipeline.py`), never IR that only
fails later, far from its cause.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from pmapc import ir
from pmapc.mesh import Mesh, ReplicaGroups

if TYPE_CHECKING:
    from pmapc.rewriter import Builder


# The StableHLO collectives pmapc emits, in this order (to-partitions reads the
# first three as those that take use_global_device_ids, the first four as those
# with replica_groups): op name -> the name the communication plan shows.
COLLECTIVE_OPS: dict[str, str] = {
    "stablehlo.all_reduce": "all_reduce",
    "stablehlo.all_gather": "all_gather",
    "stablehlo.reduce_scatter": "reduce_scatter",
    "stablehlo.all_to_all": "all_to_all",
    "stablehlo.collective_permute": "collective_permute",
}


def constant_op(b: Builder, attr: ir.Attribute, type_: ir.Type) -> ir.Operation:
    return b.create("stablehlo.constant", [], [type_], {"value": attr})


def constant(b: Builder, attr: ir.Attribute, type_: ir.Type) -> ir.Value:
    return constant_op(b, attr, type_).result


def i32_scalar(b: Builder, value: int) -> ir.Value:
    return constant(b, ir.scalar_i32_attr(value), ir.tensor_type([], ir.i32_type()))


def zeros(b: Builder, type_: ir.Type) -> ir.Value:
    return constant(b, ir.zero_attr(type_), type_)


# StableHLO's control flow: the branches (a case's by index, an if's by a boolean)
# and the loop.
BRANCHES = frozenset({"stablehlo.case", "stablehlo.if"})
CONTROL_FLOW = BRANCHES | {"stablehlo.while"}

# The elementwise ops of one result whose operands and result have one shape: each
# element of the result is a function of the elements at its position alone.
ELEMENTWISE = frozenset(
    f"stablehlo.{name}"
    for name in (
        "add subtract multiply divide maximum minimum power remainder and or xor atan2 compare "
        "negate abs exponential exponential_minus_one log log_plus_one sqrt rsqrt cbrt tanh "
        "logistic convert sine cosine tan floor ceil sign not round_nearest_even "
        "round_nearest_afz is_finite"
    ).split()
)


class BuildError(ValueError):
    """A builder was asked for an op whose operand types do not fit (a pmapc bug)."""


def _check(fits: bool, message: str) -> None:
    if not fits:
        raise BuildError(message)


def reshape(b: Builder, value: ir.Value, shape: Sequence[int]) -> ir.Value:
    have = ir.shape_of(value.type)
    if have == tuple(shape):
        return value
    _check(
        math.prod(have) == math.prod(shape),
        f"reshape of {value.type} to {list(shape)}: the element counts differ",
    )
    result_type = ir.tensor_type(shape, ir.element_type_of(value.type))
    return b.create("stablehlo.reshape", [value], [result_type]).result


def insert_unit_dim(b: Builder, value: ir.Value, dim: int) -> ir.Value:
    shape = list(ir.shape_of(value.type))
    shape.insert(dim, 1)
    return reshape(b, value, shape)


def drop_dim(b: Builder, value: ir.Value, dim: int) -> ir.Value:
    shape = list(ir.shape_of(value.type))
    _check(
        0 <= dim < len(shape) and shape[dim] == 1,
        f"dropping dimension {dim} of {value.type}: it is not a unit dimension",
    )
    del shape[dim]
    return reshape(b, value, shape)


def dynamic_slice(
    b: Builder, value: ir.Value, starts: Sequence[ir.Value], sizes: Sequence[int]
) -> ir.Value:
    shape = ir.shape_of(value.type)
    _check(
        len(starts) == len(shape) == len(sizes)
        and all(0 <= size <= dim for size, dim in zip(sizes, shape)),
        f"dynamic_slice of {value.type} with {len(starts)} start(s) and sizes "
        f"{list(sizes)}: one start and a size within each dimension are needed",
    )
    result_type = ir.tensor_type(sizes, ir.element_type_of(value.type))
    attributes = {"slice_sizes": ir.dense_i64_array_attr(sizes)}
    return b.create("stablehlo.dynamic_slice", [value, *starts], [result_type], attributes).result


def convert(b: Builder, value: ir.Value, element_type: ir.Type) -> ir.Value:
    result_type = ir.tensor_type(ir.shape_of(value.type), element_type)
    return b.create("stablehlo.convert", [value], [result_type]).result


def binary(b: Builder, name: str, lhs: ir.Value, rhs: ir.Value) -> ir.Value:
    """stablehlo.{add, multiply, divide, remainder, ...} of two same-typed values."""
    _check(
        lhs.type == rhs.type,
        f"stablehlo.{name} of {lhs.type} and {rhs.type}: the operand types differ",
    )
    return b.create(f"stablehlo.{name}", [lhs, rhs], [lhs.type]).result


def compare(b: Builder, direction: str, lhs: ir.Value, rhs: ir.Value) -> ir.Value:
    """stablehlo.compare `direction` ("EQ", "LT", ...) of two same-typed values: i1s."""
    _check(lhs.type == rhs.type, f"compare of {lhs.type} and {rhs.type}: the operand types differ")
    result_type = ir.tensor_type(ir.shape_of(lhs.type), ir.i1_type())
    attributes = {"comparison_direction": ir.comparison_direction_attr(direction)}
    return b.create("stablehlo.compare", [lhs, rhs], [result_type], attributes).result


def select(b: Builder, predicate: ir.Value, on_true: ir.Value, on_false: ir.Value) -> ir.Value:
    """stablehlo.select: `on_true` where `predicate` (an i1 scalar, or one per element)
    holds, else `on_false`."""
    _check(
        on_true.type == on_false.type,
        f"select of {on_true.type} and {on_false.type}: the operand types differ",
    )
    return b.create("stablehlo.select", [predicate, on_true, on_false], [on_true.type]).result


def replica_id(b: Builder) -> ir.Value:
    ui32 = ir.tensor_type([], ir.ui32_type())
    return b.create("stablehlo.replica_id", [], [ui32]).result


def build_reducer(b: Builder, region: ir.Region, element_type: ir.Type, reducer: str) -> None:
    """Fill an all_reduce/reduce_scatter region with the scalar op `reducer`.

    `reducer` is a collective's (pmapc/collectives.py): stablehlo.add, maximum
    or minimum, defined on floats, integers and booleans (on i1 they are or,
    or and and).
    """
    scalar = ir.tensor_type([], element_type)
    block = ir.add_block(region, [scalar, scalar])
    inside = b.rewriter.at_end(block, b.loc)
    lhs, rhs = block.arguments
    combined = inside.create(reducer, [lhs, rhs], [scalar]).result
    inside.create("stablehlo.return", [combined], [])


def groups_attr(groups: np.ndarray) -> ir.Attribute:
    return ir.dense_i64_attr(groups)


# ----------------------------------------------------------------------------
# Replica groups in either form: dense (a matrix of device ids) or mesh axes
# (`#stablehlo.replica_group_mesh_axes`, over an `sdy.mesh` op or a mesh inline)


class GroupsError(ValueError):
    """Mesh-axis replica groups that name a mesh or an axis the module lacks."""


@dataclasses.dataclass(frozen=True)
class MeshDevices:
    """An `sdy.mesh`: its axes, and the device of each mesh position (empty: the
    position itself)."""

    mesh: Mesh
    device_ids: tuple[int, ...] = ()


def mesh_symbol(b: Builder, module: ir.Module, mesh: Mesh, meshes: dict[str, MeshDevices]) -> str:
    """The symbol of an `sdy.mesh` op of `mesh` (its devices in mesh order): one of
    the module's `meshes` (`meshes_of`), else a new one `b` builds (at the top of the
    module), `@mesh` unless that is taken, which joins `meshes`."""
    wanted = MeshDevices(mesh)
    for name, found in meshes.items():
        if found == wanted:
            return name
    name = ir.unused_symbol(ir.symbol_names(module), "mesh")
    axes = list(zip(mesh.axis_names, mesh.axis_sizes))
    attributes = {
        "sym_name": ir.string_attr(name),
        "mesh": ir.sdy_mesh_attr(axes),
        ir.STABLEHLO_MESH: ir.stablehlo_mesh_dict(axes),
    }
    b.create("sdy.mesh", [], [], attributes)
    meshes[name] = wanted
    return name


def meshes_of(module: ir.Module) -> dict[str, MeshDevices]:
    """The module's `sdy.mesh` ops, by symbol."""
    meshes = {}
    for op in module.body.operations:
        op = op.operation
        if op.name == "sdy.mesh":
            axes, device_ids = ir.sdy_mesh_axes(op.attributes["mesh"])
            meshes[ir.symbol_name(op)] = MeshDevices(
                Mesh(tuple(n for n, _ in axes), tuple(s for _, s in axes)), device_ids
            )
    return meshes


def read_groups(attr: ir.Attribute, meshes: dict[str, MeshDevices]) -> ReplicaGroups:
    """The replica groups `attr` holds, in its form: over mesh axes (not listed
    device by device) or a matrix of device ids; GroupsError if it names a mesh
    that is not in `meshes` (`meshes_of`) or an axis its mesh lacks."""
    try:
        named = ir.as_mesh_axis_groups(attr)
    except ir.MalformedAttribute as error:
        raise GroupsError(str(error)) from None
    if named is None:
        return ReplicaGroups.of_ids(ir.dense_int_matrix(attr))
    if isinstance(named.mesh, str):
        if named.mesh not in meshes:
            raise GroupsError(
                f"replica groups name mesh @{named.mesh}, which the module does not define; "
                "add its sdy.mesh op"
            )
        where = meshes[named.mesh]
    else:
        names, sizes = zip(*named.mesh) if named.mesh else ((), ())
        where = MeshDevices(Mesh(tuple(names), tuple(sizes)))
    mesh = where.mesh
    axes = named.axes
    unknown = [axis for axis in axes if axis not in mesh.axis_names]
    repeated = sorted({axis for axis in axes if axes.count(axis) > 1})
    if unknown or repeated or not axes:
        fault = (
            f"'{unknown[0]}' is not an axis of mesh {mesh}"
            if unknown
            else f"they name '{repeated[0]}' twice"
            if repeated
            else "they name no axis"
        )
        raise GroupsError(
            f"replica groups over axes {list(axes)}: {fault}; name axes of the mesh, each once"
        )
    return ReplicaGroups.over_axes(mesh, axes, where.device_ids)


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


def reduce_dims(b: Builder, value: ir.Value, dims: Sequence[int], reducer: str) -> ir.Value:
    """Reduce `value` over array dimensions `dims` locally with `reducer` (see build_reducer)."""
    element_type = ir.element_type_of(value.type)
    init = constant(b, reduction_identity(element_type, reducer), ir.tensor_type([], element_type))
    shape = [size for dim, size in enumerate(ir.shape_of(value.type)) if dim not in dims]
    op = b.create(
        "stablehlo.reduce",
        [value, init],
        [ir.tensor_type(shape, element_type)],
        {"dimensions": ir.dense_i64_array_attr(sorted(dims))},
        regions=1,
    )
    build_reducer(b, op.regions[0], element_type, reducer)
    return op.result


def broadcast_scalar(b: Builder, scalar: ir.Value, result_type: ir.Type) -> ir.Value:
    attributes = {"broadcast_dimensions": ir.dense_i64_array_attr([])}
    return b.create("stablehlo.broadcast_in_dim", [scalar], [result_type], attributes).result


def concatenate(b: Builder, values: Sequence[ir.Value], dim: int) -> ir.Value:
    """stablehlo.concatenate of `values` (one element type, equal but for `dim`) along `dim`."""
    shapes = [ir.shape_of(v.type) for v in values]
    first = shapes[0]
    _check(
        all(
            len(s) == len(first) and s[:dim] == first[:dim] and s[dim + 1 :] == first[dim + 1 :]
            for s in shapes
        ),
        f"concatenate along {dim} of {[str(v.type) for v in values]}: the other dimensions differ",
    )
    shape = list(first)
    shape[dim] = sum(s[dim] for s in shapes)
    result_type = ir.tensor_type(shape, ir.element_type_of(values[0].type))
    attributes = {"dimension": ir.i64_attr(dim)}
    return b.create("stablehlo.concatenate", list(values), [result_type], attributes).result


def iota(b: Builder, type_: ir.Type, dim: int) -> ir.Value:
    """stablehlo.iota: each element its index along `dim`."""
    return b.create("stablehlo.iota", [], [type_], {"iota_dimension": ir.i64_attr(dim)}).result


def broadcast_in_dim(
    b: Builder, value: ir.Value, result_type: ir.Type, dims: Sequence[int]
) -> ir.Value:
    """stablehlo.broadcast_in_dim: `value`'s dimension i becomes the result's `dims[i]`."""
    _check(
        len(dims) == len(ir.shape_of(value.type)),
        f"broadcast_in_dim of {value.type} to {result_type} with dimensions {list(dims)}",
    )
    attributes = {"broadcast_dimensions": ir.dense_i64_array_attr(dims)}
    return b.create("stablehlo.broadcast_in_dim", [value], [result_type], attributes).result


def dynamic_update_slice(
    b: Builder, value: ir.Value, update: ir.Value, starts: Sequence[ir.Value]
) -> ir.Value:
    """`value` with `update` written at `starts` (clamped to fit, as StableHLO does)."""
    shape, update_shape = ir.shape_of(value.type), ir.shape_of(update.type)
    _check(
        len(starts) == len(shape) == len(update_shape)
        and all(u <= d for u, d in zip(update_shape, shape)),
        f"dynamic_update_slice of {value.type} with {update.type} at {len(starts)} start(s)",
    )
    op = b.create("stablehlo.dynamic_update_slice", [value, update, *starts], [value.type])
    return op.result


def slice_rows(b: Builder, value: ir.Value, start: int, stop: int) -> ir.Value:
    """Rows `start` to `stop` (a static stablehlo.slice of the leading dimension)."""
    shape = list(ir.shape_of(value.type))
    _check(0 <= start <= stop <= shape[0], f"rows {start}:{stop} of {value.type}")
    limits = [stop, *shape[1:]]
    attributes = {
        "start_indices": ir.dense_i64_array_attr([start] + [0] * (len(shape) - 1)),
        "limit_indices": ir.dense_i64_array_attr(limits),
        "strides": ir.dense_i64_array_attr([1] * len(shape)),
    }
    result_type = ir.tensor_type([stop - start, *shape[1:]], ir.element_type_of(value.type))
    return b.create("stablehlo.slice", [value], [result_type], attributes).result


def element(b: Builder, vector: ir.Value, index: int) -> ir.Value:
    """Entry `index` of a rank-1 `vector`, as a scalar."""
    return reshape(b, slice_rows(b, vector, index, index + 1), [])
