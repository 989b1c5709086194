"""The one adapter over XLA's client: compile a StableHLO module, execute it.

A lowered program runs on one device per mesh position p = devices[p], in the
form its target pass gave it (docs/ir.md):

- replica form (to-replicas): `num_replicas` = N, one partition, no SPMD
  partitioning; replica p on devices[p].
- partition form (to-partitions): one replica, `num_partitions` = N. XLA:CPU
  refuses `num_partitions > 1` without SPMD partitioning, and the partitioner
  refuses a bare `partition_id`; so, as `jax.shard_map` does, the per-device
  `@main` runs inside an `sdy.manual_computation` over every mesh axis
  (compiler/manual.py), which the partitioner leaves as it is; partition p
  on devices[p].

Every private JAX import pmapc needs for this lives here.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Sequence

import jax
import jax.extend.backend
import numpy as np
from jax._src import compiler as _jax_compiler
from jax._src import core as _core
from jax._src import distributed as _distributed
from jax._src import xla_bridge as _xla_bridge
from jax._src.interpreters import pxla as _pxla
from jax._src.lib import _jax  # pyright: ignore[reportPrivateImportUsage]
from jax._src.lib import hlo as _hlo  # pyright: ignore[reportAttributeAccessIssue]
from jax._src.lib import xla_client as _xla_client  # pyright: ignore[reportPrivateImportUsage]

from pmapc import ir
from pmapc.compiler import manual
from pmapc.lowering import jax_api
from pmapc.lowering.jax_api import Device


def backend(platform: str | None = None):
    """The XLA client of `platform` ('cpu', 'gpu', 'tpu'; None: JAX's default)."""
    return jax.extend.backend.get_backend(platform)


def compile_replicated(
    module: ir.Module,
    devices: Sequence[Device],
    compiler_options: dict | None = None,
    host_callbacks: Sequence = (),
):
    """Compile `module` with one replica per device (replica r runs on devices[r]);
    its host-callback ops call `host_callbacks` (by their index)."""
    options = _compile_options(
        devices, replicas=len(devices), partitions=1, compiler_options=compiler_options
    )
    options.executable_build_options.use_spmd_partitioning = False
    return _load(module, devices, options, host_callbacks)


def compile_partitioned(
    module: ir.Module,
    devices: Sequence[Device],
    compiler_options: dict | None = None,
    host_callbacks: Sequence = (),
):
    """Compile `module` in partition form (partition p runs on devices[p]).

    What XLA compiles is a copy whose `@main` takes global arrays split as
    `pmapc.split` says and runs the original `@main` with every mesh axis
    manual (see the module docstring); `module` itself is left as it is.
    """
    options = _compile_options(
        devices, replicas=1, partitions=len(devices), compiler_options=compiler_options
    )
    options.executable_build_options.use_spmd_partitioning = True
    options.executable_build_options.use_shardy_partitioner = True
    return _load(manual.all_manual(module), devices, options, host_callbacks)


def _compile_options(devices, *, replicas: int, partitions: int, compiler_options):
    """XLA's options for `devices` laid out (replicas, partitions); `compiler_options`
    are XLA flags by name (`jax.stages.Lowered.compile`'s), e.g.
    {"xla_embed_ir_in_executable": True}."""
    return _jax_compiler.get_compile_options(
        num_replicas=replicas,
        num_partitions=partitions,
        device_assignment=np.array(devices).reshape(replicas, partitions),
        backend=client_of(devices),
        env_options_overrides=compiler_options,
    )


def client_of(devices: Sequence[Device]):
    """The XLA client of `devices`: the backend that runs them, or for a topology's
    devices XLA's compile-only client of that topology (no live backend of their
    platform need exist in this process)."""
    return devices[0].client


def _load(module: ir.Module, devices, options, host_callbacks: Sequence):
    """The executable of `module` for `devices`: loaded onto them, or, for a
    topology's devices (`jax_api.compiles_only`), compiled only: an executable that
    tells what XLA made (its HLO, memory, cost) and that nothing here can run."""
    extra = {"host_callbacks": list(host_callbacks)} if host_callbacks else {}
    client = client_of(devices)
    compile = client.compile if jax_api.compiles_only(devices[0]) else client.compile_and_load
    return compile(
        module,
        executable_devices=_xla_client.DeviceList(tuple(devices)),
        compile_options=options,
        **extra,
    )


def module_for_xla(module: ir.Module, form: str) -> ir.Module:
    """What XLA compiles for a module in `form` ("partitions" or "replicas")."""
    return manual.all_manual(module) if form == "partitions" else module


def hlo_of(module: ir.Module):
    """XLA's HLO of `module` before XLA compiles it (an `XlaComputation`)."""
    return _jax.mlir.mlir_module_to_xla_computation(ir.bytecode(module), use_tuple_args=False)


def hlo_text(computation) -> str:
    """An HLO computation's text, as `jax.stages.Lowered.as_text("hlo")` prints it."""
    return computation.as_hlo_module().to_string(_hlo.HloPrintOptions.short_parsable())


def estimated_cost(computation, client) -> dict[str, float]:
    """XLA's cost estimate of an HLO computation before compilation, by `client`
    (`client_of` the devices, or `backend`)."""
    if _xla_bridge.using_pjrt_c_api(client):
        raise NotImplementedError(
            f"XLA estimates no cost before compiling on platform '{client.platform}'; use "
            "compile().cost_analysis()"
        )
    return dict(_jax.hlo_module_cost_analysis(client, computation.as_hlo_module()))


def place(values: Sequence, shardings: Sequence[jax.sharding.Sharding]) -> list[jax.Array]:
    """Global arrays laid out by `shardings`; arrays already laid out so are reused."""
    pairs = zip(values, shardings, strict=True)
    if all(isinstance(v, jax.Array) and v.sharding == s for v, s in pairs):
        return list(values)  # the common warm path: outputs fed back as inputs
    count = len(values)
    copy = [_xla_client.ArrayCopySemantics.REUSE_INPUT] * count
    return list(_pxla.shard_args(list(shardings), [None] * count, copy, list(values)))


def result_handlers(signatures, form: str) -> list:
    """Handlers that turn one result's per-device buffers into a global jax.Array;
    `signatures` are (shape, dtype, sharding) per result, `form` the executable's.

    A partition-form result goes through JAX's own handler. A replica-form one
    is assembled from each device's buffer: JAX's handler takes the global
    array's layout from the executable's output sharding, which a replica-form
    executable does not describe (on jaxlib 0.12, reading such an array fails with
    "Shape mismatch during ToLiteral conversion"); JAX itself builds no replica-
    form executables any more.
    """
    if form == "replicas":
        return [
            functools.partial(jax.make_array_from_single_device_arrays, shape, sharding)
            for shape, _, sharding in signatures
        ]
    return [
        _pxla.global_aval_to_result_handler(_core.ShapedArray(shape, dtype), sharding, True)
        for shape, dtype, sharding in signatures
    ]


def execute(executable, arguments: Sequence[jax.Array], handlers: list) -> list[jax.Array]:
    """Run with one global array per argument; the global results."""
    results = executable.execute_sharded(list(arguments))
    return results.consume_with_handlers(handlers)


def cost_analysis(executable) -> dict[str, float] | None:
    """XLA's cost estimate of a compiled program; None where the backend gives none
    (XLA:GPU's PJRT plugin), as `jax.stages.Compiled.cost_analysis` returns."""
    try:
        return dict(executable.cost_analysis())
    except jax.errors.JaxRuntimeError:  # the plugin implements no cost analysis
        return None


def memory_analysis(executable):
    return executable.get_compiled_memory_stats()


def compiled_hlo_text(executable) -> str:
    """The optimized HLO XLA compiled (for inspecting collectives and their bytes)."""
    return executable.hlo_modules()[0].to_string()


def optimized_hlo_text(executable) -> str | None:
    """The HLO XLA compiled and scheduled, after all of its passes: what the
    executable runs (the communication plan's XLA side); None when the executable
    gives none (a PJRT plugin may not implement it)."""
    try:
        modules = executable.hlo_modules()
    except (AttributeError, NotImplementedError, RuntimeError):  # XlaRuntimeError included
        return None
    return modules[0].to_string() if modules else None


def register_plugins() -> None:
    """Have JAX find and register its PJRT plugins now (it does so once per process,
    when a backend or a topology is first asked for): the CUDA one of the targets
    extra, which `pmapc` commands load with its notes kept off the terminal (on a
    machine without a GPU it says so on load; jax 0.10's from C++). Starts no backend."""
    logging.getLogger("jax_plugins.xla_cuda12").setLevel(logging.ERROR)
    _xla_bridge._discover_and_register_pjrt_plugins()


def use_host_devices(count: int) -> None:
    """Ask for `count` virtual CPU devices (before JAX starts its CPU backend)."""
    from pmapc.errors import DeviceError

    if count < 1:
        raise DeviceError(f"use_host_devices needs a positive count, got {count}")
    if _backends_started():
        have = jax.local_device_count("cpu")  # this process's (per process with jax.distributed)
        if have >= count:
            return
        raise DeviceError(
            f"JAX's CPU backend already started with {have} device(s); call "
            f"pmapc.use_host_devices({count}) before anything uses JAX devices (or set "
            f"XLA_FLAGS=--xla_force_host_platform_device_count={count} before starting Python)"
        )
    jax.config.update("jax_num_cpu_devices", count)


def _backends_started() -> bool:
    return bool(_xla_bridge._backends)


def distributed_client():
    """The client of JAX's distributed runtime (`jax.distributed.initialize`'s), whose
    key-value store every process of the run shares; None without one."""
    return _distributed.global_state.client


def key_value_set(client, key: str, value: str) -> None:
    client.key_value_set(key, value)


def key_value_get(client, key: str, seconds: float) -> str | None:
    """The value another process set under `key`, waiting up to `seconds` for it;
    None where none came in that time (or the store could not be reached)."""
    try:
        if seconds <= 0:
            return client.key_value_try_get(key)
        return client.blocking_key_value_get(key, max(1, int(seconds * 1000)))
    except jax.errors.JaxRuntimeError:  # DEADLINE_EXCEEDED, NOT_FOUND, UNAVAILABLE
        return None
