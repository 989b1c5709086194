"""W4 (trace + passes) of this checkout against another, interleaved in one run.

    .venv/bin/python benchmarks/versus.py OTHER_PYTHON [--counts 1000,10000] [--rounds 5]

OTHER_PYTHON is the Python of an environment where another pmapc is installed (a
git worktree of an older commit, `pip install -e` into a venv of its own). Each
round builds the W4 chain of every size once with each pmapc, each build in a
fresh child process, the two in a new (seeded) order every round; the table gives
the median seconds of pmapc's own stages (trace and passes) and of the whole
`lower()` call (lower_wall: the stages and what lies between them), and the
ratio of the medians, this checkout over the other. Nothing is compiled by XLA.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import random
import statistics
import subprocess
import sys
import tempfile

HERE = pathlib.Path(__file__).resolve().parent

# Run in the child, with the child's own pmapc and benchmarks/ (this file's; W4's
# workload is the same in every commit that has compile_scaling.py).
CHILD = """
import json, sys
sys.path.insert(0, {benchmarks!r})
import numpy as np
import pmapc
pmapc.use_host_devices(8)
from compile_scaling import DATA, MODEL, WIDTH, chain_body, pmapc_stages
from workloads import nested
x = np.arange(DATA * MODEL * WIDTH, dtype=np.float32).reshape(DATA, MODEL, WIDTH) / 100
pmapc_stages(nested(chain_body(10)), (x,))  # warm up JAX's own caches
stages, _ = pmapc_stages(nested(chain_body({count})), (x,))
print(json.dumps({{
    "trace_s": stages["trace_s"],
    "passes_s": sum(stages["passes_s"].values()),
    "lower_wall_s": stages["lower_wall_s"],
}}))
"""


def build_once(python: str, count: int) -> dict:
    code = CHILD.format(benchmarks=str(HERE), count=count)
    # Run outside either checkout, so that the current directory shadows neither pmapc.
    out = subprocess.run(
        [python, "-c", code], capture_output=True, text=True, check=True, cwd=tempfile.gettempdir()
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("other_python", help="the Python of the other pmapc's environment")
    parser.add_argument("--counts", default="1000,10000", help="W4 sizes (collectives)")
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args(argv)
    counts = [int(c) for c in args.counts.split(",")]
    pythons = {"this": sys.executable, "other": args.other_python}
    samples: dict[tuple, list[dict]] = {}
    order = random.Random(0)
    for _ in range(args.rounds):
        for count in counts:
            labels = list(pythons)
            order.shuffle(labels)
            for label in labels:
                samples.setdefault((label, count), []).append(build_once(pythons[label], count))
    print(f"{'collectives':>11}  {'stage':>7}  {'this s':>8}  {'other s':>8}  this/other")
    for count in counts:
        for stage in ("trace_s", "passes_s", "lower_wall_s"):
            this = statistics.median(s[stage] for s in samples[("this", count)])
            other = statistics.median(s[stage] for s in samples[("other", count)])
            print(f"{count:>11}  {stage[:-2]:>7}  {this:8.3f}  {other:8.3f}  {this / other:9.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
