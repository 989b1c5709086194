"""The JAX releases pmapc names as tested (pmapc/jax_releases.py), the warning for any
other, and the docs and CI script that name them too."""

from __future__ import annotations

import ast
import pathlib
import re
import subprocess
import sys
import warnings

import jax
import pytest

from pmapc import jax_releases

ROOT = pathlib.Path(__file__).resolve().parents[2]


def test_the_running_jax_is_a_tested_release():
    """Each CI leg runs a release pmapc names as tested; a new release the newest leg
    picks up fails here until it is added (after its leg passes)."""
    assert jax.__version__ in jax_releases.TESTED, jax_releases.untested_message(jax.__version__)


def test_an_untested_release_warns_naming_both():
    with pytest.warns(jax_releases.UntestedJaxWarning) as caught:
        jax_releases.warn_if_untested("0.12.2")
    (warning,) = caught
    message = str(warning.message)
    assert "this is jax 0.12.2" in message
    assert f"tested with jax {', '.join(jax_releases.TESTED)}" in message


def test_a_tested_release_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for release in jax_releases.TESTED:
            jax_releases.warn_if_untested(release)


def test_importing_pmapc_with_an_untested_jax_warns_once():
    """In a new process whose jax reports a release not tested: one warning, at import."""
    program = (
        "import warnings, jax\n"
        "jax.__version__ = '9.9.9'\n"
        "with warnings.catch_warnings(record=True) as caught:\n"
        "    warnings.simplefilter('always')\n"
        "    import pmapc\n"
        "    import pmapc.api\n"
        "print([str(w.message) for w in caught if w.category is pmapc.UntestedJaxWarning])\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", program], capture_output=True, text=True, check=True, timeout=300
    )
    (message,) = ast.literal_eval(done.stdout.strip().splitlines()[-1])
    assert "this is jax 9.9.9" in message


def test_readme_names_the_tested_releases():
    section = (ROOT / "README.md").read_text().split("## JAX versions", 1)[1].split("\n## ", 1)[0]
    named = re.search(r"CI tests jax ([0-9., and]+) \(pmapc/jax_releases\.py\)", section)
    assert named is not None, "README's 'JAX versions' names no tested releases"
    listed = re.findall(r"[0-9]+(?:\.[0-9]+)+", named[1])
    assert tuple(listed) == jax_releases.TESTED
