"""Running a flattened program: place inputs, execute, assemble outputs.

A compiled module's `@main` takes and returns per-device blocks; the
`pmapc.split` of each argument and result says how the global array is split
over the mesh (docs/ir.md). The runtime turns global arrays into those blocks
with a `NamedSharding` over the mesh of devices, runs the executable, and
assembles the results back into global `jax.Array`s without copying.

The module's `mhlo.num_partitions` and `mhlo.num_replicas` say which form it
is in (docs/ir.md): partition form (to-partitions) compiles with one
partition per mesh device, replica form (to-replicas, or no counts at all)
with one replica per device; both run the same way from there.

XLA's in-process CPU collectives deadlock when dozens of collective programs
are queued without waiting; `InFlight` bounds the runs in flight, here and for
the calls of `pmapc.pmap` functions.
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Sequence

import jax
import numpy as np
from jax.sharding import NamedSharding, PartitionSpec

from pmapc import dialect, ir
from pmapc.compiler import processes, xla
from pmapc.errors import Category, DeviceError, ShapeError, first_line
from pmapc.lowering import jax_api, mesh_devices
from pmapc.mesh import Mesh
from pmapc.options import NATIVE_RAGGED_PLATFORMS, Target
from pmapc.passes import ragged
from pmapc.passes.to_partitions import NUM_PARTITIONS, NUM_REPLICAS

MAX_IN_FLIGHT = 4

# The platforms whose runtimes deadlock when dozens of collective programs queue:
# XLA:CPU runs collectives between in-process threads that must all join each
# rendezvous (JAX's own jax.jit(shard_map) aborts there after 200 un-blocked calls,
# "Termination timeout for all reduce"; benchmarks/unblocked.py). GPU and TPU
# runtimes queue any number, so there eager calls stay fully asynchronous.
BOUNDED_PLATFORMS = frozenset({"cpu"})


class InFlight:
    """Bounds the runs queued on the devices where the platform needs it (the one
    place that does).

    On XLA:CPU every MAX_IN_FLIGHT-th run dispatched waits for its own results (a
    device runs its programs in order, so the earlier ones are done too); on
    other platforms nothing waits. The platform is the devices' (`platform`), or,
    not given, that of the first run's outputs. Nothing more happens after a
    dispatch: it would compete with the devices for the host's cores (on 2 cores
    a microsecond of Python there costs ten).
    """

    __slots__ = ("bounded", "runs")

    def __init__(self, platform: str | None = None) -> None:
        self.runs = 0
        self.bounded = None if platform is None else platform in BOUNDED_PLATFORMS

    def dispatched(self, outputs) -> None:
        bounded = self.bounded
        if bounded is None:
            bounded = self.bounded = _runs_on_bounded_platform(outputs)
        if not bounded:
            return
        self.runs += 1
        if self.runs % MAX_IN_FLIGHT == 0:
            wait_until_ready(outputs)


def _runs_on_bounded_platform(outputs) -> bool | None:
    """Whether a run's outputs live on a platform that needs runs bounded (None: no
    concrete output tells, e.g. under a transformation)."""
    for leaf in jax.tree_util.tree_leaves(outputs):
        if isinstance(leaf, jax.Array) and not jax_api.is_tracer(leaf):
            return next(iter(leaf.devices())).platform in BOUNDED_PLATFORMS
    return None


def wait_until_ready(outputs) -> None:
    """Wait for a run's outputs; nothing under a transformation (tracers).

    A single array waits through its own method: a fraction of the Python of
    `jax.block_until_ready` and of the check for a transformation."""
    if jax_api.is_concrete_array(outputs):
        outputs.block_until_ready()
    elif jax_api.tracing_is_idle():
        jax.block_until_ready(outputs)


@dataclasses.dataclass(frozen=True)
class Signature:
    """Global shape, dtype and split of one entry argument or result."""

    shape: tuple[int, ...]
    dtype: np.dtype
    split: tuple[tuple[str, ...], ...]

    def spec(self) -> PartitionSpec:
        return PartitionSpec(*[dim if dim else None for dim in self.split])


def signatures(module: ir.Module, mesh: Mesh) -> tuple[list[Signature], list[Signature]]:
    """The global signatures of `@main`'s arguments and results."""
    main = ir.functions(module)["main"]
    function_type = ir.function_type(main)
    return (
        _signatures(main, mesh, "arg", function_type.inputs),
        _signatures(main, mesh, "res", function_type.results),
    )


def _signatures(main, mesh: Mesh, kind: str, types) -> list[Signature]:
    """The signature of each argument (kind="arg") or result (kind="res"): its split
    attributes read in one pass, each (type, split) worked out once (MLIR uniques
    both, and a model's hundreds of arrays have a few of each)."""
    splits = ir.arg_attr_column(main, kind, dialect.SPLIT_ATTR)
    known: dict[tuple, Signature] = {}
    result = []
    for type_, split_attr in zip(types, splits):
        signature = known.get((type_, split_attr))
        if signature is None:
            signature = known[type_, split_attr] = _signature(mesh, type_, split_attr)
        result.append(signature)
    return result


def _signature(mesh: Mesh, type_, split_attr) -> Signature:
    block_shape = ir.shape_of(type_)
    split = dialect.read_split(split_attr, len(block_shape))
    shape = tuple(
        size * math.prod(mesh.axis_size(axis) for axis in axes)
        for size, axes in zip(block_shape, split)
    )
    return Signature(shape, element_dtype(ir.element_type_of(type_)), split)


def element_dtype(element_type) -> np.dtype:
    name = ir.dtype_name(element_type)
    if name is None:
        raise ShapeError(f"pmapc cannot run programs with element type {element_type}")
    return jax.numpy.dtype(name)


def execution_form(module: ir.Module, mesh: Mesh) -> Target:
    """ "partitions" or "replicas", from the device counts the module declares.

    A module that declares none (lower-collectives' target-neutral output)
    runs as replicas; on one device both forms run the same.
    """
    partitions = ir.module_int_attr(module, NUM_PARTITIONS) or 1
    replicas = ir.module_int_attr(module, NUM_REPLICAS) or 1
    if partitions > 1 and replicas > 1:
        raise DeviceError(
            f"the module declares {NUM_REPLICAS} = {replicas} and "
            f"{NUM_PARTITIONS} = {partitions}; pmapc runs one replica per "
            "device or one partition per device (run to-partitions or "
            "to-replicas)"
        )
    declared = max(partitions, replicas)
    if declared > 1 and declared != mesh.size:
        key = NUM_PARTITIONS if partitions > 1 else NUM_REPLICAS
        raise DeviceError(
            f"the module declares {key} = {declared}, but its mesh {mesh} has "
            f"{mesh.size} device(s); run to-partitions or to-replicas to set it"
        )
    return Target.PARTITIONS if partitions > 1 else Target.REPLICAS


def check_custom_calls(module: ir.Module, callbacks: int, devices: Sequence[xla.Device]) -> None:
    """The checks of the module's custom calls before XLA compiles it, in one walk."""
    custom_calls = [op for f in ir.functions(module).values() for op in ir.walk_custom_calls(f)]
    check_host_callbacks(custom_calls, callbacks)
    check_native_ragged(custom_calls, devices)


def check_host_callbacks(custom_calls: Sequence[ir.Operation], count: int) -> None:
    """Refuse host callbacks that call Python functions the module was not given
    (`count` of them): a module saved as text keeps the ops, not the functions."""
    for op in filter(dialect.is_host_callback, custom_calls):
        index = dialect.host_callback_index(op)
        if index is not None and 0 <= index < count:
            continue
        raise dialect.error_at(
            op,
            f"'{dialect.target_of(op)}' calls back into the Python process that traced the "
            "program (jax.debug.print, jax.debug.callback, pure_callback or io_callback), "
            "and a module read from text has no function to call; run the program from "
            "Python (call the pmapc.pmap function, or pmapc.lower(f, *args).compile()), or "
            "leave the callback out of the module",
        )


def check_native_ragged(custom_calls: Sequence[ir.Operation], devices: Sequence[xla.Device]):
    """Refuse XLA's ragged_all_to_all (the native form) for devices whose XLA does
    not run it (XLA:CPU has no ragged-all-to-all), where a compile would fail inside
    XLA with UNIMPLEMENTED."""
    platforms = {device.platform for device in devices}
    if platforms <= NATIVE_RAGGED_PLATFORMS:
        return
    for op in filter(ragged.is_native, custom_calls):
        names = ", ".join(sorted(platforms - NATIVE_RAGGED_PLATFORMS))
        raise dialect.error_at(
            op,
            f"XLA's ragged_all_to_all (the native form) does not run on {names}; "
            "lower it with ragged='expanded' (pmapc.lower's default there)",
            Category.UNSUPPORTED,
        )


class Executable:
    """A compiled program bound to its devices; call it with global arrays."""

    def __init__(
        self,
        module: ir.Module,
        devices: Sequence[xla.Device],
        compiler_options: dict | None = None,
        host_callbacks: Sequence = (),
    ):
        check_custom_calls(module, len(host_callbacks), devices)
        self.mesh = dialect.mesh_of(module)
        self.devices = list(devices)
        self.arguments, self.results = signatures(module, self.mesh)
        self.form = execution_form(module, self.mesh)
        compile_for = (
            xla.compile_partitioned if self.form is Target.PARTITIONS else xla.compile_replicated
        )
        # A topology's devices (mesh_devices.compiles_only): compiled, never run here.
        self.runs_here = not mesh_devices.compiles_only(self.devices)
        try:
            self.loaded = compile_for(module, self.devices, compiler_options, host_callbacks)
        except jax.errors.JaxRuntimeError as error:
            if self.runs_here:
                raise
            raise DeviceError(refused_for_topology(self.devices, error)) from None
        self.jax_mesh = mesh_devices.jax_mesh(self.mesh, self.devices)
        self.in_shardings = [NamedSharding(self.jax_mesh, s.spec()) for s in self.arguments]
        self.out_shardings = [NamedSharding(self.jax_mesh, s.spec()) for s in self.results]
        self.handlers = (
            xla.result_handlers(
                [(s.shape, s.dtype, sh) for s, sh in zip(self.results, self.out_shardings)],
                self.form,
            )
            if self.runs_here
            else []
        )
        self.process_indices = sorted({d.process_index for d in self.devices})
        self.spans_processes = len(self.process_indices) > 1
        self._in_flight = InFlight(self.devices[0].platform)
        self._lock = threading.Lock()

    def __call__(self, *arguments) -> list[jax.Array]:
        """Run on global arrays (checked against the signature); on a mesh across
        processes, also on process-local values (compiler/processes.py), and then
        give this process's part of each result."""
        if not self.runs_here:
            raise DeviceError(not_runnable_here(self.devices))
        if self.spans_processes and not processes.holds_global_values(arguments):
            return self._run_process_local(arguments)
        for index, value in enumerate(arguments):
            self.check_argument(index, value)
        return self.run(arguments)

    def _run_process_local(self, arguments) -> list[jax.Array]:
        placed = []
        for index, value in enumerate(arguments):
            sharding = self.in_shardings[index]
            self.check_argument(
                index, value, processes.local_shape(sharding, self.arguments[index].shape)
            )
            placed.append(processes.to_global(value, self.jax_mesh, sharding.spec))
        return [processes.to_local(output) for output in self.run(placed)]

    def run(self, arguments) -> list[jax.Array]:
        """Run on global arrays already known to fit the signature (the fast path)."""
        if not self.runs_here:
            raise DeviceError(not_runnable_here(self.devices))
        placed = xla.place(arguments, self.in_shardings)
        with self._lock:
            outputs = xla.execute(self.loaded, placed, self.handlers)
        self._in_flight.dispatched(outputs)
        return outputs

    def check_argument(self, index: int, value, local_shape=None) -> None:
        """Check a global argument, or with `local_shape` this process's part of one."""
        expected = self.arguments[index]
        want = expected.shape if local_shape is None else local_shape
        shape, dtype = np.shape(value), getattr(value, "dtype", None)
        if tuple(shape) != want or np.dtype(dtype) != expected.dtype:
            whose = (
                ""
                if local_shape is None
                else (
                    f" on this process (its part of {expected.dtype}{list(expected.shape)}, "
                    f"over {len(self.process_indices)} processes)"
                )
            )
            raise ShapeError(
                f"argument #{index} must be {expected.dtype}{list(want)}{whose}, "
                f"got {np.dtype(dtype) if dtype else type(value).__name__}"
                f"{list(shape)}"
            )


def refused_for_topology(devices: Sequence[xla.Device], error: Exception) -> str:
    """XLA's refusal to compile for some of a topology's devices, with the count it
    has (XLA:TPU on v5e compiles only for a whole slice)."""
    count = len(xla.client_of(devices).devices())
    compiler, reason = f"XLA:{devices[0].platform.upper()}", first_line(error)
    if len(devices) == count:
        return f"{compiler} refused to compile the nest for the topology: {reason}"
    return (
        f"{compiler} refused to compile the nest for {len(devices)} of the topology's "
        f"{count} devices: {reason}; compile for the whole topology (a nest of {count} "
        f"positions) or name a topology of {len(devices)} devices"
    )


def not_runnable_here(devices: Sequence[xla.Device]) -> str:
    """Why a program compiled for a topology's devices does not run in this process."""
    kinds = ", ".join(sorted({f"{d.platform} ({d.device_kind})" for d in devices}))
    return (
        f"this program was compiled for {len(devices)} {kinds} device(s) of a topology, "
        "which XLA compiles for without them and which this process does not have; run it "
        "where those devices are, or compile it for this process's devices (devices= left "
        "out, or jax.devices())"
    )
