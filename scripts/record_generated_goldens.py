"""Record the goldens of `tests/py/support/golden_generated.py` with real nested `jax.pmap`.

Run with JAX 0.4.30 (see `scripts/record_goldens.py` for the side environment):

    /tmp/jax0430/bin/python scripts/record_generated_goldens.py     # from the repository root

It writes `tests/py/goldens/jax0430_generated.npz` in the layout of
`golden_store.pack`: for every program its inputs (`input{k}`) and every array
`golden_programs.evaluate` returns, or, when JAX raises, the builtin class of the
exception (the class pmapc must raise too), its own class and the first line of its
message; the errors are also printed. Inputs are seeded from each program's name, so a
rerun writes the same file.
"""

from __future__ import annotations

import argparse
import os
import pathlib
import sys

os.environ["XLA_FLAGS"] = "--xla_force_host_platform_device_count=8"

ROOT = pathlib.Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests" / "py"), str(ROOT / "scripts")]

import jax  # noqa: E402
import numpy as np  # noqa: E402
import record_goldens  # noqa: E402
from support import golden_generated, golden_programs, golden_store  # noqa: E402

GOLDENS = ROOT / "tests" / "py" / "goldens" / "jax0430_generated.npz"


def builtin_class(error: BaseException) -> type:
    """The first builtin class in the exception's MRO (ValueError for a JAX ValueError)."""
    return next(cls for cls in type(error).__mro__ if cls.__module__ == "builtins")


def record_one(program) -> golden_store.Recorded:
    """The program's inputs and results under `jax.pmap`, or the exception it raised."""
    inputs = golden_programs.make_inputs(program)
    named_inputs = {f"input{k}": x for k, x in enumerate(inputs)}
    try:
        results = golden_programs.evaluate(program, jax.pmap, inputs)
    except Exception as error:  # the class JAX raised is the golden
        message = str(error).splitlines()[0] if str(error) else ""
        print(f"{program.name}: {type(error).__name__}: {message[:160]}")
        return golden_store.Recorded(
            named_inputs,
            builtin_class(error).__name__,
            f"{type(error).__module__}.{type(error).__name__}",
            message,
        )
    return golden_store.Recorded({**named_inputs, **results})


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", type=pathlib.Path, default=GOLDENS)
    args = parser.parse_args(argv)
    if jax.__version__ != record_goldens.JAX_VERSION:
        print(
            f"error: the goldens need JAX {record_goldens.JAX_VERSION}, this is "
            f"{jax.__version__}; see scripts/record_goldens.py",
            file=sys.stderr,
        )
        return 1
    recorded = {program.name: record_one(program) for program in golden_generated.PROGRAMS}
    args.output.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(args.output, **golden_store.pack(recorded))
    errors = sum(record.error is not None for record in recorded.values())
    print(f"wrote the goldens of {len(recorded)} programs ({errors} raised) to {args.output}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
