"""Type-check pmapc with basedpyright against the JAX of the running Python.

    python scripts/typecheck.py [BASEDPYRIGHT_ARGS...]

pmapc's subpackages live in top-level folders (compiler/, passes/, ...) that
pyproject.toml's [tool.setuptools.package-dir] maps into the `pmapc` package; a
type checker follows neither that mapping nor symlinked folders, so this script
builds build/typecheck/pmapc/ as the installed package looks (a folder per
subpackage, a symlink per file) and runs basedpyright on it with the settings
in pyproject.toml's [tool.basedpyright]. Diagnostics name the links:
build/typecheck/pmapc/passes/base.py is passes/base.py.
The exit status is basedpyright's.
"""

from __future__ import annotations

import pathlib
import shutil
import subprocess
import sys

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the TOML reader pip ships
    from pip._vendor import tomli as tomllib

ROOT = pathlib.Path(__file__).resolve().parents[1]
TREE = ROOT / "build" / "typecheck"


def package_dirs() -> dict[str, pathlib.Path]:
    """Package name -> its source folder, as pyproject.toml maps them."""
    with open(ROOT / "pyproject.toml", "rb") as file:
        config = tomllib.load(file)
    return {
        package: ROOT / folder
        for package, folder in config["tool"]["setuptools"]["package-dir"].items()
    }


def build_tree() -> None:
    shutil.rmtree(TREE, ignore_errors=True)
    for package, source in package_dirs().items():
        target = TREE.joinpath(*package.split("."))
        target.mkdir(parents=True, exist_ok=True)
        for module in sorted(source.glob("*.py")):
            (target / module.name).symlink_to(module)


def main(argv: list[str]) -> int:
    build_tree()
    checker = shutil.which("basedpyright", path=str(pathlib.Path(sys.executable).parent))
    if checker is None:
        print(
            "typecheck: basedpyright is not installed next to this Python; "
            "install the test extras: pip install -e '.[test]'",
            file=sys.stderr,
        )
        return 2
    # The settings are pyproject.toml's, named: basedpyright would prefer a
    # pyrightconfig.json in a folder above the checkout.
    command = [checker, "--project", str(ROOT / "pyproject.toml"), "--pythonpath", sys.executable]
    return subprocess.call([*command, *argv], cwd=ROOT)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
