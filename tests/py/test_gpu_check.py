"""`scripts/gpu_check.py`: without a GPU (CI) it says so and runs the check that needs
none (2: every program compiled for 8 H100s by XLA:GPU, deviceless); its table, its
reading of child output and of compiled HLO; and, on the 8 CPU devices, every part of
the GPU path that runs without one: the goldens folded onto one device,
benchmarks/folded.py's rows, eager dispatch and host callbacks. What has to have a GPU
(running, timing on it) never runs here.
"""

from __future__ import annotations

import dataclasses
import pathlib
import subprocess
import sys
import textwrap

import jax
import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "gpu_check.py"
sys.path.insert(0, str(SCRIPT.parent))

import gpu_check  # noqa: E402
from gpu_check import Row  # noqa: E402
from test_targets import devices_of  # noqa: E402

NO_GPU_LINE = gpu_check.no_gpu_line("cpu")
needs_no_gpu = pytest.mark.skipif(bool(gpu_check.gpus()), reason="this machine has a GPU")

# An all-reduce split into -start/-done and a synchronous all-gather, as XLA:GPU prints them.
HLO = textwrap.dedent(
    """\
    HloModule m, entry_computation_layout={(f32[8]{0})->f32[32]{0}}

    %add (a: f32[], b: f32[]) -> f32[] {
      %a = f32[] parameter(0)
      %b = f32[] parameter(1)
      ROOT %sum = f32[] add(f32[] %a, f32[] %b)
    }

    ENTRY %main (p: f32[8]) -> f32[32] {
      %p = f32[8]{0} parameter(0)
      %all-reduce-start = f32[8]{0} all-reduce-start(f32[8]{0} %p), channel_id=1, replica_groups={{0,1,2,3},{4,5,6,7}}, use_global_device_ids=true, to_apply=%add
      %all-reduce-done = f32[8]{0} all-reduce-done(f32[8]{0} %all-reduce-start)
      ROOT %all-gather = f32[32]{0} all-gather(f32[8]{0} %all-reduce-done), channel_id=2, replica_groups={{0,1,2,3},{4,5,6,7}}, dimensions={0}, use_global_device_ids=true
    }
    """  # noqa: E501
)


# What benchmarks/folded.py prints (its header, two rows, its target line).
def _folded(workload: str, folded_ms: float, vmap_ms: float, ratio, p10, p90) -> dict:
    """One row of benchmarks/folded.py's results file."""
    return {
        "workload": workload,
        "devices": 1,
        "folded": {
            "median_s": folded_ms / 1e3,
            "ratio_median": ratio,
            "ratio_p10": p10,
            "ratio_p90": p90,
        },
        "vmap": {"median_s": vmap_ms / 1e3},
    }


FOLDED_RESULTS = {
    "rows": [
        _folded("W1 mlp 2x4", 11.30, 11.91, 0.92, 0.91, 1.08),
        _folded("W3 fori 200 psums 2x4", 0.02, 0.02, 1.08, 1.04, 1.34),
    ]
}


# ----------------------------------------------------------------------------
# Without a GPU


@needs_no_gpu
def test_without_a_gpu_the_script_says_so_and_exits_0():
    """Asked only for checks that need a GPU, it says there is none and runs nothing."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--quick", "--checks", "1,3,4,5"],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == NO_GPU_LINE


@needs_no_gpu
def test_main_without_a_gpu(capsys, monkeypatch):
    monkeypatch.setenv("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # main sets it if unset
    assert gpu_check.main(["--checks", "1,4"]) == 0
    assert capsys.readouterr().out.strip() == NO_GPU_LINE


def test_the_aot_check_says_why_it_cannot_run(monkeypatch):
    missing = "compiling for GPU needs jax-cuda12-pjrt, which is not installed: ..."
    monkeypatch.setattr(gpu_check.pmapc_targets, "plugin_missing", lambda platform: missing)
    (row,) = gpu_check.check_aot_compile(quick=True)
    assert row.verdict == "not run" and not row.failed
    assert row.result == f"not run: {missing}"


def test_the_aot_check_compiles_for_8_h100s_without_a_gpu():
    """Check 2 on this machine: XLA:GPU's compiles of every program, against
    jax.jit(shard_map)'s of the same program for the same 8 H100s."""
    devices_of(gpu_check.AOT_TARGET)  # skips (or in CI fails) without the CUDA plugin
    rows = gpu_check.check_aot_compile(quick=True)
    assert not any(row.failed for row in rows), rows
    assert [row.ran for row in rows][-2:] == [
        "compile examples/quickstart.py",
        "compile examples/mlp_training.py",
    ]
    assert all(row.verdict.startswith(("ratio", "compiled")) for row in rows)
    w1 = rows[0]
    assert w1.ran == "compile W1 mlp 2x4" and "all-reduce 3" in w1.result
    loop = next(row for row in rows if row.ran.startswith("compile W3"))
    assert "while x100" in loop.result and "while x100" in loop.peer


def test_the_examples_are_built_once_for_their_two_rows(monkeypatch):
    """The quickstart and mlp_training rows share one `example_programs` build."""
    builds = []

    def example_programs(devices):
        builds.append(devices)
        names = ("examples/quickstart.py", "examples/mlp_training.py", "examples/moe.py")
        return [gpu_check.targets.Program(name, len, ()) for name in names]

    monkeypatch.setattr(gpu_check.targets, "example_programs", example_programs)
    monkeypatch.setattr(gpu_check, "compile_row", lambda program, devices: program.name)
    devices = jax.devices()
    rows = [thunk() for thunk in gpu_check.aot_programs(True, devices)[-2:]]
    assert rows == ["examples/quickstart.py", "examples/mlp_training.py"]
    assert builds == [devices]


# ----------------------------------------------------------------------------
# Pure helpers


def test_the_table_has_a_row_per_row_and_escapes_pipes():
    rows = [
        Row("1 goldens folded", "3 programs", "3/3 agree", "JAX 0.4.30", "pass"),
        Row("2 AOT 8 H100s", "a | b", "FAILED: ValueError: x", "-", "FAILED", failed=True),
    ]
    lines = gpu_check.render_table(rows).splitlines()
    assert lines[0] == "| check | what ran | result | against | verdict |"
    assert len(lines) == 2 + len(rows)
    assert lines[2] == "| 1 goldens folded | 3 programs | 3/3 agree | JAX 0.4.30 | pass |"
    assert "| a \\| b |" in lines[3]


def test_collectives_summary_counts_kinds_and_async_pairs():
    assert gpu_check.collectives_summary(HLO, 8) == "all-reduce 1 (1 async), all-gather 1"


def test_collectives_summary_of_a_program_without_collectives():
    text = "ENTRY %main (p: f32[8]) -> f32[8] {\n  ROOT %p = f32[8]{0} parameter(0)\n}\n"
    assert gpu_check.collectives_summary(text, 8) == "no collectives"


def test_folded_rows_are_read_from_folded_py_results():
    rows = gpu_check.folded_rows(FOLDED_RESULTS)
    assert [row.ran for row in rows] == [
        "W1 mlp 2x4 folded onto 1 device(s)",
        "W3 fori 200 psums 2x4 folded onto 1 device(s)",
    ]
    assert rows[0].result == "folded 11.30 ms"
    assert rows[0].peer == "nested jax.vmap 11.91 ms"
    assert rows[0].verdict == "ratio 0.92 (p10-p90 0.91-1.08)"


def test_rows_cross_the_child_boundary():
    row = Row("2 AOT 8 H100s", "compile W1", "pmapc 1.00 s", "-", "FAILED", True, ("a", "b"))
    stdout = f"some log line\n{gpu_check.row_line(row)}\nanother\n"
    assert gpu_check.parse_rows(stdout) == [row]


def test_a_check_that_raises_becomes_a_failed_row():
    def broken() -> list[Row]:
        raise ValueError("\nbad input\nmore detail")

    (row,) = gpu_check.guarded("4 eager dispatch", broken)
    assert row.check == "4 eager dispatch"
    assert row.result == "FAILED: ValueError: bad input"
    assert row.verdict == "FAILED" and row.failed


def test_a_child_s_failure_names_its_exit_status_and_last_line():
    code = "import sys; print('rows so far'); sys.exit('boom')"
    stdout, failure = gpu_check.run_child([sys.executable, "-c", code], 60)
    assert stdout == "rows so far\n"
    assert failure == "exited 1: boom"
    _, failure = gpu_check.run_child([sys.executable, "-c", "import time; time.sleep(30)"], 1)
    assert failure == "no end after 1 s"


def test_every_check_is_listed():
    numbers = [number for number, _, _ in gpu_check.gpu_checks(jax.devices()[:1], quick=True)]
    assert sorted(set(numbers)) == ["1", "2", "3", "4", "5"]


# ----------------------------------------------------------------------------
# The GPU path's checks, on CPU devices


@pytest.fixture(scope="module")
def golden_cases() -> list[gpu_check.GoldenCase]:
    return gpu_check.golden_cases()


def test_every_golden_program_is_a_case(golden_cases):
    from support.golden_generated import PROGRAMS as GENERATED
    from support.golden_programs import PROGRAMS

    assert len(golden_cases) == len(PROGRAMS) + len(GENERATED)
    assert any(case.error is not None for case in golden_cases)


def test_goldens_folded_onto_one_cpu_device_agree(golden_cases):
    refused = [case for case in golden_cases if case.error is not None][:1]
    cases = [*golden_cases[:2], golden_cases[-1], *refused]
    row = gpu_check.check_goldens(jax.devices()[:1], cases)
    assert row.result == f"{len(cases)}/{len(cases)} agree", row.details
    assert row.verdict == "pass" and not row.failed


def test_a_golden_that_disagrees_is_listed_by_name(golden_cases):
    case = next(c for c in golden_cases if c.error is None and "out0" in c.expected)
    wrong_values = {k: v + 1 if k == "out0" else v for k, v in case.expected.items()}
    cases = [
        dataclasses.replace(case, expected=wrong_values),
        dataclasses.replace(case, error="ValueError"),
    ]
    row = gpu_check.check_goldens(jax.devices()[:1], cases)
    assert row.result == "0/2 agree" and row.failed
    assert row.details[0].startswith(f"{case.name}/out0: ")
    assert row.details[1] == f"{case.name}: raised nothing; JAX 0.4.30 raised ValueError"


def test_folded_py_rows_on_one_cpu_device():
    rows = gpu_check.check_folded(quick=True)
    assert not any(row.failed for row in rows), rows
    assert len(rows) == 5 and all(row.verdict.startswith("ratio") for row in rows)


def test_eager_dispatch_on_one_cpu_device():
    row = gpu_check.check_dispatch(jax.devices()[:1], calls=20)
    assert row.ran.startswith("20 un-blocked calls") and row.verdict.startswith("ratio")


@pytest.mark.parametrize("count", [1, 2])
def test_host_callbacks_folded_onto_cpu_devices(count):
    devices = jax.devices()[:count]
    for row in (gpu_check.check_pure_callback(devices), gpu_check.check_debug_callback(devices)):
        assert row.verdict == "pass", row
