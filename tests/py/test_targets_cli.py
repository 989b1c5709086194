"""`pmapc trace ... --topology NAME` and `pmapc plan IN.mlir --topology NAME`: compiled
for a TPU pod slice or a GPU machine by name, on this CPU machine, showing what
XLA:TPU or XLA:GPU runs (tools/trace_cmd.py, tools/plan_cmd.py); and `--arg` as an
abstract value, traced in constant memory (issue 43's `--arg` item).

The targets skip (or, where PMAPC_REQUIRE_TARGETS names the platform as in CI, fail)
where the plugin of their platform is missing, as in test_targets.py.
"""

from __future__ import annotations

import pathlib
import subprocess
import sys
import textwrap

import jax
import pytest
from test_targets import devices_of, hlo_axes

from pmapc.compiler import targets
from pmapc.mesh import Mesh
from pmapc.tools import trace_cmd
from pmapc.tools.main import main

ROOT = pathlib.Path(__file__).resolve().parents[2]
QUICKSTART = f"{ROOT / 'examples' / 'quickstart.py'}:step"
NESTED = str(ROOT / "examples" / "nested_2x4.mlir")


def run(argv: list[str], capsys) -> tuple[int, str, str]:
    code = main(argv)
    captured = capsys.readouterr()
    return code, captured.out, captured.err


@pytest.mark.parametrize("name", ["tpu:v5e:2x4", "gpu:h100:1x1x8"])
def test_trace_emits_the_hlo_the_target_s_compiler_made(name, capsys):
    devices_of(name)
    code, out, err = run(
        ["trace", QUICKSTART, "--arg", "f32[2,4,3]", "--topology", name, "--emit=hlo"], capsys
    )
    assert code == 0, err
    axes = hlo_axes(out, Mesh(("data", "model"), (2, 4)))
    assert axes and all(names is not None for _, names in axes)  # mesh-axis groups
    assert "is_scheduled=true" in out.splitlines()[0]  # compiled and scheduled, not lowered


@pytest.mark.parametrize("name", ["tpu:v5e:2x4", "gpu:h100:1x1x8"])
def test_debuginfo_with_a_topology_emits_the_compiled_hlo_naming_the_lines(name, capsys):
    """`--mlir-print-debuginfo` prints what `--topology`'s help promises, the HLO the
    target's compiler made and scheduled, with the user's file among its locations."""
    devices_of(name)
    argv = ["trace", QUICKSTART, "--arg", "f32[2,4,3]", "--topology", name, "--emit=hlo"]
    code, out, err = run([*argv, "--mlir-print-debuginfo"], capsys)
    assert code == 0, err
    assert "is_scheduled=true" in out.splitlines()[0]  # compiled and scheduled, not lowered
    assert str(ROOT / "examples" / "quickstart.py") in hlo_file_names(out)


def hlo_file_names(hlo: str) -> list[str]:
    """The files of an HLO module's `FileNames` table (`1 "/path/f.py"` a line, up to
    a blank line): the files its stack frames name."""
    lines = hlo.splitlines()
    start = lines.index("FileNames") + 1
    table = lines[start : lines.index("", start)]
    return [line.split(" ", 1)[1].strip('"') for line in table]


@pytest.mark.parametrize("name", ["tpu:v5p:4x4x4", "gpu:h100:1x2x8"])
def test_trace_plans_with_what_the_target_runs(name, capsys):
    devices_of(name)
    argv = ["trace", QUICKSTART, "--arg", "f32[4,4,3]", "--topology", name, "--emit=plan"]
    code, out, err = run(argv, capsys)
    assert code == 0, err
    assert "mesh data=4xmodel=4 (16 devices)" in out
    assert "what XLA runs (the HLO it compiled and scheduled):" in out


def test_the_plan_of_a_two_slice_pod_splits_its_bytes_by_link(capsys, tmp_path):
    """`--topology tpu:v5e:4x4:slices=2` through both commands: the table counts the
    hosts and slices each collective's groups span, and XLA's transfers between the
    slices are listed as theirs; `--svg` marks the boundaries."""
    devices_of("tpu:v5e:4x4:slices=2")
    svg = tmp_path / "plan.svg"
    argv = ["trace", QUICKSTART, "--arg", "f32[2,16,3]", "--topology", "tpu:v5e:4x4:slices=2"]
    code, out, err = run([*argv, "--emit=plan", "--svg", str(svg)], capsys)
    assert code == 0, err
    assert "devices on 8 hosts in 2 slices" in out
    assert "(DCN)" in out and "XLA per run by link: in host " in out
    assert 'class="slice-boundary"' in svg.read_text()
    module = tmp_path / "nest.mlir"
    assert run([*argv[:4], "-o", str(module)], capsys)[0] == 0
    code, planned, err = run(["plan", str(module), "--topology", "tpu:v5e:4x4:slices=2"], capsys)
    assert code == 0, err
    assert "pmapc per run by link: " in planned and "across slices" in planned


def test_a_slice_count_that_is_not_one_is_a_one_line_error(capsys):
    argv = ["trace", QUICKSTART, "--arg", "f32[2,4,3]", "--topology", "tpu:v5e:2x4:slices=two"]
    code, out, err = run(argv, capsys)
    assert code == 1 and out == ""
    assert err.strip() == (
        "pmapc trace: error: target 'tpu:v5e:2x4:slices=two': 'slices=two' is not a slice "
        "count; write slices=N, e.g. tpu:v5e:4x4:slices=2"
    )


def test_plan_compiles_a_module_for_a_topology(capsys):
    devices_of("tpu:v5p:4x4x4")
    code, out, err = run(["plan", NESTED, "--topology", "tpu:v5p:4x4x4"], capsys)
    assert code == 0, err
    assert "what XLA runs" in out and "all-reduce" in out


def test_a_fold_larger_than_the_topology_names_the_fold(capsys):
    devices_of("tpu:v5e:2x4")
    argv = ["trace", QUICKSTART, "--arg", "f32[2,4,3]", "--topology", "tpu:v5e:2x4"]
    code, out, err = run([*argv, "--fold-onto", "16"], capsys)
    assert code == 1 and out == ""
    assert err.strip() == (
        "pmapc trace: error: --fold-onto 16 needs 16 devices, but the topology 'tpu:v5e:2x4' "
        "has 8; fold onto at most 8, or name a larger topology"
    )


def test_a_mesh_larger_than_the_topology_names_the_mesh(capsys, tmp_path):
    devices_of("tpu:v5e:2x4")
    module = tmp_path / "nest_4x4.mlir"
    traced = ["trace", QUICKSTART, "--arg", "f32[4,4,3]", "-o", str(module)]
    assert run(traced, capsys)[0] == 0
    code, out, err = run(["plan", str(module), "--topology", "tpu:v5e:2x4"], capsys)
    assert code == 1 and out == ""
    assert err.strip() == (
        "pmapc plan: error: the mesh data=4xmodel=4 needs 16 devices, but the topology "
        "'tpu:v5e:2x4' has 8; name a larger one"
    )


def test_an_unknown_topology_is_one_line(capsys):
    code, out, err = run(["plan", NESTED, "--topology", "tpu-v5e-2x4"], capsys)
    assert code == 1 and out == ""
    assert err.strip() == (
        "pmapc plan: error: unknown target 'tpu-v5e-2x4'; name one as "
        "PLATFORM:KIND:TOPOLOGY[:slices=N], "
        f"e.g. {targets.EXAMPLES}"
    )


def test_a_missing_plugin_names_the_package_to_install(capsys, monkeypatch):
    monkeypatch.setitem(targets.PLUGINS, "tpu", ("pmapc_no_such_module", "libtpu"))
    argv = ["trace", QUICKSTART, "--arg", "f32[2,4,3]", "--topology", "tpu:v5e:9x9"]
    code, _, err = run(argv, capsys)
    assert code == 1
    assert err.strip() == (
        "pmapc trace: error: target 'tpu:v5e:9x9': compiling for TPU needs libtpu, which "
        "is not installed: pip install 'pmapc[targets]' installs it"
    )


def test_a_cuda_plugin_of_another_release_names_the_one_to_install(monkeypatch):
    versions = {"jax-cuda12-pjrt": "0.12.0.1", "jaxlib": "0.10.2"}
    monkeypatch.setattr(targets, "_has_module", lambda module: True)
    monkeypatch.setattr(targets, "_installed", versions.get)
    assert targets.plugin_missing("gpu") == (
        "jax-cuda12-pjrt 0.12.0.1 is installed, but compiling for GPU needs the release of "
        "jaxlib 0.10.2: pip install jax-cuda12-pjrt==0.10.2"
    )


# ----------------------------------------------------------------------------
# --arg is a shape


def test_an_arg_is_an_abstract_value():
    value = trace_cmd.parse_arg("f32[256,256,1024,1024]")
    assert isinstance(value, jax.ShapeDtypeStruct)
    assert value.shape == (256, 256, 1024, 1024) and value.dtype == jax.numpy.float32


BIG = textwrap.dedent(
    """\
    import jax
    import pmapc


    def body(x):
        return jax.lax.psum(x, "model") * 2


    big = pmapc.pmap(pmapc.pmap(body, "model"), "data")
    """
)

# A child process traces FILE.py:big and prints its peak resident memory (KiB).
CHILD = textwrap.dedent(
    """\
    import contextlib, io, resource, sys
    from pmapc.tools.main import main
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["trace", sys.argv[1], "--arg", sys.argv[2], "--emit=spmd"])
    assert code == 0, code
    print(out.getvalue().count(sys.argv[3]), resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
    """
)


def peak_memory(tmp_path: pathlib.Path, arg: str, block: str) -> tuple[int, int]:
    """(times `block` appears in the SPMD IR, peak RSS in KiB) of tracing `arg`."""
    source = tmp_path / "big.py"
    source.write_text(BIG)
    done = subprocess.run(
        [sys.executable, "-c", CHILD, f"{source}:big", arg, block],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    count, rss = done.stdout.split()
    return int(count), int(rss)


def test_a_256_gib_argument_traces_in_the_memory_of_a_small_one(tmp_path):
    """`pmapc trace F.py:big --arg f32[256,256,1024,1024] --emit=spmd`: 4 MiB a device on
    a 256x256 nest; the global array (256 GiB) is never made, so the peak memory is a
    small nest's, whose global array is as big as one block."""
    small_count, small = peak_memory(tmp_path, "f32[2,2,1024,1024]", "tensor<1x1x1024x1024xf32>")
    big_count, big = peak_memory(tmp_path, "f32[256,256,1024,1024]", "tensor<1x1x1024x1024xf32>")
    assert small_count > 0 and big_count > 0  # both per-device programs take a 4 MiB block
    assert big < small + 256 * 1024, (big, small)  # within 256 MiB; the array is 256 GiB


GUIDE, README = ROOT / "docs" / "guide.md", ROOT / "README.md"
TWO_HOSTS_PLAN = (
    "pmapc trace examples/quickstart.py:step --arg 'f32[2,8,1024]' --topology gpu:h100:1x2x8 "
    "--emit=plan"
)


def test_the_docs_show_the_two_host_plan_the_command_prints(capsys):
    """README's and the guide's copies of the 2-host plan (their lines by link and the
    hint; a line cut short with '...' up to the cut) are what the command prints."""
    devices_of("gpu:h100:1x2x8")
    argv = ["trace", QUICKSTART, "--arg", "f32[2,8,1024]", "--topology", "gpu:h100:1x2x8"]
    code, out, err = run([*argv, "--emit=plan"], capsys)
    assert code == 0, err
    printed = out.replace(str(ROOT) + "/", "").splitlines()
    for doc in (GUIDE, README):
        text = doc.read_text()
        shown = text[text.index(TWO_HOSTS_PLAN) :].split("```", 3)[2].splitlines()
        checked = [line for line in shown if line.startswith(("pmapc per run", "XLA per", "hint:"))]
        assert len(checked) >= 2, doc
        for line in checked:
            head = line.split(" ...", 1)[0]
            assert any(p.startswith(head) for p in printed), f"{doc.name}: {line}"
