"""The communication plan (`compiler/plan.py`, `pmapc plan`) against XLA's own HLO.

The bytes of every benchmark workload's plan must equal what
`benchmarks/hlo_stats.py` reads from the optimized HLO XLA compiled for the same
program, and the semantic minimum each workload states; groups and loop counts
are checked against numpy and the loop bounds written in the program.
"""

from __future__ import annotations

import pathlib
import sys
import xml.etree.ElementTree as ElementTree

import jax
import numpy as np
import pytest
from jax import lax

import pmapc
from pmapc.mesh import Mesh, replica_groups_for

BENCHMARKS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import hlo_stats  # noqa: E402
import workloads  # noqa: E402

WORKLOADS = [
    ("W1 2x4", lambda: workloads.mlp(2, 4)),
    ("W1 4x2", lambda: workloads.mlp(4, 2)),
    ("W2 sum", lambda: workloads.unshard("sum", per_device=1 << 12)),
    ("W2 scale", lambda: workloads.unshard("scale", per_device=1 << 12)),
    ("W3", lambda: workloads.latency_loop(trips=10)),
]


FORMS = [("replicas", "dense"), ("partitions", "named"), ("partitions", "dense")]


@pytest.mark.parametrize(("target", "replica_groups"), FORMS, ids=["-".join(f) for f in FORMS])
@pytest.mark.parametrize(
    "build", [build for _, build in WORKLOADS], ids=[name for name, _ in WORKLOADS]
)
def test_plan_bytes_match_xla_hlo_and_the_workload_minimum(build, target, replica_groups):
    workload = build()
    lowered = pmapc.lower(
        workload.pmapc_fn, *workload.pmapc_args, target=target, replica_groups=replica_groups
    )
    plan = lowered.plan()
    hlo = lowered.compile().as_text()
    devices = workload.mesh_shape[0] * workload.mesh_shape[1]
    stats = hlo_stats.collective_stats(hlo, devices)
    totals = plan.totals()
    assert totals["sent"] == pytest.approx(stats.total_bytes, rel=1e-9)
    assert totals["minimum"] == pytest.approx(sum(size for _, size in workload.minimum), rel=1e-9)
    executions = sum(stats.dynamic_count.values())
    assert totals["collectives"] >= executions  # XLA may combine, never adds


def nested_2x4(body):
    return pmapc.pmap(pmapc.pmap(body, "model"), "data")


X = np.zeros((2, 4, 16), np.float32)
MESH = Mesh(("data", "model"), (2, 4))


def test_rows_name_axes_groups_and_source_lines():
    def body(v):
        a = lax.psum(v, "model")
        b = lax.all_gather(v, ("model", "data"))
        c = lax.ppermute(v, "model", [(0, 1), (1, 2)])
        return a + c, b

    plan = pmapc.lower(nested_2x4(body), X).plan()
    ops = [(step.op, step.axes) for step in plan.steps]
    assert ops == [
        ("all_reduce", ("model",)),
        ("all_gather", ("model", "data")),
        ("collective_permute", ("model",)),
    ]
    np.testing.assert_array_equal(plan.steps[1].groups, replica_groups_for(MESH, ("model", "data")))
    pairs = {(int(s), int(t)) for s, t in plan.steps[2].groups}
    assert pairs == {(0, 1), (1, 2), (4, 5), (5, 6)}
    lines = [step.location.line for step in plan.steps]
    first = test_rows_name_axes_groups_and_source_lines.__code__.co_firstlineno
    assert lines == [first + 2, first + 3, first + 4]
    assert all(step.location.file == __file__ for step in plan.steps)
    # Bytes by the cost model: 16 f32 = 64 B over groups of 4, 8 and pairs.
    assert [step.sent() for step in plan.steps] == [2 * 3 / 4 * 64, 7 / 8 * 8 * 64, 64]


def test_index_groups_have_no_axes():
    plan = pmapc.lower(
        nested_2x4(lambda v: lax.psum(v, "model", axis_index_groups=[[0, 1], [2, 3]])), X
    ).plan()
    (step,) = plan.steps
    assert step.axes is None
    np.testing.assert_array_equal(step.groups, [[0, 1], [2, 3], [4, 5], [6, 7]])
    assert "(groups)" in plan.table()


@pytest.mark.parametrize("start, stop", [(0, 100), (3, 10), (2, 3)])
def test_loops_with_constant_bounds_count_each_trip(start, stop):
    def body(v):
        return lax.fori_loop(start, stop, lambda i, c: lax.psum(c, "data") * 0.5, v)

    (step,) = pmapc.lower(nested_2x4(body), X).plan().steps
    assert (step.executions, step.loop_unknown) == (stop - start, False)


def test_loops_with_a_data_dependent_bound_are_counted_once_and_marked():
    def body(v):
        return lax.while_loop(lambda c: c.sum() < 100.0, lambda c: lax.psum(c, "model") + 1, v)

    plan = pmapc.lower(nested_2x4(body), X).plan()
    (step,) = plan.steps
    assert (step.executions, step.loop_unknown) == (1, True)
    assert "trip count is unknown" in plan.table()


def test_table_rows_and_totals():
    plan = pmapc.lower(nested_2x4(lambda v: lax.psum(v, "model") + lax.psum(v, "data")), X).plan()
    lines = plan.table().splitlines()
    assert lines[0] == "mesh data=2xmodel=4 (8 devices); bytes per device per execution"
    assert lines[1].split() == [
        "#",
        "op",
        "axes",
        "groups",
        "per",
        "run",
        "sent",
        "received",
        "minimum",
        "source",
    ]
    rows = [line.split() for line in lines[2:4]]
    assert [row[:5] for row in rows] == [
        ["1", "all_reduce", "model", "2", "x"],
        ["2", "all_reduce", "data", "4", "x"],
    ]
    # 16 f32 = 64 B: 2 * 3/4 * 64 over 'model' (4) plus 2 * 1/2 * 64 over 'data' (2).
    assert lines[4] == (
        "per run: 2 collectives, sent 160 B, received 160 B, minimum 160 B per device"
    )


def test_host_callbacks_are_listed_as_round_trips():
    def body(v):
        jax.debug.callback(lambda value: None, v)  # 16 f32 to the host
        total = lax.psum(v, "model")
        shape = jax.ShapeDtypeStruct((), v.dtype)
        return jax.pure_callback(lambda a: a[0], shape, total)  # 16 f32 there, 1 back

    plan = pmapc.lower(nested_2x4(body), X).plan()
    assert [step.op for step in plan.steps] == ["all_reduce"]
    assert [(call.to_host, call.from_host) for call in plan.host_calls] == [(64, 0), (64, 4)]
    assert plan.totals()["host round-trips"] == 2
    lines = plan.table().splitlines()
    assert lines[-3] == "host round-trips per run: 2, every device to the Python process"
    assert lines[-2].endswith(": 1 per run, 64 B to the host, 0 B back")
    assert lines[-1].endswith(": 1 per run, 64 B to the host, 4 B back")
    assert lines[-1].strip().startswith("tests/py/test_plan.py:")


def test_svg_has_one_cell_per_device_per_collective():
    def body(v):
        return lax.psum(v, "model") + lax.ppermute(v, ("data", "model"), [(0, 7), (7, 0)])

    plan = pmapc.lower(nested_2x4(body), X).plan()
    root = ElementTree.fromstring(plan.svg())
    ns = {"svg": "http://www.w3.org/2000/svg"}
    panels = root.findall("svg:g", ns)
    assert [panel.get("data-op") for panel in panels] == ["all_reduce", "collective_permute"]
    for panel, step in zip(panels, plan.steps):
        cells = panel.findall("svg:rect", ns)
        assert sorted(int(cell.get("data-device")) for cell in cells) == list(range(8))
        groups = {int(cell.get("data-device")): int(cell.get("data-group")) for cell in cells}
        if step.op == "all_reduce":
            assert groups == {d: d // 4 for d in range(8)}
    assert len(panels[1].findall("svg:line", ns)) == 2


def test_terminal_picture_letters_groups():
    plan = pmapc.lower(nested_2x4(lambda v: lax.psum(v, "data")), X).plan()
    assert plan.picture().splitlines() == [
        "1 all_reduce over data",
        "    A   B   C   D",
        "    A   B   C   D",
    ]


def test_trip_count_is_read_from_ir_not_text():
    # A loop that counts down is not one the plan knows: counted once, marked.
    def body(v):
        return lax.while_loop(
            lambda c: c[1] > 0, lambda c: (lax.psum(c[0], "data"), c[1] - 1), (v, 5)
        )[0]

    (step,) = pmapc.lower(nested_2x4(body), X).plan().steps
    assert step.loop_unknown
