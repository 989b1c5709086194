"""`pmapc.pmap` against values recorded from real nested `jax.pmap` in JAX 0.4.30.

`goldens/jax0430.npz` holds, for every program of `golden_programs.py`, its inputs and
the arrays `golden_programs.evaluate` returned under `jax.pmap` (values, gradients,
tangents). Here the same `evaluate` runs with `pmapc.pmap` on the recorded inputs.
Regenerate the file with `scripts/record_goldens.py` (it needs JAX 0.4.30). Where a
later release changed what a program means (a pmean over groups of several sizes,
jax 0.12.1), the recorded value is rescaled to the running release's meaning, which
JAX's own single-level `jax.pmap` tells (oracle.running_jax_value).
"""

from __future__ import annotations

import pathlib

import numpy as np
import pytest
from support.golden_programs import PROGRAMS, Program, evaluate
from support.oracle import running_jax_value

import pmapc  # conftest has set the CPU device count by the time a test imports this

# Captured constants trace as literals or as constants (conftest.jaxpr_constants).
pytestmark = pytest.mark.usefixtures("jaxpr_constants")

GOLDENS = pathlib.Path(__file__).parent / "goldens" / "jax0430.npz"


@pytest.fixture(scope="module")
def goldens() -> dict[str, np.ndarray]:
    with np.load(GOLDENS) as recorded:
        return {key: recorded[key] for key in recorded.files}


def recorded_for(goldens: dict[str, np.ndarray], program: Program) -> dict[str, np.ndarray]:
    """The program's recorded arrays, keyed without the `{program}/` prefix."""
    prefix = f"{program.name}/"
    return {
        key.removeprefix(prefix): value for key, value in goldens.items() if key.startswith(prefix)
    }


def test_every_program_has_goldens(goldens):
    recorded_programs = {key.split("/")[0] for key in goldens}
    assert recorded_programs == {program.name for program in PROGRAMS}


@pytest.mark.parametrize("program", PROGRAMS, ids=lambda program: program.name)
def test_pmapc_matches_jax_0_4_30(program: Program, goldens):
    recorded = recorded_for(goldens, program)
    inputs = []
    while f"input{len(inputs)}" in recorded:
        inputs.append(recorded[f"input{len(inputs)}"])
    actual = evaluate(program, pmapc.pmap, inputs)
    expected = {key: value for key, value in recorded.items() if not key.startswith("input")}
    assert sorted(actual) == sorted(expected), "evaluate returned other arrays than recorded"
    for key, want in expected.items():
        want = running_jax_value(program, key, want)
        got = actual[key]
        where = f"{program.name}/{key}"
        assert got.shape == want.shape, f"{where}: shape {got.shape} != {want.shape}"
        assert got.dtype == want.dtype, f"{where}: dtype {got.dtype} != {want.dtype}"
        if np.issubdtype(want.dtype, np.inexact):
            np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=where)
        else:
            np.testing.assert_array_equal(got, want, err_msg=where)
