"""Nested-pmap programs whose results JAX 0.4.30's real `jax.pmap` recorded as goldens.

Each `Program` is written once as a function of a *pmap* (`jax.pmap` under JAX 0.4.30,
`pmapc.pmap` under current JAX; both have `jax.pmap`'s signature), and `evaluate` is
the one place that runs a program's mode, so the recorder (`scripts/record_goldens.py`)
and the comparison (`test_goldens.py`) run the same computation. This file uses only
APIs present in both JAX versions and does not import pmapc.

Modes, and the arrays `evaluate` returns (k counts leaves, flattened as JAX does):
- "value": `out{k}`, the outputs of `f(*inputs)`.
- "grad":  `out{k}`; `weight{k}`, a fixed integer array per output leaf; and `grad{k}`,
  the gradient of `sum_k (out_k * weight_k).sum()` with respect to input k.
- "jvp":   `tangent{k}` per input, `out{k}` and `tangent_out{k}` from `jax.jvp`.
- "vjp":   `out{k}`, `weight{k}` (the cotangent, one per output leaf), `vjp{k}` per input.
- "vmap":  `out{k}` of `jax.vmap(f, axis_name=program.vmap_axis_name)(*inputs)`.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

Mesh = Sequence[tuple[str, int]]  # (axis name, size), outermost first
MESH_2X4: Mesh = (("data", 2), ("model", 4))
MESH_4X2: Mesh = (("data", 4), ("model", 2))
MESH_8: Mesh = (("i", 8),)
MESH_2X2X2: Mesh = (("a", 2), ("b", 2), ("c", 2))
MODES = ("value", "grad", "jvp", "vjp", "vmap")


@dataclass(frozen=True)
class Program:
    """A nested-pmap program: `build(pmap)` is the function, `inputs(rng)` its arguments."""

    name: str
    build: Callable[[Callable], Callable]
    inputs: Callable[[np.random.Generator], tuple[np.ndarray, ...]]
    mode: str = "value"
    vmap_axis_name: str | None = None  # the batch axis's name in "vmap" mode
    # JAX 0.4.30's recorded gradient is wrong (a bug there, see the program's op):
    # the comparison checks the gradient by numerical differentiation instead.
    jax_gradient_wrong: bool = False
    # A pmean over index groups of several sizes: (the result dimension the groups
    # split, the groups). JAX 0.4.30 through 0.12.0.1 divide every group's sum by the
    # first group's size, 0.12.1 by its own (oracle.running_jax_value).
    pmean_groups: tuple[int, list[list[int]]] | None = None


def seed_of(text: str) -> int:
    return zlib.crc32(text.encode())


def make_inputs(program: Program) -> tuple[np.ndarray, ...]:
    """The program's inputs, drawn from a generator seeded by its name."""
    return tuple(program.inputs(np.random.default_rng(seed_of(program.name))))


def _draw_like(tree, label: str):
    """Integer-valued arrays shaped like the leaves of `tree`, fixed by `label`."""
    rng = np.random.default_rng(seed_of(label))
    leaves, treedef = jax.tree_util.tree_flatten(tree)
    drawn = [rng.integers(-4, 5, size=np.shape(leaf)).astype(np.float32) for leaf in leaves]
    return jax.tree_util.tree_unflatten(treedef, drawn)


def _named(prefix: str, tree) -> dict[str, np.ndarray]:
    leaves = jax.tree_util.tree_leaves(tree)
    return {f"{prefix}{k}": np.asarray(leaf) for k, leaf in enumerate(leaves)}


def _weighted_sum(outputs, weights):
    pairs = zip(jax.tree_util.tree_leaves(outputs), jax.tree_util.tree_leaves(weights))
    return sum((out * weight).sum() for out, weight in pairs)


def evaluate(
    program: Program, pmap: Callable, inputs: Sequence[np.ndarray]
) -> dict[str, np.ndarray]:
    """Run `program` built with `pmap` on `inputs` in its mode; named numpy arrays."""
    fun = program.build(pmap)
    args = tuple(jnp.asarray(x) for x in inputs)
    name = program.name
    if program.mode == "value":
        return _named("out", fun(*args))
    if program.mode == "vmap":
        return _named("out", jax.vmap(fun, axis_name=program.vmap_axis_name)(*args))
    if program.mode == "grad":
        outputs = fun(*args)
        weights = _draw_like(outputs, f"{name}/weight")
        argnums = tuple(range(len(args)))
        grads = jax.grad(lambda *xs: _weighted_sum(fun(*xs), weights), argnums=argnums)(*args)
        return {**_named("out", outputs), **_named("weight", weights), **_named("grad", grads)}
    if program.mode == "jvp":
        tangents = _draw_like(args, f"{name}/tangent")
        outputs, tangent_outputs = jax.jvp(fun, args, tangents)
        return {
            **_named("tangent", tangents),
            **_named("out", outputs),
            **_named("tangent_out", tangent_outputs),
        }
    if program.mode == "vjp":
        outputs, pullback = jax.vjp(fun, *args)
        weights = _draw_like(outputs, f"{name}/weight")
        return {
            **_named("out", outputs),
            **_named("weight", weights),
            **_named("vjp", pullback(weights)),
        }
    raise ValueError(f"unknown mode {program.mode!r}; modes are {MODES}")


# ----------------------------------------------------------------------------
# Building blocks


def nest(pmap: Callable, body: Callable, mesh: Mesh, **kwargs) -> Callable:
    """`body` mapped over the mesh's axes, outermost first; `kwargs` go to every level."""
    fun = body
    for axis_name, _size in reversed(mesh):
        fun = pmap(fun, axis_name, **kwargs)
    return fun


def small_ints(*shape: int) -> Callable[[np.random.Generator], tuple[np.ndarray, ...]]:
    """One input of integer values in [-8, 8]: sums and means of it are exact in float32."""
    return lambda rng: (rng.integers(-8, 9, size=shape).astype(np.float32),)


def distinct(*shape: int) -> Callable[[np.random.Generator], tuple[np.ndarray, ...]]:
    """One input of distinct integer values: max and min have no ties."""
    size = int(np.prod(shape))
    return lambda rng: ((rng.permutation(size) - size // 2).astype(np.float32).reshape(shape),)


def mesh_shape(mesh: Mesh) -> tuple[int, ...]:
    return tuple(size for _, size in mesh)


def collective_program(
    name: str,
    mesh: Mesh,
    collective: Callable,
    *block: int,
    mode: str = "grad",
    inputs: Callable = small_ints,
    pmean_groups: tuple[int, list[list[int]]] | None = None,
) -> Program:
    """`x * collective(x)` on every device: the gradient has a direct and a collective term."""

    def build(pmap):
        return nest(pmap, lambda x: x * collective(x), mesh)

    return Program(name, build, inputs(*mesh_shape(mesh), *block), mode, pmean_groups=pmean_groups)


def gather_program(
    name: str, mesh: Mesh, axes, *block: int, tiled: bool = False, mode: str = "grad"
) -> Program:
    """`all_gather(x * x) * x`: the gathered copy times this device's block."""

    def body(x):
        gathered = lax.all_gather(x * x, axes, tiled=tiled)
        return (gathered.reshape(-1, *x.shape) * x).reshape(gathered.shape)

    return Program(
        name, lambda pmap: nest(pmap, body, mesh), small_ints(*mesh_shape(mesh), *block), mode
    )


def ring(size: int) -> list[tuple[int, int]]:
    return [(j, (j + 1) % size) for j in range(size)]


# ----------------------------------------------------------------------------
# Programs that need more than `nest`: unmapped inputs and outputs, grads inside a map


def replicated_output(pmap: Callable) -> Callable:
    """The outer map's `out_axes=None` after a psum over 'data'.

    JAX 0.4.30 cannot lower `out_axes=None` on an inner map (`_hlo_unshard` fails), nor
    differentiate in reverse mode through a map with `out_axes=None`.
    """

    def outer(x):
        rows = pmap(lambda y: lax.psum(y * y, "model"), "model")(x)
        return lax.psum(rows * x, "data"), rows * x

    return pmap(outer, "data", out_axes=(None, 0))


def shared_weights(pmap: Callable) -> Callable:
    """`w` broadcast to every device (`in_axes=None`): its gradient sums over the mesh."""

    def body(x, w):
        y = x @ w
        return y * lax.psum(y, "model")

    return nest(pmap, body, MESH_2X4, in_axes=(0, None))


def shared_inputs(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    return (
        rng.integers(-4, 5, size=(2, 4, 3)).astype(np.float32),
        rng.integers(-4, 5, size=(3, 5)).astype(np.float32),
    )


def unmapped_collectives(pmap: Callable) -> Callable:
    """psum and pmean of values that depend on the unmapped (`in_axes=None`) input `w`."""

    def body(x, w):
        return x * lax.psum(w * x, DM) + lax.pmean(w * w, "model")

    return nest(pmap, body, MESH_2X4, in_axes=(0, None))


def vector_and_weights(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    return small_ints(2, 4, 3)(rng) + small_ints(3)(rng)


def grad_inside_wrt_unmapped(pmap: Callable) -> Callable:
    """Each 'data' shard differentiates with respect to `w`, unmapped in the inner map."""

    def outer(x, w):
        inner = pmap(lambda xr, w: lax.psum(xr * w, DM) * w, "model", in_axes=(0, None))
        return jax.grad(lambda w: inner(x, w).sum())(w)

    return pmap(outer, "data", in_axes=(0, None))


def grad_inside(axes) -> Callable[[Callable], Callable]:
    """The outer body differentiates a function that calls the inner map."""

    def build(pmap):
        inner = pmap(lambda y: lax.psum(y * y, axes), "model")

        def outer(x):
            return jax.grad(lambda z: (inner(z) * z).sum())(x)

        return pmap(outer, "data")

    return build


def mlp_partial_loss(x, w1, w2, y):
    """One 'model' device's share of the hidden layer; the output summed over 'model'."""
    hidden = jnp.maximum(x @ w1, 0.0)
    out = lax.psum(hidden @ w2, "model")
    return jnp.mean((out - y) ** 2)


def mlp_loss(pmap: Callable) -> Callable:
    """Data- and model-parallel MLP loss: hidden units split over 'model', pmean over 'data'."""

    def outer(x, w1, w2, y):
        inner = pmap(
            lambda *a: lax.pmean(mlp_partial_loss(*a), "data"), "model", in_axes=(None, 0, 0, None)
        )
        return inner(x, w1, w2, y)

    return pmap(outer, "data", in_axes=(0, None, None, 0))


def mlp_train_step(pmap: Callable) -> Callable:
    """Each data shard differentiates its loss through the inner map; gradients pmean'd."""

    def outer(x, w1, w2, y):
        def loss(w1, w2):
            inner = pmap(mlp_partial_loss, "model", in_axes=(None, 0, 0, None))
            return inner(x, w1, w2, y).mean()

        g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2)
        return w1 - 0.125 * lax.pmean(g1, "data"), w2 - 0.125 * lax.pmean(g2, "data")

    return pmap(outer, "data", in_axes=(0, None, None, 0))


def mlp_inputs(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    """Odd multiples of 1/8, and 5 input features: no hidden unit is ever exactly 0."""

    def odd_eighths(*shape):
        return ((2 * rng.integers(-4, 4, size=shape) + 1) / 8).astype(np.float32)

    return odd_eighths(2, 3, 5), odd_eighths(4, 5, 2), odd_eighths(4, 2, 3), odd_eighths(2, 3, 3)


def pytree_outputs(pmap: Callable) -> Callable:
    def body(x, y):
        return {
            "rows": lax.psum(x * y, "model"),
            "mean": lax.pmean(x * x, ("data", "model")),
            "gathered": lax.all_gather(y, "data") * x,
        }

    return nest(pmap, body, MESH_2X4)


def two_inputs(rng: np.random.Generator) -> tuple[np.ndarray, ...]:
    return small_ints(2, 4, 3)(rng) + small_ints(2, 4, 3)(rng)


def device_ids(pmap: Callable) -> Callable:
    def body(x):
        return 4 * lax.axis_index("data") + lax.axis_index("model"), x * lax.axis_index("model")

    return nest(pmap, body, MESH_2X4)


def batch_named(pmap: Callable) -> Callable:
    """Under `jax.vmap(axis_name='b')`: the body sums over the batch axis as well."""

    def body(x):
        return x * lax.psum(x, "b") + lax.psum(x, ("data", "model"))

    return nest(pmap, body, MESH_2X4)


# ----------------------------------------------------------------------------
# The programs

DM, MD = ("data", "model"), ("model", "data")
ABC = ("a", "b", "c")


def _programs() -> list[Program]:
    c = collective_program
    g = gather_program
    psum, pmean, pmax, pmin = lax.psum, lax.pmean, lax.pmax, lax.pmin

    def over(collective, axes, **kwargs):
        return lambda x: collective(x, axes, **kwargs)

    return [
        # 2x4: data=2 outer, model=4 inner
        c("grad_psum_model", MESH_2X4, over(psum, "model"), 3),
        c("grad_psum_data", MESH_2X4, over(psum, "data"), 3),
        c("grad_psum_data_model", MESH_2X4, over(psum, DM), 3),
        c("grad_psum_model_data", MESH_2X4, over(psum, MD), 3),
        c("grad_pmean_model", MESH_2X4, over(pmean, "model"), 3),
        c("grad_pmean_data", MESH_2X4, over(pmean, "data"), 3),
        c("grad_pmean_data_model", MESH_2X4, over(pmean, DM), 3),
        c("grad_pmean_model_data", MESH_2X4, over(pmean, MD), 3),
        # JAX 0.4.30 has no differentiation rule for pmax and pmin: values only
        c("value_pmax_model", MESH_2X4, over(pmax, "model"), 3, mode="value", inputs=distinct),
        c("value_pmax_data_model", MESH_2X4, over(pmax, DM), 3, mode="value", inputs=distinct),
        c("value_pmin_model", MESH_2X4, over(pmin, "model"), 3, mode="value", inputs=distinct),
        c("value_pmin_data", MESH_2X4, over(pmin, "data"), 3, mode="value", inputs=distinct),
        g("grad_all_gather_model", MESH_2X4, "model", 3),
        g("grad_all_gather_data", MESH_2X4, "data", 3),
        g("grad_all_gather_data_model", MESH_2X4, DM, 3),
        g("grad_all_gather_model_data", MESH_2X4, MD, 3),
        g("grad_all_gather_tiled_model", MESH_2X4, "model", 2, 3, tiled=True),
        g("grad_all_gather_tiled_data_model", MESH_2X4, DM, 2, 3, tiled=True),
        c(
            "grad_psum_scatter_model",
            MESH_2X4,
            lambda x: jnp.tile(lax.psum_scatter(x * x, "model", tiled=True), (4, 1)),
            4,
            3,
        ),
        c(
            "grad_psum_scatter_data_model",
            MESH_2X4,
            lambda x: jnp.tile(lax.psum_scatter(x * x, DM, tiled=True), (8, 1)),
            8,
            3,
        ),
        c("grad_all_to_all_model", MESH_2X4, lambda x: lax.all_to_all(x, "model", 0, 0), 4, 3),
        c("grad_ppermute_ring_model", MESH_2X4, over(lax.ppermute, "model", perm=ring(4)), 3),
        c("grad_ppermute_ring_data", MESH_2X4, over(lax.ppermute, "data", perm=ring(2)), 3),
        c(
            "grad_axis_index_weight",
            MESH_2X4,
            lambda x: lax.psum(x * (4 * lax.axis_index("data") + lax.axis_index("model") + 1), DM),
            3,
        ),
        # JAX 0.4.30 cannot differentiate a pmap with `out_axes=None` (an AssertionError)
        Program("jvp_replicated_output", replicated_output, small_ints(2, 4, 3), "jvp"),
        Program("grad_shared_weights", shared_weights, shared_inputs, "grad"),
        Program("grad_mlp_loss", mlp_loss, mlp_inputs, "grad"),
        Program("grad_inside_outer_model", grad_inside("model"), small_ints(2, 4, 3)),
        Program("grad_inside_outer_data_model", grad_inside(DM), small_ints(2, 4, 3)),
        Program("mlp_train_step", mlp_train_step, mlp_inputs),
        Program("grad_unmapped_collectives", unmapped_collectives, vector_and_weights, "grad"),
        Program("grad_inside_wrt_unmapped", grad_inside_wrt_unmapped, vector_and_weights),
        # depth 1 and depth 3
        c("grad_psum_i", MESH_8, over(psum, "i"), 3),
        c("grad_pmean_i", MESH_8, over(pmean, "i"), 3),
        c("grad_psum_a", MESH_2X2X2, over(psum, "a"), 3),
        c("grad_psum_c", MESH_2X2X2, over(psum, "c"), 3),
        c("grad_psum_abc", MESH_2X2X2, over(psum, ABC), 3),
        c("grad_psum_ca", MESH_2X2X2, over(psum, ("c", "a")), 3),
        c("grad_pmean_abc", MESH_2X2X2, over(pmean, ABC), 3),
        c("grad_pmean_b", MESH_2X2X2, over(pmean, "b"), 3),
        # 4x2: data=4 outer, model=2 inner
        c("grad_psum_data_4x2", MESH_4X2, over(psum, "data"), 3),
        c("grad_psum_model_4x2", MESH_4X2, over(psum, "model"), 3),
        c("grad_pmean_data_model_4x2", MESH_4X2, over(pmean, DM), 3),
        g("grad_all_gather_tiled_data_model_4x2", MESH_4X2, DM, 2, 3, tiled=True),
        c("grad_ppermute_ring_data_4x2", MESH_4X2, over(lax.ppermute, "data", perm=ring(4)), 3),
        # forward-mode and pytree reverse-mode
        c("jvp_psum_data_model", MESH_2X4, over(psum, DM), 3, mode="jvp"),
        c("jvp_pmean_abc", MESH_2X2X2, over(pmean, ABC), 3, mode="jvp"),
        g("jvp_all_gather_data", MESH_2X4, "data", 3, mode="jvp"),
        c(
            "jvp_ppermute_ring_model",
            MESH_2X4,
            over(lax.ppermute, "model", perm=ring(4)),
            3,
            mode="jvp",
        ),
        Program("vjp_pytree_outputs", pytree_outputs, two_inputs, "vjp"),
        # vmap around the nest
        c(
            "vmap_psum_data_model",
            MESH_2X4,
            over(psum, DM),
            3,
            mode="vmap",
            inputs=lambda *shape: small_ints(3, *shape),
        ),
        Program("vmap_named_psum_b", batch_named, small_ints(3, 2, 4, 3), "vmap", "b"),
        # forward values only
        c("value_psum_data_model", MESH_2X4, over(psum, DM), 3, mode="value"),
        c("value_pmean_model_data", MESH_2X4, over(pmean, MD), 3, mode="value"),
        g("value_all_gather_tiled_model_data", MESH_2X4, MD, 2, 3, tiled=True, mode="value"),
        c(
            "value_psum_scatter_data_model",
            MESH_2X4,
            lambda x: jnp.tile(lax.psum_scatter(x, DM, tiled=True), (8, 1)),
            8,
            3,
            mode="value",
        ),
        c(
            "value_ppermute_ring_data_4x2",
            MESH_4X2,
            over(lax.ppermute, "data", perm=ring(4)),
            3,
            mode="value",
        ),
        Program("value_replicated_output", replicated_output, small_ints(2, 4, 3)),
        Program("value_shared_weights", shared_weights, shared_inputs),
        Program("value_mlp_loss", mlp_loss, mlp_inputs),
        Program("value_device_ids", device_ids, small_ints(2, 4, 3)),
    ]


# axis_index_groups: positions along the axes (row-major in the order named).
PAIRS_4 = [[0, 1], [2, 3]]
HALVES_8 = [[0, 1, 2, 3], [4, 5, 6, 7]]
SCATTERED_PAIRS_8 = [[0, 5], [1, 2], [3, 4], [6, 7]]
OUTER_PAIRS_8 = [[0, 7], [1, 6], [2, 5], [3, 4]]
CROSSED_8 = [[0, 1, 4, 5], [2, 3, 6, 7]]
UNEVEN_4 = [[0], [3, 1, 2]]  # all-reduces only


def grad_inside_in_groups(pmap: Callable) -> Callable:
    """The outer body differentiates through an inner map's psum in index groups."""
    inner = pmap(lambda y: lax.psum(y * y, DM, axis_index_groups=CROSSED_8), "model")

    def outer(x):
        return jax.grad(lambda z: (inner(z) * z).sum())(x)

    return pmap(outer, "data")


def _index_group_programs() -> list[Program]:
    c = collective_program
    psum, pmean, pmax, pmin = lax.psum, lax.pmean, lax.pmax, lax.pmin

    def grouped(collective, axes, groups, **kwargs):
        return lambda x: collective(x, axes, axis_index_groups=groups, **kwargs)

    def gathered_sum(axes, groups, **kwargs):
        return lambda x: lax.all_gather(x, axes, axis_index_groups=groups, **kwargs).sum(0)

    def scattered(axes, groups, reps, **kwargs):
        return lambda x: jnp.tile(
            lax.psum_scatter(x * x, axes, axis_index_groups=groups, **kwargs), (reps, 1)
        )

    return [
        c("groups_grad_psum_i_halves", MESH_8, grouped(psum, "i", HALVES_8), 3),
        c("groups_grad_pmean_i_scattered", MESH_8, grouped(pmean, "i", SCATTERED_PAIRS_8), 3),
        c("groups_grad_psum_model_pairs", MESH_2X4, grouped(psum, "model", PAIRS_4), 3),
        c("groups_grad_psum_data_model", MESH_2X4, grouped(psum, DM, CROSSED_8), 3),
        c("groups_grad_psum_model_data", MESH_2X4, grouped(psum, MD, CROSSED_8), 3),
        c("groups_grad_pmean_model_data", MESH_2X4, grouped(pmean, MD, OUTER_PAIRS_8), 3),
        c("groups_grad_psum_model_uneven", MESH_2X4, grouped(psum, "model", UNEVEN_4), 3),
        # pmean divides by the first group's size (JAX's psum(1, ...)), also when uneven,
        # until jax 0.12.1, which divides each group by its own size
        c(
            "groups_value_pmean_model_uneven",
            MESH_2X4,
            grouped(pmean, "model", UNEVEN_4),
            3,
            mode="value",
            pmean_groups=(1, UNEVEN_4),
        ),
        c(
            "groups_value_pmax_model_data",
            MESH_2X4,
            grouped(pmax, MD, CROSSED_8),
            3,
            mode="value",
            inputs=distinct,
        ),
        c(
            "groups_value_pmin_model_uneven",
            MESH_2X4,
            grouped(pmin, "model", UNEVEN_4),
            3,
            mode="value",
            inputs=distinct,
        ),
        c("groups_grad_all_gather_i", MESH_8, gathered_sum("i", SCATTERED_PAIRS_8), 3),
        c("groups_grad_all_gather_model", MESH_2X4, gathered_sum("model", PAIRS_4), 3),
        c(
            "groups_grad_all_gather_tiled_model_data",
            MESH_2X4,
            gathered_sum(MD, CROSSED_8, tiled=True),
            2,
            3,
        ),
        c("groups_grad_psum_scatter_i", MESH_8, scattered("i", HALVES_8, 4, tiled=True), 4, 3),
        c(
            "groups_grad_psum_scatter_data_model",
            MESH_2X4,
            scattered(DM, OUTER_PAIRS_8, 2, tiled=True),
            2,
            3,
        ),
        c(
            "groups_grad_psum_scatter_untiled_model",
            MESH_2X4,
            lambda x: lax.psum_scatter(x * x, "model", axis_index_groups=PAIRS_4),
            2,
            3,
        ),
        c(
            "groups_grad_all_to_all_model",
            MESH_2X4,
            lambda x: lax.all_to_all(x, "model", 0, 0, axis_index_groups=PAIRS_4),
            2,
            3,
        ),
        c(
            "groups_grad_all_to_all_data_model",
            MESH_2X4,
            lambda x: lax.all_to_all(x, DM, 0, 0, axis_index_groups=OUTER_PAIRS_8),
            2,
            3,
        ),
        c(
            "groups_grad_all_to_all_tiled_model_data",
            MESH_2X4,
            lambda x: lax.all_to_all(x, MD, 1, 0, axis_index_groups=CROSSED_8, tiled=True).reshape(
                x.shape
            ),
            3,
            4,
        ),
        Program("groups_grad_inside_outer", grad_inside_in_groups, small_ints(2, 4, 3)),
        c("groups_jvp_psum_data_model", MESH_2X4, grouped(psum, DM, CROSSED_8), 3, mode="jvp"),
        c("groups_vjp_all_gather_model", MESH_2X4, gathered_sum("model", PAIRS_4), 3, mode="vjp"),
        c(
            "groups_vmap_psum_model_data",
            MESH_2X4,
            grouped(psum, MD, CROSSED_8),
            3,
            mode="vmap",
            inputs=lambda *shape: small_ints(3, *shape),
        ),
    ]


PROGRAMS: list[Program] = _programs() + _index_group_programs()
