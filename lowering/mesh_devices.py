"""Which devices a mesh runs on: the first `mesh.size` devices, or the ones given
(`devices=`), checked against the mesh, in mesh order.

Across processes (`jax.distributed`) the outermost axis is laid over the
processes, process-major: process p holds whole, consecutive rows of it and every
inner axis inside one process. The tracer picks them when an outermost map is
bound (`lowering/placement.py`), the compiler when it compiles a lowered program
(`compiler/driver.py`), so they live below both, with the words of JAX 0.4.30
that a mistake `jax.pmap` caught starts with (`lowering/jax_messages.py`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import jax
import numpy as np
from jax.sharding import Mesh as JaxMesh

from pmapc.errors import DeviceError
from pmapc.lowering import jax_api, jax_messages
from pmapc.lowering.jax_api import Device
from pmapc.mesh import Mesh


def platforms(devices: Sequence[Device] | None, backend: str | None) -> set[str]:
    """The platforms a program for `devices` (or, if None, for the devices of
    `backend`, or the default backend's) is compiled for."""
    if devices:
        return {device.platform for device in devices}
    return {(jax.devices(backend) if backend else jax.devices())[0].platform}


def pick_devices(mesh: Mesh, devices: Sequence[Device] | None, backend: str | None):
    """The devices of `mesh`, in mesh order: the first `mesh.size` (or the ones given),
    checked against the mesh. Across processes (`jax.distributed`), the outermost axis
    is laid over the processes, process-major, and every inner axis inside one
    (`process_major_devices`); `devices=` names global devices laid out so."""
    if devices is None:
        available = jax.devices(backend) if backend else jax.devices()
        if len({d.process_index for d in available}) > 1:
            return process_major_devices(mesh, available)
        if len(available) < mesh.size:
            raise DeviceError(not_enough_devices(mesh, len(available), available[0].platform))
        return list(available[: mesh.size])
    devices = device_list(mesh, devices)
    if not devices:
        raise DeviceError(
            jax_messages.explained(
                jax_messages.no_devices(),
                f"devices= is empty, but the mesh {mesh} needs {mesh.size} devices; pass "
                f"{mesh.size} devices, or leave devices= out for the first {mesh.size}",
            )
        )
    if len(devices) != mesh.size:
        # JAX 0.4.30 words it apart when inner maps need devices beyond the outer axis
        nested = math.prod(mesh.axis_sizes[1:]) > 1
        raise DeviceError(
            jax_messages.explained(
                jax_messages.nest_and_devices(mesh.size, len(devices))
                if nested
                else jax_messages.devices_and_axis_size(mesh.size, len(devices)),
                f"the mesh {mesh} needs {mesh.size} devices, but devices= lists {len(devices)}; "
                f"pass exactly {mesh.size}",
            )
        )
    repeated = [d for i, d in enumerate(devices) if d in devices[:i]]
    if repeated:
        raise DeviceError(
            f"devices= lists {repeated[0]} twice (positions "
            f"{[i for i, d in enumerate(devices) if d == repeated[0]]}); each "
            "mesh position needs its own device"
        )
    if len({d.platform for d in devices}) != 1:
        raise DeviceError(
            "devices= mixes platforms "
            f"({sorted({d.platform for d in devices})}); use devices of one kind"
        )
    if compiles_only(devices):
        return devices  # a topology's: its values are global (see `compiles_only`)
    count = jax.process_count(devices[0].platform)
    if count > 1:
        check_process_rows(mesh, [d.process_index for d in devices], count)
    return devices


def compiles_only(devices: Sequence[Device]) -> bool:
    """Whether `devices` are a topology's (`jax.experimental.topologies`): devices XLA
    compiles for that this process cannot run on, such as a TPU pod's or a GPU
    cluster's seen from a CPU machine. A program for them is compiled ahead of time
    from global shapes (as `jax.jit`'s `lower(...).compile()` takes them), so the
    process-local convention's layout (whole rows of the outermost axis on each
    process) does not constrain its mesh; it is checked where the program runs."""
    return any(jax_api.compiles_only(device) for device in devices)


def process_major_devices(mesh: Mesh, available: Sequence[Device]) -> list:
    """The mesh over several processes: process p (in order) takes rows
    [p·r, (p+1)·r) of the outermost axis, r = its size / process count, on its
    first r·(inner size) devices."""
    by_process: dict[int, list] = {}
    for device in available:
        by_process.setdefault(device.process_index, []).append(device)
    rows = rows_per_process(
        mesh, {p: len(ds) for p, ds in by_process.items()}, available[0].platform
    )
    per_process = rows * (mesh.size // mesh.axis_sizes[0])
    return [device for p in sorted(by_process) for device in by_process[p][:per_process]]


def rows_per_process(mesh: Mesh, device_counts: dict[int, int], platform: str) -> int:
    """How many rows of the outermost axis each process holds, given each process's
    device count; a DeviceError when the mesh cannot be laid out so."""
    processes = len(device_counts)
    check_outer_divisible(mesh, processes)
    inner = mesh.size // mesh.axis_sizes[0]
    rows = mesh.axis_sizes[0] // processes
    short = sorted(p for p, count in device_counts.items() if count < rows * inner)
    if short:
        raise DeviceError(
            f"the mesh {mesh} puts {rows} row(s) of {inner} device(s) on each of {processes} "
            f"processes, {rows * inner} devices each, but process {short[0]} has "
            f"{device_counts[short[0]]} {platform} device(s); give every process "
            f"{rows * inner} (on CPU, pmapc.use_host_devices({rows * inner}) in every process "
            "before jax.distributed.initialize), or use smaller inner axes"
        )
    return rows


def check_outer_divisible(mesh: Mesh, processes: int) -> None:
    outer = mesh.axis_sizes[0]
    if outer % processes:
        raise DeviceError(
            f"the outermost axis '{mesh.axis_names[0]}' of the mesh {mesh} has size {outer}, "
            f"which {processes} processes cannot share: each process holds the same number "
            f"of its rows; make its size a multiple of {processes} (each process passes "
            f"size/{processes} rows)"
        )


def check_process_rows(mesh: Mesh, processes_of: Sequence[int], process_count: int) -> None:
    """Refuse devices= (in mesh order, given by the process of each device) unless
    every process holds the same number of whole, consecutive rows of the
    outermost axis (the rows it passes)."""
    check_outer_divisible(mesh, process_count)
    outer, inner = mesh.axis_sizes[0], mesh.size // mesh.axis_sizes[0]
    rows = np.array(processes_of).reshape(outer, inner)
    row_process = []
    for index, row in enumerate(rows):
        if len(set(row)) > 1:
            raise DeviceError(
                f"devices= puts row {index} of the outermost axis '{mesh.axis_names[0]}' on "
                f"processes {sorted(set(row.tolist()))}; each process passes whole rows, so "
                "give every row devices of one process"
            )
        row_process.append(int(row[0]))
    runs = [p for i, p in enumerate(row_process) if i == 0 or p != row_process[i - 1]]
    counts = {p: row_process.count(p) for p in runs}
    if len(runs) != len(counts) or len(counts) != process_count or len(set(counts.values())) != 1:
        raise DeviceError(
            f"devices= gives the {process_count} processes rows {row_process} of the "
            f"outermost axis '{mesh.axis_names[0]}' (by process); every process needs the "
            f"same number of consecutive rows: list devices process by process, "
            f"{outer // process_count} row(s) of {inner} each"
        )


def jax_mesh(mesh: Mesh, devices) -> JaxMesh:
    """`mesh` over `devices`, given in mesh order, as a `jax.sharding.Mesh`."""
    grid = np.array(list(devices), dtype=object).reshape(mesh.axis_sizes)
    return JaxMesh(grid, mesh.axis_names)


def listed(devices) -> list:
    """`devices=` as given (a sequence, a device array or a `jax.sharding.Mesh`, or None:
    none) as a flat list, in order."""
    if devices is None:
        return []
    if isinstance(devices, JaxMesh):
        return list(devices.devices.flat)
    return list(np.asarray(devices, dtype=object).flat)


def device_list(mesh: Mesh, devices) -> list:
    """`devices=` as a flat list in mesh order: a sequence, or a `jax.sharding.Mesh` or
    device array whose shape is the nest's mesh shape (one device per position)."""
    grid = (
        devices.devices
        if isinstance(devices, JaxMesh)
        else np.array(
            list(devices) if not isinstance(devices, np.ndarray) else devices, dtype=object
        )
    )
    if grid.ndim > 1 and grid.shape != mesh.shape:
        raise DeviceError(
            f"devices= has shape {grid.shape}, but the nest's mesh {mesh} has "
            f"shape {mesh.shape}; pass a device array of that shape or a flat "
            f"list of {mesh.size}"
        )
    return list(grid.flat)


def not_enough_devices(mesh: Mesh, count: int, platform: str) -> str:
    return jax_messages.explained(
        jax_messages.too_few_devices(mesh.size, count),
        f"the mesh {mesh} needs {mesh.size} devices, but only {count} {platform} device(s) "
        f"exist; on CPU call pmapc.use_host_devices({mesh.size}) before using JAX, or set "
        f"XLA_FLAGS=--xla_force_host_platform_device_count={mesh.size}",
    )
