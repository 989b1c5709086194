"""`pmapc opt`: run passes on a pmapc-IR module, following mlir-opt's conventions.

    pmapc opt IN.mlir [-o OUT] [--pass-pipeline=PIPELINE | --PASS ...]
              [--split-input-file] [--verify-diagnostics] [--verify-each=true|false]
              [--mlir-print-ir-before-all] [--mlir-print-ir-after-all]
              [--mlir-print-ir-before=PASS] [--mlir-print-ir-after=PASS]
              [--mlir-print-ir-after-change] [--mlir-print-ir-after-failure]
              [--mlir-print-ir-module-scope] [--mlir-print-debuginfo]
              [--mlir-timing] [--mlir-pass-statistics] [--dump-pass-pipeline]
              [--list-passes]

`-` (the default) reads stdin. Errors print `file:line:col: error: message`
on stderr and exit 1. The pipeline is MLIR's textual form: pmapc's passes and
MLIR's registered ones (canonicalize, cse, inline, symbol-dce, sdy-*, nested
`func.func(...)` pipelines) mix, and MLIR's pass manager runs them all. As in
mlir-opt, the IR is verified after every pass; `--verify-each=false` verifies
only the result (as `pmapc.lower` and `jax.jit` do), naming the pass that
broke it if it is invalid. The `--mlir-*` flags are MLIR's instrumentation,
printed on stderr in its formats (`--mlir-print-ir-before=`/`-after=` select
passes by their pipeline name; MLIR's bindings print all or none, so pmapc
prints those dumps itself, in MLIR's format).
"""

from __future__ import annotations

import argparse
import re
import sys

from pmapc import ir, options
from pmapc.compiler.driver import verify_result
from pmapc.compiler.pipeline import PIPELINES, WITHOUT_OPTIONS, describe, parse_pipeline
from pmapc.errors import DiagnosticError, PipelineError
from pmapc.options import (
    DEFAULT_GROUP_FORM,
    DEFAULT_RAGGED_FORM,
    DEFAULT_TARGET,
    GroupForm,
    RaggedForm,
)
from pmapc.passes import PASSES, TARGETS, forms
from pmapc.passes.base import option_fields, summary
from pmapc.passes.manager import IRDumps, run_passes
from pmapc.tools import diagnostics
from pmapc.tools.common import read_input, write_output

SPLIT_MARKER = re.compile(r"^// -----[ \t]*$", flags=re.M)


# The on/off flags, as mlir-opt spells them (and pmapc's older short names): opt's
# own, then MLIR's instrumentation (pmapc trace takes those too).
SWITCHES = (
    ("--split-input-file", (), "split the input at '// -----' lines and process each chunk"),
    ("--verify-diagnostics", (), "check diagnostics against 'expected-error' comments"),
    ("--mlir-print-debuginfo", (), "print locations in the output and the IR dumps"),
    ("--list-passes", (), "list the passes and exit"),
)
INSTRUMENTATION_SWITCHES = (
    ("--mlir-print-ir-before-all", (), "print the IR before each pass on stderr"),
    ("--mlir-print-ir-after-all", ("--print-ir-after-all",), "print the IR after each pass"),
    ("--mlir-print-ir-after-change", (), "print the IR after each pass that changed it"),
    ("--mlir-print-ir-after-failure", (), "print the IR after a pass that failed"),
    ("--mlir-print-ir-module-scope", (), "print the whole module in every IR dump"),
    ("--mlir-timing", (), "print MLIR's execution time report of the passes on stderr"),
    ("--mlir-pass-statistics", (), "print MLIR's pass statistics on stderr"),
    ("--dump-pass-pipeline", (), "print the pass pipeline, options spelled out, on stderr"),
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
    for flag, aliases, helptext in SWITCHES:
        parser.add_argument(flag, *aliases, action="store_true", help=helptext)
    add_instrumentation_flags(parser)
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


def add_instrumentation_flags(parser: argparse.ArgumentParser) -> None:
    """MLIR's `--mlir-print-ir-*`, `--mlir-timing`, `--mlir-pass-statistics` and
    `--dump-pass-pipeline` flags (`instrumentation_of` and `dumps_of` read them)."""
    for flag, aliases, helptext in INSTRUMENTATION_SWITCHES:
        parser.add_argument(flag, *aliases, action="store_true", help=helptext)
    for when in ("before", "after"):
        parser.add_argument(
            f"--mlir-print-ir-{when}",
            action="append",
            default=[],
            metavar="PASS",
            help=f"print the IR {when} each pass named PASS (repeatable)",
        )


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
    for first_line, chunk in split_chunks(text, args.split_input_file):
        output, chunk_ok = process_chunk(chunk, first_line, passes, filename, args)
        ok &= chunk_ok
        if output is not None:
            outputs.append(output)
    write_output(args.output, "// -----\n".join(outputs))
    return 0 if ok else 1


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
    try:
        module = ir.parse_module(padded, context, filename)
        forms.verify_ops(module)
        run_checked(module, passes, args)
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
    changed = run_passes(
        module,
        passes,
        verify_each=args.verify_each,
        instrumentation=instrumentation_of(args),
        dumps=dumps_of(args),
    )
    if changed and original is not None:
        verify_result(module, original, passes)


def dumps_of(args) -> IRDumps:
    """The passes the flags ask to print the IR around."""
    return IRDumps(
        frozenset(args.mlir_print_ir_before),
        frozenset(args.mlir_print_ir_after),
        args.mlir_print_debuginfo,
    )


def instrumentation_of(args) -> ir.Instrumentation:
    """MLIR's instrumentation the flags ask for."""
    return ir.Instrumentation(
        print_before_all=args.mlir_print_ir_before_all,
        print_after_all=args.mlir_print_ir_after_all,
        print_after_change=args.mlir_print_ir_after_change,
        print_after_failure=args.mlir_print_ir_after_failure,
        print_module_scope=args.mlir_print_ir_module_scope,
        print_debuginfo=args.mlir_print_debuginfo,
        timing=args.mlir_timing,
        statistics=args.mlir_pass_statistics,
        dump_pipeline=args.dump_pass_pipeline,
    )


def list_passes() -> int:
    print("Passes:")
    for name, pass_class in PASSES.items():
        print(f"  --{name:<20} {summary(pass_class)}")
        pass_options = [
            f"{name}={_option_text(field.default)}"
            for name, field in option_fields(pass_class).items()
        ]
        if pass_options:
            print(f"  {'':<22} {{{' '.join(pass_options)}}} (defaults)")
    print("Pipelines:")
    for name in PIPELINES:
        print(f"  --{name:<20} {describe(name)}")
    choices = "|".join(TARGETS)
    passes = " or ".join(target.name for target in TARGETS.values())
    print(
        f"  {{target={choices}}} (default {DEFAULT_TARGET}): the form the pipeline puts the "
        f"program in, by {passes}"
    )
    forms = "|".join(options.choices(GroupForm))
    print(
        f"  {{replica-groups={forms}}} (default {DEFAULT_GROUP_FORM}): in partition form, "
        "replica groups as mesh axes or as device ids"
    )
    ragged = "|".join(options.choices(RaggedForm))
    print(
        f"  {{ragged={ragged}}} (default {DEFAULT_RAGGED_FORM}): ragged_all_to_all as XLA's "
        "op (GPU, TPU) or as all_to_alls of padded slices"
    )
    print(f"  (options of the pipelines but {', '.join(sorted(WITHOUT_OPTIONS))})")
    return 0


def _option_text(value) -> str:
    """An option's value as a pipeline string writes it."""
    return str(value).lower() if isinstance(value, bool) else str(value)
