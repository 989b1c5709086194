"""`pmapc.pmap` against real nested `jax.pmap` (JAX 0.4.30) on the generated programs.

`goldens/jax0430_generated.npz` holds, for every program of `golden_generated.py`, its
inputs and the arrays `golden_programs.evaluate` returned under `jax.pmap`, or the
builtin class of the exception JAX raised. Here `evaluate` runs the same program with
`pmapc.pmap` on the recorded inputs: integers and bools must match exactly, floats
closely, dtypes and shapes exactly, and a recorded exception must be raised as an
instance of the same builtin class. Regenerate the file with
`scripts/record_generated_goldens.py` (it needs JAX 0.4.30).
"""

from __future__ import annotations

import builtins
import pathlib

import jax
import jax.numpy as jnp
import jax.test_util
import numpy as np
import pytest
from support.golden_generated import PROGRAMS
from support.golden_programs import Program, evaluate
from support.golden_store import Recorded, unpack

import pmapc  # conftest has set the CPU device count by the time a test imports this

GOLDENS = pathlib.Path(__file__).parent / "goldens" / "jax0430_generated.npz"
TOLERANCES = {  # (rtol, atol); the programs' values are small integers, halves, quarters
    np.dtype(np.float32): (1e-6, 1e-6),
    jnp.dtype(jnp.bfloat16): (2**-8, 2**-8),
}


@pytest.fixture(scope="module")
def goldens() -> dict[str, Recorded]:
    with np.load(GOLDENS) as entries:
        return unpack(entries)


def test_the_recorded_programs_are_the_generated_ones(goldens):
    generated = [program.name for program in PROGRAMS]
    assert len(set(generated)) == len(generated), "program names must be unique"
    missing, stale = set(generated) - set(goldens), set(goldens) - set(generated)
    assert not missing and not stale, (
        f"rerun scripts/record_generated_goldens.py: {len(missing)} programs have no goldens "
        f"(e.g. {sorted(missing)[:3]}), {len(stale)} goldens no program (e.g. "
        f"{sorted(stale)[:3]})"
    )


def assert_same_array(got: np.ndarray, want: np.ndarray, where: str) -> None:
    assert got.shape == want.shape, f"{where}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{where}: dtype {got.dtype} != {want.dtype}"
    if want.dtype in TOLERANCES:
        rtol, atol = TOLERANCES[want.dtype]
        np.testing.assert_allclose(
            got.astype(np.float32), want.astype(np.float32), rtol=rtol, atol=atol, err_msg=where
        )
    else:
        np.testing.assert_array_equal(got, want, err_msg=where)


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda program: program.name)
def test_pmapc_matches_jax_0_4_30(program: Program, goldens: dict[str, Recorded]):
    assert program.name in goldens, "no goldens: rerun scripts/record_generated_goldens.py"
    recorded = goldens[program.name]
    inputs = [
        recorded.arrays[f"input{k}"]
        for k in range(len(recorded.arrays))
        if f"input{k}" in recorded.arrays
    ]
    if recorded.error is not None:
        try:
            evaluate(program, pmapc.pmap, inputs)
        except getattr(builtins, recorded.error):
            return
        pytest.fail(
            f"pmapc raised nothing; JAX 0.4.30 raised {recorded.error_type}: "
            f"{recorded.error_message}"
        )
    actual = evaluate(program, pmapc.pmap, inputs)
    expected = {key: value for key, value in recorded.arrays.items() if not key.startswith("input")}
    assert sorted(actual) == sorted(expected), "evaluate returned other arrays than recorded"
    for key, want in expected.items():
        if program.jax_gradient_wrong and key.startswith("grad"):
            continue  # JAX 0.4.30's is wrong; checked numerically below
        assert_same_array(np.asarray(actual[key]), want, f"{program.name}/{key}")
    if program.jax_gradient_wrong:
        fun = program.build(pmapc.pmap)
        jax.test_util.check_grads(
            fun, tuple(jnp.asarray(x) for x in inputs), order=1, modes=["rev"], atol=1e-2, rtol=1e-2
        )
