"""Registry invariants: names match, every pass documents itself and has lit tests."""

import ast
import dataclasses
import pathlib
import re

import pytest

from pmapc.compiler.pipeline import (
    PIPELINES,
    WITHOUT_OPTIONS,
    default_pipeline,
    describe,
    lowering_pipeline,
    parse_pipeline,
)
from pmapc.errors import PipelineError
from pmapc.passes import DEFAULT_TARGET, PASSES, TARGETS
from pmapc.passes.base import summary
from pmapc.passes.manager import UpstreamPass

ROOT = pathlib.Path(__file__).parents[2]
LIT_PASSES = ROOT / "tests" / "lit" / "passes"


@pytest.mark.parametrize("name", list(PASSES))
def test_registry_key_is_pass_name(name):
    assert PASSES[name].name == name


@pytest.mark.parametrize("name", list(PASSES))
def test_pass_is_frozen_dataclass_with_summary(name):
    pass_class = PASSES[name]
    assert dataclasses.is_dataclass(pass_class)
    assert pass_class.__dataclass_params__.frozen
    assert summary(pass_class)


# Passes that report user errors; each has a `-invalid.mlir` file of diagnostics.
# The optimization passes only rewrite what they recognize and report nothing.
PASSES_WITH_DIAGNOSTICS = [
    "verify-axes",
    "flatten-maps",
    "lower-collectives",
    "to-partitions",
    "to-replicas",
]


@pytest.mark.parametrize("name", list(PASSES))
def test_pass_has_lit_tests(name):
    assert (LIT_PASSES / f"{name}.mlir").is_file()


@pytest.mark.parametrize("name", PASSES_WITH_DIAGNOSTICS)
def test_pass_has_diagnostic_tests(name):
    assert (LIT_PASSES / f"{name}-invalid.mlir").is_file()


def test_pass_file_named_after_pass():
    for name, pass_class in PASSES.items():
        assert pass_class.__module__.endswith(name.replace("-", "_"))


# What may follow the target pass: passes that keep the execution form.
KEEP_THE_FORM = ("fold-reshapes", "canonicalize", "cse")
# The named pipelines that end in a target pass (`simplify` only simplifies).
TO_A_TARGET = [name for name in PIPELINES if name not in WITHOUT_OPTIONS]


@pytest.mark.parametrize("target", list(TARGETS))
@pytest.mark.parametrize("name", TO_A_TARGET)
def test_named_pipelines_are_registered_passes_that_put_the_program_in_the_target_form(
    name, target
):
    passes = PIPELINES[name](target)
    assert all(isinstance(p, UpstreamPass) or PASSES[p.name] is type(p) for p in passes)
    assert [p.name for p in parse_pipeline(describe(name, target))] == [p.name for p in passes]
    assert [p.name for p in parse_pipeline(f"{name}{{target={target}}}")] == [
        p.name for p in passes
    ]
    names = [p.name for p in passes]
    assert [n for n in names if n in {t.name for t in TARGETS.values()}] == [TARGETS[target].name]
    after = names[names.index(TARGETS[target].name) + 1 :]
    assert all(n in KEEP_THE_FORM for n in after)


def test_pipelines_default_to_partitions():
    assert DEFAULT_TARGET == "partitions"
    for name in [*TO_A_TARGET, None]:
        names = [p.name for p in (parse_pipeline(name) if name else default_pipeline())]
        assert "to-partitions" in names and "to-replicas" not in names


def test_lowering_pipeline_keeps_the_default_order():
    order = [p.name for p in default_pipeline()]
    lowering = [p.name for p in lowering_pipeline()]
    assert lowering == [name for name in order if name in lowering]
    assert lowering == [
        "verify-axes",
        "flatten-maps",
        "predicate-divergent",
        "lower-collectives",
        "to-partitions",
    ]


def test_every_pass_is_in_a_pipeline():
    in_pipelines = {
        p.name
        for target in TARGETS
        for p in default_pipeline(target)
        if not isinstance(p, UpstreamPass)
    }
    assert in_pipelines == set(PASSES)


def test_docs_list_the_passes_in_pipeline_order():
    """docs/ir.md's passes table follows default_pipeline (the other target beside)."""
    table = (ROOT / "docs" / "ir.md").read_text().split("## The passes", 1)[1]
    documented = re.findall(r"^\| `([a-z-]+)[`{]", table, flags=re.M)
    order = [p.name for p in default_pipeline("partitions") if not isinstance(p, UpstreamPass)]
    order.insert(order.index("to-partitions") + 1, "to-replicas")
    assert documented[: len(order)] == order
    assert documented[len(order) :] == list(PIPELINES)


def test_pipeline_options_are_typed():
    (flatten,) = parse_pipeline("builtin.module(flatten-maps{split-entry=false})")
    assert flatten.split_entry is False
    (to_partitions,) = parse_pipeline("to-partitions{first-channel=7}")
    assert to_partitions.first_channel == 7


@pytest.mark.parametrize(
    ("pipeline", "message"),
    [
        ("no-such-pass", "unknown pass 'no-such-pass'"),
        ("flatten-maps{bogus=1}", "has no option 'bogus'"),
        ("flatten-maps{split-entry=maybe}", "takes true or false"),
        ("verify-axes,,", "malformed pass pipeline"),
        ("pmapc-lower{bogus=1}", "pipeline 'pmapc-lower' has no option 'bogus'"),
        ("pmapc-to-stablehlo{target=gpu}", "takes partitions or replicas, got 'gpu'"),
        ("to-partitions{first-channel=0}", "must be at least 1, got 0"),
        ("to-replicas{first-channel=1}", "has no option 'first-channel'"),
        (
            "lower-collectives{ragged=padded}",
            "'ragged' of pass 'lower-collectives' takes native or",
        ),
        ("pmapc-lower{ragged=padded}", "'ragged' of pipeline 'pmapc-lower' takes native or"),
        ("simplify{target=replicas}", "pipeline 'simplify' takes no options, got 'target'"),
    ],
)
def test_bad_pipelines_are_named(pipeline, message):
    with pytest.raises(PipelineError, match=message):
        parse_pipeline(pipeline)


PACKAGE_DIRS = ("pmapc", "compiler", "passes", "lowering", "tools")
BINDINGS = ("jaxlib.mlir", "jax._src.lib.mlir")


def imported_modules(path: pathlib.Path) -> set[str]:
    tree = ast.parse(path.read_text(), str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
    return names


def test_only_the_adapter_imports_the_mlir_bindings():
    root = pathlib.Path(__file__).resolve().parents[2]
    importers = sorted(
        str(path.relative_to(root))
        for directory in PACKAGE_DIRS
        for path in (root / directory).rglob("*.py")
        if any(module.startswith(BINDINGS) for module in imported_modules(path))
    )
    assert importers and all(path.startswith("pmapc/ir/") for path in importers), importers


def names_used(path: pathlib.Path) -> set[str]:
    """The names and attribute names a module's code refers to (not its comments)."""
    tree = ast.parse(path.read_text(), str(path))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            names.add(node.id)
        elif isinstance(node, ast.Attribute):
            names.add(node.attr)
    return names


def test_passes_take_op_identities_from_the_index_and_the_rewriter():
    """A pass never reads an op's identity (`ir.op_key`) itself: the rewriter
    (pmapc/rewriter.py) and the op index read it once and hand it on (op-index
    entries, listener events)."""
    readers = sorted(
        path.name for path in (ROOT / "passes").glob("*.py") if "op_key" in names_used(path)
    )
    assert readers == ["op_index.py"]
    assert "op_key" in names_used(ROOT / "pmapc" / "rewriter.py")
