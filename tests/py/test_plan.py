"""The communication plan (`compiler/plan.py`, `pmapc plan`) against XLA's own HLO.

The bytes of every benchmark workload's plan must equal what
`benchmarks/hlo_stats.py` reads from the optimized HLO XLA compiled for the same
program, and the semantic minimum each workload states; groups and loop counts
are checked against numpy and the loop bounds written in the program. The XLA
side of a compiled program's plan (`compiler/plan_xla.py`) must run every
collective pmapc emits over the same groups and bytes where XLA only
recombined, and say what it did where it did more.
"""

from __future__ import annotations

import functools
import pathlib
import sys
import xml.etree.ElementTree as ElementTree

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import pmapc
from pmapc.compiler import hlo_collectives, plan_xla, xla
from pmapc.compiler.plan import Step
from pmapc.mesh import Mesh, ReplicaGroups, replica_groups_for

BENCHMARKS = pathlib.Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))

import hlo_stats  # noqa: E402
import workloads  # noqa: E402

WORKLOADS = {
    "W1 2x4": lambda: workloads.mlp(2, 4),
    "W1 4x2": lambda: workloads.mlp(4, 2),
    "W2 sum": lambda: workloads.unshard("sum", per_device=1 << 12),
    "W2 scale": lambda: workloads.unshard("scale", per_device=1 << 12),
    "W3": lambda: workloads.latency_loop(trips=10),
}


FORMS = [("replicas", "dense"), ("partitions", "named"), ("partitions", "dense")]


@functools.cache
def compiled_workload(name: str, target: str, replica_groups: str):
    """(the workload, its program compiled in that form): one compilation for the
    tests of both plans."""
    workload = WORKLOADS[name]()
    lowered = pmapc.lower(
        workload.pmapc_fn, *workload.pmapc_args, target=target, replica_groups=replica_groups
    )
    return workload, lowered.compile()


@pytest.mark.parametrize(("target", "replica_groups"), FORMS, ids=["-".join(f) for f in FORMS])
@pytest.mark.parametrize("name", list(WORKLOADS))
def test_plan_bytes_match_xla_hlo_and_the_workload_minimum(name, target, replica_groups):
    workload, compiled = compiled_workload(name, target, replica_groups)
    plan = pmapc.lower(
        workload.pmapc_fn, *workload.pmapc_args, target=target, replica_groups=replica_groups
    ).plan()
    hlo = compiled.as_text()
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
    np.testing.assert_array_equal(
        plan.steps[1].groups.matrix(), replica_groups_for(MESH, ("model", "data"))
    )
    pairs = {(int(s), int(t)) for s, t in plan.steps[2].groups.matrix()}
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
    np.testing.assert_array_equal(step.groups.matrix(), [[0, 1], [2, 3], [4, 5], [6, 7]])
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
    # the loop's condition varies between devices: every device of a 'model' group loops
    # while any continues, so the condition ends in a pmax (predicate-divergent)
    kinds = [(step.op, step.axes, step.executions, step.loop_unknown) for step in plan.steps]
    assert kinds == [("all_reduce", ("model",), 1, True), ("all_reduce", ("model",), 1, True)]
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


# ----------------------------------------------------------------------------
# What XLA runs (Compiled.plan(), compiler/plan_xla.py)


@pytest.mark.parametrize(("target", "replica_groups"), FORMS, ids=["-".join(f) for f in FORMS])
@pytest.mark.parametrize("name", list(WORKLOADS))
def test_xla_runs_every_collective_with_the_same_groups_and_bytes(name, target, replica_groups):
    # The benchmark workloads are ones XLA only recombines: each of its collectives
    # runs pmapc's over the same groups, with their bytes summed.
    _, compiled = compiled_workload(name, target, replica_groups)
    plan = compiled.plan()
    assert plan.xla is not None and plan.xla.unavailable is None
    ours, theirs = plan.totals(), plan.xla.totals()
    assert theirs["sent"] == pytest.approx(ours["sent"], rel=1e-9)
    stats = hlo_stats.collective_stats(compiled.as_text())
    assert theirs["sent"] == pytest.approx(stats.total_bytes, rel=1e-9)
    assert theirs["collectives"] == sum(stats.dynamic_count.values()) <= ours["collectives"]
    for index in range(len(plan.steps)):
        assert len(plan.xla.runs_of(index)) == 1, plan.table()
    for collective in plan.xla.collectives:
        steps = [plan.steps[index] for index in collective.steps]
        assert steps, plan.table()
        assert {step.op for step in steps} == {collective.hlo.kind.replace("-", "_")}
        assert {step.axes for step in steps} == {collective.axes}
        assert {step.executions for step in steps} == {collective.executions}
        assert sum(sum(step.parts) for step in steps) == collective.hlo.payload_bytes


def gradient_step(w1, w2, x):
    def loss(w1, w2):
        out = lax.psum(jnp.tanh(x @ w1) @ w2, "model")
        return jnp.mean(out**2)

    g1, g2 = jax.grad(loss, argnums=(0, 1))(w1, w2)
    g1, g2 = lax.psum((g1, g2), "data")
    return w1 - 0.1 * g1, w2 - 0.1 * g2


GRADIENT_ARGS = (
    np.ones((2, 4, 8, 4), np.float32),
    np.ones((2, 4, 4, 8), np.float32),
    np.ones((2, 4, 3, 8), np.float32),
)


def test_a_gradient_step_shows_pmapcs_four_collectives_as_xlas_three():
    # The partition form splits the variadic psum over 'data' of both gradients;
    # XLA's combiner makes it one all-reduce again.
    lowered = pmapc.lower(nested_2x4(gradient_step), *GRADIENT_ARGS)
    plan = lowered.compile().plan()
    assert lowered.plan().xla is None  # Lowered.plan() is pmapc's alone
    assert plan.xla is not None
    assert [(s.op, s.axes) for s in plan.steps] == [
        ("all_reduce", ("model",)),
        ("all_reduce", ("model",)),
        ("all_reduce", ("data",)),
        ("all_reduce", ("data",)),
    ]
    assert [(c.op, c.axes, c.steps) for c in plan.xla.collectives] == [
        ("all-reduce", ("model",), (0,)),
        ("all-reduce", ("model",), (1,)),
        ("all-reduce", ("data",), (2, 3)),
    ]
    assert (plan.totals()["collectives"], plan.xla.totals()["collectives"]) == (4, 3)
    lines = plan.table().splitlines()
    assert lines[1].split()[-2:] == ["XLA", "runs"]
    assert lines[4].endswith("X3 all-reduce, combined with 4")
    assert lines[5].endswith("X3 all-reduce, combined with 3")
    assert lines[8] == "what XLA runs (the HLO it compiled and scheduled):"
    assert lines[9].split() == ["X", "op", "axes", "groups", "per", "run", "sent", "HLO", "runs"]
    assert lines[12].split()[:2] == ["X3", "all-reduce"]
    assert lines[12].endswith("3, 4 (combined)")
    assert lines[13] == (
        "per run: pmapc emits 4 collectives, sent 544 B; XLA runs 3, sent 544 B per device"
    )


def test_a_collective_xla_removes_runs_as_none():
    plan = pmapc.lower(nested_2x4(lambda v: (lax.psum(v, "model"), v)[1] + 1), X).compile().plan()
    assert plan.xla is not None
    assert plan.xla.collectives == () and plan.xla.cell(0) == "none (removed)"
    assert "what XLA runs (the HLO it compiled and scheduled): no collective" in plan.table()


def test_xla_splits_an_all_to_all_and_promotes_a_bf16_psum_under_the_same_rows():
    def body(v):
        swapped = lax.all_to_all(v.reshape(4, 4), "model", 0, 0)
        return swapped, lax.psum(v.astype(jnp.bfloat16), "data")

    plan = pmapc.lower(nested_2x4(body), X).compile().plan()
    assert plan.xla is not None
    by_step = {index: plan.xla.runs_of(index) for index in range(len(plan.steps))}
    assert all(len(runs) == 1 for runs in by_step.values())
    to_all, promoted = (plan.xla.collectives[by_step[i][0]] for i in (0, 1))
    assert to_all.hlo.element_bytes == (16, 16, 16, 16)  # one piece per device of 'model'
    assert (plan.steps[1].payload, promoted.hlo.payload_bytes) == (32, 64)  # bf16 -> f32


def test_the_plan_says_when_xla_gives_no_hlo(monkeypatch):
    monkeypatch.setattr(xla, "optimized_hlo_text", lambda executable: None)
    plan = pmapc.lower(nested_2x4(lambda v: lax.psum(v, "model")), X).compile().plan()
    assert plan.xla is not None and plan.xla.unavailable == plan_xla.UNAVAILABLE
    table = plan.table()
    assert "XLA runs" not in table.splitlines()[1]
    assert table.splitlines()[-1] == f"what XLA runs: unavailable ({plan_xla.UNAVAILABLE})"


def test_the_adapter_gives_none_where_an_executable_has_no_hlo():
    class NoHlo:
        def hlo_modules(self):
            raise NotImplementedError("not on this plugin")

    assert xla.optimized_hlo_text(NoHlo()) is None
    assert xla.optimized_hlo_text(object()) is None


def step(op, groups, parts):
    groups = ReplicaGroups.of_ids(np.array(groups, dtype=np.int64))
    return Step(op, None, groups, sum(parts), tuple(parts), 1, False, None)


MODEL, DATA = replica_groups_for(MESH, ("model",)), replica_groups_for(MESH, ("data",))
# What XLA:GPU makes of collectives (no GPU here: written by hand as XLA prints them):
# an async all-reduce, one split in two, two all-gathers combined into one async
# pair, a reduce-scatter in an async wrapper, and an all-reduce of XLA's own.
GPU_LIKE = """\
HloModule m, is_scheduled=true, num_partitions=8

%add (a: f32[], b: f32[]) -> f32[] {
  %a = f32[] parameter(0)
  %b = f32[] parameter(1)
  ROOT %sum = f32[] add(%a, %b)
}

%wrapped_reduce_scatter (p: f32[16]) -> f32[4] {
  %p = f32[16]{0} parameter(0)
  ROOT %rs = f32[4]{0} reduce-scatter(%p), channel_id=5, replica_groups=[2,4]<=[8], \
use_global_device_ids=true, dimensions={0}, to_apply=%add
}

ENTRY %main (x: f32[16], y: f32[64]) -> f32[16] {
  %x = f32[16]{0} parameter(0)
  %y = f32[64]{0} parameter(1)
  %ars = f32[16]{0} all-reduce-start(%x), channel_id=1, replica_groups=[2,4]<=[8], \
use_global_device_ids=true, to_apply=%add
  %ard = f32[16]{0} all-reduce-done(%ars)
  %half0 = f32[32]{0} all-reduce(%y), channel_id=2, replica_groups=[4,2]<=[2,4]T(1,0), \
use_global_device_ids=true, to_apply=%add
  %half1 = f32[32]{0} all-reduce(%y), channel_id=3, replica_groups={{0,4},{1,5},{2,6},{3,7}}, \
use_global_device_ids=true, to_apply=%add
  %ags = ((f32[16]{0}, f32[16]{0}), (f32[64]{0}, f32[64]{0})) all-gather-start(%x, %x), \
channel_id=4, replica_groups=mesh['data'=2,'model'=4] {'model'}, dimensions={0}, \
use_global_device_ids=true
  %agd = (f32[64]{0}, f32[64]{0}) all-gather-done(%ags)
  %rss = ((f32[16]{0}), f32[4]{0}) async-start(%x), calls=%wrapped_reduce_scatter
  %rsd = f32[4]{0} async-done(%rss), calls=%wrapped_reduce_scatter
  ROOT %own = f32[16]{0} all-reduce(%ard), channel_id=6, replica_groups={{0,1,2,3,4,5,6,7}}, \
use_global_device_ids=true, to_apply=%add
}
"""


def test_matching_follows_xla_through_async_split_and_combined_collectives():
    steps = [
        step("all_reduce", MODEL, [64]),
        step("all_reduce", DATA, [256]),
        step("all_gather", MODEL, [256]),
        step("all_gather", MODEL, [256]),
        step("reduce_scatter", MODEL, [64]),
    ]
    runs = plan_xla.xla_runs(steps, MESH, GPU_LIKE)
    assert [(c.op, c.hlo.is_async, c.axes, c.steps) for c in runs.collectives] == [
        ("all-reduce-start", True, ("model",), (0,)),
        ("all-reduce", False, ("data",), (1,)),
        ("all-reduce", False, ("data",), (1,)),
        ("all-gather-start", True, ("model",), (2, 3)),
        ("reduce-scatter", True, ("model",), (4,)),
        ("all-reduce", False, ("data", "model"), ()),
    ]
    assert [runs.cell(index) for index in range(len(steps))] == [
        "X1 all-reduce-start async",
        "X2, X3 all-reduce (split)",
        "X4 all-gather-start async, combined with 4",
        "X4 all-gather-start async, combined with 3",
        "X5 reduce-scatter async",
    ]
    sent = [c.sent() for c in runs.collectives]
    assert sent == [2 * 3 / 4 * 64, 128, 128, 3 / 4 * 512, 3 / 4 * 64, 2 * 7 / 8 * 64]
    assert runs.totals() == {"collectives": 6, "sent": sum(sent)}


def test_matching_pairs_equal_pieces_before_aligning_the_rest():
    # Two psums over 'model' of different sizes, which XLA combined in the other order,
    # promoting the second one's 8 B operand to 16 B: each XLA piece finds its own.
    steps = [step("all_reduce", MODEL, [32]), step("all_reduce", MODEL, [64, 8])]
    hlo = [
        hlo_collectives.Collective("b", "all-reduce", "all-reduce", MODEL, (64, 16), "e", False),
        hlo_collectives.Collective("a", "all-reduce", "all-reduce", MODEL, (32,), "e", False),
    ]
    assert plan_xla.match(steps, hlo) == [(1,), (0,)]
