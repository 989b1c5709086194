"""pmapc against shard_map on one workload: compile both, check they agree, time A/B.

pmapc is called the way users call it (`step(*args)`, the `pmapc.pmap`
function), shard_map through its `jax.jit` wrapper. Both get arguments already
placed on the mesh with the sharding each program expects, so no call pays for
a host-to-device copy.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import jax
import numpy as np
from jax.sharding import NamedSharding

import hlo_stats
import timing
from workloads import Workload, mesh_of

RTOL, ATOL = 1e-4, 1e-5


@dataclasses.dataclass
class Prepared:
    """Both programs of a workload, compiled, with their arguments on the mesh."""

    workload: Workload
    compiled: object  # pmapc's Compiled
    pmapc_args: tuple
    shard_args: tuple
    compile_s: dict[str, float]
    hlo: dict[str, str]


def prepare(workload: Workload) -> Prepared:
    """Lower and compile both programs (timed once each) and place their arguments."""
    lower_s, lowered = timing.seconds(workload.pmapc_fn.lower, *workload.pmapc_args)
    compile_s, compiled = timing.seconds(lowered.compile)
    shard_lower_s, shard_lowered = timing.seconds(workload.shard_fn.lower, *workload.shard_args)
    shard_compile_s, shard_compiled = timing.seconds(shard_lowered.compile)
    mesh = mesh_of(*workload.mesh_shape)
    shard_shardings = [NamedSharding(mesh, spec) for spec in workload.shard_in_specs]
    shard_args = place(workload.shard_args, shard_shardings)
    pmapc_args = place(workload.pmapc_args, compiled.executable.in_shardings)
    return Prepared(
        workload,
        compiled,
        pmapc_args,
        shard_args,
        compile_s={
            "pmapc_lower": lower_s,
            "pmapc_xla_compile": compile_s,
            "shard_map_trace_lower": shard_lower_s,
            "shard_map_xla_compile": shard_compile_s,
        },
        hlo={"pmapc": compiled.as_text(), "shard_map": shard_compiled.as_text()},
    )


def place(args: tuple, shardings) -> tuple:
    return tuple(jax.device_put(a, s) for a, s in zip(args, shardings, strict=True))


def check_agreement(prepared: Prepared) -> float:
    """Run both once; assert their outputs agree; the largest absolute difference."""
    workload = prepared.workload
    pmapc_out = jax.block_until_ready(workload.pmapc_fn(*prepared.pmapc_args))
    shard_out = jax.block_until_ready(workload.shard_fn(*prepared.shard_args))
    largest = 0.0
    for ours, theirs in workload.comparable(pmapc_out, shard_out):
        ours, theirs = np.asarray(ours), np.asarray(theirs)
        np.testing.assert_allclose(
            ours,
            theirs,
            rtol=RTOL,
            atol=ATOL,
            err_msg=f"{workload.name}: pmapc and shard_map disagree",
        )
        largest = max(largest, float(np.max(np.abs(ours - theirs), initial=0.0)))
    return largest


def collectives(prepared: Prepared) -> dict:
    """Collective counts and bytes of both compiled programs, and the analytic minimum."""
    devices = prepared.workload.mesh_shape[0] * prepared.workload.mesh_shape[1]
    result = {
        name: hlo_stats.collective_stats(text, devices).as_dict()
        for name, text in prepared.hlo.items()
    }
    result["minimum"] = {
        "parts": [{"what": what, "bytes": size} for what, size in prepared.workload.minimum],
        "total_bytes": sum(size for _, size in prepared.workload.minimum),
    }
    return result


def run(workload: Workload, warmup: int, rounds: int, hlo_dir: Path | None) -> dict:
    """Everything measured for one workload, as JSON-ready data."""
    prepared = prepare(workload)
    max_difference = check_agreement(prepared)
    if hlo_dir is not None:
        save_hlo(prepared, hlo_dir)
    timed = timing.interleave(
        {
            "pmapc": (workload.pmapc_fn, prepared.pmapc_args),
            "shard_map": (workload.shard_fn, prepared.shard_args),
        },
        warmup,
        rounds,
    )
    return {
        "name": workload.name,
        "description": workload.description,
        "mesh": list(workload.mesh_shape),
        "max_abs_difference": max_difference,
        "summary": timing_summary(timed),
        "times": timed.raw(),
        "compile_s": prepared.compile_s,
        "collectives": collectives(prepared),
    }


def timing_summary(timed: timing.Interleaved) -> dict:
    summary = timed.summary("shard_map")
    return {
        "pmapc_median_s": summary["pmapc"]["median_s"],
        "shard_map_median_s": summary["shard_map"]["median_s"],
        "ratio_median": summary["pmapc"]["ratio_median"],
        "ratio_p10": summary["pmapc"]["ratio_p10"],
        "ratio_p90": summary["pmapc"]["ratio_p90"],
        "rounds": len(timed.rounds),
    }


def save_hlo(prepared: Prepared, hlo_dir: Path) -> None:
    hlo_dir.mkdir(parents=True, exist_ok=True)
    stem = prepared.workload.name.replace(" ", "_")
    for name, text in prepared.hlo.items():
        (hlo_dir / f"{stem}.{name}.hlo.txt").write_text(text)


def run_dispatch(workload: Workload, warmup: int, rounds: int) -> dict:
    """Warm calls of a tiny program: pmapc's user path and its Compiled, against jit."""
    prepared = prepare(workload)
    max_difference = check_agreement(prepared)
    timed = timing.interleave(
        {
            "pmapc": (workload.pmapc_fn, prepared.pmapc_args),
            "pmapc_compiled": (prepared.compiled, prepared.pmapc_args),
            "shard_map": (workload.shard_fn, prepared.shard_args),
        },
        warmup,
        rounds,
    )
    return {
        "name": workload.name,
        "description": workload.description,
        "max_abs_difference": max_difference,
        "returned": timed.summary("shard_map", "returned"),
        "ready": timed.summary("shard_map", "ready"),
        "times": timed.raw(),
        "collectives": collectives(prepared),
    }
