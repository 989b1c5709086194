"""Where an outermost map runs: the mesh of its nest and the devices of that mesh.

The mesh refines every chain of nested maps (`pmapc/layout.py`: one axis per
nesting depth unless sibling maps differ), found from the traced body as
`flatten-maps` finds it from the IR. Knowing it when the map is bound lets
`jax.jit` place the program on those devices and lets errors about the devices
given point at the call.

Staging needs no devices (`pmapc trace` runs where there are too few): without
`devices=` and with too few devices the mesh is abstract, and running it
raises the DeviceError (`concrete`).
"""

from __future__ import annotations

import jax
from jax.sharding import AbstractMesh, AxisType, NamedSharding, PartitionSpec
from jax.sharding import Mesh as JaxMesh

from pmapc import dialect, layout
from pmapc.errors import AxisError
from pmapc.layout import Chain
from pmapc.lowering import jax_api, mesh_devices, primitives
from pmapc.mesh import Mesh


def mesh_of_nest(jaxpr, axis_name: str, axis_size: int, devices, backend) -> JaxMesh | AbstractMesh:
    """The mesh an outermost map over `axis_name` with body `jaxpr` runs on."""
    outermost = ((dialect.axis_label(axis_name), axis_size),)
    chains = [outermost]
    _find_chains(jaxpr.jaxpr, outermost, chains)
    try:
        mesh = layout.layout(chains).mesh
    except ValueError:
        raise AxisError(
            "the maps nested in the map over "
            f"'{dialect.axis_label(axis_name)}' have sizes that share no device "
            "layout (sibling maps whose sizes do not divide one another); make "
            "the sizes of sibling maps divide one another"
        ) from None
    if devices is None and len(jax.devices(backend)) < mesh.size:
        return AbstractMesh(
            mesh.axis_sizes, mesh.axis_names, axis_types=(AxisType.Auto,) * len(mesh.axis_names)
        )
    return mesh_devices.jax_mesh(mesh, mesh_devices.pick_devices(mesh, devices, backend))


def concrete(mesh: JaxMesh | AbstractMesh) -> JaxMesh:
    """The mesh with its devices; for an abstract one, the DeviceError of too few."""
    if isinstance(mesh, AbstractMesh):
        pmapc = pmapc_mesh(mesh)
        return mesh_devices.jax_mesh(pmapc, mesh_devices.pick_devices(pmapc, None, None))
    return mesh


def pmapc_mesh(mesh: JaxMesh | AbstractMesh) -> Mesh:
    return Mesh(tuple(mesh.axis_names), tuple(mesh.axis_sizes))


def _find_chains(jaxpr, scope: Chain, chains: list[Chain]) -> None:
    """Record the chain of every map in `jaxpr`, which runs in `scope`."""
    for eqn in jaxpr.eqns:
        if eqn.primitive is primitives.map_p:
            chain = (*scope, (dialect.axis_label(eqn.params["axis_name"]), eqn.params["axis_size"]))
            chains.append(chain)
            _find_chains(eqn.params["jaxpr"].jaxpr, chain, chains)
            continue
        for sub in jax_api.jaxprs_in(eqn.params):
            _find_chains(sub, scope, chains)


def onto_mesh(mesh: JaxMesh, leaves, leaf_axes) -> tuple[list, list[tuple[int, str]]]:
    """(leaves, moves): every committed array not laid out as the outermost map takes
    it (split over the mesh's first axis at its `in_axes`, replicated if unmapped)
    put there, and (leaf index, where it was) for each one moved."""
    placed, moves = [], []
    for index, (leaf, axis) in enumerate(zip(leaves, leaf_axes)):
        if isinstance(leaf, jax.Array) and leaf.committed:
            spec = (
                PartitionSpec()
                if axis is None
                else PartitionSpec(*[None] * axis, mesh.axis_names[0])
            )
            target = NamedSharding(mesh, spec)
            if not leaf.sharding.is_equivalent_to(target, leaf.ndim):
                moves.append((index, _where(leaf.sharding, target)))
                leaf = jax.device_put(leaf, target)
        placed.append(leaf)
    return placed, moves


def _where(sharding, target) -> str:
    if sharding.device_set == target.device_set:
        return "another layout over the mesh's devices"
    ids = sorted(device.id for device in sharding.device_set)
    return f"device {ids[0]}" if len(ids) == 1 else f"devices {ids}"
