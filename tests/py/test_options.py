"""The compiler's options as types (pmapc/options.py): read once where they enter."""

from __future__ import annotations

import numpy as np
import pytest

import pmapc
from pmapc import options
from pmapc.compiler.pipeline import parse_pipeline
from pmapc.errors import PipelineError
from pmapc.options import GroupForm, Target
from pmapc.passes.to_partitions import ToPartitionsPass


def test_members_are_their_pipeline_text():
    assert Target.PARTITIONS == "partitions" and str(Target.REPLICAS) == "replicas"
    assert options.choices(GroupForm) == ["named", "dense"]
    assert options.parse(Target, "replicas") is Target.REPLICAS
    assert options.parse(Target, Target.PARTITIONS) is Target.PARTITIONS
    assert options.parse(GroupForm, "sparse") is None


def test_a_pipeline_string_gives_typed_options():
    *_, to_partitions, _fold, _canonicalize, _cse = parse_pipeline(
        "pmapc-to-stablehlo{replica-groups=dense}"
    )
    assert to_partitions.replica_groups is GroupForm.DENSE
    (pass_,) = parse_pipeline("to-partitions{replica-groups=named}")
    assert pass_.replica_groups is GroupForm.NAMED


def test_a_pass_built_in_python_reads_its_option_once():
    assert ToPartitionsPass(replica_groups="dense").replica_groups is GroupForm.DENSE  # type: ignore[arg-type]
    with pytest.raises(PipelineError, match="takes named or dense, got 'sparse'"):
        ToPartitionsPass(replica_groups="sparse")  # type: ignore[arg-type]


def test_lower_reads_its_options_where_they_enter():
    f = pmapc.pmap(lambda v: v, axis_name="i")
    x = np.ones((2, 3), np.float32)
    assert pmapc.lower(f, x, target="replicas").as_text().count("mhlo.num_replicas = 2") == 1
    with pytest.raises(pmapc.ArgumentError, match="target= takes 'partitions' or 'replicas'"):
        pmapc.lower(f, x, target="gpu")
