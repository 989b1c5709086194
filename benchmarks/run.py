"""Benchmark pmapc against the equivalent jax.shard_map programs on 8 virtual CPU devices.

    .venv/bin/python benchmarks/run.py [--quick] [--json OUT.json] [--workloads W1,W2,...]

Workloads: W1 (MLP training step, 2x4 and 4x2), W2 (un-shard heavy), W3 (a loop
of tiny psums), W4 (compile time against the number of collectives), dispatch
(a warm call of a tiny step). Prints tables; writes the raw figures as JSON and
the compiled HLO of every program next to it. See benchmarks/README.md.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import pmapc

pmapc.use_host_devices(8)  # before anything starts JAX's CPU backend

import jax  # noqa: E402

import compare  # noqa: E402
import compile_scaling  # noqa: E402
import environment as stamp  # noqa: E402
import report  # noqa: E402
import workloads  # noqa: E402
from pmapc.compiler.pipeline import default_pipeline  # noqa: E402

ALL = ("W1", "W2", "W3", "W4", "dispatch")
DEFAULT_JSON = Path(__file__).parent / "results" / "latest.json"

MODES = {
    # warm-up rounds, timed rounds (A/B pairs), W4 sizes compiled by XLA, W4 sizes through
    # pmapc's own stages only, W4 repetitions up to 1000 collectives, dispatch warm-up/rounds
    "full": {
        "warmup": 7,
        "rounds": 21,
        "compiled_counts": [10, 100, 1000],
        "stage_only_counts": [10000],
        "reps": 3,
        "dispatch": (20, 200),
    },
    "quick": {
        "warmup": 3,
        "rounds": 7,
        "compiled_counts": [10, 100],
        "stage_only_counts": [],
        "reps": 1,
        "dispatch": (10, 50),
    },
}


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--quick",
        action="store_true",
        help="fewer pairs, W4 up to 100 collectives (about 1-2 minutes)",
    )
    parser.add_argument(
        "--json",
        type=Path,
        default=DEFAULT_JSON,
        help=f"where to write the raw figures (default {DEFAULT_JSON})",
    )
    parser.add_argument(
        "--workloads", default=",".join(ALL), help=f"comma-separated subset of {','.join(ALL)}"
    )
    args = parser.parse_args(argv)
    args.workloads = [w.strip() for w in args.workloads.split(",") if w.strip()]
    unknown = sorted(set(args.workloads) - set(ALL))
    if unknown:
        parser.error(f"unknown workload(s) {', '.join(unknown)}; choose from {', '.join(ALL)}")
    return args


def environment(mode: str) -> dict:
    """What the figures were measured on (benchmarks/environment.py), the mode and
    pmapc's pass pipeline."""
    return stamp.environment(
        mode=mode,
        devices=[str(d) for d in jax.devices()],
        pmapc_passes=[p.name for p in default_pipeline()],
    )


def run_step_workloads(names: list[str], settings: dict, hlo_dir: Path) -> list[dict]:
    """W1-W3: A/B step times and collectives of every workload, printed as they finish."""
    results = []
    for name in (n for n in names if n in ("W1", "W2", "W3")):
        for workload in workloads.standard(name):
            print(f"... {workload.name}: {workload.description}", flush=True)
            results.append(compare.run(workload, settings["warmup"], settings["rounds"], hlo_dir))
    return results


def print_step_results(results: list[dict]) -> None:
    if not results:
        return
    section("Step time: A/B interleaved, medians (ratio: median of per-pair pmapc/shard_map)")
    print(report.step_times(results))
    section("Collectives per step, from the optimized HLO (count: executions per step)")
    print(report.collective_table(results))
    section("Compile time of the workloads (one build each)")
    print(report.compile_table(results))


def run_dispatch(settings: dict) -> dict:
    warmup, rounds = settings["dispatch"]
    print("... dispatch: warm calls of a tiny 2x4 step", flush=True)
    result = compare.run_dispatch(workloads.dispatch_step(), warmup, rounds)
    section(f"Dispatch: medians of {rounds} interleaved warm calls, each waited for")
    print(report.dispatch_table(result))
    return result


def run_scaling(settings: dict) -> dict:
    counts = settings["compiled_counts"] + settings["stage_only_counts"]
    print(f"... W4: compile scaling at {counts} collectives", flush=True)
    result = compile_scaling.run(
        settings["compiled_counts"], settings["stage_only_counts"], settings["reps"]
    )
    section(
        "W4 compile scaling (s; medians of builds, each pmapc then shard_map; sizes "
        "above 1000 built once; '-': not compiled)"
    )
    print(report.scaling_table(result))
    print()
    print(report.pass_table(result))
    print()
    print(report.fit_lines(result))
    return result


def section(title: str) -> None:
    print(f"\n== {title}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    mode = "quick" if args.quick else "full"
    settings = MODES[mode]
    started = time.perf_counter()
    output = {"environment": environment(mode), "settings": settings}
    hlo_dir = args.json.parent / f"{args.json.stem}.hlo"
    results = run_step_workloads(args.workloads, settings, hlo_dir)
    output["workloads"] = results
    if "dispatch" in args.workloads:
        output["dispatch"] = run_dispatch(settings)
    print_step_results(results)
    if "W4" in args.workloads:
        output["compile_scaling"] = run_scaling(settings)
    section("Targets (benchmarks/README.md; on this machine, this run)")
    print(report.targets(output))
    output["elapsed_s"] = time.perf_counter() - started
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(output, indent=1))
    print(f"\nwrote {args.json} and the HLO in {hlo_dir}/ ({output['elapsed_s']:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
