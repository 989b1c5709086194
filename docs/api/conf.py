"""Sphinx's configuration of pmapc's API reference: autodoc reads the public names'
docstrings from the installed package (`sphinx-build -W -b html docs/api OUT`;
tests/py/test_docs.py builds it with warnings as errors)."""

project = "pmapc"
extensions = ["sphinx.ext.autodoc"]
autodoc_member_order = "bysource"
autodoc_typehints = "description"
default_role = "code"
nitpicky = False
