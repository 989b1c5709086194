"""The rewriter: every edit a pass makes goes through it.

A pass gets one `Rewriter` per run (`run(module, analyses, rewriter)`) and builds
where a `Builder` says: `rewriter.before(op)` builds right before `op` at its
location, `rewriter.at_start(block, loc)` at the top of a block, and so on. It
erases, replaces, modifies and moves ops through the rewriter too, as in MLIR's
`RewriterBase` and xDSL's `Rewriter`: `replace_all_uses`, `set_operand`,
`set_attributes`, `move_before`/`move_after`, `move_block` and `inline` (a block's
ops put before an op, one event for the whole body). The analyses that stay
current across a rewrite listen to the rewriter (`RewriterBase::Listener`): the
op index takes each op built and drops each op erased, so a pass says nothing
about where the ops it built stand.

It lives in the core, below the passes and the tracer, because the builders
(`pmapc/hlo.py`, `dialect.create_collective`) take a `Builder` and the tracer
builds through one (`unobserved`).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import NamedTuple

from pmapc import ir


class Listener:
    """What an analysis that stays current hears of a rewrite, as it happens (MLIR's
    `RewriterBase::Listener`). Each method is one event and does nothing here: a
    listener overrides the events it needs, and the rewriter tells a listener only
    of those (xDSL's listeners register a handler per event), reading an op's
    identity (`ir.op_key`) only for an event some listener hears.

    The rewriter and the op index (passes/op_index.py) are the only readers of
    identities the passes use: a pass takes an op's identity from its op-index entry
    or from these events."""

    def op_created(
        self, op: ir.Operation, key: int, ip: ir.InsertionPoint, source: int | None
    ) -> None:
        """`op` was built at `ip` (as a copy of the op whose identity is `source`, if
        not None)."""

    def op_erased(self, op: ir.Operation, key: int) -> None:
        """`op` is about to be erased."""

    def op_modified(self, op: ir.Operation, key: int) -> None:
        """An attribute or a result type of `op` changed."""

    def operand_set(self, op: ir.Operation, key: int, index: int, value: ir.Value) -> None:
        """Operand `index` of `op` is about to become `value`."""

    def uses_replaced(self, value: ir.Value, new: ir.Value) -> None:
        """Every use of `value` is about to become a use of `new`."""

    def op_moved(self, op: ir.Operation, key: int, ip: ir.InsertionPoint) -> None:
        """`op` (with the ops nested in it) is about to move to `ip`; it still stands
        where it was."""

    def block_moved(self, block: ir.Block, region: ir.Region) -> None:
        """`block` (with its ops) is about to move to the end of `region`."""

    def body_inlined(
        self, body: ir.Block, site: ir.Operation, key: int, walked: Walk | None
    ) -> None:
        """The ops of `body`, all but its terminator, are about to move right before
        `site` (whose identity is `key`): one event for the whole body (`inline`).
        `body`'s arguments have no uses left; its owner (a function, say) is left
        with nothing in it, for the caller to erase. `walked`: the caller's walk of
        that owner, if it made one (a listener that would walk it takes that)."""


class Walk(NamedTuple):
    """What one walk of an op found (`ir.walk_named(op, names)`): the names it looked
    for, and the (name, op, identity) of each op so named in it, in pre-order."""

    names: frozenset[str]
    found: list[tuple[str, ir.Operation, int]]


# The events, by their method names (a listener hears those its class overrides).
EVENTS = tuple(name for name in vars(Listener) if not name.startswith("_"))


@functools.cache
def events_heard(listener_class: type[Listener]) -> frozenset[str]:
    """The events a listener of `listener_class` hears: those the class overrides
    (read once a class: a pass run makes a keeper for each analysis it keeps)."""
    return frozenset(
        event for event in EVENTS if getattr(listener_class, event) is not getattr(Listener, event)
    )


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


# Each event's listeners, by the rewriter's field that holds them.
_HEARERS = {
    "op_created": "_created",
    "op_erased": "_erased",
    "op_modified": "_modified",
    "operand_set": "_set",
    "uses_replaced": "_replaced",
    "op_moved": "_moved",
    "block_moved": "_blocks",
    "body_inlined": "_inlined",
}


class Rewriter:
    """Hands out builders, and erases, replaces, modifies and moves ops, telling its
    listeners of every edit (its builders tell it of each op they build)."""

    # The listeners that hear each event, read on every edit (see `listen`).
    _created: tuple[Listener, ...] = ()
    _erased: tuple[Listener, ...] = ()
    _modified: tuple[Listener, ...] = ()
    _set: tuple[Listener, ...] = ()
    _replaced: tuple[Listener, ...] = ()
    _moved: tuple[Listener, ...] = ()
    _blocks: tuple[Listener, ...] = ()
    _inlined: tuple[Listener, ...] = ()

    def __init__(self, listeners: Sequence[Listener] = ()) -> None:
        self.listeners: tuple[Listener, ...] = ()
        for listener in listeners:
            self.listen(listener)

    def listen(self, listener: Listener) -> None:
        """Tell `listener` of every edit from now on (of the events it overrides)."""
        self.listeners += (listener,)
        for event in events_heard(type(listener)):
            slot = _HEARERS[event]
            setattr(self, slot, (*getattr(self, slot), listener))

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

    # -- ops built and erased ------------------------------------------------------

    def inserted(
        self, op: ir.Operation, ip: ir.InsertionPoint, source: ir.Operation | None = None
    ) -> None:
        """Tell the listeners of `op`, just built at `ip` (by a `Builder`; as a copy of
        `source`, if not None)."""
        if self._created:
            key = ir.op_key(op)
            copied = ir.op_key(source) if source is not None else None
            for listener in self._created:
                listener.op_created(op, key, ip, copied)

    def erase(self, op: ir.Operation) -> None:
        """Erase `op` (listeners hear of it as one op, its nested ops unlisted)."""
        if self._erased:
            key = ir.op_key(op)
            for listener in self._erased:
                listener.op_erased(op, key)
        op.erase()

    def replace(self, op: ir.Operation, values: Sequence[ir.Value]) -> None:
        """Give `op`'s users `values` for its results, and erase it."""
        for result, value in zip(op.results, values, strict=True):
            for listener in self._replaced:
                listener.uses_replaced(result, value)
            result.replace_all_uses_with(value)
        self.erase(op)

    # -- ops modified in place -----------------------------------------------------

    def replace_all_uses(self, value: ir.Value, new: ir.Value) -> None:
        """Make every use of `value` a use of `new` (MLIR's `replaceAllUsesWith`)."""
        for listener in self._replaced:
            listener.uses_replaced(value, new)
        value.replace_all_uses_with(new)

    def set_operand(self, op: ir.Operation, index: int, value: ir.Value) -> None:
        """Make `value` operand `index` of `op`."""
        if self._set:
            key = ir.op_key(op)
            for listener in self._set:
                listener.operand_set(op, key, index, value)
        op.operands[index] = value

    def set_attributes(self, op: ir.Operation, values: dict[str, ir.Attribute]) -> bool:
        """Set attributes of `op`; whether that changed any."""
        attributes = op.attributes
        changed = False
        for name, value in values.items():
            if name not in attributes or attributes[name] != value:
                attributes[name] = value
                changed = True
        if changed:
            self._attributes_changed(op)
        return changed

    def drop_attributes(self, op: ir.Operation, names: Sequence[str]) -> bool:
        """Drop attributes of `op`; whether it had any."""
        attributes = op.attributes
        present = [name for name in names if name in attributes]
        for name in present:
            del attributes[name]
        if present:
            self._attributes_changed(op)
        return bool(present)

    def set_result_type(self, op: ir.Operation, index: int, type_: ir.Type) -> None:
        """Make `type_` the type of result `index` of `op` (its uses must take it)."""
        ir.set_value_type(op.results[index], type_)
        self._attributes_changed(op)

    def _attributes_changed(self, op: ir.Operation) -> None:
        if self._modified:
            key = ir.op_key(op)
            for listener in self._modified:
                listener.op_modified(op, key)

    # -- ops and blocks moved ------------------------------------------------------

    def move_before(self, op: ir.Operation, anchor: ir.Operation) -> None:
        """Move `op` right before `anchor` (MLIR's `moveOpBefore`)."""
        if self._moved:
            self._moving(op, ir.InsertionPoint(anchor))
        op.move_before(anchor)

    def move_after(self, op: ir.Operation, anchor: ir.Operation) -> None:
        """Move `op` right after `anchor` (MLIR's `moveOpAfter`)."""
        if self._moved:
            self._moving(op, ir.InsertionPoint.after(anchor))
        op.move_after(anchor)

    def _moving(self, op: ir.Operation, ip: ir.InsertionPoint) -> None:
        key = ir.op_key(op)
        for listener in self._moved:
            listener.op_moved(op, key, ip)

    def move_block(self, block: ir.Block, region: ir.Region) -> None:
        """Move `block` to the end of `region` (MLIR's `inlineRegionBefore`, a block)."""
        for listener in self._blocks:
            listener.block_moved(block, region)
        block.append_to(region)

    def inline(
        self,
        body: ir.Block,
        site: ir.Operation,
        args: Sequence[ir.Value],
        walked: Walk | None = None,
    ) -> list[ir.Value]:
        """Put the ops of `body` right before `site`, with `args` for its arguments,
        and erase its terminator: the values that terminator returned (MLIR's
        `inlineBlockBefore`, the terminator taken as its inliner takes a return).
        Listeners hear the whole body move as one event (`body_inlined`), however
        many ops it holds (with `walked`, the caller's walk of `body`'s owner, if it
        made one); `body`'s owner is left for the caller to erase.

        Moving costs a Python call per op, so when `site`'s block is the only one of
        its region and holds fewer ops than `body` (a long body inlined where little
        else stands), the ops around `site` move into `body` instead, and `body`
        takes the place of `site`'s block (which goes, empty, to `body`'s region).
        """
        for argument, value in zip(body.arguments, args):
            self.replace_all_uses(argument, value)
        returned = ir.terminator(body)
        results = list(returned.operands)
        if self._inlined:
            key = ir.op_key(site)
            for listener in self._inlined:
                listener.body_inlined(body, site, key, walked)
        self.erase(returned)
        host = site.block
        if len(host.region.blocks) != 1 or len(host.operations) >= len(body.operations):
            for op in [op.operation for op in body.operations]:
                op.move_before(site)
            return results
        return self._adopt_host(body, host, site, results)

    def _adopt_host(
        self, body: ir.Block, host: ir.Block, site: ir.Operation, results: list[ir.Value]
    ) -> list[ir.Value]:
        """`inline` by moving the ops of `host` around `site` into `body`, which then
        takes `host`'s place and arguments: `results`, with `host`'s arguments
        among them as `body` adopted them."""
        around = [op.operation for op in host.operations]
        at = around.index(site)
        first = body.operations[0].operation
        for op in around[:at]:
            op.move_before(first)
        last = body.operations[len(body.operations) - 1].operation
        for op in around[at:]:
            op.move_after(last)
            last = op
        unused = len(body.arguments)
        adopted_for = {}
        for argument in list(host.arguments):
            adopted = adopted_for[argument] = body.add_argument(argument.type, argument.location)
            self.replace_all_uses(argument, adopted)
        for _ in range(unused):
            body.erase_argument(0)
        home = body.region
        body.append_to(host.region)
        host.append_to(home)
        # A body may return an argument of `host` itself (an unmapped operand passed
        # through): `host` goes with its arguments, so return the one `body` adopted.
        return [adopted_for.get(value, value) for value in results]


# Builds ops that no analysis follows (the tracer's lowering rules, tests).
UNOBSERVED = Rewriter()


def unobserved(ip: ir.InsertionPoint, loc: ir.Location) -> Builder:
    """A builder at `ip` that no listener hears."""
    return Builder(UNOBSERVED, ip, loc)
