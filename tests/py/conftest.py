"""Shared pytest setup: eight virtual CPU devices, and fixtures that compile and run pmapc IR.

JAX fixes its number of CPU devices when its backend starts, so the count is
set here, at import time, before any test touches a device.
"""

from __future__ import annotations

import functools
import os
import zlib
from collections.abc import Callable

# JAX on the CPU, here and in the tests' child processes: with libtpu and the CUDA
# plugin installed (the targets extra), JAX would try a TPU and a GPU first.
os.environ.setdefault("JAX_PLATFORMS", "cpu")

import jax
import numpy as np
import pytest

NUM_CPU_DEVICES = 8


def _use_host_devices(count: int) -> None:
    """Ask for `count` CPU devices; accept a backend already started with enough of them."""
    try:
        jax.config.update("jax_num_cpu_devices", count)
    except RuntimeError:
        available = len(jax.devices("cpu"))
        if available < count:
            raise RuntimeError(
                f"the pmapc tests need {count} CPU devices, but JAX's backend already started "
                f"with {available}; run pytest without importing JAX first, or set "
                f"XLA_FLAGS=--xla_force_host_platform_device_count={count}"
            ) from None


_use_host_devices(NUM_CPU_DEVICES)

# Imported after the device count is set: these modules import JAX's runtime.
from support import memory  # noqa: E402
from support.child_process import ChildProcess  # noqa: E402

from pmapc import dialect, ir  # noqa: E402
from pmapc.compiler.pipeline import default_pipeline, parse_pipeline  # noqa: E402
from pmapc.compiler.runtime import Executable  # noqa: E402
from pmapc.lowering.mesh_devices import pick_devices  # noqa: E402
from pmapc.passes import DEFAULT_TARGET, TARGETS  # noqa: E402
from pmapc.passes.manager import run_passes  # noqa: E402


def compile_text(
    text: str, pipeline: str | None = None, target: str = DEFAULT_TARGET
) -> Executable:
    """Parse pmapc IR, run `pipeline` over it (default: the whole pipeline for `target`)
    and compile it for the first mesh-size devices."""
    module = ir.parse_module(text, ir.make_context())
    run_passes(module, default_pipeline(target) if pipeline is None else parse_pipeline(pipeline))
    mesh = dialect.read_mesh(module)
    assert mesh is not None, "the pipeline did not record a mesh; does it run flatten-maps?"
    return Executable(module, pick_devices(mesh, None, None))


def run_text(text: str, *arguments: np.ndarray, target: str = DEFAULT_TARGET) -> list[np.ndarray]:
    """Compile and run pmapc IR on global numpy arrays; the global results as numpy arrays.

    `np.asarray` waits for each result: XLA's in-process CPU collectives can
    deadlock when many collective programs are queued without waiting.
    """
    executable = compile_text(text, target=target)
    return [np.asarray(result) for result in executable(*arguments)]


@pytest.fixture(params=list(TARGETS))
def target(request: pytest.FixtureRequest) -> str:
    """Each execution form a pipeline can end in: every test using it runs once per form."""
    return request.param


@pytest.fixture
def compile_ir(target: str) -> Callable[..., Executable]:
    """`compile_ir(text, pipeline=None)`: an Executable for pmapc IR text, for each target."""
    return functools.partial(compile_text, target=target)


@pytest.fixture
def run_ir(target: str) -> Callable[..., list[np.ndarray]]:
    """`run_ir(text, *arrays)`: compile pmapc IR text for each target, run it, numpy results."""
    return functools.partial(run_text, target=target)


@pytest.fixture(autouse=True)
def _bounded_memory():
    """After each test, a worker that holds too much gives it back (memory.py)."""
    yield
    memory.bound()


@pytest.fixture(scope="module")
def pmapc_process() -> ChildProcess:
    """pmapc in a child process (child_process.py), one per test module: a crash or a
    hang there fails the test that caused it, not the session."""
    process = ChildProcess()
    yield process
    process.close()


@pytest.fixture
def rng(request: pytest.FixtureRequest) -> np.random.Generator:
    """A random generator seeded from the test's id, so every test sees fixed data."""
    return np.random.default_rng(zlib.crc32(request.node.nodeid.encode()))


# JAX's flags that change what a trace holds. `jax_use_simplified_jaxpr_constants`
# (on by default from jax 0.12.1, off before) writes a captured array into the
# jaxpr as a literal instead of a constant of the closed jaxpr. Every admitted
# release has it, and a user may set it either way.
TRACE_FLAGS = ("jax_use_simplified_jaxpr_constants",)


@pytest.fixture(params=[False, True], ids=["constants", "simplified-constants"])
def jaxpr_constants(request: pytest.FixtureRequest):
    """Runs the test once with `jax_use_simplified_jaxpr_constants` off and once on,
    and gives the flag back as it was. Modules that trace captured constants (the
    goldens, the shared-program sweeps, the structure and folding tests) use it on
    every test (`pytestmark = pytest.mark.usefixtures("jaxpr_constants")`)."""
    (flag,) = TRACE_FLAGS
    before = getattr(jax.config, flag)
    jax.config.update(flag, request.param)
    yield request.param
    jax.config.update(flag, before)
