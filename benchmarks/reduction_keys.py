"""Whether keeping combine-all-reduces' reduction keys pays: W4's passes with and without.

    .venv/bin/python benchmarks/reduction_keys.py [--counts 1000,10000] [--reps 9]

Traces W4 (benchmarks/compile_scaling.py) once per size, then runs the default
pipeline on a fresh parse of its pmapc IR `reps` times with the keys kept across
lower-collectives (`compiler/pipeline.py: KEPT_ANALYSES`) and `reps` times
without (combine-all-reduces then reads every all_reduce's key itself),
alternating, and prints the median seconds of lower-collectives (which keeps
them), combine-all-reduces (which reads them) and the whole pipeline.
"""

from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import pmapc
from compile_scaling import DATA, MODEL, WIDTH, chain_body
from pmapc import ir
from pmapc.compiler import pipeline
from pmapc.passes import manager
from pmapc.passes.combine_all_reduces import reduction_keys
from workloads import nested

STAGES = ("lower-collectives", "combine-all-reduces", "pipeline")


def run_once(text: str, keep_keys: bool) -> dict[str, float]:
    """One run of the default pipeline on `text`: seconds per pass and in all."""
    kept = dict(pipeline.KEPT_ANALYSES)
    if not keep_keys:
        del pipeline.KEPT_ANALYSES[reduction_keys]
    module = ir.parse_module(text, ir.make_context())
    seconds: dict[str, float] = {}
    last = [time.perf_counter()]

    def after(pass_, _module) -> None:
        now = time.perf_counter()
        seconds[pass_.name] = now - last[0]
        last[0] = now

    start = last[0] = time.perf_counter()
    try:
        passes = pipeline.default_pipeline()
        manager.run_passes(module, passes, verify_each=False, after_pass=after)
    finally:
        pipeline.KEPT_ANALYSES.clear()
        pipeline.KEPT_ANALYSES.update(kept)
    seconds["pipeline"] = time.perf_counter() - start
    return seconds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--counts", default="1000,10000", help="W4 sizes (collectives)")
    parser.add_argument("--reps", type=int, default=9)
    args = parser.parse_args()
    pmapc.use_host_devices(DATA * MODEL)
    x = np.arange(DATA * MODEL * WIDTH, dtype=np.float32).reshape(DATA, MODEL, WIDTH) / 100
    print(f"{'collectives':>11}  {'stage':>19}  {'kept s':>8}  {'fresh s':>8}  kept/fresh")
    for count in [int(c) for c in args.counts.split(",")]:
        text = pmapc.lower(nested(chain_body(count)), x).as_text("pmapc")
        samples: dict[bool, list[dict[str, float]]] = {True: [], False: []}
        for _ in range(args.reps):
            for keep in (True, False):
                samples[keep].append(run_once(text, keep))
        for stage in STAGES:
            kept = statistics.median(s[stage] for s in samples[True])
            fresh = statistics.median(s[stage] for s in samples[False])
            print(f"{count:>11}  {stage:>19}  {kept:8.4f}  {fresh:8.4f}  {kept / fresh:9.2f}")


if __name__ == "__main__":
    main()
