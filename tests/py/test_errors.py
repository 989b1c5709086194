"""pmapc's errors, three ways.

- The catalog of bad inputs: one test each, checking the exception type (or exit
  code) and the key words of the message (the axis, shape or count at fault and
  the fix) and, for the Python API, the user's own file and line.
- The mistakes JAX 0.4.30's `jax.pmap` caught, against the messages recorded from
  JAX 0.4.30 (goldens/jax0430_messages.json, scripts/record_messages.py): the same
  builtin class, and a message that starts with JAX 0.4.30's first line (then goes
  on with pmapc's explanation), so code that matched on `jax.pmap`'s message still
  matches.
- Tracebacks: a mistake in a user's script shows the user's frames and none of
  pmapc's, as JAX leaves out its own ("JAX has removed its internal frames"), and
  `JAX_TRACEBACK_FILTERING=off` shows them all again. Each script runs as a user
  runs it, `python script.py`, in a process of its own.
"""

from __future__ import annotations

import builtins
import inspect
import json
import os
import pathlib
import re
import subprocess
import sys
import types

import jax
import numpy as np
import pytest
from support.message_cases import cases

import pmapc
import pmapc.compiler
import pmapc.lowering
import pmapc.passes
import pmapc.tools
from pmapc.errors import Category, Diagnostic, DiagnosticError, PmapcError, SourceLoc, typed_error
from pmapc.tools.main import main

THIS_FILE = os.path.abspath(__file__)
X = np.ones((2, 4, 8), np.float32)


def raises_at_line(error_type, call, line, *keywords):
    """Run `call`; check the error's type, that it names THIS_FILE:line, and the keywords."""
    with pytest.raises(error_type) as info:
        call()
    message = str(info.value)
    assert f"{THIS_FILE}:{line}" in message, message
    for keyword in keywords:
        assert keyword in message, f"{keyword!r} not in {message!r}"
    return message


def raises_at_call(error_type, call, *keywords):
    """`raises_at_line` at the line of `call`, a lambda that calls the user's function."""
    return raises_at_line(error_type, call, call.__code__.co_firstlineno, *keywords)


def nest(inner_body, **inner_kw):
    def outer(v):
        return pmapc.pmap(inner_body, axis_name="model", **inner_kw)(v)

    return pmapc.pmap(outer, axis_name="data")


# -- axes ---------------------------------------------------------------------


def test_unbound_axis():
    def body(y):
        return jax.lax.psum(y, "nope")

    line = inspect.getsourcelines(body)[1] + 1
    raises_at_line(
        pmapc.AxisError, lambda: nest(body)(X), line, "'nope'", "bound axes are 'data', 'model'"
    )


def test_misspelled_axis_gets_the_bound_axis_it_is_closest_to():
    def body(y):
        return jax.lax.psum(y, "modle")

    line = inspect.getsourcelines(body)[1] + 1
    raises_at_line(
        pmapc.AxisError,
        lambda: nest(body)(X),
        line,
        "unbound axis name: modle.",  # JAX 0.4.30's wording first
        "axis 'modle' is not bound here; bound axes are 'data', 'model'; did you mean 'model'?",
    )


def test_unbound_axis_like_no_bound_one_gets_no_suggestion():
    message = raises_at_call(pmapc.AxisError, lambda: nest(lambda y: jax.lax.psum(y, "nope"))(X))
    assert "did you mean" not in message


def test_axis_named_twice():
    def body(y):
        return jax.lax.psum(y, ("data", "data"))

    # JAX raises a ValueError for a repeated axis; pmapc's ArgumentError is one.
    line = inspect.getsourcelines(body)[1] + 1
    raises_at_line(
        ValueError,
        lambda: nest(body)(X),
        line,
        "axis 'data' is named twice in ('data', 'data')",
        "name each axis once",
    )


# -- mapped dimensions, in_axes and out_axes -------------------------------------


def test_mapped_dimensions_disagree():
    f = pmapc.pmap(lambda a, b: a + b.sum(), axis_name="data")
    raises_at_call(
        pmapc.ShapeError,
        lambda: f(X, np.ones((3, 2), np.float32)),
        "pmap got inconsistent sizes for array axes to be mapped",
        "one axis had size 2: axis 0 of argument a of type float32[2,4,8]",
        "one axis had size 3: axis 0 of argument b of type float32[3,2]",
        "'data': every mapped dimension must have the same size, got sizes 2, 3; slice or pad "
        "the arguments to one size, or pass one unmapped with None in in_axes",
    )


def test_axis_size_disagrees_with_arguments():
    f = pmapc.pmap(lambda a: a, axis_name="data", axis_size=3)
    raises_at_call(
        pmapc.ShapeError,
        lambda: f(X),
        "Specified axis_size 3 doesn't match received axis_size 2",
        "axis_size=3, but the mapped dimensions have size 2",
    )


def test_in_axes_out_of_range():
    line = inspect.getsourcelines(nest)[1] + 2  # where nest() calls the inner map
    raises_at_line(
        pmapc.ShapeError,
        lambda: nest(lambda y: y, in_axes=3)(X),
        line,
        "in_axes entry 3",
        "rank 2",
        "-2..1",
    )


def test_out_axes_out_of_range():
    line = inspect.getsourcelines(nest)[1] + 2
    raises_at_line(
        pmapc.ShapeError,
        lambda: nest(lambda y: y, out_axes=5)(X),
        line,
        "out_axes entry 5",
        "-2..1",
    )


def test_in_axes_not_matching_argument_tree():
    f = pmapc.pmap(lambda a, b: a, axis_name="data", in_axes=(0, {"k": 0}))
    raises_at_call(
        pmapc.ShapeError, lambda: f(X, X), "in_axes", "does not match", "PyTreeDef((*, *))"
    )


def test_in_axes_count_not_matching_arguments():
    f = pmapc.pmap(lambda a, b: a, axis_name="data", in_axes=(0, 0, 0))
    raises_at_call(pmapc.ShapeError, lambda: f(X, X), "3 entries for 2")


def test_no_mapped_argument_and_no_axis_size():
    f = pmapc.pmap(lambda a: a, axis_name="data", in_axes=None)
    raises_at_call(
        pmapc.ShapeError,
        lambda: f(X),
        "pass axis_size=N",
        "in_axes is None for every argument",
    )


# -- devices ----------------------------------------------------------------------


def test_more_devices_than_exist():
    f = pmapc.pmap(lambda x: pmapc.pmap(lambda y: y, axis_name="j")(x), axis_name="i")
    raises_at_call(
        pmapc.DeviceError,
        lambda: f(np.ones((4, 4), np.float32)),
        "needs 16 devices",
        "only 8",
        "use_host_devices(16)",
    )


def test_devices_with_duplicates_that_do_not_fold_row_major():
    # a device listed for consecutive positions folds them onto it (test_fold.py)
    d0, d1 = jax.devices()[:2]
    inner = pmapc.pmap(lambda a: a, axis_name="model")
    f = pmapc.pmap(inner, axis_name="data", devices=[d0, d1, d0, d1])
    raises_at_call(
        pmapc.DeviceError,
        lambda: f(np.ones((2, 2), np.float32)),
        "in runs of [1, 1, 1, 1]",
        "consecutive positions, row-major",
    )


def test_empty_devices():
    f = pmapc.pmap(lambda a: a, axis_name="data", devices=[])
    raises_at_call(pmapc.DeviceError, lambda: f(X), "devices= is empty", "needs 2 devices")


def test_devices_of_mixed_kinds():
    fake_gpu = types.SimpleNamespace(id=99, platform="gpu")
    f = pmapc.pmap(lambda a: a, axis_name="data", devices=[jax.devices()[0], fake_gpu])
    raises_at_call(pmapc.DeviceError, lambda: f(X), "mixes platforms", "one kind")


def test_devices_count_not_matching_mesh():
    f = pmapc.pmap(lambda a: a, axis_name="data", devices=jax.devices()[:3])
    raises_at_call(pmapc.DeviceError, lambda: f(X), "needs 2 devices", "lists 3")


def test_devices_count_not_matching_a_nest():
    inner = pmapc.pmap(lambda y: y, axis_name="model")
    f = pmapc.pmap(lambda v: inner(v), axis_name="data", devices=jax.devices()[:2])
    raises_at_call(
        pmapc.DeviceError,
        lambda: f(X),
        "requires 8 local devices to run due to nested pmapped",
        "needs 8 devices",
        "lists 2",
    )


def test_devices_on_an_inner_map():
    inner = pmapc.pmap(lambda y: y, axis_name="model", devices=jax.devices()[:4])

    def outer(v):
        return inner(v)

    line = inspect.getsourcelines(outer)[1] + 1
    raises_at_line(
        pmapc.DeviceError,
        lambda: pmapc.pmap(outer, axis_name="data")(X),
        line,
        "Nested pmap with explicit devices argument.",
        "only the outermost map chooses devices",
    )


# -- arguments --------------------------------------------------------------------


def test_unhashable_static_argument():
    f = pmapc.pmap(lambda a, s: a, axis_name="data", static_broadcasted_argnums=1)
    raises_at_call(pmapc.ArgumentError, lambda: f(X, [1, 2]), "must be hashable", "tuple")


def test_same_buffer_donated_twice():
    f = pmapc.pmap(lambda a, b: a + b, axis_name="data", donate_argnums=(0, 1))
    raises_at_call(pmapc.ArgumentError, lambda: f(X, X), "donated twice")


@pytest.mark.parametrize(
    ("settings", "good", "bad", "error_type", "keyword"),
    [
        ({}, (X,), ("hello",), pmapc.ArgumentError, "args[0] is a str"),
        (
            {"static_broadcasted_argnums": 1},
            (X, 2),
            (X, [1, 2]),
            pmapc.ArgumentError,
            "must be hashable",
        ),
        ({"donate_argnums": (0, 1)}, None, (X, X), pmapc.ArgumentError, "donated twice"),
    ],
    ids=["non-array", "unhashable-static", "donated-twice"],
)
def test_a_warm_call_refuses_what_a_first_call_refuses(settings, good, bad, error_type, keyword):
    """After calls that went straight to the compiled map, more than MAX_IN_FLIGHT of
    them, a bad call still gets pmapc's error at its line."""
    f = pmapc.pmap(lambda a, b=1.0: a + b, axis_name="data", **settings)
    for _ in range(6):
        f(*(good if good is not None else (np.ones_like(X), np.ones_like(X))))
    raises_at_call(error_type, lambda: f(*bad), keyword)


def pcast(y):
    return jax.lax.pcast(y, "model", to="varying")


def test_unsupported_named_axis_primitive_is_refused_at_its_line():
    line = inspect.getsourcelines(pcast)[1] + 1
    raises_at_line(
        pmapc.UnsupportedError,
        lambda: nest(pcast)(X),
        line,
        "pcast or pvary is not needed",
    )


def test_bool_psum_scatter_is_refused_at_its_line():
    # JAX raises a TypeError for it too (its reducer, lax.add, refuses bool).
    body = lambda y: jax.lax.psum_scatter(y, "model", tiled=True)  # noqa: E731
    line = inspect.getsourcelines(test_bool_psum_scatter_is_refused_at_its_line)[1] + 2
    raises_at_line(
        TypeError,
        lambda: nest(body)(X > 0),
        line,
        "'psum_scatter' does not take bool operands",
        "astype(jnp.int32)",
    )


def test_non_array_leaf():
    f = pmapc.pmap(lambda a: a, axis_name="data")
    raises_at_call(
        pmapc.ArgumentError,
        lambda: f("hello"),
        "args[0] is a str",
        "static_broadcasted_argnums",
    )


# -- collective shapes --------------------------------------------------------------


@pytest.mark.parametrize(
    ("body", "keywords"),
    [
        (
            lambda y: jax.lax.psum_scatter(y[:6], "model", tiled=True),
            [
                "'psum_scatter' over 'model' (size 4) needs dimension 0 divisible by 4, got 6; "
                "pad it to a multiple of 4"
            ],
        ),
        (
            lambda y: jax.lax.psum_scatter(y[None, :6], "model", scatter_dimension=-1, tiled=True),
            ["'psum_scatter' over 'model' (size 4) needs dimension 1 divisible by 4, got 6"],
        ),
        (
            lambda y: jax.lax.psum_scatter(y[:6], "model"),
            [
                "'psum_scatter' over 'model' (size 4) with tiled=false needs dimension 0 of "
                "size 4, got 6; pass tiled=true to split it into 4 blocks instead"
            ],
        ),
        (
            lambda y: jax.lax.psum_scatter(
                y[:3], "model", tiled=True, axis_index_groups=[[0, 1], [2, 3]]
            ),
            [
                "'psum_scatter' over 'model' (size 4, axis_index_groups [[0, 1], [2, 3]]) "
                "needs dimension 0 divisible by 2, got 3; pad it to a multiple of 2"
            ],
        ),
        (
            lambda y: jax.lax.all_to_all(y[:6], ("data", "model"), 0, 0, tiled=True),
            [
                "'all_to_all' over ('data', 'model') (size 8) needs dimension 0 divisible by 8, "
                "got 6; pad it to a multiple of 8"
            ],
        ),
        (
            lambda y: jax.lax.all_to_all(y[:6], "model", 0, 0),
            ["'all_to_all' over 'model' (size 4) with tiled=false needs dimension 0 of size 4"],
        ),
        (lambda y: jax.lax.all_gather(y, "model", axis=3), ["axis 3", "out of bounds"]),
        (lambda y: jax.lax.ppermute(y, "model", [(0, 1), (0, 2)]), ["from index 0 twice"]),
        (lambda y: jax.lax.ppermute(y, "model", [(0, 1), (2, 1)]), ["to index 1 twice"]),
        (lambda y: jax.lax.ppermute(y, "model", [(0, 5)]), ["index 5", "0..3"]),
    ],
    ids=[
        "psum_scatter",
        "psum_scatter_negative_dimension",
        "psum_scatter_untiled",
        "psum_scatter_index_groups",
        "all_to_all",
        "all_to_all_untiled",
        "dimension",
        "ppermute_source",
        "ppermute_target",
        "ppermute_range",
    ],
)
def test_collective_shape_errors(body, keywords):
    line = inspect.getsourcelines(body)[1]
    message = raises_at_line(pmapc.ShapeError, lambda: nest(body)(X), line, *keywords)
    assert "shard_count" not in message and "split_axis (" not in message  # not JAX's words


# -- IR and the command line: a diagnostic on stderr, exit 1, no traceback ------------

EXAMPLE = (pathlib.Path(__file__).parents[2] / "examples" / "nested_2x4.mlir").read_text()


@pytest.mark.parametrize(
    ("text", "keywords"),
    [
        ("module { func.func @main( {", ["error:", "expected"]),
        (
            EXAMPLE.replace("@pmapc.ppermute", "@pmapc.shuffle"),
            ["unknown pmapc op 'pmapc.shuffle'"],
        ),
        (EXAMPLE.replace('axis_name = "model", ', ""), ["missing 'axis_name'"]),
        (
            EXAMPLE.replace("axis_size = 4 : i64", 'axis_size = "four"'),
            ["'axis_size' of 'pmapc.map' must be an integer"],
        ),
        (EXAMPLE.replace("tiled = true", "tiled = 1 : i64"), ["'tiled'", "must be a boolean"]),
        (
            EXAMPLE.replace("called_computations = [@inner]", "called_computations = [@gone]"),
            ["calls '@gone', which is not a function"],
        ),
        (
            EXAMPLE.replace("called_computations = [@inner]", "called_computations = [@outer]"),
            ["recursive call @outer -> @outer"],
        ),
        (EXAMPLE.replace("@main", "@start"), ["no entry function '@main'"]),
    ],
    ids=[
        "malformed",
        "unknown_target",
        "missing_key",
        "mistyped_size",
        "mistyped_flag",
        "missing_callee",
        "map_calls_itself",
        "no_main",
    ],
)
def test_bad_modules(text, keywords, tmp_path, capsys):
    path = tmp_path / "bad.mlir"
    path.write_text(text)
    assert main(["opt", str(path), "--pmapc-to-stablehlo"]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{path}:"), err
    assert "Traceback" not in err
    for keyword in keywords:
        assert keyword in err


def test_unknown_pass(tmp_path, capsys):
    assert main(["opt", "-", "--pass-pipeline=builtin.module(verify-axes,flaten-maps)"]) == 1
    err = capsys.readouterr().err
    assert "unknown pass 'flaten-maps'" in err and "pmapc's passes: verify-axes" in err
    assert "did you mean 'flatten-maps'?" in err and "a registered MLIR pass" in err


# -- the exception class follows the diagnostic's category, never its wording ---------


@pytest.mark.parametrize(
    ("category", "error_class"),
    [
        (Category.AXIS, pmapc.AxisError),
        (Category.SHAPE, pmapc.ShapeError),
        (Category.IR, pmapc.DiagnosticError),
    ],
)
def test_typed_error_follows_the_category(category, error_class):
    where = SourceLoc("prog.py", 7, 3)
    diagnostic = Diagnostic("error", "a message with no telling words", where, category=category)
    error = typed_error(DiagnosticError(diagnostic))
    assert type(error) is error_class
    if error_class is not pmapc.DiagnosticError:
        assert error.location == where and str(error).startswith("prog.py:7: ")


# -- each error is also the builtin class JAX raised for the same mistake -------------


def test_errors_are_the_builtin_classes_jax_raises():
    with pytest.raises(NameError):
        nest(lambda y: jax.lax.psum(y, "nope"))(X)
    with pytest.raises(ValueError):
        pmapc.pmap(lambda a, b: a + b, axis_name="data")(X, np.ones((3, 4), np.float32))
    with pytest.raises(ValueError):
        pmapc.pmap(lambda a: a, axis_name="data", devices=jax.devices()[:1])(X)
    with pytest.raises(TypeError):
        pmapc.pmap(lambda a: a, axis_name="data")("hello")


def test_unnamed_map_has_a_readable_name():
    def rows(a, b):
        return a + b

    f = pmapc.pmap(rows)
    raises_at_call(
        pmapc.ShapeError,
        lambda: f(X, np.ones((3, 4), np.float32)),
        "pmapc.pmap over '<unnamed axis of rows>': every mapped dimension",
    )
    np.testing.assert_array_equal(np.asarray(f(X, X)), 2 * X)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        (
            {"static_broadcasted_argnums": 1},
            "static_broadcasted_argnums=(1,), but 'add' was called with 1 positional argument(s)",
        ),
        ({"donate_argnums": 3}, "donate_argnums=(3,), but 'add' was called with 1"),
    ],
    ids=["static", "donate"],
)
def test_argument_numbers_past_the_call(settings, message):
    def add(a, b=1.0):
        return a + b

    f = pmapc.pmap(add, axis_name="data", **settings)
    raises_at_call(ValueError, lambda: f(X), message)


# ----------------------------------------------------------------------------
# The mistakes JAX 0.4.30's jax.pmap caught, and its messages

RECORDED = json.loads(
    (pathlib.Path(__file__).parent / "goldens" / "jax0430_messages.json").read_text()
)
CASES = cases(pmapc.pmap, jax.devices())


def test_every_case_was_recorded():
    assert sorted(CASES) == sorted(RECORDED)


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_message_starts_as_jax_0430s(name):
    recorded = RECORDED[name]
    with pytest.raises(Exception) as info:
        CASES[name]()
    error = info.value
    assert isinstance(error, getattr(builtins, recorded["class"])), type(error)
    message = error.message if isinstance(error, PmapcError) else str(error)
    first_line = recorded["message"].splitlines()[0]
    assert message.startswith(first_line), f"{message!r}\ndoes not start with\n{first_line!r}"


# ----------------------------------------------------------------------------
# Tracebacks

# pmapc's package directories as installed (an editable install maps each subpackage
# to a directory of its own).
PACKAGE_DIRECTORIES = tuple(
    os.path.join(os.path.abspath(directory), "")
    for package in (pmapc, pmapc.compiler, pmapc.lowering, pmapc.passes, pmapc.tools)
    for directory in package.__path__
)

HEADER = """\
import jax
import numpy as np

import pmapc

pmapc.use_host_devices(8)
X = np.ones((2, 4, 8), np.float32)


def inner(y):
    return {mistake}


def outer(v):
    return pmapc.pmap(inner, axis_name="model")(v)
"""
MISTAKE_LINE = HEADER.splitlines().index("    return {mistake}") + 1

# name: (the mistake in `inner`, how the script calls the nest, the error's last line)
SCRIPTS = {
    "misspelled axis": (
        'jax.lax.psum(y, "modle")',
        'pmapc.pmap(outer, axis_name="data")(X)',
        "pmapc.errors.AxisError: {script}:{line}: unbound axis name: modle.",
    ),
    "indivisible psum_scatter": (
        'jax.lax.psum_scatter(y[:6], "model", tiled=True)',
        'pmapc.pmap(outer, axis_name="data")(X)',
        "pmapc.errors.ShapeError: {script}:{line}: 'psum_scatter' over 'model' (size 4) needs "
        "dimension 0 divisible by 4, got 6; pad it to a multiple of 4",
    ),
    "misspelled axis, lowered": (
        'jax.lax.psum(y, "modle")',
        'pmapc.lower(pmapc.pmap(outer, axis_name="data"), X)',
        "pmapc.errors.AxisError: {script}:{line}: unbound axis name: modle.",
    ),
    "misspelled axis, under the user's jax.jit": (
        'jax.lax.psum(y, "modle")',
        'jax.jit(pmapc.pmap(outer, axis_name="data"))(X)',
        "pmapc.errors.AxisError: {script}:{line}: unbound axis name: modle.",
    ),
    "the user's own error in a body": (
        'y * {"rate": 0.5}["rte"]',
        'pmapc.pmap(outer, axis_name="data")(X)',
        "KeyError: 'rte'",
    ),
}


def run_script(tmp_path, mistake: str, call: str, filtering: str | None):
    """Run the script of `mistake`, calling the nest with `call` in `main()`: (its
    path, its stderr, the (file, function) of each frame of its traceback)."""
    script = tmp_path / "train.py"
    script.write_text(
        HEADER.format(mistake=mistake) + f"\n\ndef main():\n    return {call}\n\n\nmain()\n"
    )
    env = {key: value for key, value in os.environ.items() if key != "JAX_TRACEBACK_FILTERING"}
    env["JAX_PLATFORMS"] = "cpu"
    if filtering is not None:
        env["JAX_TRACEBACK_FILTERING"] = filtering
    result = subprocess.run(
        [sys.executable, str(script)],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 1, result.stderr
    frames = re.findall(r'^  File "(.*)", line \d+, in (\S+)$', result.stderr, re.MULTILINE)
    return str(script), result.stderr, frames


def is_pmapcs(filename: str) -> bool:
    return os.path.abspath(filename).startswith(PACKAGE_DIRECTORIES)


@pytest.mark.parametrize("name", list(SCRIPTS))
def test_a_users_mistake_shows_the_users_frames_and_none_of_pmapcs(name, tmp_path):
    mistake, call, error = SCRIPTS[name]
    script, stderr, frames = run_script(tmp_path, mistake, call, filtering=None)
    assert frames == [
        (script, "<module>"),
        (script, "main"),
        (script, "outer"),
        (script, "inner"),
    ], stderr
    assert not [file for file, _ in frames if is_pmapcs(file)], stderr
    assert error.format(script=script, line=MISTAKE_LINE) in stderr, stderr
    assert "JAX has removed its internal frames" in stderr, stderr
    assert "Set JAX_TRACEBACK_FILTERING=off to include these." in stderr


@pytest.mark.parametrize("name", ["misspelled axis", "misspelled axis, lowered"])
def test_traceback_filtering_off_shows_pmapcs_frames_again(name, tmp_path):
    mistake, call, error = SCRIPTS[name]
    script, stderr, frames = run_script(tmp_path, mistake, call, filtering="off")
    files = [file for file, _ in frames]
    assert script in files, stderr
    shown = {os.path.join(*f.split(os.sep)[-2:]) for f in files if is_pmapcs(f)}
    assert {os.path.join("pmapc", "api.py"), os.path.join("lowering", "trace.py")} <= shown, stderr
    assert error.format(script=script, line=MISTAKE_LINE) in stderr, stderr
    assert "JAX has removed its internal frames" not in stderr
