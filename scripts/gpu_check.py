"""The checks of shared/REFERENCE.md "On a GPU machine", as one command, one table.

    .venv/bin/python scripts/gpu_check.py [--quick] [--checks 1,2,3,4,5]

This module owns those checks and the table they print; the programs, the recorded
values and the benchmark peers are the test suite's and benchmarks/'s.

2. on any machine (no GPU needed; the CUDA plugin of `pip install 'pmapc[targets]'`):
   the benchmark workloads, W4 chains and the examples compiled for 8 H100s by
   XLA:GPU itself (`pmapc.target_devices("gpu:h100:1x1x8")`, compiler/targets.py),
   by pmapc and by `jax.jit(shard_map)`: compile seconds and the collectives of each
   compiled HLO (nothing runs). Without the plugin its row says so ("not run").

With a GPU, also:

1. the goldens (tests/py: golden_programs.py and golden_generated.py; every 10th of the
   generated ones with --quick) folded onto the one GPU (`pmapc.fold_onto`), against
   the values JAX 0.4.30's nested `jax.pmap` recorded, compared as test_fold.py does;
3. benchmarks/folded.py (W1-W3 folded onto the GPU against nested `jax.vmap`), as a
   child process, its ratios;
4. 200 un-blocked eager calls of a folded 2x4 psum nest against its nested vmap;
5. `jax.pure_callback` and `jax.debug.callback` in a folded nest, against numpy.

On a machine whose JAX finds no GPU it says so and runs check 2 alone. Each check
turns an exception into a FAILED cell; the exit status is 1 when any failed.
`pmapc.use_host_devices` is not called here.
"""

from __future__ import annotations

import argparse
import builtins
import dataclasses
import functools
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "tests" / "py"), str(ROOT / "benchmarks")]

import compile_scaling  # noqa: E402
import hlo_stats  # noqa: E402
import jax  # noqa: E402
import numpy as np  # noqa: E402
import targets  # noqa: E402
import workloads  # noqa: E402
from jax import lax  # noqa: E402
from support.golden_generated import PROGRAMS as GENERATED  # noqa: E402
from support.golden_programs import PROGRAMS, Program, evaluate  # noqa: E402
from support.golden_store import unpack  # noqa: E402
from test_golden_generated import GOLDENS as GENERATED_GOLDENS  # noqa: E402
from test_golden_generated import assert_same_array  # noqa: E402
from test_goldens import GOLDENS, recorded_for  # noqa: E402

import pmapc  # noqa: E402
from pmapc.compiler import targets as pmapc_targets  # noqa: E402

ROW_MARK = "gpu_check-row "  # a child process prints each row as this mark and JSON
CHILD_TIMEOUT_S = 600
AOT_TARGET = "gpu:h100:1x1x8"
AOT_CHECK = "2 AOT 8 H100s"
AOT_RAN = f"XLA:GPU without a GPU, target {AOT_TARGET}"
AOT_ONLY = ("2",)  # the checks that need no GPU


@dataclasses.dataclass(frozen=True)
class Row:
    """One line of the table; `details` (failures by name) are listed below it."""

    check: str
    ran: str
    result: str
    peer: str
    verdict: str
    failed: bool = False
    details: tuple[str, ...] = ()


# ----------------------------------------------------------------------------
# Pure helpers: text in, text out


def first_line(error: BaseException | str) -> str:
    """The first non-blank line of an exception's message (or of a text)."""
    lines = [line.strip() for line in str(error).splitlines() if line.strip()]
    return lines[0] if lines else ""


def failure_cell(error: BaseException) -> str:
    return f"FAILED: {type(error).__name__}: {first_line(error)}"


def render_table(rows: Sequence[Row]) -> str:
    """The rows as one markdown table."""

    def cell(text: str) -> str:
        return text.replace("|", "\\|").replace("\n", " ")

    lines = ["| check | what ran | result | against | verdict |", "| --- | --- | --- | --- | --- |"]
    for row in rows:
        cells = (row.check, row.ran, row.result, row.peer, row.verdict)
        lines.append("| " + " | ".join(cell(c) for c in cells) + " |")
    return "\n".join(lines)


def collectives_summary(hlo_text: str, device_count: int) -> str:
    """`all-reduce 3 (3 async), all-gather 1; while x100: 2 in body`: the collectives of
    compiled HLO text by kind, how many are async (`-start`/`-done` pairs or wrapped in an
    async-start), and the loops that hold them (benchmarks/hlo_stats.py's reading)."""
    parsed = hlo_stats.parse(hlo_text, device_count)
    parts = []
    for kind in hlo_stats.KINDS:
        ops = [c for c in parsed.collectives if c.kind == kind]
        asynchronous = sum(c.is_async for c in ops)
        if ops:
            parts.append(
                f"{kind} {len(ops)}" + (f" ({asynchronous} async)" if asynchronous else "")
            )
    return "; ".join([", ".join(parts) or "no collectives", *hlo_stats.describe_loops(parsed)])


def folded_rows(results: dict) -> list[Row]:
    """The rows of benchmarks/folded.py's results file (`--json`) as check 3's rows."""
    rows = []
    for found in results["rows"]:
        folded, vmap = found["folded"], found["vmap"]
        rows.append(
            Row(
                "3 folded vs vmap",
                f"{found['workload']} folded onto {found['devices']} device(s)",
                f"folded {folded['median_s'] * 1e3:.2f} ms",
                f"nested jax.vmap {vmap['median_s'] * 1e3:.2f} ms",
                f"ratio {folded['ratio_median']:.2f} "
                f"(p10-p90 {folded['ratio_p10']:.2f}-{folded['ratio_p90']:.2f})",
            )
        )
    return rows


def row_line(row: Row) -> str:
    return ROW_MARK + json.dumps(dataclasses.asdict(row))


def parse_rows(stdout: str) -> list[Row]:
    """The rows a child printed with `row_line`."""
    rows = []
    for line in stdout.splitlines():
        if line.startswith(ROW_MARK):
            fields = json.loads(line.removeprefix(ROW_MARK))
            rows.append(Row(**fields | {"details": tuple(fields["details"])}))
    return rows


def guarded(check: str, run: Callable[[], list[Row]]) -> list[Row]:
    """`run()`'s rows, or one FAILED row: a broken check must not hide the others."""
    try:
        return run()
    except Exception as error:  # any failure of the check is its result
        return [Row(check, "-", failure_cell(error), "-", "FAILED", failed=True)]


def run_child(command: list[str], timeout_s: float) -> tuple[str, str | None]:
    """A child's stdout, and why it failed (None when it exited 0)."""
    try:
        done = subprocess.run(
            command, capture_output=True, text=True, timeout=timeout_s, cwd=ROOT, check=False
        )
    except subprocess.TimeoutExpired as expired:
        partial = expired.stdout or ""
        text = partial.decode() if isinstance(partial, bytes) else partial
        return text, f"no end after {timeout_s:.0f} s"
    if done.returncode != 0:
        lines = done.stderr.strip().splitlines() or ["no message"]
        return done.stdout, f"exited {done.returncode}: {lines[-1].strip()[:200]}"
    return done.stdout, None


# ----------------------------------------------------------------------------
# Check 1: the goldens folded onto one device


@dataclasses.dataclass(frozen=True)
class GoldenCase:
    """One recorded program: its inputs and results, or the builtin exception it raised."""

    name: str
    program: Program
    inputs: list[np.ndarray]
    expected: dict[str, np.ndarray]
    error: str | None
    compare: Callable[[np.ndarray, np.ndarray, str], None]


def assert_as_recorded(got: np.ndarray, want: np.ndarray, where: str) -> None:
    """test_fold.py's comparison of golden_programs.py's arrays."""
    if got.shape != want.shape or got.dtype != want.dtype:
        raise AssertionError(
            f"{where}: {got.dtype}{list(got.shape)} != {want.dtype}{list(want.shape)}"
        )
    if np.issubdtype(want.dtype, np.inexact):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5, err_msg=where)
    else:
        np.testing.assert_array_equal(got, want, err_msg=where)


def inputs_of(arrays: dict[str, np.ndarray]) -> list[np.ndarray]:
    inputs = []
    while f"input{len(inputs)}" in arrays:
        inputs.append(arrays[f"input{len(inputs)}"])
    return inputs


def golden_cases(generated_stride: int = 1) -> list[GoldenCase]:
    """Every program of golden_programs.py and every `generated_stride`-th of
    golden_generated.py, with what JAX 0.4.30 recorded for it."""
    with np.load(GOLDENS) as entries:
        goldens = {key: entries[key] for key in entries.files}
    cases = []
    for program in PROGRAMS:
        recorded = recorded_for(goldens, program)
        expected = {k: v for k, v in recorded.items() if not k.startswith("input")}
        cases.append(
            GoldenCase(
                program.name, program, inputs_of(recorded), expected, None, assert_as_recorded
            )
        )
    with np.load(GENERATED_GOLDENS) as entries:
        generated = unpack(entries)
    for program in GENERATED[::generated_stride]:
        arrays = generated[program.name].arrays
        skipped = ("input", "grad") if program.jax_gradient_wrong else ("input",)
        expected = {k: v for k, v in arrays.items() if not k.startswith(skipped)}
        error = generated[program.name].error
        cases.append(
            GoldenCase(program.name, program, inputs_of(arrays), expected, error, assert_same_array)
        )
    return cases


def golden_failure(case: GoldenCase, devices: Sequence) -> str | None:
    """Why `case` folded onto `devices` disagrees with its record (None: it agrees)."""
    try:
        # float32 matmuls: XLA:GPU's default (TF32) is not what JAX 0.4.30 recorded
        with pmapc.fold_onto(devices), jax.default_matmul_precision("float32"):
            actual = evaluate(case.program, pmapc.pmap, case.inputs)
    except Exception as error:
        if case.error is not None and isinstance(error, getattr(builtins, case.error)):
            return None
        return f"{case.name}: {type(error).__name__}: {first_line(error)}"
    if case.error is not None:
        return f"{case.name}: raised nothing; JAX 0.4.30 raised {case.error}"
    for key, want in case.expected.items():
        if key not in actual:
            return f"{case.name}/{key}: recorded, not returned"
        try:
            case.compare(np.asarray(actual[key]), want, f"{case.name}/{key}")
        except AssertionError as error:
            return f"{case.name}/{key}: {first_line(error)}"
    return None


def check_goldens(devices: Sequence, cases: Sequence[GoldenCase]) -> Row:
    """Check 1's row: how many of `cases` agree folded onto `devices`."""
    failures = tuple(f for f in (golden_failure(c, devices) for c in cases) if f is not None)
    return Row(
        "1 goldens folded",
        f"{len(cases)} recorded programs folded onto {len(devices)} {devices[0].platform} "
        "device, float32 matmuls",
        f"{len(cases) - len(failures)}/{len(cases)} agree",
        "JAX 0.4.30 nested jax.pmap (recorded)",
        "FAILED" if failures else "pass",
        failed=bool(failures),
        details=failures,
    )


# ----------------------------------------------------------------------------
# Check 2: compiled for 8 H100s by XLA:GPU, deviceless (any machine)


def compile_seconds(compile_once: Callable) -> tuple[float, str]:
    """Seconds of `compile_once()` (a `lower(...).compile()`), and the compiled HLO text."""
    start = time.perf_counter()
    compiled = compile_once()
    return time.perf_counter() - start, compiled.as_text()


def compile_row(program: targets.Program, devices: Sequence) -> Row:
    """pmapc's compile of a program for `devices` against `jax.jit(shard_map)`'s, with
    the collectives of each compiled HLO."""
    count = len(devices)
    ours_s, ours_hlo = compile_seconds(lambda: targets.compile_pmapc(program, devices))
    result = f"pmapc {ours_s:.2f} s; {collectives_summary(ours_hlo, count)}"
    name = f"compile {program.name}"
    if program.shard_fn is None:
        return Row(AOT_CHECK, name, result, "none (no shard_map)", "compiled")
    peer_s, peer_hlo = compile_seconds(lambda: targets.compile_shard_map(program))
    peer = f"jax.jit(shard_map) {peer_s:.2f} s; {collectives_summary(peer_hlo, count)}"
    return Row(AOT_CHECK, name, result, peer, f"ratio {ours_s / peer_s:.2f}")


def w4_chain(count: int, devices: Sequence) -> workloads.Workload:
    """W4's body (compile_scaling.chain_body): `count` psums alternating data/model."""
    body = compile_scaling.chain_body(count)
    name = f"W4 chain of {count} psums 2x4"
    return workloads.small_collectives(
        name, body, count // 2, width=compile_scaling.WIDTH, devices=devices
    )


def aot_programs(quick: bool, devices: Sequence) -> list[Callable[[], Row]]:
    """Check 2's programs for `devices` (8 of them), each a thunk that compiles it and
    gives its row: W1-W3 and W4 chains (benchmarks/), the examples (benchmarks/targets.py
    sizes them by their arguments), abstract arguments throughout."""
    builds = [
        lambda: workloads.mlp(2, 4, devices=devices),
        lambda: workloads.mlp(4, 2, devices=devices),
        lambda: workloads.unshard("sum", devices=devices),
        lambda: workloads.unshard("scale", devices=devices),
        lambda: workloads.latency_loop(devices=devices),
        *[functools.partial(w4_chain, n, devices) for n in ((10,) if quick else (10, 100))],
    ]
    programs = [lambda build=build: targets.from_workload(build(), devices) for build in builds]
    # quickstart and mlp_training, of one build of the examples for both rows
    examples = functools.cache(functools.partial(targets.example_programs, devices))
    programs += [lambda index=index: examples()[index] for index in (0, 1)]
    return [lambda program=program: compile_row(program(), devices) for program in programs]


def check_aot_compile(quick: bool) -> list[Row]:
    """Check 2's rows: every program compiled for 8 H100s by XLA:GPU on this machine
    (compiler/targets.py), or one row saying why this environment cannot."""
    missing = pmapc_targets.plugin_missing("gpu")
    if missing is not None:
        return [Row(AOT_CHECK, AOT_RAN, f"not run: {missing}", "-", "not run")]
    devices = pmapc.target_devices(AOT_TARGET)
    rows = []
    for thunk in aot_programs(quick, devices):
        rows += guarded(AOT_CHECK, lambda thunk=thunk: [thunk()])
    return rows


# ----------------------------------------------------------------------------
# Check 3: benchmarks/folded.py


def check_folded(quick: bool) -> list[Row]:
    """benchmarks/folded.py's W1-W3 folded onto one device against nested vmap."""
    with tempfile.TemporaryDirectory() as folder:
        results = Path(folder) / "folded.json"
        command = [sys.executable, str(ROOT / "benchmarks" / "folded.py"), "--counts", "1"]
        command += ["--json", str(results), *(["--quick"] if quick else [])]
        _, failure = run_child(command, CHILD_TIMEOUT_S)
        rows = folded_rows(json.loads(results.read_text())) if results.exists() else []
    if failure is not None or not rows:
        why = failure or "it printed no rows"
        ran = "benchmarks/folded.py --counts 1"
        rows.append(Row("3 folded vs vmap", ran, f"FAILED: {why}", "-", "FAILED", failed=True))
    return rows


# ----------------------------------------------------------------------------
# Check 4: eager dispatch; check 5: host callbacks


def psum_nest_body(v):
    return lax.psum(lax.psum(v, "model"), "data")


def dispatch_seconds(step: Callable, x, calls: int) -> tuple[float, float]:
    """Seconds until `calls` un-blocked calls returned, and until all were ready."""
    jax.block_until_ready(step(x))  # compiled and warm
    start = time.perf_counter()
    results = [step(x) for _ in range(calls)]
    returned = time.perf_counter() - start
    jax.block_until_ready(results)
    return returned, time.perf_counter() - start


def check_dispatch(devices: Sequence, calls: int = 200) -> Row:
    """Un-blocked calls of a folded 2x4 psum nest against its nested vmap under jit."""
    x = jax.device_put(np.arange(64, dtype=np.float32).reshape(2, 4, 8), devices[0])
    folded = pmapc.pmap(pmapc.pmap(psum_nest_body, "model"), "data")
    vmapped = jax.jit(jax.vmap(jax.vmap(psum_nest_body, axis_name="model"), axis_name="data"))
    with pmapc.fold_onto(devices):
        np.testing.assert_allclose(np.asarray(folded(x)), np.asarray(vmapped(x)), rtol=1e-6)
        ours_returned, ours = dispatch_seconds(folded, x, calls)
        peer_returned, peer = dispatch_seconds(vmapped, x, calls)
    return Row(
        "4 eager dispatch",
        f"{calls} un-blocked calls, folded 2x4 psum nest of f32[2,4,8]",
        f"all ready {ours * 1e3:.1f} ms (loop returned {ours_returned * 1e3:.1f} ms)",
        f"jax.jit(nested vmap) {peer * 1e3:.1f} ms (returned {peer_returned * 1e3:.1f} ms)",
        f"ratio {ours / peer:.2f}",
    )


GRID = np.arange(2 * 4 * 3, dtype=np.float32).reshape(2, 4, 3)


def check_pure_callback(devices: Sequence) -> Row:
    """`jax.pure_callback(np.sin)` in a folded 2x4 nest, against numpy. The fold batches
    the body, and JAX batches a pure_callback only with a `vmap_method` ("sequential":
    once per position, as nested pmap ran it)."""

    def body(y):
        shape = jax.ShapeDtypeStruct(y.shape, y.dtype)
        return jax.pure_callback(np.sin, shape, y, vmap_method="sequential") * lax.psum(
            1.0, ("data", "model")
        )

    with pmapc.fold_onto(devices):
        out = np.asarray(pmapc.pmap(pmapc.pmap(body, "model"), "data")(GRID))
    np.testing.assert_allclose(out, np.sin(GRID) * 8, rtol=1e-6)
    ran = 'folded 2x4 nest: jax.pure_callback(np.sin, vmap_method="sequential") * psum'
    return Row("5 host callbacks", ran, "as numpy", "numpy", "pass")


def check_debug_callback(devices: Sequence) -> Row:
    """`jax.debug.callback` in a folded 2x4 nest: once per position, with its block."""
    seen = []  # list.append is atomic: XLA may call back from several threads

    def body(y):
        jax.debug.callback(
            lambda *v: seen.append(tuple(np.asarray(a).tolist() for a in v)),
            lax.axis_index("data"),
            lax.axis_index("model"),
            y,
        )
        return y + 1

    with pmapc.fold_onto(devices):
        out = np.asarray(pmapc.pmap(pmapc.pmap(body, "model"), "data")(GRID))
    jax.effects_barrier()
    np.testing.assert_array_equal(out, GRID + 1)
    expected = [(d, m, GRID[d, m].tolist()) for d in range(2) for m in range(4)]
    if sorted(seen) != expected:
        raise AssertionError(f"{len(seen)} callbacks, not one per position: {seen[:3]}")
    ran = "folded 2x4 nest: jax.debug.callback(axis indices, block)"
    return Row("5 host callbacks", ran, "8 calls, each its block", "numpy", "pass")


# ----------------------------------------------------------------------------
# The driver


def gpu_checks(devices: Sequence, quick: bool) -> list[tuple[str, str, Callable[[], list[Row]]]]:
    """Each check: its number, its label and what runs it (check 5 in two parts)."""
    stride = 10 if quick else 1
    return [
        ("1", "1 goldens folded", lambda: [check_goldens(devices, golden_cases(stride))]),
        ("2", AOT_CHECK, lambda: check_aot_compile(quick)),
        ("3", "3 folded vs vmap", lambda: check_folded(quick)),
        ("4", "4 eager dispatch", lambda: [check_dispatch(devices)]),
        ("5", "5 host callbacks", lambda: [check_pure_callback(devices)]),
        ("5", "5 host callbacks", lambda: [check_debug_callback(devices)]),
    ]


def gpus() -> list:
    """The GPUs JAX finds (none: an empty list)."""
    try:
        return jax.devices("gpu")
    except RuntimeError:  # "Unknown backend: 'gpu' requested, ..."
        return []


def report(rows: Sequence[Row], card: str, quick: bool) -> None:
    """The header line, the table and, below it, each failure by name."""
    mode = " (--quick)" if quick else ""
    versions = f"JAX {jax.__version__}, pmapc {pmapc.__version__}"
    print(f"gpu_check{mode}: card {card}, {versions}")
    print()
    print(render_table(rows))
    for row in rows:
        if row.details:
            print(f"\n{row.check}: {len(row.details)} failed:")
            print("\n".join(f"- {detail}" for detail in row.details))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer programs and rounds")
    parser.add_argument("--checks", default="1,2,3,4,5", help="comma-separated check numbers")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    # the child processes share the one GPU: no process may take most of its memory
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    found = gpus()
    wanted = args.checks.split(",")
    if not found:
        print(no_gpu_line(jax.default_backend()))
        wanted = [number for number in wanted if number in AOT_ONLY]
    rows = []
    for number, label, run in gpu_checks(found[:1], args.quick):
        if number not in wanted:
            continue
        start = time.perf_counter()
        rows += guarded(label, run)
        print(f"gpu_check: {label}: {time.perf_counter() - start:.0f} s", file=sys.stderr)
    if rows:
        report(rows, found[0].device_kind if found else "none", args.quick)
    return 1 if any(row.failed for row in rows) else 0


def no_gpu_line(backend: str) -> str:
    return (
        f"gpu_check: no GPU found (jax backends: {backend}); running the checks that need "
        f"none ({', '.join(AOT_ONLY)})"
    )


if __name__ == "__main__":
    sys.exit(main())
