"""Where an outermost map runs: the mesh of its nest and the devices of that mesh.

The mesh has one axis per nesting depth, outermost first, found from the
traced body the way `flatten-maps` finds it from the IR (the first map at each
depth; `verify-axes` reports siblings that disagree). Knowing it when the map
is bound lets `jax.jit` place the program on those devices and lets errors
about the devices given point at the call.

Staging needs no devices (`pmapc trace` runs where there are too few): without
`devices=` and with too few devices the mesh is abstract, and running it
raises the DeviceError (`concrete`).
"""

from __future__ import annotations

import jax
from jax.sharding import AbstractMesh
from jax.sharding import Mesh as JaxMesh

from pmapc import dialect
from pmapc.compiler import runtime
from pmapc.lowering import jax_api, primitives
from pmapc.mesh import Mesh
from pmapc.passes.nesting import Level, Nesting


def mesh_of_nest(jaxpr, axis_name: str, axis_size: int, devices,
                 backend) -> JaxMesh | AbstractMesh:
    """The mesh an outermost map over `axis_name` with body `jaxpr` runs on."""
    levels = [Level(dialect.axis_label(axis_name), axis_size)]
    _find_levels(jaxpr.jaxpr, 1, levels)
    mesh = Nesting(levels).mesh()
    if devices is None and len(jax.devices(backend)) < mesh.size:
        return AbstractMesh(mesh.axis_sizes, mesh.axis_names)
    return runtime.jax_mesh(mesh, runtime.pick_devices(mesh, devices, backend))


def concrete(mesh: JaxMesh | AbstractMesh) -> JaxMesh:
    """The mesh with its devices; for an abstract one, the DeviceError of too few."""
    if isinstance(mesh, AbstractMesh):
        runtime.pick_devices(pmapc_mesh(mesh), None, None)
    return mesh


def pmapc_mesh(mesh: JaxMesh | AbstractMesh) -> Mesh:
    return Mesh(tuple(mesh.axis_names), tuple(mesh.axis_sizes))


def _find_levels(jaxpr, depth: int, levels: list[Level]) -> None:
    """Record the axis of the first map at each depth below `depth` in `jaxpr`."""
    for eqn in jaxpr.eqns:
        if eqn.primitive is primitives.map_p:
            if depth == len(levels):
                levels.append(Level(dialect.axis_label(eqn.params["axis_name"]),
                                    eqn.params["axis_size"]))
            _find_levels(eqn.params["jaxpr"].jaxpr, depth + 1, levels)
            continue
        for sub in jax_api.jaxprs_in(eqn.params):
            _find_levels(sub, depth, levels)
