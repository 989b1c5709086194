"""New programs, each called once: time and resident memory against `jax.jit(shard_map)`.

    .venv/bin/python benchmarks/new_programs.py [--count 300] [--rounds 3]
        [--sizes tiny,W1,distinct,distinct-step,restart,restart-step] [--json OUT.json]
    .venv/bin/python benchmarks/new_programs.py --interleaved [--count 100] [--rounds 3]
        [--sizes ...] [--json OUT.json]
    .venv/bin/python benchmarks/new_programs.py --stages [--count 100]

What a hyper-parameter sweep, a notebook or a test suite does: make a program,
call it once, drop it, make the next. Each program is new to both compilers
(its constant differs), so every call traces, lowers and compiles; pmapc runs
its passes on the first of a structure only. Three sizes:

    tiny      a 2x4 psum over 'model' of the input times the program's constant
    W1        W1's MLP SGD step (benchmarks/workloads.py) with the program's learning rate
    distinct  tiny, its input 2x4xN for the N-th program: each program's structure
              is its own, so pmapc compiles every one (tiny and W1 programs share
              the structure of the first, lowering/structure.py)
    distinct-step
              W1's step on a batch of 4 + N rows a data shard for the N-th program
              (256 -> 64 -> 32): a new structure each
    restart, restart-step
              distinct and distinct-step in a restarted process: a child first
              makes and calls the same programs with JAX's persistent compilation
              cache on (`jax_compilation_cache_dir`, every executable kept), then
              the measured child, a new process, makes them again: JAX finds each
              executable in the cache, pmapc each per-device program
              (compiler/persistent.py)

Each (size, system) runs in a child process of its own, so that its resident
memory is its own: the child makes one program first (what every program
shares: JAX's and pmapc's first-use costs), then `--count` programs, and
reports the mean time of a program from creation until its result is ready,
and its resident memory after the first program and after the last. Children
run interleaved, pmapc and shard_map in a new order each round; the ratio is
the median over rounds of pmapc's mean time over shard_map's. Resident memory
is read twice, as the process holds it and after `malloc_trim(0)` (what glibc
keeps of freed memory, in its arenas, is not the program's).

`--interleaved` runs both systems in one child a round instead, program by
program (pmapc then shard_map, then the other way round), and reports each
system's median program: on a machine whose speed drifts over minutes (a
shared one), children run one after the other compare different speeds, and
this compares programs made a few milliseconds apart. It measures no memory
(the two systems share the process). A restart size's child comes after one
that makes the same programs with both systems.

`--stages` times each stage of new tiny programs through both systems'
ahead-of-time APIs instead (trace, lower, pmapc's passes, XLA's compile, the
first run), alternating pmapc and shard_map in one process.
"""

from __future__ import annotations

import argparse
import ctypes
import functools
import json
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import environment

SYSTEMS = ("pmapc", "shard_map")
SIZES = ("tiny", "W1", "distinct", "distinct-step", "restart", "restart-step")
# Each restart size runs the programs of this one, first to fill the cache.
RESTARTED = {"restart": "distinct", "restart-step": "distinct-step"}


def child(size: str, system: str, count: int, cache: str | None = None) -> dict:
    """Make and call `1 + count` new programs of `size` with `system` (JAX's persistent
    cache in directory `cache`, if given); the figures."""
    import pmapc

    pmapc.use_host_devices(8)
    import jax

    if cache is not None:
        jax.config.update("jax_compilation_cache_dir", cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    make = program_maker(RESTARTED.get(size, size), system)

    def new_program(index: int) -> None:
        function, args = make(0.001 * (index + 1), index)
        jax.block_until_ready(function(*args))

    if size in RESTARTED:  # first uses, by a program no earlier process made
        warm, args = program_maker("distinct", system)(0.5, count + 50)
        jax.block_until_ready(warm(*args))
        first_index = 0
    else:
        new_program(0)
        first_index = 1
    first = resident()
    start = time.perf_counter()
    for index in range(first_index, first_index + count):
        new_program(index)
    seconds = (time.perf_counter() - start) / count
    last = resident()
    return {
        "size": size,
        "system": system,
        "count": count,
        "seconds_per_program": seconds,
        "rss_growth_mib": last["rss"] - first["rss"],
        "trimmed_growth_mib": last["trimmed"] - first["trimmed"],
    }


def child_interleaved(size: str, count: int, cache: str | None = None) -> dict:
    """Make and call `count` new programs of `size` with each system, alternating
    (after one program of each that pays the first uses); each system's median
    program, from creation until its result is ready."""
    import pmapc

    pmapc.use_host_devices(8)
    import jax

    if cache is not None:
        jax.config.update("jax_compilation_cache_dir", cache)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)
    makers = {system: program_maker(RESTARTED.get(size, size), system) for system in SYSTEMS}
    for system in SYSTEMS:  # first uses, by a program no earlier process made
        warm, args = program_maker("distinct", system)(0.5, count + 50)
        jax.block_until_ready(warm(*args))
    seconds: dict[str, list[float]] = {system: [] for system in SYSTEMS}
    for index in range(count):
        for system in SYSTEMS if index % 2 == 0 else SYSTEMS[::-1]:
            start = time.perf_counter()
            function, args = makers[system](0.001 * (index + 1), index)
            jax.block_until_ready(function(*args))
            seconds[system].append(time.perf_counter() - start)
            del function, args
    return {
        "size": size,
        "count": count,
        "median_seconds": {system: statistics.median(seconds[system]) for system in SYSTEMS},
    }


def run_interleaved(size: str, count: int) -> dict:
    """`child_interleaved(size, count)` in a process of its own; a restart size's after
    a process that fills a new persistent cache with the same programs."""
    if size not in RESTARTED:
        return _run_interleaved(size, count)
    with tempfile.TemporaryDirectory(prefix="pmapc-restart-") as cache:
        _run_interleaved(size, count, cache)
        return _run_interleaved(size, count, cache)


def _run_interleaved(size: str, count: int, cache: str | None = None) -> dict:
    arguments = ["--child-interleaved", size, "--count", str(count)]
    return _run_child(arguments, f"the interleaved child for {size}", cache)


def interleaved_table(results: list[dict], sizes: list[str], count: int) -> str:
    """One row per size: each system's median program (the median over rounds), and
    the ratio of the two in each round."""
    rows = [
        f"{count} new programs of each system, called once, alternating in one process "
        "(medians over rounds):",
        "| program | pmapc ms | shard_map ms | ratio |",
        "|---|---|---|---|",
    ]
    for size in sizes:
        rounds = [r["median_seconds"] for r in results if r["size"] == size]
        ratios = [r["pmapc"] / r["shard_map"] for r in rounds]
        ms = {s: statistics.median(r[s] for r in rounds) * 1e3 for s in SYSTEMS}
        rows.append(
            f"| {size} | {ms['pmapc']:.1f} | {ms['shard_map']:.1f} "
            f"| {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) |"
        )
    return "\n".join(rows)


def program_maker(size: str, system: str):
    """make(constant, index) -> (the function, its arguments): the `index`-th program
    of `size` for `system`."""
    if size == "distinct-step":
        return functools.partial(_distinct_step, system)
    if size in ("tiny", "distinct"):
        return functools.partial(_tiny, size, system)
    return functools.partial(_w1_sweep, system)


def _distinct_step(system: str, constant: float, index: int):
    """W1's step on a batch of its own (a structure of its own); `constant` is unused."""
    import workloads

    step = workloads.mlp(2, 4, batch=4 + index, d_in=256, hidden=64, d_out=32)
    if system == "pmapc":
        return step.pmapc_fn, step.pmapc_args
    return step.shard_fn, step.shard_args


def _tiny(size: str, system: str, constant: float, index: int):
    import jax
    import numpy as np
    from jax.sharding import PartitionSpec as P

    import workloads

    length = 3 if size == "tiny" else 1 + index
    x = np.arange(2 * 4 * length, dtype=np.float32).reshape(2, 4, length)

    def body(y):
        return jax.lax.psum(y * constant, "model")

    if system == "pmapc":
        return workloads.nested(body), (x,)
    specs = P("data", "model")
    return workloads.shard_map_jit(body, workloads.mesh_of(2, 4), specs, specs), (x,)


@functools.cache
def _w1():
    import workloads

    return workloads.mlp(2, 4)


def _w1_sweep(system: str, constant: float, index: int):
    """W1's step with learning rate `constant`: one structure for every program."""
    import jax
    from jax.sharding import PartitionSpec as P

    import workloads

    w1 = _w1()

    def step(w1_block, w2_block, x, y):
        loss, (g1, g2) = jax.value_and_grad(_mlp_loss, argnums=(0, 1))(w1_block, w2_block, x, y)
        g1, g2 = jax.lax.psum((g1, g2), "data")
        return w1_block - constant * g1, w2_block - constant * g2, loss

    if system == "pmapc":
        return workloads.nested(step, inner_in_axes=(0, 0, None, None)), w1.pmapc_args
    out_specs = (P(None, "model"), P("model", None), P())
    mesh = workloads.mesh_of(2, 4)
    return workloads.shard_map_jit(step, mesh, w1.shard_in_specs, out_specs), w1.shard_args


def stages(count: int) -> dict[str, dict[str, float]]:
    """Median milliseconds of each stage of `count` new tiny programs, through the
    ahead-of-time API of each system: pmapc's `f.lower(x)` (its `timings`: JAX's
    trace, JAX's lowering to pmapc IR, the passes), `.compile()` and the first call;
    `jax.jit(shard_map)`'s `.trace(x)`, `.lower()`, `.compile()` and the first call."""
    import pmapc

    pmapc.use_host_devices(8)
    import jax
    import numpy as np
    from jax.sharding import PartitionSpec as P

    import workloads

    x = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)
    specs = P("data", "model")
    mesh = workloads.mesh_of(2, 4)
    times: dict[str, dict[str, list[float]]] = {"pmapc": {}, "shard_map": {}}

    def record(system: str, stage: str, seconds: float) -> None:
        times[system].setdefault(stage, []).append(seconds * 1e3)

    for index in range(count + 1):

        def body(y, constant=0.001 * (index + 1)):
            return jax.lax.psum(y * constant, "model")

        start = time.perf_counter()
        lowered = workloads.nested(body).lower(x)
        lowered_at = time.perf_counter()
        compiled = lowered.compile()
        compiled_at = time.perf_counter()
        jax.block_until_ready(compiled(x))
        ran_at = time.perf_counter()
        if index == 0:  # what every program shares: first uses, not a program's cost
            continue
        passes = sum(v for k, v in lowered.timings.items() if k not in ("trace", "lower"))
        record("pmapc", "trace", lowered.timings["trace"])
        record("pmapc", "lower", lowered.timings["lower"])
        record("pmapc", "passes", passes)
        record("pmapc", "compile", compiled_at - lowered_at)
        record("pmapc", "run", ran_at - compiled_at)
        record("pmapc", "all", ran_at - start)

        jitted = workloads.shard_map_jit(body, mesh, specs, specs)
        start = time.perf_counter()
        traced = jitted.trace(x)
        traced_at = time.perf_counter()
        lowered = traced.lower()
        lowered_at = time.perf_counter()
        compiled = lowered.compile()
        compiled_at = time.perf_counter()
        jax.block_until_ready(compiled(x))
        ran_at = time.perf_counter()
        for stage, seconds in (
            ("trace", traced_at - start),
            ("lower", lowered_at - traced_at),
            ("compile", compiled_at - lowered_at),
            ("run", ran_at - compiled_at),
            ("all", ran_at - start),
        ):
            record("shard_map", stage, seconds)
    return {
        system: {stage: statistics.median(ms) for stage, ms in by_stage.items()}
        for system, by_stage in times.items()
    }


def stage_table(medians: dict[str, dict[str, float]], count: int) -> str:
    rows = [
        f"Stages of {count} new tiny programs, ahead of time (median ms):",
        "| stage | pmapc | jit(shard_map) |",
        "|---|---|---|",
    ]
    for stage in ("trace", "lower", "passes", "compile", "run", "all"):
        theirs = medians["shard_map"].get(stage)
        rows.append(
            f"| {stage} | {medians['pmapc'][stage]:.1f} | "
            f"{'-' if theirs is None else f'{theirs:.1f}'} |"
        )
    return "\n".join(rows)


def _median(results: list[dict], field: str) -> float:
    return statistics.median(r[field] for r in results)


def _mlp_loss(w1_block, w2_block, x, y):
    import jax
    import jax.numpy as jnp

    hidden = jnp.tanh(x @ w1_block)
    out = jax.lax.psum(hidden @ w2_block, "model")
    return jnp.mean((out - y) ** 2)


def resident() -> dict[str, float]:
    """Resident memory in MiB: as held, and after glibc gives back what it can."""
    import gc

    gc.collect()
    held = _rss_mib()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    return {"rss": held, "trimmed": _rss_mib()}


def _rss_mib() -> float:
    import resource

    with open("/proc/self/statm") as handle:
        return int(handle.read().split()[1]) * resource.getpagesize() / 2**20


def run_child(size: str, system: str, count: int) -> dict:
    """`child(size, system, count)` in a process of its own; a restart size's after a
    process that fills a new persistent cache with the same programs."""
    if size not in RESTARTED:
        return _run(size, system, count)
    with tempfile.TemporaryDirectory(prefix="pmapc-restart-") as cache:
        _run(RESTARTED[size], system, count, cache)
        return _run(size, system, count, cache)


def _run(size: str, system: str, count: int, cache: str | None = None) -> dict:
    arguments = ["--child", size, system, "--count", str(count)]
    return _run_child(arguments, f"the {system} child for {size}", cache)


def _run_child(arguments: list[str], what: str, cache: str | None) -> dict:
    """This script in a process of its own with `arguments` (a child's, `what` in its
    failure's message) and the persistent cache `cache`; the figures it printed last."""
    command = [sys.executable, __file__, *arguments]
    if cache is not None:
        command += ["--cache", cache]
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{what} failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=300, help="new programs per child")
    parser.add_argument("--rounds", type=int, default=3, help="children per (size, system)")
    parser.add_argument(
        "--sizes", default=",".join(SIZES), help=f"some of {', '.join(SIZES)} (comma-separated)"
    )
    parser.add_argument("--json", type=Path, help="write every child's figures here")
    parser.add_argument(
        "--interleaved",
        action="store_true",
        help="both systems in one process a round, program by program (no memory figures)",
    )
    parser.add_argument(
        "--stages", action="store_true", help="time each stage of new tiny programs instead"
    )
    parser.add_argument("--child", nargs=2, metavar=("SIZE", "SYSTEM"), help=argparse.SUPPRESS)
    parser.add_argument("--child-interleaved", metavar="SIZE", help=argparse.SUPPRESS)
    parser.add_argument("--cache", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        print(json.dumps(child(*args.child, args.count, args.cache)))
        return 0
    if args.child_interleaved:
        print(json.dumps(child_interleaved(args.child_interleaved, args.count, args.cache)))
        return 0
    if args.stages:
        print(stage_table(stages(args.count), args.count))
        return 0
    sizes = args.sizes.split(",")
    if args.interleaved:
        results = interleaved_rounds(sizes, args.count, args.rounds)
        print(interleaved_table(results, sizes, args.count))
    else:
        results = children_rounds(sizes, args.count, args.rounds)
        print(table(results, sizes, args.count))
    if args.json:
        settings = {
            "sizes": sizes,
            "count": args.count,
            "rounds": args.rounds,
            "interleaved": args.interleaved,
        }
        environment.write_results(args.json, settings, results=results)
    return 0


def children_rounds(sizes: list[str], count: int, rounds: int) -> list[dict]:
    """Each (size, system)'s child, `rounds` times, the systems in a new order each round."""
    order = random.Random(0)
    results = []
    for round_index in range(rounds):
        for size in sizes:
            for system in order.sample(SYSTEMS, len(SYSTEMS)):
                result = run_child(size, system, count)
                result["round"] = round_index
                results.append(result)
                print(
                    f"  round {round_index} {size:4} {system:9} "
                    f"{result['seconds_per_program'] * 1e3:6.1f} ms/program, "
                    f"RSS {result['rss_growth_mib']:+.1f} MiB "
                    f"(trimmed {result['trimmed_growth_mib']:+.1f})",
                    file=sys.stderr,
                )
    return results


def interleaved_rounds(sizes: list[str], count: int, rounds: int) -> list[dict]:
    """Each size's interleaved child, `rounds` times."""
    results = []
    for round_index in range(rounds):
        for size in sizes:
            result = run_interleaved(size, count)
            result["round"] = round_index
            results.append(result)
            medians = result["median_seconds"]
            print(
                f"  round {round_index} {size:4} pmapc {medians['pmapc'] * 1e3:6.1f} ms, "
                f"shard_map {medians['shard_map'] * 1e3:6.1f} ms",
                file=sys.stderr,
            )
    return results


def table(results: list[dict], sizes: list[str], count: int) -> str:
    """One row per size: medians over rounds, and pmapc/shard_map ratios per round."""
    rows = [
        f"{count} new programs each, called once (medians over rounds):",
        "| program | pmapc ms | shard_map ms | ratio | pmapc RSS growth | shard_map RSS growth "
        "| pmapc trimmed | shard_map trimmed |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for size in sizes:
        by = {s: [r for r in results if r["size"] == size and r["system"] == s] for s in SYSTEMS}
        ratios = [
            p["seconds_per_program"] / s["seconds_per_program"]
            for p, s in zip(by["pmapc"], by["shard_map"])
        ]
        ms = {s: _median(by[s], "seconds_per_program") * 1e3 for s in SYSTEMS}
        held = {s: _median(by[s], "rss_growth_mib") for s in SYSTEMS}
        trimmed = {s: _median(by[s], "trimmed_growth_mib") for s in SYSTEMS}
        rows.append(
            f"| {size} | {ms['pmapc']:.1f} | {ms['shard_map']:.1f} "
            f"| {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}) "
            f"| {held['pmapc']:+.1f} MiB | {held['shard_map']:+.1f} MiB "
            f"| {trimmed['pmapc']:+.1f} MiB | {trimmed['shard_map']:+.1f} MiB |"
        )
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
