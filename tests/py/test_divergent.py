"""Control flow whose predicate differs between devices, around collectives: the values
of nested `jax.vmap` (which runs every branch and selects, and loops until every
position is done), never a hang (passes/predicate_divergent.py).

Each program is written once against a mapper and run through `pmapc.pmap` (on the
8 devices, folded onto 1 and 2, under `jit` and `grad`) and nested `jax.vmap`.
"""

from __future__ import annotations

import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from support.oracle import assert_tree_equal, vmap_mapper

import pmapc

ROOT = pathlib.Path(__file__).resolve().parents[2]
DATA, MODEL = 2, 4
X = np.arange(DATA * MODEL * 3, dtype=np.float32).reshape(DATA, MODEL, 3)

# Where the predicate comes from: an inner axis, the outer axis, or both.
PREDICATES = {
    "model": lambda v: jax.lax.axis_index("model") % 2 == 0,
    "data": lambda v: jax.lax.axis_index("data") == 0,
    "both": lambda v: v.sum() > 10,
}

# A collective over each axis set, keeping the block's shape (3,).
COLLECTIVES = {
    "psum": lambda v, axes: jax.lax.psum(v, axes),
    "pmax": lambda v, axes: jax.lax.pmax(v, axes),
    "pmin": lambda v, axes: jax.lax.pmin(v, axes),
    "all_gather": lambda v, axes: jax.lax.all_gather(v, axes).sum(0),
    "psum_scatter": lambda v, axes: jax.lax.psum_scatter(
        jnp.tile(v, _size(axes)), axes, tiled=True
    ),
    "all_to_all": lambda v, axes: jax.lax.all_to_all(
        jnp.tile(v[None], (_size(axes), 1)), axes, 0, 0, tiled=True
    ).sum(0),
    "ppermute": lambda v, axes: jax.lax.ppermute(v, axes, _ring(_size(axes))),
}


def _size(axes) -> int:
    sizes = {"data": DATA, "model": MODEL}
    return int(np.prod([sizes[a] for a in ((axes,) if isinstance(axes, str) else axes)]))


def _ring(n: int) -> list[tuple[int, int]]:
    return [(i, (i + 1) % n) for i in range(n)]


def nested(mapper, inner):
    return mapper(lambda x: mapper(inner, "model")(x), "data")


def check(inner, x=X, rtol=1e-6):
    got = nested(pmapc.pmap, inner)(x)
    want = nested(vmap_mapper, inner)(x)
    assert_tree_equal(got, want, rtol=rtol)


def cond_program(predicate, collective, axes):
    def inner(v):
        return jax.lax.cond(
            predicate(v), lambda u: collective(u, axes), lambda u: collective(u * 2, axes) - 1, v
        )

    return inner


@pytest.mark.parametrize("kind", sorted(COLLECTIVES))
@pytest.mark.parametrize("where", sorted(PREDICATES))
def test_cond_around_each_collective(where, kind):
    axes = ("data", "model") if kind in ("psum", "pmax") else "model"
    check(cond_program(PREDICATES[where], COLLECTIVES[kind], axes))


@pytest.mark.parametrize("axes", ["model", "data", ("data", "model")])
def test_cond_over_each_axis(axes):
    check(cond_program(PREDICATES["both"], COLLECTIVES["psum"], axes))


@pytest.mark.parametrize("where", sorted(PREDICATES))
def test_switch(where):
    def inner(v):
        index = jnp.where(PREDICATES[where](v), jax.lax.axis_index("model"), 7)
        branches = [
            lambda u: jax.lax.psum(u, "model"),
            lambda u: jax.lax.pmax(u, "model") * 2,
            lambda u: jax.lax.all_gather(u, "model")[1],
            lambda u: jax.lax.ppermute(u, "model", _ring(MODEL)) - 3,
        ]
        return jax.lax.switch(index, branches, v)

    check(inner)


def counted_loop(bound, collective, axes):
    """A while_loop whose trip count is `bound(v)`, with `collective` in its body."""

    def inner(v):
        def body(carry):
            i, u = carry
            return i + 1, collective(u, axes) / 8 + u

        return jax.lax.while_loop(lambda c: c[0] < bound(v), body, (0, v))[1]

    return inner


BOUNDS = {
    "model": lambda v: jax.lax.axis_index("model") + 1,
    "data": lambda v: 2 * jax.lax.axis_index("data") + 1,
    "both": lambda v: (v.sum() % 3).astype(jnp.int32) + 1,
}


@pytest.mark.parametrize("kind", sorted(COLLECTIVES))
@pytest.mark.parametrize("where", sorted(BOUNDS))
def test_while_around_each_collective(where, kind):
    axes = ("data", "model") if kind in ("psum", "pmax") else "model"
    check(counted_loop(BOUNDS[where], COLLECTIVES[kind], axes), rtol=1e-5)


def test_fori_loop_with_a_varying_bound():
    def inner(v):
        upper = jax.lax.axis_index("model") + jax.lax.axis_index("data")
        return jax.lax.fori_loop(
            0, upper, lambda i, u: jax.lax.all_gather(u, "model").mean(0) + i, v
        )

    check(inner, rtol=1e-5)


def test_outer_cond_around_an_inner_map():
    def program(mapper):
        def outer(x):
            def taken(u):
                return mapper(lambda w: jax.lax.psum(w, ("data", "model")), "model")(u)

            def other(u):
                return mapper(lambda w: jax.lax.pmax(w, "model"), "model")(u) * 3

            return jax.lax.cond(jax.lax.axis_index("data") == 0, taken, other, x)

        return mapper(outer, "data")

    assert_tree_equal(program(pmapc.pmap)(X), program(vmap_mapper)(X))


def test_nested_divergence():
    """A divergent while inside a divergent cond, with a collective in each."""

    def inner(v):
        def loop(u):
            bound = jax.lax.axis_index("model") + 1
            return jax.lax.fori_loop(0, bound, lambda i, w: jax.lax.psum(w, "model") / 4, u)

        return jax.lax.cond(v.sum() > 30, loop, lambda u: jax.lax.pmin(u, "model"), v)

    check(inner, rtol=1e-5)


def test_uniform_predicate_keeps_its_branch():
    """A predicate the same on every device of the collective's group is left alone."""

    def inner(v):
        same = jax.lax.psum(v.sum(), "model") > 50
        return jax.lax.cond(same, lambda u: jax.lax.psum(u, "model"), lambda u: -u, v)

    check(inner)
    compiled = nested(pmapc.pmap, inner).lower(X).compile()
    assert compiled.plan().predicated == ()


@pytest.mark.parametrize("count", [1, 2])
def test_folded(count):
    inner = cond_program(PREDICATES["both"], COLLECTIVES["psum"], "model")
    loop = counted_loop(BOUNDS["model"], COLLECTIVES["all_gather"], "model")
    for program in (inner, loop):
        want = nested(vmap_mapper, program)(X)
        with pmapc.fold_onto(jax.devices()[:count]):
            got = nested(pmapc.pmap, program)(X)
        assert_tree_equal(got, want, rtol=1e-5)


def test_under_jit():
    inner = cond_program(PREDICATES["both"], COLLECTIVES["psum"], "model")
    loop = counted_loop(BOUNDS["both"], COLLECTIVES["psum"], "model")
    for program in (inner, loop):
        got = jax.jit(lambda x, p=program: nested(pmapc.pmap, p)(x) * 2)(X)
        want = nested(vmap_mapper, program)(X) * 2
        assert_tree_equal(got, want, rtol=1e-5)


@pytest.mark.parametrize("where", sorted(PREDICATES))
@pytest.mark.parametrize("kind", ["psum", "all_gather", "ppermute"])
def test_grad_of_a_cond(where, kind):
    """vmap cuts a branch's operands from the gradient where it is not taken: so do
    pmapc's (the finite difference differs from both)."""
    program = cond_program(PREDICATES[where], COLLECTIVES[kind], "model")

    def loss(mapper):
        return lambda x: (nested(mapper, program)(x) ** 2).sum()

    want = jax.grad(loss(vmap_mapper))(X)
    assert_tree_equal(jax.grad(loss(pmapc.pmap))(X), want, rtol=1e-5)
    assert_tree_equal(jax.jit(jax.grad(loss(pmapc.pmap)))(X), want, rtol=1e-5)
    with pmapc.fold_onto(jax.devices()[:2]):
        assert_tree_equal(jax.grad(loss(pmapc.pmap))(X), want, rtol=1e-5)


def test_jvp_of_a_cond_and_a_loop():
    cond = cond_program(PREDICATES["both"], COLLECTIVES["psum"], "model")
    loop = counted_loop(BOUNDS["both"], COLLECTIVES["psum"], "model")
    tangent = np.ones_like(X)
    for program in (cond, loop):
        got = jax.jvp(nested(pmapc.pmap, program), (X,), (tangent,))
        want = jax.jvp(nested(vmap_mapper, program), (X,), (tangent,))
        assert_tree_equal(got, want, rtol=1e-5)


def test_vmap_around_the_nest():
    program = cond_program(PREDICATES["both"], COLLECTIVES["pmax"], "model")
    batch = np.stack([X, -X, X * 2])
    got = jax.vmap(nested(pmapc.pmap, program))(batch)
    want = jax.vmap(nested(vmap_mapper, program))(batch)
    assert_tree_equal(got, want)


def test_cond_inside_a_loop_body():
    def inner(v):
        def step(i, u):
            return jax.lax.cond(u.sum() > 20, lambda w: jax.lax.psum(w, "model") / 4, jnp.sin, u)

        return jax.lax.fori_loop(0, 3, step, v)

    check(inner, rtol=1e-5)


def test_the_plan_lists_each_conversion():
    inner = cond_program(PREDICATES["model"], COLLECTIVES["psum"], "model")
    plan = nested(pmapc.pmap, inner).lower(X).compile().plan()
    (record,) = plan.predicated
    assert (record.kind, record.axes) == ("cond", ("model",))
    assert record.location is not None and record.location.file == __file__
    assert "every branch runs" in plan.table()


def test_a_host_callback_in_a_divergent_branch_is_refused():
    def inner(v):
        def taken(u):
            jax.debug.print("taken {}", u)
            return jax.lax.psum(u, "model")

        return jax.lax.cond(v.sum() > 10, taken, lambda u: u, v)

    with pytest.raises(pmapc.UnsupportedError, match=r"host callback.*'model'") as caught:
        nested(pmapc.pmap, inner)(X)
    assert caught.value.location is not None and caught.value.location.file == __file__


def test_a_host_callback_in_a_uniform_branch_runs():
    def inner(v):
        def taken(u):
            jax.debug.print("taken {}", u)
            return jax.lax.psum(u, "model")

        same = jax.lax.psum(v.sum(), "model") > 10
        return jax.lax.cond(same, taken, lambda u: u, v)

    check(inner)


def test_uniform_programs_are_bound_as_traced():
    """The tracer converts nothing where nothing diverges: the body keeps its `cond`."""

    def inner(v):
        same = jax.lax.psum(v.sum(), "model") > 50
        return jax.lax.cond(same, lambda u: jax.lax.psum(u, "model"), lambda u: -u, v)

    text = str(jax.make_jaxpr(nested(pmapc.pmap, inner))(X))
    assert "cond[" in text and "select_n" not in text
    converted = str(
        jax.make_jaxpr(
            nested(pmapc.pmap, cond_program(PREDICATES["model"], COLLECTIVES["psum"], "model"))
        )(X)
    )
    assert "cond[" not in converted and "select_n" in converted


def test_hand_written_ir_is_converted_by_the_pass():
    """`pmapc opt` modules reach predicate-divergent, not the tracer (tests/lit has the
    IR); one runs and gives nested vmap's values."""
    from conftest import run_text

    text = (ROOT / "tests" / "lit" / "passes" / "predicate-divergent.mlir").read_text()
    module = text.split("// -----")[0].split("\n", 1)[1]
    x = np.arange(2 * 4 * 8, dtype=np.float32).reshape(2, 4, 8)

    def inner(z):
        return jax.lax.switch(
            jax.lax.axis_index("model"),
            [lambda u: jax.lax.psum(u, "model"), lambda u: jax.lax.pmax(u, "model")],
            z,
        )

    (got,) = run_text(module, x)
    assert_tree_equal(got, nested(vmap_mapper, inner)(x))


def test_a_name_bound_again_by_an_inner_map_is_another_axis():
    """Outer and inner maps both named 'i': a value the inner map returns still
    varies over the outer 'i', so the outer cond around a psum over it is converted
    (found by the random transformations, under grad)."""

    def program(mapper):
        def inner(v):
            return jax.lax.cond(v.sum() > 0, lambda u: jax.lax.psum(u, "i"), lambda u: u * 2, v)

        def outer(x):
            y = mapper(inner, "i")(x)
            return jax.lax.cond(y.sum() > 0, lambda u: jax.lax.psum(u, "i"), lambda u: u * 2, y)

        return mapper(outer, "i")

    x = np.asarray([[1.0, -3.0, 2.0, 0.5], [-1.0, -2.0, 4.0, -6.0]], np.float32)

    def loss(mapper):
        return lambda x: (program(mapper)(x) * np.arange(8.0).reshape(2, 4)).sum()

    assert_tree_equal(program(pmapc.pmap)(x), program(vmap_mapper)(x))
    assert_tree_equal(jax.grad(loss(pmapc.pmap))(x), jax.grad(loss(vmap_mapper))(x))


@pytest.mark.parametrize("limit", [5, 15, -100])
def test_checkify_in_a_divergent_branch(limit):
    """A check in a branch every device runs reports as nested vmap's does: vmap runs
    the branch on every position, so a position that did not take it can fail it."""
    from jax.experimental import checkify

    def inner(v):
        def taken(u):
            checkify.check(u.sum() > limit, "small {}", u.sum())
            return jax.lax.psum(u, "model")

        return jax.lax.cond(v.sum() > 10, taken, lambda u: u, v)

    got_error, got = checkify.checkify(nested(pmapc.pmap, inner))(X)
    want_error, want = checkify.checkify(nested(vmap_mapper, inner))(X)
    assert got_error.get() == want_error.get()
    assert_tree_equal(got, want)


@jax.jit
def _jitted_branching(v):
    return jax.lax.cond(
        v.sum() > 10,
        lambda u: (jax.lax.psum(u, "model"), jnp.int32(1)),
        lambda u: (u, jnp.int32(2)),
        v,
    )


@jax.custom_jvp
def _custom_psum(u):
    return jax.lax.psum(u, "model")


@_custom_psum.defjvp
def _custom_psum_jvp(primals, tangents):
    return _custom_psum(primals[0]), jax.lax.psum(tangents[0], "model")


@pytest.mark.parametrize(
    "inner, converted",
    [
        (lambda v: _jitted_branching(v)[0] + _jitted_branching(v)[1], True),
        (lambda v: jax.lax.cond(v.sum() > 10, _custom_psum, lambda u: u * 3, v), True),
        (lambda v: jax.lax.cond(v.sum() > 10, jnp.sin, jnp.cos, v), False),
        (lambda v: jax.lax.while_loop(lambda c: c.sum() < 100, lambda c: c * 2 + 1, v), False),
    ],
    ids=["inside-a-jitted-helper", "a-custom_jvp-branch", "no-collective", "loop-no-collective"],
)
def test_what_is_converted(inner, converted):
    """Divergent control flow inside a `jax.jit` called twice, and a branch that is a
    `custom_jvp` function, are converted; varying control flow without a collective
    is not (nothing can wait in it)."""
    check(inner)
    jaxpr = str(jax.make_jaxpr(nested(pmapc.pmap, inner))(X))
    assert ("pmapc_predicated" in jaxpr) == converted
    if converted:
        loss = lambda mapper: lambda x: (nested(mapper, inner)(x) ** 2).sum()  # noqa: E731
        assert_tree_equal(jax.grad(loss(pmapc.pmap))(X), jax.grad(loss(vmap_mapper))(X))
