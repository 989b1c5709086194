"""pmapc's errors for the mistakes JAX 0.4.30's `jax.pmap` caught, against the messages
recorded from JAX 0.4.30 (goldens/jax0430_messages.json, scripts/record_messages.py):
the same builtin class, and a message that starts with JAX 0.4.30's first line (then
goes on with pmapc's explanation), so code that matched on `jax.pmap`'s message still
matches."""

from __future__ import annotations

import builtins
import json
import pathlib

import jax
import pytest
from message_cases import cases

import pmapc
from pmapc.errors import PmapcError

RECORDED = json.loads(
    (pathlib.Path(__file__).parent / "goldens" / "jax0430_messages.json").read_text()
)
CASES = cases(pmapc.pmap, jax.devices())


def test_every_case_was_recorded():
    assert sorted(CASES) == sorted(RECORDED)


@pytest.mark.parametrize("name", sorted(RECORDED))
def test_message_starts_as_jax_0430s(name):
    recorded = RECORDED[name]
    with pytest.raises(Exception) as info:
        CASES[name]()
    error = info.value
    assert isinstance(error, getattr(builtins, recorded["class"])), type(error)
    message = error.message if isinstance(error, PmapcError) else str(error)
    first_line = recorded["message"].splitlines()[0]
    assert message.startswith(first_line), f"{message!r}\ndoes not start with\n{first_line!r}"
