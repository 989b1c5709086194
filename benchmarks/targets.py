"""Every workload and example compiled for a GPU machine and TPU pods, on this machine.

    JAX_PLATFORMS=cpu .venv/bin/python benchmarks/targets.py [--rounds 5] [--targets NAME,...]

Each program is compiled ahead of time for the devices of a topology
(`pmapc.target_devices`: H100 x 8, TPU v5e 16x16 = 256 chips, TPU v5p 8x8x8 = 512
chips), by XLA:GPU's or XLA:TPU's own compiler, twice: as pmapc's nested
`pmapc.pmap` and as `jax.jit(jax.shard_map)` of the same per-device body on the
same devices, from `jax.ShapeDtypeStruct`s (nothing runs). Per program and side:

- compile: seconds of `lower(...).compile()`, from trace to XLA's executable with
  every cache emptied first (median of `--rounds`), and of them pmapc's own stages
  (tracing each map, its lowering to pmapc IR, its passes: `Lowered.timings`);
- collectives: the compiled HLO's, by kind, with the async ones (`-start`/`-done`
  pairs or async wrappers) and XLA's native `ragged-all-to-all`s counted apart;
- bytes: per device per step by the plan's cost model (benchmarks/hlo_stats.py);
- temp: `memory_analysis().temp_size_in_bytes`;
- optimal: `cost_analysis()["optimal_seconds"]`, XLA:TPU's estimate of a step (none
  on GPU).

The meshes grow with the target: data x model = 2x4 on 8 devices, 16x16 on 256,
32x16 on 512; the examples (quickstart, mlp_training, moe) take their mesh from
their arguments' shapes, so they are compiled at the same sizes. Needs
`pip install 'pmapc[targets]'`; prints a markdown table (benchmarks/README.md,
"GPU and TPU targets").
"""

from __future__ import annotations

import argparse
import dataclasses
import pathlib
import statistics
import sys
import time
from collections.abc import Callable, Sequence

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import NamedSharding  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import hlo_stats  # noqa: E402
import pmapc  # noqa: E402
import workloads  # noqa: E402
from example_modules import load_example  # noqa: E402
from pmapc.compiler.hlo_collectives import opcode_count  # noqa: E402
from pmapc.compiler.plan import format_bytes  # noqa: E402

TARGETS = {
    "H100 x 8": "gpu:h100:1x1x8",
    "TPU v5e 16x16": "tpu:v5e:16x16",
    "TPU v5p 8x8x8": "tpu:v5p:8x8x8",
}
SDS = jax.ShapeDtypeStruct


@dataclasses.dataclass(frozen=True)
class Program:
    """One program for a set of devices: pmapc's nest and, where one exists, its
    `jax.jit(shard_map)` peer on the same devices; arguments abstract."""

    name: str
    pmapc_fn: Callable
    pmapc_args: tuple
    shard_fn: Callable | None = None
    shard_args: tuple = ()
    ragged: str | None = None  # pmapc.lower's ragged= (None: by the devices' platform)


def mesh_shape(count: int) -> tuple[int, int]:
    """data x model for `count` devices: 2x4 on 8, 16x16 on 256, 32x16 on 512."""
    model = 4 if count <= 8 else 16
    return count // model, model


def abstract(values: Sequence, mesh=None, specs: Sequence | None = None) -> tuple:
    """Each value as a ShapeDtypeStruct of the type JAX gives it (float64 arrays are
    float32 without x64), laid out on `mesh` by `specs` if given."""
    dtypes = [jax.dtypes.canonicalize_dtype(np.asarray(v).dtype) for v in values]
    if mesh is None or specs is None:
        return tuple(SDS(np.shape(v), dtype) for v, dtype in zip(values, dtypes))
    return tuple(
        SDS(np.shape(v), dtype, sharding=NamedSharding(mesh, spec))
        for v, dtype, spec in zip(values, dtypes, specs, strict=True)
    )


def from_workload(workload: workloads.Workload, devices: Sequence) -> Program:
    mesh = workloads.mesh_of(*workload.mesh_shape, devices)
    return Program(
        workload.name,
        workload.pmapc_fn,
        abstract(workload.pmapc_args),
        workload.shard_fn,
        abstract(workload.shard_args, mesh, workload.shard_in_specs),
    )


EXAMPLES = [load_example(name) for name in ("quickstart", "mlp_training", "moe")]


def workload_programs(devices: Sequence) -> list[Program]:
    """W1-W3 on a mesh of all of `devices` (W2's arrays 32 MiB in all)."""
    data, model = mesh_shape(len(devices))
    per_device = max(1024, (8 << 20) // len(devices))
    built = [
        workloads.mlp(data, model, devices=devices),
        workloads.unshard("sum", data, model, per_device, devices=devices),
        workloads.unshard("scale", data, model, per_device, devices=devices),
        workloads.latency_loop(100, data, model, devices=devices),
    ]
    return [from_workload(workload, devices) for workload in built]


def example_programs(devices: Sequence) -> list[Program]:
    """examples/quickstart.py, mlp_training.py and moe.py (native ragged_all_to_all) on a
    mesh of all of `devices`, sized by their arguments."""
    data, model = mesh_shape(len(devices))
    quickstart, training = load_example("quickstart"), load_example("mlp_training")
    f32 = jnp.float32
    w1 = SDS((model, training.D_IN, training.HIDDEN // model), f32)
    w2 = SDS((model, training.HIDDEN // model, training.D_OUT), f32)
    x = SDS((data, training.BATCH, training.D_IN), f32)
    y = SDS((data, training.BATCH, training.D_OUT), f32)
    return [
        Program("examples/quickstart.py", quickstart.step, (SDS((data, model, 3), f32),)),
        Program("examples/mlp_training.py", training.train_step, (w1, w2, x, y)),
        moe_program(devices, data, model),
    ]


def moe_program(devices: Sequence, data: int, experts: int, expanded: bool = False) -> Program:
    """examples/moe.py's training step on data x expert, its ragged_all_to_all XLA's own,
    beside the same per-device step in `jax.jit(shard_map)` (JAX's native op too); with
    `expanded`, pmapc's all_to_alls of padded slices beside benchmarks/moe.py's
    capacity-padded shard_map (for XLA:TPU on v5e, which runs no native one)."""
    moe = load_example("moe")
    f32 = jnp.float32
    per_device, tokens = moe.EXPERTS_PER_DEVICE, moe.TOKENS
    d_model, hidden = moe.D_MODEL, moe.HIDDEN
    router = (d_model, experts * per_device)
    w1, w2 = (experts, per_device, d_model, hidden), (experts, per_device, hidden, d_model)
    tokens_shape = (data, experts, tokens, d_model)
    shapes = (router, w1, w2, tokens_shape, tokens_shape)
    mesh = jax.sharding.Mesh(workloads.mesh_of(data, experts, devices).devices, ("data", "expert"))
    specs = (P(), P("expert"), P("expert"), P("data", "expert"), P("data", "expert"))

    layer = moe.moe_layer
    if expanded:
        import moe as moe_benchmark  # benchmarks/moe.py: the padded peer's layer

        layer = moe_benchmark.padded_layer

    def body(router, w1, w2, x, y):
        router, w1, w2, loss = moe.local_step(router, w1[0], w2[0], x[0, 0], y[0, 0], layer)
        return router, w1[None], w2[None], loss

    shard_fn = workloads.shard_map_jit(body, mesh, specs, (P(), P("expert"), P("expert"), P()))
    return Program(
        "examples/moe.py ("
        + ("expanded: no native ragged_all_to_all on v5e" if expanded else "native")
        + ")",
        moe.train_step,
        tuple(SDS(shape, f32) for shape in shapes),
        shard_fn,
        tuple(SDS(s, f32, sharding=NamedSharding(mesh, p)) for s, p in zip(shapes, specs)),
        "expanded" if expanded else None,
    )


def compile_pmapc(program: Program, devices: Sequence):
    """pmapc's program compiled for `devices` (the nest on the first it needs)."""
    with pmapc.fold_onto(devices):
        return pmapc.lower(program.pmapc_fn, *program.pmapc_args, ragged=program.ragged).compile()


def compile_shard_map(program: Program):
    assert program.shard_fn is not None
    return program.shard_fn.lower(*program.shard_args).compile()


@dataclasses.dataclass(frozen=True)
class Measured:
    """One side's compiled program: its compile seconds and what XLA made."""

    seconds: float
    own_seconds: float | None  # pmapc's own stages (trace, lower, passes); None: JAX's
    collectives: dict[str, int]  # kind -> ops in the HLO
    asynchronous: int
    ragged: int  # XLA's native ragged-all-to-all ops
    wire_bytes: float
    temp_bytes: int
    optimal_seconds: float | None

    @property
    def count(self) -> int:
        return sum(self.collectives.values()) + self.ragged

    def describe(self) -> str:
        kinds = [f"{kind} {n}" for kind, n in self.collectives.items() if n]
        if self.ragged:
            kinds.append(f"ragged-all-to-all {self.ragged}")
        text = ", ".join(kinds) or "none"
        return text + (f" ({self.asynchronous} async)" if self.asynchronous else "")


def measure_both(
    compile_pmapc_once: Callable, compile_peer_once: Callable | None, devices: int, rounds: int
) -> tuple[Measured, Measured | None]:
    """Compile both sides `rounds` times, interleaved (pmapc, then its peer, in each
    round: the machine's load drifts), each from a cold start (JAX's caches, pmapc's
    with them, emptied first: JAX keeps a jit's compiled executable and would answer a
    second `compile()` from memory); each side's median seconds and figures."""
    sides = [compile_pmapc_once] + ([compile_peer_once] if compile_peer_once else [])
    seconds: list[list[float]] = [[] for _ in sides]
    compiled: list = [None] * len(sides)
    for _ in range(rounds):
        for index, compile_once in enumerate(sides):
            jax.clear_caches()
            start = time.perf_counter()
            compiled[index] = compile_once()
            seconds[index].append(time.perf_counter() - start)
    measured = [
        figures(result, statistics.median(times), devices)
        for result, times in zip(compiled, seconds)
    ]
    return measured[0], (measured[1] if len(measured) > 1 else None)


def figures(compiled, seconds: float, device_count: int) -> Measured:
    """What XLA made of one compiled program."""
    text = compiled.as_text()
    parsed = hlo_stats.parse(text, device_count)
    stats = hlo_stats.collective_stats(text, device_count)
    cost = compiled.cost_analysis() or {}
    compilation = getattr(compiled, "compilation", None)  # pmapc's: its stages' seconds
    return Measured(
        seconds,
        None if compilation is None else sum(compilation.timings.values()),
        {kind: n for kind, n in stats.static_count.items() if n},
        sum(c.is_async for c in parsed.collectives),
        opcode_count(text, "ragged-all-to-all"),
        stats.total_bytes,
        compiled.memory_analysis().temp_size_in_bytes,
        cost.get("optimal_seconds"),
    )


def ratio(ours: float | None, peer: float | None) -> str:
    if ours is None or peer is None:
        return "-"
    if peer == 0:
        return "1.00" if ours == 0 else "inf"
    return f"{ours / peer:.2f}"


def table_row(target: str, name: str, ours: Measured, peer: Measured | None) -> str:
    def cells(m: Measured | None) -> list[str]:
        if m is None:
            return ["-"] * 5
        optimal = "-" if m.optimal_seconds is None else f"{m.optimal_seconds * 1e6:.3g} us"
        own = "" if m.own_seconds is None else f" ({m.own_seconds:.2f} pmapc's)"
        return [
            f"{m.seconds:.2f}{own}",
            m.describe(),
            format_bytes(m.wire_bytes),
            format_bytes(m.temp_bytes),
            optimal,
        ]

    ratios = (
        ["-"] * 5
        if peer is None
        else [
            ratio(ours.count, peer.count),
            ratio(ours.wire_bytes, peer.wire_bytes),
            ratio(ours.temp_bytes, peer.temp_bytes),
            ratio(ours.optimal_seconds, peer.optimal_seconds),
            ratio(ours.seconds, peer.seconds),
        ]
    )
    return "| " + " | ".join([target, name, *cells(ours), *cells(peer), *ratios]) + " |"


HEADER = (
    "| target | program | pmapc compile s | pmapc collectives | pmapc bytes | pmapc temp | "
    "pmapc optimal | shard_map compile s | shard_map collectives | shard_map bytes | "
    "shard_map temp | shard_map optimal | collectives x | bytes x | temp x | optimal x | "
    "compile x |\n" + "| --- " * 17 + "|"
)


def run_target(label: str, name: str, rounds: int) -> list[str]:
    devices = pmapc.target_devices(name)
    rows = []
    for program in workload_programs(devices) + example_programs(devices):
        try:  # a first compile of each side, outside the rounds: warm for both
            compile_pmapc(program, devices)
        except pmapc.DeviceError:  # XLA:TPU on v5e: no native ragged-all-to-all
            assert program.ragged is None, program.name
            program = moe_program(devices, *mesh_shape(len(devices)), expanded=True)
            compile_pmapc(program, devices)
        if program.shard_fn is not None:
            compile_shard_map(program)
        ours, peer = measure_both(
            lambda p=program: compile_pmapc(p, devices),
            None if program.shard_fn is None else lambda p=program: compile_shard_map(p),
            len(devices),
            rounds,
        )
        rows.append(table_row(label, program.name, ours, peer))
        print(rows[-1], file=sys.stderr, flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="compiles per program and side")
    parser.add_argument(
        "--targets", default=",".join(TARGETS), help="comma-separated labels of TARGETS"
    )
    args = parser.parse_args(argv)
    jax.config.update("jax_platforms", "cpu")  # XLA:TPU and XLA:GPU compile; JAX runs on CPU
    rows = []
    for label in args.targets.split(","):
        rows += run_target(label, TARGETS[label], args.rounds)
    print(f"JAX {jax.__version__}, pmapc {pmapc.__version__}; medians of {args.rounds} compiles")
    print(HEADER)
    print("\n".join(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
