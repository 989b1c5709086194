"""pmapc's work grows linearly with the program: counted, never timed.

Each test compiles one program at two sizes and counts the work done: the
calls of every Python function of pmapc's (cProfile's call counts, the garbage
collector paused: deterministic, whatever the machine's load), and the device
ids enumerated (`replica_groups_for`'s output). A function called 16 times as
often when the program is 4 times as large is a quadratic loop, whatever it
costs today: the test names it.

The sizes: mapped arguments and results, float constants hoisted from a body,
the layers of a training step, the depth of a nest, and the mesh's positions.

A linear pass can still cost too much per op: each pass's calls into the IR adapter
and the rewriter, per op the program grows by, stay under a fixed count
(`ENTRIES_PER_OP`).
"""

from __future__ import annotations

import cProfile
import gc
import pathlib
import pstats
from collections.abc import Callable
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import pmapc
from pmapc import ir
from pmapc import mesh as mesh_math
from pmapc.compiler import pipeline
from pmapc.passes import lower_collectives, manager

# A function whose calls grow by more than this times the program's growth (and that
# is called at least `MIN_CALLS` times at the larger size) grows faster than linearly.
SLACK = 1.3
MIN_CALLS = 40


def call_counts(build: Callable[[], object]) -> dict[tuple[str, int, str], int]:
    """How many times `build()` calls each function (file, line, name), caches cleared
    before it so that nothing an earlier build did is reused."""
    jax.clear_caches()
    gc.collect()
    gc.disable()  # a collection's callbacks run when allocations say, not the program
    profile = cProfile.Profile()
    try:
        profile.enable()
        build()
        profile.disable()
    finally:
        gc.enable()
    stats = pstats.Stats(profile).stats  # pyright: ignore[reportAttributeAccessIssue]
    return {function: entry[1] for function, entry in stats.items()}


PACKAGE = pathlib.Path(pmapc.__file__).resolve().parents[1]  # the checkout: pmapc/, passes/, ...


def is_pmapc_code(file: str) -> bool:
    """Whether `file` is pmapc's own (JAX's tracing, which both systems run, is not;
    nor a generated function, such as a dataclass's `__init__`, whose names collide)."""
    path = pathlib.Path(file)
    return path.is_absolute() and PACKAGE in path.parents and "site-packages" not in path.parts


def faster_than_linear(
    small: Callable[[], object], large: Callable[[], object], growth: float
) -> list[str]:
    """The functions whose calls grow more than `growth` (times SLACK) from `small()`
    to `large()`, each with its two counts; `small()` runs first once (first uses)."""
    small()
    before, after = call_counts(small), call_counts(large)
    found = []
    for function, count in after.items():
        if count < MIN_CALLS or not is_pmapc_code(function[0]):
            continue
        ratio = count / max(before.get(function, 0), 1)
        if ratio > growth * SLACK:
            file, line, name = function
            found.append(f"{name} ({file}:{line}): {before.get(function, 0)} -> {count} calls")
    return sorted(found)


def nest(body: Callable) -> Callable:
    return pmapc.pmap(pmapc.pmap(body, axis_name="model"), axis_name="data")


def blocks(count: int, *shape: int) -> list[np.ndarray]:
    return [np.full((2, 4, *shape), index, np.float32) for index in range(count)]


def lower_arguments(count: int) -> Callable[[], object]:
    """`count` mapped arguments and results, each its own psum."""

    def body(*ys):
        return tuple(lax.psum(y * y, "model") for y in ys)

    args = blocks(count, 3)
    return lambda: pmapc.lower(nest(body), *args)


def test_arguments_and_results():
    assert faster_than_linear(lower_arguments(60), lower_arguments(240), 4) == []


def jit_constants(count: int) -> Callable[[], object]:
    """A chain of `count` psums scaled by float literals, lowered inside `jax.jit`,
    where the literals become the shared program's arguments (lowering/structure.py)."""

    def body(x):
        for index in range(count):
            axis = "data" if index % 2 else "model"
            x = lax.psum(x * (1.0 + index / 1000), axis) + index / 7
        return x

    x = blocks(1, 3)[0]
    return lambda: jax.jit(nest(body)).lower(x)


def test_float_constants_hoisted_into_arguments():
    assert faster_than_linear(jit_constants(40), jit_constants(160), 4) == []


def jit_captured_arrays(count: int) -> Callable[[], object]:
    """A body that adds `count` captured arrays, each of its own values, lowered inside
    `jax.jit`: literals of the body (structure.py keeps them, by value) where
    `jax_use_simplified_jaxpr_constants` is on, constants of its jaxpr where it is off."""
    captured = [jnp.asarray(np.arange(3, dtype=np.float32) + index) for index in range(count)]

    def body(x):
        for index, array in enumerate(captured):
            x = x + array
            if index % 8 == 7:
                x = lax.psum(x, "model")
        return x

    x = blocks(1, 3)[0]
    return lambda: jax.jit(nest(body)).lower(x)


def test_captured_arrays(jaxpr_constants):
    assert faster_than_linear(jit_captured_arrays(40), jit_captured_arrays(160), 4) == []


def training_step(layers: int) -> tuple[Callable, tuple]:
    """A `layers`-deep MLP's SGD step: a psum over 'model' in the loss, a pmean over
    'data' of every gradient; with its arguments."""

    def step(params, x):
        def loss(params):
            hidden = x
            for layer in params:
                hidden = jnp.tanh(hidden @ layer["w"] + layer["b"])
            return jnp.sum(lax.psum(hidden, "model") ** 2)

        grads = lax.pmean(jax.grad(loss)(params), "data")
        return jax.tree.map(lambda p, g: p - 0.01 * g, params, grads)

    params = [{"w": w, "b": b} for w, b in zip(blocks(layers, 4, 4), blocks(layers, 4))]
    return nest(step), (params, blocks(1, 2, 4)[0])


def jit_training_step(layers: int) -> Callable[[], object]:
    function, args = training_step(layers)
    return lambda: jax.jit(function).lower(*args)


def test_training_step_layers():
    assert faster_than_linear(jit_training_step(10), jit_training_step(40), 4) == []


def deep_nest(depth: int) -> Callable[[], object]:
    """A nest of `depth` maps on 8 devices (three axes of 2, the rest of size 1), a psum
    over each axis and one over all, its groups named by mesh axes. The outermost map
    maps the operand; the others pass it on whole (`in_axes=None`), so the program
    grows with the depth only, not the operand's rank."""
    names = tuple(f"a{level}" for level in range(depth))
    sizes = tuple(2 if level < 3 else 1 for level in range(depth))

    def body(v):
        for name in names:
            v = lax.psum(v, name)
        return lax.psum(v, names)

    function = body
    for name, size in reversed(list(zip(names, sizes))[1:]):
        function = pmapc.pmap(function, axis_name=name, in_axes=None, out_axes=None, axis_size=size)
    function = pmapc.pmap(function, axis_name=names[0])
    x = np.ones((sizes[0], 3), np.float32)
    return lambda: pmapc.lower(function, x).plan()


def test_nesting_depth():
    assert faster_than_linear(deep_nest(4), deep_nest(8), 2) == []


class Enumerated:
    """Counts the device ids `replica_groups_for` lists, wherever it is called from."""

    def __init__(self, monkeypatch) -> None:
        self.ids = 0
        original = mesh_math.replica_groups_for

        def counted(*args, **kwargs):
            groups = original(*args, **kwargs)
            self.ids += groups.size
            return groups

        for module in (mesh_math, lower_collectives):  # the modules that call it
            monkeypatch.setattr(module, "replica_groups_for", counted)


def mesh_program(rows: int, columns: int) -> Callable[[], object]:
    def inner(v):
        total = lax.psum(v, "model") + lax.pmean(v, "data")
        return lax.all_gather(total, ("data", "model")).sum(0) + lax.axis_index("model")

    function = partial(pmapc.pmap, axis_name="data")(partial(pmapc.pmap, axis_name="model")(inner))
    x = jax.ShapeDtypeStruct((rows, columns, 4), jnp.float32)
    return lambda: pmapc.lower(function, x).plan().table()


def test_mesh_positions_are_never_listed(monkeypatch):
    """Groups over mesh axes are described by their axes: no pass and no plan lists the
    devices of a 1,048,576 x 4 mesh (nor of a small one), and the work is the same."""
    enumerated = Enumerated(monkeypatch)
    assert faster_than_linear(mesh_program(2, 4), mesh_program(1 << 20, 4), 1) == []
    assert enumerated.ids == 0


def test_permutations_list_their_pairs_once(monkeypatch):
    """A ppermute's pairs are what the IR writes: listed once, linear in the positions."""
    enumerated = Enumerated(monkeypatch)

    def inner(v):
        return lax.ppermute(v, "model", [(0, 1), (1, 0)])

    function = pmapc.pmap(pmapc.pmap(inner, axis_name="model"), axis_name="data")
    x = jax.ShapeDtypeStruct((4096, 2, 4), jnp.float32)
    table = pmapc.lower(function, x).plan().table()
    assert "8192 pairs" in table
    assert enumerated.ids == 8192


# The calls into the IR adapter (pmapc/ir/) and the rewriter that a pass may make for
# each op the program grows by: a look at the op, its operands and uses, a new type.
ENTRIES_PER_OP = 4
ADAPTER = (PACKAGE / "pmapc" / "ir", PACKAGE / "pmapc" / "rewriter.py")


def in_adapter(file: str) -> bool:
    path = pathlib.Path(file)
    return any(path == part or part in path.parents for part in ADAPTER)


def adapter_entries(profile: cProfile.Profile) -> int:
    """The calls of the adapter's functions from outside it (a pass's, a helper's):
    each is one or more calls into jaxlib's MLIR bindings."""
    stats = pstats.Stats(profile).stats  # pyright: ignore[reportAttributeAccessIssue]
    return sum(
        counts[1]
        for function, entry in stats.items()
        if in_adapter(function[0])
        for caller, counts in entry[4].items()
        if not in_adapter(caller[0])
    )


def entries_of_each_pass(function: Callable, args: tuple) -> dict[str, tuple[int, int]]:
    """Each of pmapc's passes of the default pipeline, run on the pmapc IR of
    `function(*args)`: the ops of the module it found, and its adapter entries."""
    text = pmapc.lower(function, *args).as_text("pmapc")
    module = ir.parse_module(text, ir.make_context())
    passes = [p for p in pipeline.default_pipeline() if not isinstance(p, manager.UpstreamPass)]
    found: dict[str, tuple[int, int]] = {}
    window = [len(ir.walk(module.operation)), cProfile.Profile()]

    def after(pass_, _) -> None:
        ops, profile = window
        profile.disable()
        found[pass_.name] = (ops, adapter_entries(profile))
        window[:] = [len(ir.walk(module.operation)), cProfile.Profile()]
        window[1].enable()

    gc.disable()
    try:
        window[1].enable()
        manager.run_passes(module, passes, after_pass=after, verify_each=False)
        window[1].disable()
    finally:
        gc.enable()
    return found


def chain(count: int) -> tuple[Callable, tuple]:
    """`count` psums alternating the axes, each times 0.5 (W4's chain, one literal)."""

    def body(x):
        for index in range(count):
            x = lax.psum(x, "data" if index % 2 == 0 else "model") * 0.5
        return x

    return nest(body), (blocks(1, 8)[0],)


def costly_per_op(small: tuple[Callable, tuple], large: tuple[Callable, tuple]) -> list[str]:
    """The passes whose adapter entries grow by more than `ENTRIES_PER_OP` an op from
    `small` to `large`, each with its entries and ops at both sizes."""
    before, after = entries_of_each_pass(*small), entries_of_each_pass(*large)
    found = []
    for name, (ops, entries) in after.items():
        small_ops, small_entries = before[name]
        per_op = (entries - small_entries) / max(ops - small_ops, 1)
        if per_op > ENTRIES_PER_OP:
            found.append(
                f"{name}: {small_entries} -> {entries} adapter calls for {small_ops} -> {ops} "
                f"ops ({per_op:.1f} an op)"
            )
    return found


def test_each_pass_costs_a_few_adapter_calls_an_op():
    """Each pass's calls into the IR adapter and the rewriter (`ENTRIES_PER_OP`), per op
    a chain of psums or an MLP's layers grow the module by: a pass that moves a
    value down a chain one op at a time, building and erasing an op at each step,
    fails here though its work grows linearly."""
    assert costly_per_op(chain(100), chain(400)) == []
    assert costly_per_op(training_step(5), training_step(20)) == []


def plan_on_hosts(count: int) -> Callable[[], object]:
    """The table of a plan, its bytes by link and its hint, of `count` psums over each
    axis in turn, on stand-ins for 2 hosts of 4 devices (compiler/plan_hosts.py)."""

    class OnHost:
        def __init__(self, host: int) -> None:
            self.process_index, self.slice_index = host, None

    def body(y):
        for index in range(count):
            y = lax.psum(y, "data" if index % 2 else "model") * 0.5
        return y

    devices = [OnHost(host) for host in (0, 0, 0, 0, 1, 1, 1, 1)]
    lowered = nest(body).lower(blocks(1, 3)[0])
    return lambda: lowered.compilation.plan(devices).table()


def test_the_plan_by_host_and_its_hint():
    assert faster_than_linear(plan_on_hosts(50), plan_on_hosts(200), 4) == []
