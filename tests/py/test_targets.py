"""Nests compiled for GPU machines and TPU pods by XLA:GPU's and XLA:TPU's own
compilers, on this CPU machine (compiler/targets.py; docs/guide.md, "Compiling for GPU and
TPU without one").

Targets: 8 H100s, 2 hosts x 8 H100s, TPU v5e 2x4 and 4x4 (2 and 4 hosts), TPU v5p
4x4x4 (16 hosts). Programs: a sample of the goldens, W1-W3, the MoE example with
XLA's native ragged_all_to_all, a divergent `cond`, a 3-level nest, and `jax.jit`
and `grad` around a nest, through `f.lower(...)`, `pmapc.lower` and `jax.jit`.
Each test reads the compiled HLO: its collectives, the mesh axes their groups are
(`compiler/plan_xla.py`), the native ragged op. Shapes are global
(`jax.ShapeDtypeStruct`s), as jax.jit's ahead-of-time API takes them.

Without libtpu or the CUDA plugin (`pip install 'pmapc[targets]'`) a target's tests
skip, saying which package is missing; scripts/test.sh installs those its leg's release
has and names their platforms in PMAPC_REQUIRE_TARGETS (`gpu,tpu`), which makes a
missing plugin fail instead.
"""

from __future__ import annotations

import functools
import os
import pathlib
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import pmapc
from pmapc.compiler import hlo_collectives, plan_hosts, plan_xla, runtime, targets
from pmapc.mesh import Mesh

BENCHMARKS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import targets as target_programs  # noqa: E402

# The platforms whose plugin must be here, comma-separated ("gpu,tpu"): scripts/test.sh
# names those each leg installed (a release can come out before its plugins do).
REQUIRED = frozenset(filter(None, os.environ.get("PMAPC_REQUIRE_TARGETS", "").split(",")))
SDS = jax.ShapeDtypeStruct
F32 = jnp.float32

GPU_ONE_HOST, GPU_TWO_HOSTS = "gpu:h100:1x1x8", "gpu:h100:1x2x8"
TWO_SLICES = "tpu:v5e:4x4:slices=2"  # 2 slices of 4 hosts, joined by the DCN
TPU_TARGETS = ("tpu:v5e:2x4", "tpu:v5e:4x4", "tpu:v5p:4x4x4", TWO_SLICES)
ALL_TARGETS = (GPU_ONE_HOST, GPU_TWO_HOSTS, *TPU_TARGETS)
# The hosts and slices of each target's devices.
HOSTS_AND_SLICES = {
    GPU_ONE_HOST: (1, 1),
    GPU_TWO_HOSTS: (2, 1),
    "tpu:v5e:2x4": (2, 1),
    "tpu:v5e:4x4": (4, 1),
    "tpu:v5p:4x4x4": (16, 1),
    TWO_SLICES: (8, 2),
}


@functools.cache
def devices_of(name: str) -> list:
    """The target's devices; a skip (or, where CI requires the plugins, a failure)
    naming the package to install when this environment cannot compile for it."""
    platform = targets.parse(name).platform
    missing = targets.plugin_missing(platform)
    if missing is not None:
        (pytest.fail if platform in REQUIRED else pytest.skip)(missing)
    return pmapc.target_devices(name)


def two_level(count: int) -> tuple[int, int]:
    return {8: (2, 4), 16: (4, 4), 32: (2, 16), 64: (8, 8)}[count]


def three_level(count: int) -> tuple[int, int, int]:
    return {8: (2, 2, 2), 16: (2, 2, 4), 64: (4, 4, 4)}[count]


def xla_axes(compiled) -> list[tuple[str, tuple[str, ...] | None]]:
    """(opcode, mesh axes) of every collective XLA runs in a pmapc `Compiled`, sorted."""
    plan = compiled.plan()
    assert plan.xla is not None and plan.xla.unavailable is None
    return sorted(((c.op, c.axes) for c in plan.xla.collectives), key=repr)


def hlo_axes(text: str, mesh: Mesh, devices=None) -> list[tuple[str, tuple[str, ...] | None]]:
    """The same for any compiled HLO text (JAX's `Compiled` of a jit around a nest) on
    `devices` (needed where a program is one TPU slice's of several)."""
    placement = None if devices is None else plan_hosts.Placement.of_devices(devices)
    runs = plan_xla.xla_runs((), mesh, text, placement)
    return sorted(((c.op, c.axes) for c in runs.collectives), key=repr)


def kinds(axes: list) -> set[str]:
    """The kinds of XLA's collectives (a transfer between slices by its kind)."""
    return {op.removesuffix("-start").removesuffix(" (DCN)") for op, _ in axes}


def psum_nest(x):
    """2-level: a psum over the inner axis, an all_gather over the outer, and a psum
    over both, on each device's row."""
    row = lax.psum(x, "model") + lax.all_gather(x, "data").sum(0)
    return row * lax.psum(1.0, ("data", "model"))


def nest2(body, devices):
    return pmapc.pmap(pmapc.pmap(body, "model"), "data", devices=devices)


# ----------------------------------------------------------------------------
# The hooks on JAX these use (no plugin needed)


def test_the_host_callback_primitives_are_those_jax_binds():
    """`jax_api.HOST_CALLBACK_PRIMITIVES`, by which a nest for a TPU refuses a callback,
    are what JAX's four host callbacks bind on this release."""
    from jax.experimental import io_callback

    from pmapc.lowering import jax_api

    def f(x):
        jax.debug.print("{}", x)
        jax.debug.callback(lambda v: None, x)
        y = jax.pure_callback(np.sin, SDS((), F32), x, vmap_method="sequential")
        return io_callback(np.cos, SDS((), F32), y)

    bound = {eqn.primitive for eqn in jax.make_jaxpr(f)(1.0).eqns}
    assert len(bound & jax_api.HOST_CALLBACK_PRIMITIVES) == 4


def test_this_process_s_devices_are_not_a_topology_s():
    from pmapc.lowering import mesh_devices

    assert not mesh_devices.compiles_only(jax.devices())


# ----------------------------------------------------------------------------
# Every entry point, every target


@pytest.mark.parametrize("name", ALL_TARGETS)
@pytest.mark.parametrize("entry", ["f.lower", "pmapc.lower", "jax.jit"])
def test_every_entry_compiles_for_every_target(name, entry):
    devices = devices_of(name)
    data, model = two_level(len(devices))
    mesh = Mesh(("data", "model"), (data, model))
    f = nest2(psum_nest, devices)
    x = SDS((data, model, 128), F32)
    if entry == "jax.jit":
        text = jax.jit(f).lower(x).compile().as_text()
        axes = hlo_axes(text, mesh, devices)
    else:
        lowered = f.lower(x) if entry == "f.lower" else pmapc.lower(lambda v: f(v) * 2, x)
        compiled = lowered.compile()
        axes = xla_axes(compiled)
        assert compiled.memory_analysis().argument_size_in_bytes == 128 * 4
    assert all(group is not None for _, group in axes), axes  # groups are mesh axes
    groups = {group for _, group in axes}
    assert groups == {("model",), ("data",)}, axes  # psum(1.0) over both is a constant
    assert kinds(axes) == {"all-reduce", "all-gather"}, axes
    platform = devices[0].platform
    assert ("TPU" in devices[0].device_kind) == (platform == "tpu")


@pytest.mark.parametrize("name", [GPU_ONE_HOST, "tpu:v5e:2x4"])
def test_what_a_compiled_target_program_tells(name):
    devices = devices_of(name)
    compiled = nest2(psum_nest, devices).lower(SDS((2, 4, 256), F32)).compile()
    memory = compiled.memory_analysis()
    assert memory.argument_size_in_bytes == memory.output_size_in_bytes == 256 * 4
    cost = compiled.cost_analysis()
    if devices[0].platform == "tpu":
        assert cost is not None and cost["optimal_seconds"] > 0  # XLA:TPU's estimate
    else:
        assert cost is None  # XLA:GPU's plugin gives none, as JAX's Compiled says
    table = compiled.plan().table()
    assert "what XLA runs" in table and "all-reduce" in table


@pytest.mark.parametrize("name", [GPU_TWO_HOSTS, "tpu:v5e:2x4"])
def test_calling_a_target_program_here_is_a_device_error(name):
    devices = devices_of(name)
    f = nest2(psum_nest, devices)
    data, model = two_level(len(devices))
    x = np.zeros((data, model, 8), np.float32)
    compiled = f.lower(SDS(x.shape, F32)).compile()
    with pytest.raises(pmapc.DeviceError, match=r"compiled for .* of a topology"):
        compiled(x)
    with pytest.raises(pmapc.DeviceError, match="this process does not have"):
        f(x)


def test_a_host_callback_for_a_tpu_is_refused_at_its_line():
    devices = devices_of("tpu:v5e:2x4")

    def body(y):
        jax.debug.print("{}", y)
        return lax.psum(y, "model")

    with pytest.raises(pmapc.UnsupportedError, match=r"host callback .* on TPU") as raised:
        nest2(body, devices).lower(SDS((2, 4, 8), F32))
    assert raised.value.location.file == __file__


def test_xla_tpu_refusing_part_of_a_v5e_slice_is_a_device_error():
    devices = devices_of("tpu:v5e:16x16")
    lowered = nest2(psum_nest, devices[:8]).lower(SDS((2, 4, 8), F32))
    with pytest.raises(pmapc.DeviceError, match="8 of the topology's 256 devices"):
        lowered.compile()


@pytest.mark.parametrize("name", [GPU_ONE_HOST, "tpu:v5p:4x4x4"])
def test_a_nest_folds_onto_a_topology_s_devices(name):
    """A 2x4 nest on 2 of the target's devices: 'model' folds into each device's
    block, so its psum is local and XLA runs one all-gather over 'data'."""
    devices = devices_of(name)
    f = nest2(psum_nest, None)
    with pmapc.fold_onto(devices[:2]):
        lowered = f.lower(SDS((2, 4, 16), F32))
    assert str(lowered.compilation.mesh) == "data=2"
    runs = [(op.removesuffix("-start"), axes) for op, axes in xla_axes(lowered.compile())]
    assert runs == [("all-gather", ("data",))]  # XLA:GPU's async, a -start/-done pair


# ----------------------------------------------------------------------------
# The benchmark workloads and the examples (benchmarks/targets.py builds them)


@pytest.mark.parametrize("name", [GPU_ONE_HOST, GPU_TWO_HOSTS, "tpu:v5e:4x4", "tpu:v5p:4x4x4"])
def test_workloads_and_examples_compile_as_shard_map_does(name):
    """W1-W3, quickstart and mlp_training: XLA runs the collectives of pmapc's plan, over
    the axes it names, and the same kinds jax.jit(shard_map) compiles to."""
    devices = devices_of(name)
    mesh = Mesh(("data", "model"), target_programs.mesh_shape(len(devices)))
    programs = target_programs.workload_programs(devices)
    programs += target_programs.example_programs(devices)[:2]
    for program in programs:
        compiled = target_programs.compile_pmapc(program, devices)
        ours = xla_axes(compiled)
        assert all(group is not None for _, group in ours), (program.name, ours)
        pmapc_steps = {step.axes for step in compiled.plan().steps}
        assert {group for _, group in ours} <= pmapc_steps, program.name
        if program.shard_fn is not None:
            peer = hlo_axes(target_programs.compile_shard_map(program).as_text(), mesh)
            assert kinds(ours) == kinds(peer), (program.name, ours, peer)
            assert len(ours) <= len(peer), (program.name, ours, peer)


@pytest.mark.parametrize("name", [GPU_ONE_HOST, "tpu:v5e:2x4", "tpu:v5p:4x4x4"])
def test_moe_compiles_xla_s_native_ragged_all_to_all(name):
    devices = devices_of(name)
    program = target_programs.moe_program(devices, *two_level(len(devices)))
    compiled = target_programs.compile_pmapc(program, devices)
    text = compiled.as_text()
    peer = target_programs.compile_shard_map(program).as_text()
    ragged = hlo_collectives.opcode_count(text, "ragged-all-to-all")
    assert ragged > 0 and ragged == hlo_collectives.opcode_count(peer, "ragged-all-to-all")
    plan = compiled.plan()
    assert not any(step.ragged_payload is not None for step in plan.steps)  # not expanded
    assert "expert" in {axis for _, group in xla_axes(compiled) for axis in group or ()}


# ----------------------------------------------------------------------------
# Control flow, depth, transformations


def divergent_body(x):
    """A cond whose predicate differs between the devices of 'model', with a psum over
    'model' in one branch: every device runs both branches (README)."""
    return lax.cond(
        lax.axis_index("model") % 2 == 0,
        lambda v: lax.psum(v, "model"),
        lambda v: v * 3.0,
        x,
    )


@pytest.mark.parametrize("name", [GPU_TWO_HOSTS, "tpu:v5e:2x4"])
def test_a_divergent_cond_runs_its_collective_on_every_device(name):
    devices = devices_of(name)
    data, model = two_level(len(devices))
    compiled = nest2(divergent_body, devices).lower(SDS((data, model, 64), F32)).compile()
    text = compiled.as_text()
    assert hlo_collectives.opcode_count(text, "conditional") == 0
    assert kinds(xla_axes(compiled)) == {"all-reduce"}


def three_level_body(x):
    return lax.psum(x, "b") + lax.all_gather(x, "c").sum(0) + lax.psum(x, ("a", "c"))


@pytest.mark.parametrize("name", [GPU_TWO_HOSTS, "tpu:v5e:4x4", "tpu:v5p:4x4x4"])
def test_a_three_level_nest(name):
    devices = devices_of(name)
    shape = three_level(len(devices))
    f = pmapc.pmap(pmapc.pmap(pmapc.pmap(three_level_body, "c"), "b"), "a", devices=devices)
    compiled = f.lower(SDS((*shape, 32), F32)).compile()
    groups = {group for _, group in xla_axes(compiled)}
    assert {("b",), ("c",), ("a", "c")} <= groups, groups


@pytest.mark.parametrize("name", [GPU_ONE_HOST, GPU_TWO_HOSTS, "tpu:v5e:4x4"])
def test_jit_and_grad_around_a_nest(name):
    devices = devices_of(name)
    data, model = two_level(len(devices))
    mesh = Mesh(("data", "model"), (data, model))
    f = nest2(psum_nest, devices)
    x = SDS((data, model, 64), F32)

    def loss(v):
        return jnp.sum(f(v) ** 2)

    text = jax.jit(jax.grad(loss)).lower(x).compile().as_text()
    axes = hlo_axes(text, mesh)
    assert all(group is not None for _, group in axes), axes
    assert {("model",), ("data",)} <= {group for _, group in axes} | {("data", "model")}
    # the transpose of the all_gather over 'data' is a reduction over it
    assert kinds(axes) & {"reduce-scatter", "all-reduce"}, axes


# ----------------------------------------------------------------------------
# A sample of the goldens


def golden_sample():
    from support.golden_programs import PROGRAMS

    return [p for p in PROGRAMS if p.mode == "value"][::3]


@pytest.mark.parametrize("name", [GPU_ONE_HOST, "tpu:v5p:4x4x4"])
def test_a_sample_of_the_goldens(name):
    from support.golden_programs import make_inputs

    devices = devices_of(name)
    compiled_count = 0
    for program in golden_sample():
        fun = program.build(pmapc.pmap)
        args = [SDS(np.shape(x), jnp.asarray(x).dtype) for x in make_inputs(program)]
        with pmapc.fold_onto(devices):
            compiled = pmapc.lower(fun, *args).compile()
        axes = xla_axes(compiled)
        plan = compiled.plan()
        written = {step.axes for step in plan.steps}
        assert {group for _, group in axes} <= written, (program.name, axes, written)
        assert len(axes) <= len(plan.steps), program.name
        compiled_count += 1
    assert compiled_count >= 5


# ----------------------------------------------------------------------------
# The messages of a target that cannot be had, each by its text


def test_a_target_name_takes_tpu_slices():
    named = targets.parse("tpu:v5e:4x4:slices=2")
    assert named == targets.Target("tpu", "v5e", "4x4", 2)
    assert named.name == "tpu:v5e:4x4:slices=2"
    assert targets.parse("tpu:v5e:4x4:slices=1").name == "tpu:v5e:4x4"
    for text, message in [
        ("tpu:v5e:4x4:slices=0", "'slices=0' is not a slice count; write slices=N"),
        ("tpu:v5e:4x4:2", "'2' is not a slice count; write slices=N"),
        ("gpu:h100:1x2x8:slices=2", "slices=N names TPU slices; a GPU machine's hosts are in"),
    ]:
        with pytest.raises(pmapc.DeviceError) as raised:
            targets.parse(text)
        assert str(raised.value).startswith(f"target '{text}': {message}"), str(raised.value)


def test_a_gpu_model_without_a_target_config_names_those_pmapc_has():
    with pytest.raises(pmapc.DeviceError) as raised:
        targets.parse("gpu:a100:1x1x8")
    assert str(raised.value) == (
        "no GPU target config for 'a100' (target 'gpu:a100:1x1x8'); pmapc has h100"
    )


def test_a_topology_xla_refuses_names_the_target_and_the_forms():
    devices_of("tpu:v5e:2x4")  # libtpu is here
    with pytest.raises(pmapc.DeviceError) as raised:
        targets.target_devices("tpu:v9z:2x2")
    message = str(raised.value)
    assert message.startswith("target 'tpu:v9z:2x2' is not a topology XLA can compile for: ")
    assert message.endswith(f"; name one as {targets.FORM}, e.g. {targets.EXAMPLES}")


def test_xla_refusing_a_whole_topology_says_so():
    devices = devices_of("tpu:v5e:2x4")
    refusal = RuntimeError("UNIMPLEMENTED: no such layout\nmore of XLA's text")
    assert runtime.refused_for_topology(devices, refusal) == (
        "XLA:TPU refused to compile the nest for the topology: UNIMPLEMENTED: no such layout"
    )


def test_a_host_callback_for_a_gpu_topology_is_refused_at_its_line():
    devices = devices_of(GPU_ONE_HOST)

    def body(y):
        jax.debug.print("{}", y)
        return lax.psum(y, "model")

    with pytest.raises(pmapc.UnsupportedError) as raised:
        nest2(body, devices).lower(SDS((2, 4, 8), F32))
    assert (
        "JAX lowers it for a GPU with the GPU backend of this process, and a topology's "
        "devices have none here" in str(raised.value)
    )
    assert raised.value.location.file == __file__


# ----------------------------------------------------------------------------
# The plan by host and slice against XLA's compiled groups


def links_nest(x):
    """Every kind of group: inside the inner axis, along the outer, over both, and a
    ring along the inner axis."""
    size = lax.psum(1, "model")
    ring = lax.ppermute(x, "model", [(i, (i + 1) % size) for i in range(size)])
    total = lax.psum(x * 2, ("data", "model"))
    return lax.psum(x, "model") + lax.all_gather(x, "data").sum(0) + total + ring


@pytest.mark.parametrize("name", ALL_TARGETS)
def test_the_plan_by_host_and_slice_agrees_with_xla_s_groups(name):
    """pmapc's bytes per link equal those of the collectives XLA compiled, mapped to the
    devices' hosts and slices: exactly inside a slice; between slices XLA:TPU hands
    each transfer's whole payload to the DCN runtime, more than the hierarchical
    bound the plan counts, and only for the collectives whose groups cross slices."""
    devices = devices_of(name)
    data, model = two_level(len(devices))
    plan = nest2(links_nest, devices).lower(SDS((data, model, 256), F32)).compile().plan()
    assert plan.placement is not None and plan.xla is not None
    assert (plan.placement.host_count, plan.placement.slice_count) == HOSTS_AND_SLICES[name]
    ours, theirs = plan.by_link(), plan.xla.by_link()
    assert ours is not None and theirs is not None
    assert (ours.in_host, ours.across_hosts) == (theirs.in_host, theirs.across_hosts)
    hosts, slices = HOSTS_AND_SLICES[name]
    assert (ours.across_hosts > 0) == (hosts > slices)
    if slices == 1:
        assert ours.across_slices == theirs.across_slices == 0
        return
    assert theirs.across_slices >= ours.across_slices > 0
    crossing = {step.axes for step in plan.steps if plan.placement.span(step.group_matrix())[1] > 1}
    dcn = {c.axes for c in plan.xla.collectives if c.hlo.dcn}
    assert crossing == {("data",), ("data", "model")} and dcn == {("data",)}
    table = plan.table()
    assert "devices on 8 hosts in 2 slices" in table
    assert "all-reduce (DCN)" in table and "XLA per run by link: in host " in table


def test_a_multi_slice_target_compiles_through_jax_jit_and_pmapc_lower():
    devices = devices_of(TWO_SLICES)
    f = nest2(psum_nest, devices)
    x = SDS((2, 16, 128), F32)
    assert {s.slice_index for s in devices} == {0, 1} and len(devices) == 32
    mesh = Mesh(("data", "model"), (2, 16))
    # jax.jit's HLO is one slice's program: its groups are a slice's devices
    text = jax.jit(f).lower(x).compile().as_text()
    assert hlo_collectives.module_device_count(text) == 16
    plan = pmapc.lower(lambda v: f(v) * 2, x).compile().plan()
    assert plan.mesh == mesh and plan.placement is not None
    assert plan.placement.slice_count == 2
