"""scripts/fuzz_ir.py itself: its mutations make the edits it says, its judge fails what
the issue counts as a crash (an escaped exception, another exit status, an unlocated
error, "a pmapc bug" for a bad input), and its worker turns a signal or a stall into a
failure of one mutant. (The CI budget is tests/py/test_robustness.py's.)"""

from __future__ import annotations

import os
import pathlib
import random
import signal
import sys
import time

import pytest

ROOT = pathlib.Path(__file__).parents[2]
sys.path.insert(0, str(ROOT / "scripts"))

import fuzz_ir  # noqa: E402

TEXT = (
    'module attributes {pmapc.mesh = {axis_names = ["i"], axis_sizes = array<i64: 4>}} {\n'
    "  func.func public @main(%arg0: tensor<4x8xf32>) -> tensor<4x8xf32> {\n"
    "    %0 = stablehlo.custom_call @pmapc.psum(%arg0) {api_version = 4 : i32, "
    'backend_config = {axes = ["i"], axis_index_groups = [[0, 1], [2, 3]]}} '
    ": (tensor<4x8xf32>) -> tensor<4x8xf32>\n"
    "    return %0 : tensor<4x8xf32>\n"
    "  }\n"
    "}\n"
)


def test_integers_change_in_attributes_only():
    for seed in range(200):
        mutated = fuzz_ir.change_integer(TEXT, random.Random(seed))
        assert mutated.count("tensor<4x8xf32>") == TEXT.count("tensor<4x8xf32>")
        assert "%arg0" in mutated and "api_version" in mutated


def test_a_dimension_changes_everywhere():
    changed = {fuzz_ir.change_dim_everywhere(TEXT, random.Random(seed)) for seed in range(50)}
    assert any("tensor<4x?xf32>" in text and "tensor<4x8xf32>" not in text for text in changed)
    assert any("tensor<?x8xf32>" in text and "tensor<4x8xf32>" not in text for text in changed)


def test_a_config_key_is_dropped_or_duplicated():
    dropped = {fuzz_ir.drop_config_key(TEXT, random.Random(seed)) for seed in range(50)}
    assert any("axis_index_groups" not in text for text in dropped)
    doubled = {fuzz_ir.duplicate_config_key(TEXT, random.Random(seed)) for seed in range(50)}
    assert any(text.count('axes = ["i"]') == 2 for text in doubled)


def test_own_pipelines_come_from_the_run_lines():
    text = (
        "// RUN: pmapc opt %s --pass-pipeline='builtin.module(lower-collectives)' | FileCheck %s\n"
        "// RUN: pmapc opt %s --pmapc-lower --split-input-file | FileCheck %s\n"
        "// RUN: pmapc plan %s | FileCheck %s\n"
    )
    assert fuzz_ir.own_pipelines(text) == (
        "--pass-pipeline=builtin.module(lower-collectives)",
        "--pmapc-lower",
    )
    assert fuzz_ir.own_pipelines("") == (fuzz_ir.DEFAULT_PIPELINE,)


@pytest.mark.parametrize(
    "outcome, problem",
    [
        (fuzz_ir.Outcome(0, "module {}", ""), None),
        (fuzz_ir.Outcome(1, "", "/tmp/m.mlir:3:10: error: 'psum' names axis 'i' twice"), None),
        (fuzz_ir.Outcome(1, "", "pmapc plan: error: pass 'x' failed"), "unlocated error"),
        (fuzz_ir.Outcome(1, "", "/tmp/m.mlir:1:1: error: x\nnote: this is a pmapc bug"), "bug"),
        (fuzz_ir.Outcome(1, "", "pmapc: internal error: IndexError"), "unlocated error"),
        (fuzz_ir.Outcome(1, "", "nothing said"), "without an error"),
        (fuzz_ir.Outcome(2, "", "usage: ..."), "exit code 2"),
    ],
)
def test_the_judge(outcome, problem):
    verdict = fuzz_ir.judge(outcome)
    if problem is None:
        assert verdict is None
    else:
        assert verdict is not None and problem in verdict


def serve_badly(connection) -> None:
    """A worker that crashes on mutant 1 (a signal), stalls on 2 and passes the rest."""
    connection.send(0)
    while True:
        mutant_seed = connection.recv()
        if mutant_seed is None:
            return
        if mutant_seed == 1:
            os.kill(os.getpid(), signal.SIGSEGV)
        if mutant_seed == 2:
            time.sleep(60)
        connection.send([])


def test_the_worker_reports_a_signal_or_a_stall_and_goes_on():
    worker = fuzz_ir.Worker(serve_badly, time_limit=5)
    try:
        results = [worker.check(seed) for seed in (0, 1, 3, 2, 4)]
    finally:
        worker.close()
    assert results == [
        [],
        [f"the worker ended with signal {signal.SIGSEGV.value}"],
        [],
        ["no result within 5 s"],
        [],
    ]
