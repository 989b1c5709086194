"""Maps of one structure share their per-device program (lowering/structure.py).

A sweep makes programs that differ in a float constant: each is a new function
to `jax.jit`, but pmapc compiles the per-device program of the first only, and
feeds the others' float literals to it as constants. Every value here is checked
against numpy; what was shared is read from the counters of
`embed.SHARED_PROGRAMS`.
"""

from __future__ import annotations

import dataclasses
from functools import partial
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import pmapc
from pmapc import ir
from pmapc.compiler import embed
from pmapc.lowering import primitives, structure

# Captured constants trace as literals or as constants (conftest.jaxpr_constants).
pytestmark = pytest.mark.usefixtures("jaxpr_constants")

X = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)


@dataclasses.dataclass
class Compiled:
    """How many programs pmapc compiled and reused while a block ran."""

    misses: int = 0
    hits: int = 0


class counting:
    """Count the compilations and reuses of `embed.SHARED_PROGRAMS` in a `with` block."""

    def __enter__(self) -> Compiled:
        self.start = (embed.SHARED_PROGRAMS.misses, embed.SHARED_PROGRAMS.hits)
        self.counts = Compiled()
        return self.counts

    def __exit__(self, *exc) -> None:
        self.counts.misses = embed.SHARED_PROGRAMS.misses - self.start[0]
        self.counts.hits = embed.SHARED_PROGRAMS.hits - self.start[1]


def scaled_psum(scale):
    """A new 2x4 program: the psum over 'model' of the input times `scale`."""

    @partial(pmapc.pmap, axis_name="data")
    def step(x):
        return pmapc.pmap(lambda y: jax.lax.psum(y * scale, "model"), axis_name="model")(x)

    return step


def scaled_psum_of(x, scale) -> np.ndarray:
    return np.broadcast_to((x * scale).sum(axis=1, keepdims=True), x.shape)


def test_a_sweep_compiles_one_program():
    with counting() as compiled:
        for scale in (0.5, 2.0, -3.25):
            np.testing.assert_allclose(
                np.asarray(scaled_psum(scale)(X)), scaled_psum_of(X, scale), rtol=1e-6
            )
    assert (compiled.misses, compiled.hits) == (1, 2)


def test_literals_of_every_body_are_fed():
    """Literals of the outer body and of the inner one, and one used twice."""

    def program(a, b):
        @partial(pmapc.pmap, axis_name="data")
        def step(x):
            inner = pmapc.pmap(lambda y: jax.lax.psum(y * a, "model") + a, axis_name="model")
            return inner(x) * b - b

        return step

    def expected(a, b):
        return (scaled_psum_of(X, a) + a) * b - b

    with counting() as compiled:
        for a, b in ((2.0, 3.0), (-1.5, 0.25)):
            np.testing.assert_allclose(np.asarray(program(a, b)(X)), expected(a, b), rtol=1e-6)
    assert (compiled.misses, compiled.hits) == (1, 1)


def test_a_literal_value_used_again_is_one_argument():
    """Each distinct literal (abstract value and bits) is hoisted once, however many
    equations of however many bodies read it (a learning rate, once a parameter
    array): programs in which two literals are equal share a structure of their
    own, and -0.0 is not 0.0."""

    def program(a, b):
        @partial(pmapc.pmap, axis_name="data")
        def step(x):
            inner = pmapc.pmap(lambda y: jax.lax.psum(y * a, "model") * b, axis_name="model")
            return inner(x) * a + b

        return step

    def expected(a, b):
        return scaled_psum_of(X, a) * b * a + b

    closed = jax.make_jaxpr(program(0.5, 0.5))(X)
    (eqn,) = [e for e in closed.eqns if e.primitive is primitives.map_p]
    assert len(structure.shared_map(eqn.params).constants) == 1
    with counting() as compiled:
        for a, b in ((0.5, 0.5), (2.0, 2.0), (0.5, 3.0), (-1.5, 0.25), (0.0, -0.0)):
            np.testing.assert_allclose(np.asarray(program(a, b)(X)), expected(a, b), rtol=1e-6)
    assert (compiled.misses, compiled.hits) == (2, 3)


def test_integer_literals_are_part_of_the_structure():
    """An integer literal indexes or sizes (pmapc's passes read it as a constant):
    programs that differ in one are compiled each."""

    def program(k):
        @partial(pmapc.pmap, axis_name="data")
        def step(x):
            return pmapc.pmap(lambda y: jax.lax.psum(y + k, "model"), axis_name="model")(x)

        return step

    x = np.arange(2 * 4 * 3, dtype=np.int32).reshape(2, 4, 3)
    with counting() as compiled:
        for k in (1, 2):
            want = np.broadcast_to((x + k).sum(axis=1, keepdims=True), x.shape)
            np.testing.assert_array_equal(np.asarray(program(k)(x)), want)
    assert (compiled.misses, compiled.hits) == (2, 0)


def test_literals_inside_a_jit_of_the_body_are_part_of_the_structure():
    def program(scale):
        scaled = jax.jit(lambda v: v * scale)

        @partial(pmapc.pmap, axis_name="data")
        def step(x):
            return pmapc.pmap(lambda y: jax.lax.psum(scaled(y), "model"), axis_name="model")(x)

        return step

    with counting() as compiled:
        for scale in (2.0, 3.0):
            np.testing.assert_allclose(
                np.asarray(program(scale)(X)), scaled_psum_of(X, scale), rtol=1e-6
            )
    assert (compiled.misses, compiled.hits) == (2, 0)


def test_half_precision_literals():
    x = X.astype(np.float16) / 8

    def program(scale):
        return pmapc.pmap(pmapc.pmap(lambda y: y * scale + 1.0), axis_name="data")

    with counting() as compiled:
        for scale in (0.5, 1.5):
            out = np.asarray(program(scale)(x))
            assert out.dtype == np.float16
            np.testing.assert_allclose(out, x * np.float16(scale) + 1, rtol=1e-3)
    assert (compiled.misses, compiled.hits) == (1, 1)


def test_a_gradient_sweep():
    """The transposed map of each gradient is shared too."""

    def gradient(scale):
        def loss(x):
            return (scaled_psum(scale)(x) ** 2).sum()

        return np.asarray(jax.jit(jax.grad(loss))(X))

    for scale in (1.0, 2.0):
        with counting() as compiled:
            # d/dx of the sum of (scale * psum_model(x))^2: each of a row's 4 model
            # positions gets 2 * scale^2 * (the row's sum over model), 4 times.
            want = np.broadcast_to(8 * scale**2 * X.sum(axis=1, keepdims=True), X.shape)
            np.testing.assert_allclose(gradient(scale), want, rtol=1e-5)
    # The second gradient's maps, forward and transposed, were the first's.
    assert (compiled.misses, compiled.hits) == (0, 2)


def test_a_program_written_on_another_line_is_compiled_for_its_locations():
    """Where a program was written is part of its structure: its ops' locations
    (which XLA's metadata and profiles show) name its own lines."""
    bodies = (  # one structure (and one name), written on two lines
        lambda y: y * 2.0,
        lambda y: y * 2.0,
    )
    with counting() as compiled:
        lowered = [jax.jit(pmapc.pmap(pmapc.pmap(f), axis_name="data")).lower(X) for f in bodies]
    texts = [each.as_text(debug_info=True) for each in lowered]
    assert (compiled.misses, compiled.hits) == (2, 0)
    lines = [body.__code__.co_firstlineno for body in bodies]
    name = Path(__file__).name
    for text, line, other in zip(texts, lines, reversed(lines)):
        assert f'{name}":{line}' in text
        assert f'{name}":{other}' not in text


def test_programs_with_callbacks_are_not_kept():
    """What a host callback calls belongs to its function: such a program is
    compiled for each function, and kept by none."""

    def program(scale):
        def body(y):
            doubled = jax.pure_callback(
                lambda v: np.asarray(v) * 2, jax.ShapeDtypeStruct(y.shape, y.dtype), y
            )
            return doubled * scale

        return pmapc.pmap(pmapc.pmap(body), axis_name="data")

    kept = len(embed.SHARED_PROGRAMS.cache_keys())
    with counting() as compiled:
        for scale in (1.0, 3.0):
            np.testing.assert_allclose(np.asarray(program(scale)(X)), X * 2 * scale, rtol=1e-6)
    assert (compiled.misses, compiled.hits) == (2, 0)
    assert len(embed.SHARED_PROGRAMS.cache_keys()) == kept


def test_a_custom_derivatives_rules_are_not_part_of_the_structure():
    """`jax.nn.relu` is a `custom_jvp`, whose rule each trace makes anew; the lowering
    reads only its primal jaxpr (`jax_structure.lowered_params`), so a sweep of
    programs around it shares one program, each getting its own numbers."""

    def program(scale):
        return pmapc.pmap(pmapc.pmap(lambda y: jax.nn.relu(y - 10.0) * scale), axis_name="data")

    with counting() as compiled:
        for scale in (1.0, -2.0):
            np.testing.assert_allclose(
                np.asarray(program(scale)(X)), np.maximum(X - 10, 0) * scale, rtol=1e-6
            )
    assert (compiled.misses, compiled.hits) == (1, 1)


def test_a_parameter_compared_by_identity_makes_the_structure_its_own():
    """A remat's policy is a function, compared by identity: programs whose policies
    differ do not share a program (each is checked against numpy)."""

    def program(policy):
        body = jax.checkpoint(lambda y: jnp.sin(y) * 2.0, policy=policy)
        return pmapc.pmap(pmapc.pmap(body), axis_name="data")

    policies = (jax.checkpoint_policies.nothing_saveable, jax.checkpoint_policies.dots_saveable)
    with counting() as compiled:
        for policy in policies:
            np.testing.assert_allclose(np.asarray(program(policy)(X)), np.sin(X) * 2, rtol=1e-6)
    assert (compiled.misses, compiled.hits) == (2, 0)


def test_a_gathered_result_scaled_by_a_literal_is_returned_split():
    """sink-gathers moves the inner map's gather below a multiply by a float literal,
    which the program takes as a scalar argument: nothing is gathered."""

    def program(scale):
        @partial(pmapc.pmap, axis_name="data")
        def step(x):
            return pmapc.pmap(lambda y: y + 1.0, axis_name="model")(x) * scale

        return step

    with counting() as compiled:
        for scale in (0.5, 4.0):
            f = program(scale)
            np.testing.assert_allclose(np.asarray(f(X)), (X + 1) * scale, rtol=1e-6)
            hlo = jax.jit(f).lower(X).compile().as_text()
            assert "all-gather" not in hlo
    assert compiled.misses == 1


@dataclasses.dataclass(frozen=True)
class _Program:
    name: str
    host_callbacks: tuple = ()


def test_the_kept_programs_are_bounded():
    programs = embed.SharedPrograms(2)
    made = []

    def compiling(name):
        def compile():
            made.append(name)
            return _Program(name)

        return compile

    for name in ("a", "b", "a", "c", "a", "b"):
        assert programs.get((name,), compiling(name)).name == name
    # "b" went when "c" came (the least recently used), and came back.
    assert made == ["a", "b", "c", "b"]
    assert programs.cache_keys() == [("a",), ("b",)]


def test_jax_clear_caches_clears_them():
    np.asarray(scaled_psum(1.0)(X))
    assert embed.SHARED_PROGRAMS.cache_keys()
    jax.clear_caches()
    assert embed.SHARED_PROGRAMS.cache_keys() == []


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.bfloat16])
def test_weak_literals_keep_the_operand_dtype(dtype):
    x = jnp.asarray(X, dtype=dtype)

    def program(scale):
        return pmapc.pmap(pmapc.pmap(lambda y: y * scale), axis_name="data")

    for scale in (0.5, 0.25):
        out = program(scale)(x)
        assert out.dtype == dtype
        np.testing.assert_allclose(
            np.asarray(out, dtype=np.float32), np.asarray(x, dtype=np.float32) * scale
        )


def test_two_maps_in_one_jit_embed_their_functions_under_names_of_their_own():
    """Each map's per-device `main` becomes the body of its manual computation; its
    other functions (here a jitted helper's) move into JAX's module, each map's
    under a prefix of its own, so two maps in one function do not clash."""

    def helper(v):
        return jnp.sin(v) * 2.0

    def nest(scale):
        @partial(pmapc.pmap, axis_name="data")
        def step(x):
            body = lambda y: jax.lax.psum(jax.jit(helper)(y) * scale, "model")  # noqa: E731
            return pmapc.pmap(body, axis_name="model")(x)

        return step

    first, second = nest(0.5), nest(3)  # an integer scale: a structure of its own

    def both(x):
        return first(x), second(x + 1)

    lowered = jax.jit(both).lower(X)
    module = lowered.compiler_ir("stablehlo")
    callees = sorted(ir.callee_of(op) for op in ir.walk(module.operation) if op.name == "func.call")
    assert len(callees) == 2 and callees[0] != callees[1], callees
    assert all(name in ir.functions(module) for name in callees)
    assert len([op for op in ir.walk(module.operation) if op.name == "sdy.manual_computation"]) == 2
    got_first, got_second = lowered.compile()(X)
    want = lambda x, scale: np.broadcast_to(  # noqa: E731
        (np.sin(x) * 2.0 * scale).sum(1, keepdims=True), x.shape
    )
    np.testing.assert_allclose(np.asarray(got_first), want(X, 0.5), rtol=1e-5)
    np.testing.assert_allclose(np.asarray(got_second), want(X + 1, 3), rtol=1e-5)


class CountedSymbols(dict):
    """A symbol table (names in it) that counts the names looked up."""

    lookups = 0

    def __contains__(self, name) -> bool:
        self.lookups += 1
        return super().__contains__(name)


def test_each_embedded_program_takes_the_next_prefix_of_its_module():
    """`embed._fresh_prefix` starts where the last scan of the same module ended: a
    prefix a program, found in one lookup a name, past a name JAX's module already
    has; another module starts at 0."""
    target = ir.parse_module("module {}", ir.make_context())
    symbols = CountedSymbols({"pmapc2_h": None})
    prefixes = []
    for names in (["f"], ["g"], ["h"], ["f", "h"]):
        prefix = embed._fresh_prefix(target, symbols, names)
        symbols.update(dict.fromkeys(prefix + name for name in names))
        prefixes.append(prefix)
    assert prefixes == ["pmapc0_", "pmapc1_", "pmapc3_", "pmapc4_"]
    assert symbols.lookups == 6  # f, g, h twice (pmapc2_h is JAX's), f and h
    other = ir.parse_module("module {}", ir.make_context())
    assert embed._fresh_prefix(other, CountedSymbols(), ["g"]) == "pmapc0_"


def test_a_shared_programs_literals_are_constants_of_its_embedded_program():
    """Each program of a sweep embeds the shared per-device program with its own
    literals as constants (`embed.Literals`), where XLA sees them as it sees JAX's:
    in the body of the manual computation, which takes the blocks alone and calls
    no function, and -0.0 keeps its sign."""
    embed.SHARED_PROGRAMS.cache_clear()  # no program of this structure kept yet
    with counting() as compiled:
        for scale in (0.5, -0.0):
            lowered = jax.jit(scaled_psum(scale)).lower(X)
            module = lowered.compiler_ir("stablehlo")
            assert not [op for op in ir.walk(module.operation) if op.name == "func.call"]
            (manual,) = [
                op for op in ir.walk(module.operation) if op.name == "sdy.manual_computation"
            ]
            assert len(manual.regions[0].blocks[0].arguments) == 1
            constants = [
                ir.as_dense_values(op.attributes["value"])
                for op in ir.walk(manual)
                if op.name == "stablehlo.constant"
            ]
            assert any(
                np.copysign(1.0, v[0]) == np.copysign(1.0, scale) and v == [scale]
                for v in constants
            ), constants
            np.testing.assert_array_equal(
                np.asarray(lowered.compile()(X)), scaled_psum_of(X, scale)
            )
    assert (compiled.misses, compiled.hits) == (1, 1)


def test_a_program_compiled_in_the_lowering_is_embedded_as_it_stands(monkeypatch):
    """A new structure's per-device module, compiled in the lowering's context, is
    embedded without its bytecode being read back; the next program of the
    structure reads the kept program's bytecode. Both run as numpy says."""
    read = []
    parse_into = ir.parse_into
    monkeypatch.setattr(ir, "parse_into", lambda *args: read.append(1) or parse_into(*args))
    embed.SHARED_PROGRAMS.cache_clear()
    with counting() as compiled:
        first = jax.jit(scaled_psum(0.25))(X)
        assert read == []
        second = jax.jit(scaled_psum(4.0))(X + 1)
        assert read == [1]
    assert (compiled.misses, compiled.hits) == (1, 1)
    np.testing.assert_allclose(np.asarray(first), scaled_psum_of(X, 0.25), rtol=1e-6)
    np.testing.assert_allclose(np.asarray(second), scaled_psum_of(X + 1, 4.0), rtol=1e-6)
