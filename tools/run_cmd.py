"""`pmapc run IN.mlir --input a.npy ... [-o OUTDIR] [--target=partitions|replicas]`.

The module may be pmapc IR (the default pipeline runs first, ending in the
pass of `--target`, default partitions) or a lowered module, the output of
`pmapc opt --pmapc-to-stablehlo` in either form: it runs in the form it
declares, or is converted to `--target` when one is given. In partition form
`--replica-groups` says how collectives' groups are written (mesh axes or
device ids; for a lowered module, only when given). Inputs are the
global arrays `@main` takes, one `.npy` file each, in order; outputs are
written as OUTDIR/result<i>.npy. On CPU, pmapc provides as many virtual
devices as the mesh needs.
"""

from __future__ import annotations

import argparse
import os
import sys
import zipfile

import numpy as np

from pmapc import dialect, ir
from pmapc.compiler import driver, runtime, xla
from pmapc.compiler.pipeline import default_pipeline, target_pass
from pmapc.errors import PmapcError
from pmapc.options import (
    DEFAULT_GROUP_FORM,
    DEFAULT_RAGGED_FORM,
    DEFAULT_TARGET,
    GroupForm,
    RaggedForm,
    Target,
    ragged_form_for,
)
from pmapc.tools.common import option_metavar, option_type, read_input, report_error


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="pmapc run", description="Compile a module for its mesh and run it."
    )
    parser.add_argument("input", help="a .mlir module (pmapc IR or lowered)")
    parser.add_argument(
        "--input",
        dest="inputs",
        action="append",
        default=[],
        metavar="NPY",
        help="a .npy file for the next argument of @main",
    )
    parser.add_argument("-o", dest="outdir", default=".", help="folder for result<i>.npy")
    parser.add_argument("--backend", default=None, help="cpu, gpu or tpu (default: JAX's)")
    parser.add_argument(
        "--target",
        type=option_type(Target),
        metavar=option_metavar(Target),
        default=None,
        help="the form to run in: partitions or replicas (default: for pmapc "
        f"IR {DEFAULT_TARGET}, for a lowered module the form it declares)",
    )
    parser.add_argument(
        "--replica-groups",
        type=option_type(GroupForm),
        metavar=option_metavar(GroupForm),
        default=None,
        help="in partition form, write collectives' groups as mesh axes (named) or "
        f"device ids (dense) (default: for pmapc IR {DEFAULT_GROUP_FORM}, for a "
        "lowered module as they are)",
    )
    parser.add_argument(
        "--ragged",
        type=option_type(RaggedForm),
        metavar=option_metavar(RaggedForm),
        default=None,
        help="lower ragged_all_to_all as XLA's op (native: GPU, TPU) or as all_to_alls "
        "(expanded: every backend) (default: native for --backend gpu or tpu, else "
        "expanded)",
    )
    parser.add_argument(
        "--print", dest="print_values", action="store_true", help="also print the results"
    )
    return parser


def main(argv: list[str]) -> int:
    args = build_parser().parse_args(argv)
    text = read_input(args.input, "pmapc run")
    if text is None:
        return 1
    try:
        ragged = args.ragged or ragged_form_for({args.backend} if args.backend else ())
        compilation = compile_module(
            text, args.target, args.input, args.replica_groups, ragged=ragged
        )
        arrays = [load_npy(path) for path in args.inputs]
        executable = prepare(compilation, args.backend)
        check_count(executable, arrays)
        results = executable(*arrays)
        write_results(results, args.outdir, args.print_values)
    except (PmapcError, ValueError) as error:
        return report_error("pmapc run", error, filename=args.input)
    return 0


def compile_module(
    text: str,
    target: Target | None = None,
    filename: str = "-",
    replica_groups: GroupForm | None = None,
    ragged: RaggedForm = DEFAULT_RAGGED_FORM,
):
    """Run the default pipeline for `target` on pmapc IR read from `filename`; a
    lowered module only goes through the pass of `target` (by default the form it
    declares), when a target or a `replica_groups` form is given."""
    module = ir.parse_module(text, ir.make_context(), filename)
    form = replica_groups or DEFAULT_GROUP_FORM
    if not is_lowered(module):
        passes = default_pipeline(target or DEFAULT_TARGET, form, ragged)
        return driver.run_pipeline(module, passes=passes)
    if target is None and replica_groups is not None:
        mesh = dialect.read_mesh(module)
        assert mesh is not None  # a lowered module has one
        target = runtime.execution_form(module, mesh)
    passes = [target_pass(target, form)] if target else []
    return driver.run_pipeline(module, passes=passes)


def is_lowered(module) -> bool:
    """Whether the passes already ran: the module has a mesh and no pmapc op."""
    if dialect.read_mesh(module) is None:
        return False
    return not any(
        dialect.is_pmapc_op(op)
        for function in ir.functions(module).values()
        for op in ir.walk_custom_calls(function)
    )


def prepare(compilation, backend: str | None):
    if backend in (None, "cpu"):
        xla.use_host_devices(max(compilation.mesh.size, 1))
    return driver.compile_for_devices(compilation, None, backend)


def load_npy(path: str) -> np.ndarray:
    if not os.path.isfile(path):
        raise ValueError(f"input file '{path}' does not exist")
    if os.path.getsize(path) == 0:
        raise ValueError(f"input file '{path}' is empty; expected a .npy array")
    try:
        return np.load(path, allow_pickle=False)
    except (ValueError, OSError, EOFError, zipfile.BadZipFile) as error:
        raise ValueError(
            f"input file '{path}' is not a .npy array ({error}); write it with numpy.save"
        ) from None


def check_count(executable, arrays) -> None:
    expected = executable.arguments
    if len(arrays) != len(expected):
        wanted = ", ".join(f"{s.dtype}{list(s.shape)}" for s in expected) or "none"
        raise ValueError(
            f"@main takes {len(expected)} argument(s) ({wanted}), but "
            f"{len(arrays)} --input file(s) were given"
        )


def write_results(results, outdir: str, print_values: bool) -> None:
    os.makedirs(outdir, exist_ok=True)
    for index, result in enumerate(results):
        value = np.asarray(result)
        path = os.path.join(outdir, f"result{index}.npy")
        np.save(path, value)
        print(f"wrote {path}: {value.dtype}{list(value.shape)}")
        if print_values:
            print(value, file=sys.stdout)
