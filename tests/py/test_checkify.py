"""`checkify` around nested maps whose bodies check: user checks and checkify's own
(division, indexing, nan), against what JAX 0.4.30's nested `jax.pmap` returned
(goldens/jax0430_checkify.json, recorded by scripts/record_checkify.py from the
programs of checkify_cases.py): the same error message, or none, at the same line,
and the same outputs; called, and under `jax.jit`."""

from __future__ import annotations

import json
import pathlib

import jax
import numpy as np
import pytest
from jax.experimental import checkify
from support.checkify_cases import cases, location

import pmapc

RECORDED = json.loads(
    (pathlib.Path(__file__).parent / "goldens" / "jax0430_checkify.json").read_text()
)
CASES = cases(pmapc.pmap)


def test_every_case_was_recorded():
    assert sorted(CASES) == sorted(RECORDED)


@pytest.mark.parametrize("jit", [False, True], ids=["call", "jit"])
@pytest.mark.parametrize("name", sorted(RECORDED))
def test_checkify_gives_jax_0430s_error(name, jit):
    program, argument, errors = CASES[name]
    checked = checkify.checkify(program, errors=errors)
    error, output = (jax.jit(checked) if jit else checked)(argument)
    assert error.get() == RECORDED[name]["error"]
    assert location(error) == RECORDED[name]["location"]
    np.testing.assert_allclose(np.asarray(output), np.array(RECORDED[name]["output"]), rtol=1e-6)


def test_a_failed_check_raises_from_the_error():
    program, argument, errors = CASES["user check fails"]
    error, _ = checkify.checkify(program, errors=errors)(argument)
    with pytest.raises(checkify.JaxRuntimeError, match=r"block too large: max 23\.0"):
        error.throw()
