"""The communication plan as pictures: the mesh as a grid, rows along the first axis,
columns along the others (row-major), one grid per collective with each device's
group; as text (a letter per group, a permute's target per source) or as SVG (a
rectangle per device coloured by its group, arrows for a permute). On devices of
several hosts or slices, the grid marks where neighbouring devices are on other
hosts or slices (compiler/plan_hosts.py). Each device is drawn once: time in
proportion to the devices drawn.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

import numpy as np

from pmapc.compiler import plan_hosts
from pmapc.mesh import Mesh, ReplicaGroups


class Step(Protocol):
    """What a picture draws of a collective (compiler/plan.py's Step)."""

    @property
    def op(self) -> str: ...

    @property
    def axes(self) -> tuple[str, ...] | None: ...

    @property
    def groups(self) -> ReplicaGroups: ...

    @property
    def is_permute(self) -> bool: ...


class Plan(Protocol):
    """What a picture draws of a plan (compiler/plan.py's Plan)."""

    @property
    def mesh(self) -> Mesh: ...

    @property
    def steps(self) -> Sequence[Step]: ...

    @property
    def placement(self) -> plan_hosts.Placement | None: ...


def axes_text(step: Step) -> str:
    """A collective's mesh axes as the table and the pictures name them."""
    if step.axes is None:
        return "(groups)"
    return ",".join(step.axes)


PALETTE = (
    "#4e79a7",
    "#f28e2b",
    "#e15759",
    "#76b7b2",
    "#59a14f",
    "#edc948",
    "#b07aa1",
    "#ff9da7",
    "#9c755f",
    "#bab0ac",
)
_ANSI = (44, 43, 41, 46, 42, 103, 45, 105, 100, 47)


def grid_shape(mesh: Mesh) -> tuple[int, int]:
    rows = mesh.axis_sizes[0] if mesh.axis_sizes else 1
    return rows, mesh.size // rows


def group_of_devices(step: Step, size: int) -> np.ndarray:
    """Each device's group number (-1: in no group; for a permute 0: in some pair)."""
    group_of = np.full(size, -1, dtype=np.int64)
    matrix = step.groups.matrix()
    if step.is_permute:
        group_of[matrix.reshape(-1)] = 0
        return group_of
    rows = np.broadcast_to(np.arange(len(matrix))[:, None], matrix.shape)
    members = matrix >= 0  # uneven index groups are padded with -1
    group_of[matrix[members]] = rows[members]
    return group_of


def target_of_devices(step: Step, size: int) -> np.ndarray:
    """For a permute, each device's target in its first pair as source (-1: none)."""
    target_of = np.full(size, -1, dtype=np.int64)
    pairs = step.groups.matrix()
    sources, first = np.unique(pairs[:, 0], return_index=True)
    target_of[sources] = pairs[first, 1]
    return target_of


def _title(index: int, step: Step) -> str:
    over = f" over {axes_text(step)}" if step.axes is not None else " (groups)"
    return f"{index} {step.op}{over}"


def _cell_labels(step: Step, size: int, group_of: list[int] | None) -> list[str]:
    """Each device's label: its group's letter (`group_of`: each device's group, for
    a step other than a permute), or a permute's target (`>5`)."""
    if step.is_permute:
        return [f">{t}" if t >= 0 else "." for t in target_of_devices(step, size).tolist()]
    assert group_of is not None
    names = [_group_name(group) for group in range(step.groups.count)]
    return [names[group] if group >= 0 else "." for group in group_of]


def _group_name(group: int) -> str:
    return chr(ord("A") + group) if group < 26 else str(group)


def terminal_picture(plan: Plan, color: bool = False) -> str:
    """Every collective's groups on the mesh grid, as text: a letter per group (with
    ANSI colours when `color`), or a permute's target device per source. Each
    device is labelled once: time in proportion to the devices drawn."""
    rows, columns = grid_shape(plan.mesh)
    marks = _boundaries(plan, rows, columns)
    out = [plan_hosts.PICTURE_LEGEND] if marks is not None else []
    for index, step in enumerate(plan.steps, 1):
        group_of = (
            None
            if step.is_permute and not color
            else group_of_devices(step, plan.mesh.size).tolist()
        )
        cells = [label.rjust(3) for label in _cell_labels(step, plan.mesh.size, group_of)]
        if color and group_of is not None:
            cells = [_colored(cell, group) for cell, group in zip(cells, group_of)]
        out.append(_title(index, step))
        out.extend(_grid_lines(cells, rows, columns, marks))
        out.append("")
    return "\n".join(out)


def _boundaries(plan: Plan, rows: int, columns: int):
    """Where neighbouring devices are on other hosts or slices (None: all on one)."""
    if plan.placement is None or not plan.placement.spans_hosts:
        return None
    return plan_hosts.boundaries(plan.placement, rows, columns)


def _grid_lines(cells: list[str], rows: int, columns: int, marks) -> list[str]:
    """The grid's lines, host and slice boundaries marked where `marks` has them."""
    if marks is None:
        return [
            "  " + " ".join(cells[start : start + columns])
            for start in range(0, len(cells), columns)
        ]
    across, down = marks
    lines = []
    for row in range(rows):
        line = cells[row * columns]
        for column in range(1, columns):
            line += plan_hosts.COLUMN_MARKS[across[row, column - 1]] + cells[row * columns + column]
        lines.append("  " + line)
        if row + 1 < rows and down[row].any():
            lines.append("  " + " ".join(plan_hosts.ROW_MARKS[mark] for mark in down[row]))
    return lines


def _colored(cell: str, group: int) -> str:
    if group < 0:
        return cell
    return f"\x1b[{_ANSI[group % len(_ANSI)]};30m{cell}\x1b[0m"


def svg_picture(plan: Plan, cell: int = 28) -> str:
    """Every collective's groups on the mesh grid, as an SVG document: one panel per
    collective, one `rect` per device coloured by its group, arrows for a permute."""
    rows, columns = grid_shape(plan.mesh)
    title_height, gap = 20, 16
    panel_height = title_height + rows * cell + gap
    width = max(columns * cell + 2 * gap, 320)
    height = panel_height * max(len(plan.steps), 1) + gap
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="monospace" font-size="12">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6" '
        'markerHeight="6" orient="auto"><path d="M0,0 L10,5 L0,10 z"/></marker></defs>',
        f"<title>pmapc communication plan, mesh {_escape(str(plan.mesh))}</title>",
    ]
    marks = _boundaries(plan, rows, columns)
    placement = plan.placement
    for index, step in enumerate(plan.steps, 1):
        top = (index - 1) * panel_height + gap
        group_of = group_of_devices(step, plan.mesh.size).tolist()
        parts.append(f'<g class="collective" data-index="{index}" data-op="{step.op}">')
        parts.append(f'<text x="{gap}" y="{top + 14}">{_escape(_title(index, step))}</text>')
        for device in range(plan.mesh.size):
            row, column = divmod(device, columns)
            group = group_of[device]
            fill = PALETTE[group % len(PALETTE)] if group >= 0 else "#ffffff"
            if step.is_permute:
                fill = "#dddddd" if group >= 0 else "#ffffff"
            x, y = gap + column * cell, top + title_height + row * cell
            where = (
                f'data-host="{placement.hosts[device]}" data-slice="{placement.slices[device]}" '
                if marks is not None and placement is not None
                else ""
            )
            parts.append(
                f'<rect class="device" data-device="{device}" data-group="{group}" {where}'
                f'x="{x}" y="{y}" width="{cell - 2}" height="{cell - 2}" '
                f'fill="{fill}" stroke="#333"/>'
            )
            parts.append(
                f'<text x="{x + 4}" y="{y + cell // 2 + 3}" font-size="10">{device}</text>'
            )
        if step.is_permute:
            for source, target in step.groups.matrix().tolist():
                x1, y1 = _center(source, columns, cell, gap, top + title_height)
                x2, y2 = _center(target, columns, cell, gap, top + title_height)
                parts.append(
                    f'<line class="pair" x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" '
                    'stroke="#c00" stroke-width="1.5" marker-end="url(#arrow)"/>'
                )
        if marks is not None:
            parts.extend(_svg_boundaries(marks, cell, gap, top + title_height))
        parts.append("</g>")
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def _svg_boundaries(marks, cell: int, left: int, top: int) -> list[str]:
    """A line between neighbouring devices on other hosts (`host-boundary`) or slices
    (`slice-boundary`)."""
    styles = {1: ("host-boundary", "#000", 3, ""), 2: ("slice-boundary", "#c00", 4, "6,3")}
    lines = []
    across, down = marks
    for (row, column), mark in np.ndenumerate(across):
        if mark:
            x = left + (column + 1) * cell - 1
            lines.append(_svg_line(styles[mark], x, top + row * cell, x, top + (row + 1) * cell))
    for (row, column), mark in np.ndenumerate(down):
        if mark:
            y, x = top + (row + 1) * cell - 1, left + column * cell
            lines.append(_svg_line(styles[mark], x, y, x + cell, y))
    return lines


def _svg_line(style, x1: int, y1: int, x2: int, y2: int) -> str:
    kind, color, width, dashes = style
    dash = f' stroke-dasharray="{dashes}"' if dashes else ""
    return (
        f'<line class="{kind}" x1="{x1}" y1="{y1}" x2="{x2}" y2="{y2}" stroke="{color}" '
        f'stroke-width="{width}"{dash}/>'
    )


def _center(device: int, columns: int, cell: int, left: int, top: int) -> tuple[int, int]:
    row, column = divmod(device, columns)
    return left + column * cell + cell // 2 - 1, top + row * cell + cell // 2 - 1


def _escape(text: str) -> str:
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
