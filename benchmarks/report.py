"""Plain-text tables of the benchmark's results (the JSON holds the raw figures)."""

from __future__ import annotations

from collections.abc import Sequence

from hlo_stats import KINDS

KIND_LABELS = {
    "all-reduce": "all-reduce",
    "all-gather": "all-gather",
    "reduce-scatter": "red-scatter",
    "all-to-all": "all-to-all",
    "collective-permute": "coll-permute",
}


def table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """Columns padded to their widest cell; the first left-aligned, the rest right-aligned."""
    cells = [[str(c) for c in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]

    def line(row: list[str]) -> str:
        first = row[0].ljust(widths[0])
        rest = [cell.rjust(width) for cell, width in zip(row[1:], widths[1:], strict=True)]
        return "  ".join([first, *rest]).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule, *(line(row) for row in cells[1:])])


def human_bytes(count: float) -> str:
    for unit, size in (("MiB", 2**20), ("KiB", 2**10)):
        if count >= size:
            return f"{count / size:.2f} {unit}"
    return f"{count:.0f} B"


def milliseconds(value: float) -> str:
    return f"{1e3 * value:.3f}"


def step_times(results: list[dict]) -> str:
    rows = []
    for result in results:
        summary = result["summary"]
        rows.append(
            [
                result["name"],
                milliseconds(summary["pmapc_median_s"]),
                milliseconds(summary["shard_map_median_s"]),
                f"{summary['ratio_median']:.2f}",
                f"{summary['ratio_p10']:.2f}-{summary['ratio_p90']:.2f}",
                summary["rounds"],
                f"{result['max_abs_difference']:.1e}",
            ]
        )
    return table(
        [
            "workload",
            "pmapc ms",
            "shard_map ms",
            "pmapc/shard_map",
            "p10-p90",
            "pairs",
            "max|diff|",
        ],
        rows,
    )


def count_cell(stats: dict, kind: str) -> str:
    static, dynamic = stats["static_count"][kind], stats["dynamic_count"][kind]
    if static == 0:
        return "-"
    return str(static) if static == dynamic else f"{dynamic} ({static} ops)"


def collective_rows(result: dict) -> list[list[object]]:
    collectives = result["collectives"]
    rows = []
    for program in ("pmapc", "shard_map"):
        stats = collectives[program]
        loops = "; ".join(stats["loops"]) or "-"
        rows.append(
            [
                result["name"] if program == "pmapc" else "",
                program,
                *(count_cell(stats, kind) for kind in KINDS),
                human_bytes(stats["total_bytes"]),
                loops,
            ]
        )
    minimum = collectives["minimum"]["total_bytes"]
    rows.append(["", "minimum", *([""] * len(KINDS)), human_bytes(minimum), ""])
    return rows


def collective_table(results: list[dict]) -> str:
    rows = [row for result in results for row in collective_rows(result)]
    headers = [
        "workload",
        "program",
        *(KIND_LABELS[k] for k in KINDS),
        "bytes/device/step",
        "loops",
    ]
    notes = [
        f"  {result['name']}: "
        + "; ".join(
            f"{part['what']} {human_bytes(part['bytes'])}"
            for part in result["collectives"]["minimum"]["parts"]
        )
        for result in results
    ]
    return "\n".join([table(headers, rows), "minimum = what the semantics need:", *notes])


def compile_table(results: list[dict]) -> str:
    rows = [
        [
            r["name"],
            *(
                f"{r['compile_s'][key]:.2f}"
                for key in (
                    "pmapc_lower",
                    "pmapc_xla_compile",
                    "shard_map_trace_lower",
                    "shard_map_xla_compile",
                )
            ),
        ]
        for r in results
    ]
    return table(
        ["workload", "pmapc lower s", "pmapc XLA s", "shard_map trace+lower s", "shard_map XLA s"],
        rows,
    )


def microseconds(value: float) -> str:
    return f"{1e6 * value:.1f}"


def dispatch_table(result: dict) -> str:
    labels = {
        "pmapc": "pmapc step(x)",
        "pmapc_compiled": "pmapc Compiled(x)",
        "shard_map": "jit(shard_map)(x)",
    }
    rows = []
    for name, label in labels.items():
        returned, ready = result["returned"][name], result["ready"][name]
        ratios = [
            f"{entry['ratio_median']:.2f}" if "ratio_median" in entry else "1"
            for entry in (returned, ready)
        ]
        rows.append(
            [label, microseconds(returned["median_s"]), microseconds(ready["median_s"]), *ratios]
        )
    return table(
        ["warm call (2x4, 2 psums)", "returns us", "ready us", "ratio (returns)", "ratio (ready)"],
        rows,
    )


def scaling_table(scaling: dict) -> str:
    rows = []
    for count, size in scaling["sizes"].items():
        ours, theirs = size["pmapc"], size["shard_map"]
        rows.append(
            [
                count,
                f"{ours['trace_s']:.3f}",
                f"{sum(ours['passes_s'].values()):.3f}",
                f"{ours['own_total_s']:.3f}",
                f"{1e6 * ours['own_total_s'] / int(count):.0f}",
                f"{theirs['trace_lower_s']:.3f}",
                f"{size['own_over_shard_map']:.2f}",
                seconds_or_dash(ours.get("xla_compile_s")),
                seconds_or_dash(theirs.get("xla_compile_s")),
                all_reduce_cell(size),
            ]
        )
    return table(
        [
            "collectives",
            "trace s",
            "passes s",
            "pmapc own s",
            "us/coll",
            "sm trace+lower s",
            "own/sm",
            "pmapc XLA s",
            "sm XLA s",
            "all-reduces pm/sm",
        ],
        rows,
    )


def seconds_or_dash(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}"


def all_reduce_cell(size: dict) -> str:
    if "collectives" not in size:
        return "-"
    counts = [size["collectives"][p]["dynamic_count"]["all-reduce"] for p in ("pmapc", "shard_map")]
    return "/".join(str(c) for c in counts)


def pass_table(scaling: dict) -> str:
    """Milliseconds of each of pmapc's stages by size, then the totals and shard_map's."""
    sizes = scaling["sizes"]
    counts = list(sizes)
    names = list(next(iter(sizes.values()))["pmapc"]["passes_s"])

    def row(label: str, value) -> list[str]:
        return [label, *(value(sizes[count]) for count in counts)]

    def ms(seconds: float) -> str:
        return f"{1e3 * seconds:.1f}"

    rows = [
        row("trace", lambda size: ms(size["pmapc"]["trace_s"])),
        row("  JAX's tracing", lambda size: ms(size["pmapc"]["jax_trace_s"])),
        row("  JAX's lowering to pmapc IR", lambda size: ms(size["pmapc"]["jax_lower_s"])),
    ]
    rows += [
        row(name, lambda size, name=name: ms(size["pmapc"]["passes_s"][name])) for name in names
    ]
    rows += [
        row("= passes", lambda size: ms(sum(size["pmapc"]["passes_s"].values()))),
        row("= pmapc own (trace + passes)", lambda size: ms(size["pmapc"]["own_total_s"])),
        row("pmapc's whole lower() (wall)", lambda size: ms(size["pmapc"]["lower_wall_s"])),
        row("shard_map trace + lower", lambda size: ms(size["shard_map"]["trace_lower_s"])),
        row("  shard_map's tracing", lambda size: ms(size["shard_map"]["trace_s"])),
        row("  shard_map's lowering", lambda size: ms(size["shard_map"]["lower_s"])),
        row("pmapc own / shard_map", lambda size: f"{size['own_over_shard_map']:.2f}"),
    ]
    return table(["stage (ms; 'verify': the result, once)", *counts], rows)


def fit_lines(scaling: dict) -> str:
    lines = []
    for key, label in (
        ("fit_pmapc_own", "pmapc own time (trace + passes)"),
        ("fit_shard_map_trace_lower", "shard_map trace+lower"),
    ):
        fit = scaling[key]
        per = ", ".join(f"{u:.0f}" for u in fit["us_per_collective"])
        exponents = ", ".join(f"{e:.2f}" for e in fit["log_log_exponents"])
        lines.append(
            f"{label}: {1e6 * fit['seconds_per_collective']:.0f} us/collective "
            f"(intercept {fit['intercept_s']:.3f} s); us/collective by size: {per}; "
            f"log-log slope between sizes: {exponents} (1.0 = linear)"
        )
    return "\n".join(lines)


# The targets of issue 12 (benchmarks/README.md): (what, target, how it reads the results).
TARGET_COUNT, PIPELINE_COUNT = "1000", "10000"


def targets(output: dict) -> str:
    """One line per target the results hold: the target, the figure measured, met or not."""
    lines = []
    sizes = output.get("compile_scaling", {}).get("sizes", {})
    if TARGET_COUNT in sizes:
        ratio = sizes[TARGET_COUNT]["own_over_shard_map"]
        lines.append(
            verdict(
                f"W4 {TARGET_COUNT}: pmapc trace + passes / shard_map trace + "
                "lower (median of builds)",
                ratio,
                1.0,
                f"{ratio:.2f}x",
            )
        )
    if PIPELINE_COUNT in sizes:
        passes = sum(sizes[PIPELINE_COUNT]["pmapc"]["passes_s"].values())
        lines.append(
            verdict(
                f"W4 {PIPELINE_COUNT}: the whole pass pipeline",
                passes,
                2.0,
                f"{passes:.2f} s (trace + passes "
                f"{sizes[PIPELINE_COUNT]['pmapc']['own_total_s']:.2f} s)",
                limit_text="< 2 s",
                strict=True,
            )
        )
    if "dispatch" in output:
        ready = output["dispatch"]["ready"]["pmapc"]["ratio_median"]
        returned = output["dispatch"]["returned"]["pmapc"]["ratio_median"]
        lines.append(
            verdict(
                "warm call step(x) / jit(shard_map), until ready",
                ready,
                1.05,
                f"{ready:.2f}x (until it returns: {returned:.2f}x)",
            )
        )
    for result in output.get("workloads", []):
        if result["name"].startswith("W1"):
            ratio = result["summary"]["ratio_median"]
            lines.append(
                verdict(f"{result['name']} step / shard_map", ratio, 1.05, f"{ratio:.2f}x")
            )
    return "\n".join(lines) or "(no workload of a target ran)"


def verdict(
    what: str, value: float, limit: float, measured: str, limit_text: str = "", strict: bool = False
) -> str:
    met = value < limit if strict else value <= limit
    target = limit_text or f"<= {limit:.2f}x"
    return f"{what}: {measured}; target {target}: {'met' if met else 'NOT met'}"
