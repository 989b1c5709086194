"""Determinism, threads, memory and un-blocked loops."""

import pathlib
import resource
import subprocess
import sys
import threading

import jax
import numpy as np

import pmapc
from pmapc.compiler import runtime
from pmapc.tools.main import main

ROOT = pathlib.Path(__file__).parents[2]
EXAMPLE_IR = ROOT / "examples" / "nested_2x4.mlir"


def nested_step():
    def outer(x):
        inner = pmapc.pmap(lambda y: jax.lax.psum(y, "model") * 2, axis_name="model")
        return jax.lax.psum(inner(x), "data")

    return pmapc.pmap(outer, axis_name="data")


def expected_step(x):
    return np.broadcast_to(2 * x.sum(axis=(0, 1)), x.shape)


def test_opt_output_is_byte_identical_across_runs(capsys):
    outputs = []
    for _ in range(3):
        assert main(["opt", str(EXAMPLE_IR), "--pmapc-to-stablehlo"]) == 0
        outputs.append(capsys.readouterr().out)
    assert outputs[0] == outputs[1] == outputs[2]


def test_opt_output_is_byte_identical_across_processes():
    command = [
        sys.executable,
        "-c",
        "from pmapc.tools.main import entry_point; entry_point()",
        "opt",
        str(EXAMPLE_IR),
        "--pmapc-to-stablehlo",
    ]
    runs = [
        subprocess.run(command, capture_output=True, timeout=120, check=True).stdout
        for _ in range(2)
    ]
    assert runs[0] == runs[1] and runs[0]


def test_traced_ir_is_identical_across_traces():
    x = np.ones((2, 4, 3), np.float32)
    texts = [
        nested_step().lower(x).as_text(stage) for stage in ("pmapc", "stablehlo") for _ in range(2)
    ]
    assert texts[0] == texts[1] and texts[2] == texts[3]


def test_eight_threads_share_one_compilation():
    step = nested_step()
    inputs = [np.full((2, 4, 3), i, np.float32) for i in range(8)]
    results, errors = [None] * 8, []

    def call(i):
        try:
            results[i] = np.asarray(step(inputs[i]))
        except Exception as error:  # reported below with its thread
            errors.append((i, error))

    threads = [threading.Thread(target=call, args=(i,)) for i in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    assert not errors
    for i in range(8):
        np.testing.assert_allclose(results[i], expected_step(inputs[i]))
    assert step._jitted._cache_size() == 1


def rss_mib() -> float:
    """Resident memory now (Linux /proc), in MiB."""
    with open("/proc/self/statm") as handle:
        pages = int(handle.read().split()[1])
    return pages * resource.getpagesize() / 2**20


def test_repeated_calls_keep_memory_flat():
    step = nested_step()
    x = np.arange(2 * 4 * 256, dtype=np.float32).reshape(2, 4, 256)
    for _ in range(100):
        np.asarray(step(x))
    before = rss_mib()
    for _ in range(1000):
        result = step(x)
    np.testing.assert_allclose(np.asarray(result), expected_step(x))
    growth = rss_mib() - before
    print(f"RSS growth over 1000 calls: {growth:.1f} MiB")
    assert growth < 64, f"RSS grew by {growth:.1f} MiB over 1000 calls"


def test_unblocked_loop_of_500_calls_finishes():
    step = nested_step()
    x = np.ones((2, 4, 3), np.float32)
    results = [step(x) for _ in range(500)]  # never waits inside the loop
    for result in results[-3:]:
        np.testing.assert_allclose(np.asarray(result), expected_step(x))


class Waits:
    """Records the outputs `runtime.wait_until_ready` was asked to wait for."""

    def __init__(self):
        self.outputs = []

    def __call__(self, outputs):
        self.outputs.append(outputs)


def test_runs_are_bounded_only_on_cpu(monkeypatch):
    waits = Waits()
    monkeypatch.setattr(runtime, "wait_until_ready", waits)
    cpu, gpu = runtime.InFlight("cpu"), runtime.InFlight("gpu")
    for run in range(2 * runtime.MAX_IN_FLIGHT):
        cpu.dispatched(("cpu", run))
        gpu.dispatched(("gpu", run))
    every = runtime.MAX_IN_FLIGHT
    assert waits.outputs == [("cpu", every - 1), ("cpu", 2 * every - 1)]


def test_the_platform_of_eager_calls_is_read_from_their_outputs(monkeypatch):
    waits = Waits()
    monkeypatch.setattr(runtime, "wait_until_ready", waits)
    in_flight = runtime.InFlight()
    in_flight.dispatched([jax.numpy.ones(2)])  # arrays on the CPU devices
    assert in_flight.bounded is True
    undecided = runtime.InFlight()
    undecided.dispatched(("no", "arrays"))
    assert undecided.bounded is None


# The CI budget of scripts/fuzz_ir.py: mutants of the lit inputs, each run three ways
# (its file's pipeline, the default pipeline, the plan): about a minute on 2 cores.
FUZZ_MUTANTS = 3000


def test_ir_fuzzing_budget():
    """The fixed CI budget of scripts/fuzz_ir.py, in a process of its own (which runs
    the mutants in a worker of its own: a signal or a stall fails one mutant): no run
    ends in an escaped exception, a signal, a stall or an unlocated error."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "fuzz_ir.py"), "--count", str(FUZZ_MUTANTS)],
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    assert f"{FUZZ_MUTANTS} passed, 0 failed" in result.stdout
