"""A workflow run as the pages show it: its outcome, its steps level by
level, and the geometry of its graph (an SVG drawn by the template, so the
page needs no script for it).

A step's level is 0 when it waits for nothing, else one more than the
highest level among the steps it waits for: the graph's columns. Within a
column, steps are ordered by where the steps they wait for sit, which
keeps most edges short and uncrossed without a layout engine.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from ..protocol.plans.workflows import StepStatus, WorkflowStatus
from ..readouts import levels, ordered

# Past this many steps the graph is not drawn (the table still lists them).
MAX_DRAWN: Final = 200
# Geometry of the drawing, in SVG user units (pixels at scale 1).
NODE_W: Final = 168
NODE_H: Final = 42
GAP_X: Final = 56
GAP_Y: Final = 14
PAD: Final = 6
LABEL_CHARS: Final = 20


@dataclass(frozen=True, slots=True)
class Node:
    step: StepStatus
    x: float
    y: float
    label: str  # the step's name, cut to fit its box


@dataclass(frozen=True, slots=True)
class Edge:
    """From a step to one that waits for it: an SVG path, and the state of
    the step it starts from (a finished one colours it)."""

    path: str
    state: str
    title: str


@dataclass(frozen=True, slots=True)
class Graph:
    width: float
    height: float
    node_w: int
    node_h: int
    nodes: tuple[Node, ...]
    edges: tuple[Edge, ...]


def layout(status: WorkflowStatus) -> Graph | None:
    """Where each step's box and each edge go; None past ``MAX_DRAWN`` steps."""
    steps = status.steps
    if not steps or len(steps) > MAX_DRAWN:
        return None
    level = levels(steps)
    columns: list[list[StepStatus]] = [[] for _ in range(max(level.values()) + 1)]
    row: dict[str, float] = {}
    for s in ordered(status):
        columns[level[s.name]].append(s)
    for column in columns:

        def place(s: StepStatus) -> tuple[float, int]:
            above = [row[d] for d in s.after if d in row]
            return (sum(above) / len(above) if above else 0.0, s.job_id)

        column.sort(key=place)
        for n, s in enumerate(column):
            row[s.name] = float(n)
    where: dict[str, tuple[float, float]] = {}
    nodes = []
    for n, column in enumerate(columns):
        for s in column:
            x, y = PAD + n * (NODE_W + GAP_X), PAD + row[s.name] * (NODE_H + GAP_Y)
            where[s.name] = (x, y)
            nodes.append(Node(s, x, y, _cut(s.name)))
    edges = []
    bend = GAP_X / 2
    for s in steps.values():
        x2, top = where[s.name]
        y2 = top + NODE_H / 2  # into the middle of its left side
        for dep in s.after:
            if dep not in where:
                continue
            x1, y1 = where[dep][0] + NODE_W, where[dep][1] + NODE_H / 2
            path = f"M{x1:g},{y1:g} C{x1 + bend:g},{y1:g} {x2 - bend:g},{y2:g} {x2:g},{y2:g}"
            edges.append(Edge(path, steps[dep].state, f"{s.name} waits for {dep}"))
    tallest = max(len(c) for c in columns)
    return Graph(
        width=2 * PAD + len(columns) * NODE_W + (len(columns) - 1) * GAP_X,
        height=2 * PAD + tallest * NODE_H + (tallest - 1) * GAP_Y,
        node_w=NODE_W,
        node_h=NODE_H,
        nodes=tuple(nodes),
        edges=tuple(edges),
    )


def _cut(name: str) -> str:
    return name if len(name) <= LABEL_CHARS else name[: LABEL_CHARS - 1] + "…"
