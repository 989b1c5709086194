"""Interleaved timing: A B A B ... in one process, every result waited for.

Each call is timed from the call to the moment its outputs are ready
(`jax.block_until_ready`); the time the call took to return (dispatch) is kept
too. Blocking on every result also keeps XLA's in-process CPU collectives from
deadlocking, which they do when dozens of collective programs are queued.
"""

from __future__ import annotations

import dataclasses
import random
import statistics
import time
from collections.abc import Callable, Sequence

import jax
import numpy as np


@dataclasses.dataclass
class CallTime:
    returned: float  # seconds until the call returned (dispatch)
    ready: float  # seconds until its outputs were ready (round trip)


def timed_call(function: Callable, args: Sequence) -> CallTime:
    start = time.perf_counter()
    outputs = function(*args)
    returned = time.perf_counter()
    jax.block_until_ready(outputs)
    ready = time.perf_counter()
    return CallTime(returned - start, ready - start)


@dataclasses.dataclass
class Interleaved:
    """Times of several programs run in rounds (one call of each per round)."""

    names: list[str]
    rounds: list[dict[str, CallTime]]

    def series(self, name: str, field: str = "ready") -> list[float]:
        return [getattr(row[name], field) for row in self.rounds]

    def ratios(self, name: str, baseline: str, field: str = "ready") -> list[float]:
        """Per-round ratio name/baseline."""
        return [getattr(row[name], field) / getattr(row[baseline], field) for row in self.rounds]

    def summary(self, baseline: str, field: str = "ready") -> dict:
        """Medians per program and the median of per-round ratios against `baseline`."""
        result = {}
        for name in self.names:
            entry = {"median_s": statistics.median(self.series(name, field))}
            if name != baseline:
                ratios = self.ratios(name, baseline, field)
                entry["ratio_median"] = statistics.median(ratios)
                entry["ratio_p10"], entry["ratio_p90"] = np.percentile(ratios, [10, 90]).tolist()
            result[name] = entry
        return result

    def raw(self) -> dict:
        return {
            name: {
                "ready_s": self.series(name, "ready"),
                "returned_s": self.series(name, "returned"),
            }
            for name in self.names
        }


def interleave(
    calls: dict[str, tuple[Callable, Sequence]], warmup: int, rounds: int
) -> Interleaved:
    """Run every (function, args) once per round, in a shuffled order; drop the warm-ups.

    On 2 cores a call's time depends on where it stands: first in a round, or
    right after a given other program, it starts while the devices' threads of
    the previous call wind down. A fixed order would charge that to one program;
    a new order every round (the same sequence on every run) spreads it evenly.
    """
    names = list(calls)
    shuffler = random.Random(0)
    kept = []
    for index in range(warmup + rounds):
        order = shuffler.sample(names, len(names))
        row = {name: timed_call(*calls[name]) for name in order}
        if index >= warmup:
            kept.append({name: row[name] for name in names})
    return Interleaved(names, kept)


def seconds(function: Callable, *args) -> tuple[float, object]:
    """Wall time of one call (no blocking: for tracing and compiling) and its result."""
    start = time.perf_counter()
    result = function(*args)
    return time.perf_counter() - start, result


def ratio_cell(entry: dict) -> str:
    """A summary entry's median ratio and its 10th-90th percentiles: `1.02 (0.95-1.10)`."""
    return f"{entry['ratio_median']:.2f} ({entry['ratio_p10']:.2f}-{entry['ratio_p90']:.2f})"
