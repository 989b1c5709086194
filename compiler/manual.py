"""A per-device program on its own, for XLA's partition form: every mesh axis manual.

XLA:CPU refuses `num_partitions > 1` without SPMD partitioning, and the
partitioner refuses a bare `partition_id`; so, as `jax.shard_map` does, the
per-device `@main` runs inside an `sdy.manual_computation` over every mesh axis,
which the partitioner leaves as it is (compiler/xla.py compiles the result).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from pmapc import dialect, hlo, ir
from pmapc.mesh import Mesh
from pmapc.passes import patterns
from pmapc.rewriter import unobserved

Split = Sequence[Sequence[str]]  # per dimension, the mesh axes it is split over


def all_manual(module: ir.Module) -> ir.Module:
    """`module` with its `@main` wrapped in a manual computation over the whole mesh."""
    mesh = dialect.mesh_of(module)
    main = ir.functions(module)["main"]
    arg_splits, result_splits = (patterns.entry_splits(main, kind) for kind in ("arg", "res"))
    return all_manual_module(
        module, list(zip(mesh.axis_names, mesh.axis_sizes)), arg_splits, result_splits
    )


def all_manual_module(
    module: ir.Module,
    mesh_axes: Sequence[tuple[str, int]],
    arg_splits: Sequence[Split],
    result_splits: Sequence[Split],
) -> ir.Module:
    """A copy of `module` whose `@main` runs the per-device `@main` in an
    `sdy.manual_computation` over every axis of `mesh_axes` ((name, size), major first).

    The new `@main` takes and returns global arrays, split per dimension over
    the mesh axes the splits list (major first), as JAX lowers a shard_map.
    """
    copy = ir.copy_module(module)
    with ir.building(copy):
        taken = ir.symbol_names(copy)
        per_device = ir.functions(copy)["main"]
        callee = ir.unused_symbol(taken, "per_device_main")
        per_device.attributes["sym_name"] = ir.string_attr(callee)
        per_device.attributes["sym_visibility"] = ir.string_attr("private")
        top = unobserved(ir.module_body_start(copy), ir.unknown_location(copy.context))
        names, sizes = zip(*mesh_axes)
        mesh = hlo.mesh_symbol(top, copy, Mesh(names, sizes), hlo.meshes_of(copy))
        _add_manual_main(
            copy,
            callee,
            ir.function_type(per_device),
            dict(mesh_axes),
            mesh,
            [name for name, _ in mesh_axes],
            arg_splits,
            result_splits,
        )
    return copy


def _add_manual_main(
    module: ir.Module,
    callee: str,
    local,
    sizes: dict[str, int],
    mesh: str,
    manual_axes: list[str],
    arg_splits: Sequence[Split],
    result_splits: Sequence[Split],
) -> None:
    """`@main` on global arrays: a manual computation calling `callee` on the blocks."""
    global_in = [_global_type(t, s, sizes) for t, s in zip(local.inputs, arg_splits)]
    global_out = [_global_type(t, s, sizes) for t, s in zip(local.results, result_splits)]
    loc = ir.unknown_location(module.context)
    ip = ir.module_body_end(module)
    main, entry = ir.new_function("main", global_in, global_out, public=True, loc=loc, ip=ip)
    main.attributes["arg_attrs"] = ir.array_attr([_sharding(mesh, s) for s in arg_splits])
    main.attributes["res_attrs"] = ir.array_attr([_sharding(mesh, s) for s in result_splits])
    manual = ir.create_op(
        "sdy.manual_computation",
        list(entry.arguments),
        global_out,
        {
            "in_shardings": ir.sdy_sharding_per_value_attr(mesh, arg_splits),
            "out_shardings": ir.sdy_sharding_per_value_attr(mesh, result_splits),
            "manual_axes": ir.sdy_manual_axes_attr(manual_axes),
        },
        loc=loc,
        ip=ir.InsertionPoint(entry),
        regions=1,
    )
    body = ir.add_block(manual.regions[0], list(local.inputs))
    call = ir.create_op(
        "func.call",
        list(body.arguments),
        list(local.results),
        {"callee": ir.symbol_ref_attr(callee)},
        loc=loc,
        ip=ir.InsertionPoint(body),
    )
    ir.create_op("sdy.return", list(call.results), [], loc=loc, ip=ir.InsertionPoint(body))
    ir.create_op("func.return", list(manual.results), [], loc=loc, ip=ir.InsertionPoint(entry))


def _sharding(mesh: str, split: Split) -> ir.Attribute:
    return ir.dict_attr({"sdy.sharding": ir.sdy_sharding_attr(mesh, split)})


def _global_type(type_: ir.Type, split: Split, sizes: dict[str, int]) -> ir.Type:
    shape = [
        size * int(np.prod([sizes[a] for a in axes], dtype=np.int64))
        for size, axes in zip(ir.shape_of(type_), split)
    ]
    return ir.tensor_type(shape, ir.element_type_of(type_))
