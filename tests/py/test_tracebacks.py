"""The traceback of a mistake in a user's script shows the user's frames and none of
pmapc's, as JAX leaves out its own ("JAX has removed its internal frames"), and
`JAX_TRACEBACK_FILTERING=off` shows them all again. Each script runs as a user runs it,
`python script.py`, in a process of its own."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

import pmapc
import pmapc.compiler
import pmapc.lowering
import pmapc.passes
import pmapc.tools

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
