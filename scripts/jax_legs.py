"""Which JAX each leg of scripts/test.sh installs, read from the package registry.

Run with a leg's Python (pip answers for that Python's version); every command
prints one line or fails naming what it could not find:

    newest             the newest jax release pyproject.toml admits that the registry
                       serves, with a jaxlib of the same version
    minors             the minors strictly between the range's lower bound and `newest`,
                       each as its newest such release ("0.11.2")
    targets VERSION    the plugins the registry serves for jax VERSION, as platforms
                       ("gpu,tpu", "gpu", "tpu" or ""): jax-cuda12-pjrt==VERSION for
                       GPU, the libtpu that jax[tpu]==VERSION asks for for TPU
    with-targets       the newest admitted release of `newest`'s minor for which both
                       plugins are served ("" when none is)
    check              exits 1 unless the installed jax and jaxlib are `newest`, naming
                       both: pip's resolver may quietly take an older release (an extra
                       that asks for a plugin the newest release does not have yet)

Versions are compared as tuples of integers; pre-releases are never listed by pip.
"""

from __future__ import annotations

import functools
import pathlib
import re
import subprocess
import sys
from importlib import metadata

ROOT = pathlib.Path(__file__).resolve().parents[1]

Version = tuple[int, ...]


def parse(text: str) -> Version:
    return tuple(int(part) for part in text.split("."))


def show(version: Version) -> str:
    return ".".join(map(str, version))


def admitted() -> tuple[Version, Version]:
    """pyproject.toml's jax range, `jax>=LOW,<HIGH`, as (LOW, HIGH)."""
    text = (ROOT / "pyproject.toml").read_text()
    found = re.search(r'"jax>=([0-9.]+),<([0-9.]+)"', text)
    if found is None:
        sys.exit("scripts/jax_legs.py: no 'jax>=LOW,<HIGH' requirement in pyproject.toml")
    return parse(found[1]), parse(found[2])


@functools.cache
def served(package: str) -> frozenset[Version]:
    """The releases of `package` the registry serves for this Python."""
    done = subprocess.run(
        [sys.executable, "-m", "pip", "index", "versions", package],
        capture_output=True,
        text=True,
        check=False,
    )
    listed = re.search(r"^Available versions: (.*)$", done.stdout, re.MULTILINE)
    if done.returncode != 0 or listed is None:
        return frozenset()
    return frozenset(
        parse(v) for v in listed[1].split(", ") if re.fullmatch(r"[0-9]+(\.[0-9]+)*", v)
    )


def releases() -> list[Version]:
    """The admitted releases of jax that have a jaxlib of the same version, oldest first."""
    low, high = admitted()
    return sorted(v for v in served("jax") & served("jaxlib") if low <= v < high)


def newest() -> Version:
    found = releases()
    if not found:
        low, high = admitted()
        sys.exit(
            f"scripts/jax_legs.py: the registry serves no jax and jaxlib in [{show(low)}, "
            f"{show(high)}) for Python {sys.version.split()[0]}"
        )
    return found[-1]


def minors() -> list[Version]:
    low, top = admitted()[0], newest()
    by_minor: dict[Version, Version] = {}
    for version in releases():
        if low[:2] < version[:2] < top[:2]:
            by_minor[version[:2]] = version
    return sorted(by_minor.values())


def libtpu_pin(version: Version) -> str | None:
    """The libtpu requirement of jax[tpu]==`version` ("0.0.53.*"), from the jax
    release's metadata (pip's report of a dry-run install)."""
    pip = [sys.executable, "-m", "pip", "install", "--dry-run", "--no-deps", "--ignore-installed"]
    done = subprocess.run(
        [*pip, "--quiet", "--report", "-", f"jax=={show(version)}"],
        capture_output=True,
        text=True,
        check=False,
    )
    found = re.search(r'"libtpu==([0-9.*]+)[^"]*extra == \\"tpu\\"', done.stdout)
    return found[1] if found else None


def serves_libtpu(pin: str | None) -> bool:
    if pin is None:
        return False
    exact = pin.removesuffix(".*")
    return any(show(v) == exact or show(v).startswith(exact + ".") for v in served("libtpu"))


def targets(version: Version) -> str:
    platforms = []
    if version in served("jax-cuda12-pjrt"):
        platforms.append("gpu")
    if serves_libtpu(libtpu_pin(version)):
        platforms.append("tpu")
    return ",".join(platforms)


def with_targets() -> str:
    top = newest()
    for version in reversed(releases()):
        if version[:2] == top[:2] and targets(version) == "gpu,tpu":
            return show(version)
    return ""


def check() -> int:
    want = show(newest())
    got = {name: metadata.version(name) for name in ("jax", "jaxlib")}
    if all(version == want for version in got.values()):
        return 0
    print(
        f"the newest leg installed jax {got['jax']} and jaxlib {got['jaxlib']}, but the "
        f"registry's newest admitted release is {want}: pip's resolver took an older one",
        file=sys.stderr,
    )
    return 1


def main(argv: list[str]) -> int:
    command, *rest = argv or ["newest"]
    if command == "check":
        return check()
    if command == "newest":
        print(show(newest()))
    elif command == "minors":
        print(" ".join(show(v) for v in minors()))
    elif command == "targets" and len(rest) == 1:
        print(targets(parse(rest[0])))
    elif command == "with-targets":
        print(with_targets())
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
