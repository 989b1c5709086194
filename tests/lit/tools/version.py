# RUN: pmapc --version | FileCheck %s
# RUN: pmapc -V | FileCheck %s

# `pmapc --version` (or -V) prints the installed package's version, read from its
# metadata as `pmapc.__version__` is (tests/py/test_cli.py compares them), and the
# JAX and Python it runs on.

# CHECK: {{^}}pmapc {{[0-9]+\.[0-9]+[^ ]*}} (jax {{[0-9.]+}}, jaxlib {{[0-9.]+}}, Python {{[0-9.]+}}){{$}}
