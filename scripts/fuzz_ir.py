"""Fuzz `pmapc opt` and `pmapc plan`: mutate the lit inputs, and every run must end cleanly.

The corpus is every module of the lit tests of `pmapc opt` (tests/lit/passes,
tests/lit/tools, valid and invalid chunks alike) and examples/nested_2x4.mlir,
each with its file's own pipelines (those its `RUN:` lines give `pmapc opt %s`),
and the target passes' lowered inputs also with their groups named by mesh axes.
A mutant is one to three edits of a module, as a user, another tool or an older
pmapc makes them:

- a line deleted or duplicated; the text truncated, or a few bytes corrupted;
- an integer of an attribute made 0, -1, huge (past 2^31, past 2^63) or another
  small one;
- a shape changed: one dimension of one type, or one dimension size everywhere
  (`?` among the choices);
- a `backend_config` key dropped or duplicated, a value given the wrong kind;
- an axis renamed (once or everywhere); a custom call retargeted, or a map's
  callee; a function's body emptied.

Each mutant runs three ways, in this process: `pmapc opt` with one of its file's
pipelines, `pmapc opt --pmapc-to-stablehlo`, and `pmapc plan`. Each run must end
with exit 0 or with exit 1 and diagnostics that are all located
(`file:line:col: error: ...`) and none saying "this is a pmapc bug" (the input
was at fault, so a pass must have taken input it cannot handle). Anything else
fails: an exception escaping `main`, another exit status, an unlocated error, a
run that does not end within the time limit, or a signal that ends the process.

The mutants run in a worker process the fuzzer starts, so a signal or a stall
fails one mutant and names it: the worker is started again and the fuzz goes on.

    python scripts/fuzz_ir.py --count 5000 --seed 7

Exits 1 and prints the failing mutants' seeds and runs if any run misbehaves;
`--only SEED` prints that mutant and runs it alone.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import multiprocessing
import os
import pathlib
import random
import re
import resource
import shlex
import sys
import tempfile
from collections.abc import Callable

ROOT = pathlib.Path(__file__).resolve().parents[1]
LIT_FILES = [
    ROOT / "examples" / "nested_2x4.mlir",
    *sorted((ROOT / "tests" / "lit" / "passes").glob("*.mlir")),
    *sorted((ROOT / "tests" / "lit" / "tools").glob("*.mlir")),
]
# The files whose lowered chunks are also fuzzed with to-partitions' named groups.
LOWERED_FILES = ("to-partitions.mlir", "to-replicas.mlir")
# Seconds a mutant's three runs may take together (they take milliseconds).
TIME_LIMIT_SECONDS = 60
# The worker's address space (it needs under 0.5 GiB): a run that allocates by the
# device count fails with a MemoryError, a finding, instead of exhausting the machine.
MEMORY_LIMIT_BYTES = 2 * 2**30

DEFAULT_PIPELINE = "--pmapc-to-stablehlo"
LOCATED_ERROR = re.compile(r"^[^\s:][^:]*:\d+:\d+: error: ", flags=re.M)
SPLIT_MARKER = re.compile(r"^// -----[ \t]*$", flags=re.M)


# ----------------------------------------------------------------------------
# The corpus


@dataclasses.dataclass(frozen=True)
class Seed:
    """One module of the corpus and the pipelines its file runs it through."""

    text: str
    pipelines: tuple[str, ...]
    origin: str  # file name, for reports


def own_pipelines(text: str) -> tuple[str, ...]:
    """The pass flags of the file's `pmapc opt %s` RUN lines (`--pass-pipeline=...` or
    pass flags such as `--pmapc-lower`), each once; the default pipeline if none."""
    found = []
    for line in text.splitlines():
        if "RUN:" not in line or "pmapc opt %s" not in line:
            continue
        command = line.split("RUN:", 1)[1].split("|")[0]
        flags = [
            word
            for word in shlex.split(command)
            if word.startswith("--pass-pipeline=")
            or (word.startswith("--") and word[2:].startswith(("pmapc-", "simplify")))
        ]
        if flags and flags[0] not in found:
            found.append(flags[0])
    return tuple(found) or (DEFAULT_PIPELINE,)


def chunks(text: str) -> list[str]:
    """The chunks of a lit file that hold IR."""
    return [chunk for chunk in SPLIT_MARKER.split(text) if "func.func" in chunk]


def corpus() -> list[Seed]:
    seeds = []
    for path in LIT_FILES:
        text = path.read_text()
        pipelines = own_pipelines(text)
        for chunk in chunks(text):
            seeds.append(Seed(chunk, pipelines, path.name))
            if path.name in LOWERED_FILES and "pmapc.map" not in chunk:
                named = run_opt(chunk, ["--pass-pipeline=builtin.module(to-partitions)"])
                if named.code == 0:
                    seeds.append(Seed(named.out, pipelines, f"{path.name} (named groups)"))
    return seeds


# ----------------------------------------------------------------------------
# Mutations: each takes the text and a random source, and returns the new text.


def _replace_one(pattern: str, replacement, text: str, rng: random.Random) -> str:
    matches = list(re.finditer(pattern, text))
    if not matches:
        return text
    match = rng.choice(matches)
    new = replacement(match) if callable(replacement) else replacement
    return text[: match.start()] + new + text[match.end() :]


def delete_line(text, rng):
    lines = text.splitlines(keepends=True)
    if len(lines) > 1:
        del lines[rng.randrange(len(lines))]
    return "".join(lines)


def duplicate_line(text, rng):
    lines = text.splitlines(keepends=True)
    if lines:
        index = rng.randrange(len(lines))
        lines.insert(index, lines[index])
    return "".join(lines)


def truncate(text, rng):
    return text[: rng.randrange(len(text) + 1)]


def corrupt_bytes(text, rng):
    chars = list(text)
    for _ in range(rng.randint(1, 4)):
        if chars:
            chars[rng.randrange(len(chars))] = rng.choice('{}()<>[]%@:=,"x0\x00é')
    return "".join(chars)


# Integers that are not attributes: inside types and locations.
NOT_ATTRIBUTES = r"tensor<[^>]*>|loc\([^)]*\)|\b[uif]\d+\b"
INTEGER = r"(?<![\w%#@^.])-?\d+(?![\w.])"
HUGE = (2**31, 2**32, 2**62, 2**63 - 1, 2**63)


def change_integer(text, rng):
    """An integer of an attribute (a size, a dimension, an index, a device id) made 0,
    -1, a huge number or another small one."""
    masked = [match.span() for match in re.finditer(NOT_ATTRIBUTES, text)]
    found = [
        match
        for match in re.finditer(INTEGER, text)
        if not any(start <= match.start() < end for start, end in masked)
    ]
    if not found:
        return text
    match = rng.choice(found)
    new = rng.choice([0, -1, rng.choice(HUGE), rng.randint(1, 9)])
    return text[: match.start()] + str(new) + text[match.end() :]


TENSOR_DIMS = r"tensor<((?:(?:\d+|\?)x)+)"


def _new_dim(rng) -> str:
    return rng.choice(["?", "?", "0", "1", "3", "5", "16", str(2**32)])


def change_shape(text, rng):
    """One dimension of one tensor type made another size, or dynamic."""

    def one(match):
        dims = match.group(1).split("x")[:-1]
        dims[rng.randrange(len(dims))] = _new_dim(rng)
        return "tensor<" + "".join(f"{dim}x" for dim in dims)

    return _replace_one(TENSOR_DIMS, one, text, rng)


def change_dim_everywhere(text, rng):
    """One dimension size made another, or dynamic, in every tensor type."""
    sizes = sorted(
        {dim for match in re.finditer(TENSOR_DIMS, text) for dim in match.group(1).split("x")[:-1]}
    )
    if not sizes:
        return text
    old, new = rng.choice(sizes), _new_dim(rng)

    def every(match):
        dims = [new if dim == old else dim for dim in match.group(1).split("x")[:-1]]
        return "tensor<" + "".join(f"{dim}x" for dim in dims)

    return re.sub(TENSOR_DIMS, every, text)


CONFIG_ENTRY = (
    r"\b(axis_name|axis_size|in_axes|out_axes|axes|tiled|perm|axis_index_groups|folded|"
    r"all_gather_dimension|scatter_dimension|split_axis|concat_axis|replica_groups|"
    r"channel_id|kind|index|axis_names|axis_sizes) = (\[[^\]]*\]\]?|dense<[^>]*>|"
    r"array<[^>]*>|\{[^}]*\}|[^,}]+)"
)


def drop_config_key(text, rng):
    return _replace_one(CONFIG_ENTRY + r",? ?", "", text, rng)


def duplicate_config_key(text, rng):
    return _replace_one(CONFIG_ENTRY, lambda m: f"{m.group(0)}, {m.group(0)}", text, rng)


def retype_value(text, rng):
    choices = ['"oops"', "7 : i32", "true", "[]", "unit", "-1", "[[0]]", "1.5 : f32", "{}"]
    return _replace_one(
        r"(?<== )(\"[^\"]*\"|\d+ : i64|true|false|\[[^\]]*\]|unit|dense<[^>]*>)",
        lambda m: rng.choice(choices),
        text,
        rng,
    )


AXIS_NAMES = ("data", "model", "a", "b", "c", "i", "j", "k", "x", "y")


def rename_axis(text, rng):
    """An axis name changed where it is written once, or everywhere."""
    new = f'"{rng.choice([*AXIS_NAMES, "", "zz"])}"'
    pattern = r'"(' + "|".join(AXIS_NAMES) + r'|i_1)"'
    if rng.random() < 0.5:
        return _replace_one(pattern, new, text, rng)
    found = sorted(set(re.findall(pattern, text)))
    if not found:
        return text
    return text.replace(f'"{rng.choice(found)}"', new)


TARGETS = [
    "@pmapc.psum",
    "@pmapc.all_gather",
    "@pmapc.psum_scatter",
    "@pmapc.all_to_all",
    "@pmapc.ppermute",
    "@pmapc.ragged_all_to_all",
    "@pmapc.axis_index",
    "@pmapc.map",
    "@pmapc.bogus",
    "@ragged_all_to_all",
    "@pmapc_predicated",
]


def change_target(text, rng):
    return _replace_one(
        r"@(pmapc\.\w+|ragged_all_to_all|pmapc_predicated)", rng.choice(TARGETS), text, rng
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


def change_mesh_axis(text, rng):
    return _replace_one(
        r'(axis_ref<name = |sdy.mesh @\w+ = <\[|mesh = @)("?\w+"?)',
        lambda m: m.group(1) + rng.choice(['"zz"', '"data"', "@nowhere", '"i"', "mesh"]),
        text,
        rng,
    )


def empty_body(text, rng):
    """A function's body made empty: only declared, or with its ops gone."""
    matches = list(
        re.finditer(r"(func\.func \w+ @\w+\([^\n]*?\))([^\n{]*)\{\n(.*?)\n  \}", text, re.S)
    )
    if not matches:
        return text
    match = rng.choice(matches)
    if rng.random() < 0.5:
        new = match.group(1).replace("public", "private") + match.group(2).rstrip()
    else:
        new = match.group(1) + match.group(2) + "{\n  }"
    return text[: match.start()] + new + text[match.end() :]


MUTATIONS: list[Callable[[str, random.Random], str]] = [
    delete_line,
    duplicate_line,
    truncate,
    corrupt_bytes,
    change_integer,
    change_integer,
    change_shape,
    change_dim_everywhere,
    drop_config_key,
    duplicate_config_key,
    retype_value,
    rename_axis,
    change_target,
    change_callee,
    change_mesh_axis,
    empty_body,
]


def mutant(seeds: list[Seed], mutant_seed: int) -> tuple[Seed, str, str]:
    """(the seed module, the mutated text, the own pipeline to run) of `mutant_seed`."""
    rng = random.Random(mutant_seed)
    seed = rng.choice(seeds)
    text = seed.text
    for _ in range(rng.randint(1, 3)):
        text = rng.choice(MUTATIONS)(text, rng)
    return seed, text, rng.choice(seed.pipelines)


# ----------------------------------------------------------------------------
# Running and judging


@dataclasses.dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str


def run_tool(argv: list[str], text: str) -> Outcome:
    """`pmapc ARGV... FILE` on `text` (in a file) in this process."""
    from pmapc.tools.main import main

    with tempfile.TemporaryDirectory() as workdir:
        path = pathlib.Path(workdir) / "mutant.mlir"
        path.write_text(text, encoding="utf-8", errors="surrogateescape")
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main([*argv[:1], str(path), *argv[1:]])
    return Outcome(code, out.getvalue(), err.getvalue())


def run_opt(text: str, flags: list[str]) -> Outcome:
    return run_tool(["opt", *flags], text)


def judge(outcome: Outcome) -> str | None:
    """None if a run ended cleanly, else what was wrong."""
    if outcome.code == 0:
        return None
    err = outcome.err.strip()
    if outcome.code != 1:
        return f"exit code {outcome.code}: {err[:300]}"
    errors = [line for line in err.splitlines() if "error:" in line]
    if not errors:
        return f"exit 1 without an error: {err[:300]}"
    unlocated = [line for line in errors if not LOCATED_ERROR.match(line)]
    if unlocated:
        return f"unlocated error: {unlocated[0][:300]}"
    if "pmapc bug" in err or "internal error" in err:
        return f"a pmapc bug reported for a bad input: {err[:300]}"
    return None


def runs_of(text: str, own: str) -> list[tuple[str, list[str]]]:
    """The three runs of a mutant: (name, pmapc arguments)."""
    return [
        (f"opt {own}", ["opt", own]),
        (f"opt {DEFAULT_PIPELINE}", ["opt", DEFAULT_PIPELINE]),
        ("plan", ["plan"]),
    ]


def check_mutant(seeds: list[Seed], mutant_seed: int) -> list[str]:
    """What went wrong in the runs of mutant `mutant_seed` (empty if nothing)."""
    seed, text, own = mutant(seeds, mutant_seed)
    problems = []
    for name, argv in runs_of(text, own):
        try:
            problem = judge(run_tool(argv, text))
        except BaseException as error:  # the finding: anything escaping main()
            problem = f"raised {type(error).__name__}: {str(error)[:300]}"
        if problem is not None:
            problems.append(f"{name} (from {seed.origin}): {problem}")
    return problems


def limit_memory() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))


def serve(connection) -> None:
    """The worker: check each mutant seed it is sent, answer with its problems."""
    limit_memory()
    seeds = corpus()
    connection.send(len(seeds))
    while True:
        mutant_seed = connection.recv()
        if mutant_seed is None:
            return
        connection.send(check_mutant(seeds, mutant_seed))


class Worker:
    """A worker process running `serve`; `check` gives a mutant's problems, or the
    stall or signal that ended the worker (which is then started again)."""

    def __init__(self, serve=serve, time_limit: float = TIME_LIMIT_SECONDS) -> None:
        self.serve = serve
        self.time_limit = time_limit
        self.process = None
        self.connection = None

    def start(self) -> None:
        context = multiprocessing.get_context("spawn")
        self.connection, child = context.Pipe()
        self.process = context.Process(target=self.serve, args=(child,), daemon=True)
        self.process.start()
        child.close()
        if not self.connection.poll(300):
            raise RuntimeError("the fuzz worker did not start within 300 s")
        self.connection.recv()

    def check(self, mutant_seed: int) -> list[str]:
        if self.process is None or not self.process.is_alive():
            self.start()
        assert self.connection is not None and self.process is not None
        self.connection.send(mutant_seed)
        try:
            if self.connection.poll(self.time_limit):
                return self.connection.recv()
        except EOFError:  # the worker ended
            self.process.join()
        if self.process.is_alive():
            self.stop()
            return [f"no result within {self.time_limit} s"]
        code = self.process.exitcode
        self.process = None
        how = f"signal {-code}" if code is not None and code < 0 else f"exit code {code}"
        return [f"the worker ended with {how}"]

    def stop(self) -> None:
        if self.process is not None:
            self.process.kill()
            self.process.join()
            self.process = None

    def close(self) -> None:
        if self.process is not None and self.process.is_alive():
            assert self.connection is not None
            self.connection.send(None)
            self.process.join(30)
        self.stop()


def fuzz(count: int, seed: int) -> list[str]:
    worker = Worker()
    failures = []
    try:
        for mutant_seed in range(seed, seed + count):
            failures.extend(f"seed {mutant_seed}: {p}" for p in worker.check(mutant_seed))
    finally:
        worker.close()
    return failures


def show(mutant_seed: int) -> list[str]:
    """Print mutant `mutant_seed` and run it in this process."""
    limit_memory()
    seeds = corpus()
    seed, text, own = mutant(seeds, mutant_seed)
    print(f"// from {seed.origin}, own pipeline {own}")
    print(text)
    return [f"seed {mutant_seed}: {p}" for p in check_mutant(seeds, mutant_seed)]


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--count", type=int, default=300)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--only", type=int, help="print this mutant and run it alone")
    args = parser.parse_args(argv)
    # JAX on the CPU only (the workers inherit it): with the `targets` extra installed
    # it would start the CUDA plugin first, which cannot reserve its memory under a
    # worker's limit.
    os.environ["JAX_PLATFORMS"] = "cpu"
    if args.only is not None:
        failures, ran = show(args.only), 1
    else:
        failures, ran = fuzz(args.count, args.seed), args.count
    for failure in failures:
        print(failure)
    failed = len({failure.split(":")[0] for failure in failures})
    print(f"{ran - failed} passed, {failed} failed")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
