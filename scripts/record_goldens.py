"""Record the golden values of `tests/py/support/golden_programs.py` with real nested `jax.pmap`.

Nested `jax.pmap` works in JAX 0.4.30 and is rejected by current JAX, so the goldens
come from a side environment outside the repository:

    python3 -m venv /tmp/jax0430
    /tmp/jax0430/bin/pip install jax==0.4.30 jaxlib==0.4.30 'numpy<2'
    /tmp/jax0430/bin/python scripts/record_goldens.py            # from the repository root

It writes `tests/py/goldens/jax0430.npz`, keyed `{program}/{array}`: every input
(`{program}/input{k}`) and every array `golden_programs.evaluate` returns. Inputs are
seeded from each program's name, so a rerun writes the same arrays.

`--compare-vmap` also runs every program with nested `jax.vmap` in place of `jax.pmap`
(JAX 0.4.30) and prints the programs whose arrays differ between the two. When the
goldens were recorded none differed; vmap only fails on all_gather and psum_scatter over
a tuple of axes, and on every collective with `axis_index_groups` (JAX 0.4.30's batching
rules refuse them with a NotImplementedError).
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "py"))

import jax  # noqa: E402
import numpy as np  # noqa: E402
from support import golden_programs  # noqa: E402

JAX_VERSION = "0.4.30"
GOLDENS = ROOT / "tests" / "py" / "goldens" / "jax0430.npz"


def vmap_as_pmap(fun=None, axis_name=None, *, in_axes=0, out_axes=0):
    """`jax.vmap` with `jax.pmap`'s call signature."""
    if fun is None:
        return lambda f: vmap_as_pmap(f, axis_name, in_axes=in_axes, out_axes=out_axes)
    return jax.vmap(fun, in_axes=in_axes, out_axes=out_axes, axis_name=axis_name)


def record(programs) -> dict[str, np.ndarray]:
    """Every program's inputs and `evaluate` arrays under `jax.pmap`, keyed by program."""
    arrays: dict[str, np.ndarray] = {}
    for program in programs:
        inputs = golden_programs.make_inputs(program)
        results = golden_programs.evaluate(program, jax.pmap, inputs)
        arrays.update({f"{program.name}/input{k}": x for k, x in enumerate(inputs)})
        arrays.update({f"{program.name}/{key}": value for key, value in results.items()})
    return arrays


def differences_from_vmap(program, recorded: dict[str, np.ndarray]) -> list[str]:
    """The arrays of `program` that nested `jax.vmap` computes differently, or its error."""
    inputs = golden_programs.make_inputs(program)
    try:
        results = golden_programs.evaluate(program, vmap_as_pmap, inputs)
    except Exception as error:  # report any failure of vmap, do not stop the survey
        return [f"vmap fails: {type(error).__name__}: {str(error).splitlines()[0]}"]
    differing = []
    for key, value in results.items():
        expected = recorded[f"{program.name}/{key}"]
        same = value.shape == expected.shape and np.allclose(value, expected, 1e-5, 1e-5)
        if not same:
            differing.append(f"{key}: vmap {value.ravel()[:6]} pmap {expected.ravel()[:6]}")
    return differing


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=pathlib.Path, default=GOLDENS)
    parser.add_argument(
        "--compare-vmap",
        action="store_true",
        help="print the programs nested jax.vmap computes differently",
    )
    args = parser.parse_args(argv)
    if jax.__version__ != JAX_VERSION:
        print(
            f"error: the goldens need JAX {JAX_VERSION}, this is {jax.__version__}; "
            f"see this script's docstring",
            file=sys.stderr,
        )
        return 1
    arrays = record(golden_programs.PROGRAMS)
    args.output.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.output, **arrays)
    print(
        f"wrote {len(arrays)} arrays of {len(golden_programs.PROGRAMS)} programs to {args.output}"
    )
    if args.compare_vmap:
        for program in golden_programs.PROGRAMS:
            for line in differences_from_vmap(program, arrays):
                print(f"{program.name}: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
