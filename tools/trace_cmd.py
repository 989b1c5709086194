"""`pmapc trace FILE.py:FUNC --arg f32[2,4,8] ...`: print a function's pmapc IR.

FUNC names a function defined at the top level of FILE.py, traced the way
`jax.make_jaxpr` traces: a `pmapc.pmap` function, a plain function that calls
one (with other JAX ops around it), or a `jax.jit` of either. Each `--arg`
gives one positional argument's dtype and shape. `--emit=pmapc`
(default) prints the traced IR, `--emit=spmd` the SPMD StableHLO after all
passes, `--emit=hlo` XLA's HLO of it (what XLA optimizes and runs),
`--emit=PASS` the IR after that pass, `--emit=plan` the communication plan (as
`pmapc plan`, with its `--picture` and `--svg FILE`). `--replica-groups=dense`
writes every collective's groups as device ids instead of mesh axes.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import sys

import numpy as np

import pmapc
from pmapc import ir
from pmapc.errors import PmapcError, SourceLoc
from pmapc.lowering.locations import innermost_user_line
from pmapc.passes.to_partitions import DEFAULT_GROUP_FORM, GROUP_FORMS
from pmapc.tools import plan_cmd
from pmapc.tools.common import report_error, write_output

_ARG = re.compile(r"^(bool|[fiu]\d+|bf16)\[([0-9, ]*)\]$")
_DTYPES = {"bool": "bool", "bf16": "bfloat16"}


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
        "--emit",
        default="pmapc",
        help="pmapc (traced IR), spmd (after all passes), hlo (XLA's HLO of spmd), "
        "plan (the communication plan) or a pass name",
    )
    parser.add_argument(
        "--replica-groups",
        choices=GROUP_FORMS,
        default=DEFAULT_GROUP_FORM,
        help="write collectives' groups as mesh axes where they are whole axes "
        f"(named) or as device ids (dense); default {DEFAULT_GROUP_FORM}",
    )
    parser.add_argument("-o", dest="output", default="-", help="output file ('-': stdout)")
    parser.add_argument(
        "--mlir-print-debuginfo",
        action="store_true",
        help="print locations (the user's file and line)",
    )
    plan_cmd.add_picture_options(parser)
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    try:
        function = load_function(args.target)
        arguments = [parse_arg(text) for text in args.arg]
        lowered = traced(function, arguments, args.replica_groups)
        if args.emit == "plan":
            text = plan_cmd.render(
                lowered.plan(),
                args.picture,
                args.svg,
                color=args.output == "-" and sys.stdout.isatty(),
            )
        else:
            text = emit(lowered, args.emit, args.mlir_print_debuginfo)
    except (PmapcError, ValueError) as error:
        return report_error("pmapc trace", error)
    write_output(args.output, text)
    return 0


class UserCodeError(PmapcError):
    """The traced function raised: its exception, at the user's line."""


def traced(function, arguments, replica_groups: str = DEFAULT_GROUP_FORM):
    """`pmapc.lower` of the function; an exception its code raises becomes one line."""
    try:
        return pmapc.lower(function, *arguments, replica_groups=replica_groups)
    except PmapcError:
        raise
    except Exception as error:  # the user's code failed while being traced
        message = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        where = innermost_user_line(error.__traceback__)
        raise UserCodeError(message, SourceLoc(where[0], where[1], 0) if where else None) from None


def emit(lowered, stage: str, debug_info: bool) -> str:
    if debug_info and stage == "pmapc":
        return lowered.compilation.traced_with_locations()
    if stage == "hlo":
        if debug_info:
            raise ValueError("--mlir-print-debuginfo works with --emit=pmapc or --emit=spmd")
        return lowered.as_text("hlo")
    names = {"spmd": "stablehlo"}
    stage = names.get(stage, stage)
    if stage not in lowered.compilation.stage_names:
        passes = [p.name for p in lowered.compilation.passes]
        choices = ", ".join(["pmapc", "spmd", "hlo", "plan", *passes])
        raise ValueError(f"unknown --emit '{stage}'; choose one of {choices}")
    if debug_info and stage != "stablehlo":
        raise ValueError("--mlir-print-debuginfo works with --emit=pmapc or --emit=spmd")
    if debug_info:
        return ir.print_module(lowered.compilation.module, debug_info=True)
    return lowered.compilation.stage_text(stage)


def load_function(target: str):
    """The function FUNC of FILE.py (the file runs as a module, not __main__)."""
    path, sep, name = target.rpartition(":")
    if not sep or not path or not name:
        raise ValueError(f"'{target}' must be FILE.py:FUNC, e.g. examples/quickstart.py:step")
    if not os.path.isfile(path):
        raise ValueError(f"no such file '{path}'")
    spec = importlib.util.spec_from_file_location("_pmapc_traced_module", path)
    if spec is None or spec.loader is None:
        raise ValueError(f"'{path}' is not a Python file Python can load; name a .py file")
    module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    spec.loader.exec_module(module)
    function = getattr(module, name, None)
    if function is None:
        raise ValueError(f"'{path}' defines no '{name}'")
    if not callable(function):
        raise ValueError(
            f"'{name}' in '{path}' is a {type(function).__name__}, not a "
            "function; name a function that calls pmapc.pmap"
        )
    return function


def parse_arg(text: str) -> np.ndarray:
    """`f32[2,4,8]` -> zeros of that dtype and shape (only shapes matter to tracing)."""
    match = _ARG.match(text.replace(" ", ""))
    usage = "write DTYPE[SHAPE] such as f32[2,4,8], i32[8], bool[2,2] or f32[] for a scalar"
    if match is None:
        raise ValueError(f"bad --arg '{text}'; {usage}")
    kind, dims = match.groups()
    dtype = _DTYPES.get(kind) or {"f": "float", "i": "int", "u": "uint"}[kind[0]] + kind[1:]
    shape = tuple(int(d) for d in dims.split(",") if d)
    import jax.numpy as jnp

    try:
        return np.zeros(shape, dtype=jnp.dtype(dtype))
    except TypeError:
        raise ValueError(f"bad --arg '{text}': there is no dtype '{kind}'; {usage}") from None
