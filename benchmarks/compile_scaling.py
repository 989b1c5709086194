"""W4: compile time against the number of collectives in the body.

The body is a Python loop of `count` tiny psums alternating between 'data' and
'model', each followed by its own scale and add (so nothing folds or CSEs).
pmapc's stages are timed by pmapc itself (`Lowered.timings`):

    trace       the Python function to pmapc IR: JAX's tracing ('jax_trace_s'), then
                JAX's lowering with pmapc's rules ('jax_lower_s')
    passes      each pass of the default pipeline, and the verification of the result
    compile     `Lowered.compile()`: XLA in replica mode
    lower()     the wall time of the whole `lower()` call (the stages and what lies
                between them: argument names, a copy of the pmapc IR)

shard_map: `jax.jit(f).trace(x).lower()` and `.compile()`. Every repetition
builds fresh functions, so no tracing or compilation cache is hit.
"""

from __future__ import annotations

import itertools
import statistics
import time

import jax
import numpy as np
from jax.sharding import PartitionSpec as P

import hlo_stats
from compare import ATOL, RTOL
from timing import seconds
from workloads import mesh_of, nested, shard_map_jit

DATA, MODEL, WIDTH = 2, 4, 8


def chain_body(count: int):
    """`count` psums alternating data/model, each followed by a distinct scale and add."""

    def body(x):
        for k in range(count):
            axis, size = ("data", DATA) if k % 2 == 0 else ("model", MODEL)
            x = jax.lax.psum(x, axis) * ((1.0 + 1e-6 * k) / size) + 1e-6 * k
        return x

    return body


def pmapc_stages(function, args) -> tuple[dict, object]:
    """Seconds in each of pmapc's own stages (no XLA), from `Lowered.timings`, and of
    the whole `lower()` call ('lower_wall_s': what a user waits, stages and all)."""
    start = time.perf_counter()
    lowered = function.lower(*args)
    lower_wall_s = time.perf_counter() - start
    timings = dict(lowered.timings)
    jax_trace_s, jax_lower_s = timings.pop("trace"), timings.pop("lower")
    trace_s = jax_trace_s + jax_lower_s
    return {
        "trace_s": trace_s,
        "jax_trace_s": jax_trace_s,
        "jax_lower_s": jax_lower_s,
        "passes_s": timings,
        "own_total_s": trace_s + sum(timings.values()),
        "lower_wall_s": lower_wall_s,
    }, lowered


def measure_once(count: int, compile_xla: bool) -> dict:
    """One fresh pmapc and shard_map build of the chain: their stage times."""
    x = np.arange(DATA * MODEL * WIDTH, dtype=np.float32).reshape(DATA, MODEL, WIDTH) / 100
    pmapc_s, lowered = pmapc_stages(nested(chain_body(count)), (x,))
    specs = (P("data", "model"),)
    shard = shard_map_jit(chain_body(count), mesh_of(DATA, MODEL), specs, specs[0])
    start = time.perf_counter()
    shard_traced = shard.trace(x)
    traced_at = time.perf_counter()
    shard_lowered = shard_traced.lower()
    shard_s = time.perf_counter() - start
    result = {
        "pmapc": pmapc_s,
        "shard_map": {
            "trace_lower_s": shard_s,
            "trace_s": traced_at - start,
            "lower_s": shard_s - (traced_at - start),
        },
        "own_over_shard_map": pmapc_s["own_total_s"] / shard_s,
    }
    if not compile_xla:
        return result
    compile_s, compiled = seconds(lowered.compile)
    shard_compile_s, shard_compiled = seconds(shard_lowered.compile)
    result["pmapc"]["xla_compile_s"] = compile_s
    result["shard_map"]["xla_compile_s"] = shard_compile_s
    result["max_abs_difference"] = agreement(compiled(x), shard_compiled(x))
    result["collectives"] = {
        "pmapc": collectives(compiled.as_text()),
        "shard_map": collectives(shard_compiled.as_text()),
    }
    return result


def agreement(ours, theirs) -> float:
    ours, theirs = np.asarray(ours), np.asarray(theirs)
    np.testing.assert_allclose(
        ours, theirs, rtol=RTOL, atol=ATOL, err_msg="W4: pmapc and shard_map disagree"
    )
    return float(np.max(np.abs(ours - theirs)))


def collectives(hlo_text: str) -> dict:
    return hlo_stats.collective_stats(hlo_text, DATA * MODEL).as_dict()


def median_of(samples: list):
    """The element-wise median of nested dicts of numbers (a key missing from some
    samples, such as an XLA time measured once, is the median of those that have it)."""
    first = samples[0]
    if isinstance(first, dict):
        keys = dict.fromkeys(key for sample in samples for key in sample)
        return {key: median_of([s[key] for s in samples if key in s]) for key in keys}
    if isinstance(first, float):
        return statistics.median(samples)
    return first


def fit(counts: list[int], times: list[float]) -> dict:
    """Least-squares line through (count, seconds), and how close to linear it is."""
    slope, intercept = np.polyfit(np.array(counts, float), np.array(times, float), 1)
    points = list(zip(counts, times, strict=True))
    exponents = [
        float(np.log(t2 / t1) / np.log(c2 / c1))
        for (c1, t1), (c2, t2) in itertools.pairwise(points)
    ]
    return {
        "seconds_per_collective": float(slope),
        "intercept_s": float(intercept),
        "us_per_collective": [1e6 * t / c for c, t in points],
        "log_log_exponents": exponents,
    }


def run(compiled_counts: list[int], stage_only_counts: list[int], reps: int) -> dict:
    """W4 at every size: medians over `reps` builds (one build above 1000 collectives);
    XLA compiles the first build of each compiled size only."""
    measure_once(2, compile_xla=True)  # warm JAX's and pmapc's one-time setup
    sizes = {}
    for count in [*compiled_counts, *stage_only_counts]:
        runs = reps if count <= 1000 else 1
        compiled = count in compiled_counts
        samples = [measure_once(count, compiled and run == 0) for run in range(runs)]
        sizes[count] = median_of(samples) | {"xla_compiled": compiled, "runs": samples}
    counts = list(sizes)
    return {
        "sizes": {str(c): sizes[c] for c in counts},
        "fit_pmapc_own": fit(counts, [sizes[c]["pmapc"]["own_total_s"] for c in counts]),
        "fit_shard_map_trace_lower": fit(
            counts, [sizes[c]["shard_map"]["trace_lower_s"] for c in counts]
        ),
    }
