"""Several processes: JAX 0.4's multi-host conventions for an outermost map's values.

After `jax.distributed.initialize`, with `jax.process_count() > 1`, the outermost
map's axis spans every process: `lowering/mesh_devices.py: pick_devices` gives each
process a contiguous block of the axis's rows (axis size / process count of them)
with every inner axis inside the process. A call takes either

- process-local values: a mapped argument holds this process's rows along its
  `in_axes`, an unmapped one the same value in every process; each result is then
  this process's part (its rows; the whole value where a result is not split over
  the outermost axis, e.g. `out_axes=None`), a fully addressable `jax.Array` on its
  own devices; or
- global values, as `jax.jit` takes them: `jax.Array`s that are not fully
  addressable (for example from `jax.make_array_from_process_local_data`); the
  results are global arrays too.

This module converts between the two over a nest's mesh with JAX's
`multihost_utils`, which reuse the device buffers when the layouts agree; and
says what a call runs (`program_of`), which the processes agree on before it
first runs (compiler/agreement.py).
"""

from __future__ import annotations

import hashlib
import inspect
from typing import TYPE_CHECKING

import jax
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import NamedSharding, PartitionSpec

from pmapc import ir
from pmapc.compiler.agreement import Program
from pmapc.errors import PmapcError, shown_file
from pmapc.lowering import jax_api, placement, primitives, structure, structure_digest

if TYPE_CHECKING:
    from pmapc.lowering.trace import MappedCall


def process_count() -> int:
    """How many processes run this program (1 without `jax.distributed.initialize`)."""
    return jax.process_count()


def holds_global_values(leaves) -> bool:
    """Whether a call passes global values: an array spanning processes, or a tracer
    (inside `jax.jit` or another transformation every value is global)."""
    return any(jax_api.is_tracer(leaf) or is_global(leaf) for leaf in leaves)


def is_global(value) -> bool:
    """A `jax.Array` with data on other processes (not fully addressable)."""
    return isinstance(value, jax.Array) and not value.is_fully_addressable


def global_shapes(call: MappedCall) -> list[jax.ShapeDtypeStruct]:
    """The global shape of each process-local leaf of a call: a mapped dimension
    holds every process's rows."""
    count = process_count()
    shapes = []
    for leaf, axis in zip(call.leaves, call.leaf_axes, strict=True):
        shape = list(np.shape(leaf))
        if axis is not None:
            shape[axis] *= count
        shapes.append(
            jax.ShapeDtypeStruct(tuple(shape), leaf.dtype, weak_type=jax_api.is_weakly_typed(leaf))
        )
    return shapes


def global_leaves(call: MappedCall, given: list, mesh: jax.sharding.Mesh) -> list:
    """The leaves of a process-local call as global values on `mesh`: mapped ones
    split over its outermost axis, unmapped arrays replicated; other unmapped
    values (numpy arrays, Python scalars, which keep their weak type) as given,
    which `jax.jit` takes as the same value in every process. `given` are the
    call's leaves as the caller passed them."""
    leaves = []
    for leaf, original, axis in zip(call.leaves, given, call.leaf_axes, strict=True):
        if axis is None and not isinstance(original, jax.Array):
            leaves.append(original)
        else:
            leaves.append(to_global(leaf, mesh, rows_spec(axis, mesh.axis_names[0])))
    return leaves


def rows_spec(axis: int | None, outermost_axis) -> PartitionSpec:
    """The layout of a process-local argument: split over the outermost mesh axis
    along its mapped dimension `axis`, replicated when unmapped (None)."""
    if axis is None:
        return PartitionSpec()
    return PartitionSpec(*[None] * axis, outermost_axis)


def to_global(value, mesh: jax.sharding.Mesh, spec: PartitionSpec) -> jax.Array:
    """The global array laid out by `spec` on `mesh` whose part on this process is
    `value` (its block of each dimension `spec` splits over processes)."""
    return multihost_utils.host_local_array_to_global_array(value, mesh, spec)


def to_local(array: jax.Array) -> jax.Array:
    """This process's part of a global array laid out with a `NamedSharding`."""
    sharding = array.sharding
    if not isinstance(sharding, NamedSharding):
        raise PmapcError(
            f"pmapc bug: a result of shape {array.shape} is laid out by "
            f"{sharding}, not over the nest's mesh; please report it"
        )
    mesh = sharding.mesh
    assert isinstance(mesh, jax.sharding.Mesh), "results stand on concrete devices"
    return multihost_utils.global_array_to_host_local_array(array, mesh, sharding.spec)


def _slice_of(index, dim: int) -> slice:
    """Dimension `dim` of a device's index into a global array (a tuple of slices)."""
    assert index is not None, "an index map names every dimension"
    return index[dim]


def program_of(traced, fun, name: str) -> Program:
    """What a call of the map of `fun` (named `name`) runs, from `jax.jit`'s trace of
    it: the digest of its structure (lowering/structure_digest.py: the same in every
    process that traces the same code on the same shapes, wherever its files are;
    where a part is known only in this process, of its lowered program without its
    locations instead), where `fun` is defined and the shapes the call takes."""
    shapes = tuple(aval.str_short() for aval in traced.jaxpr.in_avals)
    digest = None
    for eqn in traced.jaxpr.eqns:
        if eqn.primitive is primitives.map_p:
            shared = structure.shared_map(eqn.params)
            mesh = placement.pmapc_mesh(eqn.params["mesh"])
            if shared is not None:
                key = (shared.key, str(mesh), shapes)
                digest = structure_digest.stable_digest(key, whole_paths=False)
            break
    if digest is None:
        digest = program_digest(traced.lower().compiler_ir())
    code = getattr(inspect.unwrap(fun), "__code__", None)
    where = f"{shown_file(code.co_filename)}:{code.co_firstlineno}" if code is not None else ""
    return Program(digest, name, where, ", ".join(shapes))


def program_digest(module: ir.Module) -> str:
    """A digest of a lowered program without its locations (which name the folders its
    files are in, which may differ between hosts)."""
    return hashlib.sha256(ir.print_module(module).encode()).hexdigest()


def local_shape(sharding: jax.sharding.Sharding, global_shape: tuple[int, ...]) -> tuple[int, ...]:
    """The shape of this process's block of a `global_shape` array laid out by
    `sharding` (the extent of its devices' indices along each dimension)."""
    indices = list(sharding.addressable_devices_indices_map(global_shape).values())
    shape = []
    for dim, size in enumerate(global_shape):
        ranges = [_slice_of(index, dim).indices(size) for index in indices]
        shape.append(max(stop for _, stop, _ in ranges) - min(start for start, _, _ in ranges))
    return tuple(shape)
