"""Fuzz `pmapc opt`: mutate valid modules and check every run ends cleanly.

Each mutant (attributes dropped or retyped, sizes, names and shapes changed,
ops deleted, text truncated or corrupted) goes through `pmapc opt` in this
process: a pmapc-IR module through `--pmapc-to-stablehlo`, a lowered one (the
inputs of the target passes' lit tests, with their groups as device ids and
as mesh axes) through `to-partitions` and `to-replicas`. A run must end with
exit 0 (and valid output without pmapc ops) or exit 1 with an `error:`
diagnostic — never a Python exception, a crash or a hang (each run has a
time limit).

    python scripts/fuzz_ir.py --count 5000 --seed 7

Exits 1 and prints the failing mutants' seeds if any run misbehaves; rerun a
single one with --only SEED to see it.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import pathlib
import random
import re
import signal
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parents[1]
SEEDS = [
    ROOT / "examples" / "nested_2x4.mlir",
    *sorted((ROOT / "tests" / "lit" / "passes").glob("*.mlir")),
]
LOWERED_SEEDS = [
    ROOT / "tests" / "lit" / "passes" / f"{name}.mlir" for name in ("to-partitions", "to-replicas")
]
TIME_LIMIT_SECONDS = 30

PMAPC_IR = ["--pmapc-to-stablehlo"]
LOWERED = ["--pass-pipeline=builtin.module(to-partitions,to-replicas)"]


def chunks(path: pathlib.Path) -> list[str]:
    """The modules of a lit test file, but those that expect errors."""
    return [
        chunk
        for chunk in re.split(r"^// -----\s*$", path.read_text(), flags=re.M)
        if "module" in chunk and "expected-error" not in chunk
    ]


def corpus() -> list[tuple[str, list[str]]]:
    """(valid module, the `pmapc opt` flags to run it with): the pmapc-IR example and
    chunks of the lit pass tests, and the lowered chunks of the target passes' tests
    as they are and with to-partitions' groups named by mesh axes."""
    modules = [
        (chunk, PMAPC_IR) for path in SEEDS for chunk in chunks(path) if "pmapc.map" in chunk
    ]
    for path in LOWERED_SEEDS:
        for chunk in chunks(path):
            if "pmapc.map" in chunk:
                continue
            modules.append((chunk, LOWERED))
            code, out, _ = run_opt(chunk, ["--pass-pipeline=builtin.module(to-partitions)"])
            if code == 0:
                modules.append((out, LOWERED))
    return modules


def mutate(text: str, rng: random.Random) -> str:
    return rng.choice(MUTATIONS)(text, rng)


def _replace_one(pattern: str, replacement, text: str, rng: random.Random) -> str:
    matches = list(re.finditer(pattern, text))
    if not matches:
        return text
    match = rng.choice(matches)
    new = replacement(match) if callable(replacement) else replacement
    return text[: match.start()] + new + text[match.end() :]


def drop_config_key(text, rng):
    return _replace_one(
        r"\b(axis_name|axis_size|in_axes|out_axes|axes|tiled|perm|"
        r"all_gather_dimension|scatter_dimension|split_axis|concat_axis)"
        r" = (\[[^\]]*\]|[^,}]+),? ?",
        "",
        text,
        rng,
    )


def retype_value(text, rng):
    choices = ['"oops"', "7 : i32", "true", "[]", "unit", "-1", "[[0]]", "1.5 : f32"]
    return _replace_one(
        r"(?<== )(\"[^\"]*\"|\d+ : i64|true|false|\[[^\]]*\]|unit)",
        lambda m: rng.choice(choices),
        text,
        rng,
    )


def change_size(text, rng):
    return _replace_one(
        r"axis_size = \d+", f"axis_size = {rng.choice([0, 1, 3, 4, 16])}", text, rng
    )


def change_name(text, rng):
    return _replace_one(
        r'"(data|model|a|b|c|i|j)"', f'"{rng.choice(["data", "model", "x"])}"', text, rng
    )


def change_shape(text, rng):
    return _replace_one(r"tensor<(\d+)x", lambda m: f"tensor<{rng.choice([1, 3, 5])}x", text, rng)


def change_target(text, rng):
    return _replace_one(r"@pmapc\.\w+", f"@pmapc.{rng.choice(['psum', 'map', 'bogus'])}", text, rng)


def change_mesh_axis(text, rng):
    return _replace_one(
        r'(axis_ref<name = |sdy.mesh @\w+ = <\[|mesh = @)("?\w+"?)',
        lambda m: m.group(1) + rng.choice(['"zz"', '"data"', "@nowhere", '"i"', "mesh"]),
        text,
        rng,
    )


def change_callee(text, rng):
    return _replace_one(
        r"called_computations = \[@\w+\]",
        rng.choice(
            [
                "called_computations = [@nowhere]",
                "called_computations = [@main]",
                "called_computations = []",
            ]
        ),
        text,
        rng,
    )


def delete_line(text, rng):
    lines = text.splitlines(keepends=True)
    if len(lines) > 1:
        del lines[rng.randrange(len(lines))]
    return "".join(lines)


def duplicate_line(text, rng):
    lines = text.splitlines(keepends=True)
    index = rng.randrange(len(lines))
    lines.insert(index, lines[index])
    return "".join(lines)


def truncate(text, rng):
    return text[: rng.randrange(len(text) + 1)]


def corrupt_bytes(text, rng):
    chars = list(text)
    for _ in range(rng.randint(1, 4)):
        chars[rng.randrange(len(chars))] = rng.choice('{}()<>[]%@:=,"x0\x00é')
    return "".join(chars)


MUTATIONS = [
    drop_config_key,
    retype_value,
    change_size,
    change_name,
    change_shape,
    change_target,
    change_callee,
    change_mesh_axis,
    delete_line,
    duplicate_line,
    truncate,
    corrupt_bytes,
]


class TimeLimit(Exception):
    pass


def _alarm(signum, frame):
    raise TimeLimit


def run_opt(text: str, flags: list[str]) -> tuple[int, str, str]:
    """`pmapc opt` on `text` in this process: (exit code, stdout, stderr)."""
    from pmapc.tools.main import main

    with tempfile.TemporaryDirectory() as workdir:
        path = pathlib.Path(workdir) / "mutant.mlir"
        path.write_text(text, encoding="utf-8", errors="surrogateescape")
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["opt", str(path), *flags])
    return code, out.getvalue(), err.getvalue()


def run_one(text: str, flags: list[str]) -> str | None:
    """None if `pmapc opt` ended cleanly on `text`, else what went wrong."""
    signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(TIME_LIMIT_SECONDS)
    try:
        code, out, err = run_opt(text, flags)
    except TimeLimit:
        return f"no result within {TIME_LIMIT_SECONDS} s"
    except BaseException as error:  # the finding: anything escaping main()
        return f"raised {type(error).__name__}: {error}"
    finally:
        signal.alarm(0)
    return judge(code, out, err)


def judge(code: int, out: str, err: str) -> str | None:
    if code == 0:
        return "output still has pmapc ops" if "@pmapc." in out else None
    if code != 1:
        return f"exit code {code}"
    if "error:" not in err or "Traceback" in err or "internal error" in err:
        return f"exit 1 without a clean diagnostic: {err.strip()[:200]}"
    return None


def fuzz(count: int, seed: int, only: int | None = None) -> list[str]:
    modules = corpus()
    failures = []
    seeds = [only] if only is not None else range(seed, seed + count)
    for mutant_seed in seeds:
        rng = random.Random(mutant_seed)
        text, flags = rng.choice(modules)
        for _ in range(rng.randint(1, 3)):
            text = mutate(text, rng)
        problem = run_one(text, flags)
        if problem is not None:
            failures.append(f"seed {mutant_seed}: {problem}")
            if only is not None:
                print(text)
    return failures


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", type=int, help="run just this mutant seed and print it")
    args = parser.parse_args(argv)
    failures = fuzz(args.count, args.seed, args.only)
    for failure in failures:
        print(failure)
    ran = 1 if args.only is not None else args.count
    print(f"{ran - len(failures)} passed, {len(failures)} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
