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

import itertools

import jax
from jax.sharding import AbstractMesh, AxisType, NamedSharding, PartitionSpec
from jax.sharding import Mesh as JaxMesh

from pmapc import axis_labels, folding, layout
from pmapc.errors import AxisError, FoldError, SourceLoc, UnsupportedError
from pmapc.layout import Chain
from pmapc.lowering import fold, jax_api, jax_frames, mesh_devices, primitives
from pmapc.mesh import Mesh


def mesh_of_nest(jaxpr, axis_name: str, axis_size: int, devices, backend) -> JaxMesh | AbstractMesh:
    """The mesh an outermost map over `axis_name` with body `jaxpr` runs on."""
    mesh, _ = _nest(jaxpr, axis_name, axis_size)
    if devices is None and len(jax.devices(backend)) < mesh.size:
        return AbstractMesh(
            mesh.axis_sizes, mesh.axis_names, axis_types=(AxisType.Auto,) * len(mesh.axis_names)
        )
    return mesh_devices.jax_mesh(mesh, mesh_devices.pick_devices(mesh, devices, backend))


def place_nest(
    jaxpr, axis_name: str, axis_size: int, devices, backend
) -> JaxMesh | AbstractMesh | fold.Fold:
    """Where an outermost map over `axis_name` with body `jaxpr` runs: its mesh, or the
    fold of its mesh onto fewer devices, when `devices=` lists a device more than once
    or `pmapc.fold_onto` gives fewer devices than the mesh has positions."""
    mesh, chains = _nest(jaxpr, axis_name, axis_size)
    sizes = [[size for _, size in chain] for chain in chains]
    if devices is not None:
        listed = mesh_devices.device_list(mesh, devices)
        repeats = any(device in listed[:i] for i, device in enumerate(listed))
        if repeats and len(listed) == mesh.size:
            return _checked(fold_from_list(mesh, sizes, listed), jaxpr)
    else:
        onto = jax_api.FOLD_ONTO.value
        if onto is not None and len(onto) < mesh.size:
            count = folding.fold_count(sizes, mesh.size, len(onto))
            assert count is not None, "every nest folds onto one device"
            return _checked(fold.Fold(tuple(onto[:count]), mesh.size), jaxpr)
        if onto is not None:
            devices = list(onto[: mesh.size])
    if devices is None and len(jax.devices(backend)) < mesh.size:
        return AbstractMesh(
            mesh.axis_sizes, mesh.axis_names, axis_types=(AxisType.Auto,) * len(mesh.axis_names)
        )
    picked = mesh_devices.pick_devices(mesh, devices, backend)
    check_host_callbacks(jaxpr, picked)
    return mesh_devices.jax_mesh(mesh, picked)


def check_host_callbacks(jaxpr, devices) -> None:
    """Refuse host callbacks in a nest for devices where JAX does not lower them to the
    custom call pmapc runs once per device (`dialect.HOST_CALLBACK_TARGETS`): on TPU
    JAX lowers one to host send/recv pairs bound to its channels, which pmapc's passes
    do not carry; for a topology's GPUs JAX lowers it with this process's GPU backend,
    which a machine without one lacks."""
    reason = _callbacks_refused(devices)
    if reason is None:
        return
    eqn = first_host_callback(jaxpr.jaxpr)
    if eqn is None:
        return
    error = UnsupportedError(
        f"a host callback ('{eqn.primitive.name}') in a nest for {devices[0].platform} "
        f"devices: {reason}; leave it out of the nest there (print or call back outside "
        "the outermost map), or run the nest on CPU or GPU devices of this process"
    )
    where = jax_frames.user_line(eqn)
    raise error.at(SourceLoc(*where, 0)) if where is not None else error


def _callbacks_refused(devices) -> str | None:
    platform = devices[0].platform
    if platform == "tpu":
        return "JAX lowers it on TPU to host send/recv ops, which pmapc's passes do not carry"
    if mesh_devices.compiles_only(devices):
        return (
            "JAX lowers it for a GPU with the GPU backend of this process, and a "
            "topology's devices have none here"
        )
    return None


def first_equation(jaxpr, matches):
    """The first equation of `jaxpr`, or of a jaxpr inside it, depth first, for which
    `matches(eqn)` holds (None: none does)."""
    for eqn in jaxpr.eqns:
        if matches(eqn):
            return eqn
        for sub in jax_api.jaxprs_in(eqn.params):
            found = first_equation(sub, matches)
            if found is not None:
                return found
    return None


def first_host_callback(jaxpr):
    """The first host-callback equation of `jaxpr` or of a jaxpr inside it (None: none)."""
    return first_equation(jaxpr, lambda eqn: eqn.primitive in jax_api.HOST_CALLBACK_PRIMITIVES)


def nest_devices(jaxpr) -> list | None:
    """The devices of the first outermost map in `jaxpr` (a traced function around a
    nest) or a jaxpr inside it, in mesh order; None where there is none, or its mesh
    is abstract (too few devices to stage it on)."""
    eqn = first_equation(
        jaxpr,
        lambda eqn: eqn.primitive is primitives.map_p and isinstance(eqn.params["mesh"], JaxMesh),
    )
    return None if eqn is None else list(eqn.params["mesh"].devices.flat)


def devices_for(mesh: Mesh, devices) -> list | None:
    """The devices a nest lowered for `mesh` runs on, given the outermost map's
    `devices=`: where the nest was folded (`devices=` listing a device more than once,
    or `pmapc.fold_onto`), the fold's devices; else `devices=` as given."""
    if devices is not None:
        listed = list(devices.devices.flat) if isinstance(devices, JaxMesh) else list(devices)
        distinct = [d for i, d in enumerate(listed) if d not in listed[:i]]
        return distinct if len(distinct) < len(listed) else listed
    onto = jax_api.FOLD_ONTO.value
    return list(onto[: mesh.size]) if onto is not None else None


def fold_from_list(mesh: Mesh, chains: list[list[int]], listed: list) -> fold.Fold:
    """The fold `devices=` asks for by listing devices more than once: each device
    listed for a run of consecutive positions, every run as long."""
    distinct = [device for i, device in enumerate(listed) if device not in listed[:i]]
    count = len(distinct)
    block = mesh.size // count
    if (
        mesh.size % count
        or listed != [device for device in distinct for _ in range(block)]
        or not folding.foldable(chains, count)
    ):
        runs = [len(list(group)) for _, group in itertools.groupby(listed)]
        raise FoldError(
            f"devices= lists {count} distinct device(s) over the {mesh.size} positions of "
            f"the mesh {mesh} in runs of {runs}; a device listed more than once runs "
            "several positions (a fold), which needs every device listed for the same "
            "number of consecutive positions, row-major (inner axes fold first), and that "
            "number to split the mesh axis by axis; e.g. each of "
            f"{fold_counts_text(chains, mesh.size)} device(s) listed "
            "mesh-size/count times in a row"
        )
    return fold.Fold(tuple(distinct), mesh.size)


def fold_counts_text(chains: list[list[int]], positions: int) -> str:
    counts = [
        count
        for count in range(1, positions + 1)
        if positions % count == 0 and folding.foldable(chains, count)
    ]
    if len(counts) == 1:
        return str(counts[0])
    return ", ".join(map(str, counts[:-1])) + f" or {counts[-1]}"


def _checked(folded: fold.Fold, jaxpr) -> fold.Fold:
    """Refuse a fold across processes, and host callbacks its devices do not run."""
    if len({device.process_index for device in folded.devices}) > 1 or jax.process_count() > 1:
        raise FoldError(
            "a nest folded onto fewer devices runs in one process; with several processes "
            "give the nest one device per position"
        )
    check_host_callbacks(jaxpr, folded.devices)
    return folded


def _nest(jaxpr, axis_name: str, axis_size: int) -> tuple[Mesh, list[Chain]]:
    """The mesh of an outermost map over `axis_name` with body `jaxpr`, and the chain
    of each of its maps."""
    outermost = ((axis_labels.axis_label(axis_name), axis_size),)
    chains = [outermost]
    _find_chains(jaxpr.jaxpr, outermost, chains)
    try:
        mesh = layout.layout(chains).mesh
    except ValueError:
        raise AxisError(
            "the maps nested in the map over "
            f"'{axis_labels.axis_label(axis_name)}' have sizes that share no device "
            "layout (sibling maps whose sizes do not divide one another); make "
            "the sizes of sibling maps divide one another"
        ) from None
    return mesh, chains


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
            label = axis_labels.axis_label(eqn.params["axis_name"])
            chain = (*scope, (label, eqn.params["axis_size"]))
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
