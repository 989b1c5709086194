"""`pmapc opt`: run passes on a pmapc-IR module, following mlir-opt's conventions.

    pmapc opt IN.mlir [-o OUT] [--pass-pipeline=PIPELINE | --PASS ...]
              [--print-ir-after-all] [--split-input-file] [--verify-diagnostics]
              [--verify-each=true|false] [--mlir-print-debuginfo] [--mlir-timing]
              [--list-passes]

`-` (the default) reads stdin. Errors print `file:line:col: error: message`
on stderr and exit 1. As in mlir-opt, the IR is verified after every pass that
changed it; `--verify-each=false` verifies only the result (as `pmapc.lower`
and `jax.jit` do), naming the pass that broke it if it is invalid.
`--mlir-timing` prints mlir-opt's execution time report on stderr: the wall
time of parsing, of each pass (with its verification) and of printing.
"""

from __future__ import annotations

import argparse
import re
import sys

from pmapc import dialect, ir
from pmapc.compiler.driver import verify_result
from pmapc.compiler.pipeline import PIPELINES, Timer, describe, parse_pipeline, run_passes
from pmapc.errors import DiagnosticError, PipelineError
from pmapc.passes import DEFAULT_TARGET, PASSES, TARGETS
from pmapc.passes.base import option_fields, summary
from pmapc.passes.to_partitions import DEFAULT_GROUP_FORM, GROUP_FORMS
from pmapc.tools import diagnostics
from pmapc.tools.common import read_input, write_output

SPLIT_MARKER = re.compile(r"^// -----[ \t]*$", flags=re.M)


# The on/off flags, as mlir-opt spells them.
SWITCHES = (
    ("--print-ir-after-all", "print the IR after each pass on stderr"),
    ("--split-input-file", "split the input at '// -----' lines and process each chunk"),
    ("--verify-diagnostics", "check diagnostics against 'expected-error' comments"),
    ("--mlir-print-debuginfo", "print locations in the output"),
    ("--mlir-timing", "print the wall time of parsing, each pass and printing on stderr"),
    ("--list-passes", "list the passes and exit"),
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pmapc opt", description="Run pmapc passes on a pmapc-IR (.mlir) module."
    )
    parser.add_argument("input", nargs="?", default="-", help="input .mlir file ('-': stdin)")
    parser.add_argument("-o", dest="output", default="-", help="output file ('-': stdout)")
    parser.add_argument("--pass-pipeline", help="e.g. 'builtin.module(verify-axes,flatten-maps)'")
    for name in [*PASSES, *PIPELINES]:
        helptext = summary(PASSES[name]) if name in PASSES else (f"the pipeline {describe(name)}")
        parser.add_argument(
            f"--{name}", dest="pass_flags", action="append_const", const=name, help=helptext
        )
    for flag, helptext in SWITCHES:
        parser.add_argument(flag, action="store_true", help=helptext)
    parser.add_argument(
        "--verify-each",
        type=_boolean,
        nargs="?",
        const=True,
        default=True,
        metavar="true|false",
        help="verify after each pass (default true); false: only the result",
    )
    return parser


def _boolean(text: str) -> bool:
    if text not in ("true", "false"):
        raise argparse.ArgumentTypeError(f"takes true or false, got '{text}'")
    return text == "true"


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    if args.list_passes:
        return list_passes()
    try:
        pipeline = pipeline_of(args)
        passes = parse_pipeline(pipeline) if pipeline else []
    except PipelineError as error:
        print(f"pmapc opt: error: {error}", file=sys.stderr)
        return 1
    text = read_input(args.input, "pmapc opt")
    if text is None:
        return 1
    filename = "<stdin>" if args.input == "-" else args.input
    outputs, ok = [], True
    args.timer = Timer()
    for first_line, chunk in split_chunks(text, args.split_input_file):
        output, chunk_ok = process_chunk(chunk, first_line, passes, filename, args)
        ok &= chunk_ok
        if output is not None:
            outputs.append(output)
    write_output(args.output, "// -----\n".join(outputs))
    if args.mlir_timing:
        print(timing_report(args.timer.seconds), file=sys.stderr)
    return 0 if ok else 1


def timing_report(seconds: dict[str, float]) -> str:
    """mlir-opt's `--mlir-timing` report of wall times by name."""
    total = sum(seconds.values())
    rule = "===" + "-" * 73 + "==="
    lines = [
        rule,
        "... Execution time report ...".center(79).rstrip(),
        rule,
        f"  Total Execution Time: {total:.4f} seconds",
        "",
        "  ----Wall Time----  ----Name----",
    ]
    for name, time_s in [*seconds.items(), ("Total", total)]:
        share = 100 * time_s / total if total else 0.0
        lines.append(f"  {time_s:8.4f} ({share:5.1f}%)  {name}")
    return "\n".join(lines)


def pipeline_of(args) -> str:
    if args.pass_pipeline and args.pass_flags:
        raise PipelineError("give either --pass-pipeline or pass flags, not both")
    if args.pass_flags:
        return ",".join(args.pass_flags)
    return args.pass_pipeline or ""


def split_chunks(text: str, split: bool) -> list[tuple[int, str]]:
    """(first line number, text) per chunk; line numbers stay those of the file."""
    if not split:
        return [(1, text)]
    chunks, line = [], 1
    for piece in SPLIT_MARKER.split(text):
        chunks.append((line, piece))
        line += piece.count("\n")
    return chunks


def process_chunk(chunk, first_line, passes, filename, args) -> tuple[str | None, bool]:
    """Parse, run and print one chunk; report diagnostics. Returns (output, ok)."""
    padded = "\n" * (first_line - 1) + chunk
    context = ir.make_context()
    timer = args.timer
    try:
        with timer.timing("Parser"):
            module = ir.parse_module(padded, context, filename)
            dialect.verify_ops(module)
        run_checked(module, passes, args)
        with timer.timing("Output"):
            output = ir.print_module(module, debug_info=args.mlir_print_debuginfo)
        found = []
    except DiagnosticError as error:
        output, found = None, error.diagnostics
    if args.verify_diagnostics:
        expected = diagnostics.expectations_in(padded)
        problems = diagnostics.verify(expected, found, filename)
        for problem in problems:
            print(problem, file=sys.stderr)
        return output, not problems
    for diagnostic in found:
        print(diagnostic.render(filename), file=sys.stderr)
    return output, not found


def run_checked(module, passes, args) -> None:
    """Run the passes, verifying after each one or, with --verify-each=false, the result."""
    original = None if args.verify_each else ir.detached_clone(module.operation)
    timer = args.timer

    def after(pass_, module) -> None:
        timer.lap(pass_.name)
        if args.print_ir_after_all:
            dump_after(pass_, module)
            timer.restart()  # the dump is not the pass's time

    timer.restart()
    changed = run_passes(module, passes, verify_each=args.verify_each, after_pass=after)
    if changed and original is not None:
        with timer.timing("verify"):
            verify_result(module, original, passes)


def dump_after(pass_, module) -> None:
    title = f"IR Dump After {type(pass_).__name__} ({pass_.name})"
    print(f"// -----// {title} //----- //", file=sys.stderr)
    print(ir.print_module(module), file=sys.stderr)


def list_passes() -> int:
    print("Passes:")
    for name, pass_class in PASSES.items():
        print(f"  --{name:<20} {summary(pass_class)}")
        options = [
            f"{name}={_option_text(field.default)}"
            for name, field in option_fields(pass_class).items()
        ]
        if options:
            print(f"  {'':<22} {{{' '.join(options)}}} (defaults)")
    print("Pipelines:")
    for name in PIPELINES:
        print(f"  --{name:<20} {describe(name)}")
    choices = "|".join(TARGETS)
    passes = " or ".join(target.name for target in TARGETS.values())
    print(
        f"  {{target={choices}}} (default {DEFAULT_TARGET}): the form the pipeline puts the "
        f"program in, by {passes}"
    )
    forms = "|".join(GROUP_FORMS)
    print(
        f"  {{replica-groups={forms}}} (default {DEFAULT_GROUP_FORM}): in partition form, "
        "replica groups as mesh axes or as device ids"
    )
    return 0


def _option_text(value) -> str:
    """An option's value as a pipeline string writes it."""
    return str(value).lower() if isinstance(value, bool) else str(value)
