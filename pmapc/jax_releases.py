"""The JAX releases pmapc was tested on, and the warning for any other.

pyproject.toml admits a range of JAX releases; CI (scripts/test.sh) runs the
whole suite on one release of each admitted minor: the range's lower bound, the
newest patch of each minor in between, and the newest release the registry
serves. A later patch can change what pmapc reaches inside JAX (0.12.1 changed
what `pmean` over uneven groups means), so importing pmapc with a JAX that is
not one of `TESTED` warns once, naming both. README's "JAX versions" lists the
same releases (tests/py/test_jax_releases.py checks that it does).
"""

from __future__ import annotations

import warnings

import jax

# jax and jaxlib, at one version each: the legs of scripts/test.sh.
TESTED: tuple[str, ...] = ("0.10.2", "0.11.2", "0.12.0.1", "0.12.1")


class UntestedJaxWarning(UserWarning):
    """pmapc runs with a JAX release its tests never ran on."""


def untested_message(running: str) -> str | None:
    """Why `running` (a jax version) is worth a warning, or None for a tested one."""
    if running in TESTED:
        return None
    return (
        f"pmapc was tested with jax {', '.join(TESTED)}; this is jax {running}. "
        f"Run pmapc's tests on it (`bash scripts/test.sh --leg=newest`) before relying "
        f"on it, or install a tested release (pip install 'jax=={TESTED[-1]}')"
    )


def warn_if_untested(running: str = jax.__version__) -> None:
    """Warn (UntestedJaxWarning) unless `running` is tested: once, as pmapc is imported."""
    message = untested_message(running)
    if message is not None:
        warnings.warn(message, UntestedJaxWarning, stacklevel=2)
