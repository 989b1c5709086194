"""axis_index_groups: the index math, the IR parameter, and programs against numpy.

The oracles are independent of pmapc: replica groups and collective values are
computed here with explicit loops over device coordinates (JAX 0.4's rule: an
index is a position in the group over the axes, row-major in the order named);
result shapes come from JAX's own abstract evaluation; error classes are the
ones JAX 0.4.30 raises for the same calls. Gradients, jvp, vjp and vmap are
compared with JAX 0.4.30's nested jax.pmap in test_goldens.py (the `groups_*`
programs of golden_programs.py).
"""

from __future__ import annotations

import dataclasses
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax
from support.oracle import jax_pmean_divisors

import pmapc
from pmapc import collectives, dialect, ir, shapes
from pmapc.errors import ShapeError
from pmapc.lowering import jax_api
from pmapc.mesh import Mesh, replica_groups_for
from pmapc.rewriter import unobserved

MESH_8 = (("i", 8),)
MESH_2X4 = (("data", 2), ("model", 4))
DM, MD = ("data", "model"), ("model", "data")
PAIRS_4 = [[0, 1], [2, 3]]
HALVES_8 = [[0, 1, 2, 3], [4, 5, 6, 7]]
SCATTERED_PAIRS_8 = [[0, 5], [1, 2], [3, 4], [6, 7]]
CROSSED_8 = [[0, 1, 4, 5], [2, 3, 6, 7]]
UNEVEN_4 = [[0], [3, 1, 2]]


# ----------------------------------------------------------------------------
# The oracle: devices, their coordinates, and the members of their index group


def coords_of(mesh, device: int) -> dict[str, int]:
    """The device's index along every axis (row-major numbering, the last axis fastest)."""
    coords = {}
    for name, size in reversed(mesh):
        device, coords[name] = divmod(device, size)
    return coords


def position(mesh, coords: dict[str, int], axes) -> int:
    """The device's position in its group over `axes`, row-major in the order named."""
    sizes = dict(mesh)
    index = 0
    for axis in axes:
        index = index * sizes[axis] + coords[axis]
    return index


def device_count(mesh) -> int:
    return int(np.prod([size for _, size in mesh]))


def group_members(mesh, device: int, axes, index_groups) -> list[int]:
    """The devices `device` acts with, in their index group's order."""
    mine = coords_of(mesh, device)
    same_elsewhere = [
        d
        for d in range(device_count(mesh))
        if all(coords_of(mesh, d)[n] == mine[n] for n, _ in mesh if n not in axes)
    ]
    by_position = {position(mesh, coords_of(mesh, d), axes): d for d in same_elsewhere}
    (group,) = [g for g in index_groups if position(mesh, mine, axes) in g]
    return [by_position[index] for index in group]


# ----------------------------------------------------------------------------
# Pure index math: replica groups


@pytest.mark.parametrize(
    "mesh, axes, index_groups",
    [
        (MESH_8, ("i",), SCATTERED_PAIRS_8),
        (MESH_2X4, ("model",), PAIRS_4),
        (MESH_2X4, ("data",), [[1], [0]]),
        (MESH_2X4, DM, CROSSED_8),
        (MESH_2X4, MD, CROSSED_8),
        (MESH_2X4, MD, [[7, 0, 3, 4], [1, 2, 5, 6]]),
    ],
)
def test_replica_groups_split_each_group_by_index_groups(mesh, axes, index_groups):
    groups = replica_groups_for(Mesh(*zip(*mesh)), axes, index_groups)
    expected = {
        tuple(group_members(mesh, d, axes, index_groups)) for d in range(device_count(mesh))
    }
    assert {tuple(row) for row in groups.tolist()} == expected
    assert len(groups) == len(expected)


def test_replica_groups_follow_jax_order():
    """Every group over the axes in turn, split by each index group (JAX's order)."""
    groups = replica_groups_for(Mesh(("data", "model"), (2, 4)), ("model",), [[2, 3], [0, 1]])
    assert groups.tolist() == [[2, 3], [0, 1], [6, 7], [4, 5]]


def test_uneven_index_groups_are_padded_with_minus_one():
    groups = replica_groups_for(Mesh(("data", "model"), (2, 4)), ("model",), UNEVEN_4)
    assert groups.tolist() == [[0, -1, -1], [3, 1, 2], [4, -1, -1], [7, 5, 6]]


# ----------------------------------------------------------------------------
# The rules JAX 0.4 applies to index groups


@pytest.mark.parametrize(
    "index_groups, fault",
    [
        ([[0, 1]], "indices 2, 3 in no group"),
        ([[0, 1], [2, 4]], "index 4 out of range"),
        ([[0, 1], [1, 2, 3]], "index 1 more than once"),
        ([[0, 1, 2, 3], []], "every group must hold at least one index"),
        ([], "every group must hold at least one index"),
    ],
)
def test_index_groups_must_cover_every_index_once(index_groups, fault):
    where = shapes.describe_axes(["i"], 4, index_groups)
    with pytest.raises(ShapeError) as caught:
        shapes.check_index_groups("psum", index_groups, where, 4, equal_sizes=False)
    assert str(caught.value) == (
        f"'psum' over 'i' (size 4, axis_index_groups {index_groups}): axis_index_groups "
        f"must cover all indices exactly once ({fault}); put each index 0..3 in one group"
    )


@pytest.mark.parametrize("kind", ["all_gather", "psum_scatter", "all_to_all"])
def test_uneven_groups_only_for_all_reduces(kind):
    collective = collectives.BY_KIND[kind]
    params = collectives.Grouped(axis_index_groups=((0,), (3, 1, 2)))
    with pytest.raises(ShapeError, match="must all be the same size, got sizes 1, 3"):
        collective.check_index_groups(params, ["i"], 4)
    for reduction in (collectives.PSUM, collectives.PMAX, collectives.PMIN):
        reduction.check_index_groups(params, ["i"], 4)


# ----------------------------------------------------------------------------
# The IR parameter, read from JAX and sized as JAX sizes it

# One JAX call per kind that takes index groups, traced with 'i' bound to 8 devices.
GROUPED_CALLS = {
    "psum": lambda x: lax.psum(x, "i", axis_index_groups=SCATTERED_PAIRS_8),
    "pmax": lambda x: lax.pmax(x, "i", axis_index_groups=[[0], [1, 2, 3, 4, 5, 6, 7]]),
    "pmin": lambda x: lax.pmin(x, "i", axis_index_groups=HALVES_8),
    "all_gather": lambda x: lax.all_gather(x, "i", axis=1, axis_index_groups=HALVES_8),
    "psum_scatter": lambda x: lax.psum_scatter(
        x, "i", scatter_dimension=1, tiled=True, axis_index_groups=SCATTERED_PAIRS_8
    ),
    "all_to_all": lambda x: lax.all_to_all(x, "i", 0, 1, tiled=True, axis_index_groups=HALVES_8),
    "ragged_all_to_all": lambda x: lax.ragged_all_to_all(
        x, x[:3], *[jnp.zeros(4, jnp.int32)] * 4, axis_name="i", axis_index_groups=HALVES_8
    ),
}
OPERAND = jnp.zeros((4, 8), jnp.float32)


def grouped_equation(kind: str):
    collective = collectives.BY_KIND[kind]
    closed = jax.make_jaxpr(GROUPED_CALLS[kind], axis_env=[("i", 8)])(OPERAND)
    primitive = jax_api.collective_primitive(collective)
    (equation,) = [e for e in closed.jaxpr.eqns if e.primitive is primitive]
    return collective, equation


def test_grouped_calls_cover_the_kinds_that_take_index_groups():
    takes = [c.kind for c in collectives.ALL if c.takes_index_groups]
    assert list(GROUPED_CALLS) == takes


@pytest.mark.parametrize("kind", list(GROUPED_CALLS))
def test_result_rule_with_index_groups_agrees_with_jax(kind):
    collective, equation = grouped_equation(kind)
    params = collective.params_from_jax(equation.params)
    groups = params.axis_index_groups
    assert groups == tuple(tuple(g) for g in equation.params["axis_index_groups"])
    assert all(type(index) is int for group in groups for index in group)
    operands = [tuple(v.aval.shape) for v in equation.invars]
    (shape, *_) = collective.result_shapes(params, operands, ("i",), 8)
    assert shape == equation.outvars[0].aval.shape


@pytest.mark.parametrize("kind", list(GROUPED_CALLS))
def test_index_groups_round_trip_through_the_ir(kind):
    collective, equation = grouped_equation(kind)
    params = collective.params_from_jax(equation.params)
    module = ir.parse_module("module {}", ir.make_context())
    with ir.building(module):
        b = unobserved(ir.InsertionPoint(module.body), ir.Location.unknown())
        op = dialect.create_collective(b, kind, [], [], ["i"], params)
        assert dialect.read_collective(op).params == params
        op = dialect.create_collective(
            b, kind, [], [], ["i"], dataclasses.replace(params, axis_index_groups=None)
        )
        assert dialect.read_collective(op).params.index_groups is None
        assert "axis_index_groups" not in ir.as_dict(op.attributes["backend_config"])


# ----------------------------------------------------------------------------
# Values against numpy: every kind in one program per mesh, axes and groups


def nest(body, mesh):
    fun = body
    for name, _ in reversed(mesh):
        fun = pmapc.pmap(fun, name)
    return fun


RESULTS = (
    "psum",
    "pmean",
    "pmax",
    "pmin",
    "all_gather",
    "all_gather_tiled",
    "psum_scatter",
    "psum_scatter_untiled",
    "all_to_all",
)


def grouped_body(axes, index_groups):
    def body(x):
        g = len(index_groups[0])

        def kw(**more):
            return dict(axis_index_groups=index_groups, **more)

        return {
            "psum": lax.psum(x, axes, **kw()),
            "pmean": lax.pmean(x, axes, **kw()),
            "pmax": lax.pmax(x, axes, **kw()),
            "pmin": lax.pmin(x, axes, **kw()),
            "all_gather": lax.all_gather(x, axes, **kw()),
            "all_gather_tiled": lax.all_gather(x, axes, **kw(axis=1, tiled=True)),
            "psum_scatter": lax.psum_scatter(x, axes, **kw(tiled=True)),
            "psum_scatter_untiled": lax.psum_scatter(x[:g], axes, **kw()),
            "all_to_all": lax.all_to_all(x, axes, 0, 0, **kw(tiled=True)),
        }

    return body


def expected_values(mesh, axes, index_groups, blocks) -> dict[str, np.ndarray]:
    """Each device's results, stacked over the devices (flat), from explicit loops."""
    results = {key: [] for key in RESULTS}
    for device in range(device_count(mesh)):
        members = group_members(mesh, device, axes, index_groups)
        rank = members.index(device)
        mine = [blocks[d] for d in members]
        g = len(members)
        total = np.sum(mine, axis=0)
        results["psum"].append(total)
        results["pmean"].append(total / len(index_groups[0]))
        results["pmax"].append(np.max(mine, axis=0))
        results["pmin"].append(np.min(mine, axis=0))
        results["all_gather"].append(np.stack(mine))
        results["all_gather_tiled"].append(np.concatenate(mine, axis=1))
        results["psum_scatter"].append(np.split(total, g)[rank])
        results["psum_scatter_untiled"].append(np.sum([b[:g] for b in mine], axis=0)[rank])
        results["all_to_all"].append(np.concatenate([np.split(b, g)[rank] for b in mine]))
    return {key: np.stack(values) for key, values in results.items()}


@pytest.mark.parametrize(
    "mesh, axes, index_groups",
    [
        (MESH_8, "i", HALVES_8),
        (MESH_8, "i", SCATTERED_PAIRS_8),
        (MESH_2X4, "model", PAIRS_4),
        (MESH_2X4, DM, CROSSED_8),
        (MESH_2X4, MD, CROSSED_8),
        (MESH_2X4, MD, [[7, 0], [1, 6], [2, 5], [3, 4]]),
    ],
    ids=lambda v: str(v).replace(" ", ""),
)
def test_values_match_numpy(mesh, axes, index_groups):
    sizes = [size for _, size in mesh]
    x = np.random.default_rng(device_count(mesh)).integers(-8, 9, (*sizes, 8, 3))
    x = x.astype(np.float32)
    actual = nest(grouped_body(axes, index_groups), mesh)(x)
    named = axes if isinstance(axes, tuple) else (axes,)
    expected = expected_values(mesh, named, index_groups, x.reshape(-1, 8, 3))
    for key, want in expected.items():
        got = np.asarray(actual[key]).reshape(want.shape)
        np.testing.assert_allclose(got, want, rtol=1e-6, err_msg=key)


def test_uneven_all_reduces_match_numpy():
    """All-reduces in groups of 1 and 3. pmean divides as the running JAX's own
    `jax.pmap` does: by the first group's size in JAX 0.4.30 through 0.12.0.1 (its
    psum(1, ...) under index groups), by each group's own size from 0.12.1 on."""

    def body(x):
        kw = dict(axis_index_groups=UNEVEN_4)
        return (
            lax.psum(x, "model", **kw),
            lax.pmax(x, "model", **kw),
            lax.pmin(x, "model", **kw),
            lax.pmean(x, "model", **kw),
        )

    x = np.random.default_rng(3).integers(-8, 9, (2, 4, 5)).astype(np.float32)
    psum, pmax, pmin, pmean = (np.asarray(r).reshape(8, 5) for r in nest(body, MESH_2X4)(x))
    blocks = x.reshape(8, 5)
    divisors = jax_pmean_divisors(tuple(tuple(group) for group in UNEVEN_4))
    for device in range(8):
        mine = blocks[group_members(MESH_2X4, device, ("model",), UNEVEN_4)]
        np.testing.assert_allclose(psum[device], mine.sum(0))
        np.testing.assert_allclose(pmax[device], mine.max(0))
        np.testing.assert_allclose(pmin[device], mine.min(0))
        np.testing.assert_allclose(pmean[device], mine.sum(0) / divisors[device % 4])


def test_both_target_forms_run_index_groups(run_ir):
    """The traced IR, run in partition and replica form (padded uneven groups too)."""

    def body(x):
        return (
            lax.psum(x, "model", axis_index_groups=UNEVEN_4),
            lax.all_gather(x, MD, axis_index_groups=CROSSED_8),
        )

    x = np.random.default_rng(5).integers(-8, 9, (2, 4, 3)).astype(np.float32)
    text = pmapc.lower(nest(body, MESH_2X4), x).as_text("pmapc")
    psum, gathered = run_ir(text, x)
    blocks = x.reshape(8, 3)
    for device in range(8):
        coords = coords_of(MESH_2X4, device)
        at = (coords["data"], coords["model"])
        summed = blocks[group_members(MESH_2X4, device, ("model",), UNEVEN_4)].sum(0)
        np.testing.assert_allclose(psum[at], summed)
        np.testing.assert_allclose(
            gathered[at], blocks[group_members(MESH_2X4, device, MD, CROSSED_8)]
        )


# ----------------------------------------------------------------------------
# Errors: the class JAX 0.4.30 raises, pmapc's message at the user's line


def line_of(function, text: str) -> int:
    """The line of `function`'s source that contains `text`."""
    lines, first = inspect.getsourcelines(function)
    return first + next(i for i, line in enumerate(lines) if text in line)


def repeated_index(x):
    return lax.pmean(x, "i", axis_index_groups=[[0, 1], [1, 2, 3, 4, 5, 6, 7]])


def half_the_indices(x):
    return lax.psum(x, "i", axis_index_groups=[[0, 1], [2, 3]])


def uneven_gather(x):
    return lax.all_gather(x, "i", axis_index_groups=[[0, 1, 2], [3, 4, 5, 6, 7]])


def uneven_all_to_all(x):
    return lax.all_to_all(x, "i", 0, 0, tiled=True, axis_index_groups=[[0, 1, 2], [3, 4, 5, 6, 7]])


@pytest.mark.parametrize(
    "body, message",
    [
        # JAX's own check (a ValueError in both versions), in pmapc's words
        (
            repeated_index,
            "'pmean' over 'i' (size 8, axis_index_groups [[0, 1], [1, 2, 3, 4, 5, 6, "
            "7]]): axis_index_groups must cover all indices exactly once (index 1 more "
            "than once); put each index 0..7 in one group",
        ),
        # JAX 0.4.30 leaves this to XLA (which fails); pmapc refuses it at the call
        (
            half_the_indices,
            "'psum' over 'i' (size 8, axis_index_groups [[0, 1], [2, 3]]): "
            "axis_index_groups must cover all indices exactly once (indices 4, 5, 6, "
            "7 in no group); put each index 0..7 in one group",
        ),
        # JAX 0.4.30: ValueError when lowering ('Invalid replica id -1', 'Replica groups must be
        # equally sized')
        (
            uneven_gather,
            "'all_gather' over 'i' (size 8, axis_index_groups [[0, 1, 2], [3, 4, 5, 6, "
            "7]]): axis_index_groups must all be the same size, got sizes 3, 5; split "
            "the indices into groups of one size",
        ),
        (
            uneven_all_to_all,
            "'all_to_all' over 'i' (size 8, axis_index_groups [[0, 1, 2], [3, 4, "
            "5, 6, 7]]): axis_index_groups must all be the same size, got sizes 3, 5;"
            " split the indices into groups of one size",
        ),
    ],
    ids=lambda v: getattr(v, "__name__", ""),
)
def test_invalid_groups_raise_value_errors_at_the_users_line(body, message):
    x = np.zeros((8, 6), np.float32)
    with pytest.raises(ValueError) as caught:
        pmapc.pmap(body, "i")(x)
    error = caught.value
    assert isinstance(error, ShapeError)
    assert error.message == message
    assert error.location.file == __file__
    assert error.location.line == line_of(body, "axis_index_groups")


def test_ppermute_takes_no_index_groups():
    """JAX's own TypeError, as in JAX 0.4.30."""
    with pytest.raises(TypeError, match="axis_index_groups"):
        pmapc.pmap(lambda x: lax.ppermute(x, "i", [(0, 1)], axis_index_groups=PAIRS_4), "i")(
            np.zeros((4, 3), np.float32)
        )


def test_index_groups_over_a_vmap_axis_are_refused_as_in_jax():
    """JAX 0.4.30's batching rule refuses index groups over the vmapped axis; those over
    other axes work under vmap (golden `groups_vmap_psum_model_data`)."""
    inner = pmapc.pmap(
        lambda x: lax.psum(x, ("b", "i"), axis_index_groups=[list(range(6)), list(range(6, 12))]),
        "i",
    )
    with pytest.raises(NotImplementedError, match="axis_index_groups not supported in vmap"):
        jax.vmap(inner, axis_name="b")(np.zeros((3, 4, 2), np.float32))
