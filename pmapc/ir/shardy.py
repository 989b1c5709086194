"""Collective and Shardy attributes: channel handles, replica groups, meshes
and their axes.

(pmapc/ir/__init__.py: the one adapter over jaxlib's MLIR bindings.)
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import NamedTuple

import jaxlib.version
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import sdy as _sdy
from jaxlib.mlir.dialects import stablehlo as _stablehlo

from pmapc.ir.attributes import as_int, i64_attr, string_attr

DEVICE_TO_DEVICE_CHANNEL = 1  # stablehlo.channel_handle's type for collectives


def channel_handle_attr(handle: int) -> ir.Attribute:
    return _stablehlo.ChannelHandle.get(int(handle), DEVICE_TO_DEVICE_CHANNEL)


def module_int_attr(module: ir.Module, name: str) -> int | None:
    """An integer attribute of the module (e.g. mhlo.num_partitions), or None."""
    attributes = module.operation.attributes
    return as_int(attributes[name]) if name in attributes else None


def function_type_attr(inputs: Sequence[ir.Type], results: Sequence[ir.Type]) -> ir.Attribute:
    return ir.TypeAttr.get(ir.FunctionType.get(list(inputs), list(results)))


def sdy_mesh_attr(axes: Sequence[tuple[str, int]]) -> ir.Attribute:
    """`#sdy.mesh<["a"=2, "b"=4]>` of (name, size) pairs, major first."""
    return _sdy.MeshAttr.get([_sdy.MeshAxisAttr.get(name, size) for name, size in axes])


def sdy_mesh_axes(attr: ir.Attribute) -> tuple[tuple[tuple[str, int], ...], tuple[int, ...]]:
    """The (name, size) axes of an `#sdy.mesh<...>` attribute, major first, and its
    device ids (empty: the devices in mesh order)."""
    mesh = _sdy.MeshAttr(attr)
    axes = tuple((axis.name, axis.size) for axis in (_sdy.MeshAxisAttr(a) for a in mesh.axes))
    return axes, tuple(int(device) for device in mesh.device_ids)


# Whether jaxlib's StableHLO knows mesh-axis replica groups (and so the XLA shipped
# with it reads them; pmapc's tests run both forms at both ends of its JAX range).
MESH_AXIS_GROUPS: bool = hasattr(_stablehlo, "ReplicaGroupMeshAxesAttr")

# XLA reads mesh-axis groups over axes whose names hold a double quote (pmapc's label
# of a tuple axis name, say) from jaxlib 0.11.2 on; 0.10.2 reports "Unknown axis".
_QUOTED_AXES = tuple(int(part) for part in jaxlib.version.__version__.split(".")[:3]) >= (0, 11, 2)


def mesh_axis_name_readable(name: str) -> bool:
    """Whether the XLA in use reads mesh-axis replica groups over an axis so named."""
    return _QUOTED_AXES or '"' not in name


# The discardable attribute JAX puts on an `sdy.mesh` that replica groups name:
# the mesh as StableHLO spells it.
STABLEHLO_MESH = "stablehlo.mesh"


def mesh_axis_groups_attr(mesh: str, axes: Sequence[str]) -> ir.Attribute:
    """`#stablehlo.replica_group_mesh_axes<mesh = @mesh, axes = [...]>`: one replica
    group for each position along the other axes of the `sdy.mesh` op `mesh`, holding
    the devices along `axes` in their order (the first the most major)."""
    refs = ir.ArrayAttr.get([_stablehlo.AxisRefAttr.get(axis) for axis in axes])
    return _stablehlo.ReplicaGroupMeshAxesAttr.get(ir.FlatSymbolRefAttr.get(mesh), refs)


def stablehlo_mesh_dict(axes: Sequence[tuple[str, int]]) -> ir.Attribute:
    """`{axes = [{name = "a", size = 2 : i64}, ...]}`, the `stablehlo.mesh` attribute."""
    return ir.DictAttr.get(
        {
            "axes": ir.ArrayAttr.get(
                [
                    ir.DictAttr.get({"name": string_attr(name), "size": i64_attr(size)})
                    for name, size in axes
                ]
            )
        }
    )


class MeshAxisGroups(NamedTuple):
    """Replica groups written as mesh axes: the mesh (the symbol of an `sdy.mesh` op,
    or its (name, size) axes written inline) and the axes, major first."""

    mesh: str | tuple[tuple[str, int], ...]
    axes: tuple[str, ...]


class MalformedAttribute(ValueError):
    """An attribute that parses but does not hold what its kind must (a mutated module)."""


def as_mesh_axis_groups(attr: ir.Attribute) -> MeshAxisGroups | None:
    """The mesh and axes of `#stablehlo.replica_group_mesh_axes<...>`; None for any
    other attribute (dense groups) and for groups over parts of axes (sub-axes)."""
    if not MESH_AXIS_GROUPS or not _stablehlo.ReplicaGroupMeshAxesAttr.isinstance(attr):
        return None
    groups = _stablehlo.ReplicaGroupMeshAxesAttr(attr)
    entries = list(ir.ArrayAttr(groups.axes))
    if not all(_stablehlo.AxisRefAttr.isinstance(entry) for entry in entries):
        raise MalformedAttribute(
            f"replica groups' axes must be axis references (#stablehlo.axis_ref<...>), "
            f"got {groups.axes}"
        )
    refs = [_stablehlo.AxisRefAttr(entry) for entry in entries]
    if any(ref.sub_axis_info is not None for ref in refs):
        return None
    mesh: str | tuple[tuple[str, int], ...]
    if isinstance(groups.mesh, ir.FlatSymbolRefAttr):
        mesh = groups.mesh.value
    else:
        inline = ir.ArrayAttr(_stablehlo.MeshAttr(groups.mesh).axes)
        mesh = tuple(
            (axis.name, axis.size) for axis in (_stablehlo.MeshAxisAttr(a) for a in inline)
        )
    return MeshAxisGroups(mesh, tuple(ref.name for ref in refs))


def symbol_names(module: ir.Module) -> set[str]:
    """The symbols the module's top-level ops define (functions, meshes, ...)."""
    names = set()
    for op in module.body.operations:
        attributes = op.operation.attributes
        if "sym_name" in attributes and isinstance(attributes["sym_name"], ir.StringAttr):
            names.add(ir.StringAttr(attributes["sym_name"]).value)
    return names


def unused_symbol(taken: Collection[str], base: str) -> str:
    """`base`, else `base_1`, `base_2`, ...: the first that is not in `taken`."""
    candidate, number = base, 0
    while candidate in taken:
        number += 1
        candidate = f"{base}_{number}"
    return candidate


def sdy_sharding_attr(mesh: str, split: Sequence[Sequence[str]]) -> ir.Attribute:
    """`#sdy.sharding<@mesh, [{"a"}, {}]>`: dimension d split over the axes `split[d]`."""
    dimensions = [
        _sdy.DimensionShardingAttr.get(
            [_sdy.AxisRefAttr.get(axis) for axis in axes], is_closed=True
        )
        for axes in split
    ]
    return _sdy.TensorShardingAttr.get(mesh, dimensions, [], [])


def sdy_sharding_per_value_attr(
    mesh: str, splits: Sequence[Sequence[Sequence[str]]]
) -> ir.Attribute:
    return _sdy.TensorShardingPerValueAttr.get([sdy_sharding_attr(mesh, s) for s in splits])


def sdy_manual_axes_attr(axes: Sequence[str]) -> ir.Attribute:
    return _sdy.ManualAxesAttr.get([ir.StringAttr.get(axis) for axis in axes])


def unknown_location(context: ir.Context) -> ir.Location:
    return ir.Location.unknown(context)


def module_body_start(module: ir.Module) -> ir.InsertionPoint:
    return ir.InsertionPoint.at_block_begin(module.body)


def module_body_end(module: ir.Module) -> ir.InsertionPoint:
    return ir.InsertionPoint(module.body)


def copy_module(module: ir.Module) -> ir.Module:
    """A copy of `module` in its context (its attributes and top-level ops)."""
    with module.context, ir.Location.unknown(module.context):
        copy = ir.Module.create()
        attributes = module.operation.attributes
        for name in attributes:
            copy.operation.attributes[name] = attributes[name]
        for op in module.body.operations:
            op.clone(ip=ir.InsertionPoint(copy.body))
    return copy


def parse_into(module: bytes | str, context: ir.Context) -> ir.Module:
    """`module`, bytecode or text, parsed in `context` (a module pmapc wrote: no
    diagnostics expected)."""
    return ir.Module.parse(module, context=context)


def rename_symbol(module: ir.Module, old: str, new: str) -> None:
    """Rename symbol `old` to `new` everywhere in `module`'s uses."""
    ir.SymbolTable.replace_all_symbol_uses(old, new, module.operation)
