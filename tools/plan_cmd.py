"""`pmapc plan IN.mlir [--xla] [--svg FILE] [--picture] [-o OUT]`: the communication plan.

IN is pmapc IR (the default pipeline runs first) or a lowered module in either
target form. Prints one row per collective: its op, the mesh axes its groups
are, groups x group size, how often a run executes it, the bytes the busiest
device sends and receives, the bandwidth minimum, and the source line; then
the totals per run (compiler/plan.py defines each number), and each host
callback's round-trip to the Python process with its bytes. `--picture` adds
the mesh as a grid per collective, a letter per group; `--svg FILE` writes
the same picture as SVG. `--xla` compiles the module for the mesh's devices (on
CPU, as many virtual devices as the mesh needs) and puts next to each row the
collective(s) XLA runs for it after its own passes, then XLA's collectives and
the totals both ways (compiler/plan_xla.py). `--topology NAME` compiles it (as
`--xla`) for the first devices of a TPU pod slice or GPU machine by name
(`tpu:v5e:16x16`, `gpu:h100:1x1x8`; compiler/targets.py), with XLA:TPU's or
XLA:GPU's own compiler on any machine; pmapc IR is lowered for that platform
(XLA's native ragged_all_to_all there).
"""

from __future__ import annotations

import argparse
import sys

from pmapc.compiler import driver, plan, plan_xla, xla
from pmapc.errors import PmapcError
from pmapc.options import ragged_form_for
from pmapc.tools.common import (
    Topology,
    add_topology_option,
    read_input,
    report_error,
    topology,
    write_output,
)
from pmapc.tools.run_cmd import compile_module, prepare


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pmapc plan",
        description="Print which devices talk in each collective "
        "of a module, and how many bytes move.",
    )
    parser.add_argument("input", help="a .mlir module (pmapc IR or lowered; '-': stdin)")
    parser.add_argument(
        "--xla",
        action="store_true",
        help="compile for the mesh's devices and show the collectives XLA runs for each",
    )
    add_topology_option(parser, "show what it runs for each collective (implies --xla)")
    add_picture_options(parser)
    parser.add_argument("-o", dest="output", default="-", help="output file ('-': stdout)")
    return parser


def add_picture_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--picture", action="store_true", help="also draw each collective's groups on the mesh grid"
    )
    parser.add_argument(
        "--svg", metavar="FILE", default=None, help="write the picture as an SVG file"
    )


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    text = read_input(args.input, "pmapc plan")
    if text is None:
        return 1
    try:
        named = None if args.topology is None else topology(args.topology)
        ragged = ragged_form_for({named.devices[0].platform} if named else ())
        compilation = compile_module(text, None, args.input, ragged=ragged)
        result = plan_of(compilation, args.xla or named is not None, named)
    except (PmapcError, ValueError) as error:
        return report_error("pmapc plan", error, filename=args.input)
    write_output(
        args.output,
        render(result, args.picture, args.svg, color=args.output == "-" and sys.stdout.isatty()),
    )
    return 0


def plan_of(compilation, with_xla: bool, named: Topology | None = None) -> plan.Plan:
    """The plan of a compilation; `with_xla`: compiled for the mesh's devices (the
    first of the topology `named`, if given, else of this process), with what XLA
    runs for each collective."""
    if not with_xla:
        return plan.plan_of(compilation.module)
    if named is None:
        executable = prepare(compilation, None)
    else:
        mesh = compilation.mesh
        devices = named.first(mesh.size, f"the mesh {mesh}", "name a larger one")
        executable = driver.compile_for_devices(compilation, devices)
    hlo_text = xla.optimized_hlo_text(executable.loaded)
    return plan_xla.plan_with_xla(compilation.module, hlo_text, executable.devices)


def render(result: plan.Plan, picture: bool, svg: str | None, color: bool = False) -> str:
    """The table (and the text picture when asked); writes the SVG file when asked."""
    text = result.table()
    if picture:
        text += "\n" + result.picture(color=color)
    if svg is not None:
        write_output(svg, result.svg())
    return text
