"""JAX's transformations of random nested programs: pmapc against the nested-vmap oracle.

`random_programs.programs()` draws a nest (meshes of 8 devices with size-1 axes among
them, unmapped arguments, unit dimensions, every in_axes/out_axes the generator knows,
shadowed names, every collective with a derivative), made float32 and differentiable
(`differentiable`: pmax and pmin become psum and pmean); then one of `grad`, `vjp`,
`jvp`, `linearize`, `vmap` (a batch of two), `jit` and `remat` (grad of a checkpoint)
is applied to it, built once with `pmapc.pmap` and once with nested named `jax.vmap`,
and every value the transformation gives must agree (integer-valued data: exactly up
to float rounding). Only programs vmap can run are drawn (`vmap_can_run`): JAX's own
autodiff of the vmap program is the oracle, independent of pmapc's rules.

pmapc runs in a child process (tests/py/support/child_process.py): a crash fails one program,
which hypothesis shrinks. 500 programs by default, split evenly among the
transformations (a search each, which pytest-xdist runs side by side; 500 draws
reach 90% of the (transformation, collective, axis count) combinations that
1,000 reach); more with PMAPC_RANDOM_TRANSFORMED:

    PMAPC_RANDOM_TRANSFORMED=5000 .venv/bin/python -m pytest tests/py/test_random_transformations.py
"""

from __future__ import annotations

import os

import numpy as np
import pytest
from hypothesis import event, given
from hypothesis import strategies as st
from support import memory
from support.child_process import ChildProcess
from support.oracle import assert_tree_equal
from support.random_programs import (
    TRANSFORMATIONS,
    Arg,
    Level,
    Op,
    Program,
    run_numpy,
    run_transformed,
    sample_arguments,
    search_settings,
    split_budget,
    transformable_programs,
    transformation_inputs,
    vmap_mapper,
)

RANDOM_TRANSFORMED = int(os.environ.get("PMAPC_RANDOM_TRANSFORMED", "500"))
RTOL = 1e-5


def check_transformed(program: Program, transformation: str, process: ChildProcess) -> None:
    arrays = sample_arguments(program)
    out_shape = run_numpy(program, arrays).shape
    weights, tangents = transformation_inputs(program, arrays, out_shape)
    expected = run_transformed(
        program, transformation, arrays, weights, tangents, mapper=vmap_mapper
    )
    actual = process.run(run_transformed, program, transformation, arrays, weights, tangents)
    memory.bound()  # the oracle's programs, in this process: a search runs dozens
    assert len(actual) == len(expected)
    for ours, oracle in zip(actual, expected):
        assert_tree_equal(ours, oracle, rtol=RTOL)


@pytest.mark.parametrize("transformation", TRANSFORMATIONS)
@search_settings(split_budget(RANDOM_TRANSFORMED, len(TRANSFORMATIONS)))
@given(data=st.data())
def test_transformed_random_program_matches_nested_vmap(transformation, data, pmapc_process):
    program = data.draw(transformable_programs(transformation), label="program")
    event(f"mesh {'x'.join(str(level.size) for level in program.levels)}")
    if any(None in arg.in_axes for arg in program.args):
        event("an unmapped argument")
    check_transformed(program, transformation, pmapc_process)


# The crash of issue 19: an argument unmapped at a map (in_axes=None) with a leading
# dimension of 1, returned through the map under linearize/grad. flatten-maps freed
# the block argument it returned (fixed in the commit that added this test).
UNMAPPED_UNIT = Program(
    levels=(Level("i", 8, False, 0, ()),),
    block=(1, 4),
    args=(Arg("float32", (0,)), Arg("float32", (None,))),
    combine="multiply",
    seed=3,
)
UNMAPPED_UNIT_NESTED = Program(
    levels=(Level("data", 2, False, 0, ()), Level("model", 4, False, 1, (Op("psum", "data"),))),
    block=(1, 2),
    args=(Arg("float32", (0, 0)), Arg("float32", (None, None))),
    combine="multiply",
    seed=4,
)


@pytest.mark.parametrize("transformation", TRANSFORMATIONS)
@pytest.mark.parametrize(
    "program", [UNMAPPED_UNIT, UNMAPPED_UNIT_NESTED], ids=["one-map", "nested"]
)
def test_unmapped_argument_with_a_unit_leading_dimension(program, transformation, pmapc_process):
    check_transformed(program, transformation, pmapc_process)


# A cond around a psum at both levels of a nest whose maps are both named 'i': the
# divergence analysis took the inner 'i' for the outer, so the outer cond stayed a
# real branch, and its gradient was wrong (fixed in the commit that added this test:
# an axis is its map's depth).
SHADOWED_CONDS = Program(
    levels=(
        Level("i", 2, False, 0, (Op("cond", ("i",), then=Op("psum", ("i",))),)),
        Level("i", 4, False, 0, (Op("cond", ("i",), then=Op("psum", ("i",))),)),
    ),
    block=(),
    args=(Arg("float32", (0, 0)),),
    combine="add",
    seed=1,
)


@pytest.mark.parametrize("transformation", TRANSFORMATIONS)
def test_conds_under_a_shadowed_axis_name(transformation, pmapc_process):
    check_transformed(SHADOWED_CONDS, transformation, pmapc_process)


def test_the_issue_19_crash_program(pmapc_process):
    """`jax.linearize` of the smallest program that crashed, against numpy: d/dy of
    sin(y) * z is cos(y) * z."""
    y = np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4)
    z = np.full((1, 4), 3.0, np.float32)
    out, tangent = pmapc_process.run(linearize_sin_times, y, z)
    np.testing.assert_allclose(out, np.sin(y)[:, None, :] * z, rtol=1e-6)
    np.testing.assert_allclose(tangent, (np.cos(y) * np.ones_like(y))[:, None, :] * z, rtol=1e-6)


def linearize_sin_times(y, z):
    import jax
    import jax.numpy as jnp

    import pmapc

    def f(y):
        return pmapc.pmap(lambda y, z: jnp.sin(y) * z, in_axes=(0, None))(y, z)

    out, derivative = jax.linearize(f, y)
    return np.asarray(out), np.asarray(derivative(np.ones_like(y)))
