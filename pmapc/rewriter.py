"""The rewriter: every op a pass builds, copies or erases goes through it.

A pass gets one `Rewriter` per run (`run(module, analyses, rewriter)`) and builds
where a `Builder` says: `rewriter.before(op)` builds right before `op` at its
location, `rewriter.at_start(block, loc)` at the top of a block, and so on. The
analyses that stay current across a rewrite listen to the rewriter, as in MLIR
(`RewriterBase::Listener`): the op index takes each op built and drops each op
erased, so a pass says nothing about where the ops it built stand.

It lives in the core, below the passes and the tracer, because the builders
(`pmapc/hlo.py`, `dialect.create_collective`) take a `Builder` and the tracer
builds through one (`unobserved`).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar, NamedTuple, Protocol

from pmapc import ir


class Listener(Protocol):
    """What an analysis that stays current hears of a rewrite, as it happens. Each
    event names the op and its identity (`ir.op_key`, read once for every listener).

    The rewriter and the op index (passes/op_index.py) are the only readers of
    identities the passes use: a pass takes an op's identity from its op-index entry
    or from these events."""

    # Whether an attribute change matters to it (`op_modified`): the rewriter reads
    # no identity for a change that no listener watches.
    watches_attributes: ClassVar[bool]

    def op_created(
        self, op: ir.Operation, key: int, ip: ir.InsertionPoint, source: int | None
    ) -> None:
        """`op` was built at `ip` (as a copy of the op whose identity is `source`, if
        not None)."""

    def op_erased(self, op: ir.Operation, key: int) -> None:
        """`op` is about to be erased."""

    def op_modified(self, op: ir.Operation, key: int) -> None:
        """An attribute of `op` changed."""


class Builder(NamedTuple):
    """Where ops are built: a rewriter, an insertion point and a location. (A tuple:
    passes make one for every op they rewrite, and a tuple is made fastest.)"""

    rewriter: Rewriter
    ip: ir.InsertionPoint
    loc: ir.Location

    def create(
        self,
        name: str,
        operands: Sequence[ir.Value],
        result_types: Sequence[ir.Type],
        attributes: dict[str, ir.Attribute] | None = None,
        *,
        regions: int = 0,
    ) -> ir.Operation:
        """An op of any dialect, by name."""
        op = ir.create_op(
            name, operands, result_types, attributes, loc=self.loc, ip=self.ip, regions=regions
        )
        self.rewriter.inserted(op, self.ip)
        return op

    def clone(self, op: ir.Operation) -> ir.Operation:
        """A deep copy of `op` here (at `op`'s own locations; listeners hear of it as
        one op)."""
        copy = ir.clone(op, self.ip)
        self.rewriter.inserted(copy, self.ip, op)
        return copy

    def at(self, loc: ir.Location) -> Builder:
        """The same place, building at location `loc`."""
        return self._replace(loc=loc)


class Rewriter:
    """Hands out builders, erases ops and sets attributes, and tells its listeners of
    every edit (its builders tell it of each op they build)."""

    def __init__(self, listeners: Sequence[Listener] = ()) -> None:
        self.listeners: tuple[Listener, ...] = ()
        self._attribute_listeners: tuple[Listener, ...] = ()
        for listener in listeners:
            self.listen(listener)

    def listen(self, listener: Listener) -> None:
        """Tell `listener` of every edit from now on."""
        self.listeners += (listener,)
        if listener.watches_attributes:
            self._attribute_listeners += (listener,)

    # -- where to build ------------------------------------------------------------

    def before(self, op: ir.Operation, loc: ir.Location | None = None) -> Builder:
        """Right before `op`, at `op`'s location unless `loc` is given."""
        return Builder(self, ir.InsertionPoint(op), op.location if loc is None else loc)

    def after(self, op: ir.Operation, loc: ir.Location | None = None) -> Builder:
        """Right after `op`, at `op`'s location unless `loc` is given."""
        return Builder(self, ir.InsertionPoint.after(op), op.location if loc is None else loc)

    def at_start(self, block: ir.Block, loc: ir.Location) -> Builder:
        return Builder(self, ir.InsertionPoint.at_block_begin(block), loc)

    def at_end(self, block: ir.Block, loc: ir.Location) -> Builder:
        """At the end of `block` (after its terminator: for a block being filled)."""
        return Builder(self, ir.InsertionPoint(block), loc)

    # -- edits ---------------------------------------------------------------------

    def inserted(
        self, op: ir.Operation, ip: ir.InsertionPoint, source: ir.Operation | None = None
    ) -> None:
        """Tell the listeners of `op`, just built at `ip` (by a `Builder`; as a copy of
        `source`, if not None)."""
        if self.listeners:
            key = ir.op_key(op)
            copied = ir.op_key(source) if source is not None else None
            for listener in self.listeners:
                listener.op_created(op, key, ip, copied)

    def erase(self, op: ir.Operation) -> None:
        """Erase `op` (listeners hear of it as one op, its nested ops unlisted)."""
        if self.listeners:
            key = ir.op_key(op)
            for listener in self.listeners:
                listener.op_erased(op, key)
        op.erase()

    def set_attributes(self, op: ir.Operation, values: dict[str, ir.Attribute]) -> bool:
        """Set attributes of `op`; whether that changed any."""
        attributes = op.attributes
        changed = False
        for name, value in values.items():
            if name not in attributes or attributes[name] != value:
                attributes[name] = value
                changed = True
        if changed:
            self._modified(op)
        return changed

    def drop_attributes(self, op: ir.Operation, names: Sequence[str]) -> bool:
        """Drop attributes of `op`; whether it had any."""
        attributes = op.attributes
        present = [name for name in names if name in attributes]
        for name in present:
            del attributes[name]
        if present:
            self._modified(op)
        return bool(present)

    def _modified(self, op: ir.Operation) -> None:
        if self._attribute_listeners:
            key = ir.op_key(op)
            for listener in self._attribute_listeners:
                listener.op_modified(op, key)

    def replace(self, op: ir.Operation, values: Sequence[ir.Value]) -> None:
        """Give `op`'s users `values` for its results, and erase it."""
        for result, value in zip(op.results, values, strict=True):
            result.replace_all_uses_with(value)
        self.erase(op)


# Builds ops that no analysis follows (the tracer's lowering rules, tests).
UNOBSERVED = Rewriter()


def unobserved(ip: ir.InsertionPoint, loc: ir.Location) -> Builder:
    """A builder at `ip` that no listener hears."""
    return Builder(UNOBSERVED, ip, loc)
