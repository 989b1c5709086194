"""benchmarks/README.md's tables, generated from the results the benchmarks wrote.

    python benchmarks/tables.py          # rewrite README's tables from benchmarks/results/
    python benchmarks/tables.py --check  # exit 1, naming the table, if one is stale

A table sits in README between `<!-- table: NAME -->` and `<!-- end table -->`;
NAME is a key of TABLES, which says which results file (benchmarks/results/*.json,
written by a benchmark's `--json`) it reads and how it renders it. Each table is
stamped once with the date, commit, machine and JAX release of its run. A figure is
stated in its table only: the prose around the tables names no measured value.
"""

from __future__ import annotations

import ast
import json
import re
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

HERE = Path(__file__).resolve().parent
README = HERE / "README.md"
RESULTS = HERE / "results"

TABLE = re.compile(r"(<!-- table: (?P<name>[\w-]+) -->\n)(?P<body>.*?)(<!-- end table -->)", re.S)


def load(name: str) -> dict:
    return json.loads((RESULTS / name).read_text())


def stamp(environment: dict) -> str:
    """One line: when, at which commit, on what, with which JAX, by which command."""
    changed = " (with uncommitted changes)" if environment.get("pmapc_uncommitted_changes") else ""
    return (
        f"*{environment['date'][:10]}, pmapc {environment['pmapc_commit'][:7]}{changed}, "
        f"{environment['cpu_count']} cores ({environment.get('cpu', 'CPU')}), jax "
        f"{environment['jax']}, Python {environment['python']}: "
        f"`{environment.get('command', '')}`*"
    )


def fenced(text: str) -> str:
    return f"```\n{text}\n```"


# ----------------------------------------------------------------------------
# One renderer per table


def run_steps(run: dict) -> str:
    import report

    return fenced(report.step_times(run["workloads"]))


def run_collectives(run: dict) -> str:
    import report

    return fenced(report.collective_table(run["workloads"]))


def run_compile(run: dict) -> str:
    """W4's totals; the time of each stage and pass is in the results (and what
    run.py prints), not in the README."""
    import report

    return fenced(report.scaling_table(run["compile_scaling"]))


def run_dispatch(run: dict) -> str:
    import report

    return fenced(report.dispatch_table(run["dispatch"]))


def scaling_series(scaling: dict) -> str:
    import scaling as bench

    parts = []
    for series, found in scaling["series"].items():
        # A size as scaling.py keyed it: a count, or a mesh shape (its key's text).
        rows = {ast.literal_eval(key): row for key, row in found["rows"].items()}
        parts.append(bench.table(series, rows, found["exponents"]).strip())
    return "\n\n".join(parts)


def new_programs(found: dict) -> str:
    import new_programs as bench

    settings = found["environment"]
    return bench.interleaved_table(found["results"], settings["sizes"], settings["count"])


def folded(found: dict) -> str:
    import folded as bench

    return bench.table(found["rows"])


def moe(found: dict) -> str:
    import moe as bench

    return bench.table(found["rows"])


def processes(found: dict) -> str:
    import processes as bench

    return bench.table(found["runs"])


# (the results file, its renderer)
TABLES: dict[str, tuple[str, Callable[[dict], str]]] = {
    "run-steps": ("run.json", run_steps),
    "run-collectives": ("run.json", run_collectives),
    "run-compile": ("run.json", run_compile),
    "run-dispatch": ("run.json", run_dispatch),
    "scaling": ("scaling.json", scaling_series),
    "new-programs": ("new_programs.json", new_programs),
    "moe": ("moe.json", moe),
    "folded": ("folded.json", folded),
    "processes": ("processes.json", processes),
}


# ----------------------------------------------------------------------------
# The targets, read from the same results


def targets() -> str:
    """Each target, its threshold, the current value and whether it is met."""
    run, scaling, fresh = load("run.json"), load("scaling.json"), load("new_programs.json")
    rows = []
    for workload in run["workloads"]:
        if workload["name"].startswith("W1"):
            ratio = workload["summary"]["ratio_median"]
            rows.append((f"{workload['name']} step time", 1.05, ratio))
    dispatch = run["dispatch"]["ready"]["pmapc"]["ratio_median"]
    rows.append(("warm call of a tiny step, until ready", 1.05, dispatch))
    sizes = run["compile_scaling"]["sizes"]
    own = sizes["1000"]["own_over_shard_map"]
    rows.append(("W4 1,000: own stages / shard_map trace + lower", 1.15, own))
    for name, found in scaling["series"].items():
        exponents = {
            column: value
            for column, value in found["exponents"].items()
            if column.startswith("pmapc") and value is not None
        }
        worst = max(exponents, key=exponents.__getitem__)
        rows.append((f"scaling exponent, {name} (largest: {worst})", 1.1, exponents[worst]))
    for size in fresh["environment"]["sizes"]:
        ratios = [
            r["median_seconds"]["pmapc"] / r["median_seconds"]["shard_map"]
            for r in fresh["results"]
            if r["size"] == size
        ]
        limit = 1.20 if size.startswith("restart") else 1.10
        rows.append((f"first call of a new program: {size}", limit, statistics.median(ratios)))
    folded = load("folded.json")["rows"]
    worst = max(folded, key=lambda row: row["folded"]["ratio_median"])
    what = f"folded / nested vmap (largest: {worst['workload']} on {worst['devices']})"
    rows.append((what, 1.10, worst["folded"]["ratio_median"]))
    lines = ["| target | threshold | now | met |", "|---|---|---|---|"]
    for what, limit, value in rows:
        met = "yes" if value <= limit else "no"
        lines.append(f"| {what} | ≤ {limit:.2f} | {value:.2f} | {met} |")
    return "\n".join(lines)


def render(name: str) -> str:
    if name == "targets":
        return targets() + "\n"
    source, renderer = TABLES[name]
    found = load(source)
    return f"{stamp(found['environment'])}\n\n{renderer(found)}\n"


def regenerate(text: str) -> tuple[str, list[str]]:
    """README's text with every table rendered anew, and the names of those that changed."""
    changed = []

    def replace(match: re.Match) -> str:
        body = render(match["name"])
        if body != match["body"]:
            changed.append(match["name"])
        return f"{match.group(1)}{body}{match.group(4)}"

    return TABLE.sub(replace, text), changed


def main(argv: list[str]) -> int:
    sys.path.insert(0, str(HERE))
    text = README.read_text()
    new, changed = regenerate(text)
    if "--check" in argv:
        if changed:
            print(f"stale tables in {README}: {', '.join(changed)}; run benchmarks/tables.py")
            return 1
        return 0
    README.write_text(new)
    print(f"rewrote {len(changed)} table(s): {', '.join(changed) or 'none'}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
