"""A map's structure as another process reads it (lowering/structure_digest.py): the
digest keys its program in JAX's persistent cache, so it must be the same in every
process that runs the same source, differ wherever the programs differ, and be
refused where a part is known only by its identity in this process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.sharding import AbstractMesh, NamedSharding
from jax.sharding import PartitionSpec as P

import pmapc
from pmapc.lowering import jax_api, jax_structure, primitives, structure, structure_digest

# Captured constants trace as literals or as constants (conftest.jaxpr_constants).
pytestmark = pytest.mark.usefixtures("jaxpr_constants")

X = np.arange(24, dtype=np.float32).reshape(2, 4, 3)


def nest(body):
    return pmapc.pmap(pmapc.pmap(body, axis_name="model"), axis_name="data")


def scaled(y):
    return jax.lax.psum(y * 2.0, "model")


def step(y):
    def loss(w):
        return jnp.mean(jnp.tanh(y @ w) ** 2)

    w = jnp.ones((3, 3), y.dtype)
    return jax.lax.pmean(jax.grad(loss)(w), ("data", "model"))


def rolled(y):
    return jnp.roll(y, 1)  # a jit inside, and an integer literal


def sine(y):
    return jnp.sin(y)


def cosine(y):
    return jnp.cos(y)


def relu(y):
    return jax.nn.relu(y)  # a custom_jvp: its rule, which the structure leaves out


def rematerialized(y):  # a remat's policy: a function
    return jax.checkpoint(jnp.sin, policy=jax.checkpoint_policies.nothing_saveable)(y)


PROGRAMS = {"scaled": scaled, "step": step, "rolled": rolled, "sine": sine, "relu": relu}


def digest(body, x=X) -> str | None:
    """The digest the embedding keys the outermost map of `nest(body)` by."""
    jaxpr = jax.make_jaxpr(nest(body))(x)
    (eqn,) = [e for e in jaxpr.jaxpr.eqns if e.primitive is primitives.map_p]
    params = {name: value for name, value in eqn.params.items() if name != "mesh"}
    shared = structure.shared_map(params)
    assert shared is not None
    return structure_digest.stable_digest((shared.key, jax_structure.trace_context()))


# Each program's digest in a new process, run with a hash seed of its own (the order of
# a set of strings follows their hashes).
OTHER_PROCESS = textwrap.dedent(
    """
    import json, sys
    sys.path.insert(0, sys.argv[1])
    import pmapc
    pmapc.use_host_devices(8)
    import jax
    jax.config.update("jax_use_simplified_jaxpr_constants", sys.argv[2] == "True")
    import test_structure_digest as t
    print(json.dumps({name: t.digest(body) for name, body in t.PROGRAMS.items()}))
    """
)


@pytest.mark.parametrize("seed", ["1", "2"])
def test_another_process_computes_the_same_digest(seed, jaxpr_constants: bool):
    here = {name: digest(body) for name, body in PROGRAMS.items()}
    assert all(here.values())
    done = subprocess.run(
        [sys.executable, "-c", OTHER_PROCESS, os.path.dirname(__file__), str(jaxpr_constants)],
        capture_output=True,
        text=True,
        check=False,
        timeout=300,
        env={**os.environ, "PYTHONHASHSEED": seed},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(done.stdout.splitlines()[-1]) == here


def test_programs_that_differ_have_other_digests():
    def rolled_twice(y):
        return jnp.roll(y, 2)

    digests = [
        digest(scaled),
        digest(sine),
        digest(cosine),
        digest(rolled),
        digest(rolled_twice),
        digest(step),
        digest(sine, X[..., :2]),
        digest(sine, X.astype(np.float16)),
    ]
    assert None not in digests
    assert len(set(digests)) == len(digests)


def test_a_float_literal_is_fed_not_digested():
    """Float literals are hoisted out of the structure (lowering/structure.py): a sweep's
    next learning rate has the digest of the one before."""

    def scale_by(c):
        return lambda y: y * c

    assert digest(scale_by(2.0)) == digest(scale_by(3.0))


def test_the_same_body_on_another_line_has_another_digest():
    """The program's metadata names the user's lines."""
    first = digest(lambda y: jnp.sin(y))
    second = digest(lambda y: jnp.sin(y))
    assert first != second


def test_a_function_among_the_parameters_has_no_digest():
    assert digest(rematerialized) is None


@pytest.mark.parametrize(
    "part",
    [
        lambda: 0,  # a function
        jax_api.Primitive("users_own"),  # a primitive no module of JAX or pmapc defines
        jax.tree_util.tree_structure((1, 2)),  # state in C++, out of Python's sight
        np.array([object()]),  # an array of objects holds their addresses
        object(),  # an object of another package
    ],
    ids=["function", "user-primitive", "treedef", "object-array", "object"],
)
def test_a_part_known_by_its_identity_has_no_digest(part):
    assert structure_digest.stable_digest(("sin", 1, part)) is None


def test_shardings_and_specs_are_read_by_their_fields():
    """JAX keeps a sharding's and a partition spec's state in C++: they are read by the
    fields `jax_structure.native_fields` names, not by the (empty) Python ones."""
    mesh = AbstractMesh((2, 4), ("data", "model"))
    other = AbstractMesh((4, 2), ("data", "model"))
    parts = [
        NamedSharding(mesh, P("data")),
        NamedSharding(mesh, P("model")),
        NamedSharding(mesh, P(None, "data")),
        NamedSharding(other, P("data")),
        P("data"),
        P("data", None),
        P(("data", "model")),
    ]
    digests = [structure_digest.stable_digest(part) for part in parts]
    assert None not in digests
    assert len(set(digests)) == len(digests)


def test_what_a_process_cached_does_not_change_a_digest():
    """Values JAX caches on its objects as they are used (a mesh's cached properties,
    an abstract value's weak-typed twin) are left out: a restarted process has
    another history."""
    mesh = AbstractMesh((2, 4), ("data", "model"))
    aval = jax_api.ShapedArray((3,), np.float32, weak_type=True)
    before = structure_digest.stable_digest((mesh, aval))
    _ = mesh.shape, mesh.are_all_axes_explicit, mesh._any_axis_manual
    _ = aval.strip_weak_type()
    assert structure_digest.stable_digest((mesh, aval)) == before


def test_sets_and_dicts_read_the_same_in_any_order():
    first = structure_digest.stable_digest((frozenset({"a", "b", "c"}), {"x": 1, "y": 2}))
    second = structure_digest.stable_digest((frozenset({"c", "b", "a"}), {"y": 2, "x": 1}))
    assert first == second


def test_values_of_other_types_read_apart():
    values = [0, False, 0.0, -0.0, "0", b"0", None, (0,), [0], np.float32(0), np.int32(0)]
    digests = [structure_digest.stable_digest(v) for v in values]
    assert len(set(digests)) == len(values)


def test_each_class_is_decided_once(monkeypatch):
    """How an object is encoded is decided by its class, once per process (deciding it
    by each object was most of a digest's cost): a structure of many abstract values
    and meshes decides two classes, then none."""
    decided = []
    encoding_of = structure_digest._encoding_of
    monkeypatch.setattr(structure_digest, "_ENCODINGS", {})
    monkeypatch.setattr(
        structure_digest, "_encoding_of", lambda cls: decided.append(cls) or encoding_of(cls)
    )
    meshes = [AbstractMesh((2, n), ("data", "model")) for n in range(1, 51)]
    avals = [jax_api.ShapedArray((n,), np.float32) for n in range(1, 51)]
    digest = structure_digest.stable_digest((meshes, avals))
    assert digest is not None
    assert {type(meshes[0]), type(avals[0])} <= set(decided)
    assert len(decided) == len(set(decided)) < 10
    decided.clear()
    assert structure_digest.stable_digest((meshes[::-1], avals)) not in (None, digest)
    assert decided == []
