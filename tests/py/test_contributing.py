"""The pass CONTRIBUTING.md shows as the new style runs as written.

The code block under "Adding a pass" is read from CONTRIBUTING.md and run on a
module with a chain of reshapes: the chain folds into one reshape of the
argument, and the op index the pass kept by listening to its rewriter equals a
fresh walk.
"""

import dataclasses
import pathlib
import re
from typing import ClassVar

import pytest

from pmapc import hlo, ir
from pmapc.passes import KEPT_ANALYSES, manager, patterns
from pmapc.passes.base import Analyses, Analysis, run_pass
from pmapc.passes.op_index import index_of, op_index
from pmapc.rewriter import Rewriter

CONTRIBUTING = pathlib.Path(__file__).parents[2] / "CONTRIBUTING.md"

CHAIN = """
module @chain attributes {mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 1 : i32} {
  func.func public @main(%x: tensor<2x6xf32>) -> tensor<3x4xf32> {
    %0 = stablehlo.reshape %x : (tensor<2x6xf32>) -> tensor<12xf32>
    %1 = stablehlo.reshape %0 : (tensor<12xf32>) -> tensor<4x3xf32>
    %2 = stablehlo.reshape %1 : (tensor<4x3xf32>) -> tensor<3x4xf32>
    return %2 : tensor<3x4xf32>
  }
}
"""


def example_pass():
    """The class the "Adding a pass" code block defines."""
    section = CONTRIBUTING.read_text().split("## Adding a pass", 1)[1]
    code = re.search(r"```python\n(.*?)```", section, re.DOTALL)
    assert code is not None, "CONTRIBUTING.md's 'Adding a pass' has no python block"
    names = {
        "dataclasses": dataclasses,
        "ClassVar": ClassVar,
        "ir": ir,
        "hlo": hlo,
        "patterns": patterns,
        "Analyses": Analyses,
        "Analysis": Analysis,
        "op_index": op_index,
        "Rewriter": Rewriter,
        "index_of": index_of,
    }
    exec(compile(code.group(1), str(CONTRIBUTING), "exec"), names)
    return next(value for name, value in names.items() if name.endswith("Pass"))


def test_the_example_pass_is_short():
    source = CONTRIBUTING.read_text().split("## Adding a pass", 1)[1]
    code = re.search(r"```python\n(.*?)```", source, re.DOTALL)
    assert code is not None
    assert len([line for line in code.group(1).splitlines() if line.strip()]) < 20


@pytest.fixture
def chain():
    return ir.parse_module(CHAIN, ir.make_context())


def test_the_example_pass_folds_a_chain_of_reshapes(chain):
    analyses = Analyses(KEPT_ANALYSES)
    analyses.get(op_index, chain)  # at hand, so the pass keeps it current
    with ir.building(chain):
        assert run_pass(example_pass()(), chain, analyses)
    ir.verify(chain)

    reshapes = op_index(chain).ops("stablehlo.reshape")
    assert len(reshapes) == 1
    (argument,) = ir.functions(chain)["main"].regions[0].blocks[0].arguments
    assert reshapes[0].operands[0] == argument
    preserved = analyses.preserved()
    assert op_index in preserved
    assert manager.holds(op_index, preserved[op_index], chain)
