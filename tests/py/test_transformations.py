"""JAX transformations around and inside `pmapc.pmap`, against independent oracles.

Every program is written once as a function of a mapper and built with
`pmapc.pmap` and with named `jax.vmap` (the oracle, see oracle.py); derivatives
are also checked numerically with `jax.test_util.check_grads`. Where pmap's and
vmap's transposes differ (a replicated output of a psum), test_goldens.py
compares against real nested `jax.pmap` from JAX 0.4.30.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from jax.test_util import check_grads
from support.oracle import assert_tree_equal, nest, vmap_mapper

import pmapc
from pmapc.lowering import mesh_devices

MESHES = {
    "depth1": (("i", 8),),
    "depth2": (("data", 2), ("model", 4)),
    "depth3": (("a", 2), ("b", 2), ("c", 2)),
}


def mixing_program(names):
    """A body with local math and collectives over the innermost, outermost and all axes."""

    def body(x):
        inner, outer = names[-1], names[0]
        y = jnp.sin(x) * (lax.axis_index(inner) + 1)
        return {
            "inner": lax.psum(y * x, inner),
            "outer": lax.pmean(y, outer) * x,
            "all": lax.psum(x * x, tuple(names)),
        }

    return lambda mapper: nest(mapper, body, names)


def data(shape, seed=0):
    return np.random.default_rng(seed).normal(size=shape).astype(np.float32)


def weighted_sum(f):
    """A scalar loss of `f`'s outputs, each leaf weighted differently."""

    def loss(*args):
        leaves = jax.tree_util.tree_leaves(f(*args))
        return sum(jnp.sum(leaf * (k + 1.5) * jnp.cos(leaf)) for k, leaf in enumerate(leaves))

    return loss


def both(build):
    return build(pmapc.pmap), build(vmap_mapper)


def mesh_input(mesh, seed=0, extra=(3,)):
    return data((*[size for _, size in mesh], *extra), seed)


# ----------------------------------------------------------------------------
# The done-when list, at every depth


@pytest.mark.parametrize("mesh", MESHES.values(), ids=MESHES.keys())
def test_jit_of_the_map(mesh):
    f, g = both(mixing_program([name for name, _ in mesh]))
    x = mesh_input(mesh)
    assert_tree_equal(jax.jit(f)(x), g(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mesh", MESHES.values(), ids=MESHES.keys())
def test_jit_with_ops_around_the_map(mesh):
    f, g = both(mixing_program([name for name, _ in mesh]))
    x = mesh_input(mesh)

    def around(h):
        return lambda x: jax.tree_util.tree_map(lambda v: v + 1, h(2 * x))

    assert_tree_equal(jax.jit(around(f))(x), around(g)(x), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mesh", MESHES.values(), ids=MESHES.keys())
def test_grad_of_the_map(mesh):
    f, g = both(mixing_program([name for name, _ in mesh]))
    x = mesh_input(mesh)
    assert_tree_equal(
        jax.grad(weighted_sum(f))(x), jax.grad(weighted_sum(g))(x), rtol=1e-4, atol=1e-4
    )


@pytest.mark.parametrize("mesh", MESHES.values(), ids=MESHES.keys())
def test_jvp_of_the_map(mesh):
    f, g = both(mixing_program([name for name, _ in mesh]))
    x, t = mesh_input(mesh), mesh_input(mesh, seed=1)
    assert_tree_equal(jax.jvp(f, (x,), (t,)), jax.jvp(g, (x,), (t,)), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mesh", MESHES.values(), ids=MESHES.keys())
def test_vjp_of_the_map(mesh):
    f, g = both(mixing_program([name for name, _ in mesh]))
    x = mesh_input(mesh)
    out, f_vjp = jax.vjp(f, x)
    expected_out, g_vjp = jax.vjp(g, x)
    cotangent = jax.tree_util.tree_map(lambda v: jnp.full_like(v, 0.5) + v, expected_out)
    assert_tree_equal(out, expected_out, rtol=1e-5, atol=1e-5)
    assert_tree_equal(f_vjp(cotangent), g_vjp(cotangent), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("mesh", MESHES.values(), ids=MESHES.keys())
def test_vmap_of_the_map(mesh):
    f, g = both(mixing_program([name for name, _ in mesh]))
    xs = data((3, *[size for _, size in mesh], 2))
    assert_tree_equal(jax.vmap(f)(xs), jax.vmap(g)(xs), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("mesh", MESHES.values(), ids=MESHES.keys())
def test_check_grads_through_the_map(mesh):
    f, _ = both(mixing_program([name for name, _ in mesh]))
    check_grads(
        weighted_sum(f), (mesh_input(mesh),), order=2, modes=("fwd", "rev"), atol=2e-2, rtol=2e-2
    )


def test_eval_shape_and_make_jaxpr_show_the_map():
    f, g = both(mixing_program(["data", "model"]))
    x = mesh_input(MESHES["depth2"])
    assert jax.eval_shape(f, x) == jax.eval_shape(g, x)
    jaxpr = jax.make_jaxpr(f)(x)
    maps = [eqn for eqn in jaxpr.eqns if eqn.primitive.name == "pmapc_map"]
    assert len(maps) == 1
    assert maps[0].params["axis_name"] == "data"
    assert tuple(maps[0].params["mesh"].axis_names) == ("data", "model")
    inner = [eqn for eqn in maps[0].params["jaxpr"].eqns if eqn.primitive.name == "pmapc_map"]
    assert [eqn.params["axis_name"] for eqn in inner] == ["model"]
    assert inner[0].params["mesh"] is None


def test_linearize_and_jit_of_grad():
    f, g = both(mixing_program(["data", "model"]))
    x, t = mesh_input(MESHES["depth2"]), mesh_input(MESHES["depth2"], seed=3)
    _, f_lin = jax.linearize(f, x)
    _, g_lin = jax.linearize(g, x)
    assert_tree_equal(f_lin(t), g_lin(t), rtol=1e-4, atol=1e-4)
    assert_tree_equal(
        jax.jit(jax.grad(weighted_sum(f)))(x), jax.grad(weighted_sum(g))(x), rtol=1e-4, atol=1e-4
    )


# ----------------------------------------------------------------------------
# Inside the outer body


def grad_through_inner_map(mapper):
    """An outer body that differentiates through an inner map closing over its value."""

    @functools.partial(mapper, axis_name="data", in_axes=(0, None))
    def outer(x, w):
        def loss(w):
            @functools.partial(mapper, axis_name="model", in_axes=(0, None))
            def columns(row, w):
                return lax.psum(jnp.tanh(row * w * jnp.sum(x)), "model")

            return jnp.sum(columns(x, w))

        return jax.grad(loss)(w) * lax.axis_index("data")

    return outer


def test_grad_through_an_inner_map_inside_the_outer_body():
    f, g = both(grad_through_inner_map)
    x, w = data((2, 4, 3)), data((3,), seed=1)
    assert_tree_equal(f(x, w), g(x, w), rtol=1e-5, atol=1e-5)


def test_grad_around_and_inside():
    f, g = both(grad_through_inner_map)
    x, w = data((2, 4, 3)), data((3,), seed=1)
    assert_tree_equal(
        jax.grad(lambda w: jnp.sum(f(x, w) ** 2))(w),
        jax.grad(lambda w: jnp.sum(g(x, w) ** 2))(w),
        rtol=1e-4,
        atol=1e-4,
    )


def test_grad_of_an_unmapped_input_sums_over_the_axis():
    def build(mapper):
        inner = functools.partial(mapper, axis_name="model", in_axes=(0, None))(
            lambda x, w: jnp.tanh(x * w)
        )
        return functools.partial(mapper, axis_name="data", in_axes=(0, None))(inner)

    f, g = both(build)
    x, w = data((2, 4, 3)), data((3,), seed=2)
    assert_tree_equal(
        jax.grad(lambda w: jnp.sum(f(x, w)))(w),
        jax.grad(lambda w: jnp.sum(g(x, w)))(w),
        rtol=1e-5,
        atol=1e-5,
    )


def test_vmap_axis_name_reaches_collectives_in_the_body():
    def build(mapper):
        def body(x):
            return lax.psum(x, ("batch", "model")) + lax.pmax(x, "batch")

        return nest(mapper, body, ("data", "model"))

    f, g = both(build)
    xs = data((3, 2, 4, 5))
    assert_tree_equal(
        jax.vmap(f, axis_name="batch")(xs), jax.vmap(g, axis_name="batch")(xs), rtol=1e-5, atol=1e-5
    )


def test_vmap_of_grad_and_grad_of_vmap():
    f, g = both(mixing_program(["data", "model"]))
    xs = data((2, 2, 4, 3))
    per_example = jax.vmap(jax.grad(weighted_sum(f)))(xs)
    assert_tree_equal(per_example, jax.vmap(jax.grad(weighted_sum(g)))(xs), rtol=1e-4, atol=1e-4)
    assert_tree_equal(
        jax.grad(weighted_sum(jax.vmap(f)))(xs),
        jax.grad(weighted_sum(jax.vmap(g)))(xs),
        rtol=1e-4,
        atol=1e-4,
    )


# ----------------------------------------------------------------------------
# Execution through jax.jit


def test_results_keep_a_named_sharding_over_the_nest_axes():
    f, _ = both(mixing_program(["data", "model"]))
    result = f(mesh_input(MESHES["depth2"]))["inner"]
    assert isinstance(result.sharding, jax.sharding.NamedSharding)
    assert result.sharding.mesh.axis_names == ("data", "model")
    assert result.sharding.mesh.devices.shape == (2, 4)


def test_donated_placed_input_is_deleted():
    double = pmapc.pmap(lambda v: v * 2, axis_name="i", donate_argnums=0)
    placed = double(np.ones((8, 3), np.float32))
    result = double(placed)
    assert placed.is_deleted()
    np.testing.assert_array_equal(np.asarray(result), np.full((8, 3), 4, np.float32))


def test_checked_calls_read_the_devices_once(monkeypatch):
    """A map whose every call is checked (it donates) reads its `devices=` at the first
    call only: they are fixed when the map is made."""
    reads = []
    listed = mesh_devices.listed

    def counted(devices):
        reads.append(devices)
        return listed(devices)

    monkeypatch.setattr(mesh_devices, "listed", counted)
    devices = jax.devices()[:8]
    double = pmapc.pmap(lambda v: v * 2, axis_name="i", donate_argnums=0, devices=devices)
    for _ in range(3):
        result = double(np.ones((8, 3), np.float32))
    np.testing.assert_array_equal(np.asarray(result), np.full((8, 3), 2, np.float32))
    assert reads == [devices]


def test_compiles_once_per_signature_through_jit():
    """The body is traced (and the nest compiled) once per signature: counted where it
    is traced, not read from JAX's dispatch cache, whose entries a long run can evict."""
    traces = []

    def body(x):
        traces.append(np.shape(x))  # runs only while the body is traced
        return lax.psum(jnp.sin(x), "model") + lax.axis_index("data")

    x = mesh_input(MESHES["depth2"])
    expected = nest(vmap_mapper, body, ["data", "model"])(x)
    f = nest(pmapc.pmap, body, ["data", "model"])
    traces.clear()
    for _ in range(3):
        assert_tree_equal(f(x), expected, rtol=1e-5, atol=1e-5)
    assert traces == [(3,)]
    f(data((2, 4, 5)))
    assert traces == [(3,), (5,)]


def test_unblocked_calls_stay_bounded():
    step = pmapc.pmap(lambda v: lax.psum(v, "i") / 8, axis_name="i")
    value = np.ones((8, 4), np.float32)
    for _ in range(300):
        value = step(value)
    np.testing.assert_array_equal(np.asarray(value), np.ones((8, 4), np.float32))


# ----------------------------------------------------------------------------
# Rematerialization and loops


def checkpointed_inner_map(mapper):
    def inner(y):
        return lax.psum(jnp.sin(y), "model") * y

    @functools.partial(mapper, axis_name="data")
    def outer(x):
        return jax.checkpoint(mapper(inner, axis_name="model"))(x) * 2

    return outer


def test_grad_through_checkpoint_inside_and_around():
    f, g = both(checkpointed_inner_map)
    x = data((2, 4, 3))
    expected = jax.grad(weighted_sum(g))(x)
    assert_tree_equal(jax.grad(weighted_sum(f))(x), expected, rtol=1e-4, atol=1e-4)
    assert_tree_equal(jax.grad(weighted_sum(jax.checkpoint(f)))(x), expected, rtol=1e-4, atol=1e-4)


def test_grad_of_a_scan_that_calls_the_map():
    def scanned(h):
        def loss(x):
            def body(carry, _):
                return carry + jnp.sum(h(x * carry)), None

            return lax.scan(body, 1.0, None, length=3)[0]

        return loss

    f, g = both(checkpointed_inner_map)
    x = data((2, 4, 3))
    assert_tree_equal(jax.grad(scanned(f))(x), jax.grad(scanned(g))(x), rtol=1e-4, atol=1e-3)


def test_weak_types_survive_the_map():
    """A weakly typed input (a Python scalar broadcast under jit) stays weak through
    the map, so it defers to bfloat16 in promotion afterwards, as under vmap."""
    f, g = both(lambda mapper: mapper(lambda y: y * 2.0, axis_name="i"))

    def then_bf16(h):
        return jax.jit(lambda s: h(jnp.broadcast_to(s, (8,))) + jnp.ones(8, jnp.bfloat16))

    assert then_bf16(g)(2.0).dtype == jnp.bfloat16
    assert_tree_equal(then_bf16(f)(2.0), then_bf16(g)(2.0))


@pytest.mark.parametrize("split, concat", [(0, 1), (1, 0), (0, 0)])
def test_gradient_of_an_untiled_all_to_all_against_numpy(split, concat):
    """JAX 0.10's transpose of an untiled all_to_all with split != concat fails its
    cotangent check (JAX 0.4.30 returns a wrong gradient); pmapc's is the inverse
    exchange. all_to_all is a permutation, so the gradient of sum(f(x) * w) is w
    sent back: checked against the permutation written in numpy."""
    n = 4
    f = pmapc.pmap(lambda v: lax.all_to_all(v, "i", split, concat, tiled=False), "i")
    shape = (n, n, 3) if split == 0 else (n, 3, n)
    x = np.random.default_rng(0).normal(size=shape).astype(np.float32)
    # out[d] = stack over sources j of x[j] taken at index d along `split`, at `concat`.
    expected = np.stack(
        [np.stack([np.take(x[j], d, axis=split) for j in range(n)], axis=concat) for d in range(n)]
    )
    np.testing.assert_array_equal(np.asarray(f(x)), expected)
    w = np.random.default_rng(1).normal(size=expected.shape).astype(np.float32)
    grad = np.asarray(jax.grad(lambda v: (f(v) * w).sum())(x))
    want = np.zeros_like(x)  # x[j] at d along split went to out[d] at j along concat
    for d in range(n):
        for j in range(n):
            index = [slice(None)] * (x.ndim - 1)
            index[split] = d
            want[j][tuple(index)] = np.take(w[d], j, axis=concat)
    np.testing.assert_allclose(grad, want, rtol=1e-6)
