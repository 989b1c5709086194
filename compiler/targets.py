"""Compile targets by name: the devices of a TPU pod slice or a GPU cluster that XLA
compiles for on any machine, without them.

A name is `PLATFORM:KIND:TOPOLOGY`:

    tpu:v5e:16x16    256 TPU v5e chips (64 hosts)     libtpu's own topology names:
    tpu:v5p:4x4x4    64 TPU v5p chips (16 hosts)      KIND:TOPOLOGY as libtpu reads it
    gpu:h100:1x1x8   8 H100s on one host              TOPOLOGY: slices x hosts per
    gpu:h100:1x2x8   2 hosts x 8 H100s                slice x GPUs per host
    tpu:v5e:4x4:slices=2   2 slices of 16 v5e chips   a TPU pod of several slices,
                                                      joined by the data-centre network

`target_devices(name)` gives the topology's devices, which `devices=` (a list, a
device array or a `Mesh`) takes: a nest lowered and compiled for them is compiled
by XLA:TPU or XLA:GPU (`jax.experimental.topologies`, as JAX's own ahead-of-time
compile for a pod), and tells what that compiler made (`as_text()`,
`memory_analysis()`, `cost_analysis()`, `plan()`); it runs only where the devices
are.

TPU topologies come from libtpu, GPU ones from the CUDA PJRT plugin
(`jax-cuda12-pjrt`) and an XLA `GpuTargetConfigProto` (the GPU model's clock,
memory and core counts) in text form. The configs are XLA's own (jaxlib 0.12's
plugin carries them); `compiler/gpu_configs/` holds each in the format of every
plugin release pmapc admits (0.10's proto lacks some fields). `pip install
'pmapc[targets]'` installs both plugins: libtpu at the version the installed JAX's
own `tpu` extra pins, and the CUDA PJRT plugin of its `cuda12` extra, which must be
the installed jaxlib's release (`plugin_missing` says so, with the command).
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.util
import os
import pathlib
from importlib import metadata

import jax.errors
from jax.experimental import topologies

from pmapc.errors import DeviceError, first_line
from pmapc.lowering import jax_api
from pmapc.lowering.jax_api import Device

CONFIGS = pathlib.Path(__file__).parent / "gpu_configs"
INSTALL = "pip install 'pmapc[targets]'"
ALLOW_MULTIPLE_LIBTPU = "ALLOW_MULTIPLE_LIBTPU_LOAD"


@dataclasses.dataclass(frozen=True)
class GpuModel:
    """A GPU XLA has a target config for: the card's name and its config files, the
    one in the newest proto format first."""

    card: str
    configs: tuple[str, ...]


GPU_MODELS = {
    "h100": GpuModel("NVIDIA H100 80GB HBM3", ("h100.txtpb", "h100-jax-0.10.txtpb")),
}
# The module each platform's topologies come from, and the package that brings it.
PLUGINS = {"tpu": ("libtpu", "libtpu"), "gpu": ("jax_plugins.xla_cuda12", "jax-cuda12-pjrt")}
# The first JAX whose CUDA plugin reads the newest format of the configs.
NEWEST_GPU_CONFIGS = (0, 12, 0)
EXAMPLES = "tpu:v5e:16x16, tpu:v5p:4x4x4, tpu:v5e:4x4:slices=2, gpu:h100:1x1x8 or gpu:h100:1x2x8"
SLICES = "slices="
FORM = "PLATFORM:KIND:TOPOLOGY[:slices=N]"


@dataclasses.dataclass(frozen=True)
class Target:
    """A parsed target name."""

    platform: str  # "tpu" or "gpu"
    kind: str  # the TPU generation (v5e) or the GPU model (h100)
    topology: str  # "16x16"; for a GPU, slices x hosts x GPUs per host
    slices: int = 1  # TPU slices of that topology, joined by the data-centre network

    @property
    def name(self) -> str:
        more = f":{SLICES}{self.slices}" if self.slices > 1 else ""
        return f"{self.platform}:{self.kind}:{self.topology}{more}"


def parse(name: str) -> Target:
    """`PLATFORM:KIND:TOPOLOGY[:slices=N]` as a Target; a DeviceError naming the forms
    otherwise."""
    parts = name.strip().split(":")
    if len(parts) not in (3, 4) or parts[0] not in PLUGINS or not all(parts):
        raise DeviceError(f"unknown target '{name}'; name one as {FORM}, e.g. {EXAMPLES}")
    platform, kind, topology = parts[:3]
    slices = _slices(name, platform, parts[3]) if len(parts) == 4 else 1
    if platform == "gpu" and kind not in GPU_MODELS:
        raise DeviceError(
            f"no GPU target config for '{kind}' (target '{name}'); pmapc has "
            f"{', '.join(sorted(GPU_MODELS))}"
        )
    return Target(platform, kind, topology, slices)


def _slices(name: str, platform: str, text: str) -> int:
    """The N of a target's `slices=N`; a DeviceError where it is not a count of TPU
    slices."""
    count = text.removeprefix(SLICES)
    if not text.startswith(SLICES) or not count.isdigit() or int(count) < 1:
        raise DeviceError(
            f"target '{name}': '{text}' is not a slice count; write slices=N, e.g. "
            "tpu:v5e:4x4:slices=2"
        )
    if platform != "tpu":
        raise DeviceError(
            f"target '{name}': slices=N names TPU slices; a GPU machine's hosts are in its "
            "topology, SLICESxHOSTSxGPUS, e.g. gpu:h100:1x2x8"
        )
    return int(count)


def target_devices(name: str) -> list[Device]:
    """The devices of the target named `name` (module docstring), in the order JAX's
    topology gives them; XLA compiles for them here, and nothing here runs them."""
    return list(_topology(parse(name)).devices)


def plugin_missing(platform: str) -> str | None:
    """Why this process cannot compile for `platform` ("tpu", "gpu"), naming the
    package to install; None when it can."""
    module, package = PLUGINS[platform]
    if not _has_module(module):
        return (
            f"compiling for {platform.upper()} needs {package}, which is not installed: "
            f"{INSTALL} installs it"
        )
    if platform == "gpu" and _installed(package) != _installed("jaxlib"):
        return (
            f"{package} {_installed(package)} is installed, but compiling for GPU needs the "
            f"release of jaxlib {_installed('jaxlib')}: pip install "
            f"{package}=={_installed('jaxlib')}"
        )
    return None


def _installed(distribution: str) -> str | None:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return None


def _has_module(dotted: str) -> bool:
    try:
        return importlib.util.find_spec(dotted) is not None
    except ModuleNotFoundError:
        return False


@functools.cache
def _topology(target: Target):
    missing = plugin_missing(target.platform)
    if missing is not None:
        raise DeviceError(f"target '{target.name}': {missing}")
    if target.platform == "tpu":
        # libtpu takes a lock file on load, for one process per machine's chips; a
        # topology touches no chip, and any number of processes may compile for one.
        os.environ.setdefault(ALLOW_MULTIPLE_LIBTPU, "1")
        return _made(
            target,
            lambda: topologies.get_topology_desc(
                f"{target.kind}:{target.topology}",
                platform="tpu",
                **({"num_slices": target.slices} if target.slices > 1 else {}),
            ),
        )
    return _gpu_topology(target)


def _gpu_topology(target: Target):
    """The GPU topology, from the first of the model's configs the plugin reads (each
    release reads its own proto format; the one of this JAX's release first)."""
    configs = GPU_MODELS[target.kind].configs
    if jax_api.JAX_VERSION < NEWEST_GPU_CONFIGS:
        configs = configs[::-1]
    errors = []
    for config in configs:
        text = (CONFIGS / config).read_text(encoding="utf-8")
        try:
            return _made(
                target,
                lambda text=text: topologies.get_topology_desc(
                    platform="cuda", target_config=text, topology=target.topology
                ),
            )
        except DeviceError as error:
            errors.append(error)
    raise errors[0]


def _made(target: Target, make):
    """`make()`'s topology; XLA's refusal (an unknown kind, a shape the kind has no
    layout for) as a DeviceError naming the target."""
    try:
        return make()
    except (jax.errors.JaxRuntimeError, ValueError) as error:
        raise DeviceError(
            f"target '{target.name}' is not a topology XLA can compile for: "
            f"{first_line(error)}; "
            f"name one as {FORM}, e.g. {EXAMPLES}"
        ) from None
