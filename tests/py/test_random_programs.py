"""Random nested-map programs: `pmapc.pmap` against nested `jax.vmap` and a numpy interpreter.

`random_programs.programs()` draws a mesh of 8 devices (1, 2 or 3 axes, every ordered
factorization of 8), axis names (a repeated name shadows the outer binding), 1-2 float32
or int32 arguments with `in_axes` 0, 1 or None at every level (`axis_size=` where none is
mapped), `out_axes` at every level (None where the result is replicated), and 1-4 ops in
the innermost body and 0-2 in each outer one: psum, pmean, pmax, pmin, all_gather,
psum_scatter, all_to_all (tiled or not), ppermute (whole or partial permutations) and
axis_index, each over a random non-empty subset of the bound axes in random order; a
reduction may sit inside a `cond` or a `fori_loop` whose predicate or trip count each
device computes from its own value, so that the devices of a group go different ways
(run as nested vmap runs it: lowering/divergence.py).

Each program runs on its own data three ways: with `pmapc.pmap`, in a child process (a
crash or a hang then fails one program, which hypothesis shrinks); with a numpy
interpreter of the description (every program); and as `jax.jit` of nested named
`jax.vmap` where vmap can run every op (`random_programs.vmap_can_run`: not all_gather,
psum_scatter or ppermute over 2+ axes, nor a partial ppermute, nor what vmap's batching
rules get wrong). The two oracles must agree, and pmapc with them: shapes and dtypes
equal, int32 exactly, float32 to rtol 1e-5.

The test is derandomized (the same programs every run) and runs 200 programs by default,
about a minute on a 2-core machine. To run more, set PMAPC_RANDOM_PROGRAMS; add
--hypothesis-show-statistics to see which meshes and ops ran:

    PMAPC_RANDOM_PROGRAMS=5000 .venv/bin/python -m pytest tests/py/test_random_programs.py -q

A failing program is shrunk and printed as a `Program(...)` (`Op`s list only their
non-default fields): add it to REGRESSIONS below, or, while the bug is open, to
KNOWN_BUGS with an xfail(strict=True) test.
"""

from __future__ import annotations

import dataclasses
import os

import jax
import numpy as np
import pytest
from hypothesis import event, given, reject
from support.child_process import ChildFailure, ChildProcess
from support.oracle import assert_tree_equal
from support.random_programs import (
    Arg,
    Level,
    Op,
    Program,
    axis_tuple,
    build,
    programs,
    run_numpy,
    run_with_pmapc,
    sample_arguments,
    search_settings,
    vmap_can_run,
    vmap_mapper,
)

RANDOM_PROGRAMS = int(os.environ.get("PMAPC_RANDOM_PROGRAMS", "200"))
RTOL = 1e-5

# Open pmapc bugs, by a line of what pmapc reports (the error, or the crashed process's
# Python stack) -> the bug. Give each an xfail(strict=True) regression test below; a random
# program that hits one is rejected, so the budget goes to programs that test the rest.
# Empty: the bugs this generator found are fixed (see REGRESSIONS).
KNOWN_BUGS: dict[str, str] = {}


def check_program(program: Program, pmapc_process: ChildProcess) -> np.ndarray:
    """Run `program` with pmapc and the oracles; compare. Returns pmapc's result."""
    arrays = sample_arguments(program)
    expected = run_numpy(program, arrays)
    actual = pmapc_process.run(run_with_pmapc, program, arrays)
    if vmap_can_run(program):
        # The oracles agree first, so a disagreement with pmapc is not an oracle's bug.
        vmapped = np.asarray(jax.jit(build(program, vmap_mapper))(*arrays))
        assert_tree_equal(vmapped, expected, rtol=RTOL)
    assert_tree_equal(actual, expected, rtol=RTOL)
    return actual


def record_events(program: Program) -> None:
    """Coverage counts for --hypothesis-show-statistics."""
    event(f"mesh {'x'.join(str(level.size) for level in program.levels)}")
    event("oracles: vmap and numpy" if vmap_can_run(program) else "oracle: numpy")
    for level in program.levels:
        for op in level.ops:
            if op.kind != "stack":
                event(f"{op.kind} over {len(axis_tuple(op.axes))} axes")


@search_settings(RANDOM_PROGRAMS)
@given(program=programs())
def test_random_program_matches_the_oracles(program: Program, pmapc_process: ChildProcess):
    record_events(program)
    try:
        check_program(program, pmapc_process)
    except ChildFailure as failure:
        for signature, bug in KNOWN_BUGS.items():
            if signature in failure.details:
                event(f"rejected, known pmapc bug: {bug}")
                reject()
        raise


# ----------------------------------------------------------------------------
# Programs the generator found interesting, and the pmapc bugs it found


def nest(
    mesh: list[tuple[str, int]],
    *ops: Op,
    in_axes=None,
    block=(),
    dtype="float32",
    out_axes=None,
    outer_ops: tuple[Op, ...] = (),
) -> Program:
    """One argument mapped over `mesh` (outermost first), `ops` innermost, `outer_ops` at
    the outermost level; in_axes and out_axes 0 at every level unless given."""
    in_axes = in_axes or (0,) * len(mesh)
    out_axes = out_axes or (0,) * len(mesh)
    levels = [
        Level(name, size, in_axis is None, out_axis, ())
        for (name, size), in_axis, out_axis in zip(mesh, in_axes, out_axes, strict=True)
    ]
    levels[-1] = dataclasses.replace(levels[-1], ops=ops)
    levels[0] = dataclasses.replace(levels[0], ops=levels[0].ops + outer_ops)
    return Program(tuple(levels), tuple(block), (Arg(dtype, tuple(in_axes)),), "add", seed=7)


MESH_2X4 = [("data", 2), ("model", 4)]
MESH_2X2X2 = [("a", 2), ("b", 2), ("c", 2)]
INTERESTING = {
    "shadowed-name-sums-the-inner-axis": nest(
        [("i", 2), ("i", 4)], Op("psum", "i"), Op("axis_index", ("i",)), block=(3,)
    ),
    "all_to_all-over-a-reversed-tuple": nest(
        MESH_2X4,
        Op("all_to_all", ("model", "data"), dimension=0, concat=1, tiled=True),
        block=(8, 2),
    ),
    "untiled-all_to_all-of-a-stacked-dimension": nest(
        MESH_2X2X2,
        Op("stack", dimension=1, count=4),
        Op("all_to_all", ("c", "a"), dimension=1, concat=0),
        block=(3,),
        dtype="int32",
    ),
    "partial-ppermute-over-three-axes": nest(
        MESH_2X2X2,
        Op("ppermute", ("c", "a", "b"), perm=((0, 5), (5, 7), (7, 0), (3, 3))),
        block=(2,),
    ),
    "psum_scatter-over-a-tuple-then-gather-back": nest(
        MESH_2X4,
        Op("psum_scatter", ("model", "data"), dimension=1, tiled=True),
        Op("all_gather", ("data", "model"), dimension=1, tiled=True),
        block=(2, 8),
    ),
    "out_axes-none-after-a-psum-over-the-outer-axis": nest(
        [("data", 8), ("model", 1)],
        Op("psum", ("data", "model")),
        in_axes=(1, 0),
        out_axes=(None, 1),
        block=(2,),
        dtype="int32",
    ),
    "size-one-axes-and-mapped-dimension-one": nest(
        [("x", 8), ("y", 1), ("z", 1)],
        Op("pmean", ("z", "x")),
        Op("axis_index", "y"),
        in_axes=(1, 1, 0),
        block=(3,),
    ),
    "outer-level-collectives-after-the-inner-map": nest(
        MESH_2X4,
        Op("all_gather", "model", dimension=1),
        in_axes=(0, 1),
        block=(3,),
        outer_ops=(Op("pmax", "data"), Op("ppermute", "data", perm=((0, 1), (1, 0)))),
    ),
}


@pytest.mark.parametrize("program", INTERESTING.values(), ids=INTERESTING.keys())
def test_interesting_program(program: Program, pmapc_process: ChildProcess):
    check_program(program, pmapc_process)


# pmapc bugs these random programs found, each fixed since (the commit that fixed it).
REGRESSIONS = {
    # 9f91096: lower-collectives anchored per-function values before @main's first op, a
    # collective it then erased: a segfault, or invalid IR, at the next axis_index.
    "outermost-map-without-mapped-arguments-two-axis-indices": nest(
        MESH_2X4,
        Op("axis_index", "data"),
        Op("axis_index", "model"),
        in_axes=(None, None),
        dtype="int32",
    ),
    "outermost-map-without-mapped-arguments-slicing-inner-axes": nest(
        [("a", 2), ("b", 1), ("c", 4)], Op("psum", "a"), in_axes=(None, 0, 0), block=(3,)
    ),
    # 5e2a0db: combine-all-reduces joined psum(psum(x)) into one all_reduce that used its
    # own result ('operand #1 does not dominate this use').
    "combine-all-reduces-and-dependent-psums": nest([("i", 8)], Op("psum", "i"), Op("psum", "i")),
    "combine-all-reduces-and-dependent-pmaxes-over-tuples": nest(
        MESH_2X4, Op("pmax", ("data", "model")), Op("pmax", ("data", "model")), dtype="int32"
    ),
    # 5e2a0db: sink-gathers moved all_gather(x, 'i') below '+ axis_index('i')' as if the
    # index were the same on every device: each block got its source's index.
    "sink-gathers-and-an-axis_index-of-the-gathered-axis": nest(
        [("i", 8)], Op("all_gather", "i"), Op("axis_index", "i")
    ),
    "sink-gathers-and-an-axis_index-over-a-tuple": nest(
        [("i", 1), ("j", 2), ("k", 4)], Op("all_gather", ("j",)), Op("axis_index", ("i", "j"))
    ),
}


@pytest.mark.parametrize("program", REGRESSIONS.values(), ids=REGRESSIONS.keys())
def test_fixed_pmapc_bug(program: Program, pmapc_process: ChildProcess):
    check_program(program, pmapc_process)
