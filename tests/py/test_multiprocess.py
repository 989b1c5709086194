"""Nested maps across processes: pmapc on JAX's distributed runtime (gloo on CPU).

Each multi-process test starts its worker processes itself
(`multiprocess_worker.py`, on a free loopback port), waits a bounded time for
them, and kills only those children if they overrun. Every worker checks its
own rows of every result against numpy and prints a `PMAPC-RESULT {json}`
line, which the test reads. The layout rules themselves (which devices, which
refusals) are pure functions, tested here on stand-in devices.
"""

from __future__ import annotations

import dataclasses
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

import pmapc
from pmapc.lowering import mesh_devices
from pmapc.mesh import Mesh

WORKER = Path(__file__).parent / "support" / "multiprocess_worker.py"
RESULT_MARK = "PMAPC-RESULT "
TIMEOUT_SECONDS = 120  # a whole run; one layout takes 3-10 s on 2 busy cores


@dataclasses.dataclass
class Finished:
    """One worker's exit status, output and result line."""

    returncode: int
    output: str
    result: dict | None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def run_workers(
    tmp_path: Path,
    scenario: str,
    processes: int,
    devices: int,
    mesh: tuple[int, int],
    *flags: str,
    wait_for: int | None = None,
) -> tuple[list[Finished], float]:
    """Start `processes` workers, wait (bounded) for the first `wait_for` of them
    (default all), kill any still running, and return what each said and the
    seconds the wait took."""
    port = str(free_port())
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONUNBUFFERED": "1"}
    env.pop("XLA_FLAGS", None)
    logs = [tmp_path / f"{scenario}-{i}.log" for i in range(processes)]
    started = time.monotonic()
    children = []
    try:
        for process_id, log in enumerate(logs):
            with open(log, "w") as out:
                command = [
                    sys.executable,
                    str(WORKER),
                    scenario,
                    str(process_id),
                    str(processes),
                    str(devices),
                    *map(str, mesh),
                    port,
                    *flags,
                ]
                children.append(
                    subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT, env=env)
                )
        for child in children[:wait_for]:
            child.wait(timeout=max(1.0, TIMEOUT_SECONDS - (time.monotonic() - started)))
        seconds = time.monotonic() - started
    finally:
        for child in children:
            if child.poll() is None:
                child.kill()
                child.wait(timeout=30)
    return [
        _finished(child.returncode, log.read_text()) for child, log in zip(children, logs)
    ], seconds


def _finished(returncode: int, output: str) -> Finished:
    """A worker's result line, found wherever gloo's output put it on its line."""
    decoder = json.JSONDecoder()
    results = [
        decoder.raw_decode(line, line.index(RESULT_MARK) + len(RESULT_MARK))[0]
        for line in output.splitlines()
        if RESULT_MARK in line
    ]
    return Finished(returncode, output, results[-1] if results else None)


def _check_all_passed(finished: list[Finished], expected_checks: set[str]) -> None:
    for process_id, worker in enumerate(finished):
        assert worker.returncode == 0 and worker.result, (
            f"process {process_id} exited with {worker.returncode}:\n{worker.output[-4000:]}"
        )
        checks = worker.result["checks"]
        assert worker.result["process_id"] == process_id
        failed = sorted(name for name, ok in checks.items() if not ok)
        assert not failed, f"process {process_id}: rows differ from numpy in {failed}"
        assert expected_checks <= set(checks), sorted(expected_checks - set(checks))


STEP_CHECKS = {
    f"call{call}:{name}"
    for call in (0, 1)
    for name in (
        "psum_model",
        "psum_data",
        "psum_both",
        "gather_model",
        "gather_data",
        "index_data",
        "index_model",
        "index_both",
        "out_axes_none",
    )
}
GLOBAL_CHECKS = {"global:psum_both", "global:gather_data", "global:out_axes_none"}


@pytest.mark.parametrize(
    ("processes", "devices", "mesh", "flags", "more_checks"),
    [
        pytest.param(
            2,
            4,
            (2, 4),
            ("--docs-example", "--aot", "--global", "--plan"),
            {
                "docs_example",
                "plan:hosts",
                "plan:agrees",
                "plan:table",
                "aot-replicas:form",
                "aot-replicas:psum_both",
                "aot-partitions:gather_data",
                *GLOBAL_CHECKS,
            },
            id="2x4-on-2x4",
        ),
        pytest.param(4, 2, (4, 2), ("--axis-size",), {"axis_size"}, id="4x2-on-4x2"),
        pytest.param(
            2,
            4,
            (4, 2),
            ("--global", "--devices-argument", "--errors"),
            {
                *GLOBAL_CHECKS,
                "devices_reversed",
                "error:inner_axes_too_big",
                "error:fold_across_processes",
            },
            id="4x2-on-2x4",
        ),
    ],
)
def test_layout(tmp_path, processes, devices, mesh, flags, more_checks):
    """Every process's rows of every result agree with numpy."""
    finished, _ = run_workers(tmp_path, "layout", processes, devices, mesh, *flags)
    _check_all_passed(finished, STEP_CHECKS | {"results_are_local", "feedback"} | more_checks)


@pytest.mark.parametrize("how", ["exits", "stops"])
def test_peer_dies(tmp_path, how):
    """Process 1 exits (or stops, as a hung machine) after the first call; process
    0, calling again, is ended (an error, or JAX's abort) within the worker's
    3 s heartbeat timeout and start-up instead of hanging."""
    flags = ("--stop",) if how == "stops" else ()
    finished, seconds = run_workers(tmp_path, "peer-dies", 2, 2, (2, 2), *flags, wait_for=1)
    assert all(w.result and w.result["event"] == "first call done" for w in finished), [
        w.output[-2000:] for w in finished
    ]
    assert finished[0].returncode != 0, finished[0].output[-2000:]
    assert seconds < 60, f"the survivor took {seconds:.0f} s to end"
    if how == "exits":
        assert finished[1].returncode == 17


# ---------------------------------------------------------------------------
# The layout rules on stand-in devices (no processes needed)


@dataclasses.dataclass(frozen=True)
class StandIn:
    """What the layout rules read of a device."""

    id: int
    process_index: int
    platform: str = "cpu"


def stand_ins(processes: int, per_process: int) -> list[StandIn]:
    return [StandIn(p * 100 + i, p) for p in range(processes) for i in range(per_process)]


@pytest.mark.parametrize(
    ("processes", "per_process", "shape", "expected_ids"),
    [
        (2, 4, (2, 4), [0, 1, 2, 3, 100, 101, 102, 103]),
        (2, 4, (4, 2), [0, 1, 2, 3, 100, 101, 102, 103]),
        (4, 2, (4, 2), [0, 1, 100, 101, 200, 201, 300, 301]),
        (2, 4, (2, 2), [0, 1, 100, 101]),  # a process's first devices, rows process-major
    ],
)
def test_process_major_devices(processes, per_process, shape, expected_ids):
    mesh = Mesh(("data", "model"), shape)
    chosen = mesh_devices.process_major_devices(mesh, stand_ins(processes, per_process))
    assert [d.id for d in chosen] == expected_ids


def test_outermost_axis_must_split_evenly_over_processes():
    with pytest.raises(
        pmapc.DeviceError,
        match=r"'data' of the mesh data=3xmodel=2 has size "
        r"3, which 2 processes cannot share.*multiple of 2",
    ):
        mesh_devices.process_major_devices(Mesh(("data", "model"), (3, 2)), stand_ins(2, 4))


def test_inner_axes_must_fit_in_a_process():
    with pytest.raises(
        pmapc.DeviceError,
        match=r"puts 1 row\(s\) of 8 device\(s\) on each of 2 "
        r"processes, 8 devices each, but process 0 has 4 cpu device\(s\).*"
        r"use_host_devices\(8\)",
    ):
        mesh_devices.process_major_devices(Mesh(("data", "model"), (2, 8)), stand_ins(2, 4))


def test_given_devices_hold_whole_rows_per_process():
    mesh = Mesh(("data", "model"), (2, 2))
    mesh_devices.check_process_rows(mesh, [1, 1, 0, 0], 2)  # process 1 first is fine
    with pytest.raises(
        pmapc.DeviceError,
        match=r"row 0 of the outermost axis 'data' on "
        r"processes \[0, 1\]",
    ):
        mesh_devices.check_process_rows(mesh, [0, 1, 0, 1], 2)
    with pytest.raises(pmapc.DeviceError, match=r"rows \[0, 1, 0, 1\].*consecutive"):
        mesh_devices.check_process_rows(Mesh(("data", "model"), (4, 1)), [0, 1, 0, 1], 2)
    with pytest.raises(pmapc.DeviceError, match=r"rows \[0, 0\].*same number"):
        mesh_devices.check_process_rows(mesh, [0, 0, 0, 0], 2)


# ---------------------------------------------------------------------------
# Processes that disagree (compiler/agreement.py): an error, not a hang


@pytest.mark.parametrize(
    ("processes", "devices", "mesh", "odd", "how"),
    [
        pytest.param(2, 4, (2, 4), 1, "different", id="2-different"),
        pytest.param(2, 4, (2, 4), 0, "different-shape", id="2-different-shape"),
        pytest.param(4, 2, (4, 2), 3, "different", id="4-different"),
    ],
)
def test_processes_running_different_programs_all_raise(
    tmp_path, processes, devices, mesh, odd, how
):
    """Every process raises a ProcessError naming each process's program, its line and
    shapes, at once: none waits for gloo's 30 s."""
    finished, _ = run_workers(
        tmp_path, "disagree", processes, devices, mesh, "--odd", str(odd), "--how", how
    )
    for worker in finished:
        assert worker.result and worker.result.get("error") == "ProcessError", worker.output[-3000:]
        message = worker.result["message"]
        assert "run different programs as their new program number 1" in message
        for other in range(processes):
            assert f"process {other} runs '" in message
        if how == "different":
            assert "'pmax_model' (defined at " in message and "'psum_both' (defined at " in message
            assert "multiprocess_worker.py:" in message
        else:
            assert "on float32[2,4,6]" in message and "on float32[2,4,3]" in message
        assert message.startswith(f"{WORKER}:"), message  # the user's call
        assert worker.result["seconds"] < 10.0


@pytest.mark.parametrize(
    ("processes", "devices", "mesh", "odd"),
    [pytest.param(2, 4, (2, 4), 1, id="2"), pytest.param(4, 2, (4, 2), 2, id="4")],
)
def test_a_process_that_skips_the_call_is_named_within_the_timeout(
    tmp_path, processes, devices, mesh, odd
):
    finished, _ = run_workers(
        tmp_path, "disagree", processes, devices, mesh, "--odd", str(odd), "--how", "skip"
    )
    for process_id, worker in enumerate(finished):
        assert worker.result, worker.output[-3000:]
        if process_id == odd:
            assert worker.result["event"] == "skipped" and worker.result["checks"]["psum_both"]
            continue
        assert worker.result.get("error") == "ProcessError", worker.output[-3000:]
        message = worker.result["message"]
        assert message.split(": ", 1)[1].startswith(
            f"process {odd} did not reach this process's new program number 2 within 20 s: "
            f"process {process_id} runs 'pmax_model' (defined at "
        ), message
        # the time set, and the start of the other processes' calls
        assert 20.0 <= worker.result["seconds"] < 30.0, worker.result


@pytest.mark.parametrize(
    ("processes", "devices", "mesh"),
    [pytest.param(2, 4, (2, 4), id="2"), pytest.param(4, 2, (4, 2), id="4")],
)
def test_processes_running_the_same_program_agree(tmp_path, processes, devices, mesh):
    finished, _ = run_workers(
        tmp_path, "disagree", processes, devices, mesh, "--odd", "0", "--how", "same"
    )
    _check_all_passed(finished, {"psum_both", "agreed_once"})


def test_the_docs_show_the_error_the_example_prints():
    """README's and the guide's copies of `examples/multiprocess.py --disagree`'s error
    (a line cut short with '...' up to the cut) are what it prints."""
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    env.pop("XLA_FLAGS", None)
    done = subprocess.run(
        [sys.executable, "examples/multiprocess.py", "--disagree"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=TIMEOUT_SECONDS,
        env=env,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    printed = done.stdout.replace(f"{root}/", "").splitlines()  # the docs' paths are relative
    for doc in (root / "README.md", root / "docs" / "guide.md"):
        shown = [line for line in doc.read_text().splitlines() if "] ProcessError: " in line]
        assert shown, doc
        for line in shown:
            head = line.split(" ...", 1)[0]
            assert any(p.startswith(head) for p in printed), f"{doc.name}: {line}"


# ---------------------------------------------------------------------------
# What processes compare (compiler/processes.py: program_of), in one process

SOURCE = """
import jax
import pmapc


def body(y):
    return jax.lax.psum({expression}, "model")


step = pmapc.pmap(pmapc.pmap(body, axis_name="model"), axis_name="data")
"""


def _program_in(folder: Path, name: str, expression: str):
    """`step` of SOURCE written in `folder` under module `name`, as the processes see
    it when it is first called."""
    import importlib.util

    import numpy as np

    from pmapc.compiler import processes

    folder.mkdir(parents=True)
    path = folder / "train.py"
    path.write_text(SOURCE.format(expression=expression))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    traced = module.step._jitted.trace(np.ones((2, 4, 3), np.float32))
    return processes.program_of(traced, module.step.spec.fun, "step")


def test_the_same_code_in_other_folders_is_the_same_program(tmp_path):
    """Hosts may check the same code out under other folders: the digest the processes
    compare is the same. Another body is another program; a float constant apart is
    not (it is an argument of one program, lowering/structure.py: the same
    collectives run)."""
    first = _program_in(tmp_path / "host0" / "job", "train_host0", "y * 2.0")
    second = _program_in(tmp_path / "host1" / "checkout", "train_host1", "y * 2.0")
    scaled = _program_in(tmp_path / "host2", "train_host2", "y * 3.0")
    other = _program_in(tmp_path / "host3", "train_host3", "y * 2.0 + y")
    assert first.digest == second.digest == scaled.digest != other.digest
    assert first.where.endswith("train.py:6") and first.shapes == "float32[2,4,3]"
