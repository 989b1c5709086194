"""The two analyses of what varies between devices agree (pmapc/variance_rules.py):
the tracer's on a map's jaxpr (lowering/divergence.py) and predicate-divergent's on
the IR after flatten-maps (passes/variance.py).

On random nested programs (tests/py/support/random_programs.py) with control flow whose
predicate each device computes from its own values, each `cond`'s and loop's
predicate gets the same axes from both: the tracer's conversion is held back so the
IR keeps the control flow, and both analyses read the same program. And
`lax.rng_uniform`, which each device draws on its own (XLA's `stablehlo.rng`),
varies over every axis for both, so the tracer converts a `cond` on it before JAX
differentiates.
"""

from __future__ import annotations

import os

import jax
import numpy as np
import pytest
from hypothesis import assume, given
from jax import lax
from support.random_programs import (
    CONTROL_FLOW,
    Arg,
    Level,
    Op,
    Program,
    build,
    programs,
    sample_arguments,
    search_settings,
)

import pmapc
from pmapc import collectives, dialect, hlo, ir
from pmapc import variance_rules as rules
from pmapc.lowering import divergence
from pmapc.passes.variance import predicate_of, varying_axes

# Programs with control flow to compare (about 0.1 s each); more with the variable.
PROGRAMS = int(os.environ.get("PMAPC_VARIANCE_PROGRAMS", "100"))


def both_analyses(function, args, monkeypatch) -> tuple[list, list]:
    """The axes each control-flow predicate of `function` varies over, by the tracer's
    analysis and by the IR's (mesh axis names, in program order)."""
    found = []

    def analysed_only(closed, leaf_axes, axis_name, axis_size):
        found.append(divergence.predicate_axes(closed, leaf_axes, axis_name))
        return closed  # not converted: the IR keeps the control flow

    monkeypatch.setattr(divergence, "converted", analysed_only)
    text = pmapc.lower(function, *args).as_text("flatten-maps")
    module = ir.parse_module(text, ir.make_context())
    names = dialect.mesh_of(module).axis_names
    (traced,) = found
    jaxpr_side = [frozenset(names[depth] for depth in axes) for _, axes in traced]
    variance = varying_axes(module)
    ir_side = [variance(predicate_of(op)) for op in ir.walk(module.operation, hlo.CONTROL_FLOW)]
    return jaxpr_side, ir_side


@given(programs())
@search_settings(PROGRAMS)
def test_both_analyses_agree_on_every_predicate(program):
    assume(any(op.kind in CONTROL_FLOW for level in program.levels for op in level.ops))
    with pytest.MonkeyPatch.context() as monkeypatch:
        jaxpr_side, ir_side = both_analyses(
            build(program, pmapc.pmap), sample_arguments(program), monkeypatch
        )
    assert jaxpr_side, "a program with control flow has predicates"
    assert jaxpr_side == ir_side


# A loop's trip count from a psum after a loop whose own does vary: JAX calls one
# `remainder` function for both trip counts, which the IR's analysis must read per
# call, as the tracer's does (it once joined the calls, and the second count varied).
TWO_CALLS_OF_ONE_FUNCTION = Program(
    levels=(
        Level(
            name="i",
            size=8,
            pass_size=False,
            out_axis=0,
            ops=(
                Op(kind="while", axes=("i",), then=Op(kind="psum", axes=("i",))),
                Op(kind="psum", axes=("i",)),
                Op(kind="while", axes=("i",), then=Op(kind="psum", axes=("i",))),
            ),
        ),
    ),
    block=(),
    args=(Arg(dtype="float32", in_axes=(0,)),),
    combine="add",
    seed=0,
)


def test_a_function_called_twice_is_read_per_call(monkeypatch):
    program = TWO_CALLS_OF_ONE_FUNCTION
    function, args = build(program, pmapc.pmap), sample_arguments(program)
    jaxpr_side, ir_side = both_analyses(function, args, monkeypatch)
    assert jaxpr_side == ir_side == [frozenset({"i"}), frozenset()]


def nested(inner):
    return pmapc.pmap(pmapc.pmap(inner, axis_name="j"), axis_name="i")


def cond_on_a_draw(v):
    drawn = lax.rng_uniform(0.0, 1.0, (3,))
    return lax.cond(drawn.sum() > 1.5, lambda u: lax.psum(u, "j"), lambda u: u * 2, v)


X = np.ones((2, 4, 3), np.float32)


def test_each_device_draws_rng_uniform_on_its_own(monkeypatch):
    jaxpr_side, ir_side = both_analyses(nested(cond_on_a_draw), [X], monkeypatch)
    assert jaxpr_side == ir_side == [frozenset({"i", "j"})]


def test_a_cond_on_rng_uniform_is_converted_when_traced():
    """Before JAX transforms the map: the traced IR already runs both branches."""
    traced = pmapc.lower(nested(cond_on_a_draw), X).as_text("pmapc")
    assert "stablehlo.rng" in traced
    assert "@pmapc_predicated" in traced
    assert "stablehlo.case" not in traced


def test_rng_uniform_lowers_to_a_per_device_op():
    lowered = jax.jit(lambda: lax.rng_uniform(0.0, 1.0, (2,))).lower().as_text()
    assert "rng_uniform" in rules.PER_DEVICE_PRIMITIVES
    assert any(op in lowered for op in rules.PER_DEVICE_OPS)


@pytest.mark.parametrize("kind", sorted(collectives.BY_KIND))
def test_the_rules_of_each_collective(kind):
    record = collectives.BY_KIND[kind]
    operands, axes, every = frozenset({"a", "b"}), frozenset({"b", "c"}), frozenset("abcd")
    result = rules.collective_result(record, False, operands, axes)
    assert result == ({"a"} if record.agrees_over_group else {"a", "b", "c"})
    assert rules.collective_result(record, True, operands, axes) == {"a", "b", "c"}
    meeting = rules.meeting_axes(record, axes, every)
    assert meeting == (every if record.spans_mesh else axes if record.communicates else set())


def test_a_loop_settles_joining_its_predicate():
    # carry 0 takes carry 1's variance each trip; the predicate varies over "p"
    def trip(carried):
        return frozenset({"p"}), [carried[1], frozenset({"x"})]

    carried, predicate = rules.loop_fixpoint([frozenset(), frozenset()], trip)
    assert carried == [frozenset({"p", "x"}), frozenset({"p", "x"})]
    assert predicate == {"p"}
