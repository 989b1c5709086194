"""The `pmapc` command: opt, trace and run, in-process (main(argv) -> int)."""

import pathlib
import subprocess
import sys
import textwrap
from importlib import metadata

import numpy as np
import pytest

import pmapc
from pmapc.compiler import xla
from pmapc.tools.main import main

ROOT = pathlib.Path(__file__).parents[2]
EXAMPLE_IR = ROOT / "examples" / "nested_2x4.mlir"
QUICKSTART = ROOT / "examples" / "quickstart.py"


def test_opt_lowers_the_example(capsys):
    assert main(["opt", str(EXAMPLE_IR), "--pmapc-to-stablehlo"]) == 0
    out = capsys.readouterr().out
    assert 'sdy.mesh @mesh = <["data"=2, "model"=4]>' in out
    assert 'mesh = @mesh, axes = [#stablehlo.axis_ref<name = "model">]' in out
    assert 'mesh = @mesh, axes = [#stablehlo.axis_ref<name = "data">]' in out
    assert "mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32" in out
    assert "channel_handle" in out and "use_global_device_ids" in out
    assert "pmapc.psum" not in out


def test_opt_lowers_the_example_for_replicas(capsys):
    argv = ["opt", str(EXAMPLE_IR), "--pass-pipeline=pmapc-to-stablehlo{target=replicas}"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "[[0, 4], [1, 5], [2, 6], [3, 7]]" in out
    assert "mhlo.num_partitions = 1 : i32, mhlo.num_replicas = 8 : i32" in out
    assert "channel_handle" not in out


def test_opt_malformed_module_is_one_diagnostic(tmp_path, capsys):
    bad = tmp_path / "bad.mlir"
    bad.write_text("module {\n  func.func @main( {\n}\n")
    assert main(["opt", str(bad)]) == 1
    err = capsys.readouterr().err
    assert err.startswith(f"{bad}:2:")
    assert "error:" in err and "Traceback" not in err


def test_opt_unbound_axis_points_at_op(tmp_path, capsys):
    text = EXAMPLE_IR.read_text().replace('axes = ["data"]', 'axes = ["rows"]')
    path = tmp_path / "unbound.mlir"
    path.write_text(text)
    assert main(["opt", str(path), "--verify-axes"]) == 1
    err = capsys.readouterr().err
    line = next(n for n, text_line in enumerate(text.splitlines(), 1) if '"rows"' in text_line)
    assert f"{path}:{line}:" in err
    assert "axis 'rows' is not bound here; bound axes are 'data'" in err


def test_opt_missing_file(capsys):
    assert main(["opt", "/no/such/file.mlir"]) == 1
    assert "could not open input file" in capsys.readouterr().err


def test_trace_prints_pmapc_ir(capsys):
    assert main(["trace", f"{QUICKSTART}:step", "--arg", "f32[2,4,3]"]) == 0
    out = capsys.readouterr().out
    assert "@pmapc.map" in out and 'axis_name = "model"' in out


def test_trace_emits_spmd(capsys):
    assert main(["trace", f"{QUICKSTART}:step", "--arg", "f32[2,4,3]", "--emit=spmd"]) == 0
    assert "stablehlo.all_reduce" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["trace", "nofile.py:f", "--arg", "f32[2]"], "no such file"),
        (
            ["trace", f"{ROOT / 'examples' / 'nested_2x4.mlir'}:f", "--arg", "f32[2]"],
            "nested_2x4.mlir: error: Python cannot load this file as a module; name a .py file",
        ),
        (
            ["trace", f"{QUICKSTART}:missing", "--arg", "f32[2]"],
            "quickstart.py: error: no top-level function 'missing' in this file; "
            "its functions are step, main",
        ),
        (
            ["trace", f"{QUICKSTART}:main", "--arg", "f32[2]"],
            "TypeError: main() takes 0 positional arguments but 1 was given",
        ),
        (["trace", f"{QUICKSTART}:step", "--arg", "float[2]"], "bad --arg"),
        (
            ["trace", f"{QUICKSTART}:step", "--arg", "f33[2,4]"],
            "bad --arg 'f33[2,4]': there is no dtype 'f33'",
        ),
        (["trace", f"{QUICKSTART}:step", "--arg", "f32[2]"], "args[0] is a scalar"),
    ],
)
def test_trace_errors(argv, message, capsys):
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


@pytest.mark.parametrize("flag", ["--version", "-V"])
def test_version_is_the_installed_packages(flag, capsys):
    """One version, pyproject.toml's, read from the installed metadata by both."""
    assert main([flag]) == 0
    installed = metadata.version("pmapc")
    assert pmapc.__version__ == installed
    out = capsys.readouterr().out
    assert out.startswith(f"pmapc {installed} (jax {metadata.version('jax')}, jaxlib ")
    assert "--version" in main_usage(capsys)


def main_usage(capsys) -> str:
    assert main(["--help"]) == 0
    return capsys.readouterr().out


PRINTS_AT_IMPORT = """
    import os
    from functools import partial

    import jax

    import pmapc

    print("printed at import")
    os.write(1, b"written to fd 1 at import\\n")


    @partial(pmapc.pmap, axis_name="data", static_broadcasted_argnums=1)
    def step(x, scale):
        print("printed while tracing")
        return jax.lax.psum(x * scale, "data")


    def rows(x, count, how):
        return step(x.reshape(count, -1), {"double": 2.0, "half": 0.5}[how])
"""


@pytest.fixture
def prints_at_import(tmp_path) -> pathlib.Path:
    path = tmp_path / "prints_at_import.py"
    path.write_text(textwrap.dedent(PRINTS_AT_IMPORT))
    return path


def test_trace_stdout_holds_only_the_ir(prints_at_import, tmp_path, capfd):
    """What the traced file prints goes to stderr: `pmapc trace f.py:g > a.mlir &&
    pmapc opt a.mlir` works."""
    argv = ["trace", f"{prints_at_import}:step", "--arg", "f32[2,4]", "--static", "1=3.0"]
    assert main(argv) == 0
    out, err = capfd.readouterr()
    assert out.startswith("module @step {")
    assert "printed" not in out and "written" not in out
    for printed in ("printed at import", "written to fd 1 at import", "printed while tracing"):
        assert printed in err
    traced = tmp_path / "a.mlir"
    traced.write_text(out)
    assert main(["opt", str(traced), "--pmapc-to-stablehlo"]) == 0
    assert "stablehlo.all_reduce" in capfd.readouterr().out


@pytest.mark.parametrize(
    ("function", "arguments", "expected"),
    [
        # A pmapc.pmap function's static_broadcasted_argnums.
        ("step", ["--arg", "f32[2,4]", "--static", "1=3.0"], "stablehlo.constant dense<3.0"),
        # A plain function's static arguments, anywhere among the --args.
        (
            "rows",
            ["--arg", "f32[8]", "--static", "1=4", "--static", "2='half'"],
            "(tensor<8xf32>) -> tensor<4x2xf32>",
        ),
        (
            "rows",
            ["--static", "2='double'", "--arg", "f32[8]", "--static", "1=2"],
            "(tensor<8xf32>) -> tensor<2x4xf32>",
        ),
    ],
)
def test_trace_static_arguments(function, arguments, expected, prints_at_import, capsys):
    assert main(["trace", f"{prints_at_import}:{function}", *arguments]) == 0
    assert expected in capsys.readouterr().out


def line_of(path: pathlib.Path, text: str) -> int:
    return next(n for n, line in enumerate(path.read_text().splitlines(), 1) if text in line)


@pytest.mark.parametrize(
    ("function", "arguments", "where", "message"),
    [
        ("stpe", [], "", "no top-level function 'stpe' in this file; did you mean 'step' (line "),
        ("step", ["--static", "1=x"], "def step", "bad --static '1=x': 'x' is not a Python"),
        ("step", ["--static", "1=[1]"], "def step", "a static argument must be hashable"),
        ("step", ["--static=-1=2"], "def step", "write INDEX=VALUE, INDEX counted from 0"),
        ("step", ["--static", "1=2", "--static", "1=3"], "def step", "gives argument 1 twice"),
        ("step", [], "def step", "give argument 1 a value with --static 1=VALUE"),
        ("rows", ["--arg", "f32[8]", "--static", "5=2"], "def rows", "would leave a gap"),
        (
            "rows",
            ["--arg", "f32[8]", "--static", "1=3", "--static", "2='half'"],
            "return step",
            "TypeError: cannot reshape array of shape (8,) (size 8) into shape (3, -1)",
        ),
    ],
)
def test_trace_errors_name_the_users_line(
    function, arguments, where, message, prints_at_import, capsys
):
    assert main(["trace", f"{prints_at_import}:{function}", *arguments]) == 1
    err = capsys.readouterr().err.splitlines()[-1]
    line = f":{line_of(prints_at_import, where)}" if where else ""
    assert err.startswith(f"{prints_at_import}{line}:")
    assert ": error: " in err and message in err


def test_lit_can_time_out_a_test():
    """lit applies tests/lit/lit.cfg.py's per-test timeout only with psutil, which the
    test extras install."""
    import lit.util

    test_extra = [r for r in metadata.requires("pmapc") or [] if 'extra == "test"' in r]
    assert any(r.startswith("psutil") for r in test_extra)
    assert lit.util.killProcessAndChildrenIsSupported()[0]


def test_run_writes_results(tmp_path, capsys):
    x = np.arange(64, dtype=np.float32).reshape(2, 4, 8)
    np.save(tmp_path / "x.npy", x)
    assert (
        main(
            [
                "run",
                str(EXAMPLE_IR),
                "--input",
                str(tmp_path / "x.npy"),
                "-o",
                str(tmp_path / "out"),
            ]
        )
        == 0
    )
    result = np.load(tmp_path / "out" / "result0.npy")
    np.testing.assert_allclose(result, example_result(x))


def example_result(x: np.ndarray) -> np.ndarray:
    """examples/nested_2x4.mlir on x. Inner: psum over model, ppermute (a no-op on
    equal values), all_gather over (data, model) and slice [0:8] -> the data=0 row
    sum; outer: psum over data."""
    return np.broadcast_to(2 * x[0].sum(axis=0), (2, 4, 8))


@pytest.fixture
def compiled_forms(monkeypatch) -> list[str]:
    """The form of every program `pmapc run` compiles, in order."""
    forms: list[str] = []
    for form, name in (("partitions", "compile_partitioned"), ("replicas", "compile_replicated")):
        original = getattr(xla, name)

        def record(
            module, devices, compiler_options=None, host_callbacks=(), form=form, original=original
        ):
            forms.append(form)
            return original(module, devices, compiler_options, host_callbacks)

        monkeypatch.setattr(xla, name, record)
    return forms


def lowered_example(tmp_path, capsys, pipeline: str) -> pathlib.Path:
    path = tmp_path / "lowered.mlir"
    assert main(["opt", str(EXAMPLE_IR), f"--pass-pipeline={pipeline}", "-o", str(path)]) == 0
    capsys.readouterr()
    return path


@pytest.mark.parametrize(
    ("pipeline", "target", "form"),
    [
        # pmapc IR: the pipeline runs first, for --target (default partitions).
        (None, None, "partitions"),
        (None, "partitions", "partitions"),
        (None, "replicas", "replicas"),
        # A lowered module runs in the form it declares, or is converted to --target.
        ("pmapc-to-stablehlo", None, "partitions"),
        ("pmapc-to-stablehlo{target=replicas}", None, "replicas"),
        ("pmapc-lower{target=replicas}", "partitions", "partitions"),
        ("pmapc-to-stablehlo", "replicas", "replicas"),
    ],
)
def test_run_either_form(pipeline, target, form, tmp_path, capsys, compiled_forms):
    x = np.arange(64, dtype=np.float32).reshape(2, 4, 8) / 4
    np.save(tmp_path / "x.npy", x)
    module = EXAMPLE_IR if pipeline is None else lowered_example(tmp_path, capsys, pipeline)
    argv = ["run", str(module), "--input", str(tmp_path / "x.npy"), "-o", str(tmp_path / "out")]
    argv += [] if target is None else [f"--target={target}"]
    assert main(argv) == 0, capsys.readouterr().err
    assert compiled_forms == [form]
    np.testing.assert_allclose(np.load(tmp_path / "out" / "result0.npy"), example_result(x))


def test_run_decides_from_the_module_not_its_text(tmp_path, capsys, compiled_forms):
    """A comment that mentions pmapc ops does not make a lowered module pmapc IR."""
    lowered = lowered_example(tmp_path, capsys, "pmapc-to-stablehlo{target=replicas}")
    lowered.write_text("// was @pmapc.psum before pmapc.mesh was recorded\n" + lowered.read_text())
    x = np.ones((2, 4, 8), np.float32)
    np.save(tmp_path / "x.npy", x)
    assert (
        main(["run", str(lowered), "--input", str(tmp_path / "x.npy"), "-o", str(tmp_path / "out")])
        == 0
    )
    assert compiled_forms == ["replicas"]


@pytest.mark.parametrize(
    ("counts", "message"),
    [
        (
            "mhlo.num_partitions = 4 : i32, mhlo.num_replicas = 1 : i32",
            "declares mhlo.num_partitions = 4, but its mesh data=2xmodel=4 has 8 device(s)",
        ),
        (
            "mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 2 : i32",
            "declares mhlo.num_replicas = 2 and mhlo.num_partitions = 8",
        ),
    ],
)
def test_run_checks_the_declared_device_counts(counts, message, tmp_path, capsys):
    lowered = lowered_example(tmp_path, capsys, "pmapc-to-stablehlo")
    text = lowered.read_text()
    assert "mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32" in text
    lowered.write_text(
        text.replace("mhlo.num_partitions = 8 : i32, mhlo.num_replicas = 1 : i32", counts)
    )
    np.save(tmp_path / "x.npy", np.ones((2, 4, 8), np.float32))
    assert main(["run", str(lowered), "--input", str(tmp_path / "x.npy")]) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_run_rejects_an_unknown_target(capsys):
    with pytest.raises(SystemExit):
        main(["run", str(EXAMPLE_IR), "--target=gpu"])
    assert "invalid choice: 'gpu'" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda d: [], "takes 1 argument(s)"),
        (lambda d: [_save(d, np.zeros((2, 4, 7), np.float32))], "must be float32[2, 4, 8]"),
        (lambda d: [_save(d, np.zeros((2, 4, 8), np.int32))], "must be float32[2, 4, 8]"),
        (lambda d: [_write(d, b"")], "is empty"),
        (lambda d: [_write(d, b"\x00\x01binary")], "is not a .npy array"),
        (lambda d: [str(d / "absent.npy")], "does not exist"),
    ],
)
def test_run_input_errors(setup, message, tmp_path, capsys):
    argv = ["run", str(EXAMPLE_IR)]
    for path in setup(tmp_path):
        argv += ["--input", path]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def _save(folder, array):
    path = folder / "input.npy"
    np.save(path, array)
    return str(path)


def _write(folder, data):
    path = folder / "input.npy"
    path.write_bytes(data)
    return str(path)


def test_console_script_never_shows_a_traceback(tmp_path):
    bad = tmp_path / "bad.mlir"
    bad.write_text("not mlir at all")
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "from pmapc.tools.main import entry_point;entry_point()",
            "opt",
            str(bad),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1
    assert "error:" in result.stderr and "Traceback" not in result.stderr


def test_a_reader_that_leaves_ends_the_command_quietly():
    """`pmapc opt FILE | head -1`: a pipe the reader closed is no internal error (exit
    141, as a shell reports a process the pipe ended). The reader here leaves before
    the command, still importing JAX, writes anything."""
    entry = "from pmapc.tools.main import entry_point;entry_point()"
    process = subprocess.Popen(
        [sys.executable, "-c", entry, "opt", str(EXAMPLE_IR)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdout is not None and process.stderr is not None
    process.stdout.close()
    error = process.stderr.read().decode()
    assert process.wait(timeout=120) == 141
    assert error == ""


@pytest.mark.parametrize(
    ("example", "expected"),
    [
        ("quickstart.py", "agrees with numpy: True"),
        ("mlp_training.py", "weights agree with single-device training: True"),
        ("moe.py", "weights agree with the dense computation: True"),
    ],
)
def test_examples_run(example, expected):
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / example)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stderr
    assert expected in result.stdout


def test_trace_mlp_example(capsys):
    argv = [
        "trace",
        f"{ROOT / 'examples' / 'mlp_training.py'}:train_step",
        "--arg",
        "f32[4,8,8]",
        "--arg",
        "f32[4,8,4]",
        "--arg",
        "f32[2,16,8]",
        "--arg",
        "f32[2,16,4]",
        "--emit=spmd",
    ]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert "stablehlo.all_reduce" in out and "pmapc.split" in out
