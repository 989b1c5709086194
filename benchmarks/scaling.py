"""Scaling: pmapc's cost as a program grows, against `jax.jit(shard_map)` in the same run.

    .venv/bin/python benchmarks/scaling.py [--quick] [--series args,mlp,constants,depth,mesh]
        [--json OUT.json]

Each series grows one dimension of a program; every size is a new program for
both systems (caches cleared before each build), built once per repetition:

    args       L mapped arguments and results of a 2x4 nest, each squared (L = 10 .. 1,000)
    mlp        a D-layer MLP training step on a 2x4 nest: each layer {w, b}, the
               loss a psum over 'model', the gradient a pmean over 'data', SGD with
               weight decay; 2D parameter arrays (D = 5 .. 500)
    constants  K psums alternating the axes, each operand scaled by a float literal of
               its own and shifted by another (W4's chain; K = 10 .. 10,000)
    depth      a nest of depth 1 .. 10 on 8 devices (three axes of 2, the rest of
               size 1), a psum over each axis and one over all (groups as mesh axes)
    mesh       a 2-level nest over R x C positions, 8 .. 4,194,304 (a psum over each
               axis, an all_gather over both, an axis_index), lowered ahead of time
               from `jax.ShapeDtypeStruct`s: no devices, and no first call; its
               communication plan (`Lowered.plan()`, the table) and, up to 256x256,
               the plan's text picture

Columns, seconds (median of the repetitions):

    trace      JAX's tracing of the Python function (pmapc: its `Lowered.timings`)
    lower      JAX's lowering to StableHLO (pmapc: to pmapc IR)
    passes     pmapc's passes and the verification of their result
    own        trace + lower (+ passes): what each system does before XLA
    plan       (mesh) the plan's table, and its text picture (`Plan.picture()`)
    first      a new function's first call, `f(*args)` until its result is ready:
               trace, lower, passes, XLA's compile, the run (series with devices;
               sizes up to `FIRST_CALL_UP_TO`, XLA's compile of larger ones takes minutes)

Ratios are pmapc over shard_map. The fitted exponent of a column is the slope of
log(seconds) against log(size), least squares over the series' sizes: 1.0 grows
linearly (a fixed cost at small sizes only lowers it).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import pmapc

pmapc.use_host_devices(8)

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import numpy as np  # noqa: E402
from jax.sharding import PartitionSpec as P  # noqa: E402

import environment  # noqa: E402
from compile_scaling import chain_body  # noqa: E402
from workloads import mesh_of, nested, shard_map_jit  # noqa: E402

SIZES = {
    "args": [10, 30, 100, 300, 1000],
    "mlp": [5, 25, 75, 150, 500],
    "constants": [10, 100, 1000, 10000],
    "depth": [1, 2, 4, 6, 8, 10],
    "mesh": [(2, 4), (16, 16), (64, 64), (256, 256), (1024, 1024), (1 << 20, 4)],
}
QUICK_SIZES = {
    "args": [10, 100],
    "mlp": [5, 25],
    "constants": [10, 100],
    "depth": [2, 6],
    "mesh": [(2, 4), (64, 64)],
}
# The largest size whose first call (XLA's compile included) is measured.
FIRST_CALL_UP_TO = {"args": 1000, "mlp": 150, "constants": 1000, "depth": 10, "mesh": 0}
PICTURE_UP_TO = 256 * 256  # devices: a picture draws each (65,536 a collective at 256x256)
WIDTH, LAYER, BATCH = 4, 8, 4
LEARNING_RATE, WEIGHT_DECAY = 0.01, 1e-4


class Program:
    """One size of a series: the pmapc function, its shard_map peer, their arguments."""

    def __init__(self, nest: Callable, peer: Callable, args: tuple, peer_args: tuple) -> None:
        self.nest, self.peer, self.args, self.peer_args = nest, peer, args, peer_args


# -- the series ----------------------------------------------------------------------------


def blocks(count: int, shape: tuple[int, ...], scale: float = 1.0) -> list[np.ndarray]:
    """`count` 2x4-stacked arrays of `shape` per device (distinct values)."""
    rng = np.random.default_rng(count)
    return [(rng.standard_normal((2, 4, *shape)) * scale).astype(np.float32) for _ in range(count)]


def per_device(body: Callable) -> Callable:
    """`body` on shard_map's blocks [1, 1, ...] of 2x4-stacked arrays, as a nest sees them."""

    def peer_body(*stacked):
        outputs = body(*jax.tree.map(lambda v: v[0, 0], stacked))
        return jax.tree.map(lambda v: v[None, None], outputs)

    return peer_body


def stacked_specs(tree) -> object:
    return jax.tree.map(lambda _: P("data", "model"), tree)


def args_program(count: int) -> Program:
    def body(*ys):
        return tuple(y * y for y in ys)

    args = tuple(blocks(count, (WIDTH,)))
    specs = stacked_specs(args)
    peer = shard_map_jit(per_device(body), mesh_of(2, 4), specs, specs)
    return Program(nested(body), peer, args, args)


def mlp_step(params, x, y):
    def loss_fn(params):
        hidden = x
        for layer in params:
            hidden = jnp.tanh(hidden @ layer["w"] + layer["b"])
        out = jax.lax.psum(hidden, "model")
        return jnp.mean((out - y) ** 2)

    loss, grads = jax.value_and_grad(loss_fn)(params)
    grads = jax.lax.pmean(grads, "data")
    update = jax.tree.map(lambda p, g: p - LEARNING_RATE * (g + WEIGHT_DECAY * p), params, grads)
    return update, loss


def mlp_program(depth: int) -> Program:
    weights = blocks(depth, (LAYER, LAYER), scale=0.3)
    biases = blocks(depth, (LAYER,), scale=0.1)
    params = [{"w": w, "b": b} for w, b in zip(weights, biases)]
    x, y = blocks(2, (BATCH, LAYER))
    args = (params, x, y)
    specs = stacked_specs(args)
    out_specs = (stacked_specs(params), P("data", "model"))
    peer = shard_map_jit(per_device(mlp_step), mesh_of(2, 4), specs, out_specs)
    return Program(nested(mlp_step), peer, args, args)


def constants_program(count: int) -> Program:
    x = blocks(1, (WIDTH,))[0]
    specs = P("data", "model")
    peer = shard_map_jit(per_device(chain_body(count)), mesh_of(2, 4), specs, specs)
    return Program(nested(chain_body(count)), peer, (x,), (x,))


def depth_axes(depth: int) -> list[tuple[str, int]]:
    """(name, size) of each level, outermost first: three of size 2, the rest 1."""
    return [(f"a{level}", 2 if level < 3 else 1) for level in range(depth)]


def depth_body(names: tuple[str, ...]) -> Callable:
    def body(v):
        for name in names:
            v = jax.lax.psum(v, name) * 0.5
        return jax.lax.psum(v, names)

    return body


def depth_program(depth: int) -> Program:
    levels = depth_axes(depth)
    names = tuple(name for name, _ in levels)
    nest = depth_body(names)
    for name, _ in reversed(levels):
        nest = pmapc.pmap(nest, axis_name=name)
    shape = tuple(size for _, size in levels)
    x = np.arange(int(np.prod(shape)) * WIDTH, dtype=np.float32).reshape(*shape, WIDTH)
    devices = np.array(jax.devices()[: x.size // WIDTH]).reshape(shape)
    mesh = jax.sharding.Mesh(devices, names)
    spec = P(*names)

    def peer_body(block):
        return depth_body(names)(block.reshape(WIDTH)).reshape(block.shape)

    peer = shard_map_jit(peer_body, mesh, spec, spec)
    return Program(nest, peer, (x,), (x,))


def mesh_body(v):
    total = jax.lax.psum(v, "model") + jax.lax.pmean(v, "data")
    gathered = jax.lax.all_gather(total, ("data", "model"))
    return gathered.sum(0) + jax.lax.axis_index("model")


def mesh_program(shape: tuple[int, int]) -> Program:
    rows, columns = shape
    nest = partial(pmapc.pmap, axis_name="data")(partial(pmapc.pmap, axis_name="model")(mesh_body))
    x = jax.ShapeDtypeStruct((rows, columns, WIDTH), jnp.float32)
    mesh = jax.sharding.AbstractMesh((rows, columns), ("data", "model"))
    sharding = jax.sharding.NamedSharding(mesh, P("data", "model"))
    peer_x = jax.ShapeDtypeStruct((rows, columns * WIDTH), jnp.float32, sharding=sharding)
    peer = jax.jit(
        jax.shard_map(
            lambda v: mesh_body(v.reshape(WIDTH)).reshape(v.shape),
            mesh=mesh,
            in_specs=P("data", "model"),
            out_specs=P("data", "model"),
            check_vma=False,
        )
    )
    return Program(nest, peer, (x,), (peer_x,))


PROGRAMS: dict[str, Callable[..., Program]] = {
    "args": args_program,
    "mlp": mlp_program,
    "constants": constants_program,
    "depth": depth_program,
    "mesh": mesh_program,
}

# -- measuring -----------------------------------------------------------------------------


def fresh() -> None:
    """No cache of an earlier build is hit (JAX's and pmapc's in-memory caches)."""
    jax.clear_caches()
    gc.collect()


def pmapc_stages(program: Program, plan: bool = False) -> dict[str, float]:
    fresh()
    start = time.perf_counter()
    lowered = program.nest.lower(*program.args)
    wall = time.perf_counter() - start
    timings = dict(lowered.timings)
    trace, lower = timings.pop("trace"), timings.pop("lower")
    passes = sum(timings.values())
    stages = {
        "trace": trace,
        "lower": lower,
        "passes": passes,
        "own": trace + lower + passes,
        "wall": wall,
        "by_pass": timings,
    }
    if plan:
        stages.update(plan_seconds(lowered))
    return stages


def plan_seconds(lowered) -> dict[str, float]:
    """Seconds of the plan's table and (up to PICTURE_UP_TO devices) of its picture."""
    start = time.perf_counter()
    plan = lowered.plan()
    plan.table()
    seconds = {"plan": time.perf_counter() - start}
    if plan.mesh.size <= PICTURE_UP_TO:
        start = time.perf_counter()
        plan.picture()
        seconds["picture"] = time.perf_counter() - start
    return seconds


def peer_stages(program: Program, deviceless: bool) -> dict[str, float]:
    fresh()
    start = time.perf_counter()
    traced = program.peer.trace(*program.peer_args)
    traced_at = time.perf_counter()
    if deviceless:
        traced.lower(lowering_platforms=("cpu",))
    else:
        traced.lower()
    lowered_at = time.perf_counter()
    return {
        "trace": traced_at - start,
        "lower": lowered_at - traced_at,
        "own": lowered_at - start,
    }


def first_call(function: Callable, args: tuple) -> tuple[float, object]:
    fresh()
    start = time.perf_counter()
    result = jax.block_until_ready(function(*args))
    return time.perf_counter() - start, result


def measure(series: str, size, repetitions: int) -> dict:
    samples = []
    for _ in range(repetitions):
        program = PROGRAMS[series](size)
        sample = {
            "pmapc": pmapc_stages(program, plan=series == "mesh"),
            "shard_map": peer_stages(program, deviceless=series == "mesh"),
        }
        if series != "mesh" and positions(series, size) <= FIRST_CALL_UP_TO[series]:
            program = PROGRAMS[series](size)  # new functions: nothing traced is reused
            ours, ours_out = first_call(program.nest, program.args)
            theirs, theirs_out = first_call(program.peer, program.peer_args)
            check_agreement(series, ours_out, theirs_out)
            sample["pmapc"]["first"], sample["shard_map"]["first"] = ours, theirs
        samples.append(sample)
    return median_of(samples)


def positions(series: str, size) -> int:
    """The number a series grows: its size, or a mesh's positions."""
    return int(np.prod(size)) if series == "mesh" else int(size)


def check_agreement(series: str, ours, theirs) -> None:
    """Both systems compute the same numbers (the depth peer's blocks keep their shape)."""
    for mine, peer in zip(jax.tree.leaves(ours), jax.tree.leaves(theirs)):
        np.testing.assert_allclose(
            np.asarray(mine).reshape(-1),
            np.asarray(peer).reshape(-1),
            rtol=1e-4,
            atol=1e-5,
            err_msg=f"scaling {series}: pmapc and shard_map disagree",
        )


def median_of(samples: list):
    first = samples[0]
    if isinstance(first, dict):
        return {key: median_of([s[key] for s in samples if key in s]) for key in first}
    return statistics.median(samples)


def exponent(sizes: list[int], seconds: list[float]) -> float | None:
    """The least-squares slope of log(seconds) over log(size)."""
    if len(sizes) < 2:
        return None
    slope, _ = np.polyfit(np.log(sizes), np.log(seconds), 1)
    return float(slope)


COLUMNS = (
    ("pmapc", "trace"),
    ("pmapc", "lower"),
    ("pmapc", "passes"),
    ("pmapc", "own"),
    ("shard_map", "own"),
    ("pmapc", "first"),
    ("shard_map", "first"),
    ("pmapc", "plan"),
    ("pmapc", "picture"),
)


def fits(series: str, rows: dict) -> dict[str, float | None]:
    """The fitted exponent of each column, over the sizes that have it."""
    result = {}
    for system, column in COLUMNS:
        points = [
            (positions(series, size), row[system][column])
            for size, row in rows.items()
            if column in row[system]
        ]
        result[f"{system} {column}"] = exponent([p for p, _ in points], [s for _, s in points])
    return result


def table(series: str, rows: dict, exponents: dict) -> str:
    last = "plan | picture" if series == "mesh" else "pmapc first | shard_map first | first ratio"
    header = f"| size | trace | lower | passes | pmapc own | shard_map own | own ratio | {last} |"
    out = [f"### {series}", "", header, "|---" * (header.count("|") - 1) + "|"]
    for size, row in rows.items():
        ours, theirs = row["pmapc"], row["shard_map"]
        label = "x".join(map(str, size)) if isinstance(size, tuple) else str(size)
        out.append(
            f"| {label} | {ours['trace']:.3f} | {ours['lower']:.3f} | {ours['passes']:.3f} "
            f"| {ours['own']:.3f} | {theirs['own']:.3f} | {ours['own'] / theirs['own']:.2f}x "
            f"| {last_cells(series, ours, theirs)} |"
        )
    fitted = ", ".join(
        f"{name} {value:.2f}" for name, value in exponents.items() if value is not None
    )
    out += ["", f"fitted exponents: {fitted}", ""]
    return "\n".join(out)


def last_cells(series: str, ours: dict, theirs: dict) -> str:
    if series == "mesh":
        picture = f"{ours['picture']:.3f}" if "picture" in ours else "-"
        return f"{ours['plan']:.3f} | {picture}"
    if "first" not in ours:
        return "- | - | -"
    return f"{ours['first']:.3f} | {theirs['first']:.3f} | {ours['first'] / theirs['first']:.2f}x"


def run(series_names: list[str], quick: bool, repetitions: int) -> dict:
    measure("args", 2, 1)  # JAX's and pmapc's first uses, not a program's cost
    results = {}
    for series in series_names:
        sizes = (QUICK_SIZES if quick else SIZES)[series]
        rows = {}
        for size in sizes:
            runs = 1 if positions(series, size) >= 10000 else repetitions
            rows[size] = measure(series, size, runs)
            print(f"  {series} {size}: done", file=sys.stderr)
        exponents = fits(series, rows)
        print(table(series, rows, exponents))
        results[series] = {
            "rows": {str(size): row for size, row in rows.items()},
            "exponents": exponents,
        }
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", default=",".join(SIZES), help="comma-separated series")
    parser.add_argument("--quick", action="store_true", help="two small sizes a series")
    parser.add_argument("--repetitions", type=int, default=3, help="builds per size (median)")
    parser.add_argument("--json", type=Path, help="write every figure here")
    args = parser.parse_args(argv)
    names = args.series.split(",")
    unknown = sorted(set(names) - set(SIZES))
    if unknown:
        parser.error(f"unknown series {unknown[0]!r}; choose from {', '.join(SIZES)}")
    results = run(names, args.quick, 1 if args.quick else args.repetitions)
    if args.json:
        settings = {"quick": args.quick, "repetitions": args.repetitions}
        environment.write_results(args.json, settings, series=results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
