"""`pmapc trace FILE.py:FUNC --arg f32[2,4,8] ...`: print a function's pmapc IR.

FUNC names a function defined at the top level of FILE.py, traced the way
`jax.make_jaxpr` traces: a `pmapc.pmap` function, a plain function that calls
one (with other JAX ops around it), or a `jax.jit` of either. Each `--arg`
gives one positional argument's dtype and shape; `--static INDEX=VALUE` gives
positional argument INDEX as a Python literal, static (a `pmapc.pmap`
function's static_broadcasted_argnums, or `jax.jit`'s static_argnums for any
other function), and the `--arg`s fill the other positions in order.
`--emit=pmapc` (default) prints the traced IR, `--emit=spmd` the SPMD
StableHLO after all passes, `--emit=hlo` XLA's HLO of it (what XLA optimizes
and runs), `--emit=PASS` the IR after that pass, `--emit=plan` the
communication plan (as `pmapc plan`, with its `--picture` and `--svg FILE`).
`--replica-groups=dense` writes every collective's groups as device ids
instead of mesh axes. `--fold-onto N` folds the nest onto N devices (as
`pmapc.fold_onto`; on CPU, N virtual devices). `--topology NAME` puts the nest
on the devices of a TPU pod slice or GPU machine by name (`tpu:v5e:16x16`,
`gpu:h100:1x1x8`; compiler/targets.py) and compiles it there with XLA:TPU's or
XLA:GPU's own compiler: `--emit=hlo` then prints the HLO that compiler made and
scheduled (naming the user's lines, with or without `--mlir-print-debuginfo`),
`--emit=plan` the plan with what it runs for each collective. Each
`--arg` is an abstract value (`jax.ShapeDtypeStruct`): no array is made.
`pmapc opt`'s MLIR instrumentation flags (`--mlir-print-ir-after-all`,
`--mlir-print-ir-after=PASS`, `--mlir-timing`, ...) run the passes once more
on the traced IR and print on stderr what `pmapc opt` prints for them.

Stdout holds only that output: FILE.py runs while it is imported and traced,
and what it prints goes to stderr, so `pmapc trace f.py:g | pmapc opt -`
works. An error about FILE.py or FUNC (a file Python cannot load, a missing
function, a bad `--static`, an exception its code raises) names the user's
file and line.
"""

from __future__ import annotations

import argparse
import ast
import contextlib
import re
import sys
from collections.abc import Callable

import jax

import pmapc
from pmapc import ir
from pmapc.errors import DeviceError, PmapcError, SourceLoc
from pmapc.options import DEFAULT_GROUP_FORM, GroupForm
from pmapc.passes import manager
from pmapc.tools import common, opt, plan_cmd
from pmapc.tools.common import (
    add_topology_option,
    option_metavar,
    option_type,
    report_error,
    stdout_to_stderr,
    write_output,
)
from pmapc.tools.user_file import TraceInputError, load_function, user_code_error

_ARG = re.compile(r"^(bool|[fiu]\d+|bf16)\[([0-9, ]*)\]$")
_DTYPES = {"bool": "bool", "bf16": "bfloat16"}
_STATIC = re.compile(r"^\s*([0-9]+)\s*=(.*)$", re.DOTALL)
_DEBUGINFO_STAGES = (
    "--mlir-print-debuginfo works with --emit=pmapc or --emit=spmd, and with --emit=hlo "
    "under --topology (the HLO that target's compiler made names the lines)"
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pmapc trace", description="Trace a pmapc.pmap function to pmapc IR."
    )
    parser.add_argument("target", help="FILE.py:FUNC, FUNC a function that calls pmapc.pmap")
    parser.add_argument(
        "--arg",
        action="append",
        default=[],
        metavar="TYPE[SHAPE]",
        help="an argument's dtype and shape, e.g. f32[2,4,8]; once per argument",
    )
    parser.add_argument(
        "--static",
        action="append",
        default=[],
        metavar="INDEX=VALUE",
        help="positional argument INDEX as a static Python literal, e.g. 2=8 or "
        "1=\"'sum'\"; the --args fill the other positions in order",
    )
    parser.add_argument(
        "--emit",
        default="pmapc",
        help="pmapc (traced IR), spmd (after all passes), hlo (XLA's HLO of spmd), "
        "plan (the communication plan) or a pass name",
    )
    parser.add_argument(
        "--replica-groups",
        type=option_type(GroupForm),
        metavar=option_metavar(GroupForm),
        default=DEFAULT_GROUP_FORM,
        help="write collectives' groups as mesh axes where they are whole axes "
        f"(named) or as device ids (dense); default {DEFAULT_GROUP_FORM}",
    )
    parser.add_argument(
        "--fold-onto",
        type=int,
        metavar="N",
        help="fold every outermost map onto N devices (as pmapc.fold_onto with the first N "
        "devices; on CPU, N virtual devices): the traced IR and the plan of the folded nest",
    )
    add_topology_option(
        parser,
        "show what it runs: --emit=hlo prints the HLO it compiled and scheduled, "
        "--emit=plan the plan with XLA's collectives beside pmapc's",
    )
    parser.add_argument("-o", dest="output", default="-", help="output file ('-': stdout)")
    parser.add_argument(
        "--mlir-print-debuginfo",
        action="store_true",
        help="print locations (the user's file and line) with --emit=pmapc or spmd; the "
        "HLO that --topology's compiler made (--emit=hlo) names them always",
    )
    plan_cmd.add_picture_options(parser)
    opt.add_instrumentation_flags(parser)
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    color = args.output == "-" and sys.stdout.isatty()
    try:
        # The user's file runs while it is imported and traced: what it prints is
        # not the IR, so it goes to stderr and stdout holds only what was asked for.
        with stdout_to_stderr():
            text = trace_and_emit(args, color)
    except (PmapcError, ValueError) as error:
        return report_error("pmapc trace", error)
    write_output(args.output, text)
    return 0


def trace_and_emit(args: argparse.Namespace, color: bool) -> str:
    """The text `pmapc trace` prints for `args`."""
    function, definition = load_function(args.target)
    arrays = [parse_arg(text) for text in args.arg]
    statics = parse_statics(args.static, definition)
    check_statics(function, statics, len(arrays) + len(statics), definition)
    arguments = call_arguments(arrays, statics, definition)
    path = args.target.rpartition(":")[0]
    with placing(args.fold_onto, args.topology):
        lowered = traced(with_statics(function, statics), arguments, args.replica_groups, path)
    instrument(lowered.compilation, args)
    compiled = args.topology is not None and args.emit in ("hlo", "plan")
    if args.emit == "plan":
        result = compile_lowered(lowered).plan() if compiled else lowered.plan()
        return plan_cmd.render(result, args.picture, args.svg, color=color)
    if compiled:  # XLA's HLO names the user's lines itself, with or without the flag
        return compile_lowered(lowered).as_text()
    return emit(lowered, args.emit, args.mlir_print_debuginfo)


def compile_lowered(lowered):
    """`lowered.compile()`; its error about the devices (a topology XLA refuses) is
    about the command, not a line of this tool, so it is reported unlocated."""
    try:
        return lowered.compile()
    except DeviceError as error:
        raise type(error)(error.message) from None


def placing(count: int | None, topology: str | None):
    """Where the outermost maps go: `pmapc.fold_onto` the first `count` devices of
    this process (none: no fold), or of the topology named `topology` (none: all of
    them; a nest then runs on the first it needs, or folds onto fewer)."""
    if topology is None:
        return folding(count)
    if count is not None and count < 1:
        raise DeviceError(f"--fold-onto needs a positive device count, got {count}")
    named = common.topology(topology)
    if count is None:
        return pmapc.fold_onto(named.devices)
    fix = f"fold onto at most {len(named.devices)}, or name a larger topology"
    return pmapc.fold_onto(named.first(count, f"--fold-onto {count}", fix))


def folding(count: int | None):
    """`pmapc.fold_onto` the first `count` devices (none: no fold)."""
    if count is None:
        return contextlib.nullcontext()
    if count < 1:
        raise DeviceError(f"--fold-onto needs a positive device count, got {count}")
    pmapc.use_host_devices(count)  # on CPU; JAX's default backend gives the devices
    devices = jax.devices()
    if len(devices) < count:
        raise DeviceError(
            f"--fold-onto {count}: only {len(devices)} {devices[0].platform} device(s) exist; "
            f"fold onto at most {len(devices)}"
        )
    return pmapc.fold_onto(devices[:count])


def traced(function, arguments, replica_groups: str, path: str):
    """`pmapc.lower` of the function of `path`; an exception its code raises becomes
    one line."""
    try:
        return pmapc.lower(function, *arguments, replica_groups=replica_groups)
    except PmapcError:
        raise
    except Exception as error:  # the user's code failed while being traced
        raise user_code_error(error, path) from None


def instrument(compilation, args: argparse.Namespace) -> None:
    """With MLIR's instrumentation flags, run the passes again on a copy of the traced
    IR under them (what `pmapc opt` prints for the same pipeline)."""
    instrumentation = opt.instrumentation_of(args)
    dumps = opt.dumps_of(args)
    if not instrumentation.reports and not dumps.any:
        return
    module = ir.copy_into(compilation.source, ir.make_context())
    manager.run_passes(module, compilation.passes, instrumentation=instrumentation, dumps=dumps)


def emit(lowered, stage: str, debug_info: bool) -> str:
    if debug_info and stage == "pmapc":
        return lowered.compilation.traced_with_locations()
    if stage == "hlo":
        if debug_info:
            raise ValueError(_DEBUGINFO_STAGES)
        return lowered.as_text("hlo")
    names = {"spmd": "stablehlo"}
    stage = names.get(stage, stage)
    if stage not in lowered.compilation.stage_names:
        passes = [p.name for p in lowered.compilation.passes]
        choices = ", ".join(["pmapc", "spmd", "hlo", "plan", *passes])
        raise ValueError(f"unknown --emit '{stage}'; choose one of {choices}")
    if debug_info and stage != "stablehlo":
        raise ValueError(_DEBUGINFO_STAGES)
    if debug_info:
        return ir.print_module(lowered.compilation.module, debug_info=True)
    return lowered.compilation.stage_text(stage)


def parse_statics(texts: list[str], definition: SourceLoc) -> dict[int, object]:
    """`--static INDEX=VALUE`s as {index: value}, each value a Python literal."""
    statics: dict[int, object] = {}
    for text in texts:
        match = _STATIC.match(text)
        if match is None:
            raise TraceInputError(
                f"bad --static '{text}'; write INDEX=VALUE, INDEX counted from 0: e.g. "
                "--static 2=8 for the third positional argument",
                definition,
            )
        index, value_text = int(match.group(1)), match.group(2)
        if index in statics:
            raise TraceInputError(f"--static gives argument {index} twice", definition)
        statics[index] = static_value(text, value_text, definition)
    return statics


def static_value(text: str, value_text: str, definition: SourceLoc) -> object:
    try:
        value = ast.literal_eval(value_text.strip())
    except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
        raise TraceInputError(
            f"bad --static '{text}': '{value_text}' is not a Python literal; write a "
            "number, a quoted string, a tuple, True, False or None (e.g. --static 2=8, "
            "--static 1=\"'sum'\")",
            definition,
        ) from None
    try:
        hash(value)
    except TypeError:
        raise TraceInputError(
            f"bad --static '{text}': a static argument must be hashable, got a "
            f"{type(value).__name__}; write a tuple instead of a list",
            definition,
        ) from None
    return value


def check_statics(
    function: Callable, statics: dict[int, object], count: int, definition: SourceLoc
) -> None:
    """A `pmapc.pmap` function's static arguments, of `count` positional ones, are its
    static_broadcasted_argnums."""
    if not isinstance(function, pmapc.MappedFunction):
        return
    declared = {index % count if index < 0 else index for index in function.spec.static_argnums}
    name = function.spec.name
    mapped = sorted(set(statics) - declared)
    if mapped:
        raise TraceInputError(
            f"--static {mapped[0]}: argument {mapped[0]} of '{name}' is mapped, not static "
            f"(its static_broadcasted_argnums are {tuple(sorted(declared))}); give it as an --arg",
            definition,
        )
    missing = sorted(declared - set(statics))
    if missing:
        raise TraceInputError(
            f"'{name}' has static_broadcasted_argnums={tuple(sorted(declared))}: give "
            f"argument {missing[0]} a value with --static {missing[0]}=VALUE",
            definition,
        )


def call_arguments(
    arrays: list[jax.ShapeDtypeStruct], statics: dict[int, object], definition: SourceLoc
) -> list:
    """The positional arguments: each static at its index, the `--arg` values in order
    around them."""
    count = len(arrays) + len(statics)
    for index in sorted(statics):
        if index >= count:
            raise TraceInputError(
                f"--static {index}: the call has {count} positional argument(s) "
                f"({len(arrays)} --arg, {len(statics)} --static), so argument {index} "
                "would leave a gap; give an --arg or --static for every argument before it",
                definition,
            )
    dynamic = iter(arrays)
    return [statics[i] if i in statics else next(dynamic) for i in range(count)]


def with_statics(function: Callable, statics: dict[int, object]) -> Callable:
    """`function` staged with its static arguments static (as `jax.jit`'s
    static_argnums); a `pmapc.pmap` function already knows its own."""
    if not statics or isinstance(function, pmapc.MappedFunction):
        return function
    import jax

    return jax.jit(function, static_argnums=tuple(sorted(statics)))


def parse_arg(text: str) -> jax.ShapeDtypeStruct:
    """`f32[2,4,8]` -> the abstract value of that dtype and shape: tracing reads only
    shapes and dtypes, so no array is made and any shape a target holds is traced in
    the same memory (a 256 GiB global array split over a pod included)."""
    match = _ARG.match(text.replace(" ", ""))
    usage = "write DTYPE[SHAPE] such as f32[2,4,8], i32[8], bool[2,2] or f32[] for a scalar"
    if match is None:
        raise ValueError(f"bad --arg '{text}'; {usage}")
    kind, dims = match.groups()
    name = _DTYPES.get(kind) or {"f": "float", "i": "int", "u": "uint"}[kind[0]] + kind[1:]
    shape = tuple(int(d) for d in dims.split(",") if d)
    try:
        dtype = jax.numpy.dtype(name)
    except TypeError:
        raise ValueError(f"bad --arg '{text}': there is no dtype '{kind}'; {usage}") from None
    return jax.ShapeDtypeStruct(shape, dtype)
